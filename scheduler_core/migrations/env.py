"""Alembic environment for the SQL store.

The service calls Alembic with an open connection in ``config.attributes["connection"]`` (see
``scheduler_core.store.sql.migrate``), so migrations run in the caller's transaction and under its lock. From the
command line, pass the database with ``-x url=...`` (or ``$SHOAL_DB_URL``).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from scheduler_core.store.sql.database import Database
from scheduler_core.store.sql.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, compare_type=True,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("SHOAL_DB_URL")
    if not url:
        raise SystemExit("give the database: alembic ... -x url=sqlite:///shoal.db (or set SHOAL_DB_URL)")
    return url


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
    else:
        database = Database(_url())
        try:
            with database.connection() as conn:
                _run(conn)
        finally:
            database.dispose()
