"""Gang placement: all-or-nothing, required/preferred topology with a bounded wait, best fit, small-job blocks,
hot spares, MIG slice geometry, health, CPU and memory, equivalence classes — as whole decision lists."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import pytest

from scheduler_core.policy.cycle import run_cycle
from scheduler_core.policy.snapshot import Snapshot

from .builders import H, decisions, make_cluster, make_job, make_snapshot, nodes_of


class Case(NamedTuple):
    name: str
    snapshot: Callable[[], Snapshot]
    now: float
    expected: list[tuple[Any, ...]]


def eight_and_eight() -> Any:
    return make_cluster().block("b0", 8, per_leaf=4).block("b1", 8, per_leaf=4)


def placing_only(builder: Any) -> Any:
    """No moving of running work for a gang (tested in test_preemption_and_backfill): placement alone."""
    return builder.config(migrate_max_moves=0)


def busy(builder: Any, block: str, count: int, started: float = -1000.0) -> Any:
    """``count`` nodes of ``block`` busy with one 8-GPU job each (search's, nominal), ending at 4 h + started."""
    for k in range(count):
        builder = builder.run(make_job(f"{block}-busy{k}").team("search").pods(1, 8), f"{block}-n{7 - k:02d}",
                              started=started)
    return builder


def four_by(blocks: int) -> Any:
    cluster = make_cluster()
    for b in range(blocks):
        cluster = cluster.block(f"b{b}", 4)
    return cluster


def busy_nodes(builder: Any, block: str, nodes: list[int], started: float = -1000.0) -> Any:
    """Nodes ``nodes`` of ``block`` busy with one 8-GPU job each (search's), ending at 4 h + ``started``."""
    for n in nodes:
        builder = builder.run(make_job(f"{block}-busy{n}").team("search").pods(1, 8), f"{block}-n{n:02d}",
                              started=started)
    return builder


CASES = [
    Case("required block never splits: enough nodes in all, not in one block",
         lambda: placing_only(busy(busy(make_snapshot(eight_and_eight()).team("fraud", h100=64)
                                        .team("search", h100=64), "b0", 3), "b1", 3))
         .pending(make_job("g").pods(6, 8).required("block")).build(),
         0.0, [("reserve", "g", "b0-n00 b0-n01 b0-n02 b0-n05 b0-n06 b0-n07", 4 * H - 1000),
               ("wait", "g", "WaitingForTopology", 1, 4 * H - 1000)]),
    Case("preferred block waits for one block during the bounded wait, then may spread",
         lambda: busy(busy(make_snapshot(eight_and_eight()).team("fraud", h100=64).team("search", h100=64),
                           "b0", 3), "b1", 3)
         .pending(make_job("g").pods(6, 8).preferred("block").pending(queued_at=-100)).build(),
         0.0, [("reserve", "g", " ".join(nodes_of("b0", 5) + ["b1-n00"]), 200.0),
               ("wait", "g", "WaitingForTopology", 1, 200.0)]),
    Case("preferred block widens after the bounded wait, over as few blocks as possible",
         lambda: busy(busy(make_snapshot(eight_and_eight()).team("fraud", h100=64).team("search", h100=64),
                           "b0", 3), "b1", 3)
         .pending(make_job("g").pods(6, 8).preferred("block").pending(queued_at=-400)).build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b0", 5) + nodes_of("b1", 1)))]),
    Case("a preferred gang as large as a block never spreads, even after the bounded wait, while a block can "
         "be whole by the end of its window",
         lambda: placing_only(busy_nodes(busy_nodes(make_snapshot(four_by(2)).team("fraud", h100=64)
                                                    .team("search", h100=64), "b0", [3], started=-8000), "b1", [3]))
         .pending(make_job("g").pods(4, 8).preferred("block").pending(queued_at=-400)).build(),
         0.0, [("reserve", "g", " ".join(nodes_of("b0", 4)), 4 * H - 8000),
               ("wait", "g", "WaitingForTopology", 1, 4 * H - 8000)]),
    Case("... until it has waited topology_cap_wait_s (a failed node may keep every block short for days)",
         lambda: placing_only(busy_nodes(busy_nodes(make_snapshot(four_by(2)).team("fraud", h100=64)
                                                    .team("search", h100=64), "b0", [3]), "b1", [3]))
         .pending(make_job("g").pods(4, 8).preferred("block").pending(queued_at=-7200)).build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b0", 3) + nodes_of("b1", 1)))]),
    Case("... counted from when it began waiting for room: hours held by its team's quota do not count",
         lambda: placing_only(busy_nodes(busy_nodes(make_snapshot(four_by(2)).team("fraud", h100=64)
                                                    .team("search", h100=64), "b0", [3], started=-8000), "b1", [3]))
         .pending(make_job("g").pods(4, 8).preferred("block").pending(queued_at=-7200, room_wait_since=-100))
         .build(),
         0.0, [("reserve", "g", " ".join(nodes_of("b0", 4)), 4 * H - 8000),
               ("wait", "g", "WaitingForTopology", 1, 4 * H - 8000)]),
    Case("... but spreads at once when no block can be whole by then: each has a node out for repair or work no "
         "move shifts (a non-preemptible job), so waiting would only idle the GPUs it could run on",
         lambda: make_snapshot(four_by(2).health("b0-n03", "repair")).team("fraud", h100=64)
         .team("search", h100=64)
         .run(make_job("np").team("search").pods(1, 8).non_preemptible(), "b1-n03", started=-1000)
         .pending(make_job("g").pods(4, 8).preferred("block").pending(queued_at=-400)).build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b0", 3) + nodes_of("b1", 1)))]),
    Case("... while one whose time limit ends inside the window (here the non-preemptible job's) keeps it",
         lambda: busy_nodes(make_snapshot(four_by(2).health("b0-n03", "repair")).team("fraud", h100=64)
                            .team("search", h100=64), "b1", [2])
         .run(make_job("np").team("search").pods(1, 8).non_preemptible(), "b1-n03", started=-8000)
         .pending(make_job("g").pods(4, 8).preferred("block").pending(queued_at=-400)).build(),
         0.0, [("reserve", "g", " ".join(nodes_of("b1", 4)), 4 * H - 1000),
               ("wait", "g", "WaitingForTopology", 1, 4 * H - 1000)]),
    Case("... where a move could clear a block, it moves the job instead (the window holds)",
         lambda: busy_nodes(make_snapshot(four_by(2).health("b0-n03", "repair")).team("fraud", h100=64)
                            .team("search", h100=64), "b1", [3])
         .pending(make_job("g").pods(4, 8).preferred("block").pending(queued_at=-400)).build(),
         0.0, [("preempt", "b1-busy3", "Defragment", 300.0, True, "g"),
               ("reserve", "g", " ".join(nodes_of("b1", 4)), 300.0), ("wait", "g", "PreemptingVictims", 1, 300.0)]),
    Case("widening counts all the time waited, quota waits included (five minutes of latency, not a shape)",
         lambda: busy(busy(make_snapshot(eight_and_eight()).team("fraud", h100=64).team("search", h100=64),
                           "b0", 3), "b1", 3)
         .pending(make_job("g").pods(6, 8).preferred("block").pending(queued_at=-4000, room_wait_since=-100))
         .build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b0", 5) + nodes_of("b1", 1)))]),
    Case("a preferred gang larger than any block spreads at once, over the fewest blocks",
         lambda: busy_nodes(make_snapshot(four_by(3)).team("fraud", h100=96).team("search", h100=64), "b0", [2, 3])
         .pending(make_job("g").pods(8, 8).preferred("block")).build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b1", 4) + nodes_of("b2", 4)))]),
    Case("... and waits rather than take more blocks than that, reserving the blocks that free soonest",
         lambda: busy_nodes(busy_nodes(make_snapshot(four_by(3)).team("fraud", h100=96).team("search", h100=64),
                                       "b0", [3], started=-4 * H + 1800), "b1", [3])
         .pending(make_job("g").pods(8, 8).preferred("block")).build(),
         0.0, [("reserve", "g", " ".join(nodes_of("b0", 4) + nodes_of("b2", 4)), 1800.0),
               ("wait", "g", "WaitingForTopology", 1, 1800.0)]),
    Case("... but a gang broken by a failure takes one block more at once when those blocks free only after its "
         "window (a failed node keeps a block short for two days)",
         lambda: busy_nodes(busy_nodes(make_snapshot(four_by(3)).team("fraud", h100=96).team("search", h100=64),
                                       "b0", [3]), "b1", [3])
         .pending(make_job("g").pods(8, 8).preferred("block").pending(queued_at=-300, restart_block="b0"))
         .build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b2", 4) + nodes_of("b0", 3)
                                                   + nodes_of("b1", 1)))]),
    Case("... while a gang not broken by a failure keeps to two blocks (here moving a job off one of them)",
         lambda: busy_nodes(busy_nodes(make_snapshot(four_by(3)).team("fraud", h100=96).team("search", h100=64),
                                       "b0", [3]), "b1", [3])
         .pending(make_job("g").pods(8, 8).preferred("block").pending(queued_at=-300)).build(),
         0.0, [("preempt", "b0-busy3", "Defragment", 300.0, True, "g"),
               ("reserve", "g", " ".join(nodes_of("b0", 4) + nodes_of("b2", 4)), 300.0),
               ("wait", "g", "PreemptingVictims", 1, 300.0)]),
    Case("best fit: the block with the fewest free nodes that still fits",
         lambda: busy(make_snapshot(eight_and_eight()).team("fraud", h100=64).team("search", h100=64), "b1", 5)
         .pending(make_job("g").pods(3, 8).required("block")).build(),
         0.0, [("admit", "g", "nominal", "b1-n00:0-7 b1-n01:0-7 b1-n02:0-7")]),
    Case("the smallest domain first: a leaf before a block",
         lambda: make_snapshot(make_cluster().block("b0", 8, per_leaf=4)).team("fraud", h100=64).team("search", h100=64)
         .run(make_job("x").team("search").pods(1, 8), "b0-n00", started=-100)
         .pending(make_job("g").pods(3, 8).preferred("block")).build(),
         0.0, [("admit", "g", "nominal", "b0-n01:0-7 b0-n02:0-7 b0-n03:0-7")]),
    Case("single-node work goes to the small-job block first; gangs keep out of it",
         lambda: make_snapshot(make_cluster().block("b0", 4).block("s0", 4, small=True)).team("fraud", h100=64)
         .pending(make_job("one").pods(1, 8), make_job("trial").pods(1, 1).kind("trial").submitted(1),
                  make_job("gang").pods(2, 8).submitted(2)).build(),
         0.0, [("admit", "one", "nominal", "s0-n00:0-7"), ("admit", "trial", "nominal", "s0-n01:0"),
               ("admit", "gang", "nominal", "b0-n00:0-7 b0-n01:0-7")]),
    Case("a single pod goes to the node with the fewest free units that fit",
         lambda: make_snapshot(make_cluster().block("b0", 3)).team("fraud", h100=24).team("search", h100=24)
         .run(make_job("x").team("search").pods(1, 4), "b0-n01", started=-100)
         .run(make_job("y").team("search").pods(1, 6), "b0-n02", started=-100)
         .pending(make_job("a").pods(1, 3), make_job("b").pods(1, 2).submitted(1)).build(),
         0.0, [("admit", "a", "nominal", "b0-n01:4-6"), ("admit", "b", "nominal", "b0-n02:6-7")]),
    Case("a job of 2 pods × 4 GPUs packs on one node",
         lambda: make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=16)
         .pending(make_job("a").pods(2, 4)).build(),
         0.0, [("admit", "a", "nominal", "b0-n00:0-3 b0-n00:4-7")]),
    Case("single-node work never takes a hot spare",
         lambda: make_snapshot(make_cluster().block("b0", 2, spares=1)).team("fraud", h100=16).team("search", h100=8)
         .run(make_job("x").team("search").pods(1, 8), "b0-n00", started=-1000)
         .pending(make_job("a").pods(1, 8)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 1000), ("wait", "a", "WaitingForCapacity", 1, 4 * H - 1000)]),
    Case("a gang uses a spare only when it cannot fit otherwise: a whole block",
         lambda: make_snapshot(make_cluster().block("b0", 4, spares=1)).team("fraud", h100=32)
         .pending(make_job("g").pods(4, 8).required("block")).build(),
         0.0, [("admit", "g", "nominal", " ".join(f"{n}:0-7" for n in nodes_of("b0", 4)))]),
    Case("... and is reserved on the spare when it cannot fit otherwise: a whole leaf (the plan places as admission does)",
         lambda: make_snapshot(make_cluster().block("b0", 2, spares=1)).team("fraud", h100=16).team("search", h100=8)
         .run(make_job("x").team("search").pods(1, 8), "b0-n00", started=-1000)
         .pending(make_job("g").pods(2, 8).required("leaf")).build(),
         0.0, [("reserve", "g", "b0-n00 b0-n01", 4 * H - 1000), ("wait", "g", "WaitingForCapacity", 1, 4 * H - 1000)]),
    Case("... and a gang waiting for victims that leave a spare is planned there, not later on the nodes without it",
         lambda: make_snapshot(make_cluster().block("b0", 2, spares=1)).team("fraud", h100=16).team("search", h100=16)
         .run(make_job("x").team("search").pods(1, 8).non_preemptible(), "b0-n00", started=-1000)
         .run(make_job("v").team("search").pods(1, 8), "b0-n01", started=-1000, terminating=True,
              terminate_by=300.0, preempted_for="g")
         .pending(make_job("g").pods(2, 4).non_preemptible()).build(),
         0.0, [("reserve", "g", "b0-n01", 300.0), ("wait", "g", "PreemptingVictims", 1, 300.0)]),
    Case("a block-sized preferred gang whose only block large enough has a node out spreads at once: the smaller "
         "blocks, whole, do not hold it",
         lambda: make_snapshot(make_cluster().block("b0", 3, per_leaf=2).block("b1", 2, per_leaf=2)
                               .block("b2", 2, per_leaf=2).health("b0-n00", "suspect")).team("fraud", h100=24)
         .pending(make_job("g").pods(3, 8).preferred("leaf").non_preemptible()).build(),
         0.0, [("admit", "g", "nominal", "b0-n01:0-7 b0-n02:0-7 b1-n00:0-7")]),
    Case("a gang restarted after a failure takes its block's spare first",
         lambda: make_snapshot(make_cluster().block("b0", 4, spares=1).block("b1", 4, spares=1))
         .team("fraud", h100=64)
         .pending(make_job("g").pods(2, 8).required("block").pending(restart_block="b1")).build(),
         0.0, [("admit", "g", "nominal", "b1-n03:0-7 b1-n00:0-7")]),
    Case("MIG: slices go on the GPU with the fewest free slices that holds them",
         lambda: make_snapshot(make_cluster().mig_block("m0", 1)).team("fraud", h100_mig_1g=56)
         .team("search", h100_mig_1g=56)
         .run(make_job("nb").team("search").flavour("h100-mig-1g").pods(1, 5).kind("notebook"), "m0-n00",
              started=-100)
         .pending(make_job("two").flavour("h100-mig-1g").pods(1, 2).kind("notebook"),
                  make_job("three").flavour("h100-mig-1g").pods(1, 3).kind("notebook").submitted(1)).build(),
         0.0, [("admit", "two", "nominal", "m0-n00:5-6"), ("admit", "three", "nominal", "m0-n00:7-9")]),
    Case("a node that is not ready takes no new work: NodeUnhealthy; its running job stays",
         lambda: make_snapshot(make_cluster().block("b0", 2).health("b0-n01", "suspect")).team("fraud", h100=16)
         .team("search", h100=8)
         .run(make_job("x").team("search").pods(1, 8), "b0-n00", started=-1000)
         .run(make_job("y").team("search").pods(1, 1), "b0-n01", started=-1000)
         .pending(make_job("a").pods(1, 4)).build(),
         0.0, [("reserve", "a", "b0-n00", 4 * H - 1000), ("wait", "a", "NodeUnhealthy", 1, 4 * H - 1000)]),
    Case("nodes a job must avoid are never used",
         lambda: make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=16)
         .pending(make_job("a").pods(1, 8).pending(avoid=["b0-n00"])).build(),
         0.0, [("admit", "a", "nominal", "b0-n01:0-7")]),
    Case("a job keeps off the nodes it left while avoid_nodes_for_s runs, even when only they are free",
         lambda: make_snapshot(make_cluster().block("a0", 2, gpu="a100")).team("fraud", a100=16)
         .team("search", a100=8)
         .run(make_job("x").team("search").flavour("a100").pods(1, 8), "a0-n00", started=-1000)
         .pending(make_job("a").flavour("a100").pods(1, 1).pending(queued_at=-1000, avoid=["a0-n01"])).build(),
         0.0, [("reserve", "a", "a0-n01", 800.0), ("wait", "a", "WaitingForTopology", 1, 800.0)]),
    Case("liveness: once avoid_nodes_for_s has passed, a node it left (back in service) takes it",
         lambda: make_snapshot(make_cluster().block("a0", 2, gpu="a100")).team("fraud", a100=16)
         .team("search", a100=8)
         .run(make_job("x").team("search").flavour("a100").pods(1, 8), "a0-n00", started=-1000)
         .pending(make_job("a").flavour("a100").pods(1, 1).pending(queued_at=-1801, avoid=["a0-n01"])).build(),
         0.0, [("admit", "a", "nominal", "a0-n01:0")]),
    Case("CPUs count: a node whose CPUs are taken takes no CPU-hungry pod",
         lambda: make_snapshot(make_cluster().block("b0", 2)).team("fraud", h100=16).team("search", h100=16)
         .run(make_job("cpu").team("search").pods(1, 1).cpus(180), "b0-n00", started=-100)
         .pending(make_job("a").pods(1, 2).cpus(48)).build(),
         0.0, [("admit", "a", "nominal", "b0-n01:0-1")]),
    Case("equivalence classes: identical trials share one answer; the first ones fill the free units",
         lambda: make_snapshot(make_cluster().block("b0", 1)).team("search", h100=64).team("fraud", h100=8)
         .run(make_job("x").team("fraud").pods(1, 5), "b0-n00", started=-1000)
         .pending(*[make_job(f"t{k:02d}").team("search").pods(1, 1).kind("trial").limit(H).submitted(k)
                    for k in range(6)]).build(),
         0.0, [("admit", "t00", "nominal", "b0-n00:5"), ("admit", "t01", "nominal", "b0-n00:6"),
               ("admit", "t02", "nominal", "b0-n00:7"), ("reserve", "t03", "b0-n00", H),
               ("reserve", "t04", "b0-n00", H), ("reserve", "t05", "b0-n00", H),
               ("wait", "t03", "WaitingForCapacity", 1, H), ("wait", "t04", "WaitingForCapacity", 2, H),
               ("wait", "t05", "WaitingForCapacity", 3, H)]),
    Case("a single pod that takes a whole node takes it from a block with a node out, which no block-sized "
         "gang can have until the repair: the other blocks stay whole",
         lambda: make_snapshot(four_by(2).health("b1-n03", "repair")).team("search", h100=64)
         .pending(make_job("s").team("search").pods(1, 8)).build(),
         0.0, [("admit", "s", "nominal", "b1-n00:0-7")]),
    Case("... and with every node in, the first free node, as always",
         lambda: make_snapshot(four_by(2)).team("search", h100=64)
         .pending(make_job("s").team("search").pods(1, 8)).build(),
         0.0, [("admit", "s", "nominal", "b0-n00:0-7")]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decisions(case: Case) -> None:
    assert decisions(run_cycle(case.snapshot(), case.now)) == case.expected


def test_a_job_kept_off_the_only_free_node_says_so_and_when_it_may_use_it() -> None:
    """The restart-after-failure case from a real trace: a 1-GPU job requeued off the one node that later had
    room waited 28 simulated days on "at most 8 on any schedulable node" beside an empty node."""
    snap = (make_snapshot(make_cluster().block("a0", 2, gpu="a100")).team("fraud", a100=16).team("search", a100=8)
            .run(make_job("x").team("search").flavour("a100").pods(1, 8), "a0-n00", started=-1000)
            .pending(make_job("a").flavour("a100").pods(1, 1).pending(queued_at=-600, avoid=["a0-n01"])).build())
    (wait,) = run_cycle(snap, 0.0).waits
    assert wait.message.startswith("fits only on nodes it left after a failure or a move (a0-n01); may use "
                                   "them in 20m")
    assert wait.estimated_start == 1200.0
    assert [a.job_id for a in run_cycle(snap, 1200.0).admits] == ["a"]


def test_required_block_reason_names_the_largest_free_block() -> None:
    snap = placing_only(busy(busy(make_snapshot(eight_and_eight()).team("fraud", h100=64).team("search", h100=64),
                                  "b0", 3), "b1", 3)).pending(make_job("g").pods(6, 8).required("block")).build()
    (wait,) = run_cycle(snap, 0.0).waits
    assert wait.message.startswith("needs 6 whole free nodes in one block (required: block); the largest free "
                                   "block has 5 (80 h100 free in all)")


def test_a_shape_no_domain_can_ever_hold_says_so_and_has_no_estimate() -> None:
    snap = make_snapshot(eight_and_eight()).team("fraud", h100=128).pending(
        make_job("g").pods(12, 8).required("block")).build()
    (wait,) = run_cycle(snap, 0.0).waits
    assert (wait.reason.value, wait.estimated_start) == ("WaitingForTopology", None)
    assert "can never fit" in wait.message
