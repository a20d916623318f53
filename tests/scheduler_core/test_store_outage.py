"""A store outage under a real ``shoal up``: its state directory (SQLite file and pod state) on a small tmpfs, filled
mid-run. Submissions get 503 with Retry-After and nothing is stored, ``/healthz`` and ``/readyz`` say the store
cannot write, and a job that exits 0 meanwhile is SUCCEEDED once there is room again, having run once.

Needs root to mount the tmpfs (CI runs as root); skipped, with the reason, where mounting is not permitted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.shoal_up import Up, started

from .api.test_end_to_end import CLUSTER, TEAMS

pytestmark = pytest.mark.slow

#: The job: counts its runs in a file outside the tmpfs, waits for the test's go, then exits 0.
JOB = """
import pathlib, sys, time
out = pathlib.Path(sys.argv[1])
with (out / "runs").open("a") as f:
    f.write("run\\n")
while not (out / "go").exists():
    time.sleep(0.05)
(out / "exited").write_text("0")
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "state"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root, as in CI): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path) -> Path:
    """Write zeros until the disk refuses: what a full disk looks like to SQLite and to the pod wrapper."""
    filler = disk / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 16))
                handle.flush()
        except OSError:
            pass
    return filler


def job_state(up: Up, token: str, job_id: str) -> str:
    response = httpx.get(f"{up.url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    return str(response.json()["state"])


def test_a_full_store_answers_503_and_loses_no_finished_job(small_disk: Path, tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "teams.yaml").write_text(TEAMS)
    out = tmp_path / "job"
    out.mkdir()
    with started(small_disk, "--cluster", str(tmp_path / "cluster.yaml"), "--teams", str(tmp_path / "teams.yaml"),
                 "--tick", "0.5") as up:
        token = up.token("ana", "borrower")
        auth = {"Authorization": f"Bearer {token}"}
        spec = {"name": "once", "team": "borrower", "flavour": "h100", "pods": 1, "gpus_per_pod": 1,
                "command": [sys.executable, "-c", JOB, str(out)]}
        submitted = httpx.post(f"{up.url}/v1/jobs", json=spec, headers=auth, timeout=10)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["job_id"]
        up.eventually(lambda: job_state(up, token, job_id) == "RUNNING" or None, "the job to run")

        filler = fill(small_disk)
        refused = []

        def submit_refused() -> bool | None:
            response = httpx.post(f"{up.url}/v1/jobs", json={**spec, "name": "later"}, headers=auth, timeout=30)
            if response.status_code == 503:
                refused.append(response)
                return True
            return None
        up.eventually(submit_refused, "a submission refused with 503 while the disk is full", timeout=60)
        assert refused[0].headers["Retry-After"].isdigit()
        assert refused[0].json()["error"]["code"] == "store_unavailable"
        health = httpx.get(f"{up.url}/healthz", timeout=10)
        assert health.status_code == 503 and health.json()["ok"] is False, health.text
        assert httpx.get(f"{up.url}/readyz", timeout=30).status_code == 503

        (out / "go").write_text("")                                  # the job exits 0 during the outage
        up.eventually(lambda: (out / "exited").exists() or None, "the job to exit")
        time.sleep(1.0)   # a second of outage after the exit: the wrapper keeps its exit code meanwhile

        filler.unlink()                                              # room again
        up.eventually(lambda: job_state(up, token, job_id) == "SUCCEEDED" or None,
                      "the job recorded SUCCEEDED after the outage", timeout=120)
        assert (out / "runs").read_text().count("run") == 1          # ran once, never again
        up.eventually(lambda: httpx.get(f"{up.url}/healthz", timeout=10).status_code == 200 or None,
                      "/healthz ok again")
        assert httpx.get(f"{up.url}/readyz", timeout=10).status_code == 200
