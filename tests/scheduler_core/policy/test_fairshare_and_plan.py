"""Decayed usage and dominant shares (what orders teams), and the plan that gives every waiting job an
estimated start, carried in the snapshot or made by the cycle itself."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scheduler_core.policy.cycle import plan, run_cycle
from scheduler_core.policy.fairshare import accumulate, decay, dominant_share
from scheduler_core.policy.snapshot import Plan, Snapshot

from .builders import H, make_cluster, make_job, make_snapshot


@pytest.mark.parametrize(("value", "elapsed", "half_life", "expected"), [
    (100.0, 0.0, 10.0, 100.0),
    (100.0, 10.0, 10.0, 50.0),
    (100.0, 30.0, 10.0, 12.5),
    (100.0, 5.0, 0.0, 0.0),        # no memory at all
])
def test_decay(value: float, elapsed: float, half_life: float, expected: float) -> None:
    assert decay(value, elapsed, half_life) == pytest.approx(expected)


def test_accumulate_is_the_same_in_one_step_or_many() -> None:
    rates = {"gpu": 8.0, "cpu": 192.0, "memory": 2048.0}
    once = accumulate({"gpu": 1e5}, rates, 3600.0, 7200.0)
    stepwise = {"gpu": 1e5}
    for _ in range(60):
        stepwise = accumulate(stepwise, rates, 60.0, 7200.0)
    assert stepwise == pytest.approx(once)
    # A steady rate for ever converges to rate × half-life / ln 2.
    assert accumulate({}, {"gpu": 1.0}, 1e9, 7200.0)["gpu"] == pytest.approx(7200.0 / math.log(2))


def test_dominant_share_takes_the_largest_resource_and_divides_by_weight() -> None:
    capacity = (100.0, 1000.0, 10000.0)
    assert dominant_share((10.0, 500.0, 0.0), {}, capacity, 1.0, 3600.0) == pytest.approx(0.5)
    assert dominant_share((10.0, 500.0, 0.0), {}, capacity, 2.0, 3600.0) == pytest.approx(0.25)
    # History counts as the steady allocation that would have produced it.
    history = {"gpu": 20.0 * 3600.0 / math.log(2)}
    assert dominant_share((0.0, 0.0, 0.0), history, capacity, 1.0, 3600.0) == pytest.approx(0.2)


def _queue() -> Snapshot:
    return (make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=16)
            .run(make_job("r").pods(2, 8).limit(2 * H), ["b0-n00", "b0-n01"], started=0.0)
            .pending(make_job("a").pods(1, 8).limit(H), make_job("b").pods(2, 8).submitted(1),
                     make_job("c").pods(1, 8).submitted(2)).build())


def test_every_waiting_job_gets_an_estimate_from_the_plan_made_in_the_cycle() -> None:
    result = run_cycle(_queue(), 0.0)
    # a at 2 h when r ends; b (both nodes, and all of the team's quota) once a is done; c behind b, which
    # it would delay if it ran beside a.
    assert {w.job_id: w.estimated_start for w in result.waits} == {"a": 2 * H, "b": 3 * H, "c": 7 * H}


def test_a_carried_plan_gives_the_estimates_and_a_plan_that_misses_a_waiting_job_is_made_again() -> None:
    snapshot = _queue()
    made = plan(snapshot, 0.0)
    assert made.made_at == 0.0 and made.estimates == {"a": 2 * H, "b": 3 * H, "c": 7 * H}
    newcomer = make_job("d").pods(1, 8).submitted(3).pending()
    known = {"a": 100.0, "b": 3 * H, "c": None, "d": 5 * H}
    carried = replace(snapshot, plan=Plan(made_at=0.0, estimates=known), pending=snapshot.pending + (newcomer,))
    # Without reservations every estimate comes from the plan (never before now; None: no start in sight).
    unreserved = replace(carried, config=replace(carried.config, max_reservations=0))
    waits = {w.job_id: w.estimated_start for w in run_cycle(unreserved, 600.0).waits}
    assert waits == {"a": 600.0, "b": 3 * H, "c": None, "d": 5 * H}
    # A job holding a reservation this cycle gets the reservation's start instead.
    waits = {w.job_id: w.estimated_start for w in run_cycle(carried, 600.0).waits}
    assert waits["a"] == 2 * H
    # A plan that has not seen a job that waits (a newcomer) is not carried: the pass plans, as with no plan.
    unseen = replace(unreserved, plan=Plan(made_at=0.0, estimates={"a": 100.0, "b": 3 * H, "c": None}))
    assert run_cycle(unseen, 600.0) == run_cycle(replace(unseen, plan=None), 600.0)
