"""Preemption by cost with fill-back, minimum run time, time limits, reservations with backfill that never delays
them, costed preemption for a far-off reservation, and defragmentation — as whole decision lists."""

from __future__ import annotations

from dataclasses import replace

from typing import Any, Callable, NamedTuple

import pytest

from scheduler_core.policy.cycle import _Cycle, run_cycle
from scheduler_core.policy.preemption import Found, may_preempt, victim
from scheduler_core.policy.snapshot import (AdmittedAs, Band, PodPlacement, Placement, PolicyConfig, RunningJob,
                                            Snapshot)

from .builders import H, decisions, make_cluster, make_job, make_snapshot, nodes_of


class Case(NamedTuple):
    name: str
    snapshot: Callable[[], Snapshot]
    now: float
    expected: list[tuple[Any, ...]]


def lender_and_borrower() -> Any:
    return make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=(0, 16)).team("search", h100=16)


def one_job_in_the_way(free_in_b1: int, preemptible: bool = True, b1_started: float = -4000,
                       max_reservations: int = 8) -> Snapshot:
    """A whole-block gang of fraud's waits; block b0 is free but for one 8-GPU job of search's (running for
    4,000 s of its 4 h); block b1 has ``free_in_b1`` free nodes, the others busy since ``b1_started``."""
    job = make_job("s").team("search").pods(1, 8)
    builder = (make_snapshot(make_cluster().block("b0", 4).block("b1", 4))
               .config(max_reservations=max_reservations)
               .team("fraud", h100=32).team("search", h100=40)
               .run(job if preemptible else job.non_preemptible(), "b0-n03", started=-4000))
    for k in range(4 - free_in_b1):
        builder = builder.run(make_job(f"b{k}").team("search").pods(1, 8), f"b1-n{k:02d}", started=b1_started)
    return builder.pending(make_job("g").pods(4, 8).required("block")).build()


def a_job_in_the_way_beside_a_sick_node() -> Snapshot:
    """fraud's 3-node gang; b0's four nodes: n00 suspect, n02 holding search's 1-GPU ``s``, the others free;
    ``t`` holds one GPU of b1's only node. Only moving ``s`` (to b1) makes three whole nodes."""
    return (make_snapshot(make_cluster().block("b0", 4).block("b1", 1).health("b0-n00", "suspect"))
            .team("fraud", h100=32).team("search", h100=40)
            .run(make_job("s").team("search").pods(1, 1), "b0-n02", started=-4000)
            .run(make_job("t").team("search").pods(1, 1), "b1-n00", started=-4000)
            .pending(make_job("g").pods(3, 8)).build())


def only_a_big_borrower(queued_at: float, young_started: float | None = None) -> Snapshot:
    """Search borrows 80 GPUs in one gang, and 8 more in job ``y`` started at ``young_started`` (without it,
    ``y`` is nominal work and the gang the only borrower); fraud, whose 48 are lent out, asks for one GPU."""
    young = young_started is not None
    return (make_snapshot(make_cluster().blocks("b", 3, nodes=4)).team("fraud", h100=48).team("search", h100=48)
            .run(make_job("G").team("search").pods(10, 8), nodes_of("b0", 4) + nodes_of("b1", 4) + nodes_of("b2", 2),
                 admitted="borrowed", started=-4000)
            .run(make_job("y").team("search").pods(1, 8), "b2-n02", admitted="borrowed" if young else "nominal",
                 started=young_started if young else -4000)
            .run(make_job("n").team("search").pods(1, 8), "b2-n03", started=-4000)
            .pending(make_job("a").pods(1, 1).pending(queued_at=queued_at)).build())


def room_only_from_a_big_borrower(queued_at: float) -> Snapshot:
    """No whole node is free: search's nominal job holds b0, other's 80-GPU borrowed gang b1. fraud's 8-GPU
    job fits its nominal and the cohort's pool (no reclaim): it needs room, and only the gang could make it."""
    return (make_snapshot(make_cluster().block("b0", 2).block("b1", 10))
            .team("fraud", h100=8).team("other", h100=8).team("search", h100=88)
            .run(make_job("G").team("other").pods(10, 8), nodes_of("b1", 10), admitted="borrowed", started=-4000)
            .run(make_job("s").team("search").pods(2, 8), nodes_of("b0", 2), started=-4000)
            .pending(make_job("a").pods(1, 8).pending(queued_at=queued_at)).build())


def a_borrower_in_the_way(limit: float, pending: Any) -> Snapshot:
    """Block b0's four nodes held by a borrowed 4 × 8 job that started an hour ago (checkpointed 10 minutes ago)
    and ends at its ``limit``; ``pending`` (genai's, within nominal) needs room in that block."""
    return (make_snapshot(make_cluster().block("b0", 4)).team("genai", h100=(32, None, 0))
            .team("fraud", h100=(0, 64)).team("lender", h100=64)
            .run(make_job("b").team("fraud").pods(4, 8).limit(limit), nodes_of("b0", 4), admitted="borrowed",
                 started=-H, checkpoint=-600)
            .pending(pending).build())


def a_big_and_a_small_borrower() -> Snapshot:
    """Search fills the cluster: a 64-GPU gang that just checkpointed and an 8-GPU job that never did, both
    borrowed; fraud, whose 48 are lent out, asks for 8 GPUs."""
    return (make_snapshot(make_cluster().blocks("b", 3, nodes=4)).team("fraud", h100=48).team("search", h100=48)
            .run(make_job("G").team("search").pods(8, 8), nodes_of("b0", 4) + nodes_of("b1", 4),
                 admitted="borrowed", started=-4000, checkpoint=-10)
            .run(make_job("S").team("search").pods(1, 8), "b2-n00", admitted="borrowed", started=-4000)
            .run(make_job("n").team("search").pods(3, 8), nodes_of("b2", 3, start=1), started=-4000)
            .pending(make_job("a").pods(1, 8)).build())


def lent_out_beside_free_units() -> Any:
    """Search (nominal 0) borrows all of fraud's 16 in a 2 × 8 gang on b0-n00 and b0-n01; b0-n02 is free."""
    return (make_snapshot(make_cluster().block("b0", 3)).team("fraud", h100=16).team("search", h100=(0, 32))
            .run(make_job("G").team("search").pods(2, 8), nodes_of("b0", 2), admitted="borrowed", started=-4000))


CASES = [
    Case("a lender's job that fits free units starts on them at once and stops nobody: the borrowers give the "
         "quota back by ending",
         lambda: lent_out_beside_free_units().pending(make_job("a").pods(1, 8)).build(), 0.0,
         [("admit", "a", "nominal", "b0-n02:0-7")]),
    Case("... and while they owe it, nobody borrows: search's next job waits for the cohort",
         lambda: lent_out_beside_free_units().pending(make_job("a").pods(1, 4))
         .pending(make_job("b").team("search").pods(1, 4).submitted(1)).build(), 0.0,
         [("admit", "a", "nominal", "b0-n02:0-3"), ("reserve", "b", "b0-n00", 4 * H - 4000),
          ("wait", "b", "CohortFull", 1, 4 * H - 4000)]),
    # Found by the liveness property: it was told its quota was lent out with no borrower to stop, beside free
    # units, while what kept it off them was G's claim on the units its victim frees.
    Case("a lender's job kept off free units by another job's claim on them waits behind that job, not for borrowers",
         lambda: make_snapshot(make_cluster().block("b0", 2)).team("crit", h100=(0, 16)).team("vision", h100=8)
         .team("other", h100=9).run(make_job("P").team("vision").pods(1, 1), "b0-n00", started=-4000)
         .pending(make_job("G").team("crit").pods(2, 8).priority("critical").submitted(-10))
         .pending(make_job("j").team("vision").pods(1, 1).non_preemptible().limit(3 * H).submitted(-5)).build(),
         0.0, [("preempt", "P", "HigherBand", 300.0, True, "G"), ("reserve", "G", "b0-n00 b0-n01", 300.0),
               ("wait", "G", "PreemptingVictims", 1, 300.0), ("wait", "j", "BehindReservation", 1, 14700.0)]),
    Case("a reclaim stops a borrower near its own size before a far larger gang, even a cheaper one",
         a_big_and_a_small_borrower, 0.0,
         [("preempt", "S", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b2-n00", 300.0),
          ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    # Its estimate: once it has waited reclaim_patience_s (300 s) the gang is stopped, then has its 300 s grace.
    Case("a reclaim does not stop a gang far larger than it needs at once: it waits for smaller borrowers",
         lambda: only_a_big_borrower(0.0), 0.0, [("wait", "a", "WaitingForCapacity", 1, 600.0)]),
    Case("... and stops a young borrower near its size instead, if one has run 5 minutes",
         lambda: only_a_big_borrower(0.0, young_started=-400.0), 0.0,
         [("preempt", "y", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b2-n02", 300.0),
          ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    Case("... for up to reclaim_patience_s, then takes its quota back all the same",
         lambda: only_a_big_borrower(-300.0), 0.0,
         [("preempt", "G", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b0-n00", 300.0),
          ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    # The same patience for room as for quota: its estimate is the end of its patience and the gang's grace.
    Case("a job that needs room now does not stop a gang ten times its size at once: units come back as jobs end",
         lambda: room_only_from_a_big_borrower(0.0), 0.0,
         [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "WaitingForCapacity", 1, 600.0)]),
    Case("... until it has waited reclaim_patience_s",
         lambda: room_only_from_a_big_borrower(-300.0), 0.0,
         [("preempt", "G", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b1-n00", 300.0),
          ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    Case("a gang waiting for one block moves a smaller job off it when that job fits elsewhere now",
         lambda: one_job_in_the_way(1), 0.0,
         [("preempt", "s", "Defragment", 300.0, True, "g"), ("reserve", "g", "b0-n00 b0-n01 b0-n02 b0-n03", 300.0),
          ("wait", "g", "PreemptingVictims", 1, 300.0)]),
    Case("... even when it is not among the jobs that may hold reservations (it needs a whole block)",
         lambda: one_job_in_the_way(1, max_reservations=0), 0.0,
         [("preempt", "s", "Defragment", 300.0, True, "g"), ("reserve", "g", "b0-n00 b0-n01 b0-n02 b0-n03", 300.0),
          ("wait", "g", "PreemptingVictims", 1, 300.0)]),
    Case("... but not when it fits nowhere else: the gang reserves the block instead",
         lambda: one_job_in_the_way(0), 0.0,
         [("reserve", "g", "b0-n00 b0-n01 b0-n02 b0-n03", 4 * H - 4000),
          ("wait", "g", "WaitingForCapacity", 1, 4 * H - 4000)]),
    Case("... nor a job that cannot checkpoint (b1's jobs are inside their minimum run time)",
         lambda: one_job_in_the_way(1, preemptible=False, b1_started=-100), 0.0,
         [("reserve", "g", "b0-n00 b0-n01 b0-n02 b0-n03", 4 * H - 4000),
          ("wait", "g", "WaitingForTopology", 1, 4 * H - 4000)]),
    Case("... and a node that is not ready beside the scattered units does not stop the move (the gang, told "
         "NodeUnhealthy, waited 2.9 h for s to end)",
         a_job_in_the_way_beside_a_sick_node, 0.0,
         [("preempt", "s", "Defragment", 300.0, True, "g"), ("reserve", "g", "b0-n01 b0-n02 b0-n03", 300.0),
          ("wait", "g", "PreemptingVictims", 1, 300.0)]),
    Case("fill-back: the cheap victim that turns out not to be needed is added back",
         lambda: lender_and_borrower()
         .run(make_job("x").pods(1, 2), "b0-n00", admitted="borrowed", started=-9000, checkpoint=-60)
         .run(make_job("y").pods(1, 4), "b0-n00", admitted="borrowed", started=-9000, checkpoint=-3600)
         .run(make_job("s").team("search").pods(1, 8), "b0-n01", started=-9000)
         .pending(make_job("a").team("search").pods(1, 6)).build(),
         0.0, [("preempt", "y", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b0-n00", 300.0),
               ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    Case("cost: fewer GPU-hours lost since the last checkpoint first, whatever the gang size",
         lambda: lender_and_borrower()
         .run(make_job("stale").pods(1, 8), "b0-n00", admitted="borrowed", started=-9000, checkpoint=-3000)
         .run(make_job("fresh").pods(1, 8), "b0-n01", admitted="borrowed", started=-9000, checkpoint=-100)
         .pending(make_job("a").team("search").pods(1, 8)).build(),
         0.0, [("preempt", "fresh", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b0-n01", 300.0),
               ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    Case("a non-preemptible job is never a victim",
         lambda: make_snapshot(make_cluster().block("b0", 1)).team("fraud", h100=8).team("search", h100=8)
         .run(make_job("x").pods(1, 8).non_preemptible(), "b0-n00", started=-9000)
         .pending(make_job("a").team("search").pods(1, 8).priority("critical")).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 9000), ("wait", "a", "WaitingForCapacity", 1, 4 * H - 9000)]),
    Case("time limit: preemptible jobs checkpoint and end, others stop at once; a leaving job is left alone; "
         "a job that fits once they have gone waits for them instead of preempting",
         lambda: make_snapshot(make_cluster().block("b0", 3)).team("fraud", h100=32)
         .run(make_job("p").pods(1, 8).limit(H), "b0-n00", started=-H)
         .run(make_job("np").pods(1, 8).limit(H).non_preemptible(), "b0-n01", started=-2 * H)
         .run(make_job("gone").pods(1, 8).limit(H), "b0-n02", started=-2 * H, terminating=True, terminate_by=60)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("preempt", "np", "TimeLimit", 0.0, False, None), ("preempt", "p", "TimeLimit", 300.0, False, None),
               ("reserve", "a", "b0-n01", 0.0), ("wait", "a", "PreemptingVictims", 1, 0.0)]),
    Case("backfill: a job that ends before the reservation, or keeps off its nodes, starts; others wait",
         lambda: make_snapshot(make_cluster().block("b0", 4).block("b1", 1)).team("fraud", h100=64)
         .team("search", h100=64)
         .run(make_job("x").team("search").pods(2, 8).limit(2 * H), ["b0-n00", "b0-n01"], started=0)
         .pending(make_job("head").pods(4, 8).required("block").submitted(-100),
                  make_job("short").pods(1, 8).limit(H).submitted(-50),
                  make_job("elsewhere").pods(1, 8).limit(3 * H).submitted(-40),
                  make_job("long").pods(1, 8).limit(3 * H).submitted(-30)).build(),
         0.0, [("admit", "short", "nominal", "b0-n02:0-7"), ("admit", "elsewhere", "nominal", "b1-n00:0-7"),
               ("reserve", "head", " ".join(nodes_of("b0", 4)), 2 * H), ("reserve", "long", "b1-n00", 3 * H),
               ("wait", "head", "WaitingForCapacity", 1, 2 * H), ("wait", "long", "BehindReservation", 2, 3 * H)]),
    Case("a far-off reservation: preempting borrowers is cheaper than hours of waiting",
         lambda: a_borrower_in_the_way(24 * H, make_job("big").team("genai").pods(4, 8).required("block")),
         0.0, [("preempt", "b", "Reservation", 300.0, True, "big"),
               ("reserve", "big", " ".join(nodes_of("b0", 4)), 300.0),
               ("wait", "big", "PreemptingVictims", 1, 300.0)]),
    Case("... but never a job larger than itself, which would then wait for room of its own",
         lambda: a_borrower_in_the_way(24 * H, make_job("mid").team("genai").pods(2, 8).required("block")),
         0.0, [("reserve", "mid", "b0-n00 b0-n01", 23 * H), ("wait", "mid", "WaitingForCapacity", 1, 23 * H)]),
    Case("a near reservation: wait for it rather than preempt",
         lambda: a_borrower_in_the_way(3 * H, make_job("big").team("genai").pods(4, 8).required("block")),
         0.0, [("reserve", "big", " ".join(nodes_of("b0", 4)), 2 * H),
               ("wait", "big", "WaitingForCapacity", 1, 2 * H)]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decisions(case: Case) -> None:
    assert decisions(run_cycle(case.snapshot(), case.now)) == case.expected


def _fragmented(extra_moves_in_flight: bool = False) -> Snapshot:
    """Block b0: four nodes, each held by one 1-GPU trial; the small-job block s0: one node busy, one free.
    Free: 36 GPUs; largest free whole-node shape: one node (8 GPUs), below a quarter of the free GPUs."""
    builder = (make_snapshot(make_cluster().block("b0", 4).block("s0", 2, small=True))
               .team("fraud", h100=64).team("search", h100=64)
               .run(make_job("s0-busy").team("search").pods(1, 8).limit(8 * H), "s0-n00", started=-H))
    for k in range(4):
        builder = builder.run(make_job(f"t{k}").team("search").pods(1, 1).kind("trial").limit(8 * H),
                              f"b0-n{k:02d}", started=-H, checkpoint=-60 * (k + 1))
    if extra_moves_in_flight:
        builder = builder.run(make_job("moving").team("search").pods(1, 1).kind("trial"), "b0-n00", started=-H,
                              terminating=True, terminate_by=120)
    return builder.pending(make_job("gang").pods(4, 8).required("block")).build()


def test_a_borrower_is_told_the_cohort_s_borrowers_owe_its_lenders() -> None:
    """After a lender took 4 of its nominal back onto free units, the cohort's pool is 4 below zero: the next
    borrower of the team that borrows 16 (12 of fraud's 16 are still lent) reads why it may not borrow more, and
    that the cohort lends again as the borrowers' jobs end."""
    snapshot = (lent_out_beside_free_units().pending(make_job("a").pods(1, 4))
                .pending(make_job("b").team("search").pods(1, 4).submitted(1)).build())
    wait = next(w for w in run_cycle(snapshot, 0.0).waits if w.job_id == "b")
    assert wait.message.startswith("would borrow 20 h100 in all; cohort 'org' can lend 12 now (its borrowers "
                                   "hold 4 more than its lenders spare: it lends again as their jobs end)"), wait


def test_defragment_moves_small_jobs_out_of_the_block_a_gang_needs() -> None:
    """The gang moves the four trials itself (and waits for them to leave; they may not come back to its nodes),
    or, when it may not move work (``migrate_max_moves=0``), the defragmenter moves them for the next big shape."""
    moved = run_cycle(_fragmented(), 0.0)
    assert {p.avoid for p in moved.preempts} == {tuple(nodes_of("b0", 4))}
    assert decisions(moved) == [
        ("preempt", "t0", "Defragment", 300.0, True, "gang"), ("preempt", "t1", "Defragment", 300.0, True, "gang"),
        ("preempt", "t2", "Defragment", 300.0, True, "gang"), ("preempt", "t3", "Defragment", 300.0, True, "gang"),
        ("reserve", "gang", " ".join(nodes_of("b0", 4)), 300.0),
        ("wait", "gang", "PreemptingVictims", 1, 300.0)]
    snap = _fragmented()
    result = run_cycle(replace(snap, config=replace(snap.config, migrate_max_moves=0)), 0.0)
    assert decisions(result) == [
        ("preempt", "t0", "Defragment", 300.0, True, None), ("preempt", "t1", "Defragment", 300.0, True, None),
        ("preempt", "t2", "Defragment", 300.0, True, None), ("preempt", "t3", "Defragment", 300.0, True, None),
        ("reserve", "gang", " ".join(nodes_of("b0", 4)), 7 * H),
        ("wait", "gang", "WaitingForCapacity", 1, 7 * H)]


def test_checking_where_moved_jobs_would_go_leaves_the_cycle_s_units_as_they_were() -> None:
    """Units are bits: trying the moved trials elsewhere while the gang holds b0 must give back exactly what it
    took. (Occupying the gang over the trials and then releasing it used to free the trials' units too, so the
    rest of the cycle saw 4 GPUs that were still in use.)"""
    snap = _fragmented()
    cycle = _Cycle(snap, 0.0)
    cap = cycle.work.cap
    pool = cap.pools["h100"]
    before = (list(pool.mask), pool.free_units, list(cap.free_cpu), list(cap.free_mem))
    trials = [victim(job, 0.0, snap.config) for job in snap.running if job.request.id.startswith("t")]
    gang = snap.pending[0].request
    placement = Placement("h100", tuple(PodPlacement(node, tuple(range(8))) for node in nodes_of("b0", 4)))
    assert cycle.preempt.stuck(gang, Found(trials, placement)) is None      # all four fit on s0-n01
    assert (list(pool.mask), pool.free_units, list(cap.free_cpu), list(cap.free_mem)) == before


def test_a_gang_moves_only_jobs_that_can_restart_elsewhere_and_looks_again_without_the_others() -> None:
    """The cheapest way into a whole block is to move b1's one 8-GPU job, but no whole node is free for it
    elsewhere; moving b0's four trials (s0-n01 has room for them) costs a little more and works."""
    builder = (make_snapshot(make_cluster().block("b0", 4).block("b1", 4).block("s0", 2, small=True))
               .team("fraud", h100=64).team("search", h100=64)
               .run(make_job("s0-busy").team("search").pods(1, 8).limit(8 * H), "s0-n00", started=-H)
               .run(make_job("s0-half").team("search").pods(1, 4).limit(8 * H), "s0-n01", started=-H)
               .run(make_job("big").team("search").pods(1, 8).limit(8 * H), "b1-n00", started=-H, checkpoint=-10))
    for k in range(4):
        builder = builder.run(make_job(f"t{k}").team("search").pods(1, 1).kind("trial").limit(8 * H),
                              f"b0-n{k:02d}", started=-H, checkpoint=-60 * (k + 1))
    result = run_cycle(builder.pending(make_job("gang").pods(4, 8).required("block")).build(), 0.0)
    assert decisions(result)[:5] == [
        ("preempt", "t0", "Defragment", 300.0, True, "gang"), ("preempt", "t1", "Defragment", 300.0, True, "gang"),
        ("preempt", "t2", "Defragment", 300.0, True, "gang"), ("preempt", "t3", "Defragment", 300.0, True, "gang"),
        ("reserve", "gang", " ".join(nodes_of("b0", 4)), 300.0)]


def test_defragment_waits_for_moves_in_flight_and_for_a_gang_that_needs_it() -> None:
    snap = _fragmented(extra_moves_in_flight=True)
    assert run_cycle(replace(snap, config=replace(snap.config, migrate_max_moves=0)), 0.0).preempts == []
    no_gang = (make_snapshot(make_cluster().block("b0", 4).block("s0", 2, small=True)).team("search", h100=64)
               .run(make_job("t").team("search").pods(1, 1), "b0-n00", started=-H).build())
    assert run_cycle(no_gang, 0.0).preempts == []


def test_defragment_respects_the_ratio() -> None:
    snap = _fragmented()
    lax = Snapshot(snap.nodes, snap.teams, snap.pending, snap.running,
                   PolicyConfig(defrag_ratio=0.0, migrate_max_moves=0))
    assert [p.reason.value for p in run_cycle(lax, 0.0).preempts] == []


def _running(team: str, admitted: str, started: float, priority: str = "standard") -> RunningJob:
    return RunningJob(make_job("v").team(team).priority(priority).build(), placement=None,  # type: ignore[arg-type]
                      admitted_as=AdmittedAs(admitted), started_at=started)


@pytest.mark.parametrize(("band", "admitted", "priority", "started", "allowed"), [
    (Band.GUARANTEED, "borrowed", "standard", -4000, True),      # reclaim from a borrower
    (Band.GUARANTEED, "nominal", "standard", -4000, False),      # same band: never
    (Band.BORROWED, "borrowed", "standard", -4000, False),       # same band: never
    (Band.BORROWED, "scavenger", "scavenger", -10, True),        # scavenger work: anyone, any time
    (Band.GUARANTEED, "borrowed", "standard", -600, False),      # minimum run time protects it
    (Band.CRITICAL, "nominal", "standard", -600, True),          # ...except from the critical band
    (Band.GUARANTEED, "borrowed", "critical", -4000, False),     # a critical job is never below anyone
])
def test_who_may_preempt_whom(band: Band, admitted: str, priority: str, started: float, allowed: bool) -> None:
    preemptor = make_job("p").team("search").build()
    job = _running("fraud", admitted, started, priority)
    object.__setattr__(job, "placement", type("P", (), {"flavour": "h100"})())
    assert may_preempt(preemptor, band, victim(job, 0.0, PolicyConfig())) is allowed


def test_no_cycles_a_victim_could_never_preempt_its_preemptor_back() -> None:
    """Every allowed preemption goes strictly down the bands, and the victim, pending again, could at most
    reach the preemptor's band, where it may not preempt."""
    preemptor = make_job("p").team("search").build()
    for band in Band:
        for admitted in AdmittedAs:
            for priority in ("critical", "high", "standard", "low", "scavenger"):
                job = _running("fraud", admitted.value, -9000, priority)
                object.__setattr__(job, "placement", type("P", (), {"flavour": "h100"})())
                v = victim(job, 0.0, PolicyConfig())
                if may_preempt(preemptor, band, v):
                    assert v.band < band and v.highest_band <= band


def test_jobs_asking_the_same_victim_search_in_a_row_search_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five 1-GPU jobs of fraud reclaim their quota in one pass, and the only borrower old enough to stop is a far
    larger gang: the pass searches once for the five, not once per job,
    and decides exactly as searching again for each."""
    from scheduler_core.policy.preemption import VictimSearch
    from scheduler_core.policy.stage_preempt import Preemptor

    snap = (make_snapshot(make_cluster().blocks("b", 3, nodes=4)).team("fraud", h100=48).team("search", h100=48)
            .run(make_job("G").team("search").pods(10, 8), nodes_of("b0", 4) + nodes_of("b1", 4) + nodes_of("b2", 2),
                 admitted="borrowed", started=-4000)
            .run(make_job("n").team("search").pods(2, 8), nodes_of("b2", 2, start=2), started=-4000)
            .pending(*[make_job(f"a{k}").pods(1, 1).pending(queued_at=0.0) for k in range(5)]).build())
    searches: list[int] = []
    run = VictimSearch.run
    monkeypatch.setattr(VictimSearch, "run", lambda self, eligible: searches.append(1) or run(self, eligible))
    remembered = run_cycle(snap, 0.0)
    once = len(searches)

    search = Preemptor._search

    def forgetful(self: Preemptor, *args: Any, **kwargs: Any) -> Found | None:
        self._searched.clear()
        return search(self, *args, **kwargs)

    searches.clear()
    monkeypatch.setattr(Preemptor, "_search", forgetful)
    assert run_cycle(snap, 0.0) == remembered
    assert (once, len(searches)) == (1, 5)
    assert not remembered.preempts and [w.reason.value for w in remembered.waits] == ["WaitingForCapacity"] * 5


def test_a_gang_with_two_pods_on_the_node_a_job_needs_is_stopped_once() -> None:
    """A scavenger gang of two 1-GPU pods and a borrower of one GPU share the one A100 node; t1's 8-GPU job needs
    the whole node, and its nominal back from the borrower. The victim search counts the gang once on that node
    (its units there added up): each victim is stopped once. Hypothesis found the gang stopped twice: the search
    took it once per pod and released its units twice."""
    snap = (make_snapshot(make_cluster().block("a0", 1, gpu="a100"))
            .team("t0", cohort="c0", a100=0).team("t1", cohort="c1", a100=8).team("t2", cohort="c1", a100=0)
            .run(make_job("s").team("t0").flavour("a100").pods(2, 1).priority("scavenger"), "a0-n00",
                 admitted="scavenger", started=-4000)
            .run(make_job("b").team("t2").flavour("a100").pods(1, 1), "a0-n00", admitted="borrowed", started=-4000)
            .pending(make_job("j").team("t1").flavour("a100").pods(1, 8).priority("low").non_preemptible()).build())
    result = run_cycle(snap, 600.0)
    assert sorted((p.job_id, p.reason.value) for p in result.preempts) == [("b", "Reclaim"), ("s", "HigherBand")]
