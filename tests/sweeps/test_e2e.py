"""Sweeps end to end against a real ``shoal up`` (SQLite, the demo cluster, the real policy and controller, the local
executor running every trial as a real process, and the sweep controller that ``shoal up`` starts):

* a 20-trial sweep with parallelism 4 runs every trial as its own job and never holds more than 4 at once; the
  pruner's trials have their jobs cancelled; the Optuna study ends with 20 trials in the scheduler's states and the
  scheduler's best value;
* a trial preempted mid-run (its team's borrowed GPUs reclaimed) checkpoints, resumes from that checkpoint and
  finishes as the same Optuna trial, with the loss an uninterrupted run gives;
* ``POST /v1/sweeps`` of 500 trials answers at once (the figure is in docs/BENCHMARKS.md), the controller starts
  launching, and a cancel closes the sweep;
* the CLI reads: ``shoal sweep list | show``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import optuna
import pytest
from optuna.trial import TrialState as OptunaState

from scheduler_core.client import ShoalClient
from scheduler_core.schemas import SweepView
from scheduler_core.store.sql import open_store
from sweeps.study import study_name

from .shoal_up import Up, eventually, start_up

pytestmark = pytest.mark.slow
optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    # Reclaiming borrowed GPUs must be able to preempt a trial that started seconds ago.
    yield from start_up(tmp_path_factory.mktemp("shoal-up"), "--min-run-time", "0s")


@pytest.fixture(scope="module")
def bob(up: Up) -> Iterator[ShoalClient]:
    with ShoalClient(up.url, up.token("bob", "search")) as client:
        yield client


def finished(client: ShoalClient, sweep_id: str) -> SweepView | None:
    view = client.sweep(sweep_id)
    return view if view.state in ("SUCCEEDED", "FAILED", "CANCELLED") else None


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, delta in edges:
        current += delta
        most = max(most, current)
    return most


def test_a_20_trial_sweep_within_parallelism_with_pruning(up: Up, bob: ShoalClient) -> None:
    sweep = bob.create_sweep({
        "name": "e2e-20", "team": "search", "n_trials": 20, "parallelism": 4,
        "objective": {"metric": "loss", "direction": "minimize"},
        "sampler": {"name": "random", "seed": 11},
        "pruner": {"name": "median", "n_startup_trials": 4, "n_warmup_steps": 1},
        "search_space": {"x": {"type": "int", "low": 0, "high": 19}},
        "trial": {"flavour": "h100-mig-1g", "command": ["python", "-m", "tests.sweeps.objective", "--steps", "10",
                                                              "--step-seconds", "0.25"],
                  "time_limit": "10m", "checkpoint": {"grace_period": "10s"}},
    })
    final = eventually(lambda: finished(bob, sweep.sweep_id), "the 20-trial sweep to finish", 600, up.output)
    assert final.state == "SUCCEEDED", final.message
    trials = bob.trials(sweep.sweep_id).trials
    assert [t.number for t in trials] == list(range(20))
    assert len({t.job_id for t in trials}) == 20

    # Every trial ran as its own job of kind trial, with its own parameters.
    store = open_store(f"sqlite:///{up.state / 'shoal.db'}")
    try:
        jobs = {t.job_id: store.get(t.job_id) for t in trials}
        usage = [u for u in store.usage(team="search") if u.job_id in jobs]
    finally:
        store.dispose()
    for t in trials:
        job = jobs[t.job_id]
        assert job.spec.kind == "trial" and json.loads(job.spec.env["SHOAL_TRIAL_PARAMS"]) == t.params
        assert job.spec.command[-2:] == ("--x", str(t.params["x"]))
    # Never more than 4 trial jobs holding a slice at once (a pruned job counts until it has exited).
    assert max_overlap([(u.start, u.end) for u in usage]) <= 4
    assert len({u.job_id for u in usage}) == 20

    # Pruned trials: recorded, and their jobs cancelled at once rather than run to the end.
    pruned = [t for t in trials if t.state == "PRUNED"]
    assert pruned, "a median pruner over x in 0..19 prunes some trials"
    for t in pruned:
        assert t.message.startswith("pruned at step")
        assert t.job_state == "CANCELLED" and t.cancel_requested, (t, [
            (e.reason, e.message) for e in bob.events(t.job_id).events])
        assert len(t.intermediate) < 10
    complete = [t for t in trials if t.state == "COMPLETE"]
    assert all(t.job_state == "SUCCEEDED" and len(t.intermediate) == 10 for t in complete)
    assert final.counts.complete == len(complete) and final.counts.pruned == len(pruned)
    assert final.counts.complete + final.counts.pruned + final.counts.failed == 20

    # The Optuna study: 20 trials in the same states, and the same best value.
    study = optuna.load_study(study_name=study_name(sweep.sweep_id), storage=up.storage_url)
    states = {OptunaState.COMPLETE: "COMPLETE", OptunaState.PRUNED: "PRUNED", OptunaState.FAIL: "FAILED"}
    assert len(study.trials) == 20
    assert [states[t.state] for t in study.trials] == [t.state for t in trials]
    best = min(t.value for t in complete if t.value is not None)
    assert study.best_value == best and final.best is not None and final.best.value == best
    assert study.best_trial.number == final.best.number and study.best_trial.params == final.best.params
    assert study.metric_names == ["loss"]
    for t, ft in zip(trials, study.trials):
        assert ft.params == t.params and ft.user_attrs["job_id"] == t.job_id
        assert ft.intermediate_values == dict(t.intermediate)


def test_a_preempted_trial_resumes_as_the_same_optuna_trial(up: Up, bob: ShoalClient) -> None:
    epochs = 20
    sweep = bob.create_sweep({
        "name": "e2e-preempt", "team": "search", "n_trials": 3, "parallelism": 3,
        "objective": {"metric": "val_loss"}, "sampler": {"name": "random", "seed": 3}, "pruner": "none",
        "search_space": {"lr": {"type": "float", "low": 0.2, "high": 2.0, "log": True},
                         "hidden": {"type": "int", "low": 8, "high": 32, "step": 8}},
        # Whole nodes: search's 8 nominal H100 plus 16 borrowed fill the demo cluster's three working nodes.
        "trial": {"flavour": "h100", "gpus_per_pod": 8, "time_limit": "10m",
                  "command": ["python", "-m", "sweeps.examples.mlp", "--epochs", str(epochs), "--epoch-seconds",
                              "0.5"],
                  "checkpoint": {"interval": "1h", "grace_period": "30s"}},
    })

    def all_running_and_reporting() -> bool:
        trials = bob.trials(sweep.sweep_id).trials
        return len(trials) == 3 and all(t.job_state == "RUNNING" and len(t.intermediate) >= 2 for t in trials)

    eventually(all_running_and_reporting, "three trials running and reporting", 300, up.output)
    # fraud-ml claims its nominal 8 H100: the scheduler reclaims a node from search's borrowed trials.
    with ShoalClient(up.url, up.token("ana", "fraud-ml")) as ana:
        owner = ana.submit({"name": "owner", "team": "fraud-ml", "flavour": "h100", "pods": 1, "gpus_per_pod": 8,
                            "command": ["python", "-c", "import time; time.sleep(3)"], "time_limit": "5m"})
        eventually(lambda: any(t.preemptions for t in bob.trials(sweep.sweep_id).trials),
                   "a trial to be preempted", 300, up.output)
        eventually(lambda: ana.job(owner.job_id).state == "SUCCEEDED", "the owner's job to run", 300, up.output)
    final = eventually(lambda: finished(bob, sweep.sweep_id), "the sweep to finish", 600, up.output)
    assert final.state == "SUCCEEDED", final.message

    trials = bob.trials(sweep.sweep_id).trials
    preempted = [t for t in trials if t.preemptions]
    assert preempted
    study = optuna.load_study(study_name=study_name(sweep.sweep_id), storage=up.storage_url)
    assert len(study.trials) == 3 and all(t.state is OptunaState.COMPLETE for t in study.trials)
    for trial in preempted:
        assert trial.state == "COMPLETE" and trial.job_state == "SUCCEEDED"
        assert [step for step, _ in trial.intermediate] == list(range(epochs))
        logs = up.logs(trial.job_id)
        assert len(logs) == 1 + trial.preemptions and "checkpointed, will resume" in logs[0]
        resumed_at = int(logs[1].split("resumed from epoch ")[1].split()[0])
        assert 0 <= resumed_at < epochs - 1
        # Resumed from the checkpoint, it ends exactly where an uninterrupted run does.
        argv = [f"--{k}={v}" for k, v in trial.params.items()] + ["--epochs", str(epochs)]
        code = f"from sweeps.examples import mlp; print(repr(mlp.train(mlp.parse({argv!r}))))"
        fresh = subprocess.run([sys.executable, "-c", code], env=up.env, capture_output=True, text=True, check=True)
        assert trial.value == pytest.approx(float(fresh.stdout.strip().splitlines()[-1]), abs=1e-9)
        # ... as the same Optuna trial: its number, its job, its parameters, every step reported once.
        same = study.trials[trial.number]
        assert same.user_attrs["job_id"] == trial.job_id and same.params == trial.params
        assert same.value == trial.value and sorted(same.intermediate_values) == list(range(epochs))


def test_a_500_trial_sweep_is_accepted_at_once_and_cancelled(up: Up, bob: ShoalClient) -> None:
    body = {
        "name": "e2e-500", "team": "search", "n_trials": 500, "parallelism": 500,
        "search_space": {"x": {"type": "float", "low": 0, "high": 1}},
        "trial": {"flavour": "h100-mig-1g", "command": ["python", "-c", "import time; time.sleep(600)"],
                  "time_limit": "20m", "checkpoint": {"grace_period": "5s"}},
    }
    reply = httpx.post(f"{up.url}/v1/sweeps", json=body, timeout=30,
                       headers={"Authorization": f"Bearer {bob.config.token}"})
    assert reply.status_code == 202, reply.text
    view = reply.json()
    assert view["state"] == "RUNNING" and view["counts"]["not_started"] == 500
    sweep_id = view["sweep_id"]
    eventually(lambda: bob.sweep(sweep_id).counts.not_started < 500, "the controller to launch trials", 120,
               up.output)
    bob.cancel_sweep(sweep_id)
    final = eventually(lambda: finished(bob, sweep_id), "the cancelled sweep to close", 300, up.output)
    assert final.state == "CANCELLED"
    eventually(lambda: all(t.job_state in ("CANCELLED", "SUCCEEDED", "FAILED")
                           for t in bob.trials(sweep_id).trials), "every trial job to stop", 300, up.output)
    study = optuna.load_study(study_name=study_name(sweep_id), storage=up.storage_url)
    assert study.trials and all(t.state is OptunaState.FAIL for t in study.trials)
    assert {t.user_attrs.get("fail_reason") for t in study.trials} == {"the sweep was cancelled"}


def test_cli_reads_the_live_sweeps(up: Up, bob: ShoalClient) -> None:
    token = bob.config.token
    listed = up.shoal("sweep", "list", "--json", token=token)
    assert listed.returncode == 0, listed.stderr
    names = {s["name"] for s in json.loads(listed.stdout)["sweeps"]}
    assert {"e2e-20", "e2e-preempt"} <= names
    sweep_id = next(s["sweep_id"] for s in json.loads(listed.stdout)["sweeps"] if s["name"] == "e2e-20")
    shown = up.shoal("sweep", "show", sweep_id, token=token)
    assert shown.returncode == 0 and "state: SUCCEEDED" in shown.stdout and "PRUNED" in shown.stdout


def test_the_notebook_runs_on_the_demo_cluster(up: Up, bob: ShoalClient, tmp_path: Path) -> None:
    import nbclient
    import nbformat

    from .shoal_up import ROOT

    notebook = nbformat.read(ROOT / "notebooks" / "sweep.ipynb", as_version=4)
    env_keys = {"SHOAL_URL": up.url, "SHOAL_TOKEN": bob.config.token or ""}
    saved = {k: os.environ.get(k) for k in env_keys}
    os.environ.update(env_keys)
    try:
        client = nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    outputs = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for o in cell.get("outputs", []))
    assert "SUCCEEDED" in outputs and "best: trial" in outputs and "retrained:" in outputs
    sweeps = [s for s in bob.sweeps().sweeps if s.name == "spirals-mlp"]
    assert len(sweeps) == 1 and sweeps[0].state == "SUCCEEDED" and sweeps[0].counts.complete >= 1
