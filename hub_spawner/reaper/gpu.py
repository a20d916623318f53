"""Where the reaper's GPU figure comes from: NVML where this machine has the GPUs, the scheduler's otherwise.

NVML (``nvidia-ml-py``) reads the devices named by UUID (``GPU-…`` or ``MIG-…``); a MIG device has no utilisation
counter of its own in NVML, so its parent GPU's is used, which can only err towards "busy" (never reaps wrongly).
Without NVML, or when the notebook's devices are not known here, the figure the scheduler's executor reported for
the node in its heartbeat stands in; without either there is no GPU figure, and hub and kernel activity decide.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence


class GpuUtilisationSource(Protocol):
    def utilisation(self, devices: Sequence[str]) -> float | None:
        """Highest utilisation (percent) over ``devices`` now, or ``None`` when none can be read."""


class NvmlUtilisation:
    """Reads NVML directly; construct with :meth:`try_open`, which returns ``None`` where there is no NVML."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml

    @classmethod
    def try_open(cls) -> NvmlUtilisation | None:
        try:
            import pynvml  # nvidia-ml-py; optional
            pynvml.nvmlInit()
        except Exception:  # no library, no driver, no GPU: all mean "no NVML here"
            return None
        return cls(pynvml)

    def device_count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def all_uuids(self) -> list[str]:
        nvml = self._nvml
        uuids = []
        for index in range(self.device_count()):
            uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index))
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        return uuids

    def utilisation(self, devices: Sequence[str]) -> float | None:
        nvml = self._nvml
        figures: list[float] = []
        for device in devices:
            try:
                handle = (nvml.nvmlDeviceGetHandleByIndex(int(device)) if device.isdigit()
                          else nvml.nvmlDeviceGetHandleByUUID(device))
            except nvml.NVMLError:
                continue
            try:
                figures.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except nvml.NVMLError:
                try:  # a MIG device: its parent GPU's counter
                    parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
                    figures.append(float(nvml.nvmlDeviceGetUtilizationRates(parent).gpu))
                except nvml.NVMLError:
                    continue
        return max(figures) if figures else None
