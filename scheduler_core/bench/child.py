"""``shoal up`` in a child process, for benches and tests that measure it from outside.

Started on a fresh state directory and a free port (``--port 0``), without JupyterHub unless asked for; ready once
it prints ``API at <url>`` (with the hub, after the hub answers). On leaving, it gets SIGINT (a minute to stop, then
SIGKILL; it stops its hub itself), and the pods its local executor left behind are killed by their process groups,
so no trial outlives the run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..cli.state import executor_dir

T = TypeVar("T")


@dataclass
class ShoalUp:
    """A running ``shoal up``: its process, state directory, API URL and everything it printed so far."""

    proc: subprocess.Popen[str]
    state: Path
    url: str
    output: list[str] = field(default_factory=list)


def no_hub() -> list[str]:
    """``--no-hub`` where ``shoal up`` starts JupyterHub by default: a scheduler alone is wanted."""
    from ..cli.up import command

    return ["--no-hub"] if any(p.name == "no_hub" for p in command.params) else []


@contextmanager
def shoal_up(state: Path, *extra: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
             timeout_s: float = 120.0, hub: bool = False) -> Iterator[ShoalUp]:
    """Run ``shoal up --state-dir STATE --port 0 [--no-hub] EXTRA…`` until the block ends (``hub``: with its
    JupyterHub, configured by the ``--hub-…`` options in ``EXTRA``). Raises ``RuntimeError`` with the tail of its
    output if it exits or stays silent for ``timeout_s``. Once the block has ended, ``output`` holds all it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler_core.cli.main", "up", "--state-dir", str(state), "--port", "0",
         *([] if hub else no_hub()), *extra],
        env=dict(env if env is not None else os.environ), cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output: list[str] = []
    urls: list[str] = []
    announced = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            found = re.search(r"API at (http://\S+)", line)
            if found:
                urls.append(found.group(1))
                announced.set()
        announced.set()                     # it exited: nothing more will come

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        announced.wait(timeout_s)
        if not urls:
            raise RuntimeError(f"shoal up did not announce its API within {timeout_s:g} s:\n"
                               + "".join(output[-40:]))
        yield ShoalUp(proc, state, urls[0], output)
    finally:
        stop(proc)
        kill_pods(state)
        reader.join(10)                     # the last lines it printed, for whoever keeps its log


def eventually(check: Callable[[], T | None], what: str, timeout: float = 90.0,
               output: list[str] | None = None) -> T:
    """Poll ``check`` until it returns something truthy; ``TimeoutError`` naming ``what`` (with the end of
    ``output``, what ``shoal up`` printed) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = "".join((output or [])[-40:])
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}"
                               + (f"; shoal up said:\n{tail}" if tail else ""))
        pause.wait(0.2)


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def kill_pods(state: Path) -> None:
    """Kill the process group of every pod the local executor under ``state`` started."""
    for pod in (executor_dir(state) / "pods").glob("*/*/rank-*/pod.json"):
        pid = json.loads(pod.read_text()).get("pid", 0)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

