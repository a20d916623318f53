"""The garbage collector's settings for the two kinds of process: a long-running scheduler and a long replay.

The heap a long-running scheduler process starts with is set aside from the garbage collector once.

Start-up builds hundreds of thousands of objects that live as long as the process: imported modules, the cluster
and team config, the store's engine and caches, the web application. Python's collector rescans every one of them
on each full collection, and the first steps after a start allocate enough (a spec and a record per pending job) to
trigger several: on ``shoal bench live`` that was 90–130 ms of the first step. ``gc.freeze`` moves what exists now
into a generation the collector never scans; what the loop allocates later is collected as usual, and nothing
frozen is ever freed (it was not garbage: ``gc.collect`` ran first).

A replay (``shoal sim``) runs ten thousand scheduling passes, each allocating tens of thousands of short-lived
objects. With the default young-generation threshold (700 allocations) the collector runs thousands of times per
replay, and each run traverses the pass's objects that are still alive; their garbage is freed by reference
counting anyway (a pass's working copy holds no reference cycle, ``policy.working_copy``). A larger threshold for
the replay's duration (``fewer_young_collections``) cut the collector's time on a busy Tuesday under ``shoal`` from
5.3 s to 0.3 s with the same decisions (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations between young collections during a replay (CPython's default is 700).
REPLAY_YOUNG_THRESHOLD = 10_000


def freeze_start_up_heap() -> None:
    """Collect once, then freeze what survives. Called by the composition roots (``shoal up``,
    ``service.run``) after start-up and before the live loop's first step; never by library code."""
    gc.collect()
    gc.freeze()


@contextmanager
def fewer_young_collections(threshold: int = REPLAY_YOUNG_THRESHOLD) -> Iterator[None]:
    """Run the body with the youngest generation collected every ``threshold`` allocations (the older two every
    ten collections of the one below), then put the process's settings back. Cyclic garbage is still collected,
    only in larger batches: memory stays bounded."""
    before = gc.get_threshold()
    gc.set_threshold(threshold, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)
