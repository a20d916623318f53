"""The reaper's judge: is this notebook server idle? A pure function of what was observed and the time.

A server is idle only when **every** signal has been quiet for longer than the limit: the hub's activity (the
browser, the API), its kernels' activity, and its GPU. A kernel that is executing right now (``busy``, or still
``starting``) keeps the server whatever the clocks say: a long training cell sends no activity while it runs. When
the server cannot be asked about its kernels the answer is "keep": a reaper that is not sure does nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..progress import format_wait

BUSY_KERNEL_STATES = frozenset({"busy", "starting"})


@dataclass(frozen=True, slots=True)
class KernelActivity:
    id: str
    execution_state: str
    last_activity: float | None


@dataclass(frozen=True, slots=True)
class ServerActivity:
    """What the reaper saw of one server. Times are epoch seconds; ``None`` means never (or not known)."""

    user: str
    server_name: str
    started: float | None
    hub_last_activity: float | None
    kernels: tuple[KernelActivity, ...] | None   # None: the server did not answer
    gpu_utilization: float | None = None         # percent, now; None: no figure
    gpu_last_busy: float | None = None           # last time the GPU was seen busy


@dataclass(frozen=True, slots=True)
class Verdict:
    """``last_activity``: the latest of the signals when they were all read (``None``: a kernel is busy, or the
    server did not answer); the scheduler is told it, so a notebook waiting for the slice knows when the
    reaper would free it. ``busy``: a kernel or the GPU is at work now (no idle clock runs)."""

    idle: bool
    reason: str            # one line, shown to the user when the server is stopped
    idle_for: float = 0.0
    last_activity: float | None = None
    busy: bool = False


def is_idle(activity: ServerActivity, now: float, limit: float, gpu_busy_percent: float = 5.0, *,
            on_borrowed: bool = False) -> Verdict:
    """Whether to reap the server now, and why (or why not) in words a user understands. ``on_borrowed``: the
    notebook runs on slices its team borrowed, and ``limit`` is the shorter one for those (the reason says so)."""
    busy = [k.id for k in activity.kernels or () if k.execution_state in BUSY_KERNEL_STATES]
    if busy:
        return Verdict(False, f"kernel {busy[0]} is busy", busy=True)
    if activity.kernels is None:
        return Verdict(False, "the server did not say what its kernels are doing")
    if activity.gpu_utilization is not None and activity.gpu_utilization >= gpu_busy_percent:
        return Verdict(False, f"GPU busy ({activity.gpu_utilization:.0f} %)", busy=True)
    signals = {
        "hub": activity.hub_last_activity,
        "kernel": max((k.last_activity for k in activity.kernels if k.last_activity is not None), default=None),
        "GPU": activity.gpu_last_busy,
    }
    latest = max([t for t in signals.values() if t is not None] + [activity.started or 0.0])
    idle_for = now - latest
    if idle_for <= limit:
        newest = max(signals, key=lambda name: signals[name] or 0.0)
        return Verdict(False, f"active {format_wait(idle_for)} ago ({newest})", idle_for, last_activity=latest)
    since = time.strftime("%H:%M", time.localtime(latest)) if latest else "its start"
    return Verdict(True, f"idle for {format_wait(idle_for).removeprefix('about ')}: no hub, kernel or GPU "
                         f"activity since {since} (limit {format_wait(limit).removeprefix('about ')}"
                         f"{' on slices borrowed from another team' if on_borrowed else ''})", idle_for,
                   last_activity=latest)
