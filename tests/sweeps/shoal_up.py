"""A real ``shoal up`` for the sweep tests: SQLite in a temporary state directory, the demo cluster, the local
executor, and the sweep controller started by ``shoal up`` itself as a ``shoal.services`` entry point.

When the installed Shoal predates that entry point (an editable install made before it was added to
``pyproject.toml``), the fixture puts a one-file distribution on the child's ``PYTHONPATH`` that declares it — the
same declaration ``pip install -e .`` writes — so ``shoal up`` discovers the controller exactly as it would on an
up-to-date install. Nothing else is stubbed.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from scheduler_core.bench.child import shoal_up
from scheduler_core.cli.state import executor_dir

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def eventually(check: Callable[[], T | None], what: str, timeout: float = 120.0,
               output: list[str] | None = None) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = "".join((output or [])[-40:])
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}" +
                                 (f"; shoal up said:\n{tail}" if tail else ""))
        pause.wait(0.2)


@dataclass
class Up:
    proc: subprocess.Popen[str]
    state: Path
    url: str
    env: dict[str, str]
    output: list[str] = field(default_factory=list)

    @property
    def storage_url(self) -> str:
        return f"sqlite:///{(self.state / 'sweeps.db').resolve()}"

    def shoal(self, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env, SHOAL_URL=self.url)
        if token:
            env["SHOAL_TOKEN"] = token
        return subprocess.run([sys.executable, "-m", "scheduler_core.cli.main", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)

    def token(self, user: str, team: str, *, admin: bool = False) -> str:
        result = self.shoal("token", "create", "--user", user, "--team", team, *(["--admin"] if admin else []),
                            "--state-dir", str(self.state))
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def logs(self, job_id: str, rank: int = 0) -> list[str]:
        attempts = sorted((executor_dir(self.state) / "logs" / job_id).glob("*"), key=lambda p: int(p.name))
        return [(a / f"rank-{rank}.log").read_text() if (a / f"rank-{rank}.log").exists() else "" for a in attempts]


def _entry_point_shim(where: Path) -> Path | None:
    """A distribution declaring ``shoal.services: sweeps``, if the installed one does not."""
    if "sweeps" in {e.name for e in importlib.metadata.entry_points(group="shoal.services")}:
        return None
    dist = where / "shoal_sweeps_entry_point-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shoal-sweeps-entry-point\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[shoal.services]\nsweeps = sweeps.service:start\n")
    return where


def start_up(tmp: Path, *extra: str) -> Iterator[Up]:
    state = tmp / "state"
    paths = [str(ROOT)]
    shim = _entry_point_shim(tmp / "entry-points")
    if shim is not None:
        paths.append(str(shim))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]),
           "SHOAL_SWEEPS_INTERVAL": "0.25"}
    for name in ("SHOAL_URL", "SHOAL_TOKEN", "SHOAL_SWEEPS_STORAGE", "SHOAL_DISABLE_SERVICES"):
        env.pop(name, None)
    with shoal_up(state, "--tick", "0.5", *extra, env=env, cwd=ROOT) as up:
        eventually(lambda: any("sweeps: controller started" in line for line in up.output),
                   "the sweep controller to start inside shoal up", 60, up.output)
        yield Up(up.proc, state, up.url, env, up.output)
