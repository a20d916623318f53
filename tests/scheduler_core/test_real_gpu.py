"""The NVML paths on a real NVIDIA GPU: discovery with real indices (and MIG UUIDs where MIG is on), the error
counters, the reaper's utilisation reading, a pod launched on a granted GPU, and the burn-in.

Every test here needs NVML with at least one GPU (``nvidia-ml-py`` and a driver); elsewhere (CI, laptops) the
module is skipped as a whole, and the same code is covered against stand-ins in ``test_executor_gpus.py``,
``health/test_gpu_errors.py`` and ``hub_spawner/test_reaper_gpu.py``. The torch-using tests also need torch with
CUDA. On a GPU machine: ``python -m pytest -m gpu tests/scheduler_core/test_real_gpu.py`` (docs/state-and-ha.md
says where this has run).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_core.executor import burnin
from scheduler_core.executor.base import LaunchRequest, PodEventKind
from scheduler_core.executor.gpus import GPU_MODELS, LocalGpus, discover
from scheduler_core.executor.local import LocalExecutor
from scheduler_core.executor.nvml_errors import APPLICATION_XIDS, init_nvml, open_counters
from scheduler_core.job_env import gang_env, nodes_of
from scheduler_core.model import JobSpec
from scheduler_core.model.cluster import Device
from scheduler_core.policy.snapshot import Placement, PodPlacement

nvml = init_nvml()
GPU_COUNT = int(nvml.nvmlDeviceGetCount()) if nvml is not None else 0
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(GPU_COUNT == 0, reason="no NVIDIA GPU with NVML on this machine")]
torch_cuda = burnin._torch_with_cuda()
needs_torch = pytest.mark.skipif(torch_cuda is None, reason="torch with CUDA is not installed here")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _names_and_uuids() -> list[tuple[str, str]]:
    assert nvml is not None
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(GPU_COUNT)]
    return [(_text(nvml.nvmlDeviceGetName(h)), _text(nvml.nvmlDeviceGetUUID(h))) for h in handles]


def _mig_on(index: int) -> bool:
    assert nvml is not None
    try:
        return bool(nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByIndex(index))[0])
    except nvml.NVMLError:
        return False


def _as_catalogued() -> list[tuple[str, str]]:
    """The catalogue's models, plus any model of this machine it lacks, counted as an h100 (an H200, say), so the
    NVML paths run on whatever GPU the machine has."""
    extra = [(name.upper(), "h100") for name, _ in _names_and_uuids()
             if not any(marker in name.upper() for marker, _ in GPU_MODELS)]
    return list(GPU_MODELS) + extra


@pytest.fixture(scope="module")
def found() -> LocalGpus:
    local = discover(name="gpu-box", models=_as_catalogued())
    assert local is not None
    return local


def test_a_gpu_the_catalogue_lacks_is_left_out_by_name(caplog: pytest.LogCaptureFixture) -> None:
    names = [name for name, _ in _names_and_uuids()]
    unknown = [name for name in names if not any(marker in name.upper() for marker, _ in GPU_MODELS)]
    with caplog.at_level(logging.WARNING, logger="scheduler_core.executor.gpus"):
        local = discover(name="gpu-box")
    for name in unknown:
        assert f"({name}) is not in the flavour catalogue" in caplog.text
    if len(unknown) == len(names):
        assert local is None
    else:
        assert local is not None


def test_whole_gpus_keep_their_nvml_indices_and_mig_slices_their_uuids(found: LocalGpus) -> None:
    whole = [i for i in range(GPU_COUNT) if not _mig_on(i)]
    node = found.node
    assert node.gpus == GPU_COUNT
    if whole:
        assert node.devices["h100" if "h100" in node.devices else "a100"] == tuple(Device(i) for i in whole)
    assert nvml is not None
    for (node_name, gpu, slice_index), uuid in found.device_names.items():
        parent = nvml.nvmlDeviceGetHandleByIndex(gpu)
        mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, slice_index)
        assert (node_name, uuid) == ("gpu-box", _text(nvml.nvmlDeviceGetUUID(mig)))
        assert uuid.startswith("MIG-")
    assert bool(found.device_names) == any(_mig_on(i) for i in range(GPU_COUNT))


def test_the_error_counters_read_what_nvml_reports(found: LocalGpus) -> None:
    counters = open_counters()
    assert counters is not None
    read = counters.read()
    assert [gpu.index for gpu in read] == list(range(GPU_COUNT))
    assert nvml is not None
    for gpu in read:
        handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
        try:
            ecc = int(nvml.nvmlDeviceGetTotalEccErrors(handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                       nvml.NVML_VOLATILE_ECC))
        except nvml.NVMLError:
            ecc = 0
        assert gpu.ecc_uncorrected == ecc
        assert gpu.last_xid is None or gpu.last_xid not in APPLICATION_XIDS
    report = found.errors("gpu-box")
    assert report is not None
    assert report.count == sum(gpu.total for gpu in read)
    assert (report.detail == "") == (report.count == 0)
    assert found.errors("another-node") is None


@pytest.fixture
def busy_gpu() -> Iterator[subprocess.Popen[str]]:
    """A process keeping GPU 0 busy with matrix products until it is killed."""
    program = ("import torch, sys\n"
               "a = torch.randn(8192, 8192, device='cuda')\n"
               "print('busy', flush=True)\n"
               "while True:\n    a = (a @ a).clamp_(-1, 1)\n    torch.cuda.synchronize()\n")
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "busy"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@needs_torch
def test_the_reaper_sees_a_busy_gpu_by_index_and_by_uuid(busy_gpu: subprocess.Popen[str],
                                                          found: LocalGpus) -> None:
    from hub_spawner.reaper.gpu import NvmlUtilisation

    reader = NvmlUtilisation.try_open()
    assert reader is not None
    uuids = reader.all_uuids()
    assert uuids == [uuid for _, uuid in _names_and_uuids()] and all(u.startswith("GPU-") for u in uuids)
    deadline = time.monotonic() + 30
    by_index = by_uuid = 0.0
    while time.monotonic() < deadline and min(by_index, by_uuid) < 50:
        by_index = reader.utilisation(["0"]) or 0.0
        by_uuid = reader.utilisation([uuids[0]]) or 0.0
        time.sleep(0.2)   # NVML's utilisation is sampled over its own window: poll until the product shows
    assert by_index >= 50 and by_uuid >= 50
    assert reader.utilisation(["GPU-00000000-0000-0000-0000-000000000000"]) is None
    share = found.utilization("gpu-box")
    assert share is not None and 0.0 <= share <= 1.0


@needs_torch
def test_a_pod_on_a_granted_gpu_sees_exactly_that_gpu(tmp_path: Path, found: LocalGpus) -> None:
    node = found.node
    flavour = next(iter(node.devices))
    unit = len(node.devices[flavour]) - 1
    spec = JobSpec.model_validate({
        "name": "sees-its-gpu", "team": "fraud-ml", "flavour": [flavour], "pods": 1, "gpus_per_pod": 1,
        "checkpoint": {},
        "command": [sys.executable, "-c",
                    "import json, os, torch; p = torch.cuda.get_device_properties(0); "
                    "print(json.dumps({'visible': os.environ['CUDA_VISIBLE_DEVICES'], "
                    "'count': torch.cuda.device_count(), 'uuid': str(p.uuid)}))"]})
    placement = Placement(flavour, (PodPlacement(node.name, (unit,)),))
    nodes = {node.name: node}
    request = LaunchRequest(job_id="gpu-job", spec=spec, placement=placement, nodes=nodes_of(placement, nodes),
                            env=gang_env("gpu-job", spec, placement, checkpoint_uri=(tmp_path / "ck").as_uri() + "/",
                                         checkpoint_interval_s=3600))
    executor = LocalExecutor(tmp_path / "executor", [node], device_names=found.device_names,
                             gpu_utilization=found.utilization, gpu_errors=found.errors)
    executor.launch(request)
    deadline = time.monotonic() + 120
    exits = []
    while time.monotonic() < deadline and not exits:
        exits = [e for e in executor.poll(time.time()) if e.kind in (PodEventKind.EXITED, PodEventKind.FAILED)]
        time.sleep(0.1)
    log = executor.log_path("gpu-job", 0, 0).read_text()
    assert [e.kind for e in exits] == [PodEventKind.EXITED], log
    seen = json.loads(log.strip().splitlines()[-1])
    device = node.devices[flavour][unit]
    assert seen["count"] == 1
    if device.slice is None:    # a whole GPU: its NVML index, and torch's device 0 is that GPU
        assert seen["visible"] == str(device.gpu)
        assert "GPU-" + seen["uuid"] == _names_and_uuids()[device.gpu][1]
    else:                       # a MIG slice: its NVML UUID
        assert seen["visible"] == found.device_names[(node.name, device.gpu, device.slice)]
    executor.close()


@needs_torch
def test_the_burnin_passes_a_healthy_gpu_and_fails_an_impossible_tolerance() -> None:
    assert torch_cuda is not None
    good = burnin.gpu_check(torch_cuda, 0, size=2048, seconds=2.0)
    assert (good.ok, good.exit_code) == (True, burnin.PASSED), good.message
    assert good.tflops is not None and good.tflops > 1.0
    wrong = burnin.gpu_check(torch_cuda, 0, size=1024, seconds=0.5, tolerance=1e-12)
    assert (wrong.ok, wrong.exit_code) == (False, burnin.WRONG)
