"""Liveness over random clusters, queues and failures: a job that fits free healthy capacity and its team's
unused nominal quota is admitted within a bounded time, unless its reason names what holds that capacity by a
rule (a reservation it would delay, or whose quota its team holds for it; victims already signalled for it;
nominal quota lent to borrowers that may not be stopped yet).

The bound is the policy's own windows: a job requeued off a node (a failure, a move) keeps off it for
``avoid_nodes_for_s`` and no longer. Nodes fail between cycles (their jobs requeued off them, as the controller
does) and come back; after the last failure's windows have passed, every cycle must satisfy the rule.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from scheduler_core.bench.world import World
from scheduler_core.model import Health
from scheduler_core.policy.cycle import run_cycle
from scheduler_core.policy.decisions import CycleResult, Reason
from scheduler_core.policy.snapshot import AdmittedAs, NodeState, PendingJob, Snapshot

from .test_properties import SETTINGS, describe, worlds

#: Reasons that name the holder of the room by a rule.
_BY_RULE = {Reason.BEHIND_RESERVATION, Reason.PREEMPTING_VICTIMS}


def fail(world: World, node: str, now: float) -> None:
    """``node`` is lost: it goes to repair, and each job with a pod there is requeued off it, on its block's
    spare first (what the controller does on a lost pod)."""
    snap = world.snapshot
    block = next(n.block for n in snap.nodes if n.name == node)
    nodes = tuple(replace(n, health=Health.REPAIR) if n.name == node else n for n in snap.nodes)
    pending = list(snap.pending)
    running = []
    for job in snap.running:
        if node in job.placement.nodes:
            pending.append(PendingJob(job.request, now, front_of_queue=True, restart_block=block,
                                      avoid_nodes=frozenset({node})))
        else:
            running.append(job)
    world.snapshot = replace(snap, nodes=nodes, pending=tuple(pending), running=tuple(running))


def repair(world: World, node: str) -> None:
    snap = world.snapshot
    world.snapshot = replace(snap, nodes=tuple(replace(n, health=Health.READY) if n.name == node else n
                                               for n in snap.nodes))


def free_room(snap: Snapshot, job: PendingJob) -> list[str]:
    """Ready, non-spare nodes where the single-pod ``job`` fits the free units, CPUs and memory now."""
    request = job.request
    used: dict[tuple[str, str], int] = {}
    cpu: dict[str, int] = {}
    mem: dict[str, int] = {}
    for running in snap.running:
        for pod in running.placement.pods:
            key = (pod.node, running.placement.flavour)
            used[key] = used.get(key, 0) + len(pod.units)
            cpu[pod.node] = cpu.get(pod.node, 0) + running.request.cpus_per_pod
            mem[pod.node] = mem.get(pod.node, 0) + running.request.memory_gb_per_pod
    out = []
    for node in snap.nodes:
        if not node.schedulable or node.spare:
            continue
        for flavour in request.flavours:
            free = node.capacity.get(flavour, 0) - used.get((node.name, flavour), 0)
            if (free >= request.units_per_pod
                    and node.cpus - cpu.get(node.name, 0) >= request.cpus_per_pod
                    and node.memory_gb - mem.get(node.name, 0) >= request.memory_gb_per_pod):
                out.append(node.name)
                break
    return out


def within_nominal(snap: Snapshot, job: PendingJob, reserved: dict[tuple[str, str], int]) -> bool:
    """The job fits its team's unused nominal quota on one of its flavours without reclaiming it: a promise the
    cohort can keep now. (Nominal quota lent to borrowers that may not be stopped, a higher band or work inside
    its minimum run time, is held by a rule until they leave.) The team's reserved jobs (``reserved``: units per
    (team, flavour)) come first, as the policy judges a nominal promise: on the cohort now plus its own team's
    reservations."""
    request = job.request
    cohort = snap.teams[request.team].cohort
    for flavour in request.flavours:
        quota = snap.teams[request.team].quotas.get(flavour)
        if quota is None:
            continue
        usage = {name: sum(r.request.units for r in snap.running if r.request.team == name
                           and r.placement.flavour == flavour and r.admitted_as is not AdmittedAs.SCAVENGER)
                 for name, team in snap.teams.items() if team.cohort == cohort}
        usage[request.team] += reserved.get((request.team, flavour), 0)

        def pool(extra: int) -> int:
            total = 0
            for name, used in usage.items():
                q = snap.teams[name].quotas.get(flavour)
                if q is None:
                    continue
                used += extra if name == request.team else 0
                lend = q.nominal if q.lending_limit is None else q.lending_limit
                total += max(0, min(lend, q.nominal - used)) - max(0, used - q.nominal)
            return total

        if usage[request.team] + request.units <= quota.nominal and pool(request.units) >= 0:
            return True
    return False


def check_live(before: Snapshot, after: Snapshot, result: CycleResult, settled_at: float) -> None:
    """After the cycle's admissions are applied, no single-pod job that has outlived its windows waits beside
    room it fits and quota it is owed, unless its reason names what holds the room by a rule."""
    jobs = {p.request.id: p for p in before.pending}
    # A reserved job's quota is held for it: its team's later work may not take what it will need.
    reserved_teams = {jobs[r.job_id].request.team for r in result.reservations if r.job_id in jobs}
    reserved: dict[tuple[str, str], int] = {}
    for r in result.reservations:
        if r.job_id in jobs:
            key = (jobs[r.job_id].request.team, r.flavour)
            reserved[key] = reserved.get(key, 0) + jobs[r.job_id].request.units
    for wait in result.waits:
        job = jobs[wait.job_id]
        if job.request.pods != 1 or wait.reason in _BY_RULE:
            continue
        if wait.reason.is_quota and job.request.team in reserved_teams:
            continue
        if job.avoid_nodes and result.now < max(job.queued_at, settled_at) + before.config.avoid_nodes_for_s:
            continue
        room = free_room(after, job)
        assert not (room and within_nominal(after, job, reserved)), (
            f"{wait.job_id} waits ({wait.reason.value}: {wait.message}) beside free room on {room} "
            f"within its team's nominal quota")


@SETTINGS
@given(worlds(), st.data())
def test_a_job_that_fits_starts_within_the_policy_windows(case: tuple[World, list[float]], data: Any) -> None:
    world, gaps = case
    names = [n.name for n in world.snapshot.nodes]
    failures = data.draw(st.lists(st.tuples(st.integers(0, len(gaps) - 1), st.sampled_from(names)),
                                  max_size=3), label="failures")
    note(describe(world, gaps))
    now = 0.0
    last_failure = 0.0
    broken: dict[str, int] = {}
    # The drawn gaps with failures and repairs between them, then quiet cycles past every window.
    quiet = world.snapshot.config.avoid_nodes_for_s + world.snapshot.config.topology_widen_after_s
    schedule = gaps + [quiet, 600.0, 600.0]
    for k, gap in enumerate(schedule):
        for when, node in failures:
            if when == k and node not in broken:
                fail(world, node, now)
                broken[node] = k
                last_failure = now
        for node, since in list(broken.items()):
            if k - since >= 2:
                repair(world, node)
                del broken[node]
        before = world.snapshot
        result = run_cycle(before, now)
        world.apply(result)
        if k >= len(gaps):
            check_live(before, world.snapshot, result, last_failure)
        now += gap
        world.advance(now)


def test_the_regression_from_the_trace_a_restarted_job_is_not_kept_off_its_only_room() -> None:
    """The ITP replay's case in miniature: a 1-GPU A100 job whose node failed is requeued off it; the node is
    repaired; every other A100 is busy for days. It must start on the repaired node once its window passes."""
    from .builders import make_cluster, make_job, make_snapshot

    snap = (make_snapshot(make_cluster().block("a0", 2, gpu="a100")).team("fraud", a100=16).team("search", a100=8)
            .run(make_job("long").team("search").flavour("a100").pods(1, 8).limit(30 * 86400.0), "a0-n00",
                 started=0.0)
            .run(make_job("a").flavour("a100").pods(1, 1), "a0-n01", started=0.0).build())
    world = World(snap, runtime={"long": 30 * 86400.0})
    fail(world, "a0-n01", 100.0)
    repair(world, "a0-n01")
    now, started = 100.0, None
    for _ in range(10):
        result = run_cycle(world.snapshot, now)
        world.apply(result)
        if any(a.job_id == "a" for a in result.admits):
            started = now
            break
        now += 600.0
        world.advance(now)
    assert started is not None and started - 100.0 <= world.snapshot.config.avoid_nodes_for_s + 600.0
    node: NodeState = next(n for n in world.snapshot.nodes if n.name == "a0-n01")
    assert node.schedulable
