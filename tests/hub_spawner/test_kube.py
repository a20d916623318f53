"""The spawner's Kubernetes launcher: the hub's token in a Secret (never in the job's spec), the server at its
pod's DNS name, and — launched by the scheduler's Kubernetes executor with the shared pod builders — the notebook
pod on its granted node and MIG slice, started once its Secret exists. Against the fake API server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyterhub.spawner import SpawnException

from hub_spawner.kube import gpu_resource, notebook_address
from scheduler_core.executor.base import LaunchRequest, PodEventKind
from scheduler_core.job_env import gang_env, nodes_of
from scheduler_core.kube import names
from scheduler_core.kube.manifests import container_env

from ..scheduler_core.executor_contract import Watch
from ..scheduler_core.kube.harness import MIG_NODE, NAMESPACE, NODES, KubeHarness
from ..scheduler_core.runtime_builders import place
from .builders import SpawnerBuilder
from .fakes import FakeScheduler

SERVER = "import os, time; print('token', os.environ['JUPYTERHUB_API_TOKEN'], flush=True); time.sleep(60)"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[KubeHarness]:
    harness = KubeHarness(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def scheduler() -> FakeScheduler:
    return FakeScheduler(pool={"h100-mig-1g": 2})


def kube_spawner(scheduler: FakeScheduler, tmp_path: Path, kube: KubeHarness, **config: object) -> SpawnerBuilder:
    traits: dict[str, object] = {"launcher": "kubernetes", "namespace": NAMESPACE,
                                 "image": "quay.io/jupyter/base-notebook:2025-01",
                                 "kube_client_factory": kube.cluster.api_client}
    return SpawnerBuilder(scheduler, tmp_path).config(**{**traits, **config})


def secrets(kube: KubeHarness) -> dict[str, dict[str, str]]:
    return {s["metadata"]["name"]: s["data"] for s in kube.cluster.objects("secrets", NAMESPACE)}


def test_start_puts_the_hub_token_in_a_secret_and_returns_the_pods_dns_name(
        scheduler: FakeScheduler, tmp_path: Path, kube: KubeHarness) -> None:
    spawner = kube_spawner(scheduler, tmp_path, kube).build()
    host, port = asyncio.run(spawner.start())
    job_id = spawner.job_id
    assert (host, port) == (f"{names.gang_name(job_id)}-0.{names.gang_name(job_id)}.{NAMESPACE}.svc.cluster.local",
                            8888)
    spec = scheduler.specs[job_id]
    assert spec.image == "quay.io/jupyter/base-notebook:2025-01"
    assert list(spec.command) == ["jupyterhub-singleuser"]
    assert "token-of-alice" not in json.dumps(spec.model_dump(mode="json"))
    env = secrets(kube)[names.env_secret_name(job_id)]
    assert env["JUPYTERHUB_API_TOKEN"] == "token-of-alice"
    assert env["JUPYTERHUB_SERVICE_URL"].startswith("http://0.0.0.0:8888/")
    assert "PATH" not in env                                   # the hub's own PATH is not the image's
    asyncio.run(spawner.stop())
    assert names.env_secret_name(job_id) not in secrets(kube)
    assert scheduler.cancel_reasons[job_id] == "stopped from the hub"


def test_the_kubernetes_launcher_needs_an_image(scheduler: FakeScheduler, tmp_path: Path, kube: KubeHarness) -> None:
    spawner = kube_spawner(scheduler, tmp_path, kube, image="").build()
    with pytest.raises(SpawnException, match="image is not set"):
        asyncio.run(spawner.start())
    assert scheduler.specs == {}


def test_a_failed_spawn_leaves_no_secret_behind(scheduler: FakeScheduler, tmp_path: Path, kube: KubeHarness) -> None:
    spawner = kube_spawner(scheduler, tmp_path, kube).options(profile="h100").build()   # no whole H100 in the pool
    scheduler.team_limit[("fraud-ml", "h100")] = 0
    with pytest.raises(SpawnException):
        asyncio.run(spawner.start())
    assert secrets(kube) == {}


def test_the_granted_notebook_pod_lands_on_its_mig_slice_and_starts_with_its_token(
        scheduler: FakeScheduler, tmp_path: Path, kube: KubeHarness) -> None:
    spawner = kube_spawner(scheduler, tmp_path, kube, cmd=[sys.executable, "-c", SERVER]).build()
    host, _ = asyncio.run(spawner.start())
    job_id = spawner.job_id
    spec = scheduler.specs[job_id]
    # The scheduler's part: its Kubernetes executor launches the granted job, as the controller does.
    placement = place("h100-mig-1g", (MIG_NODE, (17,)))
    executor = kube.executor
    request = LaunchRequest(
        job_id=job_id, spec=spec, placement=placement, nodes=nodes_of(placement, NODES),
        env=gang_env(job_id, spec, placement, checkpoint_uri="file:///shoal/ckpt/", checkpoint_interval_s=3600,
                     master_addr=executor.master_addr(job_id, placement, 0)),
        container_devices=executor.container_devices)
    executor.launch(request)
    watch = Watch(kube)
    watch.until(watch.all_ranks(job_id, PodEventKind.STARTED, 1), "the notebook pod to start")
    pod = executor.pod_manifest(job_id, 0)
    container = pod["spec"]["containers"][0]
    assert pod["spec"]["nodeName"] == MIG_NODE
    assert container["resources"]["limits"] == {gpu_resource("h100-mig-1g"): "1"}
    assert container_env(pod)["CUDA_VISIBLE_DEVICES"] == "0"
    assert host == notebook_address(job_id, NAMESPACE) == \
        f"{pod['spec']['hostname']}.{pod['spec']['subdomain']}.{NAMESPACE}.svc.cluster.local"
    watch.until(lambda: "token token-of-alice" in kube.cluster.log(NAMESPACE, names.pod_name(job_id, 0)),
                "the server to see its token")
    asyncio.run(spawner.stop())
    executor.terminate(job_id, 0)                       # the scheduler's part of the cancel
    watch.until(watch.ended(job_id, 1), "the notebook pod to stop")
