"""The fake cluster populated like the runtime tests' cluster, and the Kubernetes executor over it."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path

from scheduler_core.executor.base import Executor, LaunchRequest
from scheduler_core.job_env import gang_env, nodes_of
from scheduler_core.kube.executor import KubeExecutorConfig, KubernetesExecutor
from scheduler_core.kube.manifests import PodSettings, SharedVolume, container_env
from scheduler_core.model import JobSpec, Node

from ..executor_contract import Behaviour, ExecutorHarness
from ..runtime_builders import cluster_nodes, make_spec, place
from .fake_cluster import FakeCluster

REPO = Path(__file__).resolve().parents[3]
NODES: dict[str, Node] = {node.name: node for node in cluster_nodes()}
H100 = [name for name, node in NODES.items() if "h100" in node.devices]
MIG_NODE = next(name for name, node in NODES.items() if "h100-mig-1g" in node.devices)
NAMESPACE = "jobs"

#: Keeps the job contract: resumes, checkpoints when asked, and on SIGTERM checkpoints and exits 0.
HONEST = textwrap.dedent("""
    import sys, time
    from scheduler_core import jobkit
    ckpt = jobkit.resume()
    step = ckpt.step + 1 if ckpt else 0
    print("rank", jobkit.context().rank, "from step", step, flush=True)
    while True:
        time.sleep(0.01)
        jobkit.report_step_time(0.01, step) if step % 50 == 0 else None
        if jobkit.should_checkpoint():
            jobkit.save(step, {"state": str(step).encode()})
        if jobkit.should_stop():
            sys.exit(0)
        step += 1
""")
DEAF = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)\n"
PROGRAMS = {
    Behaviour.RUNS_UNTIL_SIGNALLED: HONEST,
    Behaviour.EXITS_0_QUICKLY: "pass",
    Behaviour.EXITS_3: "import sys; sys.exit(3)",
    Behaviour.IGNORES_SIGTERM: DEAF,
}


def base_env() -> dict[str, str]:
    """What the fake kubelet's "image" provides: a PATH, and Shoal importable (for jobkit)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "HOME": str(REPO)}


def populate(cluster: FakeCluster) -> None:
    """The runtime tests' cluster as Kubernetes nodes: block and leaf labels, the spares labelled."""
    for node in NODES.values():
        labels = {"topology.kubernetes.io/block": node.block, "topology.kubernetes.io/leaf": node.leaf}
        if node.spare:
            labels["shoal.io/spare"] = "true"
        if node.small_jobs:
            labels["shoal.io/small-jobs"] = "true"
        mig = {"1g.10gb": len(node.devices["h100-mig-1g"])} if node.is_mig else None
        cluster.add_node(node.name, labels=labels, gpus=0 if node.is_mig else node.gpus, mig=mig,
                         cpu=str(node.cpus), memory=f"{node.memory_gb}Gi")


def executor_config(shared: Path, **overrides: object) -> KubeExecutorConfig:
    settings = PodSettings(namespace=NAMESPACE, image="python:3.11-slim",
                           shared=SharedVolume("shoal-shared", str(shared)))
    # A request timeout well above what the fake server needs: on a loaded 2-core CI machine a 2 s timeout
    # failed one adoption test once (the executor retries, but the test's own deadline is tight).
    values: dict[str, object] = {"pods": settings, "node_lost_after_s": 0.0, "keep_finished_s": 0.0,
                                 "watch_timeout_s": 5.0, "request_timeout_s": 10.0, "sync_timeout_s": 10.0}
    values.update(overrides)
    return KubeExecutorConfig(**values)  # type: ignore[arg-type]


def python_spec(job_id: str, program: str, pods: int = 2, units: int = 2) -> JobSpec:
    return make_spec(job_id).pods(pods, units).grace(2).command(sys.executable, "-c", program).build()


class KubeHarness(ExecutorHarness):
    """The executor over the fake cluster, in real time: ``advance`` waits one short poll interval."""

    grace_s = 2.0
    timeout_s = 30.0

    def __init__(self, tmp_path: Path, **config: object) -> None:
        self.tmp_path = tmp_path
        self.shared = tmp_path / "shared"
        self.shared.mkdir()
        self.cluster = FakeCluster(tmp_path / "cluster", base_env=base_env()).start()
        populate(self.cluster)
        self.config = executor_config(self.shared, **config)
        self._all: list[KubernetesExecutor] = []
        self._executor = self.new_executor()

    def new_executor(self) -> KubernetesExecutor:
        executor = KubernetesExecutor(self.cluster.api_client(), self.config, NODES.values())
        self._all.append(executor)
        return executor

    @property
    def executor(self) -> KubernetesExecutor:
        return self._executor

    def request(self, job_id: str, behaviour: Behaviour, *, pods: int = 2) -> LaunchRequest:
        return self.request_for(job_id, python_spec(job_id, PROGRAMS[behaviour], pods))

    def request_for(self, job_id: str, spec: JobSpec, *, attempt: int = 0, nodes: list[str] | None = None,
                    flavour: str = "h100") -> LaunchRequest:
        chosen = nodes or H100[:spec.pods]
        placement = place(flavour, *((chosen[i], tuple(range(spec.gpus_per_pod))) for i in range(spec.pods)))
        env = gang_env(job_id, spec, placement, checkpoint_uri=(self.shared / "ckpt" / job_id).as_uri() + "/",
                       checkpoint_interval_s=3600,
                       master_addr=self._executor.master_addr(job_id, placement, attempt))
        return LaunchRequest(job_id=job_id, spec=spec, placement=placement, nodes=nodes_of(placement, NODES),
                             env=env, attempt=attempt, container_devices=self._executor.container_devices)

    def now(self) -> float:
        return time.time()

    def advance(self) -> None:
        time.sleep(0.02)

    def pod_env(self, job_id: str, rank: int) -> Mapping[str, str]:
        return container_env(self._executor.pod_manifest(job_id, rank))

    def reopen(self) -> Executor:
        """The first instance is dropped, as a crashed scheduler's would be; a new one lists and watches anew."""
        self._executor.close()
        self._executor = self.new_executor()
        return self._executor

    def fail_node(self, node: str) -> None:
        self.cluster.fail_node(node)

    def close(self) -> None:
        for executor in self._all:
            executor.close()
        self.cluster.stop()
