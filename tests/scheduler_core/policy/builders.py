"""Small fluent builders for policy tests: ``make_job("a").team("fraud").pods(4, 8).build()``,
``make_cluster().block("b0", nodes=4)``, ``make_snapshot(cluster).team(...).pending(...).run(...)``,
and a fake clock. Clusters go through the real model (``ClusterConfig.expand``), so node names, leaves, spares
and MIG devices are exactly what production builds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from scheduler_core.model import BlockConfig, ClusterConfig, Health, JobKind, NodeGroup, PriorityClass, Quota
from scheduler_core.model import TopologyLevel
from scheduler_core.policy.snapshot import (AdmittedAs, JobRequest, NodeState, PendingJob, Placement,
                                            PodPlacement, PolicyConfig, RunningJob, Snapshot, TeamState)

H = 3600.0
MIN = 60.0


class FakeClock:
    """The only clock a policy test uses: starts at ``start`` and moves when told."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class JobBuilder:
    def __init__(self, job_id: str) -> None:
        self._fields: dict[str, Any] = dict(
            id=job_id, team="fraud", kind=JobKind.BATCH, priority_class=PriorityClass.STANDARD,
            flavours=("h100",), pods=1, units_per_pod=8, cpus_per_pod=None, memory_gb_per_pod=None,
            topology_level=None, topology_required=False, time_limit_s=4 * H, preemptible=True, grace_s=300.0,
            checkpoint_cost_s=60.0, submitted_at=0.0)

    def team(self, team: str) -> JobBuilder:
        self._fields["team"] = team
        return self

    def pods(self, pods: int, units: int = 8) -> JobBuilder:
        self._fields.update(pods=pods, units_per_pod=units)
        return self

    def flavour(self, *flavours: str) -> JobBuilder:
        self._fields["flavours"] = tuple(flavours)
        return self

    def priority(self, priority: str) -> JobBuilder:
        self._fields["priority_class"] = PriorityClass(priority)
        return self

    def kind(self, kind: str) -> JobBuilder:
        self._fields["kind"] = JobKind(kind)
        return self

    def required(self, level: str) -> JobBuilder:
        self._fields.update(topology_level=TopologyLevel[level.upper()], topology_required=True)
        return self

    def preferred(self, level: str) -> JobBuilder:
        self._fields.update(topology_level=TopologyLevel[level.upper()], topology_required=False)
        return self

    def limit(self, seconds: float) -> JobBuilder:
        self._fields["time_limit_s"] = seconds
        return self

    def submitted(self, at: float) -> JobBuilder:
        self._fields["submitted_at"] = at
        return self

    def non_preemptible(self) -> JobBuilder:
        self._fields.update(preemptible=False, grace_s=0.0)
        return self

    def grace(self, seconds: float) -> JobBuilder:
        self._fields["grace_s"] = seconds
        return self

    def checkpoint_cost(self, seconds: float) -> JobBuilder:
        self._fields["checkpoint_cost_s"] = seconds
        return self

    def cpus(self, cpus: int, memory_gb: int | None = None) -> JobBuilder:
        self._fields["cpus_per_pod"] = cpus
        if memory_gb is not None:
            self._fields["memory_gb_per_pod"] = memory_gb
        return self

    def build(self) -> JobRequest:
        f = dict(self._fields)
        share = f["units_per_pod"] / 8 if not f["flavours"][0].startswith("h100-mig") else f["units_per_pod"] / 56
        f["cpus_per_pod"] = f["cpus_per_pod"] or max(1, int(192 * min(share, 1.0)))
        f["memory_gb_per_pod"] = f["memory_gb_per_pod"] or max(1, int(2048 * min(share, 1.0)))
        return JobRequest(**f)

    def pending(self, queued_at: float | None = None, *, front: bool = False, attained_gpu_s: float = 0.0,
                restart_block: str | None = None, avoid: Sequence[str] = (),
                room_wait_since: float | None = None) -> PendingJob:
        request = self.build()
        return PendingJob(request, request.submitted_at if queued_at is None else queued_at, front_of_queue=front,
                          attained_gpu_s=attained_gpu_s, restart_block=restart_block, avoid_nodes=frozenset(avoid),
                          room_wait_since=room_wait_since)


def make_job(job_id: str) -> JobBuilder:
    return JobBuilder(job_id)


class ClusterBuilder:
    def __init__(self) -> None:
        self._blocks: list[BlockConfig] = []
        self._health: dict[str, Health] = {}

    def block(self, name: str, nodes: int = 4, *, gpu: str = "h100", per_leaf: int = 8, spares: int = 0,
              small: bool = False, gpus_per_node: int = 8) -> ClusterBuilder:
        self._blocks.append(BlockConfig(name=name, nodes=[NodeGroup(count=nodes, gpu=gpu, gpus_per_node=gpus_per_node)],
                                        nodes_per_leaf=per_leaf, spares=spares, small_jobs=small))
        return self

    def blocks(self, prefix: str, count: int, nodes: int = 4, **kw: Any) -> ClusterBuilder:
        for k in range(count):
            self.block(f"{prefix}{k}", nodes, **kw)
        return self

    def mig_block(self, name: str, nodes: int = 1, *, mig: str | list[str] = "1g.10gb", small: bool = True,
                  per_leaf: int = 8) -> ClusterBuilder:
        self._blocks.append(BlockConfig(name=name, nodes=[NodeGroup(count=nodes, gpu="h100", mig=mig)],
                                        nodes_per_leaf=per_leaf, small_jobs=small))
        return self

    def health(self, node: str, health: str) -> ClusterBuilder:
        self._health[node] = Health(health)
        return self

    def build(self) -> tuple[NodeState, ...]:
        config = ClusterConfig(name="test", blocks=self._blocks)
        return tuple(NodeState.from_node(n, self._health.get(n.name, Health.READY)) for n in config.expand())


def make_cluster() -> ClusterBuilder:
    return ClusterBuilder()


class SnapshotBuilder:
    def __init__(self, cluster: ClusterBuilder | Sequence[NodeState]) -> None:
        self._nodes = cluster.build() if isinstance(cluster, ClusterBuilder) else tuple(cluster)
        self._teams: dict[str, TeamState] = {}
        self._pending: list[PendingJob] = []
        self._running: list[RunningJob] = []
        self._config = PolicyConfig()
        self._used: dict[tuple[str, str], set[int]] = {}
        self._cap = {n.name: dict(n.capacity) for n in self._nodes}

    def team(self, name: str, *, cohort: str = "org", weight: float = 1.0, decayed: dict[str, float] | None = None,
             **quotas: int | tuple[int, int | None] | tuple[int, int | None, int | None]) -> SnapshotBuilder:
        """``h100=8`` (nominal), ``h100=(8, 16)`` (nominal, borrowing limit), ``h100=(8, None, 4)`` (+ lending)."""
        parsed: dict[str, Quota] = {}
        for key, value in quotas.items():
            flavour = key.replace("_", "-")
            if isinstance(value, int):
                parsed[flavour] = Quota(nominal=value)
            else:
                nominal, borrowing, *rest = value
                parsed[flavour] = Quota(nominal=nominal, borrowing_limit=borrowing,
                                        lending_limit=rest[0] if rest else None)
        self._teams[name] = TeamState(name=name, cohort=cohort, weight=weight, quotas=parsed,
                                      decayed_usage=dict(decayed or {}))
        return self

    def config(self, **changes: Any) -> SnapshotBuilder:
        self._config = replace(self._config, **changes)
        return self

    def pending(self, *jobs: PendingJob | JobBuilder) -> SnapshotBuilder:
        for job in jobs:
            self._pending.append(job.pending() if isinstance(job, JobBuilder) else job)
        return self

    def run(self, job: JobBuilder | JobRequest, nodes: Sequence[str] | str, *, admitted: str = "nominal",
            started: float = 0.0, checkpoint: float | None = None, terminating: bool = False,
            terminate_by: float | None = None, preempted_for: str | None = None) -> SnapshotBuilder:
        """A running job; pod k goes on ``nodes[k % len(nodes)]`` on the lowest units still free there."""
        request = job.build() if isinstance(job, JobBuilder) else job
        nodes = [nodes] if isinstance(nodes, str) else list(nodes)
        flavour = request.flavours[0]
        pods = []
        for k in range(request.pods):
            node = nodes[k % len(nodes)]
            used = self._used.setdefault((node, flavour), set())
            free = [u for u in range(self._cap[node].get(flavour, 0)) if u not in used]
            if len(free) < request.units_per_pod:
                raise ValueError(f"{node} has only {len(free)} free {flavour} units for {request.id}")
            units = tuple(free[:request.units_per_pod])
            used.update(units)
            pods.append(PodPlacement(node, units))
        self._running.append(RunningJob(request, Placement(flavour, tuple(pods)), AdmittedAs(admitted), started,
                                        last_checkpoint_at=checkpoint, terminating=terminating,
                                        terminate_by=terminate_by, preempted_for=preempted_for))
        return self

    def build(self) -> Snapshot:
        return Snapshot(nodes=self._nodes, teams=dict(self._teams), pending=tuple(self._pending),
                        running=tuple(self._running), config=self._config)


def make_snapshot(cluster: ClusterBuilder | Sequence[NodeState]) -> SnapshotBuilder:
    return SnapshotBuilder(cluster)


def nodes_of(block: str, count: int, start: int = 0) -> list[str]:
    return [f"{block}-n{k:02d}" for k in range(start, start + count)]


def units_text(units: Sequence[int]) -> str:
    """``(0, 1, 2, 3)`` → ``"0-3"``, ``(0, 2)`` → ``"0,2"``."""
    units = sorted(units)
    if units and units == list(range(units[0], units[-1] + 1)) and len(units) > 1:
        return f"{units[0]}-{units[-1]}"
    return ",".join(str(u) for u in units)


def where(placement: Placement) -> str:
    """``b0-n00:0-7 b0-n01:0-7``: every pod's node and units, in pod order."""
    return " ".join(f"{pod.node}:{units_text(pod.units)}" for pod in placement.pods)


def decisions(result: Any) -> list[tuple[Any, ...]]:
    """A whole cycle's decisions as plain tuples, in the order the cycle made them, for table comparisons."""
    out: list[tuple[Any, ...]] = []
    for p in result.preempts:
        out.append(("preempt", p.job_id, p.reason.value, p.grace_s, p.requeue, p.for_job))
    for a in result.admits:
        out.append(("admit", a.job_id, a.admitted_as.value, where(a.placement)))
    for r in result.reservations:
        out.append(("reserve", r.job_id, " ".join(r.nodes), r.start_at))
    for w in result.waits:
        out.append(("wait", w.job_id, w.reason.value, w.position, w.estimated_start))
    for r in result.relabels:
        out.append(("relabel", r.job_id, r.admitted_as.value, r.for_job))
    return out
