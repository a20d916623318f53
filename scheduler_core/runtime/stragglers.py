"""Straggler detection: one slow rank sets the pace of a whole synchronous gang.

A rank is a straggler when each of its last ``window`` step-time reports is at least ``threshold`` times the
median of the other ranks' recent step times. Comparing with the *other* ranks keeps a two-rank gang meaningful,
and requiring every report in the window (not their mean) keeps one slow step (a data-loader hiccup, a checkpoint
flush) from condemning a node.
"""

from __future__ import annotations

import statistics
from collections import deque


class StragglerDetector:
    def __init__(self, *, threshold: float = 1.2, window: int = 5) -> None:
        if threshold <= 1.0 or window < 1:
            raise ValueError(f"threshold must be above 1 and window at least 1, got {threshold} and {window}")
        self._threshold = threshold
        self._window = window
        self._recent: dict[int, deque[float]] = {}

    def report(self, rank: int, step_time_s: float) -> None:
        self._recent.setdefault(rank, deque(maxlen=self._window)).append(step_time_s)

    def stragglers(self) -> list[int]:
        """Ranks consistently slower than their peers, slowest first."""
        full = {rank: times for rank, times in self._recent.items() if len(times) == self._window}
        if len(full) < 2:
            return []
        medians = {rank: statistics.median(times) for rank, times in full.items()}
        slow: list[tuple[float, int]] = []
        for rank, times in full.items():
            peers = statistics.median(m for other, m in medians.items() if other != rank)
            if peers > 0 and min(times) >= self._threshold * peers:
                slow.append((-medians[rank], rank))
        return [rank for _, rank in sorted(slow)]

    def forget(self) -> None:
        self._recent.clear()
