"""The shape every scheduling policy has: Shoal's own ``run_cycle`` and the simulator's baselines alike."""

from __future__ import annotations

from typing import Protocol

from .decisions import CycleResult
from .snapshot import Snapshot


class Policy(Protocol):
    """A pure function of a snapshot and an instant. No I/O, no clock but ``now``, no global random state."""

    def __call__(self, snapshot: Snapshot, now: float) -> CycleResult: ...
