"""A gang's life on Kubernetes, end to end through the real controller: created on the exact nodes chosen, running,
preempted with its grace period (it checkpoints and exits 0), re-admitted and resumed, a node lost, and restarted on
the block's hot spare from its last checkpoint. The cluster is the fake API server with real processes as pods."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler_core.controller import Controller, ControllerConfig
from scheduler_core.kube import names
from scheduler_core.kube.inventory import inventory
from scheduler_core.model import Health
from scheduler_core.policy.decisions import PreemptReason
from scheduler_core.store.memory import MemoryStore
from scheduler_core.store.records import JobState

from ..greedy_policy import GreedyPolicy
from ..runtime_builders import cluster_nodes, make_spec, team_configs, whole_nodes
from .harness import HONEST, NAMESPACE, KubeHarness

B0 = [f"h100-b0-n0{i}" for i in range(4)]    # n03 is the block's hot spare


class Cluster:
    """The controller driving the Kubernetes executor in real time, with the store in memory."""

    def __init__(self, harness: KubeHarness) -> None:
        self.harness = harness
        self.nodes = inventory(harness.cluster.objects("nodes")).nodes
        self.store = MemoryStore(seed=5)
        self.store.sync_nodes(self.nodes)
        self.store.sync_teams(team_configs())
        self.policy = GreedyPolicy()
        self.controller = Controller(self.store, harness.executor, self.policy, nodes=self.nodes,
                                     config=ControllerConfig(checkpoint_root=str(harness.shared / "checkpoints")))

    def step(self) -> None:
        self.controller.step(time.time())

    def until(self, condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                events = [(e.kind, e.reason, e.message) for e in self.store.events()][-12:]
                pytest.fail(f"timed out waiting for {what}; last events: {events}")
            self.step()
            time.sleep(0.05)

    def running(self, job_id: str, **counts: int) -> Callable[[], bool]:
        def check() -> bool:
            record = self.store.get(job_id)
            return record.state is JobState.RUNNING and all(getattr(record, k) == v for k, v in counts.items())
        return check

    def pods(self, job_id: str) -> dict[str, dict[str, object]]:
        return {p["metadata"]["name"]: p for p in self.harness.cluster.pods(NAMESPACE, names.gang_selector(job_id))}

    def resumed_from(self, job_id: str) -> int:
        """The step rank 0 of the current attempt says it resumed from (once it has said so)."""
        def said() -> re.Match[str] | None:
            return re.search(r"rank 0 from step (\d+)", self.harness.cluster.log(NAMESPACE,
                                                                                names.pod_name(job_id, 0)))
        self.until(lambda: said() is not None, "rank 0 to say where it resumed")
        match = said()
        assert match is not None
        return int(match.group(1))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = KubeHarness(tmp_path)
    try:
        yield Cluster(harness)
    finally:
        harness.close()


def test_the_nodes_come_from_the_cluster_with_their_blocks_leaves_and_spares(cluster: Cluster) -> None:
    assert sorted(cluster.nodes, key=lambda n: n.name) == sorted(cluster_nodes(), key=lambda n: n.name)


def test_create_run_preempt_with_grace_lose_a_node_and_restart_on_the_spare(cluster: Cluster) -> None:
    spec = make_spec("train").pods(2, 8).grace(3).max_restarts(0).command(sys.executable, "-c", HONEST).build()
    gang = cluster.store.submit(spec, user="ana", now=time.time()).id
    filler = cluster.store.submit(make_spec("filler").team("search").pods(1, 8)
                                  .command(sys.executable, "-c", HONEST).build(), user="bo", now=time.time()).id

    # Created together, on the exact nodes chosen, and running.
    cluster.until(cluster.running(gang), "the gang to run")
    assert cluster.store.get(gang).placement == whole_nodes(B0[0], B0[1])
    assert cluster.store.get(filler).placement == whole_nodes(B0[2])
    pods = cluster.pods(gang)
    assert {name: pod["spec"]["nodeName"] for name, pod in pods.items()} == {  # type: ignore[index]
        names.pod_name(gang, 0): B0[0], names.pod_name(gang, 1): B0[1]}

    # Preempted with its grace period: the pods are deleted with gracePeriodSeconds = 3 (as soon as the job says it
    # handles SIGTERM); the job checkpoints, exits 0, goes back to the queue and is admitted again, resuming from
    # that checkpoint.
    cluster.policy.preempt(gang, PreemptReason.RECLAIM, grace_s=3.0)
    asked = {(NAMESPACE, names.pod_name(gang, rank), 3) for rank in (0, 1)}
    cluster.until(lambda: asked <= set(cluster.harness.cluster.deletions), "both pods to be deleted with grace 3")
    cluster.until(cluster.running(gang, preemptions=1), "the preempted gang to run again")
    record = cluster.store.get(gang)
    assert record.last_checkpoint is not None and record.restarts == 0
    checkpointed = record.last_checkpoint.step
    assert cluster.resumed_from(gang) == checkpointed + 1

    # A node is lost: its pod is FAILED (an infrastructure fault), the gang is stopped whole and restarted on the
    # block's hot spare, away from the lost node, from the last checkpoint, with the job's restart budget untouched.
    lost = cluster.store.get(gang).placement.pods[1].node  # type: ignore[union-attr]
    assert lost == B0[1]
    cluster.harness.cluster.fail_node(lost)
    cluster.until(cluster.running(gang, infra_restarts=1), "the gang to restart after the node failure")
    record = cluster.store.get(gang)
    assert record.placement == whole_nodes(B0[0], B0[3])
    assert (record.restarts, record.preemptions) == (0, 1)
    assert {r.node.name: r.health for r in cluster.store.list_nodes()}[lost] is Health.REPAIR
    assert {pod["spec"]["nodeName"] for pod in cluster.pods(gang).values()} == {B0[0], B0[3]}  # type: ignore[index]
    assert cluster.resumed_from(gang) == checkpointed + 1
    reasons = [e.reason for e in cluster.store.events() if e.job_id == gang and e.kind in ("pod_failed", "requeue")]
    assert reasons == ["Preempted", "NodeLost", "NodeLost"]
    assert cluster.store.get(filler).state is JobState.RUNNING
