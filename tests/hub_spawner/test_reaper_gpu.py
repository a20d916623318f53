"""The reaper's NVML reading. No GPU here, so NVML is a small stand-in with NVML's calls and errors (a fake only
where the real thing cannot run); on a machine without NVML, ``try_open`` says so by returning ``None``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from hub_spawner.reaper.gpu import NvmlUtilisation


class NVMLError(Exception):
    pass


@dataclass
class Rates:
    gpu: int


class FakeNvml:
    """Two GPUs: GPU 0 whole (40 %), GPU 1 in MIG mode (70 %), whose slices have no counter of their own."""

    NVMLError = NVMLError
    GPUS = {"GPU-aaa": 40, "GPU-bbb": 70}
    MIG_PARENT = {"MIG-111": "GPU-bbb", "MIG-222": "GPU-bbb"}

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return list(self.GPUS)[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if uuid not in self.GPUS and uuid not in self.MIG_PARENT:
            raise NVMLError("not found")
        return uuid

    def nvmlDeviceGetUUID(self, handle: str) -> bytes:
        return handle.encode()

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Rates:
        if handle in self.MIG_PARENT:
            raise NVMLError("not supported on a MIG device")
        return Rates(self.GPUS[handle])

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: str) -> str:
        return self.MIG_PARENT[handle]


def test_whole_gpus_by_index_or_uuid_and_mig_slices_by_their_parent() -> None:
    nvml = NvmlUtilisation(FakeNvml())
    assert nvml.all_uuids() == ["GPU-aaa", "GPU-bbb"]
    assert nvml.utilisation(["0"]) == 40.0
    assert nvml.utilisation(["GPU-aaa"]) == 40.0
    assert nvml.utilisation(["MIG-111"]) == 70.0
    assert nvml.utilisation(["0", "MIG-222"]) == 70.0      # the busiest counts
    assert nvml.utilisation(["MIG-unknown"]) is None


def test_without_a_gpu_there_is_no_reader() -> None:
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    assert NvmlUtilisation.try_open() is None
