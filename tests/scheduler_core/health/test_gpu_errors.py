"""GPU error counters: NVML's (XID events, uncorrected ECC, failed row remaps) against a stand-in with pynvml's
functions (no GPU here; ``scheduler_core/executor/nvml_check.py`` runs the real thing on a GPU machine), and the
burn-in program's own checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler_core.executor import burnin
from scheduler_core.executor.nvml_errors import NvmlErrorCounters, open_counters

BURNIN = Path(burnin.__file__)


class NVMLError(Exception):
    pass


@dataclass
class _Event:
    device: object
    eventData: int


class FakeNVML:
    """Two GPUs; events, ECC counts and row-remap state set by the test. GPU 1 does not support ECC queries."""

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlEventTypeXidCriticalError = 8

    def __init__(self, *, events_supported: bool = True) -> None:
        self.events_supported = events_supported
        self.pending: list[_Event] = []
        self.ecc = {0: 0}
        self.remap_failed = {0: False, 1: False}
        self.registered: list[object] = []

    def nvmlInit(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[str, int]:
        return ("gpu", index)

    def nvmlEventSetCreate(self) -> str:
        if not self.events_supported:
            raise NVMLError("Not Supported")
        return "set"

    def nvmlDeviceRegisterEvents(self, handle: object, kinds: int, events: str) -> None:
        assert kinds == self.nvmlEventTypeXidCriticalError and events == "set"
        self.registered.append(handle)

    def nvmlEventSetWait(self, events: str, timeout_ms: int) -> _Event:
        assert timeout_ms == 0
        if not self.pending:
            raise NVMLError("Timeout")
        return self.pending.pop(0)

    def nvmlDeviceGetTotalEccErrors(self, handle: tuple[str, int], kind: int, counter: int) -> int:
        assert (kind, counter) == (1, 0)
        if handle[1] not in self.ecc:
            raise NVMLError("Not Supported")
        return self.ecc[handle[1]]

    def nvmlDeviceGetRemappedRows(self, handle: tuple[str, int]) -> tuple[int, int, int, int]:
        return (0, 0, 0, int(self.remap_failed[handle[1]]))


def test_counters_count_hardware_xids_ecc_and_failed_remaps_per_gpu() -> None:
    nvml = FakeNVML()
    counters = open_counters(nvml)
    assert counters is not None and counters.listens_for_xids
    assert nvml.registered == [("gpu", 0), ("gpu", 1)]
    assert [gpu.total for gpu in counters.read()] == [0, 0]

    nvml.pending = [_Event(("gpu", 1), 79), _Event(("gpu", 1), 13), _Event(("gpu", 0), 48)]
    nvml.ecc[0] = 2
    nvml.remap_failed[1] = True
    gpu0, gpu1 = counters.read()

    assert (gpu0.xid_events, gpu0.last_xid, gpu0.ecc_uncorrected, gpu0.remap_failed) == (1, 48, 2, False)
    assert (gpu1.xid_events, gpu1.last_xid, gpu1.ecc_uncorrected, gpu1.remap_failed) == (1, 79, 0, True)
    assert gpu1.describe() == "GPU 1: 1 XID event(s), last XID 79, row remapping failed"
    assert [gpu.total for gpu in counters.read()] == [3, 2]   # events are counted once; counters keep growing


def test_an_application_xid_is_the_jobs_fault_not_the_nodes() -> None:
    nvml = FakeNVML()
    counters = NvmlErrorCounters(nvml, [("gpu", 0)])
    nvml.pending = [_Event(("gpu", 0), xid) for xid in (13, 31, 43, 45)]
    assert counters.read()[0].total == 0


def test_without_event_support_ecc_still_counts_and_without_nvml_there_are_no_counters() -> None:
    nvml = FakeNVML(events_supported=False)
    counters = NvmlErrorCounters(nvml, [("gpu", 0)])
    nvml.ecc[0] = 1
    assert not counters.listens_for_xids and counters.read()[0].total == 1

    class NoDriver(FakeNVML):
        def nvmlInit(self) -> None:
            raise NVMLError("Driver Not Loaded")

    assert open_counters(NoDriver()) is None


def run_burnin(*args: str, devices: str = "0,1,2,3") -> tuple[int, list[dict[str, object]]]:
    env = {"PATH": os.environ.get("PATH", ""), "CUDA_VISIBLE_DEVICES": devices, "SHOAL_NODE": "n7"}
    done = subprocess.run([sys.executable, "-I", str(BURNIN), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_the_burnin_exercises_each_slot_it_is_given_without_a_gpu() -> None:
    code, lines = run_burnin("--mode", "virtual", devices="0,1,MIG-abc")
    assert code == 0
    assert [(line["device"], line["mode"], line["ok"]) for line in lines[:-1]] == [
        ("0", "virtual", True), ("1", "virtual", True), ("MIG-abc", "virtual", True)]
    assert lines[-1] == {"burnin": "passed", "exit_code": 0, "devices": 3, "node": "n7"}


def test_the_burnin_asked_for_a_gpu_where_none_is_fails_as_unusable() -> None:
    if burnin._torch_with_cuda() is not None:
        pytest.skip("this machine has a CUDA GPU")
    code, lines = run_burnin("--mode", "gpu")
    assert code == burnin.UNUSABLE and lines[-1]["burnin"] == "failed"


def test_a_wrong_product_and_a_slow_gpu_fail_the_burnin() -> None:
    assert burnin.virtual_check("0").ok
    slow = burnin.judge_speed([burnin.DeviceResult(f"cuda:{i}", "gpu", True, 0, "", tflops=t)
                               for i, t in enumerate((50.0, 51.0, 30.0))], slow=0.8)
    assert [(r.ok, r.exit_code) for r in slow] == [(True, 0), (True, 0), (False, burnin.SLOW)]


def test_a_cuda_error_makes_the_gpu_unusable() -> None:
    class Torch:
        class backends:  # noqa: N801
            class cuda:  # noqa: N801
                class matmul:  # noqa: N801
                    allow_tf32 = True

        @staticmethod
        def device(name: str) -> str:
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

    result = burnin.gpu_check(Torch, 0, size=8, seconds=0.1)
    assert (result.ok, result.exit_code) == (False, burnin.UNUSABLE)
    assert result.message == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_the_gpu_machine_script_runs_by_path_and_says_what_it_could_not_check(tmp_path: Path) -> None:
    """``nvml_check.py`` is what runs on a GPU machine without Shoal's dependencies: here, with no NVML and no GPU,
    it must still run (by path, nothing of Shoal's imported) and report failure rather than pass."""
    script = BURNIN.with_name("nvml_check.py")
    env = {"PATH": os.environ.get("PATH", ""), "OUT": str(tmp_path)}
    done = subprocess.run([sys.executable, "-I", str(script), "--seconds", "0.1"], env=env, capture_output=True,
                          text=True, timeout=120)
    report = json.loads((tmp_path / "nvml_check.json").read_text())
    if report["nvml"]["ok"]:
        pytest.skip("this machine has NVML: the script's real run is the lead's, on the GPU machine")
    assert done.returncode == 1 and report["ok"] is False and json.loads(done.stdout) == report
    assert report["burnin"]["exit_code"] == burnin.UNUSABLE
