"""Small fluent builders for policy snapshots: ``job("a").team("fraud").pods(4, 8).build()``."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from scheduler_core.model.cluster import Health
from scheduler_core.model.job import JobKind, PriorityClass, TopologyLevel
from scheduler_core.model.team import Quota
from scheduler_core.policy.snapshot import (AdmittedAs, JobRequest, NodeState, PendingJob, Placement, PodPlacement,
                                            RunningJob, Snapshot, TeamState)


def nodes(block: str, count: int, *, flavour: str = "h100", units: int = 8, leaf_size: int = 8,
          spares: int = 0) -> list[NodeState]:
    return [NodeState(name=f"{block}-n{i:02d}", block=block, leaf=f"{block}-l{i // leaf_size}",
                      capacity=MappingProxyType({flavour: units}), cpus=192, memory_gb=2048,
                      spare=i >= count - spares) for i in range(count)]


def team(name: str, nominal: int, *, borrowing: int | None = None, lending: int | None = None,
         flavour: str = "h100", cohort: str = "org") -> TeamState:
    return TeamState(name=name, cohort=cohort, weight=1.0,
                     quotas=MappingProxyType({flavour: Quota(nominal=nominal, borrowing_limit=borrowing,
                                                             lending_limit=lending)}))


class JobBuilder:
    def __init__(self, job_id: str) -> None:
        self._request = JobRequest(
            id=job_id, team="a", kind=JobKind.BATCH, priority_class=PriorityClass.STANDARD, flavours=("h100",),
            pods=1, units_per_pod=1, cpus_per_pod=24, memory_gb_per_pod=256, topology_level=None,
            topology_required=False, time_limit_s=3600.0, preemptible=True, grace_s=300.0, checkpoint_cost_s=30.0,
            submitted_at=0.0)
        self._queued: float | None = None
        self._restart_block: str | None = None

    def team(self, name: str) -> JobBuilder:
        self._request = replace(self._request, team=name)
        return self

    def pods(self, pods: int, units: int) -> JobBuilder:
        self._request = replace(self._request, pods=pods, units_per_pod=units)
        return self

    def gpus(self, units: int) -> JobBuilder:
        return self.pods(1, units) if units <= 8 else self.pods(units // 8, 8)

    def at(self, submitted: float) -> JobBuilder:
        self._request = replace(self._request, submitted_at=submitted)
        return self

    def limit(self, seconds: float) -> JobBuilder:
        self._request = replace(self._request, time_limit_s=seconds)
        return self

    def priority(self, priority: PriorityClass) -> JobBuilder:
        self._request = replace(self._request, priority_class=priority)
        return self

    def required(self, level: TopologyLevel) -> JobBuilder:
        self._request = replace(self._request, topology_level=level, topology_required=True)
        return self

    def flavours(self, *names: str) -> JobBuilder:
        self._request = replace(self._request, flavours=tuple(names))
        return self

    def restart_in(self, block: str) -> JobBuilder:
        self._restart_block = block
        return self

    def request(self) -> JobRequest:
        return self._request

    def build(self) -> PendingJob:
        queued = self._queued if self._queued is not None else self._request.submitted_at
        return PendingJob(self._request, queued_at=queued, restart_block=self._restart_block)

    def running(self, on: list[str], *, started: float = 0.0, as_: AdmittedAs = AdmittedAs.NOMINAL,
                first_unit: int = 0, terminating: bool = False) -> RunningJob:
        r = self._request
        pods = tuple(PodPlacement(node, tuple(range(first_unit, first_unit + r.units_per_pod))) for node in on)
        assert len(pods) == r.pods, "one node per pod"
        return RunningJob(r, Placement(r.flavours[0], pods), as_, started_at=started, terminating=terminating,
                          terminate_by=started + 300 if terminating else None)


def job(job_id: str) -> JobBuilder:
    return JobBuilder(job_id)


def snapshot(node_list: list[NodeState], *, pending: list[PendingJob] = (), running: list[RunningJob] = (),
             teams: list[TeamState] | None = None) -> Snapshot:
    team_list = teams if teams is not None else [team("a", 10_000), team("b", 10_000)]
    return Snapshot(nodes=tuple(node_list), teams=MappingProxyType({t.name: t for t in team_list}),
                    pending=tuple(pending), running=tuple(running))


def unhealthy(node: NodeState) -> NodeState:
    return replace(node, health=Health.REPAIR)
