"""The composition root on Kubernetes: ``shoal up --executor kubernetes`` reads the cluster's GPU nodes, runs a
submitted gang as pods bound to the nodes it chose, and cancels it — the real API, policy and SQL store, against
the fake API server (through a kubeconfig file, as an operator's laptop would)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.kube import names
from tests.shoal_up import started

from .harness import HONEST, NAMESPACE, base_env, populate
from .fake_cluster import FakeCluster

TEAMS = """
teams:
  - name: fraud-ml
    cohort: shared
    quotas: {h100: {nominal: 16}, h100-mig-1g: {nominal: 28}}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeCluster]:
    fake = FakeCluster(tmp_path / "cluster", base_env=base_env()).start()
    populate(fake)
    try:
        yield fake
    finally:
        fake.stop()


def test_shoal_up_runs_a_gang_as_pods_on_the_nodes_it_chose(tmp_path: Path, cluster: FakeCluster) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{cluster.url}'}}}}]\n"
        "users: [{name: me, user: {}}]\ncontexts: [{name: fake, context: {cluster: fake, user: me}}]\n")
    (tmp_path / "teams.yaml").write_text(TEAMS)
    shared = tmp_path / "shared"
    with started(tmp_path / "state", "--executor", "kubernetes", "--kube-config", str(kubeconfig),
                 "--kube-namespace", NAMESPACE, "--kube-image", "python:3.11-slim", "--kube-shared-claim",
                 "shoal-shared", "--kube-shared-path", str(shared), "--teams", str(tmp_path / "teams.yaml"),
                 "--tick", "0.2", "--min-run-time", "0s", cwd=tmp_path) as up:
        up.eventually(lambda: any("cluster Kubernetes (9 nodes)" in line for line in up.output),
                      "shoal up to say what it reads", 30)
        token = up.token("ana", "fraud-ml")
        with ShoalClient(up.url, token) as client:
            job = client.submit({"name": "train", "team": "fraud-ml", "flavour": "h100", "pods": 2,
                                 "gpus_per_pod": 8, "command": [sys.executable, "-c", HONEST],
                                 "checkpoint": {"grace_period": "5s"}})
            job_id = job.job_id
            running = up.eventually(lambda: (v := client.job(job_id)).state == "RUNNING" and v, "the gang to run",
                                    30)
            pods = cluster.pods(NAMESPACE, names.gang_selector(job_id))
            chosen = sorted(pod.node for pod in running.placement.pods)  # type: ignore[union-attr]
            assert sorted(p["spec"]["nodeName"] for p in pods) == chosen
            assert {p["metadata"]["ownerReferences"][0]["name"] for p in pods} == {names.gang_name(job_id)}
            logs = f"{up.url}/v1/jobs/{job_id}/logs?rank=0&offset=0"
            headers = {"Authorization": f"Bearer {token}"}
            up.eventually(lambda: "rank 0 from step 0" in httpx.get(logs, headers=headers).json()["text"],
                          "rank 0's output through the API", 30)
            client.cancel(job_id, reason="done here")
            done = up.eventually(lambda: (v := client.job(job_id)).state == "CANCELLED" and v, "the cancel", 30)
            assert done.exit_code == 0                     # it checkpointed within its grace and exited 0
            up.eventually(lambda: cluster.pods(NAMESPACE, names.gang_selector(job_id)) == [], "the pods to go", 30)
