"""The node lifecycle's pure policy: the transition table, and ``plan`` on nodes at an instant (DESIGN §3.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from scheduler_core.model import Health
from scheduler_core.runtime.node_lifecycle import (HealthConfig, Move, NodeLook, Plan, Signal, TRANSITIONS,
                                                   next_health, plan)

R, S, D, X, B = Health.READY, Health.SUSPECT, Health.DRAINING, Health.REPAIR, Health.BURNIN

# (health, signal) → health next (None: stays, nothing written)
TABLE = [
    (R, Signal.HEARTBEAT_STALE, S), (R, Signal.GPU_ERRORS, S), (R, Signal.SLOW_RANK, S),
    (S, Signal.HEARTBEAT_STALE, None), (S, Signal.GPU_ERRORS, None),
    (S, Signal.IDLE_SUSPECT, B), (R, Signal.IDLE_SUSPECT, None),
    (B, Signal.BURNIN_PASSED, R), (B, Signal.BURNIN_FAILED, X), (B, Signal.BURNIN_TIMED_OUT, X),
    (X, Signal.BURNIN_PASSED, None), (R, Signal.BURNIN_PASSED, None),
    (B, Signal.HEARTBEAT_STALE, X), (B, Signal.GPU_ERRORS, X),
    (X, Signal.REPAIRED, B), (S, Signal.REPAIRED, B), (D, Signal.REPAIRED, B), (R, Signal.REPAIRED, None),
    (B, Signal.REPAIRED, None),
    (R, Signal.NODE_LOST, X), (S, Signal.FAILED, X), (B, Signal.FAILED, X), (X, Signal.FAILED, None),
    (R, Signal.DRAINED, D), (B, Signal.DRAINED, D), (X, Signal.DRAINED, None), (D, Signal.HEARTBEAT_STALE, None),
    (X, Signal.CLUSTER_READY, B), (D, Signal.CLUSTER_READY, R), (S, Signal.CLUSTER_READY, R),
    (R, Signal.CLUSTER_SUSPECT, S), (R, Signal.CLUSTER_CORDONED, D), (B, Signal.CLUSTER_LOST, X),
]


@pytest.mark.parametrize(("health", "signal", "expected"), TABLE, ids=[f"{h}+{s}" for h, s, _ in TABLE])
def test_transition_table(health: Health, signal: Signal, expected: Health | None) -> None:
    assert next_health(health, signal) is expected


@given(st.lists(st.sampled_from(list(Signal)), max_size=40))
def test_a_node_out_of_repair_or_suspicion_is_ready_only_after_a_passed_burnin_or_the_clusters_word(
        signals: list[Signal]) -> None:
    health = X
    for signal in signals:
        target = next_health(health, signal)
        if target is None:
            continue
        if target is R and health is not D:
            # Ready again from anything but a lifted drain needs a passed burn-in (or the backend's own recovery
            # of a suspect node it judged); never straight from repair.
            assert health is not X
            assert signal in (Signal.BURNIN_PASSED, Signal.CLUSTER_READY)
        health = target


def test_every_target_is_a_health_and_no_row_is_a_no_op() -> None:
    assert all(target is not health for (health, _), target in TRANSITIONS.items())


CONFIG = HealthConfig(heartbeat_limit_s=60.0, burnin_time_limit_s=300.0)


def look(health: Health = R, *, beat: float | None = 1000.0, busy: bool = False,
         burnin: float | None = None, held: bool = False) -> NodeLook:
    return NodeLook("n0", health, beat, busy, burnin, held)


# (case, node, now, GPU errors) → the plan
PLANS = [
    ("fresh heartbeat: nothing", look(), 1050.0, {}, Plan()),
    ("heartbeat at the limit: nothing yet", look(), 1060.0, {}, Plan()),
    ("heartbeat past the limit: suspect", look(), 1061.0, {},
     Plan((Move("n0", Signal.HEARTBEAT_STALE, "no heartbeat for 61s (limit 60s)"),))),
    ("never a heartbeat: not judged", look(beat=None), 9e9, {}, Plan()),
    ("GPU errors: suspect", look(busy=True), 1001.0, {"n0": "1 new (xid 79)"},
     Plan((Move("n0", Signal.GPU_ERRORS, "GPU errors: 1 new (xid 79)"),))),
    ("busy suspect keeps running", look(S, busy=True), 1001.0, {}, Plan()),
    ("idle suspect gets a burn-in", look(S), 1001.0, {},
     Plan((Move("n0", Signal.IDLE_SUSPECT, "idle while suspect: running a burn-in"),), ("n0",))),
    ("silent idle suspect gets a burn-in too", look(S, beat=0.0), 1001.0, {},
     Plan((Move("n0", Signal.IDLE_SUSPECT, "idle while suspect: running a burn-in"),), ("n0",))),
    ("repaired idle node: launch its burn-in", look(B), 1001.0, {}, Plan((), ("n0",))),
    ("repaired node still busy (drained, then repaired): wait", look(B, busy=True), 1001.0, {}, Plan()),
    ("burn-in running: nothing", look(B, beat=1290.0, burnin=1000.0), 1299.0, {}, Plan()),
    ("burn-in at its limit: failed", look(B, beat=1290.0, burnin=1000.0), 1300.0, {},
     Plan((Move("n0", Signal.BURNIN_TIMED_OUT, "burn-in still running after 300s (limit 300s)"),))),
    ("repair is left to the operator", look(X, beat=0.0), 9e9, {"n0": "x"}, Plan()),
    ("a suspect node the cluster holds waits for the cluster's word", look(S, held=True), 1001.0, {}, Plan()),
    ("no burn-in on a node the cluster holds", look(B, held=True), 1001.0, {}, Plan()),
]


@pytest.mark.parametrize(("node", "now", "errors", "expected"), [c[1:] for c in PLANS], ids=[c[0] for c in PLANS])
def test_plan(node: NodeLook, now: float, errors: dict[str, str], expected: Plan) -> None:
    assert plan([node], now=now, config=CONFIG, watching_since=0.0, gpu_errors=errors) == expected


def test_heartbeats_are_judged_from_when_the_scheduler_started_watching() -> None:
    """A scheduler back after an outage does not find every node silent: old heartbeats count from its start."""
    old = look(beat=0.0)
    assert plan([old], now=5059.0, config=CONFIG, watching_since=5000.0) == Plan()
    assert plan([old], now=5061.0, config=CONFIG, watching_since=5000.0).moves[0].signal is Signal.HEARTBEAT_STALE


@pytest.mark.parametrize("bad", [{"heartbeat_limit_s": 0.0}, {"burnin_time_limit_s": -1.0}, {"burnin_command": ()}])
def test_config_refuses_nonsense(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        HealthConfig(**bad)  # type: ignore[arg-type]
