"""The job contract's environment (DESIGN §3.3), as pure functions every executor and the controller share.

Why one module: a job must see the same ``RANK``/``CUDA_VISIBLE_DEVICES`` whether it runs as a local process, a
Kubernetes pod or in the simulator, so no executor computes these itself. The controller builds the part common
to every pod (``gang_env``); each executor adds the per-pod part (``pod_env``) when it starts a pod.

Conventions: one pod is one process group on one node (its framework launcher spawns per-GPU workers), so
``WORLD_SIZE`` is the number of pods, ``RANK`` the pod's index in the placement and ``LOCAL_RANK`` its index among
the job's pods on the same node (0 for a whole-node pod).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Mapping

from .executor.base import LaunchRequest
from .model.cluster import Node
from .model.job import JobSpec
from .policy.snapshot import Placement

#: Namespace of the MIG UUIDs Shoal derives: stable across restarts, different for every (node, GPU, slice).
MIG_NAMESPACE = uuid.UUID("6f1f5d0e-5c1e-4f63-9a59-2d0c8a8e5b7a")
MASTER_PORT_BASE = 29500
MASTER_PORT_SPAN = 20000

#: Variables the platform owns: a spec's ``env`` cannot override them.
CONTRACT_VARS = frozenset({
    "SHOAL_JOB_ID", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SHOAL_CHECKPOINT_URI", "SHOAL_CHECKPOINT_INTERVAL",
    "RANK", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES",
})


def master_port(job_id: str) -> int:
    """A port fixed by the job id, so every restart of a gang agrees on it without coordination."""
    return MASTER_PORT_BASE + zlib.crc32(job_id.encode()) % MASTER_PORT_SPAN


def default_checkpoint_uri(root: str, team: str, job_id: str) -> str:
    """``file://<root>/<team>/<job_id>/``: where a job's checkpoints go when its spec names no place."""
    return f"file://{root.rstrip('/')}/{team}/{job_id}/"


def gang_env(job_id: str, spec: JobSpec, placement: Placement, *, checkpoint_uri: str,
             checkpoint_interval_s: float, master_addr: str | None = None) -> dict[str, str]:
    """What every pod of the gang shares: the spec's own env, then the contract's variables over it.
    ``master_addr``: where rank 0 is reached (default its node's name; see ``Executor.master_addr``)."""
    env = dict(spec.env)
    env.update({
        "SHOAL_JOB_ID": job_id,
        "WORLD_SIZE": str(len(placement.pods)),
        "MASTER_ADDR": master_addr if master_addr is not None else placement.pods[0].node,
        "MASTER_PORT": str(master_port(job_id)),
        "SHOAL_CHECKPOINT_URI": checkpoint_uri,
        "SHOAL_CHECKPOINT_INTERVAL": str(int(round(checkpoint_interval_s))),
    })
    return env


def mig_uuid(node: str, gpu: int, slice_index: int) -> str:
    """``MIG-<uuid>`` for one slice, derived from where it is so that it never changes between launches."""
    return f"MIG-{uuid.uuid5(MIG_NAMESPACE, f'{node}/{gpu}/{slice_index}')}"


def visible_devices(node: Node, flavour: str, units: tuple[int, ...], *, in_container: bool = False) -> str:
    """``CUDA_VISIBLE_DEVICES`` for ``units`` of ``flavour`` on ``node``: GPU indices, or MIG UUIDs for slices.

    ``in_container``: the pod sees only its granted devices (Kubernetes' device plugin mounts exactly those, and
    which physical ones is the kubelet's choice), so they are ``0..n-1`` whatever the node's numbering."""
    if in_container:
        return ",".join(str(index) for index in range(len(units)))
    devices = node.devices[flavour]
    parts: list[str] = []
    for index in units:
        device = devices[index]
        parts.append(str(device.gpu) if device.slice is None else mig_uuid(node.name, device.gpu, device.slice))
    return ",".join(parts)


def pod_env(request: LaunchRequest, rank: int) -> dict[str, str]:
    """The full environment of pod ``rank``: the request's gang env plus ``RANK``, ``LOCAL_RANK`` and
    ``CUDA_VISIBLE_DEVICES``."""
    pods = request.placement.pods
    pod = pods[rank]
    local_rank = sum(1 for other in pods[:rank] if other.node == pod.node)
    env = dict(request.env)
    env.update({
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "CUDA_VISIBLE_DEVICES": visible_devices(request.nodes[pod.node], request.placement.flavour, pod.units,
                                                in_container=request.container_devices),
    })
    return env


def nodes_of(placement: Placement, nodes: Mapping[str, Node]) -> dict[str, Node]:
    """The subset of ``nodes`` a launch needs (what ``LaunchRequest.nodes`` carries)."""
    return {name: nodes[name] for name in placement.nodes}
