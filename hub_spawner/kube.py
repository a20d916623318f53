"""The notebook pod for JupyterHub on Kubernetes, as pure functions of the grant (tested without a cluster).

On Kubernetes the scheduler's grant names a node and the exact units on it. The pod is bound to that node
(``nodeName``: the scheduler has already placed it, so kube-scheduler must not place it again), asks the device
plugin for one unit of the granted MIG profile (``nvidia.com/mig-1g.10gb``) or whole GPUs (``nvidia.com/gpu``) so
the kubelet's own accounting agrees with Shoal's, and sees exactly the granted devices through
``NVIDIA_VISIBLE_DEVICES``/``CUDA_VISIBLE_DEVICES``. The hub's token goes in a Secret of its own, never in the
job's spec or the pod's literal env.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from scheduler_core.model import get_flavour

_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True, slots=True)
class Grant:
    """What the scheduler granted a notebook job: where, which flavour, and the devices it may see."""

    job_id: str
    node: str
    flavour: str
    units: int
    devices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NotebookPodSpec:
    user: str
    server_name: str
    namespace: str
    image: str
    command: Sequence[str]
    port: int
    env: Mapping[str, str] = field(default_factory=dict)   # no secrets here
    secret_name: str = ""                                   # holds JUPYTERHUB_API_TOKEN etc.
    secret_keys: Sequence[str] = ()
    cpu: str = "2"
    memory: str = "16Gi"
    labels: Mapping[str, str] = field(default_factory=dict)
    service_account: str | None = None


def pod_name(user: str, server_name: str) -> str:
    """A DNS-1123 name for ``user``'s server (``jupyter-alice``, ``jupyter-ann-corp-gpu``)."""
    raw = _DNS.sub("-", f"jupyter-{user}{'-' + server_name if server_name else ''}".lower()).strip("-")
    return raw[:63].rstrip("-")


def gpu_resource(flavour: str) -> str:
    """The device plugin's resource name for a flavour: ``nvidia.com/mig-1g.10gb`` or ``nvidia.com/gpu``."""
    profile = get_flavour(flavour).mig_profile
    return f"nvidia.com/mig-{profile}" if profile else "nvidia.com/gpu"


def make_notebook_pod(spec: NotebookPodSpec, grant: Grant) -> dict[str, Any]:
    """The pod manifest (a plain dict, as ``kubectl apply`` takes it) for one notebook on its grant."""
    devices = ",".join(grant.devices)
    env = [{"name": k, "value": v} for k, v in sorted(spec.env.items())]
    env += [{"name": "CUDA_VISIBLE_DEVICES", "value": devices},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": devices},
            {"name": "SHOAL_JOB_ID", "value": grant.job_id}]
    env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": spec.secret_name, "key": key}}}
            for key in spec.secret_keys]
    gpu = {gpu_resource(grant.flavour): str(grant.units)}
    labels = {"app.kubernetes.io/name": "shoal-notebook", "app.kubernetes.io/component": "singleuser-server",
              "shoal.io/job-id": grant.job_id, "hub.jupyter.org/username": _DNS.sub("-", spec.user.lower())[:63],
              **spec.labels}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(spec.user, spec.server_name), "namespace": spec.namespace, "labels": labels,
                     "annotations": {"shoal.io/node": grant.node, "shoal.io/devices": devices}},
        "spec": {
            "nodeName": grant.node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": spec.service_account is not None,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 100},
            "containers": [{
                "name": "notebook",
                "image": spec.image,
                "command": list(spec.command),
                "ports": [{"name": "notebook-port", "containerPort": spec.port}],
                "env": env,
                "resources": {"requests": {"cpu": spec.cpu, "memory": spec.memory, **gpu},
                              "limits": {"memory": spec.memory, **gpu}},
                "securityContext": {"allowPrivilegeEscalation": False},
            }],
            "terminationGracePeriodSeconds": 10,
        },
    }
    if spec.service_account is not None:
        pod["spec"]["serviceAccountName"] = spec.service_account
    return pod


def make_notebook_secret(name: str, namespace: str, values: Mapping[str, str],
                         labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Secret that carries the hub's token (and anything else private) to the pod."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "stringData": dict(values)}
