"""``MemoryStore`` passes the Store contract suite; and what only it promises: ids that repeat under a seed."""

from __future__ import annotations

from pathlib import Path

from scheduler_core.store.base import Store
from scheduler_core.store.memory import MemoryStore

from .runtime_builders import make_spec
from .store_contract import StoreContract


class TestMemoryStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return MemoryStore()


def test_seeded_stores_give_the_same_ids_in_the_same_order() -> None:
    def ids(seed: int) -> list[str]:
        store = MemoryStore(seed=seed)
        return [store.submit(make_spec(f"j{i}").build(), user="ana", now=float(i)).id for i in range(50)]

    assert ids(7) == ids(7)
    assert ids(7) != ids(8)
