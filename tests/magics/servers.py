"""A real ``shoal up`` for the notebook and browser tests: the demo cluster, SQLite in a temp state directory, the
real policy, controller and local executor, on a free port; and a token of ana, team fraud-ml."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ShoalServer:
    url: str
    token: str
    state: Path
    output: list[str] = field(default_factory=list)

    def tail(self, lines: int = 40) -> str:
        return "".join(self.output[-lines:])


@contextmanager
def shoal_up(tmp: Path) -> Iterator[ShoalServer]:
    state = tmp / "shoal-state"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for name in ("SHOAL_URL", "SHOAL_TOKEN", "JUPYTERHUB_API_TOKEN"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler_core.cli.main", "up", "--cluster", "demo", "--teams", "demo",
         "--state-dir", str(state), "--port", "0", "--tick", "0.2", "--min-run-time", "0s", "--no-hub"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output: list[str] = []
    url: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            found = re.search(r"API at (http://\S+)", line)
            if found:
                url.append(found.group(1))

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 90
        pause = threading.Event()
        while not url and proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError("shoal up did not announce its URL in 90 s:\n" + "".join(output[-40:]))
            pause.wait(0.1)
        if not url:
            raise AssertionError("shoal up exited:\n" + "".join(output[-40:]))
        made = subprocess.run(
            [sys.executable, "-m", "scheduler_core.cli.main", "token", "create", "--user", "ana", "--team",
             "fraud-ml", "--state-dir", str(state)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        yield ShoalServer(url=url[0], token=made.stdout.strip(), state=state, output=output)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _kill_leftover_pods(state)


def _kill_leftover_pods(state: Path) -> None:
    """Pods outlive the scheduler by design; a test must not leave them running."""
    for pod in (state / "executor" / "pods").glob("*/*/rank-*/pod.json"):
        pid = json.loads(pod.read_text()).get("pid", 0)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
