"""Quota classes (nominal, borrowed, scavenger, reclaim) and the order of work (bands, DRF, priority, age,
attained service), as tables of whole decision lists."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, NamedTuple

import pytest

from scheduler_core.policy.cycle import run_cycle
from scheduler_core.policy.quota import QuotaLedger
from scheduler_core.policy.snapshot import AdmittedAs, Snapshot

from .builders import H, decisions, make_cluster, make_job, make_snapshot, nodes_of


class Case(NamedTuple):
    name: str
    snapshot: Callable[[], Snapshot]
    now: float
    expected: list[tuple[Any, ...]]


def one_node() -> Any:
    return make_cluster().block("b0", 1)


def two_blocks() -> Any:
    return make_cluster().block("b0", 4, per_leaf=2).block("b1", 4, per_leaf=2)


def head_reserved_after_a_relabel() -> Snapshot:
    """fraud's non-preemptible ``a`` takes its nominal from ``q`` (relabelled borrowed); ``head`` needs all 16 of
    fraud's nominal, so it is reserved for when ``a`` ends (search's work keeps the cohort from lending it half of
    its nominal till then); ``b`` would run past that."""
    return (make_snapshot(two_blocks()).team("fraud", h100=16).team("search", h100=48)
            .run(make_job("q").pods(2, 8), ["b0-n00", "b0-n01"], started=-3000)
            .run(make_job("s").team("search").pods(3, 8).limit(8 * H), ["b1-n00", "b1-n01", "b1-n02"],
                 started=-3000)
            .pending(make_job("a").pods(1, 8).non_preemptible().submitted(-10),
                     make_job("head").pods(2, 8).non_preemptible(),
                     make_job("b").pods(1, 8).non_preemptible().limit(8 * H).submitted(1)).build())


def reserved_block_world() -> Any:
    """Nine nodes; search holds one node of b0 and all of b1 (one job borrowed) until 4 h − 1000 s; the cohort
    lends 24 now, and fraud's whole-block gang will take 32 of it back when search's jobs end (and does not move
    search's job off b0: that is tested with preemption)."""
    builder = (make_snapshot(make_cluster().block("b0", 4).block("b1", 4).block("b2", 1))
               .config(migrate_max_moves=0)
               .team("fraud", h100=32).team("search", h100=32).team("ads", h100=8).team("recsys", h100=0)
               .run(make_job("s0").team("search").pods(1, 8), "b0-n03", started=-1000))
    for k in range(4):
        builder = builder.run(make_job(f"s{k + 1}").team("search").pods(1, 8), f"b1-n{k:02d}", started=-1000,
                              admitted="borrowed" if k == 3 else "nominal")
    return builder


def starving_gang_world() -> Any:
    """fraud's nominal 16 held by its own preemptible q1 and q2 (q2 the newer); search lends 48."""
    return (make_snapshot(two_blocks()).team("fraud", h100=16).team("search", h100=48)
            .run(make_job("q1").pods(1, 8), "b0-n00", started=-4000)
            .run(make_job("q2").pods(1, 8), "b0-n01", started=-3000))


QUOTA = [
    Case("fits unused nominal: admitted nominal",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=16).pending(make_job("a").pods(1, 8)).build(),
         0.0, [("admit", "a", "nominal", "b0-n00:0-7")]),
    Case("beyond nominal on idle cohort quota: admitted borrowed",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=8).team("search", h100=24)
         .run(make_job("r").pods(1, 8), "b0-n00", started=-4000)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("admit", "a", "borrowed", "b0-n01:0-7")]),
    Case("borrowing limit reached: QuotaFull, reserved from when its own job ends",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=(8, 0)).team("search", h100=24)
         .run(make_job("r").pods(1, 8), "b0-n00", started=-4000)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "QuotaFull", 1, 4 * H - 4000)]),
    Case("cohort has nothing idle to lend: CohortFull",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=(8, 16)).team("search", h100=8)
         .run(make_job("r").pods(1, 8), "b0-n00", started=-4000)
         .run(make_job("s").team("search").pods(1, 8), "b0-n01", started=-3000)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "CohortFull", 1, 4 * H - 4000)]),
    Case("lending limit caps what a lender gives: 4 of its idle 16",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=(0, 64)).team("search", h100=(16, None, 4))
         .pending(make_job("big").pods(1, 8), make_job("small").pods(1, 4).submitted(1)).build(),
         0.0, [("admit", "small", "borrowed", "b0-n00:0-3"), ("wait", "big", "CohortFull", 1, None)]),
    Case("non-preemptible work of a 12-hour limit borrows while half the cohort's nominal stays free after it",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0).team("search", h100=32)
         .pending(make_job("a").pods(1, 8).non_preemptible().limit(12 * H)).build(),
         0.0, [("admit", "a", "borrowed", "b0-n00:0-7")]),
    Case("... and waits while less would stay free (24 of 32 would leave 8, under half)",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0).team("search", h100=32)
         .pending(make_job("a").pods(3, 8).non_preemptible().limit(12 * H)).build(),
         0.0, [("wait", "a", "QuotaFull", 1, None)]),
    Case("... but a 4-hour job needs a third of that kept (a sixth of 32: 6), so it borrows 24 of 32",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0).team("search", h100=32)
         .pending(make_job("a").pods(3, 8).non_preemptible().limit(4 * H)).build(),
         0.0, [("admit", "a", "borrowed", "b0-n00:0-7 b0-n01:0-7 b0-n02:0-7")]),
    Case("... and one that would leave none (search uses 8 of its 32 itself) waits, reserved from when it would not",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0).team("search", h100=32)
         .run(make_job("s").team("search").pods(1, 8), "b1-n00", started=-4000)
         .pending(make_job("a").pods(3, 8).non_preemptible().limit(4 * H)).build(),
         0.0, [("reserve", "a", "b0-n00 b0-n01 b0-n02", 4 * H - 4000), ("wait", "a", "QuotaFull", 1, 4 * H - 4000)]),
    Case("... but a preemptible job quota held back at the last pass waits in the cohort: the loan that would leave it "
         "short keeps the whole half, and the waiting borrower starts (without it: a starts, w reserved from 4 h)",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0).team("search", h100=32).team("ads", h100=0)
         .pending(make_job("a").team("ads").pods(3, 8).non_preemptible().limit(4 * H),
                  replace(make_job("w").pods(4, 8).submitted(1).pending(), quota_held_after_s=0.0)).build(),
         0.0, [("admit", "w", "borrowed", "b0-n00:0-7 b0-n01:0-7 b0-n02:0-7 b0-n03:0-7"),
               ("wait", "a", "QuotaFull", 1, None)]),
    Case("... and never with a share of 1",
         lambda: make_snapshot(two_blocks()).config(unreclaimable_borrow_free_share=1.0)
         .team("fraud", h100=0).team("search", h100=32)
         .pending(make_job("a").pods(1, 8).non_preemptible()).build(),
         0.0, [("wait", "a", "QuotaFull", 1, None)]),
    Case("... and a lender's reclaim never stops it: the lender's job waits for it to end",
         lambda: make_snapshot(one_node()).team("fraud", h100=0).team("search", h100=8)
         .run(make_job("np").pods(1, 8).non_preemptible(), "b0-n00", admitted="borrowed", started=-4000)
         .pending(make_job("s").team("search").pods(1, 8)).build(),
         0.0, [("wait", "s", "WaitingForCapacity", 1, 4 * H - 4000)]),
    Case("a notebook, non-preemptible but reclaimable when idle (by the reaper), borrows idle cohort quota",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0).team("search", h100=32)
         .pending(make_job("nb").pods(1, 1).non_preemptible().kind("notebook")).build(),
         0.0, [("admit", "nb", "borrowed", "b0-n00:0")]),
    Case("... and a lender's reclaim never stops it: the lender's job waits for it to end or go idle",
         lambda: make_snapshot(one_node()).team("fraud", h100=0).team("search", h100=8)
         .run(make_job("nb").pods(1, 8).non_preemptible().kind("notebook"), "b0-n00", admitted="borrowed",
              started=-4000)
         .pending(make_job("s").team("search").pods(1, 8)).build(),
         0.0, [("wait", "s", "WaitingForCapacity", 1, 4 * H - 4000)]),
    Case("a borrowed job does not use up its team's nominal: non-preemptible work still fits it",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=16).team("search", h100=48)
         .run(make_job("r").pods(2, 8), ["b0-n00", "b0-n01"], admitted="borrowed", started=-4000)
         .run(make_job("q").pods(1, 8), "b0-n02", started=-4000)
         .pending(make_job("a").pods(1, 8).non_preemptible()).build(),
         0.0, [("admit", "a", "nominal", "b0-n03:0-7")]),
    Case("the nominal it fits is of jobs admitted nominal: one more beyond that is QuotaFull",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=16).team("search", h100=48)
         .run(make_job("r").pods(2, 8), ["b0-n00", "b0-n01"], admitted="borrowed", started=-4000)
         .run(make_job("q").pods(2, 8).non_preemptible(), ["b0-n02", "b0-n03"], started=-4000)
         .pending(make_job("a").pods(1, 8).non_preemptible().limit(12 * H)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "QuotaFull", 1, 4 * H - 4000)]),
    Case("a job that ends before its team's reserved job starts has the nominal that job will need, though a longer "
         "one of its shape, which would still run then, waits for it (it was once told the longer one's answer)",
         lambda: make_snapshot(two_blocks()).config(unreclaimable_borrow_free_share=1.0)
         .team("fraud", h100=16).team("search", h100=40).team("ads", h100=8)
         .run(make_job("s").team("search").pods(5, 8).non_preemptible().limit(H),
              ["b0-n01", "b0-n03", "b1-n00", "b1-n01", "b1-n02"], started=0)
         .run(make_job("d").team("ads").pods(1, 8).non_preemptible().limit(H), "b1-n03", started=0)
         .pending(make_job("r").pods(2, 8).required("leaf").non_preemptible().limit(3 * H),
                  make_job("a").pods(1, 8).non_preemptible().limit(3 * H).submitted(1),
                  make_job("b").pods(1, 8).non_preemptible().limit(H / 2).submitted(2)).build(),
         0.0, [("admit", "b", "nominal", "b0-n00:0-7"), ("reserve", "r", "b0-n00 b0-n01", H),
               ("reserve", "a", "b0-n00", 4 * H), ("wait", "r", "WaitingForTopology", 1, H),
               ("wait", "a", "QuotaFull", 2, 4 * H)]),
    Case("backfill borrows what the cohort will still have when a reservation starts: the quota of the jobs "
         "that end first comes back",
         lambda: reserved_block_world()
         .pending(make_job("g").team("fraud").pods(4, 8).required("block"),
                  make_job("j").team("recsys").pods(1, 8).limit(8 * H).submitted(1)).build(),
         0.0, [("admit", "j", "borrowed", "b2-n00:0-7"), ("reserve", "g", "b0-n00 b0-n01 b0-n02 b0-n03", 4 * H - 1000),
               ("wait", "g", "WaitingForTopology", 1, 4 * H - 1000)]),
    Case("non-preemptible work takes its team's nominal from the team's own preemptible jobs, which become "
         "borrowed (the newest first, as few as needed) when the cohort can lend for them",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=16).team("search", h100=48)
         .run(make_job("q1").pods(1, 8), "b0-n00", started=-4000)
         .run(make_job("q2").pods(1, 8), "b0-n01", started=-3000)
         .pending(make_job("a").pods(1, 8).non_preemptible()).build(),
         0.0, [("admit", "a", "nominal", "b0-n02:0-7"), ("relabel", "q2", "borrowed", "a")]),
    Case("... not when the cohort cannot lend for them, nor when the job would not start now",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=16).team("search", h100=48)
         .run(make_job("q1").pods(1, 8), "b0-n00", started=-4000)
         .run(make_job("q2").pods(1, 8), "b0-n01", started=-3000)
         .run(make_job("s").team("search").pods(6, 8), [f"b{b}-n{n:02d}" for b in (0, 1) for n in range(4)
                                                       if (b, n) not in ((0, 0), (0, 1))], started=-4000)
         .pending(make_job("a").pods(1, 8).non_preemptible()).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "QuotaFull", 1, 4 * H - 4000)]),
    Case("... but when it would not start now and the cohort stays idle enough to lend it the units, it waits as that "
         "borrower (5 min for a leaf here), not until its team's nominal frees (3 h: Hypothesis found such a head "
         "job's reservation put back by the backfill that started the team's preemptible work)",
         lambda: make_snapshot(make_cluster().block("b0", 4, per_leaf=2)).team("fraud", h100=16)
         .team("search", h100=64)
         .run(make_job("q1").pods(1, 8), "b0-n00", started=-4000)
         .run(make_job("q2").pods(1, 8), "b0-n02", started=-3000)
         .pending(make_job("a").pods(2, 8).preferred("leaf").non_preemptible()).build(),
         0.0, [("reserve", "a", "b0-n01 b0-n03", 300.0), ("wait", "a", "WaitingForTopology", 1, 300.0)]),
    Case("... nor when a reserved non-preemptible job of the team needs that nominal before this one would end",
         lambda: make_snapshot(two_blocks()).config(unreclaimable_borrow_full_after_s=60.0)
         .team("fraud", h100=24).team("search", h100=40)
         .run(make_job("q").pods(1, 8), "b0-n00", started=-3000)
         .run(make_job("n1").pods(1, 8).non_preemptible(), "b0-n01", started=-4 * H + 1800)
         .run(make_job("n2").pods(1, 8).non_preemptible(), "b0-n02", started=-4 * H + 1800)
         .pending(make_job("head").pods(2, 8).non_preemptible(),
                  make_job("b").pods(1, 8).non_preemptible().submitted(1)).build(),
         0.0, [("reserve", "head", "b0-n01 b0-n02", 1800.0), ("reserve", "b", "b0-n00", 4 * H - 3000),
               ("wait", "head", "QuotaFull", 1, 1800.0), ("wait", "b", "QuotaFull", 2, 4 * H - 3000)]),
    Case("... and work relabelled borrowed frees no nominal when it ends: b may not take the nominal that the head, "
         "reserved for when a ends, counts on (Hypothesis found b admitted and the head's start pushed back)",
         head_reserved_after_a_relabel,
         0.0, [("admit", "a", "nominal", "b0-n02:0-7"), ("reserve", "head", "b0-n00 b0-n02", 4 * H),
               ("reserve", "b", "b0-n00", 8 * H), ("wait", "head", "QuotaFull", 1, 4 * H),
               ("wait", "b", "QuotaFull", 2, 8 * H), ("relabel", "q", "borrowed", "a")]),
    Case("a non-preemptible job larger than its team's nominal, which may borrow only while the cohort keeps half its "
         "nominal free to lend, is reserved for when it will (b's 8 borrowed come back at 1 h); Hypothesis found it "
         "told no start at all",
         lambda: make_snapshot(make_cluster().block("b0", 2)).config(unreclaimable_borrow_full_after_s=60.0)
         .team("fraud", h100=6).team("search", h100=20).team("ads", h100=8)
         .run(make_job("n").pods(1, 1).non_preemptible().limit(H), "b0-n00")
         .run(make_job("m").pods(1, 1).non_preemptible().limit(H), "b0-n00")
         .run(make_job("b").pods(1, 8).non_preemptible().limit(H), "b0-n01", admitted="borrowed")
         .pending(make_job("big").pods(1, 8).non_preemptible()).build(),
         600.0, [("reserve", "big", "b0-n00", H), ("wait", "big", "QuotaFull", 1, H)]),
    Case("... a smaller one is told when the cohort will be that idle (search's 16 end at 1 h), though only its nominal "
         "(at 2 h) would reserve it (here no job holds a reservation)",
         lambda: make_snapshot(make_cluster().block("b0", 4)).config(max_reservations=0, unreclaimable_borrow_full_after_s=60.0)
         .team("fraud", h100=6).team("search", h100=20).team("ads", h100=8)
         .run(make_job("n").pods(1, 6).non_preemptible().limit(2 * H), "b0-n00")
         .run(make_job("s").team("search").pods(2, 8).limit(H), ["b0-n01", "b0-n02"])
         .pending(make_job("small").pods(1, 4).non_preemptible()).build(),
         0.0, [("wait", "small", "QuotaFull", 1, H)]),
    Case("a job within its team's nominal whose cohort is short only by the team's own borrowed work (q, relabelled "
         "for an earlier job) waits as a borrower and is reserved for when q ends: no reclaim of other teams can "
         "make the pool whole (Hypothesis found it told 'now' every pass, unplanned, and a later job's reservation "
         "broken when it got in)",
         lambda: make_snapshot(make_cluster().block("b0", 4)).team("fraud", h100=16).team("search", h100=1)
         .run(make_job("n1").pods(1, 8).non_preemptible(), "b0-n00", started=-1000)
         .run(make_job("n2").pods(1, 7).non_preemptible(), "b0-n01", started=-1000)
         .run(make_job("q").pods(1, 2).limit(H), "b0-n02", started=-1000, admitted="borrowed")
         .pending(make_job("a").pods(1, 1).non_preemptible()).build(),
         0.0, [("reserve", "a", "b0-n01", H - 1000), ("wait", "a", "CohortFull", 1, H - 1000)]),
    Case("... and one within nominal whose team is at its borrowing limit is reserved for when its borrowed work "
         "ends, not from now (the quota clock counted its nominal alone)",
         lambda: make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=(2, 3)).team("search", h100=8)
         .run(make_job("n").pods(1, 1).non_preemptible(), "b0-n00")
         .run(make_job("b1").pods(1, 2).limit(H), "b0-n00", admitted="borrowed")
         .run(make_job("b2").pods(1, 2).limit(H), "b0-n00", admitted="borrowed")
         .pending(make_job("a").pods(1, 1).non_preemptible()).build(),
         0.0, [("reserve", "a", "b0-n00", H), ("wait", "a", "QuotaFull", 1, H)]),
    Case("a gang that has waited 2 h and could only borrow takes its team's nominal from the team's own newer "
         "preemptible work, which becomes borrowed (the newest first), so a reclaim stops that work, not the gang",
         lambda: starving_gang_world().pending(make_job("g").pods(2, 8).submitted(-3 * H)).build(),
         0.0, [("admit", "g", "nominal", "b0-n02:0-7 b0-n03:0-7"), ("relabel", "q2", "borrowed", "g"),
               ("relabel", "q1", "borrowed", "g")]),
    Case("... not before it has waited 2 h: it borrows",
         lambda: starving_gang_world().pending(make_job("g").pods(2, 8).submitted(-2 * H + 60)).build(),
         0.0, [("admit", "g", "borrowed", "b0-n02:0-7 b0-n03:0-7")]),
    # Tuesday's morning 1,024-GPU gang, admitted as a borrower, was the borrower the morning ramp's reclaim stopped
    # whole; as nominal, the team's small jobs are the borrowers, and a reclaim stops one near its size.
    Case("... and a gang as large as a block at once: the team's small jobs become the borrowers",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=32).team("search", h100=48)
         .run(make_job("q1").pods(1, 8), "b0-n00", started=-4000)
         .run(make_job("q2").pods(1, 8), "b0-n01", started=-3900)
         .run(make_job("q3").pods(1, 8), "b0-n02", started=-3800)
         .run(make_job("q4").pods(1, 8), "b0-n03", started=-3700)
         .pending(make_job("g").pods(4, 8)).build(),
         0.0, [("admit", "g", "nominal", "b1-n00:0-7 b1-n01:0-7 b1-n02:0-7 b1-n03:0-7"),
               ("relabel", "q4", "borrowed", "g"), ("relabel", "q3", "borrowed", "g"),
               ("relabel", "q2", "borrowed", "g"), ("relabel", "q1", "borrowed", "g")]),
    Case("... nor for small work, which does not starve (service levels promote it)",
         lambda: starving_gang_world().pending(make_job("g").pods(1, 8).submitted(-3 * H)).build(),
         0.0, [("admit", "g", "borrowed", "b0-n02:0-7")]),
    Case("scavenger work runs on idle units outside quota",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=0)
         .pending(make_job("a").pods(1, 8).priority("scavenger")).build(),
         0.0, [("admit", "a", "scavenger", "b0-n00:0-7")]),
    Case("a flavour the cluster lacks, or the team has no quota of: InvalidFlavour",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=8)
         .pending(make_job("a100").flavour("a100"), make_job("mig").flavour("h100-mig-1g").pods(1, 1),
                  make_job("stranger").team("nobody")).build(),
         0.0, [("wait", "a100", "InvalidFlavour", 1, None), ("wait", "mig", "InvalidFlavour", 2, None),
               ("wait", "stranger", "InvalidFlavour", 1, None)]),
    Case("flavours in order of preference: the second when the first is full",
         lambda: make_snapshot(make_cluster().block("h", 1).block("a", 1, gpu="a100")).team("fraud", h100=8, a100=8)
         .run(make_job("r").pods(1, 8), "h-n00", started=-100)
         .pending(make_job("j").flavour("h100", "a100").pods(1, 8)).build(),
         0.0, [("admit", "j", "nominal", "a-n00:0-7")]),
    Case("reclaim: a lender takes its nominal back from the cheapest borrower",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=(0, 64)).team("search", h100=64)
         .run(make_job("r1").pods(4, 8), ["b0-n00", "b0-n01", "b0-n02", "b0-n03"], admitted="borrowed",
              started=-4000, checkpoint=-600)
         .run(make_job("r2").pods(4, 8), ["b1-n00", "b1-n01", "b1-n02", "b1-n03"], admitted="borrowed",
              started=-4000, checkpoint=-60)
         .pending(make_job("a").team("search").pods(1, 8)).build(),
         0.0, [("preempt", "r2", "Reclaim", 300.0, True, "a"), ("reserve", "a", "b1-n00", 300.0),
               ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    Case("reclaim waits out a borrower's minimum run time",
         lambda: make_snapshot(one_node()).team("fraud", h100=(0, 8)).team("search", h100=8)
         .run(make_job("r").pods(1, 8), "b0-n00", admitted="borrowed", started=-600)
         .pending(make_job("a").team("search").pods(1, 8)).build(),
         0.0, [("wait", "a", "WaitingForCapacity", 1, 1500.0)]),
    Case("victims already leaving for a job: it waits for them and picks no more",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=(0, 64)).team("search", h100=64)
         .run(make_job("r").pods(1, 8), "b0-n00", admitted="borrowed", started=-4000, terminating=True,
              terminate_by=120.0, preempted_for="a")
         .run(make_job("r2").pods(4, 8), ["b1-n00", "b1-n01", "b1-n02", "b1-n03"], admitted="borrowed",
              started=-4000)
         .run(make_job("r3").pods(3, 8), ["b0-n01", "b0-n02", "b0-n03"], admitted="borrowed", started=-4000)
         .pending(make_job("a").team("search").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 120.0), ("wait", "a", "PreemptingVictims", 1, 120.0)]),
    Case("a job that fits once leaving jobs exit waits for them, even when nobody recorded whom they left for",
         lambda: make_snapshot(two_blocks()).team("fraud", h100=(0, 64)).team("search", h100=64)
         .run(make_job("r").pods(1, 8), "b0-n00", admitted="borrowed", started=-4000, terminating=True,
              terminate_by=120.0)
         .run(make_job("r2").pods(4, 8), ["b1-n00", "b1-n01", "b1-n02", "b1-n03"], admitted="borrowed",
              started=-4000)
         .run(make_job("r3").pods(3, 8), ["b0-n01", "b0-n02", "b0-n03"], admitted="borrowed", started=-4000)
         .pending(make_job("a").team("search").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 120.0), ("wait", "a", "PreemptingVictims", 1, 120.0)]),
]

ORDER = [
    Case("bands: nominal-fitting work before older borrowing work",
         lambda: make_snapshot(one_node()).team("fraud", h100=0).team("search", h100=8)
         .pending(make_job("old").submitted(-100), make_job("new").team("search").submitted(-1)).build(),
         0.0, [("admit", "new", "nominal", "b0-n00:0-7"), ("reserve", "old", "b0-n00", 4 * H),
               ("wait", "old", "CohortFull", 1, 4 * H)]),
    Case("DRF: among borrowers, the team with the lower decayed dominant share first",
         lambda: make_snapshot(one_node()).team("fraud", h100=0, decayed={"gpu": 1e7})
         .team("search", h100=0).team("lender", h100=16)
         .pending(make_job("f").submitted(-100), make_job("s").team("search").submitted(-1)).build(),
         0.0, [("admit", "s", "borrowed", "b0-n00:0-7"), ("reserve", "f", "b0-n00", 4 * H),
               ("wait", "f", "WaitingForCapacity", 1, 4 * H)]),
    Case("... but a team whose next job has waited starvation_after_s (2 h) goes before those whose next job has "
         "not: a waiting job's reservation is otherwise no promise against another team's newer work",
         lambda: make_snapshot(one_node()).team("fraud", h100=0, decayed={"gpu": 1e7})
         .team("search", h100=0).team("lender", h100=16)
         .pending(make_job("f").submitted(-2 * H - 60), make_job("s").team("search").submitted(-1)).build(),
         0.0, [("admit", "f", "borrowed", "b0-n00:0-7"), ("reserve", "s", "b0-n00", 4 * H),
               ("wait", "s", "WaitingForCapacity", 1, 4 * H)]),
    Case("... and among teams that have both waited that long, the lower share still goes first",
         lambda: make_snapshot(one_node()).team("fraud", h100=0, decayed={"gpu": 1e7})
         .team("search", h100=0).team("lender", h100=16)
         .pending(make_job("f").submitted(-3 * H), make_job("s").team("search").submitted(-2 * H - 60)).build(),
         0.0, [("admit", "s", "borrowed", "b0-n00:0-7"), ("reserve", "f", "b0-n00", 4 * H),
               ("wait", "f", "WaitingForCapacity", 1, 4 * H)]),
    Case("DRF: twice the weight halves the share",
         lambda: make_snapshot(one_node()).team("fraud", h100=0, weight=4.0, decayed={"gpu": 1e6})
         .team("search", h100=0, decayed={"gpu": 5e5}).team("lender", h100=16)
         .pending(make_job("f").submitted(-100), make_job("s").team("search").submitted(-1)).build(),
         0.0, [("admit", "f", "borrowed", "b0-n00:0-7"), ("reserve", "s", "b0-n00", 4 * H),
               ("wait", "s", "WaitingForCapacity", 1, 4 * H)]),
    Case("DRF counts the dominant resource: a CPU-heavy team goes after a GPU-light one",
         lambda: make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=0).team("search", h100=0)
         .team("lender", h100=16)
         .run(make_job("cpu-heavy").pods(1, 1).cpus(150, 100), "b0-n00", admitted="borrowed", started=-100)
         .run(make_job("gpu").team("search").pods(1, 2), "b0-n01", admitted="borrowed", started=-100)
         .pending(make_job("f").pods(1, 1).submitted(-100), make_job("s").team("search").pods(1, 4)
                  .submitted(-1)).build(),
         0.0, [("admit", "s", "borrowed", "b0-n01:2-5"), ("admit", "f", "borrowed", "b0-n01:6")]),
    Case("within a team: priority, then age; attained service demotes small work; long waiters promoted",
         lambda: make_snapshot(one_node()).team("fraud", h100=8)
         .pending(make_job("low").pods(1, 1).priority("low").submitted(-500),
                  make_job("hi").pods(1, 1).priority("high").submitted(-10),
                  make_job("used").pods(1, 1).submitted(-400).pending(attained_gpu_s=2 * H),
                  make_job("starved").pods(1, 1).submitted(-9000).pending(attained_gpu_s=9 * H),
                  make_job("new").pods(1, 1).submitted(-300),
                  make_job("big").pods(1, 8).submitted(-350)).build(),
         0.0, [("admit", "hi", "nominal", "b0-n00:0"), ("admit", "starved", "nominal", "b0-n00:1"),
               ("admit", "new", "nominal", "b0-n00:2"), ("admit", "used", "nominal", "b0-n00:3"),
               ("admit", "low", "nominal", "b0-n00:4"), ("reserve", "big", "b0-n00", 4 * H),
               ("wait", "big", "CohortFull", 1, 4 * H)]),
    Case("a preempted job goes back to the front of its team's queue",
         lambda: make_snapshot(one_node()).team("fraud", h100=16)
         .pending(make_job("first").submitted(-100), make_job("victim").submitted(-10).pending(front=True)).build(),
         0.0, [("admit", "victim", "nominal", "b0-n00:0-7"), ("reserve", "first", "b0-n00", 4 * H),
               ("wait", "first", "WaitingForCapacity", 1, 4 * H)]),
    Case("bands never preempt within themselves: guaranteed waits for guaranteed",
         lambda: make_snapshot(one_node()).team("fraud", h100=8).team("search", h100=8)
         .run(make_job("r").team("search").pods(1, 8), "b0-n00", started=-4000)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "WaitingForCapacity", 1, 4 * H - 4000)]),
    Case("bands: borrowed work does not preempt borrowed work",
         lambda: make_snapshot(one_node()).team("fraud", h100=(0, 16)).team("search", h100=(0, 16))
         .team("lender", h100=32)
         .run(make_job("r").team("search").pods(1, 8), "b0-n00", admitted="borrowed", started=-4000)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 4000), ("wait", "a", "WaitingForCapacity", 1, 4 * H - 4000)]),
    Case("bands: critical preempts guaranteed, even inside its minimum run time",
         lambda: make_snapshot(one_node()).team("fraud", h100=8).team("search", h100=8)
         .run(make_job("r").team("search").pods(1, 8), "b0-n00", started=-60)
         .pending(make_job("a").pods(1, 8).priority("critical")).build(),
         0.0, [("preempt", "r", "HigherBand", 300.0, True, "a"), ("reserve", "a", "b0-n00", 300.0),
               ("wait", "a", "PreemptingVictims", 1, 300.0)]),
    Case("bands: scavenger work is stopped for anyone, at once and without grace",
         lambda: make_snapshot(one_node()).team("fraud", h100=(0, 8)).team("lender", h100=8)
         .team("search", h100=0)
         .run(make_job("s").team("search").pods(1, 8).priority("scavenger"), "b0-n00", admitted="scavenger",
              started=-60)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("preempt", "s", "HigherBand", 0.0, True, "a"), ("reserve", "a", "b0-n00", 0.0),
               ("wait", "a", "PreemptingVictims", 1, 0.0)]),
]


@pytest.mark.parametrize("case", QUOTA + ORDER, ids=lambda c: c.name)
def test_decisions(case: Case) -> None:
    assert decisions(run_cycle(case.snapshot(), case.now)) == case.expected


def test_a_nominal_job_answers_for_its_own_team_s_reservations_not_other_teams() -> None:
    """The cohort lends 16 now (fraud 8, ads 16, less search's 8 borrowed). Ads has a job reserved that will
    take all 16 of its nominal: that is ads's to reclaim when it starts. A 4-GPU job inside fraud's nominal
    quota is admitted nominal without stopping anyone; counted against it, ads's reservation would have made
    it reclaim 4 GPUs from search in ads's stead. (A team's own reserved jobs do count: the property test that
    backfill never delays the reserved head job checks that, in a one-team world.)"""
    snap = (make_snapshot(make_cluster().block("b0", 4))
            .team("fraud", h100=8).team("search", h100=8).team("ads", h100=16)
            .run(make_job("s").team("search").pods(2, 8), ["b0-n00", "b0-n01"], admitted="borrowed",
                 started=-4000)
            .pending(make_job("f").pods(1, 4)).build())
    ledger = QuotaLedger(snap.teams, snap.running)
    request = snap.pending[0].request
    ads_holds = {("ads", "h100"): 16}
    verdict = ledger.verdict(request, "h100", ads_holds, nominal_extra={})
    assert (verdict.admitted_as, verdict.reclaim) == (AdmittedAs.NOMINAL, False)
    assert run_cycle(snap, 0.0).admits[0].job_id == "f"


def test_a_team_with_nominal_work_behind_a_borrowing_head_is_ordered_with_the_nominal_work() -> None:
    """One GPU is free. `search`'s head must borrow (12 over its nominal 4; it needs two nodes, which this
    cluster does not have, so it holds no reservation), but its next job fits its nominal quota; `ads`, whose share ties and whose name sorts first, only has borrowing work. Ordered by the head
    alone, `search` would come among the borrowers, after `ads`, and its nominal job would lose the GPU to a
    borrower (the pattern that made in-quota work preempt borrower after borrower on the ITP traces). The team
    keeps its own order: the head is tried first, then the 1-GPU job takes the GPU."""
    snap = (make_snapshot(make_cluster().block("b0", 1))
            .team("fraud", h100=16).team("search", h100=4).team("ads", h100=0)
            .run(make_job("f").team("fraud").pods(1, 7), "b0-n00", started=-4000)
            .pending(make_job("head").team("search").pods(2, 8), make_job("one").team("search").pods(1, 1),
                     make_job("borrow").team("ads").pods(1, 1)).build())
    result = run_cycle(snap, 0.0)
    assert [(a.job_id, str(a.admitted_as)) for a in result.admits] == [("one", "nominal")]


@pytest.mark.parametrize(("nominal", "lending_limit", "usage", "offer", "borrows"), [
    (8, None, 0, 8, 0),
    (8, None, 5, 3, 0),
    (8, None, 8, 0, 0),
    (8, None, 12, 0, 4),
    # Usage less the quota of jobs that end before a reservation starts may go below zero (``verdict``'s
    # ``extra``): a team still never offers more than its nominal.
    (8, None, -4, 8, 0),
    (8, 2, 0, 2, 0),
    (8, 2, 7, 1, 0),
    (8, 2, 10, 0, 2),
    (8, 2, -4, 2, 0),
    (0, None, 3, 0, 3),
])
def test_terms_say_what_a_team_offers_to_lend_and_what_it_borrows(nominal: int, lending_limit: int | None,
                                                                  usage: int, offer: int, borrows: int) -> None:
    snap = (make_snapshot(make_cluster().block("b0", 1))
            .team("fraud", h100=(nominal, None, lending_limit)).build())
    ledger = QuotaLedger(snap.teams, snap.running)
    assert ledger.terms("fraud", "h100", usage) == (offer, borrows)
    assert ledger.terms("fraud", "a100", usage) == (0, usage)      # no quota of the flavour: all of it borrowed


def test_the_cohort_s_borrowed_units_are_kept_as_usage_moves_within_a_pass() -> None:
    """``QuotaLedger.borrowed`` is the sum of the cohort's teams' borrowing, kept by every change a pass makes
    (admissions, exits, reservations' holds and their undo), as ``pool`` is: a nominal job's verdict reads it
    instead of summing the cohort's teams."""
    snap = (make_snapshot(make_cluster().block("b0", 4))
            .team("fraud", h100=8).team("search", h100=8).team("ads", h100=(16, None, 4))
            .run(make_job("s").team("search").pods(2, 8), ["b0-n00", "b0-n01"], admitted="borrowed",
                 started=-4000).build())
    ledger = QuotaLedger(snap.teams, snap.running)

    def summed() -> int:
        return sum(ledger.terms(team, "h100", ledger.usage.get((team, "h100"), 0))[1]
                   for team in ledger.members["org"])

    assert ledger.borrowed[("org", "h100")] == summed() == 8
    undo_hold: list[Callable[[], None]] = []
    for verb, team, units in [("add", "fraud", 12), ("add", "search", 3), ("remove", "search", 16),
                              ("hold", "ads", 20), ("undo", "ads", 20), ("remove", "fraud", 12)]:
        request = make_job(f"{team}-{verb}").team(team).pods(1, units).build()
        if verb == "add":
            ledger.add(request, "h100", AdmittedAs.BORROWED)
        elif verb == "remove":
            ledger.remove(request, "h100", AdmittedAs.BORROWED)
        elif verb == "hold":
            undo_hold.append(ledger.hold([(team, "h100", units)]))
        else:
            undo_hold.pop()()
        assert ledger.borrowed[("org", "h100")] == summed(), (verb, team, units)


def test_a_job_held_by_its_team_s_reserved_quota_is_told_so() -> None:
    """The nominal quota a job may not take is in part promised to reserved jobs: its reason says how much is in
    use and how much is promised, never more "in use" than the team has."""
    waits = {w.job_id: w.message for w in run_cycle(head_reserved_after_a_relabel(), 0.0).waits}
    assert waits["b"].startswith("non-preemptible work runs only within nominal quota: 8 of 16 h100 in use and 16 "
                                 "promised to the team's reserved jobs that start before this one would end, needs 8")
    assert waits["head"].startswith("non-preemptible work runs only within nominal quota: 8 of 16 h100 in use, "
                                    "needs 16")


def starving_gang_held_by_its_cohort(queued_at: float, b0_busy: bool) -> Snapshot:
    """`x` borrows 16 of the cohort's 32 nominal units on block b1 until its limit at +3 h. genai's 32-unit gang
    (a whole block) must borrow 24, more than the cohort can lend before then: CohortFull. `y`'s 1-hour job would
    borrow 8. Block b0 is free, or (``b0_busy``) three of its nodes run another cohort's job until +10 h, so the
    gang's nodes are b1's, at +3 h (it has waited long enough to spread over blocks, but five nodes are not
    free)."""
    snap = (make_snapshot(make_cluster().block("b0", 4).block("b1", 4))
            .team("genai", h100=8).team("lender", h100=24).team("x", h100=0).team("y", h100=0)
            .team("z", cohort="other", h100=24)
            .run(make_job("xb").team("x").pods(2, 8), ["b1-n00", "b1-n01"], admitted="borrowed", started=-H))
    if b0_busy:
        snap = snap.run(make_job("z").team("z").pods(3, 8).limit(10 * H), nodes_of("b0", 3))
    return (snap.pending(make_job("g").team("genai").pods(4, 8).preferred("block").pending(queued_at=queued_at),
                         make_job("b").team("y").pods(1, 8).limit(H))
            .build())


@pytest.mark.parametrize(("queued_at", "b0_busy", "backfilled"), [
    (-3 * H, False, False),
    (-H, False, True),           # not starving yet
    (-3 * H, True, True),        # its nodes are 3 h away: holding the cohort's quota would only idle it
])
def test_a_starving_block_gang_whose_nodes_are_near_holds_its_cohort_quota_from_now(
        queued_at: float, b0_busy: bool, backfilled: bool) -> None:
    """Its reservation's quota from its planned start (+3 h) lets a 1-hour borrower in now, and the next, and the
    next: each unit the cohort frees goes to backfill, and the gang never gets its 24 at once. Once it has
    waited ``starvation_after_s`` (2 h), and while its nodes are in reach within that, it holds the quota from
    now."""
    result = run_cycle(starving_gang_held_by_its_cohort(queued_at, b0_busy), 0.0)
    assert [a.job_id for a in result.admits] == (["b"] if backfilled else [])
    waits = {w.job_id: w for w in result.waits}
    assert str(waits["g"].reason) == "CohortFull"
    if not backfilled:
        assert str(waits["b"].reason) == "CohortFull"
