"""Whether the store can take writes now, as the last reads and writes found it: for ``/healthz`` and ``/readyz``.

Passive on purpose: every API request and every controller step writes, so the last outcome is at most a tick old,
and a health probe never adds load on a store that is struggling. A failure is remembered for ``hold_s``: a nearly
full disk takes a small write now and then, and one lucky heartbeat must not declare an outage over while
submissions still fail. ``/readyz`` also asks the store itself (a probe write), which can only make things worse.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: How long after the last failed write the store still counts as unwritable (a success must come after that).
HOLD_S = 5.0


@dataclass(frozen=True, slots=True)
class HealthView:
    writable: bool
    problem: str          # "" when writes succeed
    since: float | None   # when the current problem was first seen


class StoreHealth:
    """Thread safe: the API's worker threads and the controller's note outcomes concurrently."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 hold_s: float = HOLD_S) -> None:
        self._clock = clock
        self._wall = wall
        self._hold_s = hold_s
        self._lock = threading.Lock()
        self._problem = ""
        self._since: float | None = None
        self._failed_at: float | None = None

    def succeeded(self) -> None:
        with self._lock:
            if self._failed_at is not None and self._clock() - self._failed_at >= self._hold_s:
                self._problem, self._since, self._failed_at = "", None, None

    def failed(self, problem: str) -> None:
        with self._lock:
            self._problem = problem
            self._failed_at = self._clock()
            if self._since is None:
                self._since = self._wall()

    @property
    def problem(self) -> str:
        with self._lock:
            return self._problem

    def view(self) -> HealthView:
        with self._lock:
            return HealthView(writable=not self._problem, problem=self._problem, since=self._since)
