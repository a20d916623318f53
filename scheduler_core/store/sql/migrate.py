"""Schema migrations, run in code: ``open_store(url)`` brings any database to the newest revision, keeping its data.

Alembic is configured programmatically from the package's own ``scheduler_core/migrations`` directory, so it works
from an installed wheel with no ``alembic.ini``. Two processes starting at once on a new database do not both
migrate: PostgreSQL takes an advisory lock, SQLite's ``BEGIN IMMEDIATE`` serialises them; the second then finds
the schema at head and does nothing.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from ... import migrations
from .database import Database
from .store import SqlStore

_MIGRATE_LOCK_KEY = 0x5_40A1_DB


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    return config


def upgrade(db: Database, revision: str = "head") -> None:
    """Migrate ``db`` to ``revision`` in one transaction (DDL is transactional on both backends)."""
    with db.connection() as conn:
        if db.is_postgres:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATE_LOCK_KEY})
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(db: Database) -> str | None:
    with db.connection(write=False) as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships no migrations"
    return head


def open_store(url: str, *, seed: int | None = None) -> SqlStore:
    """A ``SqlStore`` on ``url`` with its schema migrated to the newest revision (created if empty)."""
    store = SqlStore(url, seed=seed)
    try:
        store.migrate()
    except BaseException:
        store.dispose()
        raise
    return store
