"""This machine's real GPUs as one ``Node``, through NVML, for the local executor (DESIGN §3.5).

Optional: only when ``pynvml`` (the ``nvidia-ml-py`` package) is importable and NVML finds GPUs; otherwise
``discover`` returns ``None`` and ``shoal up`` uses a virtual cluster from ``deploy/clusters``. GPUs whose model is
not in the flavour catalogue are left out (with a warning), since quotas are per flavour. MIG slices keep their
NVML UUIDs, which the executor passes in ``CUDA_VISIBLE_DEVICES`` instead of the derived ones.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.cluster import Device, Node
from .base import GpuErrorReport
from .nvml_errors import NvmlErrorCounters, init_nvml
from ..model.flavours import MIG_PROFILES

log = logging.getLogger(__name__)

#: Which GPUs are which flavour: the first marker found in NVML's name (upper-cased) wins.
GPU_MODELS: tuple[tuple[str, str], ...] = (("H100", "h100"), ("A100", "a100"))
_PROFILE = re.compile(r"(\d+g\.\d+gb)", re.IGNORECASE)


@dataclass(frozen=True)
class LocalGpus:
    """The node, the NVML names of its MIG slices ((node, gpu, slice) → "MIG-…"), a utilisation probe, and its
    GPU error counters (XID, ECC, row remaps: ``nvml_errors``) as ``LocalExecutor.gpu_errors`` reports them."""

    node: Node
    device_names: dict[tuple[str, int, int], str]
    utilization: Callable[[str], float | None]
    errors: Callable[[str], GpuErrorReport | None] = lambda _node: None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _flavour_of(name: str, models: Sequence[tuple[str, str]]) -> str | None:
    for marker, flavour in models:
        if marker in name.upper():
            return flavour
    return None


def node_name() -> str:
    raw = socket.gethostname().split(".")[0].lower()
    return re.sub(r"[^a-z0-9-]", "-", raw).strip("-")[:63] or "localhost"


def discover(nvml: Any | None = None, *, name: str | None = None,
             models: Sequence[tuple[str, str]] = GPU_MODELS) -> LocalGpus | None:
    """The machine's GPUs as a node, or ``None`` without NVML or GPUs of a known model. ``nvml``: the ``pynvml``
    module (tests pass a stand-in with the same functions). ``models``: (marker in NVML's name, flavour) pairs, so
    a site (or a test on a GPU the catalogue lacks, such as an H200) can say which flavour a model's GPUs count as."""
    nvml = init_nvml(nvml)
    if nvml is None:
        log.info("NVML not available; using the virtual cluster")
        return None
    node = name or node_name()
    devices: dict[str, list[Device]] = {}
    names: dict[tuple[str, int, int], str] = {}
    handles: list[Any] = []
    model = ""
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        gpu_name = _text(nvml.nvmlDeviceGetName(handle))
        flavour = _flavour_of(gpu_name, models)
        if flavour is None:
            log.warning("GPU %d (%s) is not in the flavour catalogue; Shoal will not schedule it", index, gpu_name)
            continue
        handles.append(handle)
        model = model or flavour.upper()
        if _mig_enabled(nvml, handle):
            for slice_index, (profile, uuid) in enumerate(_mig_slices(nvml, handle)):
                slice_flavour = MIG_PROFILES.get(profile)
                if slice_flavour is None:
                    log.warning("GPU %d: MIG profile %s is not a known flavour; slice left out", index, profile)
                    continue
                devices.setdefault(slice_flavour, []).append(Device(index, slice_index))
                names[(node, index, slice_index)] = uuid
        else:
            devices.setdefault(flavour, []).append(Device(index))
    if not devices:
        return None
    memory_gb = max(1, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 30))
    result = Node(name=node, block="local", leaf="local-l0", gpu_model=model, gpus=len(handles),
                  cpus=os.cpu_count() or 1, memory_gb=memory_gb,
                  devices={flavour: tuple(units) for flavour, units in devices.items()})

    def utilization(which: str) -> float | None:
        if which != node or not handles:
            return None
        try:
            rates = [float(nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in handles]
        except Exception:
            return None
        return sum(rates) / (100.0 * len(rates))

    counters = NvmlErrorCounters(nvml, handles)

    def errors(which: str) -> GpuErrorReport | None:
        if which != node:
            return None
        try:
            read = counters.read()
        except Exception:
            return None
        bad = [gpu.describe() for gpu in read if gpu.total]
        return GpuErrorReport(sum(gpu.total for gpu in read), "; ".join(bad))

    return LocalGpus(node=result, device_names=names, utilization=utilization, errors=errors)


def _mig_enabled(nvml: Any, handle: Any) -> bool:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception:      # not a MIG-capable GPU
        return False
    return bool(current)


def _mig_slices(nvml: Any, handle: Any) -> list[tuple[str, str]]:
    """(profile, UUID) of each MIG device of a GPU, in NVML's order."""
    slices = []
    for j in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
        except Exception:
            continue       # an empty MIG slot
        match = _PROFILE.search(_text(nvml.nvmlDeviceGetName(mig)))
        if match:
            slices.append((match.group(1).lower(), _text(nvml.nvmlDeviceGetUUID(mig))))
    return slices
