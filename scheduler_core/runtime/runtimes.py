"""How long jobs really run against their time limits: the history behind ``Snapshot.runtimes``.

Users ask for generous limits (a limit is a promise the scheduler enforces, so they pad it), and a plan of
estimated starts made of limits is hours late. What predicts a job's run best is how long its owner's recent
jobs of the same kind ran (Tsafrir, Etsion and Feitelson, "Backfilling using system-generated predictions rather
than user runtime estimates", 2007). So every job that ends on its own — it succeeded, or a notebook its user or
the reaper stopped — adds ``held / time limit`` to its team's and its kind's recent samples, and estimates use
the median of the last ``TEAM_SAMPLES`` (per team and kind) or, with fewer than ``MIN_SAMPLES`` of those, of the
last ``KIND_SAMPLES`` of its kind. Jobs that were preempted, failed or restarted say nothing of their length.

Kept in memory: after a restart the history starts again from the time limits, and learns within the hour.
"""

from __future__ import annotations

from collections import deque
from statistics import median

from ..policy.snapshot import MIN_RUNTIME_SAMPLES, RunTimes

TEAM_SAMPLES = 32
KIND_SAMPLES = 256
MIN_SAMPLES = MIN_RUNTIME_SAMPLES


class RunTimeHistory:
    """Recent ``held / limit`` ratios. Not thread-safe: the controller's loop owns it."""

    def __init__(self) -> None:
        self._team: dict[tuple[str, str], deque[float]] = {}
        self._kind: dict[str, deque[float]] = {}
        self._snapshot: RunTimes | None = RunTimes()

    def observe(self, team: str, kind: str, held_s: float, limit_s: float) -> None:
        """A job of ``team`` and ``kind`` that ended on its own held its units ``held_s`` of ``limit_s``."""
        if limit_s <= 0 or held_s < 0:
            return
        ratio = min(held_s / limit_s, 1.0)
        self._team.setdefault((team, kind), deque(maxlen=TEAM_SAMPLES)).append(ratio)
        self._kind.setdefault(kind, deque(maxlen=KIND_SAMPLES)).append(ratio)
        self._snapshot = None

    def runtimes(self) -> RunTimes:
        """The medians as the policy reads them (rebuilt only after a new sample)."""
        if self._snapshot is None:
            self._snapshot = RunTimes(
                by_team={key: median(values) for key, values in self._team.items() if len(values) >= MIN_SAMPLES},
                by_kind={kind: median(values) for kind, values in self._kind.items() if len(values) >= MIN_SAMPLES},
                team_samples={key: tuple(sorted(values)) for key, values in self._team.items()},
                kind_samples={kind: tuple(sorted(values)) for kind, values in self._kind.items()})
        return self._snapshot
