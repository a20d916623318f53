"""The composition root on Kubernetes: ``shoal up --executor kubernetes`` reads the cluster's GPU nodes, runs a
submitted gang as pods bound to the nodes it chose, and cancels it — the real API, policy and SQL store, against
the fake API server (through a kubeconfig file, as an operator's laptop would)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.kube import names

from .harness import HONEST, NAMESPACE, REPO, base_env, populate
from .fake_cluster import FakeCluster

T = TypeVar("T")
TEAMS = """
teams:
  - name: fraud-ml
    cohort: shared
    quotas: {h100: {nominal: 16}, h100-mig-1g: {nominal: 28}}
"""


def eventually(check: Callable[[], T | None], what: str, output: list[str], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; shoal up said:\n{''.join(output[-30:])}")
        time.sleep(0.1)


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
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler_core.cli.main", "up", "--no-hub", "--executor", "kubernetes",
         "--kube-config", str(kubeconfig), "--kube-namespace", NAMESPACE, "--kube-image", "python:3.11-slim",
         "--kube-shared-claim", "shoal-shared", "--kube-shared-path", str(shared), "--teams",
         str(tmp_path / "teams.yaml"), "--state-dir", str(state), "--port", "0", "--tick", "0.2",
         "--min-run-time", "0s"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
    threading.Thread(target=read, daemon=True).start()
    try:
        url = eventually(lambda: next((m.group(1) for line in output
                                       if (m := re.search(r"API at (http://\S+)", line))), None), "the API", output)
        assert any("cluster Kubernetes (9 nodes)" in line for line in output)
        made = subprocess.run([sys.executable, "-m", "scheduler_core.cli.main", "token", "create", "--user", "ana",
                               "--team", "fraud-ml", "--state-dir", str(state)], env=env, capture_output=True,
                              text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        with ShoalClient(url, made.stdout.strip()) as client:
            job = client.submit({"name": "train", "team": "fraud-ml", "flavour": "h100", "pods": 2,
                                 "gpus_per_pod": 8, "command": [sys.executable, "-c", HONEST],
                                 "checkpoint": {"grace_period": "5s"}})
            job_id = job.job_id
            running = eventually(lambda: (v := client.job(job_id)).state == "RUNNING" and v, "the gang to run",
                                 output)
            pods = cluster.pods(NAMESPACE, names.gang_selector(job_id))
            chosen = sorted(pod.node for pod in running.placement.pods)  # type: ignore[union-attr]
            assert sorted(p["spec"]["nodeName"] for p in pods) == chosen
            assert {p["metadata"]["ownerReferences"][0]["name"] for p in pods} == {names.gang_name(job_id)}
            logs = f"{url}/v1/jobs/{job_id}/logs?rank=0&offset=0"
            headers = {"Authorization": f"Bearer {made.stdout.strip()}"}
            eventually(lambda: "rank 0 from step 0" in httpx.get(logs, headers=headers).json()["text"],
                       "rank 0's output through the API", output)
            client.cancel(job_id, reason="done here")
            done = eventually(lambda: (v := client.job(job_id)).state == "CANCELLED" and v, "the cancel", output)
            assert done.exit_code == 0                     # it checkpointed within its grace and exited 0
            eventually(lambda: cluster.pods(NAMESPACE, names.gang_selector(job_id)) == [], "the pods to go", output)
    finally:
        proc.terminate()
        proc.wait(30)
