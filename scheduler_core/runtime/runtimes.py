"""How long jobs really run against their time limits: the history behind ``Snapshot.runtimes``.

Users ask for generous limits (a limit is a promise the scheduler enforces, so they pad it), and a plan of
estimated starts made of limits is hours late. What predicts a job's run best is how long its owner's recent
jobs of the same kind ran (Tsafrir, Etsion and Feitelson, "Backfilling using system-generated predictions rather
than user runtime estimates", 2007). So every job that ends on its own — it succeeded, or a notebook its user or
the reaper stopped — adds ``held / time limit`` to its team's and its kind's recent samples, and estimates use
the median of the last ``TEAM_SAMPLES`` (per team and kind) or, with fewer than ``MIN_SAMPLES`` of those, of the
last ``KIND_SAMPLES`` of its kind (for a running job, of those that ran at least as long as it has so far). Jobs that were preempted, failed or restarted say nothing of their length.

Kept in memory: after a restart the history starts again from the time limits, and learns within the hour.
"""

from __future__ import annotations

from collections import deque
from typing import TypeVar

from ..policy.snapshot import MIN_RUNTIME_SAMPLES, RunTimes

TEAM_SAMPLES = 32
KIND_SAMPLES = 256
MIN_SAMPLES = MIN_RUNTIME_SAMPLES

K = TypeVar("K")


class RunTimeHistory:
    """Recent ``held / limit`` ratios. Not thread-safe: the controller's loop owns it."""

    def __init__(self) -> None:
        self._team: dict[tuple[str, str], deque[float]] = {}
        self._kind: dict[str, deque[float]] = {}
        #: Each key's samples sorted, kept per key: a new sample re-sorts only its own two keys (the simulator
        #: asks for the snapshot after every job that ends, among hundreds of keys).
        self._team_sorted: dict[tuple[str, str], tuple[float, ...]] = {}
        self._kind_sorted: dict[str, tuple[float, ...]] = {}
        self._snapshot: RunTimes | None = RunTimes()

    def observe(self, team: str, kind: str, held_s: float, limit_s: float) -> None:
        """A job of ``team`` and ``kind`` that ended on its own held its units ``held_s`` of ``limit_s``."""
        if limit_s <= 0 or held_s < 0:
            return
        ratio = min(held_s / limit_s, 1.0)
        _add(self._team, self._team_sorted, (team, kind), ratio, TEAM_SAMPLES)
        _add(self._kind, self._kind_sorted, kind, ratio, KIND_SAMPLES)
        self._snapshot = None

    def runtimes(self) -> RunTimes:
        """The sorted samples as the policy reads them (new mappings only after a new sample)."""
        if self._snapshot is None:
            self._snapshot = RunTimes(by_team=dict(self._team_sorted), by_kind=dict(self._kind_sorted))
        return self._snapshot


def _add(history: dict[K, deque[float]], ordered: dict[K, tuple[float, ...]], key: K, ratio: float,
         keep: int) -> None:
    """Add ``ratio`` to ``key``'s last ``keep`` samples, and its sorted samples once it has enough to speak."""
    samples = history.get(key)
    if samples is None:
        samples = history[key] = deque(maxlen=keep)
    samples.append(ratio)
    if len(samples) >= MIN_SAMPLES:
        ordered[key] = tuple(sorted(samples))
