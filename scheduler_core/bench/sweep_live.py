"""The live half of ``shoal bench sweep``: a real ``shoal up`` in a child process, measured from outside.

1. ``shoal up`` on a fresh state directory (SQLite, the demo cluster, the local executor, its services — the sweep
   controller among them) on a free port; a token of team ``search``.
2. ``POST /v1/sweeps`` with 500 trials, parallelism 500: its latency (the sweep is stored and answered at once;
   trials are the controller's to start).
3. How long until the controller has submitted every trial's job (one Optuna ask and one ``POST …/trials`` each).
4. The scheduler's step time while they wait — snapshot, ``run_cycle``, apply — from its own ``/metrics``
   (``shoal_cycle_seconds``) over a window of steps, with the counts of pending and running trials.
5. The sweep is cancelled and ``shoal up`` stopped; pods it left are killed.

Trials run ``sleep``-like processes: the figure is the scheduler's, not a model's.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click
import httpx

from .child import eventually, shoal_up
from .sweep import sweep_spec

TRIAL_COMMAND = ("python", "-c", "import time; time.sleep(3600)")


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+\-]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def measure(*, trials: int = 500, window_s: float = 30.0, timeout_s: float = 600.0) -> dict[str, Any]:
    names = {e.name for e in importlib.metadata.entry_points(group="shoal.services")}
    if "sweeps" not in names:
        raise click.ClickException("the sweep controller is not installed as a 'shoal.services' entry point "
                                   "(reinstall Shoal: pip install -e .)")
    state = Path(tempfile.mkdtemp(prefix="shoal-bench-sweep-"))
    env = dict(os.environ)
    env.pop("SHOAL_URL", None)
    env.pop("SHOAL_TOKEN", None)
    try:
        with shoal_up(state, env=env) as up:
            return _measure(up.url, state, env, trials, window_s, timeout_s)
    except (RuntimeError, TimeoutError) as exc:     # shoal up did not start, or the sweep did not
        raise click.ClickException(str(exc)) from None


def _measure(url: str, state: Path, env: dict[str, str], trials: int, window_s: float,
             timeout_s: float) -> dict[str, Any]:
    cli = [sys.executable, "-m", "scheduler_core.cli.main"]
    token = subprocess.run([*cli, "token", "create", "--user", "bench", "--team", "search", "--state-dir",
                            str(state)], env=env, capture_output=True, text=True, check=True).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    body = sweep_spec(trials, command=TRIAL_COMMAND).model_dump(mode="json")
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        started = time.perf_counter()
        reply = http.post("/v1/sweeps", json=body)
        post_ms = (time.perf_counter() - started) * 1000
        reply.raise_for_status()
        sweep_id = reply.json()["sweep_id"]

        def all_submitted() -> dict[str, Any] | None:
            view: dict[str, Any] = http.get(f"/v1/sweeps/{sweep_id}").json()
            return view if view["counts"]["not_started"] == 0 else None

        submitted_view = eventually(all_submitted, f"the controller to submit {trials} trial jobs", timeout_s)
        submitted_s = time.perf_counter() - started
        first = http.get("/metrics").text
        eventually(lambda: _metric(http.get("/metrics").text, "shoal_cycle_seconds_count")
                    >= _metric(first, "shoal_cycle_seconds_count") + 3, "three scheduling steps", timeout_s)
        pause = threading.Event()
        pause.wait(window_s)   # a measuring window of wall time, not a wait for a condition
        second = http.get("/metrics").text
        view = http.get(f"/v1/sweeps/{sweep_id}").json()
        steps = _metric(second, "shoal_cycle_seconds_count") - _metric(first, "shoal_cycle_seconds_count")
        seconds = _metric(second, "shoal_cycle_seconds_sum") - _metric(first, "shoal_cycle_seconds_sum")
        http.post(f"/v1/sweeps/{sweep_id}:cancel")
    return {
        "POST /v1/sweeps (500 trials)": f"{post_ms:.0f} ms",
        "all trial jobs submitted by the controller after": f"{submitted_s:.1f} s",
        "trials pending / running when measured": f"{view['counts']['pending']} / {view['counts']['running']}",
        "scheduler steps in the window": f"{steps:.0f} in {window_s:.0f} s",
        "mean step (snapshot + run_cycle + apply)": f"{1000 * seconds / steps:.1f} ms" if steps else "-",
        "pending right after submission": str(submitted_view["counts"]["pending"]),
    }
