"""The worked examples of the reference design (reference/design-a-gpu-job-scheduler.txt), run through the policy."""

from __future__ import annotations

from typing import Any

from scheduler_core.bench.world import World
from scheduler_core.policy.cycle import run_cycle

from .builders import H, FakeClock, decisions, make_cluster, make_job, make_snapshot, nodes_of


def test_two_48_gpu_jobs_on_64_free_gpus_do_not_deadlock() -> None:
    """"Eight free nodes and two jobs that need six each": all-or-nothing admission starts A whole and leaves
    B queued holding nothing, with a reservation for when A ends — never four nodes each."""
    snap = (make_snapshot(make_cluster().block("b0", 8)).team("fraud", h100=48).team("search", h100=48)
            .pending(make_job("A").pods(6, 8).limit(4 * H), make_job("B").team("search").pods(6, 8).submitted(1))
            .build())
    result = run_cycle(snap, 0.0)
    assert decisions(result) == [
        ("admit", "A", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b0", 6))),
        ("reserve", "B", " ".join(nodes_of("b0", 6)), 4 * H),    # A's nodes: the two free ones stay free
        ("wait", "B", "WaitingForCapacity", 1, 4 * H),
    ]
    assert result.waits[0].message.startswith("needs 6 × 8 h100; 2 whole nodes free")


def test_the_1024_gpu_job_gets_a_reservation_and_the_backfill_of_the_example() -> None:
    """J needs four whole blocks (1,024 GPUs). Block 0 drains at 3 h, so J can start then; block 1 is free now,
    block 2 drains at 1.5 h and block 3 at 2 h. Without backfill blocks 1-3 idle 3 + 1.5 + 1 = 5.5 block-hours.
    With it, a 3-hour evaluation fills block 1 at once and a 1-hour job fills block 2 at 1.5 h: 4 of the 5.5
    block-hours come back, and J still starts at 3 h. A 4-hour job would delay J, so it waits behind it.
    (fraud's past usage puts genai's J ahead of fraud's work, so fraud's jobs are backfill.)"""
    clock = FakeClock()
    builder = (make_snapshot(make_cluster().blocks("b", 4, nodes=32, per_leaf=8))
               .team("genai", h100=1024).team("search", h100=1024).team("fraud", h100=512, decayed={"gpu": 1e6}))
    for block, ends in (("b0", 3 * H), ("b2", 1.5 * H), ("b3", 2 * H)):
        builder = builder.run(make_job(f"{block}-run").team("search").pods(32, 8).limit(ends), nodes_of(block, 32),
                              started=0.0)
    world = World(builder.pending(
        make_job("J").team("genai").pods(128, 8).limit(72 * H).submitted(-3600),
        make_job("eval").team("fraud").pods(32, 8).required("block").limit(3 * H),
        make_job("too-long").team("fraud").pods(1, 8).limit(4 * H).submitted(-1)).build())

    first = run_cycle(world.snapshot, clock.now)
    reservation = next(r for r in first.reservations if r.job_id == "J")
    assert (reservation.start_at, len(reservation.nodes)) == (3 * H, 128)
    assert [(a.job_id, sorted({p.node[:2] for p in a.placement.pods}), a.backfill) for a in first.admits] == [
        ("eval", ["b1"], True)]
    waits = {w.job_id: (w.reason.value, w.estimated_start) for w in first.waits}
    assert waits["J"] == ("WaitingForCapacity", 3 * H)
    assert waits["too-long"][0] == "BehindReservation"
    world.apply(first)

    clock.advance(1.5 * H)
    world.advance(clock.now)
    world.submit(make_job("short").team("fraud").pods(32, 8).required("block").limit(1 * H).submitted(clock.now)
                 .pending())
    second = run_cycle(world.snapshot, clock.now)
    assert [(a.job_id, sorted({p.node[:2] for p in a.placement.pods})) for a in second.admits] == [("short", ["b2"])]
    assert next(w.estimated_start for w in second.waits if w.job_id == "J") == 3 * H
    world.apply(second)

    clock.advance(1.5 * H)
    world.advance(clock.now)
    third = run_cycle(world.snapshot, clock.now)
    assert [(a.job_id, len(a.placement.pods)) for a in third.admits][0] == ("J", 128)


def twelve_blocks_each_with_four_busy_nodes(**config: Any) -> World:
    """12 × 28 = 336 nodes (2,688 GPUs) free, yet no whole block; a ``required: block`` 256-GPU job waits."""
    builder = (make_snapshot(make_cluster().blocks("h", 12, nodes=32, per_leaf=8))
               .team("fraud", h100=256).team("search", h100=512).config(**config))
    for b in range(12):
        for k in range(4):
            builder = builder.run(make_job(f"h{b}-{k}").team("search").pods(1, 8).limit(4 * H),
                                  f"h{b}-n{k * 8:02d}", started=-H * (1 + b % 3))
    return World(builder.pending(make_job("ft").pods(32, 8).required("block")).build())


def test_twelve_blocks_each_with_four_busy_nodes_cannot_start_a_required_block_job() -> None:
    """Without moving work the job waits for the first block to drain, and its reason says why."""
    world = twelve_blocks_each_with_four_busy_nodes(migrate_max_moves=0)
    result = run_cycle(world.snapshot, 0.0)
    assert result.admits == [] and result.preempts == []
    (wait,) = result.waits
    assert wait.reason.value == "WaitingForTopology"
    assert wait.message.startswith("needs 32 whole free nodes in one block (required: block); the largest free "
                                   "block has 28 (2,688 h100 free in all)")
    assert wait.estimated_start == 1 * H == result.reservations[0].start_at   # the first block to drain


def test_twelve_blocks_each_with_four_busy_nodes_move_four_small_jobs_and_the_block_job_starts() -> None:
    """"Defragment at checkpoint boundaries": the four jobs of the block that loses least by moving (the ones
    started last, h0) checkpoint and leave; the gang takes block h0 when they have gone, 5 minutes later
    instead of an hour, and the four restart at once elsewhere."""
    world = twelve_blocks_each_with_four_busy_nodes()
    first = run_cycle(world.snapshot, 0.0)
    assert sorted((p.job_id, p.reason.value, p.requeue, p.for_job) for p in first.preempts) == [
        (f"h0-{k}", "Defragment", True, "ft") for k in range(4)]
    assert [(w.job_id, w.reason.value, w.estimated_start) for w in first.waits] == [
        ("ft", "PreemptingVictims", 300.0)]
    world.apply(first)
    world.advance(300.0)
    second = run_cycle(world.snapshot, 300.0)
    placed = {a.job_id: {p.node[:3].rstrip("-") for p in a.placement.pods} for a in second.admits}
    assert placed.pop("ft") == {"h0"}
    assert sorted(placed) == [f"h0-{k}" for k in range(4)] and all(nodes != {"h0"} for nodes in placed.values())
