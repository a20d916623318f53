"""Estimated starts count on what really holds the room: minimum run times, grace periods, the idle reaper's clocks,
how long jobs really run, the jobs planned ahead. Each row is a cluster, a queue and what the waiting job is told;
decisions (admissions, reservations) must be the same as on time limits alone."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import pytest

from scheduler_core.policy.cadence import PlanEvery
from scheduler_core.policy.decisions import CycleResult
from scheduler_core.policy.cycle import plan, run_cycle
from scheduler_core.policy.snapshot import MIN_RUNTIME_SAMPLES, Plan, RunTimes, Snapshot

from .builders import MIN, H, make_cluster, make_job, make_snapshot, nodes_of

MIG = "h100-mig-1g"
NOW = 10 * H


def idle(snapshot: Snapshot, since: float | None, limit: float | None = H, *, only: str = "") -> Snapshot:
    """Every running notebook (or only ``only``) reported by the reaper idle since ``since`` under ``limit``."""
    running = tuple(replace(job, idle_since=since, idle_limit_s=limit)
                    if job.request.kind.value == "notebook" and job.request.id.startswith(only) else job
                    for job in snapshot.running)
    return replace(snapshot, running=running)


def mig_pool_full(holders: int = 56, *, started: float = NOW - 2 * H, team: str = "fraud",
                  admitted: str = "nominal") -> Snapshot:
    """One MIG node (8 GPUs of 7 slices), every slice held by a notebook (12 h limits); a notebook of ``vision``
    waits."""
    snap = (make_snapshot(make_cluster().mig_block("m0", 1))
            .team("fraud", h100_mig_1g=(28, 28))
            .team("vision", h100_mig_1g=(28, 28)))
    for k in range(holders):
        snap.run(make_job(f"nb{k:02d}").team(team).kind("notebook").flavour(MIG).pods(1, 1).limit(12 * H)
                 .non_preemptible(), "m0-n00", started=started, admitted=admitted)
    snap.pending(make_job("wait").team("vision").kind("notebook").flavour(MIG).pods(1, 1).limit(12 * H)
                 .non_preemptible().submitted(NOW - MIN))
    return snap.build()


def two_nodes_busy(ratio: float | None, *, started: float = NOW - H, limit: float = 4 * H) -> Snapshot:
    """Two h100 nodes each held by an 8-GPU job of ``fraud``; a 16-GPU job of ``fraud`` waits for both."""
    snap = (make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=(32, 0))
            .run(make_job("r0").limit(limit), "b0-n00", started=started)
            .run(make_job("r1").limit(limit), "b0-n01", started=started)
            .pending(make_job("wait").pods(2, 8).submitted(NOW - MIN)))
    built = snap.build()
    if ratio is None:
        return built
    return replace(built, runtimes=RunTimes(by_team={("fraud", "batch"): (ratio,) * MIN_RUNTIME_SAMPLES}))


def outlived_most(samples: tuple[float, ...]) -> Snapshot:
    """:func:`two_nodes_busy` an hour into 4 h limits (a quarter used), with the team's recent ratios."""
    return replace(two_nodes_busy(None), runtimes=RunTimes(by_team={("fraud", "batch"): tuple(sorted(samples))}))


def borrowers_inside_min_run_time(count: int, started: float) -> Snapshot:
    """``vision`` lent its 8 GPUs of nominal: ``count`` borrowed 8-GPU jobs of ``fraud`` (started at ``started``)
    hold the only node; ``vision``'s 8-GPU job waits to reclaim."""
    snap = (make_snapshot(make_cluster().block("b0", count)).team("fraud", h100=(0, 64)).team("vision", h100=8 * count))
    for k in range(count):
        snap.run(make_job(f"b{k}").limit(8 * H), f"b0-n{k:02d}", started=started + k * 5 * MIN, admitted="borrowed")
    snap.pending(make_job("wait").team("vision").pods(count, 8).submitted(NOW - MIN))
    return snap.build()


def one_big_borrower() -> Snapshot:
    """``fraud`` borrows all 80 GPUs of ``vision``'s nominal in one gang, past its minimum run time; ``vision``
    asks for 1 GPU. The gang is far larger than the job: it is stopped only after ``reclaim_patience_s``."""
    return (make_snapshot(make_cluster().block("b0", 10)).team("fraud", h100=(0, 80)).team("vision", h100=80)
            .run(make_job("G").pods(10, 8).limit(8 * H), nodes_of("b0", 10), started=NOW - H, admitted="borrowed")
            .pending(make_job("wait").team("vision").pods(1, 1).submitted(NOW - MIN)).build())


def own_work_holds_the_nominal() -> Snapshot:
    """``fraud``'s own preemptible 8-GPU job holds its whole nominal (4 h limit); ``search`` borrows ``vision``'s
    8 GPUs for an hour; ``fraud``'s non-preemptible 8-GPU job waits (QuotaFull: it runs only within nominal).
    It gets in once the cohort can lend for the preemptible job, relabelled borrowed: when ``search`` leaves.
    (Jobs lately ran to their limits: the likely plan, where this is estimated, ends them there.)"""
    built = (make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=8).team("vision", h100=8)
             .team("search", h100=(0, 8))
             .run(make_job("own").limit(4 * H), "b0-n00", started=NOW - 10 * MIN)
             .run(make_job("b").team("search").limit(H), "b0-n01", started=NOW - 10 * MIN, admitted="borrowed")
             .pending(make_job("wait").pods(1, 8).non_preemptible().submitted(NOW - MIN)).build())
    return replace(built, runtimes=RunTimes(by_kind={"batch": (1.0,) * MIN_RUNTIME_SAMPLES}))


def borrowed_beside_the_nominal() -> Snapshot:
    """``fraud`` (nominal 8) runs a non-preemptible 8-GPU job on its nominal until 1 h from now and a 4-GPU job
    borrowed from ``vision`` until 3 h from now; its non-preemptible 8-GPU job waits (QuotaFull). The borrowed
    job does not hold the nominal: in at 1 h, as nominal, not at 3 h."""
    return (make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=(8, 8)).team("vision", h100=8)
            .run(make_job("n").limit(2 * H).non_preemptible(), "b0-n00", started=NOW - H)
            .run(make_job("b").pods(1, 4).limit(4 * H), "b0-n01", started=NOW - H, admitted="borrowed")
            .pending(make_job("wait").pods(1, 8).non_preemptible().submitted(NOW - MIN)).build())


def borrowed_this_pass() -> Snapshot:
    """``fraud`` (no nominal) has a critical, non-preemptible 4-GPU job (2 h limit) that borrows half of
    ``vision``'s 8 this pass (the cohort keeps half its nominal free) on the one node; ``vision``'s 8-GPU job,
    which fits its nominal but not the free units, then waits for its lent-out nominal, which comes back only
    when that job ends."""
    return (make_snapshot(make_cluster().block("b0", 1)).team("fraud", h100=(0, 8)).team("vision", h100=8)
            .pending(make_job("crit").team("fraud").pods(1, 4).priority("critical").non_preemptible()
                     .limit(2 * H).submitted(NOW - MIN))
            .pending(make_job("wait").team("vision").pods(1, 8).submitted(NOW - MIN)).build())


@dataclass(frozen=True)
class Case:
    snapshot: Callable[[], Snapshot]
    estimate: float | None
    note: str = ""                     # a word the estimate's note must contain ("" : no note)
    reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


CASES = {
    # Time limits are what the plan knows without history: the slice frees when a notebook reaches 12 h.
    "notebooks on time limits": Case(lambda: mig_pool_full(), NOW + 10 * H),
    # Every holder idle for 50 min under a 1 h reaper limit: the reaper frees a slice in 10 minutes.
    "idle notebooks, 50 min into a 1 h limit": Case(lambda: idle(mig_pool_full(), NOW - 50 * MIN),
                                                    NOW + 10 * MIN, note="idle reaper"),
    # Idle for 5 minutes only: it may well be used again; not counted on.
    "notebooks idle for 5 min are not counted on": Case(lambda: idle(mig_pool_full(), NOW - 5 * MIN),
                                                        NOW + 10 * H),
    # A busy kernel: the reaper reports no clock.
    "busy notebooks have no clock": Case(lambda: idle(mig_pool_full(), None, None), NOW + 10 * H),
    # One idle holder is enough for a one-slice notebook: the earliest release wins.
    "one idle holder among busy ones": Case(lambda: idle(mig_pool_full(), NOW - 40 * MIN, only="nb03"),
                                            NOW + 20 * MIN, note="1 idle notebook"),
    # Borrowed notebooks get the reaper's shorter limit (10 min): reclaimed when it runs out.
    "borrowed notebooks under the reaper's borrowed limit": Case(
        lambda: idle(mig_pool_full(team="fraud", admitted="borrowed"), NOW - 8 * MIN, 10 * MIN),
        NOW + 2 * MIN, note="idle reaper"),
    # Jobs of the team have lately used half of their limits: the nodes free at 2 h, not 4.
    "runs as long as the team's jobs lately did": Case(lambda: two_nodes_busy(0.5), NOW + H, note="lately"),
    "no history: time limits": Case(lambda: two_nodes_busy(None), NOW + 3 * H),
    # Already past its usual length: half of what its limit leaves (never now, then a minute later, ...).
    "past its usual length": Case(lambda: two_nodes_busy(0.1), NOW + 1.5 * H, note="lately"),
    # Half the team's jobs end within 0.1 of their limits, half run 0.5-0.6: the median (0.3) says the nodes free
    # 12 minutes from now, but these jobs have used 0.25 already, so only the long half speaks for them: 0.55 of
    # 4 h from their start.
    "outlived most of its team's jobs: judged by those that ran longer": Case(
        lambda: outlived_most((0.1, 0.1, 0.1, 0.1, 0.5, 0.5, 0.6, 0.6)), NOW + 1.2 * H, note="lately"),
    # Too few ran longer to say: the team's median, and past it, half of what the limit leaves.
    "too few ran longer: the usual rule": Case(
        lambda: outlived_most((0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5, 0.6)), NOW + 1.5 * H, note="lately"),
    # Reclaiming borrowers inside their 30-min minimum run time: after it, plus their grace, for all it needs.
    "borrowers inside their minimum run time": Case(
        lambda: borrowers_inside_min_run_time(3, NOW - 20 * MIN), NOW + 20 * MIN + 300.0,
        note="minimum run time of 3"),
    # Far larger than the job: not before it has waited 5 min (reclaim_patience_s), then the gang's 300 s grace;
    # never "now", then ten seconds later, then ten more.
    "a borrower far larger than the job waits out the patience and its grace": Case(
        one_big_borrower, NOW - MIN + 300.0 + 300.0, note="far larger"),
    # Its own preemptible work holds the nominal: in when the cohort can lend for that work (the borrower's
    # end at 50 min), not when the work ends (3 h 50 min).
    "a non-preemptible job gets in once its team's own work can be relabelled borrowed": Case(
        own_work_holds_the_nominal, NOW + 50 * MIN, note="lately", reason="QuotaFull"),
    # The quota clock counts the team's nominal usage, as admission does: its borrowed job (ending at 3 h)
    # stays borrowed when the nominal job ends (1 h), so the nominal is free then; reserved from then too.
    "a team's borrowed work does not hold its nominal": Case(borrowed_beside_the_nominal, NOW + H,
                                                            reason="QuotaFull"),
    # A borrower admitted in the same pass counts like one that ran before it: never "now".
    "a borrower admitted this pass holds the nominal it borrowed until it ends": Case(
        borrowed_this_pass, NOW + 2 * H, note="reclaimed", reason="WaitingForCapacity"),
    "a borrower past its minimum run time is reclaimed at once": Case(
        lambda: borrowers_inside_min_run_time(1, NOW - H), None, reason="PreemptingVictims"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_estimate(name: str) -> None:
    case = CASES[name]
    snapshot = case.snapshot()
    result = run_cycle(snapshot, NOW)
    wait = next(w for w in result.waits if w.job_id == "wait")
    if case.reason is not None:
        assert wait.reason.value == case.reason
        if case.estimate is None:
            return
    assert wait.estimated_start == pytest.approx(case.estimate)
    if case.note:
        assert case.note in wait.estimate_note
    else:
        assert wait.estimate_note == ""
    # Estimates decide nothing: the same cycle on time limits alone admits, preempts and reserves the same.
    promised = replace(snapshot, runtimes=RunTimes(),
                       running=tuple(replace(j, idle_since=None, idle_limit_s=None) for j in snapshot.running))
    plain = run_cycle(promised, NOW)
    assert (result.admits, result.preempts, result.reservations) == (plain.admits, plain.preempts,
                                                                     plain.reservations)


def test_a_reserved_job_is_told_the_likely_start_and_keeps_its_reservation() -> None:
    """A 16-GPU job reserved on two nodes whose jobs use half their limits: the reservation stays at the limits
    (backfill keeps to promises), the estimate says when it will likely start; a job planned behind it is
    estimated after its likely run, not its limit."""
    snapshot = two_nodes_busy(0.5)
    behind = make_job("behind").pods(2, 8).limit(4 * H).submitted(NOW - MIN / 2).pending()
    snapshot = replace(snapshot, pending=snapshot.pending + (behind,))
    result = run_cycle(snapshot, NOW)
    waits = {w.job_id: w.estimated_start for w in result.waits}
    assert [(r.job_id, r.start_at) for r in result.reservations][:1] == [("wait", NOW + 3 * H)]
    assert waits["wait"] == pytest.approx(NOW + H)
    assert waits["behind"] == pytest.approx(NOW + H + 0.5 * 4 * H)


def test_the_note_and_estimate_survive_a_carried_plan() -> None:
    """The controller plans estimates on a cadence (``PlanEvery``): the passes in between carry both."""
    policy = PlanEvery(run_cycle, every_s=60.0)
    snapshot = idle(mig_pool_full(), NOW - 50 * MIN)
    first = next(w for w in policy(snapshot, NOW).waits if w.job_id == "wait")
    later = next(w for w in policy(snapshot, NOW + 10.0).waits if w.job_id == "wait")
    assert (later.estimated_start, later.estimate_note) == (first.estimated_start, first.estimate_note)
    assert "idle reaper" in later.estimate_note


def test_a_job_that_arrives_between_plans_is_told_its_likely_start_at_once() -> None:
    """A job submitted after the last plan and reserved in the next pass: without a new plan it would be told only
    its reservation's start (time limits, 3 h); the pass is planned again, so it is told the likely start (1 h),
    and the decisions are those of a pass planned from scratch."""
    policy = PlanEvery(run_cycle, every_s=60.0)
    snapshot = two_nodes_busy(0.5)
    assert not policy(replace(snapshot, pending=()), NOW - 20.0).waits
    result = policy(snapshot, NOW)
    fresh = run_cycle(snapshot, NOW)
    assert {w.job_id: w.estimated_start for w in result.waits} == {"wait": pytest.approx(NOW + H)}
    assert (result.admits, result.preempts, result.reservations) == (fresh.admits, fresh.preempts,
                                                                      fresh.reservations)
    assert [r.start_at for r in result.reservations] == [NOW + 3 * H]


def test_a_pass_plans_by_itself_when_its_plan_has_not_seen_a_job_that_waits() -> None:
    """``run_cycle`` does not carry a plan that lacks a waiting job: it plans, exactly as a pass without a plan does,
    so ``PlanEvery`` runs such a pass once, not once to find the new job and again to plan it."""
    snapshot = two_nodes_busy(0.5)
    stale = Plan(made_at=NOW - 20.0, estimates={})
    assert run_cycle(replace(snapshot, plan=stale), NOW) == run_cycle(snapshot, NOW)
    calls: list[float] = []

    def counted(s: Snapshot, now: float) -> CycleResult:
        calls.append(now)
        return run_cycle(s, now)

    policy = PlanEvery(counted, every_s=60.0)
    policy(replace(snapshot, pending=()), NOW - 20.0)
    assert {w.job_id: w.estimated_start for w in policy(snapshot, NOW).waits} == {"wait": pytest.approx(NOW + H)}
    assert calls == [NOW - 20.0, NOW]


def test_a_planned_pass_returns_its_plan_and_a_carrying_pass_none() -> None:
    """The plan a pass made travels on its result (what ``PlanEvery`` carries), equal to ``cycle.plan``'s for the
    same snapshot; a pass that carried the snapshot's plan returns none, so the caller keeps the one it has."""
    snapshot = two_nodes_busy(0.5)
    planned = run_cycle(snapshot, NOW)
    assert planned.plan is not None
    assert planned.plan == plan(snapshot, NOW)
    assert planned.plan.estimates == {w.job_id: w.estimated_start for w in planned.waits}
    carried = run_cycle(replace(snapshot, plan=planned.plan), NOW + 10.0)
    assert carried.plan is None
    assert [w.estimated_start for w in carried.waits] == [w.estimated_start for w in planned.waits]
