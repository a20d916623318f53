"""The heap a long-running scheduler process starts with, set aside from the garbage collector once.

Start-up builds hundreds of thousands of objects that live as long as the process: imported modules, the cluster
and team config, the store's engine and caches, the web application. Python's collector rescans every one of them
on each full collection, and the first steps after a start allocate enough (a spec and a record per pending job) to
trigger several: on ``shoal bench live`` that was 90–130 ms of the first step. ``gc.freeze`` moves what exists now
into a generation the collector never scans; what the loop allocates later is collected as usual, and nothing
frozen is ever freed (it was not garbage: ``gc.collect`` ran first).
"""

from __future__ import annotations

import gc


def freeze_start_up_heap() -> None:
    """Collect once, then freeze what survives. Called by the composition roots (``shoal up``,
    ``service.run``) after start-up and before the live loop's first step; never by library code."""
    gc.collect()
    gc.freeze()
