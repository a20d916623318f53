"""NVML discovery of this machine's GPUs, against a stand-in with pynvml's functions (no GPU on CI machines; the
real module is used when ``nvidia-ml-py`` is installed and a driver answers)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduler_core.executor.gpus import discover
from scheduler_core.model.cluster import Device


class NVMLError(Exception):
    pass


@dataclass
class _Rates:
    gpu: int


class FakeNVML:
    """Two H100s (the second in MIG mode with 1g.10gb ×3 and one empty slot) and one unsupported GPU."""

    def __init__(self, *, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.gpus = [("NVIDIA H100 80GB HBM3", False, []), ("NVIDIA H100 80GB HBM3", True,
                     [("NVIDIA H100 80GB HBM3 MIG 1g.10gb", f"MIG-aaaa-{i}") for i in range(3)] + [None]),
                     ("NVIDIA GeForce GTX 1080", False, [])]

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[str, int]:
        return ("gpu", index)

    def nvmlDeviceGetName(self, handle: tuple[str, int, int] | tuple[str, int]) -> bytes:
        if handle[0] == "mig":
            return self.gpus[handle[1]][2][handle[2]][0].encode()   # type: ignore[index, misc]
        return self.gpus[handle[1]][0].encode()

    def nvmlDeviceGetUUID(self, handle: tuple[str, int, int]) -> str:
        return self.gpus[handle[1]][2][handle[2]][1]   # type: ignore[index]

    def nvmlDeviceGetMigMode(self, handle: tuple[str, int]) -> tuple[int, int]:
        if "H100" not in self.gpus[handle[1]][0]:
            raise NVMLError("Not Supported")
        return (1, 1) if self.gpus[handle[1]][1] else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: tuple[str, int]) -> int:
        return len(self.gpus[handle[1]][2])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: tuple[str, int], j: int) -> tuple[str, int, int]:
        if self.gpus[handle[1]][2][j] is None:
            raise NVMLError("Not Found")
        return ("mig", handle[1], j)

    def nvmlDeviceGetUtilizationRates(self, handle: tuple[str, int]) -> _Rates:
        return _Rates(gpu=40 if handle[1] == 0 else 80)


def test_whole_gpus_and_mig_slices_become_one_node_with_real_mig_uuids() -> None:
    found = discover(FakeNVML(), name="box")
    assert found is not None
    node = found.node
    assert (node.name, node.gpu_model, node.gpus) == ("box", "H100", 2)
    assert node.devices == {"h100": (Device(0),), "h100-mig-1g": (Device(1, 0), Device(1, 1), Device(1, 2))}
    assert found.device_names == {("box", 1, i): f"MIG-aaaa-{i}" for i in range(3)}
    assert found.utilization("box") == pytest.approx(0.6)
    assert found.utilization("other") is None


def test_no_driver_means_no_local_gpus() -> None:
    assert discover(FakeNVML(fail_init=True)) is None


def test_without_pynvml_there_is_nothing_to_discover() -> None:
    try:
        import pynvml  # noqa: F401
    except ImportError:
        assert discover() is None
    else:
        pytest.skip("pynvml is installed here; discovery depends on the machine's GPUs")
