"""The reaper's judge: idle only when hub, kernels and GPU have all been quiet longer than the limit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hub_spawner.reaper import KernelActivity, ServerActivity, is_idle

NOW = 1_800_000_000.0
HOUR = 3600.0


def server(**changes: object) -> ServerActivity:
    """A server started 3 h ago, quiet everywhere for 2 h: idle unless a case changes that."""
    base = ServerActivity(user="alice", server_name="", started=NOW - 3 * HOUR,
                          hub_last_activity=NOW - 2 * HOUR,
                          kernels=(KernelActivity("k1", "idle", NOW - 2 * HOUR),),
                          gpu_utilization=0.0, gpu_last_busy=None)
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("case, activity, idle, why", [
    ("quiet everywhere", server(), True, "idle for 2 h 00 min"),
    ("hub active recently", server(hub_last_activity=NOW - 600), False, "(hub)"),
    ("kernel active recently", server(kernels=(KernelActivity("k1", "idle", NOW - 60),)), False, "(kernel)"),
    ("GPU busy a while ago, within the limit", server(gpu_last_busy=NOW - 1800), False, "(GPU)"),
    ("GPU busy now", server(gpu_utilization=87.0), False, "GPU busy (87 %)"),
    ("GPU below the threshold", server(gpu_utilization=2.0), True, "idle for"),
    ("no GPU figure at all", server(gpu_utilization=None), True, "idle for"),
    ("a busy kernel, all clocks old", server(kernels=(KernelActivity("k1", "idle", NOW - 5 * HOUR),
                                                      KernelActivity("k2", "busy", NOW - 5 * HOUR))),
     False, "kernel k2 is busy"),
    ("a starting kernel", server(kernels=(KernelActivity("k3", "starting", None),)), False, "kernel k3 is busy"),
    ("kernels unknown", server(kernels=None), False, "did not say"),
    ("no kernels, hub quiet", server(kernels=()), True, "idle for"),
    ("just started, never used", server(started=NOW - 300, hub_last_activity=None, kernels=()), False, "ago"),
    ("never any activity since an old start", server(hub_last_activity=None, kernels=()), True,
     "idle for 3 h 00 min"),
])
def test_is_idle(case: str, activity: ServerActivity, idle: bool, why: str) -> None:
    verdict = is_idle(activity, NOW, HOUR)
    assert verdict.idle is idle, case
    assert why in verdict.reason, (case, verdict.reason)


def test_the_limit_is_exclusive_and_the_reason_says_what_was_quiet() -> None:
    at_limit = server(hub_last_activity=NOW - HOUR, kernels=(), started=NOW - HOUR)
    assert not is_idle(at_limit, NOW, HOUR).idle
    verdict = is_idle(at_limit, NOW + 1, HOUR)
    assert verdict.idle and "no hub, kernel or GPU activity since" in verdict.reason and "limit 1 h" in verdict.reason
