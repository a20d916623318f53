"""The notebook pod on Kubernetes, built without a cluster: pinned to the grant, the token only in a Secret."""

from __future__ import annotations

import json

import pytest

from hub_spawner.kube import Grant, NotebookPodSpec, gpu_resource, make_notebook_pod, make_notebook_secret, pod_name

GRANT = Grant(job_id="j-7f3a", node="mig-a-n03", flavour="h100-mig-1g", units=1,
              devices=("MIG-2b1c0d9e-0000-5000-8000-000000000001",))
SPEC = NotebookPodSpec(user="Ann@corp", server_name="gpu", namespace="notebooks", image="ghcr.io/acme/nb:1",
                       command=["jupyterhub-singleuser"], port=8888, env={"JUPYTERHUB_USER": "Ann@corp"},
                       secret_name="jupyter-ann-corp-gpu", secret_keys=["JUPYTERHUB_API_TOKEN"])


def test_the_pod_is_bound_to_the_granted_node_and_sees_exactly_the_granted_slice() -> None:
    pod = make_notebook_pod(SPEC, GRANT)
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert pod["metadata"]["name"] == "jupyter-ann-corp-gpu"
    assert pod["spec"]["nodeName"] == "mig-a-n03"
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == GRANT.devices[0]
    assert env["SHOAL_JOB_ID"] == "j-7f3a"
    assert container["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    assert container["resources"]["requests"]["nvidia.com/mig-1g.10gb"] == "1"
    assert container["ports"] == [{"name": "notebook-port", "containerPort": 8888}]
    assert pod["metadata"]["labels"]["shoal.io/job-id"] == "j-7f3a"


def test_the_hub_token_is_referenced_from_the_secret_never_written_into_the_pod() -> None:
    pod = make_notebook_pod(SPEC, GRANT)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["JUPYTERHUB_API_TOKEN"] == {"name": "JUPYTERHUB_API_TOKEN", "valueFrom": {
        "secretKeyRef": {"name": "jupyter-ann-corp-gpu", "key": "JUPYTERHUB_API_TOKEN"}}}
    secret = make_notebook_secret("jupyter-ann-corp-gpu", "notebooks", {"JUPYTERHUB_API_TOKEN": "s3cret"})
    assert secret["stringData"] == {"JUPYTERHUB_API_TOKEN": "s3cret"}
    assert "s3cret" not in json.dumps(pod)


@pytest.mark.parametrize("flavour, resource", [
    ("h100-mig-1g", "nvidia.com/mig-1g.10gb"), ("h100-mig-2g", "nvidia.com/mig-2g.20gb"),
    ("h100-mig-3g", "nvidia.com/mig-3g.40gb"), ("h100", "nvidia.com/gpu"), ("a100", "nvidia.com/gpu"),
])
def test_gpu_resource_names(flavour: str, resource: str) -> None:
    assert gpu_resource(flavour) == resource


@pytest.mark.parametrize("user, server, name", [
    ("alice", "", "jupyter-alice"), ("Bob.Smith", "Big_GPU", "jupyter-bob-smith-big-gpu"),
    ("x" * 80, "", "jupyter-" + "x" * 55),
])
def test_pod_names_are_dns_labels(user: str, server: str, name: str) -> None:
    assert pod_name(user, server) == name
