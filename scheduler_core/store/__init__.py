"""State behind one interface (``Store``): in memory for the simulator, SQL (SQLite, PostgreSQL) for the service."""

from .base import Store
from .records import CheckpointRecord, Event, JobRecord, JobState, NodeRecord, UsageRecord

__all__ = ["CheckpointRecord", "Event", "JobRecord", "JobState", "NodeRecord", "Store", "UsageRecord"]
