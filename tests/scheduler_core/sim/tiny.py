"""A tiny cluster, two teams and hand-made workloads for engine tests."""

from __future__ import annotations

from pathlib import Path

from scheduler_core.model.cluster import ClusterConfig
from scheduler_core.model.job import CheckpointPolicy, JobKind, JobSpec, Topology
from scheduler_core.model.team import TeamsConfig
from scheduler_core.sim.workloads.types import Workload, WorkloadJob

CLUSTER_YAML = """\
name: tiny
blocks:
  - name: "b{i}"
    repeat: 2
    gpu: h100
    nodes: 4
    nodes_per_leaf: 2
    spares: 1
"""

TEAMS_YAML = """\
teams:
  - name: a
    cohort: org
    quotas:
      h100: {nominal: 24, borrowing_limit: 24}
  - name: b
    cohort: org
    quotas:
      h100: {nominal: 24, borrowing_limit: 24}
"""


def cluster() -> ClusterConfig:
    import yaml
    return ClusterConfig.model_validate(yaml.safe_load(CLUSTER_YAML))


def teams() -> TeamsConfig:
    import yaml
    return TeamsConfig.model_validate(yaml.safe_load(TEAMS_YAML))


def write_config(directory: Path) -> tuple[Path, Path]:
    c, t = directory / "tiny-cluster.yaml", directory / "tiny-teams.yaml"
    c.write_text(CLUSTER_YAML)
    t.write_text(TEAMS_YAML)
    return c, t


def job(job_id: str, *, team: str = "a", at: float = 0.0, gpus: int = 8, work: float = 3600.0,
        limit: float = 86400.0, interval: float | str = "auto", cost: float = 20.0, preemptible: bool = True,
        topology: Topology | None = None, measured: bool = True) -> WorkloadJob:
    pods, per_pod = (1, gpus) if gpus <= 8 else (gpus // 8, 8)
    spec = JobSpec(name=job_id, team=team, kind=JobKind.BATCH, flavour=("h100",), pods=pods, gpus_per_pod=per_pod,
                   topology=topology, command=("sim",), time_limit=limit, preemptible=preemptible,
                   checkpoint=CheckpointPolicy(interval=interval, cost=cost, grace_period=300))
    return WorkloadJob(id=job_id, spec=spec, submit_at=at, work_s=work, checkpoint_cost_s=cost, measured=measured)


def workload(*jobs: WorkloadJob, window: tuple[float, float] | None = None) -> Workload:
    ordered = tuple(sorted(jobs, key=lambda j: (j.submit_at, j.id)))
    span = window or (ordered[0].submit_at, max(ordered[-1].submit_at, ordered[0].submit_at + 1))
    return Workload(name="tiny", jobs=ordered, cluster=cluster(), teams=teams(), window=span)
