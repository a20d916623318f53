"""The README's first job: the example job file is valid on the demo cluster, and its program keeps the job
contract (resumes from its newest checkpoint; on SIGTERM saves and exits 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from scheduler_core.api.limits import ClusterLimits, check_spec
from scheduler_core.config import load_cluster, load_teams
from scheduler_core.model import JobSpec

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_job_file_fits_the_demo_cluster() -> None:
    _, nodes = load_cluster("demo")
    limits = ClusterLimits.build(nodes, load_teams("demo", nodes).teams)
    data = yaml.safe_load((ROOT / "deploy/examples/two-pods.yaml").read_text())

    spec = JobSpec.model_validate({**data, "team": "fraud-ml"})

    assert (spec.pods, spec.gpus_per_pod) == (2, 4)
    assert check_spec(spec, limits) == {}


def _train(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SHOAL_CHECKPOINT_URI": f"file://{tmp_path}/ck/", "RANK": "0", "WORLD_SIZE": "1",
           "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "scheduler_core.examples.train", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_the_example_program_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    first = _train(tmp_path, "--steps", "5", "--step-seconds", "0.01", "--save-every", "2")
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and "checkpoint at step 4" in out

    second = _train(tmp_path, "--steps", "8", "--step-seconds", "0.01", "--save-every", "0")
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0 and "resuming from step 4" in out and "done after 8 steps" in out


def test_the_example_program_saves_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    proc = _train(tmp_path, "--steps", "100000", "--step-seconds", "0.05", "--save-every", "0")
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    line = ""
    while "starting fresh" not in line and time.monotonic() < deadline:
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)

    assert proc.returncode == 0
    assert "SIGTERM: saved step" in out
    assert list((tmp_path / "ck").glob("manifest-*.json"))
