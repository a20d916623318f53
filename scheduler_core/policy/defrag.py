"""Defragmentation: when the largest free shape falls far below the free GPUs, move a few small jobs.

"Twelve blocks each with four busy nodes" leave 2,688 GPUs free and no whole block: a ``required: block``
job cannot start although a fifth of the cluster is idle. When a gang waits on a flavour and the largest free
whole-node shape in one block is below ``defrag_ratio`` of the free units, stop at most ``defrag_max_moves``
small preemptible jobs (single pod, at most ``small_job_max_units``) that sit outside the small-job blocks, on
the block they block the most, provided each of them fits into a small-job block right now. They checkpoint
on SIGTERM (the cost order prefers those that checkpointed recently), go back to the front of their queue and,
being single-node work, land in a small-job block next cycle (Gandiva's migration, at checkpoint boundaries).

Only one round of moves at a time: while a moved job is still terminating, nothing more moves.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..model.job import PriorityClass
from .capacity import Capacity, Pool
from .placement import PlaceContext, place
from .preemption import Victim, victim
from .record import record
from .snapshot import PolicyConfig, RunningJob


@record
class Shape:
    """Free units of a flavour next to the largest free whole-node shape inside one block."""

    free_units: int
    largest_block_units: int


def free_shape(pool: Pool) -> Shape:
    cap = pool.uniform_cap or pool.max_cap
    largest = max((pool.whole[b] for b in pool.blocks), default=0) * cap
    return Shape(pool.free_units, largest)


def fragmented(pool: Pool, config: PolicyConfig) -> bool:
    """The largest free whole-node shape in one block is below ``defrag_ratio`` of the free units."""
    if pool.uniform_cap is None or config.defrag_max_moves <= 0:
        return False
    shape = free_shape(pool)
    return shape.free_units > 0 and shape.largest_block_units < config.defrag_ratio * shape.free_units


def movable(job: RunningJob, now: float, config: PolicyConfig) -> bool:
    request = job.request
    return (request.pods == 1 and request.units <= config.small_job_max_units and request.preemptible
            and not job.terminating and request.priority_class is not PriorityClass.CRITICAL
            and now - job.started_at >= config.min_run_time_s)


def moves_in_flight(cap: Capacity, pool: Pool, running: Iterable[RunningJob], config: PolicyConfig) -> bool:
    """A small job outside the small-job blocks is terminating: an earlier round of moves is not done."""
    for job in running:
        if (job.terminating and job.placement.flavour == pool.flavour and job.request.pods == 1
                and job.request.units <= config.small_job_max_units and job.placement.pods):
            i = cap.index.get(job.placement.pods[0].node)
            if i is not None and i in pool.pos and not pool.small[pool.pos[i]]:
                return True
    return False


def plan_moves(cap: Capacity, pool: Pool, running: Sequence[RunningJob], now: float,
               config: PolicyConfig) -> list[Victim]:
    """Small jobs to move so one block of ``pool`` opens up; empty when not worth it or not possible.

    ``running`` are the jobs still running after this cycle's own decisions (none terminating)."""
    if not fragmented(pool, config):
        return []
    on_node: dict[int, list[RunningJob]] = {}
    for job in running:
        for i in {cap.index[p.node] for p in job.placement.pods if p.node in cap.index}:
            on_node.setdefault(i, []).append(job)
    small_blocks = [b for b, nodes in pool.blocks.items() if nodes and pool.small[nodes[0]]]
    if not small_blocks:
        return []
    best: tuple[tuple[int, int, int], list[RunningJob]] | None = None
    current = max((pool.whole[b] for b in pool.blocks), default=0)
    for b in sorted(pool.blocks):
        nodes = pool.blocks[b]
        if pool.small[nodes[0]]:
            continue
        options: list[tuple[int, float, int, list[RunningJob]]] = []
        for j in nodes:
            if not pool.usable[j] or pool.spare[j] or pool.free[j] == pool.cap[j]:
                continue
            jobs = on_node.get(pool.members[j], [])
            if not jobs or not all(movable(job, now, config) for job in jobs):
                continue
            options.append((len(jobs), sum(victim(job, now, config).gpu_hours for job in jobs), j, jobs))
        options.sort(key=lambda o: (o[0], o[1], o[2]))
        chosen: list[RunningJob] = []
        cleared = 0
        for count, _, _, jobs in options:
            if len(chosen) + count > config.defrag_max_moves:
                break
            chosen.extend(jobs)
            cleared += 1
        opened = pool.whole[b] + cleared
        if cleared and opened > current:
            rank = (-opened, len(chosen), b)
            if best is None or rank < best[0]:
                best = (rank, chosen)
    if best is None:
        return []
    moves = sorted(best[1], key=lambda job: job.request.id)
    if not _fit_in_small_blocks(cap, pool, moves, small_blocks, now):
        return []
    return [victim(job, now, config) for job in moves]


def _fit_in_small_blocks(cap: Capacity, pool: Pool, jobs: Sequence[RunningJob], blocks: Sequence[int],
                         now: float) -> bool:
    """Whether every moved job fits a small-job block now, placed one after another (then undone)."""
    placed = []
    ok = True
    for job in jobs:
        found = None
        for b in sorted(blocks):
            ctx = PlaceContext(end=now + job.request.time_limit_s, within_block=b)
            found = place(cap, pool, job.request, ctx, True)
            if found is not None:
                break
        if found is None:
            ok = False
            break
        cap.occupy(job.request, found)
        placed.append((job, found))
    for job, found in placed:
        cap.release(job.request, found)
    return ok
