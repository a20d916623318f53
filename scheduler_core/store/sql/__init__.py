"""The SQL store: SQLite (embedded default) and PostgreSQL (production), through SQLAlchemy 2 and Alembic.

Entry points: ``open_store(url)`` (migrates to head, then returns a ``SqlStore``), ``SqlStore(url)``.
"""

from .migrate import current_revision, head_revision, open_store, upgrade
from .store import LeaseInfo, SqlStore

__all__ = ["LeaseInfo", "SqlStore", "current_revision", "head_revision", "open_store", "upgrade"]
