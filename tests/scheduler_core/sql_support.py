"""Fresh SQL databases for tests: a SQLite file under ``tmp_path``, or a uniquely named PostgreSQL database on the
server ``tests/services/postgres.sh`` starts (``SHOAL_TEST_PG_URL``), dropped afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from scheduler_core.store.sql.schema import SCHEDULER_LEASE, metadata

PG_ENV = "SHOAL_TEST_PG_URL"


def pg_admin_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: start PostgreSQL with `bash tests/services/postgres.sh start && "
                    f"source tests/services/postgres.env` (make test does this)")
    return url


@contextmanager
def fresh_pg_database(prefix: str = "shoal_t") -> Iterator[str]:
    """A new, empty database on the test server; its URL. Dropped (connections and all) on exit."""
    admin = make_url(pg_admin_url())
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def truncate_all(url: str) -> None:
    """Empty every table of a migrated database and re-seed the lease row: a fresh store, minus the migration."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            names = ", ".join(f'"{table.name}"' for table in metadata.sorted_tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
            conn.execute(text("INSERT INTO lease (name, holder, epoch, expires_at) VALUES (:n, NULL, 0, NULL)"),
                         {"n": SCHEDULER_LEASE})
    finally:
        engine.dispose()
