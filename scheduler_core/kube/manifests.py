"""The Kubernetes objects of a gang, as pure functions of a ``LaunchRequest`` (tested without a cluster).

One set of builders for every pod Shoal runs — training gangs, sweep trials and notebooks alike (the spawner's
notebook is a ``kind: notebook`` job, launched by the executor like any other). A gang is:

* a **headless Service** named after the job (``clusterIP: None``, ``publishNotReadyAddresses``), which gives every
  pod a DNS name as soon as it has an IP — rank 0's is ``MASTER_ADDR`` — and is the **owner** of the gang's pods,
  so deleting it deletes the gang as one (Kubernetes' garbage collector follows the owner references);
* one **pod per rank**, bound to the node the scheduler chose (``nodeName``: kube-scheduler must not place it
  again), asking the NVIDIA device plugin for ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>`` units so the
  kubelet's accounting agrees with Shoal's, with the job contract's environment (``scheduler_core.job_env``) and
  ``terminationGracePeriodSeconds`` set to the job's grace period.

Private variables (a notebook's hub token) never enter the job's spec: they come from the Secret
``<gang>-env`` through ``envFrom``; a notebook waits for it, other jobs start without it. Which physical GPU or
slice a pod gets is the device plugin's choice, so inside the pod ``CUDA_VISIBLE_DEVICES`` counts the granted
devices from 0 (``LaunchRequest.container_devices``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationFailed
from ..executor.base import LaunchRequest
from ..job_env import master_port, pod_env
from ..model.flavours import get_flavour
from ..model.job import JobKind
from . import names

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.\-]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True, slots=True)
class SharedVolume:
    """A ReadWriteMany volume every pod and the scheduler mount: checkpoints (``file://`` URIs under it), the
    jobs' reports to the scheduler (checkpoints written, step times) and the scheduler's checkpoint requests.

    ``mount_path`` is where pods see it; ``local_path`` where this scheduler process sees it (the same path when
    the scheduler's Deployment mounts the claim there, the default)."""

    claim: str
    mount_path: str = "/shoal"
    local_path: str | None = None

    @property
    def scheduler_path(self) -> str:
        return self.local_path or self.mount_path

    def report_file(self, gang: str, attempt: int, *, local: bool = False) -> str:
        root = self.scheduler_path if local else self.mount_path
        return f"{root.rstrip('/')}/reports/{gang}/{attempt}/reports.jsonl"

    def control_file(self, gang: str, attempt: int, *, local: bool = False) -> str:
        root = self.scheduler_path if local else self.mount_path
        return f"{root.rstrip('/')}/control/{gang}/{attempt}/checkpoint"


@dataclass(frozen=True, slots=True)
class PodSettings:
    """What the cluster's operator decides for every job pod (``shoal up --executor kubernetes`` options)."""

    namespace: str = "shoal-jobs"
    #: The image of a job whose spec names none.
    image: str = ""
    cluster_domain: str = "cluster.local"
    shared: SharedVolume | None = None
    #: ``None``: no service account token is mounted into job pods (they need no API access).
    service_account: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    priority_class: str | None = None
    #: ``/dev/shm`` as memory (NCCL's and data loaders' shared memory); ``None`` keeps the runtime's 64 MiB.
    shm_size: str | None = "64Gi"
    run_as_user: int | None = 1000
    fs_group: int | None = 100
    labels: Mapping[str, str] = field(default_factory=dict)


def gpu_resource(flavour: str) -> str:
    """The device plugin's resource for a flavour: ``nvidia.com/mig-1g.10gb`` or ``nvidia.com/gpu``."""
    profile = get_flavour(flavour).mig_profile
    return f"nvidia.com/mig-{profile}" if profile else "nvidia.com/gpu"


def env_list(env: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": key, "value": value} for key, value in sorted(env.items())]


def job_pod_env(request: LaunchRequest, rank: int, settings: PodSettings) -> dict[str, str]:
    """Pod ``rank``'s literal environment: the job contract's (``job_env.pod_env``) and what the executor adds for
    the job contract helper (attempt, gang size, where to report, where checkpoint requests appear)."""
    env = pod_env(request, rank)
    gang = names.gang_name(request.job_id)
    env.update({
        "SHOAL_ATTEMPT": str(request.attempt),
        "SHOAL_GANG_GPUS": str(sum(len(pod.units) for pod in request.placement.pods)),
        "PYTHONUNBUFFERED": "1",
    })
    if settings.shared is not None:
        env["SHOAL_REPORT_FILE"] = settings.shared.report_file(gang, request.attempt)
        env["SHOAL_CONTROL_FILE"] = settings.shared.control_file(gang, request.attempt)
    if request.spec.checkpoint.cost is not None:
        env.setdefault("SHOAL_CHECKPOINT_COST", str(request.spec.checkpoint.cost))
    return env


def _metadata(name: str, namespace: str, job_id: str, attempt: int, settings: PodSettings,
              extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    labels = {**settings.labels, names.MANAGED_BY[0]: names.MANAGED_BY[1],
              names.LABEL_GANG: names.gang_name(job_id), **(extra_labels or {})}
    return {"name": name, "namespace": namespace, "labels": labels,
            "annotations": {names.ANNOTATION_JOB: job_id, names.ANNOTATION_ATTEMPT: str(attempt)}}


def make_gang_service(job_id: str, attempt: int, settings: PodSettings) -> dict[str, Any]:
    """The gang's headless Service: its pods' DNS names, and the owner of its pods."""
    gang = names.gang_name(job_id)
    port = master_port(job_id)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(gang, settings.namespace, job_id, attempt, settings),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,   # rank 0 resolves before every rank is ready: rendezvous needs it
            "selector": {names.LABEL_GANG: gang},
            "ports": [{"name": "master", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An owner reference to a created object (it has a uid), so deleting the owner deletes what it owns."""
    metadata = owner["metadata"]
    return {"apiVersion": owner.get("apiVersion", "v1"), "kind": owner["kind"], "name": metadata["name"],
            "uid": metadata["uid"], "controller": True}


def make_pod(request: LaunchRequest, rank: int, settings: PodSettings,
             owner: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Pod ``rank`` of the gang, bound to its node, with the job contract's environment."""
    spec = request.spec
    placed = request.placement.pods[rank]
    image = spec.image or settings.image
    if not image:
        raise ValidationFailed(f"job {request.job_id} names no image and the executor has no default image "
                               f"(--kube-image)")
    gang = names.gang_name(request.job_id)
    name = names.pod_name(request.job_id, rank)
    labels = {names.LABEL_RANK: str(rank), "shoal.io/kind": spec.kind.value}
    if _LABEL_VALUE.match(spec.team):
        labels["shoal.io/team"] = spec.team
    metadata = _metadata(name, settings.namespace, request.job_id, request.attempt, settings, labels)
    metadata["annotations"].update({f"shoal.io/label.{key}": value for key, value in sorted(spec.labels.items())})
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    units = str(len(placed.units))
    gpu = {gpu_resource(request.placement.flavour): units}
    requests: dict[str, str] = dict(gpu)
    limits: dict[str, str] = dict(gpu)
    if spec.cpus_per_pod is not None:
        requests["cpu"] = str(spec.cpus_per_pod)
    if spec.memory_gb_per_pod is not None:
        requests["memory"] = limits["memory"] = f"{spec.memory_gb_per_pod}Gi"
    env = env_list(job_pod_env(request, rank, settings))
    env.append({"name": "SHOAL_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    container: dict[str, Any] = {
        "name": names.CONTAINER,
        "image": image,
        "command": list(spec.command),
        "env": env,
        # A notebook must not start without the hub's token; other jobs may have no private variables at all.
        "envFrom": [{"secretRef": {"name": names.env_secret_name(request.job_id),
                                   "optional": spec.kind is not JobKind.NOTEBOOK}}],
        "resources": {"requests": requests, "limits": limits},
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if settings.shared is not None:
        volumes.append({"name": "shoal-shared", "persistentVolumeClaim": {"claimName": settings.shared.claim}})
        mounts.append({"name": "shoal-shared", "mountPath": settings.shared.mount_path})
    if settings.shm_size is not None:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {
        "nodeName": placed.node,
        "hostname": name,
        "subdomain": gang,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace_seconds(spec.checkpoint.grace_period),
        "enableServiceLinks": False,   # thousands of gang Services would otherwise become env variables
        "automountServiceAccountToken": settings.service_account is not None,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    security: dict[str, Any] = {}
    if settings.run_as_user is not None:
        security.update({"runAsNonRoot": True, "runAsUser": settings.run_as_user})
    if settings.fs_group is not None:
        security["fsGroup"] = settings.fs_group
    if security:
        pod_spec["securityContext"] = security
    if volumes:
        pod_spec["volumes"] = volumes
    if settings.service_account is not None:
        pod_spec["serviceAccountName"] = settings.service_account
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": secret} for secret in settings.image_pull_secrets]
    if settings.priority_class is not None:
        pod_spec["priorityClassName"] = settings.priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def make_gang(request: LaunchRequest, settings: PodSettings,
              owner: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every pod of the gang, rank order."""
    return [make_pod(request, rank, settings, owner) for rank in range(len(request.placement.pods))]


def make_secret(name: str, namespace: str, values: Mapping[str, str],
                labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Secret of string values (a notebook's hub token, say), labelled as Shoal's."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {names.MANAGED_BY[0]: names.MANAGED_BY[1], **(labels or {})}},
            "stringData": dict(values)}


def grace_seconds(grace_s: float) -> int:
    """Kubernetes counts grace in whole seconds: round up, so a job never gets less than it was promised."""
    return max(0, math.ceil(grace_s - 1e-9))


def container_env(pod: Mapping[str, Any]) -> dict[str, str]:
    """The literal environment of a pod manifest's job container (``valueFrom`` entries left out)."""
    for container in pod["spec"]["containers"]:
        if container["name"] == names.CONTAINER:
            return {e["name"]: e["value"] for e in container.get("env", ()) if "value" in e}
    return {}


def pod_rank(pod: Mapping[str, Any]) -> int | None:
    try:
        return int(pod["metadata"]["labels"][names.LABEL_RANK])
    except (KeyError, TypeError, ValueError):
        return None


def pod_job(pod: Mapping[str, Any]) -> str | None:
    value = (pod.get("metadata", {}).get("annotations") or {}).get(names.ANNOTATION_JOB)
    return str(value) if value is not None else None


def pod_attempt(pod: Mapping[str, Any]) -> int:
    try:
        return int((pod["metadata"].get("annotations") or {})[names.ANNOTATION_ATTEMPT])
    except (KeyError, TypeError, ValueError):
        return 0


def describe(objects: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
