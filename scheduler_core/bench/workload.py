"""A realistic busy-hour snapshot for ``shoal bench cycle``: the reference cluster (or the same design scaled to
any node count), its 40 teams, running work placed by the policy itself, and a pending queue with the reference
mix — a 500-trial sweep, notebooks on MIG slices, single-node fine-tunes, multi-node gangs, 256-GPU block jobs and
a 1,024-GPU pre-training run.

Deterministic for a given seed (``random.Random(seed)``, never the global generator).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from ..config import load_cluster, load_teams
from ..model.cluster import ClusterConfig, Node
from ..model.job import JobKind, PriorityClass, TopologyLevel
from ..model.team import Quota, TeamConfig
from ..policy.cycle import run_cycle
from ..policy.snapshot import (JobRequest, NodeState, PendingJob, Plan, PolicyConfig, RunningJob, Snapshot,
                               TeamState)
from .world import World

H = 3600.0
BLOCK_NODES = 32
#: Set-up cycles carry an empty plan: their estimated starts are not needed, only their decisions.
_NO_PLAN = Plan(made_at=0.0)


def cluster_nodes(nodes: int) -> list[Node]:
    """The reference cluster for 512 nodes; otherwise the same design (32-node blocks, three quarters H100,
    one spare per block, an H100 and an A100 small-job block, 8 MIG nodes) at ``nodes`` nodes."""
    if nodes == 512:
        return load_cluster("reference")[1]
    if nodes < 2 * BLOCK_NODES:
        raise ValueError(f"the bench cluster needs at least {2 * BLOCK_NODES} nodes, got {nodes}")
    blocks = nodes // BLOCK_NODES
    h100 = max(1, round(blocks * 0.75))
    a100 = blocks - h100
    configs: list[dict[str, object]] = []
    if h100 > 1:
        configs.append({"name": "h100-b{i:02d}", "repeat": h100 - 1, "gpu": "h100", "nodes": BLOCK_NODES,
                        "spares": 1})
    configs.append({"name": f"h100-b{h100 - 1:02d}", "small_jobs": True, "spares": 1, "nodes": [
        {"count": 8, "gpu": "h100", "mig": "1g.10gb"}, {"count": BLOCK_NODES - 8, "gpu": "h100"}]})
    if a100 > 1:
        configs.append({"name": "a100-b{i:02d}", "repeat": a100 - 1, "gpu": "a100", "nodes": BLOCK_NODES,
                        "spares": 1})
    if a100 >= 1:
        configs.append({"name": f"a100-b{a100 - 1:02d}", "small_jobs": True, "gpu": "a100",
                        "nodes": BLOCK_NODES, "spares": 1})
    rest = nodes - blocks * BLOCK_NODES
    if rest:
        configs.append({"name": "h100-extra", "gpu": "h100", "nodes": rest})
    return ClusterConfig.model_validate({"name": f"bench-{nodes}", "blocks": configs}).expand()


def teams_for(nodes: int) -> list[TeamConfig]:
    """The reference teams, their quotas scaled by ``nodes / 512``."""
    teams = load_teams("reference").teams
    if nodes == 512:
        return teams
    scale = nodes / 512

    def scaled(q: Quota) -> Quota:
        nominal = max(0, round(q.nominal * scale))
        lend = None if q.lending_limit is None else min(nominal, round(q.lending_limit * scale))
        borrow = None if q.borrowing_limit is None else round(q.borrowing_limit * scale)
        return Quota(nominal=nominal, borrowing_limit=borrow, lending_limit=lend)

    return [team.model_copy(update={"quotas": {f: scaled(q) for f, q in team.quotas.items()}}) for team in teams]


@dataclass(frozen=True, slots=True)
class Shape:
    weight: float
    kind: JobKind
    pods: tuple[int, int]
    units: tuple[int, ...]
    topology: tuple[TopologyLevel | None, bool]
    limit_h: tuple[float, float]


#: What waits at the busy hour, besides the sweep (weights sum to 1).
PENDING_MIX = (
    Shape(0.20, JobKind.TRIAL, (1, 1), (1,), (None, False), (0.5, 2)),
    Shape(0.10, JobKind.NOTEBOOK, (1, 1), (1,), (None, False), (2, 8)),
    Shape(0.30, JobKind.BATCH, (1, 1), (1, 2, 4, 8), (None, False), (1, 12)),
    Shape(0.20, JobKind.BATCH, (2, 4), (8,), (TopologyLevel.BLOCK, False), (2, 24)),
    Shape(0.12, JobKind.BATCH, (8, 16), (8,), (TopologyLevel.BLOCK, True), (4, 48)),
    Shape(0.07, JobKind.BATCH, (32, 32), (8,), (TopologyLevel.BLOCK, True), (6, 72)),
    Shape(0.01, JobKind.BATCH, (64, 128), (8,), (TopologyLevel.BLOCK, False), (24, 336)),
)

#: What runs: mostly small work, so 1,500 jobs fit 512 nodes at about 90 % allocation.
RUNNING_MIX = (
    Shape(0.50, JobKind.TRIAL, (1, 1), (1,), (None, False), (0.5, 2)),
    Shape(0.25, JobKind.NOTEBOOK, (1, 1), (1,), (None, False), (2, 8)),
    Shape(0.17, JobKind.BATCH, (1, 1), (1, 2, 4), (None, False), (1, 12)),
    Shape(0.04, JobKind.BATCH, (1, 1), (8,), (None, False), (2, 24)),
    Shape(0.015, JobKind.BATCH, (2, 4), (8,), (TopologyLevel.BLOCK, False), (4, 24)),
    Shape(0.0035, JobKind.BATCH, (8, 16), (8,), (TopologyLevel.BLOCK, True), (8, 48)),
    Shape(0.0015, JobKind.BATCH, (32, 32), (8,), (TopologyLevel.BLOCK, True), (12, 72)),
)


class _Factory:
    def __init__(self, rng: random.Random, teams: list[TeamConfig]) -> None:
        self.rng = rng
        self.teams = teams
        self.by_name = {t.name: t for t in teams}
        self.weights = [sum(q.nominal for f, q in t.quotas.items() if not f.startswith("h100-mig")) + 8
                        for t in teams]
        self.count = 0

    def job(self, mix: tuple[Shape, ...], submitted_at: float, team: str | None = None,
            shape: Shape | None = None) -> JobRequest:
        rng = self.rng
        shape = shape or rng.choices(mix, weights=[s.weight for s in mix])[0]
        team = team or rng.choices(self.teams, weights=self.weights)[0].name
        quotas = self.by_name[team].quotas
        self.count += 1
        pods = rng.randint(*shape.pods)
        units = rng.choice(shape.units)
        if shape.kind is JobKind.NOTEBOOK:
            flavours: tuple[str, ...] = ("h100-mig-1g",)
        else:
            options = [f for f in (("h100",), ("a100",), ("h100", "a100")) if all(x in quotas for x in f)]
            flavours = rng.choices(options, weights=[{1: 0.7, 2: 0.15}[len(f)] if f != ("a100",) else 0.15
                                                     for f in options])[0]
        if pods > 4 and "h100" in quotas:
            flavours = ("h100",)
        share = units / 8 if flavours[0] != "h100-mig-1g" else 1 / 56
        limit = rng.uniform(*shape.limit_h) * H
        priority = rng.choices([PriorityClass.STANDARD, PriorityClass.HIGH, PriorityClass.LOW,
                                PriorityClass.SCAVENGER], weights=[0.8, 0.08, 0.1, 0.02])[0]
        preemptible = shape.kind is not JobKind.NOTEBOOK
        return JobRequest(
            id=f"job-{self.count:06d}", team=team, kind=shape.kind, priority_class=priority, flavours=flavours,
            pods=pods, units_per_pod=units, cpus_per_pod=max(1, int(192 * min(share, 1.0))),
            memory_gb_per_pod=max(1, int(2048 * min(share, 1.0))), topology_level=shape.topology[0],
            topology_required=shape.topology[1], time_limit_s=round(limit), preemptible=preemptible,
            grace_s=300.0 if preemptible else 0.0, checkpoint_cost_s=rng.choice((10.0, 30.0, 60.0)),
            submitted_at=submitted_at)

    def pending(self, now: float) -> PendingJob:
        submitted = now - self.rng.uniform(0, 6 * H)
        request = self.job(PENDING_MIX, submitted)
        attained = self.rng.choice((0.0, 0.0, 1800.0, 5 * H, 10 * H)) if request.units <= 8 else 0.0
        return PendingJob(request, submitted + self.rng.uniform(0, 600), attained_gpu_s=attained)


def busy_snapshot(pending: int, nodes: int, running: int, *, seed: int = 7, now: float = 30 * 86400.0,
                  config: PolicyConfig | None = None) -> Snapshot:
    """:func:`warm_snapshot` whose running count lands near ``running``: the warm-up admits some of the queue
    as jobs finish (and reclaims stop some), so each build measures by how much it drifted and the next fills
    that much less, up to three corrections or until it is within 5 %."""
    fill = running
    snapshot = warm_snapshot(pending, nodes, fill, seed=seed, now=now, config=config)
    for _ in range(3):
        drift = len(snapshot.running) - running
        if running == 0 or abs(drift) <= max(1, running // 20):
            break
        fill = max(0, fill - drift)
        snapshot = warm_snapshot(pending, nodes, fill, seed=seed, now=now, config=config)
    return snapshot


def warm_snapshot(pending: int, nodes: int, running: int, *, seed: int = 7, now: float = 30 * 86400.0,
                  config: PolicyConfig | None = None, warmup: int = 12, step_s: float = 60.0, settle: int = 3,
                  cadence_s: float = 10.0) -> Snapshot:
    """The benchmark's snapshot: the busy hour in a steady state, not a cold start.

    1. Fill: ``running`` jobs of the running mix are admitted by ``run_cycle`` itself on the empty cluster, so
       placements and quota classes are the policy's own; their starts and checkpoints are spread over the
       past (some still inside their minimum run time).
    2. Queue: ``pending`` jobs (a 500-trial sweep, a 1,024-GPU run, the pending mix).
    3. Warm up: ``warmup`` cycles ``step_s`` apart (12 minutes: longer than a victim's grace period),
       decisions applied (reclaims signalled and carried out, arrivals topping the queue back up to
       ``pending``), so the snapshot is what the controller sees mid-afternoon: the first burst of reclaims
       settled, a few victims still terminating, and only fresh arrivals still to be sorted out.
    """
    rng = random.Random(seed)
    team_configs = teams_for(nodes)
    teams = {t.name: TeamState.from_config(t, decayed_usage={"gpu": rng.uniform(0, 2e6)}) for t in team_configs}
    node_states = tuple(NodeState.from_node(n) for n in cluster_nodes(nodes))
    factory = _Factory(rng, team_configs)
    config = config or PolicyConfig()
    start = now - 2 * H - warmup * step_s - settle * cadence_s
    admitted: list[RunningJob] = []
    stalled = 0
    while len(admitted) < running and stalled < 5:
        batch = [PendingJob(factory.job(RUNNING_MIX, start), start)
                 for _ in range(min(400, 2 * (running - len(admitted))))]
        snap = Snapshot(nodes=node_states, teams=teams, pending=tuple(batch), running=tuple(admitted),
                        config=config)
        result = run_cycle(replace(snap, plan=_NO_PLAN), start)
        by_id = {p.request.id: p.request for p in batch}
        fresh = [RunningJob(by_id[a.job_id], a.placement, a.admitted_as, start)
                 for a in result.admits][: running - len(admitted)]
        stalled = stalled + 1 if not fresh else 0
        admitted.extend(fresh)
    t0 = now - warmup * step_s - settle * cadence_s
    spread: list[RunningJob] = []
    for job in admitted:
        limit = job.request.time_limit_s
        started = t0 - rng.uniform(0.05, 0.9) * limit
        checkpoint = started + rng.uniform(0, t0 - started) if job.request.preemptible else None
        spread.append(replace(job, started_at=started, last_checkpoint_at=checkpoint))
    waiting: list[PendingJob] = []
    sweep = min(500, pending // 4)
    for k in range(sweep):
        request = factory.job(PENDING_MIX, t0 - 1800.0 + k * 0.1, team="search", shape=PENDING_MIX[0])
        waiting.append(PendingJob(replace(request, flavours=("h100",)), request.submitted_at))
    if pending >= 100:
        request = factory.job(PENDING_MIX, t0 - 4 * H, team="genai-core", shape=PENDING_MIX[-1])
        waiting.append(PendingJob(replace(request, pods=128, flavours=("h100",)), request.submitted_at))
    world = World(Snapshot(nodes=node_states, teams=teams, pending=tuple(waiting), running=tuple(spread),
                           config=config))
    # Warm up in coarse steps, topping the queue back up, until the first burst of reclaims has settled.
    for k in range(warmup):
        at = t0 + k * step_s
        world.advance(at)
        missing = pending - len(world.snapshot.pending)
        if missing > 0:
            world.submit(*(factory.pending(at) for _ in range(missing)))
        world.apply(run_cycle(replace(world.snapshot, plan=_NO_PLAN), at))
    # Then at the controller's cadence, with arrivals at three times the reference day's average rate.
    at = t0 + warmup * step_s
    for k in range(settle):
        at = t0 + warmup * step_s + (k + 1) * cadence_s - settle * cadence_s
        world.advance(at)
        arrivals = rng.random() < (3 * 5600 / 86400 * cadence_s) % 1 + int(3 * 5600 / 86400 * cadence_s)
        world.submit(*(factory.pending(at) for _ in range(int(arrivals) + int(3 * 5600 / 86400 * cadence_s))))
        world.apply(run_cycle(replace(world.snapshot, plan=_NO_PLAN), at))
    world.advance(now)
    snap = world.snapshot
    missing = pending - len(snap.pending)
    if missing > 0:
        snap = replace(snap, pending=snap.pending + tuple(factory.pending(now) for _ in range(missing)))
    elif missing < 0:
        # The latest arrivals have "not arrived yet": the queue is exactly as long as asked.
        keep = sorted(snap.pending, key=lambda p: (p.queued_at, p.request.id))[:pending]
        kept = {p.request.id for p in keep}
        snap = replace(snap, pending=tuple(p for p in snap.pending if p.request.id in kept))
    return snap
