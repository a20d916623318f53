"""Records ⇄ JSON columns, losslessly.

Why not ``model_dump(mode="json")``: durations serialise as readable strings ("1m30s"), which round to whole
seconds, and a stored spec must come back equal to the one submitted (idempotent resubmission compares them).
So specs are encoded field by field from their validated values, and decoded through the model again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel

from ...model.cluster import Device, Node
from ...model.job import STORED, JobSpec
from ...model.allocation import Placement, PodPlacement


def plain(value: Any) -> Any:
    """A JSON-ready copy of ``value``: models by their field values (not their serialisers), enums by value."""
    if isinstance(value, BaseModel):
        return {name: plain(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [plain(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(plain(value), separators=(",", ":"), sort_keys=True)


def spec_to_json(spec: JobSpec) -> str:
    return dumps(spec)


def spec_from_json(text: str) -> JobSpec:
    """A spec this store wrote (``spec_to_json`` of a validated spec): straight from JSON in pydantic-core, its
    fields' types checked but not the submission rules again (``STORED``), since a scheduler's first cycle after a
    start parses every pending spec."""
    return JobSpec.model_validate_json(text, context=STORED)


def node_to_json(node: Node) -> str:
    return dumps({
        "name": node.name, "block": node.block, "leaf": node.leaf, "gpu_model": node.gpu_model, "gpus": node.gpus,
        "cpus": node.cpus, "memory_gb": node.memory_gb, "spare": node.spare, "small_jobs": node.small_jobs,
        "devices": {flavour: [[d.gpu, d.slice] for d in units] for flavour, units in node.devices.items()},
    })


def node_from_json(text: str) -> Node:
    data = json.loads(text)
    devices = {flavour: tuple(Device(gpu, slice_) for gpu, slice_ in units)
               for flavour, units in data.pop("devices").items()}
    return Node(devices=devices, **data)


def placement_to_json(placement: Placement) -> str:
    return dumps({"flavour": placement.flavour, "pods": [[pod.node, list(pod.units)] for pod in placement.pods]})


def placement_from_json(text: str) -> Placement:
    data = json.loads(text)
    return Placement(data["flavour"], tuple(PodPlacement(node, tuple(units)) for node, units in data["pods"]))
