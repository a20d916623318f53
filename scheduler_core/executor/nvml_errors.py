"""GPU error counters through NVML: what makes a node with real GPUs suspect (DESIGN §3.3).

Per GPU, three counters that only grow while the scheduler runs:

* **XID events** of hardware faults, from NVML's event set (``nvmlEventTypeXidCriticalError``). XIDs a program
  causes itself (13 graphics engine exception, 31 MMU fault, 43 GPU stopped processing, 45 preemptive cleanup)
  are the job's business, not the node's, and are not counted;
* **uncorrected ECC errors** (volatile: since the driver loaded);
* **failed row remaps** (``nvmlDeviceGetRemappedRows``: the GPU ran out of spare rows; it needs a reset or RMA).

Any counter a GPU does not support reads as 0. Stdlib only, with ``pynvml`` (``nvidia-ml-py``) passed in or
imported lazily, so ``nvml_check.py`` runs this file on a GPU machine that has no Shoal dependencies installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: XIDs a program causes on its own; everything else NVML reports as critical counts against the GPU.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})


@dataclass(frozen=True, slots=True)
class GpuCounters:
    index: int
    xid_events: int
    last_xid: int | None
    ecc_uncorrected: int
    remap_failed: bool

    @property
    def total(self) -> int:
        return self.xid_events + self.ecc_uncorrected + int(self.remap_failed)

    def describe(self) -> str:
        parts = []
        if self.xid_events:
            parts.append(f"{self.xid_events} XID event(s), last XID {self.last_xid}")
        if self.ecc_uncorrected:
            parts.append(f"{self.ecc_uncorrected} uncorrected ECC error(s)")
        if self.remap_failed:
            parts.append("row remapping failed")
        return f"GPU {self.index}: " + ", ".join(parts) if parts else f"GPU {self.index}: no errors"


class NvmlErrorCounters:
    """The counters of ``handles`` (NVML device handles, in GPU index order). Not thread-safe."""

    def __init__(self, nvml: Any, handles: Sequence[Any]) -> None:
        self._nvml = nvml
        self._handles = list(handles)
        self._xids = [0] * len(self._handles)
        self._last_xid: list[int | None] = [None] * len(self._handles)
        self._events: Any = None
        try:
            events = nvml.nvmlEventSetCreate()
            for handle in self._handles:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, events)
            self._events = events
        except Exception:   # not supported (some virtualised GPUs): ECC and remaps still count
            self._events = None

    @property
    def listens_for_xids(self) -> bool:
        return self._events is not None

    def read(self) -> list[GpuCounters]:
        self._drain_events()
        return [GpuCounters(index, self._xids[index], self._last_xid[index], self._ecc(handle),
                            self._remap_failed(handle))
                for index, handle in enumerate(self._handles)]

    def _drain_events(self) -> None:
        if self._events is None:
            return
        while True:
            try:
                event = self._nvml.nvmlEventSetWait(self._events, 0)
            except Exception:   # NVMLError_Timeout: nothing waiting
                return
            xid = int(getattr(event, "eventData", 0))
            if xid in APPLICATION_XIDS:
                continue
            index = self._index_of(getattr(event, "device", None))
            if index is not None:
                self._xids[index] += 1
                self._last_xid[index] = xid

    def _index_of(self, device: Any) -> int | None:
        for index, handle in enumerate(self._handles):
            if handle == device:
                return index
        try:
            wanted = self._nvml.nvmlDeviceGetIndex(device)
        except Exception:
            return None
        return wanted if 0 <= wanted < len(self._handles) else None

    def _ecc(self, handle: Any) -> int:
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetTotalEccErrors(handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        nvml.NVML_VOLATILE_ECC))
        except Exception:   # ECC off or not supported
            return 0

    def _remap_failed(self, handle: Any) -> bool:
        try:
            rows = self._nvml.nvmlDeviceGetRemappedRows(handle)
        except Exception:   # not an Ampere-or-later data-centre GPU
            return False
        return bool(rows[3]) if isinstance(rows, (tuple, list)) and len(rows) >= 4 else False


def init_nvml(nvml: Any | None = None) -> Any | None:
    """The ``pynvml`` module (or the stand-in a test passes), initialised; ``None`` when it is not installed or
    NVML does not start (no driver, no device: a machine without GPUs). The one way in for inventory and counters."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:
        return None
    return nvml


def open_counters(nvml: Any | None = None) -> NvmlErrorCounters | None:
    """Counters of every GPU NVML sees, or ``None`` without NVML or GPUs."""
    nvml = init_nvml(nvml)
    if nvml is None:
        return None
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception:
        return None
    return NvmlErrorCounters(nvml, handles) if handles else None
