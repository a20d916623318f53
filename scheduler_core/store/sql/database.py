"""Engines and transactions for SQLite and PostgreSQL, with the settings each needs to be safe under concurrency.

SQLite: WAL (readers never block the writer), a busy timeout (a second process waits instead of failing), and
``BEGIN IMMEDIATE`` for write transactions, so two writers serialise at their first statement instead of both
reading and then deadlocking on the upgrade to a write lock. An in-memory database is one shared connection,
guarded by a lock.

PostgreSQL (psycopg 3): READ COMMITTED plus explicit row locks in the store's queries. A deadlock or serialisation
failure is retried a few times: the transaction is the unit of retry, so callers pass a function, not a block.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.pool import StaticPool

from ...errors import StoreUnavailable
from ..health import StoreHealth

T = TypeVar("T")

#: How long a SQLite writer waits for another process's transaction before giving up.
SQLITE_BUSY_TIMEOUT_S = 30.0
_RETRIES = 6
_PG_RETRYABLE = {"40001", "40P01"}  # serialization_failure, deadlock_detected
_WRITE = "shoal_write"


def is_memory_sqlite(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def make_engine(url: str, *, echo: bool = False) -> Engine:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        memory = is_memory_sqlite(url)
        if not memory and parsed.database:
            _owner_only(parsed.database)
        kwargs: dict[str, Any] = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}}
        if memory:
            kwargs["poolclass"] = StaticPool
        engine = create_engine(parsed, echo=echo, **kwargs)
        _configure_sqlite(engine, wal=not memory)
        return engine
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, echo=echo, pool_pre_ping=True, pool_size=5, max_overflow=10,
                             connect_args={"connect_timeout": 10, "application_name": "shoal"})
    raise ValueError(f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}: "
                     f"use sqlite:///path/to/shoal.db or postgresql+psycopg://user@host/db")


def _owner_only(path: str) -> None:
    """Create the SQLite file readable by its owner only (it holds token hashes and every team's jobs); SQLite
    gives its -wal and -shm files the main file's mode. An existing file is narrowed to 0600 too."""
    if path.startswith("file:"):
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's own implicit BEGIN is deferred).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if wal:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get(_WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _retryable(exc: DBAPIError) -> bool:
    if exc.connection_invalidated:
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate in _PG_RETRYABLE:
        return True
    if isinstance(exc, OperationalError):
        text = str(exc.orig).lower()
        return "database is locked" in text or "database is busy" in text
    return False


#: What SQLite and PostgreSQL say when the store cannot take writes (or answer at all) for a while: the disk is full,
#: the file is read-only or gone, the server is down or restarting. Such a request may be retried later (HTTP 503).
_OUTAGE_TEXT = ("database or disk is full", "disk i/o error", "readonly database", "unable to open database file",
                "could not connect", "connection refused", "server closed the connection", "connection timeout",
                "terminating connection", "the database system is", "no space left on device",
                "read-only transaction", "connection is closed")


def is_outage(exc: Exception) -> bool:
    """Whether a database error means "the store is unavailable now", not "this request is wrong"."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    text = str(getattr(exc, "orig", exc)).lower()
    return any(part in text for part in _OUTAGE_TEXT) or isinstance(exc, InterfaceError)


class Database:
    """An engine and the two ways to use it: ``read(fn)`` and ``write(fn)``, each one transaction.

    An outage (``is_outage``) comes out as ``StoreUnavailable`` and is noted in ``health``, so the API answers 503
    with ``Retry-After`` and ``/healthz`` says the store cannot write; the next write that succeeds clears it."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.health = StoreHealth()
        self.engine = make_engine(url, echo=echo)
        self.backend = self.engine.dialect.name
        # One shared in-memory connection must not interleave two threads' transactions.
        self._lock: threading.RLock | None = threading.RLock() if is_memory_sqlite(url) else None

    @property
    def is_postgres(self) -> bool:
        return self.backend == "postgresql"

    def read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, write=False)

    def write(self, fn: Callable[[Connection], T], *, probe: bool = False) -> T:
        """``probe``: a health probe, whose success says nothing about the writes that matter (a small one fits
        where a submission does not), so only its failure is noted."""
        return self._run(fn, write=True, probe=probe)

    @contextmanager
    def connection(self, *, write: bool = True) -> Iterator[Connection]:
        """A connection in one transaction (for migrations); no retry."""
        with self._guard(), self.engine.connect() as conn:
            if write:
                conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    def _guard(self) -> threading.RLock | nullcontext[None]:
        return self._lock if self._lock is not None else nullcontext()

    def _run(self, fn: Callable[[Connection], T], *, write: bool, probe: bool = False) -> T:
        attempt = 0
        while True:
            try:
                with self.connection(write=write) as conn:
                    result = fn(conn)
                if write and not probe:
                    self.health.succeeded()
                return result
            except DBAPIError as exc:
                attempt += 1
                if is_outage(exc):
                    self.health.failed(str(exc.orig or exc).splitlines()[0])
                    raise StoreUnavailable(f"the store cannot {'write' if write else 'read'} now: "
                                           f"{self.health.problem}") from exc
                if attempt >= _RETRIES or not _retryable(exc):
                    raise
                # Back off a little, with jitter, so two retrying transactions do not collide again.
                time.sleep(min(0.5, 0.01 * 2 ** attempt) * (0.5 + random.random()))

    def dispose(self) -> None:
        self.engine.dispose()
