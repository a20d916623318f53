"""Where Shoal keeps its state, as every store-side command sees it: ``--state-dir`` and ``--db``.

``shoal up``, ``shoal token create``, ``shoal nodes fail`` … all take the same two options, so one ``--state-dir``
(or ``SHOAL_STATE_DIR``, default ``./.shoal``) names one installation. ``--db`` (or ``SHOAL_DB``) overrides the
database, e.g. ``postgresql+psycopg://shoal@db/shoal``; by default it is SQLite in the state directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ..store.sql import SqlStore

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_STATE_DIR = ".shoal"


def state_options(fn: F) -> F:
    fn = click.option("--db", "db_url", envvar="SHOAL_DB", default=None, metavar="URL",
                      help="Database URL (default: SQLite in the state directory; env SHOAL_DB).")(fn)
    fn = click.option("--state-dir", envvar="SHOAL_STATE_DIR", default=DEFAULT_STATE_DIR, show_default=True,
                      type=click.Path(file_okay=False, path_type=Path),
                      help="Where Shoal keeps its database, logs and checkpoints (env SHOAL_STATE_DIR).")(fn)
    return fn


def executor_dir(state_dir: Path) -> Path:
    """Where the local executor keeps its pods, logs and work directories (``shoal up`` and the scheduler-only
    runner alike), so ``shoal nodes fail`` finds the pods of a node."""
    return state_dir / "executor"


def database_url(state_dir: Path, db_url: str | None) -> str:
    if db_url:
        return db_url
    return f"sqlite:///{(state_dir / 'shoal.db').resolve()}"


def open_state(state_dir: Path, db_url: str | None, *, create: bool = False) -> SqlStore:
    """The store of this installation. Without ``create``, a missing SQLite file is a usage error rather than a
    new empty database: a typo in ``--state-dir`` should not silently start from nothing."""
    from ..store.sql import open_store

    if not db_url:
        path = state_dir / "shoal.db"
        if not create and not path.exists():
            raise click.UsageError(f"no Shoal state in {state_dir}/ (no shoal.db): start 'shoal up' first, or "
                                   f"pass the --state-dir (or --db) that 'shoal up' uses")
        state_dir.mkdir(parents=True, exist_ok=True)
    return open_store(database_url(state_dir, db_url))
