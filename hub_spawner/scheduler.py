"""The spawner's one seam to the scheduler: submit a notebook job, read it back, cancel it.

``NotebookScheduler`` is small on purpose, so tests can run the spawner against a real subclass with behaviour
(``tests/hub_spawner/fakes.py``) and the real one (``hub_spawner.shoal_client``) is a thin adapter over the client
SDK. Everything the spawner shows the user comes from ``NotebookJob``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping

from scheduler_core.model import JobSpec

#: Job states that hold a slice (the scheduler's ``JobState`` values).
HOLDING = frozenset({"ADMITTED", "RUNNING", "TERMINATING"})
FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"})


@dataclass(frozen=True, slots=True)
class NotebookJob:
    """What the spawner knows of its job: the scheduler's latest answer, flattened."""

    id: str
    state: str
    team: str = ""
    flavour: str = ""
    reason: str | None = None          # why it waits (QuotaFull, WaitingForCapacity, ...)
    reason_message: str = ""           # the scheduler's one-line explanation of ``reason``
    queue_position: int | None = None  # 1 = next in its team's queue
    estimated_start: float | None = None
    node: str | None = None            # where it was placed, once admitted
    admitted_as: str | None = None     # "nominal" (the team's guaranteed quota) or "borrowed" (lent by others)
    devices: tuple[str, ...] = ()      # CUDA_VISIBLE_DEVICES entries of the grant (MIG-… UUIDs or GPU ids)
    exit_code: int | None = None
    message: str = ""                  # the scheduler's last word on it (why it ended, for example)
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def holds_slice(self) -> bool:
        return self.state in HOLDING

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


@dataclass(frozen=True, slots=True)
class RoomNow:
    """What a team could start right now, per flavour: the most units free on one ready node, and the units its
    quota still allows (nominal + borrowing limit - held)."""

    largest_free: Mapping[str, int] = field(default_factory=dict)
    quota_room: Mapping[str, int] = field(default_factory=dict)


class SchedulerRefused(Exception):
    """The scheduler refused a request (bad spec, no quota, not your team): ``code`` is its machine-readable
    error code and ``fields`` its per-field messages."""

    def __init__(self, code: str, message: str, fields: Mapping[str, str] | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields = dict(fields or {})
        self.status = status


class SchedulerUnavailable(Exception):
    """The scheduler could not be reached; worth retrying, never the user's fault."""


class NotebookScheduler(ABC):
    """Async, because the spawner runs on the hub's event loop. Implementations must be safe to call from
    several coroutines of one loop at once (``start`` and ``progress`` poll the same job)."""

    @abstractmethod
    async def submit(self, spec: JobSpec, *, idempotency_key: str) -> NotebookJob:
        """Queue ``spec``; submitting the same key twice returns the first job. Raises ``SchedulerRefused``."""

    @abstractmethod
    async def get(self, job_id: str) -> NotebookJob: ...

    @abstractmethod
    async def cancel(self, job_id: str, *, reason: str = "") -> NotebookJob:
        """Stop the job and release its slice; ``reason`` is kept as the job's message. Harmless if finished."""

    async def room_now(self, team: str) -> RoomNow:
        """Free units and quota room per flavour for ``team`` (the spawn page names other profiles that could
        start now). Default: nothing known."""
        return RoomNow()

    async def report_idle_clock(self, job_id: str, last_activity: float | None, idle_limit_s: float | None) -> None:
        """Tell the scheduler a running notebook's idle clock (``None``, ``None``: busy); the idle reaper calls
        it after judging each server it keeps. Default: the scheduler is not told."""

    async def node_gpu_utilization(self, node: str) -> float | None:
        """The executor's latest GPU utilisation figure for ``node`` (percent), or ``None`` if it reports none."""
        return None

    async def close(self) -> None:
        """Release connections."""
