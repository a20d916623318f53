"""``shoal sweep submit | list | show | cancel``: hyper-parameter sweeps, over the API.

A sweep file is the body of ``POST /v1/sweeps`` in YAML (see ``deploy/examples/sweep.yaml``); it is validated here
first, so a typo is reported against the file before anything is sent. Reads take ``--json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from ..model.sweep import SweepSpec
from ..schemas import SweepView, TrialView
from .jobs import _read_spec_file, client, emit_json, json_option
from .table import render, when


@click.group()
def sweep() -> None:
    """Hyper-parameter sweeps: each trial runs as its own job; Optuna chooses, prunes and keeps the study."""


def build_sweep(data: dict[str, Any], origin: str) -> SweepSpec:
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        field = ".".join(str(p) for p in first["loc"]) or "sweep"
        message = first["msg"].removeprefix("Value error, ")
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise click.UsageError(f"{origin}: {field}: {message}{more}") from None


@sweep.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--team", help="Team whose queue and quota the trials use (default: the file's, else the token's).")
@click.option("--name", help="Sweep name (default: the file's, else the file name).")
@click.option("--trials", "n_trials", type=int, help="Number of trials (overrides the file).")
@click.option("--parallelism", type=int, help="Trials running at once, at most (overrides the file).")
@click.option("--idempotency-key", help="Retry-safe: the same key returns the first sweep.")
@json_option
def submit(file: Path, team: str | None, name: str | None, n_trials: int | None, parallelism: int | None,
           idempotency_key: str | None, as_json: bool) -> None:
    """Start a sweep described by FILE.yaml.

    \b
      shoal sweep submit deploy/examples/sweep.yaml
      shoal sweep submit sweep.yaml --trials 500 --parallelism 50
    """
    data = _read_spec_file(file)
    overrides = {"team": team, "name": name, "n_trials": n_trials, "parallelism": parallelism}
    data.update({k: v for k, v in overrides.items() if v is not None})
    data.setdefault("name", file.stem)
    with client() as api:
        if "team" not in data:
            data["team"] = api.whoami().team
        spec = build_sweep(data, str(file))
        view = api.create_sweep(spec, idempotency_key=idempotency_key)
    if as_json:
        emit_json(view)
        return
    click.echo(f"Started sweep {view.sweep_id}: {view.n_trials} trials of {view.name}, at most {view.parallelism} "
               f"at once, for team {view.team}.")
    click.echo(f"Follow it with: shoal sweep show {view.sweep_id}")


def _progress(view: SweepView) -> str:
    done = view.counts.complete + view.counts.pruned + view.counts.failed
    return f"{done}/{view.n_trials}"


def _best(view: SweepView) -> str:
    return f"#{view.best.number} {view.best.value:.6g}" if view.best is not None else "-"


@sweep.command(name="list")
@click.option("--team", help="One team's sweeps (admins; default: yours, or every team's for an admin).")
@click.option("--state", "states", help="RUNNING, CANCELLING, SUCCEEDED, FAILED, CANCELLED, comma-separated, or all.")
@json_option
def list_(team: str | None, states: str | None, as_json: bool) -> None:
    """Sweeps, oldest first, with progress and best value."""
    with client() as api:
        sweeps = api.sweeps(states=states, team=team)
    if as_json:
        emit_json(sweeps)
        return
    rows = [[v.sweep_id, v.name, v.team, v.user, v.state, _progress(v), v.counts.pending, v.counts.running,
             v.counts.complete, v.counts.pruned, v.counts.failed, _best(v)] for v in sweeps.sweeps]
    click.echo(render(["SWEEP", "NAME", "TEAM", "USER", "STATE", "DONE", "PEND", "RUN", "COMPLETE", "PRUNED",
                       "FAILED", "BEST"], rows))


def _trial_row(trial: TrialView) -> list[object]:
    if trial.value is not None:
        value = f"{trial.value:.6g}"
    elif trial.intermediate:
        step, last = trial.intermediate[-1]
        value = f"{last:.6g} @{step}"
    else:
        value = "-"
    params = json.dumps(trial.params, separators=(",", ":"))
    return [trial.number, trial.state, trial.job_id, trial.job_state, value, params, trial.message or ""]


@sweep.command()
@click.argument("sweep_id")
@click.option("--trials/--no-trials", default=True, help="List the trials too (default: yes).")
@json_option
def show(sweep_id: str, trials: bool, as_json: bool) -> None:
    """One sweep: state, progress, counts, best trial, and its trials."""
    with client() as api:
        view = api.sweep(sweep_id)
        trial_list = api.trials(sweep_id).trials if trials else []
    if as_json:
        emit_json(view)
        return
    c = view.counts
    lines = [("sweep", view.sweep_id), ("name", view.name), ("team", view.team), ("user", view.user),
             ("state", view.state), ("objective", f"{view.direction} {view.objective}"),
             ("progress", f"{_progress(view)} finished ({view.progress:.0%}), at most {view.parallelism} at once"),
             ("trials", f"{c.not_started} not started, {c.pending} pending, {c.running} running, {c.complete} "
                        f"complete, {c.pruned} pruned, {c.failed} failed")]
    if view.best is not None:
        lines.append(("best", f"trial {view.best.number}: {view.objective} = {view.best.value:.6g} "
                              f"{json.dumps(view.best.params)} (job {view.best.job_id})"))
    lines += [("study", view.study_name), ("created", when(view.created_at))]
    if view.finished_at is not None:
        lines.append(("finished", when(view.finished_at)))
    if view.message:
        lines.append(("message", view.message))
    width = max(len(key) for key, _ in lines)
    for key, value in lines:
        click.echo(f"{key.rjust(width)}: {value}")
    if trial_list:
        click.echo("")
        click.echo(render(["TRIAL", "STATE", "JOB", "JOB STATE", "VALUE", "PARAMS", "WHY"],
                          [_trial_row(t) for t in trial_list]))


@sweep.command()
@click.argument("sweep_id")
@json_option
def cancel(sweep_id: str, as_json: bool) -> None:
    """Cancel a sweep: no new trials; running trials' jobs get SIGTERM and their grace period."""
    with client() as api:
        view = api.cancel_sweep(sweep_id)
    if as_json:
        emit_json(view)
        return
    click.echo(f"Cancelling sweep {view.sweep_id} ({view.state}): running trials are being stopped.")
