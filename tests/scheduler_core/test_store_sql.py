"""``SqlStore`` passes the Store contract suite on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.store.base import Store
from scheduler_core.store.sql import SqlStore, open_store

from .sql_support import fresh_pg_database, truncate_all
from .store_contract import StoreContract


class TestSqliteStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return open_store(f"sqlite:///{tmp_path}/shoal.db")

    def close_store(self, store: Store) -> None:
        assert isinstance(store, SqlStore)
        store.dispose()


class TestSqliteMemoryStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return open_store("sqlite://")

    def close_store(self, store: Store) -> None:
        assert isinstance(store, SqlStore)
        store.dispose()


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """One migrated database for the module; each test empties it (migrating per test would be slow)."""
    with fresh_pg_database() as url:
        open_store(url).dispose()
        yield url


@pytest.mark.postgres
class TestPostgresStore(StoreContract):
    url: str

    @pytest.fixture(autouse=True)
    def _database(self, pg_database: str) -> None:
        truncate_all(pg_database)
        self.url = pg_database

    def make_store(self, tmp_path: Path) -> Store:
        return SqlStore(self.url)

    def close_store(self, store: Store) -> None:
        assert isinstance(store, SqlStore)
        store.dispose()
