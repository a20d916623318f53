"""The gang's manifests, built without a cluster and validated against the Kubernetes OpenAPI schema."""

from __future__ import annotations

import kubernetes_validate
import pytest

from scheduler_core.errors import ValidationFailed
from scheduler_core.executor.base import LaunchRequest
from scheduler_core.job_env import gang_env, nodes_of, pod_env
from scheduler_core.kube import names
from scheduler_core.kube.manifests import (PodSettings, SharedVolume, container_env, gpu_resource, make_gang,
                                           make_gang_service, make_pod, make_secret)
from scheduler_core.model import JobKind, JobSpec

from ..runtime_builders import make_spec, place
from .fake_cluster import K8S_VERSION
from .harness import MIG_NODE, NODES

SETTINGS = PodSettings(namespace="jobs", image="ghcr.io/acme/train:1", shared=SharedVolume("shoal-shared", "/shoal"))


def request(spec: JobSpec, *pods: tuple[str, tuple[int, ...]], flavour: str = "h100", job_id: str = "job_8c41a2",
            attempt: int = 0) -> LaunchRequest:
    placement = place(flavour, *pods)
    env = gang_env(job_id, spec, placement, checkpoint_uri=f"file:///shoal/checkpoints/{job_id}/",
                   checkpoint_interval_s=600, master_addr=names.pod_address(job_id, 0, "jobs"))
    return LaunchRequest(job_id=job_id, spec=spec, placement=placement, nodes=nodes_of(placement, NODES), env=env,
                         attempt=attempt, container_devices=True)


GANG = request(make_spec("train").pods(2, 8).grace(300).build(),
               ("h100-b0-n00", tuple(range(8))), ("h100-b0-n01", tuple(range(8))))
NOTEBOOK = request(make_spec("nb").flavour("h100-mig-1g").pods(1, 1).build().model_copy(
    update={"kind": JobKind.NOTEBOOK}), (MIG_NODE, (17,)), flavour="h100-mig-1g", job_id="job_0a1b2c")


def owner() -> dict[str, object]:
    service = make_gang_service(GANG.job_id, 0, SETTINGS)
    service["metadata"]["uid"] = "4f1c7c2e-0000-4000-8000-000000000001"
    return service


@pytest.mark.parametrize("manifest", [
    pytest.param(lambda: make_gang_service(GANG.job_id, 0, SETTINGS), id="service"),
    pytest.param(lambda: make_pod(GANG, 1, SETTINGS, owner()), id="gang-pod"),
    pytest.param(lambda: make_pod(NOTEBOOK, 0, SETTINGS), id="notebook-pod"),
    pytest.param(lambda: make_pod(GANG, 0, PodSettings(namespace="jobs", image="x", shm_size=None,
                                                       run_as_user=None, fs_group=None, service_account="trainer",
                                                       image_pull_secrets=("regcred",), priority_class="gpu")),
                 id="pod-other-settings"),
    pytest.param(lambda: make_secret("job-0a1b2c-env", "jobs", {"JUPYTERHUB_API_TOKEN": "t"}), id="secret"),
])
def test_every_manifest_validates_against_the_kubernetes_schema(manifest: object) -> None:
    kubernetes_validate.validate(manifest(), K8S_VERSION, strict=True)  # type: ignore[operator]


def test_a_gang_pod_is_bound_to_its_node_with_the_job_contract_and_owned_by_the_gang() -> None:
    pod = make_pod(GANG, 1, SETTINGS, owner())
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    assert pod["metadata"]["name"] == "job-8c41a2-1"
    assert spec["nodeName"] == "h100-b0-n01"
    assert (spec["hostname"], spec["subdomain"]) == ("job-8c41a2-1", "job-8c41a2")
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"} == container["resources"]["requests"]
    assert spec["terminationGracePeriodSeconds"] == 300
    assert spec["restartPolicy"] == "Never"
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Service", "name": "job-8c41a2",
                                                   "uid": "4f1c7c2e-0000-4000-8000-000000000001",
                                                   "controller": True}]
    env = container_env(pod)
    assert {k: env[k] for k in pod_env(GANG, 1)} == pod_env(GANG, 1)
    assert env["MASTER_ADDR"] == "job-8c41a2-0.job-8c41a2.jobs.svc.cluster.local"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"     # what the device plugin mounts, counted from 0
    assert env["SHOAL_REPORT_FILE"] == "/shoal/reports/job-8c41a2/0/reports.jsonl"
    assert env["SHOAL_CONTROL_FILE"] == "/shoal/control/job-8c41a2/0/checkpoint"
    assert {"name": "SHOAL_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in container["env"]
    assert pod["metadata"]["labels"][names.LABEL_GANG] == "job-8c41a2"
    assert pod["metadata"]["annotations"][names.ANNOTATION_JOB] == "job_8c41a2"


def test_the_headless_service_names_every_pod_before_it_is_ready() -> None:
    service = make_gang_service(GANG.job_id, 2, SETTINGS)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {names.LABEL_GANG: "job-8c41a2"}
    assert service["spec"]["ports"][0]["port"] == int(GANG.env["MASTER_PORT"])
    assert service["metadata"]["annotations"][names.ANNOTATION_ATTEMPT] == "2"


def test_a_notebook_pod_lands_on_its_granted_mig_slice_and_waits_for_its_secret() -> None:
    pod = make_pod(NOTEBOOK, 0, SETTINGS)
    container = pod["spec"]["containers"][0]
    assert pod["spec"]["nodeName"] == MIG_NODE
    assert container["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert container_env(pod)["CUDA_VISIBLE_DEVICES"] == "0"
    assert container["envFrom"] == [{"secretRef": {"name": "job-0a1b2c-env", "optional": False}}]
    gang_pod = make_pod(GANG, 0, SETTINGS)["spec"]["containers"][0]
    assert gang_pod["envFrom"] == [{"secretRef": {"name": "job-8c41a2-env", "optional": True}}]


def test_every_pod_of_a_gang_in_rank_order() -> None:
    pods = make_gang(GANG, SETTINGS)
    assert [p["metadata"]["name"] for p in pods] == ["job-8c41a2-0", "job-8c41a2-1"]
    assert [container_env(p)["RANK"] for p in pods] == ["0", "1"]


def test_a_job_without_an_image_is_refused_when_no_default_is_configured() -> None:
    with pytest.raises(ValidationFailed, match="names no image"):
        make_pod(GANG, 0, PodSettings(namespace="jobs"))


@pytest.mark.parametrize(("grace", "seconds"), [(0, 0), (0.2, 1), (30, 30), (30.5, 31)])
def test_grace_rounds_up_to_whole_seconds(grace: float, seconds: int) -> None:
    spec = make_spec("g").pods(1, 1).grace(grace).build()
    pod = make_pod(request(spec, ("h100-b0-n00", (0,))), 0, SETTINGS)
    assert pod["spec"]["terminationGracePeriodSeconds"] == seconds


@pytest.mark.parametrize(("job_id", "exact", "prefix"), [
    ("job_8c41a2", True, "job-8c41a2"),
    ("job_start1", True, "job-start1"),
    ("job-start1", False, "job-start1-"),      # differs from job_start1 only where it had to be replaced
    ("job_start1_", False, "job-start1-"),
    ("Job_X", False, "job-x-"),
    ("7up", False, "j-7up-"),
    ("job_" + "a" * 80, False, "job-" + "a" * 44 + "-"),
])
def test_gang_names_are_dns_labels(job_id: str, exact: bool, prefix: str) -> None:
    name = names.gang_name(job_id)
    if exact:
        assert name == prefix
    else:
        assert name.startswith(prefix) and len(name) == len(prefix) + 8 and int(name[len(prefix):], 16) >= 0
    assert len(name) <= names.MAX_GANG and name[0].isalpha() and name == name.lower()
    assert len(names.pod_name(job_id, 1023)) <= 63


def test_distinct_ids_that_look_alike_get_distinct_names() -> None:
    ids = ["job_start1", "job-start1", "JOB_START1", "job_start1_", "job.start1"]
    assert len({names.gang_name(i) for i in ids}) == len(ids)


@pytest.mark.parametrize(("flavour", "resource"), [
    ("h100-mig-1g", "nvidia.com/mig-1g.10gb"), ("h100-mig-2g", "nvidia.com/mig-2g.20gb"),
    ("h100-mig-3g", "nvidia.com/mig-3g.40gb"), ("h100", "nvidia.com/gpu"), ("a100", "nvidia.com/gpu"),
])
def test_gpu_resource_names(flavour: str, resource: str) -> None:
    assert gpu_resource(flavour) == resource
