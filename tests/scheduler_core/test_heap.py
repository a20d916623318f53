"""The collector's settings: start-up's live objects leave its scans (its garbage freed first); a replay
collects less often."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scheduler_core.runtime.heap import fewer_young_collections, freeze_start_up_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_live_objects_are_frozen_and_cycles_of_garbage_are_freed_first(unfrozen: None) -> None:
    kept = _Node()
    garbage_a, garbage_b = _Node(), _Node()
    garbage_a.other, garbage_b.other = garbage_b, garbage_a   # a cycle: only the collector frees it
    gone = weakref.ref(garbage_a)
    del garbage_a, garbage_b
    freeze_start_up_heap()
    assert gone() is None
    assert gc.get_freeze_count() > 0
    assert not any(obj is kept for obj in gc.get_objects())  # frozen objects are outside every generation
    after = _Node()
    assert any(obj is after for obj in gc.get_objects())     # what the loop allocates later is collected as usual


def test_a_replay_collects_less_often_and_puts_the_settings_back() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with fewer_young_collections(5_000):
            assert gc.get_threshold()[0] == 5_000
            raise RuntimeError("the replay failed")
    assert gc.get_threshold() == before
