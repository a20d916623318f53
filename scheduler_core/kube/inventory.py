"""The cluster's GPU nodes as Shoal sees them, from Kubernetes Node objects (pure functions; no client here).

**Shape** (``node_from_object``): GPUs and MIG slices from the node's *capacity* as the NVIDIA device plugin
advertises it — ``nvidia.com/gpu`` for whole GPUs, ``nvidia.com/mig-<profile>`` per MIG profile (the device
plugin's ``mixed`` MIG strategy; a node under the ``single`` strategy is skipped, since its slices are not
distinguishable from GPUs by resource name). The GPU model comes from GPU feature discovery's
``nvidia.com/gpu.product`` label, or Shoal's own ``shoal.io/flavour`` label where that is missing or ambiguous.
Block and leaf come from configurable labels (``NodeLabels``); the defaults are documented in docs/deploy.md.

**Health** (``node_health``), worst first: *repair* when the node is not Ready or carries a NoExecute taint;
*draining* when it is cordoned or carries a NoSchedule taint that is not one of the GPU nodes' usual ones;
*suspect* when a GPU error signal is up — a node condition such as ``GPUUnhealthy`` or ``XidCriticalError`` (set by
node-problem-detector or a DCGM health exporter), a pressure condition, or the device plugin advertising fewer
healthy devices than the node has (it withdraws a GPU from *allocatable* after a critical Xid). Otherwise ready.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..executor.base import NodeReport
from ..model.cluster import Device, Health, Node
from ..model.flavours import FLAVOURS, MIG_PROFILES

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
DEFAULT_BLOCK_LABEL = "topology.kubernetes.io/block"
DEFAULT_LEAF_LABEL = "topology.kubernetes.io/leaf"


@dataclass(frozen=True, slots=True)
class NodeLabels:
    """Which node labels and conditions mean what. Every default can be changed (``shoal up --kube-*``)."""

    block: str = DEFAULT_BLOCK_LABEL
    leaf: str = DEFAULT_LEAF_LABEL
    #: Overrides the GPU model read from ``product``: ``h100`` or ``a100``.
    flavour: str = "shoal.io/flavour"
    product: str = "nvidia.com/gpu.product"
    spare: str = "shoal.io/spare"
    small_jobs: str = "shoal.io/small-jobs"
    #: A label selector naming the nodes Shoal schedules (``None``: every node with NVIDIA GPUs).
    selector: str | None = None
    #: Node conditions that, when ``True``, mark a node suspect: GPU error signals and node pressure.
    suspect_conditions: frozenset[str] = frozenset({
        "GPUUnhealthy", "XidCriticalError", "DCGMHealthFailed", "KernelDeadlock", "ReadonlyFilesystem",
        "MemoryPressure", "DiskPressure", "PIDPressure"})
    #: Taints every GPU node carries to keep other pods off; they say nothing about health.
    ignored_taints: frozenset[str] = frozenset({GPU, "node.kubernetes.io/unschedulable"})


@dataclass(frozen=True, slots=True)
class Skipped:
    """A node left out of the inventory, and why (an operator reads these at start-up)."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Inventory:
    nodes: tuple[Node, ...]
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


def quantity(value: object) -> float:
    """A Kubernetes resource quantity (``"192"``, ``"1500m"``, ``"2064Gi"``) as a number."""
    match = _QUANTITY.match(str(value).strip())
    if match is None or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a resource quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _resources(obj: Mapping[str, Any], key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in ((obj.get("status") or {}).get(key) or {}).items():
        try:
            out[str(name)] = quantity(value)
        except ValueError:
            continue
    return out


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _whole_flavour(obj: Mapping[str, Any], labels: NodeLabels) -> str | None:
    node_labels = _labels(obj)
    chosen = node_labels.get(labels.flavour)
    if chosen:
        return chosen if chosen in FLAVOURS and not FLAVOURS[chosen].is_mig else None
    product = node_labels.get(labels.product, "").upper()
    for flavour in ("h100", "a100"):
        if flavour.upper() in product:
            return flavour
    return None


def node_from_object(obj: Mapping[str, Any], labels: NodeLabels = NodeLabels()) -> Node | Skipped:
    """Shoal's ``Node`` for a Kubernetes Node object, or why it is not one of Shoal's nodes."""
    name = str(obj["metadata"]["name"])
    node_labels = _labels(obj)
    capacity = _resources(obj, "capacity")
    if node_labels.get("nvidia.com/mig.strategy") == "single":
        return Skipped(name, "MIG strategy 'single' (use the device plugin's 'mixed' strategy: slices must be "
                             "named per profile)")
    devices: dict[str, list[Device]] = {}
    gpu = 0
    whole = int(capacity.get(GPU, 0))
    model = _whole_flavour(obj, labels)
    if whole:
        if model is None:
            return Skipped(name, f"{whole} {GPU} but an unknown GPU model (label {labels.product}="
                                 f"{node_labels.get(labels.product)!r}; set {labels.flavour}=h100|a100)")
        devices[model] = [Device(g) for g in range(whole)]
        gpu = whole
    for resource, count in sorted(capacity.items()):
        if not resource.startswith(MIG_PREFIX) or count < 1:
            continue
        profile = resource.removeprefix(MIG_PREFIX)
        flavour_name = MIG_PROFILES.get(profile)
        if flavour_name is None:
            return Skipped(name, f"MIG profile {profile!r} is not one of Shoal's flavours "
                                 f"({', '.join(MIG_PROFILES)})")
        per_gpu = FLAVOURS[flavour_name].units_per_gpu
        units = int(count)
        devices[flavour_name] = [Device(gpu + i // per_gpu, i % per_gpu) for i in range(units)]
        gpu += math.ceil(units / per_gpu)
        model = model or "h100"
    if not devices:
        return Skipped(name, "no NVIDIA GPUs advertised (nvidia.com/gpu or nvidia.com/mig-*)")
    block = node_labels.get(labels.block) or "default"
    leaf = node_labels.get(labels.leaf) or f"{block}-leaf"
    return Node(
        name=name, block=block, leaf=leaf, gpu_model=FLAVOURS[model or "h100"].gpu_model, gpus=gpu,
        cpus=int(capacity.get("cpu", 1)), memory_gb=max(1, int(capacity.get("memory", 0) / 2**30)),
        devices={flavour: tuple(units) for flavour, units in devices.items()},
        spare=node_labels.get(labels.spare, "").lower() == "true",
        small_jobs=node_labels.get(labels.small_jobs, "").lower() == "true",
    )


def inventory(objects: Iterable[Mapping[str, Any]], labels: NodeLabels = NodeLabels()) -> Inventory:
    """Every GPU node of the cluster, sorted by block and name, and the nodes left out with the reason."""
    nodes: list[Node] = []
    skipped: list[Skipped] = []
    for obj in objects:
        result = node_from_object(obj, labels)
        (nodes if isinstance(result, Node) else skipped).append(result)  # type: ignore[arg-type]
    nodes.sort(key=lambda n: (n.block, n.name))
    return Inventory(tuple(nodes), tuple(sorted(skipped, key=lambda s: s.name)))


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return condition  # type: ignore[no-any-return]
    return None


def is_ready(obj: Mapping[str, Any]) -> bool:
    ready = _condition(obj, "Ready")
    return ready is not None and ready.get("status") == "True"


def not_ready_since(obj: Mapping[str, Any]) -> float | None:
    """When the node stopped being Ready (epoch seconds), or ``None`` while it is Ready."""
    ready = _condition(obj, "Ready")
    if ready is not None and ready.get("status") == "True":
        return None
    stamp = (ready or {}).get("lastTransitionTime")
    return parse_time(stamp) if stamp else 0.0


def parse_time(stamp: str) -> float:
    """An RFC 3339 timestamp as the API writes it (``2025-01-31T12:00:00Z``) in epoch seconds."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def node_health(obj: Mapping[str, Any], labels: NodeLabels = NodeLabels()) -> NodeReport:
    """The cluster's word on one node: the worst of what its conditions, taints and devices say."""
    ready = _condition(obj, "Ready")
    if ready is None or ready.get("status") != "True":
        why = (ready or {}).get("reason") or "no Ready condition"
        message = (ready or {}).get("message") or ""
        return NodeReport(Health.REPAIR, f"not Ready ({why}{': ' + message if message else ''})")
    taints = [t for t in (obj.get("spec") or {}).get("taints") or () if t.get("key") not in labels.ignored_taints]
    for taint in taints:
        if taint.get("effect") == "NoExecute":
            return NodeReport(Health.REPAIR, f"tainted {_taint(taint)}")
    if (obj.get("spec") or {}).get("unschedulable"):
        return NodeReport(Health.DRAINING, "cordoned")
    for taint in taints:
        if taint.get("effect") == "NoSchedule":
            return NodeReport(Health.DRAINING, f"tainted {_taint(taint)}")
    for kind in sorted(labels.suspect_conditions):
        condition = _condition(obj, kind)
        if condition is not None and condition.get("status") == "True":
            message = condition.get("message") or condition.get("reason") or ""
            return NodeReport(Health.SUSPECT, f"{kind}{': ' + message if message else ''}")
    capacity, allocatable = _resources(obj, "capacity"), _resources(obj, "allocatable")
    for resource, count in sorted(capacity.items()):
        if (resource == GPU or resource.startswith(MIG_PREFIX)) and allocatable.get(resource, count) < count:
            return NodeReport(Health.SUSPECT, f"the device plugin reports {int(allocatable.get(resource, 0))} of "
                                              f"{int(count)} {resource} healthy")
    return NodeReport(Health.READY, "Ready")


def _taint(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"
