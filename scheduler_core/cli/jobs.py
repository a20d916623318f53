"""``shoal submit | queue | show | cancel | checkpoint | usage | events``: the user's commands, over the API.

They read ``SHOAL_URL`` and ``SHOAL_TOKEN`` (or ``~/.config/shoal/config``). Every read command takes ``--json``
for scripts; without it, tables a Slurm user reads at a glance. A mistake exits 2 with one line.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml
from pydantic import BaseModel, ValidationError

from ..client import ShoalClient
from ..model.job import JobSpec
from ..schemas import EventView, JobView, QueueList
from .queue_columns import DEFAULT, format_help, parse_format
from .table import clock, hours, render, when

F = TypeVar("F", bound=Callable[..., Any])


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")(fn)


def client() -> ShoalClient:
    return ShoalClient()


def emit_json(body: BaseModel) -> None:
    click.echo(body.model_dump_json(indent=2))


# -- submit ---------------------------------------------------------------------------------------------------------

def _read_spec_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="FILE") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise click.UsageError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise click.UsageError(f"{path}: expected a mapping of job fields (name, team, flavour, pods, …)")
    return data


def _env_pairs(values: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--env")
        env[name] = value
    return env


def build_spec(data: dict[str, Any], origin: str) -> JobSpec:
    """Validate here first, so a typo is reported against the file before anything is sent."""
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        field = ".".join(str(p) for p in first["loc"]) or "spec"
        message = first["msg"].removeprefix("Value error, ")
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise click.UsageError(f"{origin}: {field}: {message}{more}") from None


@click.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", help="Job name (default: the file's name, or the command's).")
@click.option("--team", help="Team whose queue and quota to use (default: the token's team).")
@click.option("--flavour", "flavours", multiple=True, help="h100, a100, h100-mig-1g… (repeat: in preference order).")
@click.option("--pods", type=int, help="Pods in the gang (all start together).")
@click.option("--gpus-per-pod", "--gpus", "gpus_per_pod", type=int, help="GPUs (or MIG slices) per pod.")
@click.option("--time", "time_limit", help="Time limit, e.g. 30m, 12h (default 1d).")
@click.option("--priority", "priority_class", type=click.Choice(["critical", "high", "standard", "low", "scavenger"]))
@click.option("--topology", help="required:block, preferred:leaf, …")
@click.option("--image", help="Container image (Kubernetes executor).")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", help="Environment variable (repeatable).")
@click.option("--grace", "grace_period", help="SIGTERM → SIGKILL grace period, e.g. 120s.")
@click.option("--checkpoint-interval", help="'auto' (Young–Daly) or a duration.")
@click.option("--checkpoint-uri", help="Where checkpoints go.")
@click.option("--non-preemptible", is_flag=True, help="The job cannot keep the checkpoint contract.")
@click.option("--max-restarts", type=int, help="Restarts for the job's own faults.")
@click.option("--idempotency-key", help="Retry-safe: the same key returns the first job.")
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def submit(file: Path | None, name: str | None, team: str | None, flavours: tuple[str, ...], pods: int | None,
           gpus_per_pod: int | None, time_limit: str | None, priority_class: str | None, topology: str | None,
           image: str | None, env: tuple[str, ...], grace_period: str | None, checkpoint_interval: str | None,
           checkpoint_uri: str | None, non_preemptible: bool, max_restarts: int | None,
           idempotency_key: str | None, as_json: bool, command: tuple[str, ...]) -> None:
    """Submit a job from FILE.yaml, or from flags and a command after '--'; flags override the file.

    \b
      shoal submit deploy/examples/two-pods.yaml
      shoal submit --flavour h100 --pods 2 --gpus 4 --time 1h -- python train.py
    """
    if file is not None and file.suffix not in (".yaml", ".yml", ".json"):
        # `shoal submit -- python train.py`: the first word is the command's, not a job file.
        command, file = (str(file), *command), None
    data: dict[str, Any] = _read_spec_file(file) if file is not None else {}
    origin = str(file) if file is not None else "submit"
    overrides: dict[str, Any] = {
        "name": name, "team": team, "flavour": list(flavours) or None, "pods": pods, "gpus_per_pod": gpus_per_pod,
        "time_limit": time_limit, "priority_class": priority_class, "image": image, "max_restarts": max_restarts,
        "command": list(command) or None,
    }
    data.update({k: v for k, v in overrides.items() if v is not None})
    if topology:
        kind, _, level = topology.partition(":")
        if kind not in ("required", "preferred") or not level:
            raise click.BadParameter("expected required:LEVEL or preferred:LEVEL (node, leaf, block)",
                                     param_hint="--topology")
        data["topology"] = {kind: level}
    if env:
        data["env"] = {**data.get("env", {}), **_env_pairs(env)}
    checkpoint = dict(data.get("checkpoint") or {})
    for key, value in (("grace_period", grace_period), ("interval", checkpoint_interval), ("uri", checkpoint_uri)):
        if value is not None:
            checkpoint[key] = value
    if checkpoint:
        data["checkpoint"] = checkpoint
    if non_preemptible:
        data["preemptible"] = False
    if "command" not in data:
        raise click.UsageError("no command: give a job FILE with a 'command', or the command after '--'")
    if "name" not in data:
        data["name"] = _default_name(file, data["command"])
    if "flavour" not in data:
        data["flavour"] = "h100"
    with client() as api:
        if "team" not in data:
            data["team"] = api.whoami().team
        spec = build_spec(data, origin)
        reply = api.submit(spec, idempotency_key=idempotency_key)
    if as_json:
        emit_json(reply)
        return
    click.echo(f"Submitted job {reply.job_id} to {reply.queue}'s queue ({reply.state}).")
    click.echo(f"Follow it with: shoal show {reply.job_id}   or   shoal queue")


_LAUNCHERS = frozenset({"python", "python3", "bash", "sh", "torchrun", "deepspeed", "accelerate", "launch", "run",
                        "uv", "env", "srun", "mpirun", "exec", "time", "nohup"})
_SUFFIXES = (".py", ".sh", ".bash")


def _default_name(file: Path | None, command: Any) -> str:
    """The file's stem, else what the command runs: ``python train.py`` → ``train``, ``python -m
    scheduler_core.examples.train`` → ``train`` (the module, not its package), ``sh -c 'echo hi'`` → ``echo``."""
    if file is not None:
        return _sanitised(file.stem)
    words = [str(w) for w in command] if isinstance(command, list) else []
    return _sanitised(_runs(words))


def _runs(words: list[str]) -> str:
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 1].rstrip(".").rsplit(".", 1)[-1]
        if word == "-c" and i + 1 < len(words):
            try:
                inner = shlex.split(words[i + 1])
            except ValueError:
                inner = words[i + 1].split()
            return _runs(inner)
        name = Path(word).name
        if name in _LAUNCHERS or word.startswith("-") or "=" in word or word.replace(".", "").isdigit():
            continue
        for suffix in _SUFFIXES:
            name = name.removesuffix(suffix)
        return name
    return "job"


def _sanitised(text: str) -> str:
    clean = "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip("._-")[:128]
    return clean or "job"


# -- queue, show ----------------------------------------------------------------------------------------------------

def _shape(pods: int, units: int, flavours: list[str]) -> str:
    return f"{pods}×{units} {'|'.join(flavours)}"


@click.command(epilog=format_help())
@click.option("--team", help="One team's queue (default: yours; every team for an admin).")
@click.option("--state", "states", help="PENDING, RUNNING, … comma-separated, or 'all' (default: not finished).")
@click.option("-o", "--format", "columns", default=DEFAULT, metavar="COLUMNS",
              help="Comma-separated column names (listed below).")
@json_option
def queue(team: str | None, states: str | None, columns: str, as_json: bool) -> None:
    """Pending and running jobs, in queue order: how long each has run and has left, where, or why it waits.

    \b
      shoal queue
      shoal queue -o job,state,reason,why        # why each job waits, in words
      shoal queue --state all --team fraud-ml
    """
    chosen = parse_format(columns)
    with client() as api:
        listing = QueueList(queues=[api.queue(team, states=states)]) if team else api.queues(states=states)
    if as_json:
        emit_json(listing.queues[0] if team else listing)
        return
    rows = [[column.cell(q.team, job) for column in chosen] for q in listing.queues for job in q.jobs]
    if not rows:
        teams = ", ".join(q.team for q in listing.queues) or "any team you may read"
        which = "no jobs" if states == "all" else f"no {states or 'pending or running'} jobs"
        click.echo(f"{which} in {teams}'s queue" if len(listing.queues) == 1 else f"{which} in {teams}")
        return
    click.echo(render([column.header for column in chosen], rows))


@dataclass
class Run:
    """One attempt of a job, from its events: admitted (where, how), started, ended (why)."""

    attempt: int
    admitted_at: datetime
    admitted_as: str
    nodes: list[str]
    started_at: datetime | None = None
    ended_at: datetime | None = None
    ended: str = ""


def runs(events: list[EventView]) -> list[Run]:
    """Every start and restart of a job, oldest first, from its event log (the record keeps only the latest)."""
    found: list[Run] = []
    for event in events:
        if event.kind == "admit" and event.reason != "BindRejected":
            nodes = [str(n) for n in event.data.get("nodes", [])]
            found.append(Run(attempt=len(found), admitted_at=event.at, admitted_as=event.reason, nodes=nodes))
        elif not found:
            continue
        elif event.kind == "running" and found[-1].started_at is None:
            found[-1].started_at = event.at
        elif event.kind in ("requeue", "finish") and found[-1].ended_at is None:
            found[-1].ended_at = event.at
            found[-1].ended = f"{event.reason}" + (f" ({event.message})" if event.message else "")
    return found


def _job_events(api: ShoalClient, job_id: str) -> list[EventView]:
    events: list[EventView] = []
    after: int | None = None
    while True:
        page = api.events(job_id, after=after, limit=1000)
        events.extend(page.events)
        if page.next_after is None or not page.events or len(events) >= 10_000:
            return events
        after = page.next_after


def _reason_line(job: JobView) -> str:
    """``QuotaFull — fraud-ml uses all 8 of its h100 and 16 borrowed; this job needs 24 more``: the code a script
    matches on, beside the words a person reads."""
    if job.reason and job.reason_message:
        return f"{job.reason} — {job.reason_message}"
    return job.reason or job.reason_message or "- (not yet looked at by the scheduler)"


def _show_lines(job: JobView, history: list[Run]) -> list[tuple[str, str]]:
    spec = job.spec
    state = job.state + (" (cancel requested)" if job.cancel_requested and job.state != "CANCELLED" else "")
    lines = [("job", job.job_id), ("name", job.name), ("team", job.team), ("user", job.user),
             ("kind", job.kind), ("state", state),
             ("shape", _shape(spec.pods, spec.gpus_per_pod, list(spec.flavour))
              + (f", topology {spec.topology.required or spec.topology.preferred}"
                 f" ({'required' if spec.topology.required else 'preferred'})" if spec.topology else "")),
             ("priority", spec.priority_class.value + ("" if spec.preemptible else ", not preemptible")),
             ("command", shlex.join(spec.command))]
    if job.state == "PENDING":
        lines += [("position", str(job.position) if job.position is not None else "- (not yet looked at)"),
                  ("reason", _reason_line(job)),
                  ("estimated start", when(job.estimated_start) if job.estimated_start else "N/A")]
    lines.append(("time limit", clock(spec.time_limit) + " per run"))
    if job.elapsed_s is not None:
        lines.append(("elapsed", clock(job.elapsed_s) + (" (this run)" if len(history) > 1 else "")))
    if job.time_left_s is not None:
        lines.append(("time left", clock(job.time_left_s)))
    if job.admitted_as:
        lines.append(("admitted as", job.admitted_as))
    if job.placement is not None:
        p = job.placement
        lines.append(("placement", f"{p.nodes} node(s) in {', '.join(p.blocks)}: {', '.join(p.node_names)}"))
        for pod in p.pods:
            units = [str(u) for u in pod.units]
            devices = f", CUDA_VISIBLE_DEVICES={','.join(pod.devices)}" if pod.devices and pod.devices != units else ""
            lines.append((f"rank {pod.rank}", f"{pod.node}, {p.flavour} units {','.join(map(str, pod.units))}"
                                              f"{devices}"))
    lines.append(("restarts", f"{job.restarts} (own faults, of {spec.max_restarts}), {job.infra_restarts} "
                              f"(infrastructure), {job.preemptions} preemption(s)"))
    if job.last_checkpoint is not None:
        lines.append(("last checkpoint", f"step {job.last_checkpoint.step} at {when(job.last_checkpoint.at)} "
                                         f"({job.last_checkpoint.bytes} bytes)"))
    lines += [("gpu-hours used", f"{job.gpu_hours_used:.2f}"), ("submitted", when(job.submitted_at))]
    for run in history:
        began = when(run.started_at) if run.started_at else f"admitted {when(run.admitted_at)}, never started"
        end = f" → {when(run.ended_at)} {run.ended}" if run.ended_at else (" → now" if run.started_at else "")
        label = "started" if run.attempt == 0 else f"restart {run.attempt}"
        lines.append((label, f"{began}{end}, {run.admitted_as} on {','.join(run.nodes) or '?'}"))
    if not history and job.started_at is not None:
        lines.append(("started", when(job.started_at)))
    if job.finished_at is not None:
        lines.append(("finished", when(job.finished_at)))
    if job.exit_code is not None:
        lines.append(("exit code", str(job.exit_code)))
    if job.message:
        lines.append(("message", job.message))
    return lines


@click.command()
@click.argument("job_id")
@json_option
def show(job_id: str, as_json: bool) -> None:
    """One job, as 'scontrol show job': state and why, times to the second (limit, elapsed, left), the command,
    where each rank runs, and every start and restart."""
    with client() as api:
        job = api.job(job_id)
        history = [] if as_json else runs(_job_events(api, job_id))
    if as_json:
        emit_json(job)
        return
    lines = _show_lines(job, history)
    width = max(len(key) for key, _ in lines)
    for key, value in lines:
        click.echo(f"{key.rjust(width)}: {value}")


# -- cancel, checkpoint ---------------------------------------------------------------------------------------------

@click.command()
@click.argument("job_id")
@json_option
def cancel(job_id: str, as_json: bool) -> None:
    """Cancel a job: at once if it waits; a running one gets SIGTERM and its grace period."""
    with client() as api:
        job = api.cancel(job_id)
    if as_json:
        emit_json(job)
    elif job.state == "CANCELLED":
        click.echo(f"Cancelled job {job.job_id}.")
    else:
        click.echo(f"Stopping job {job.job_id} ({job.state}): it gets SIGTERM, then "
                   f"{int(job.spec.checkpoint.grace_period)}s to checkpoint and exit.")


@click.command()
@click.argument("job_id")
@json_option
def checkpoint(job_id: str, as_json: bool) -> None:
    """Ask a running job to save a checkpoint now (e.g. before maintenance)."""
    with client() as api:
        job = api.checkpoint(job_id)
    if as_json:
        emit_json(job)
    else:
        click.echo(f"Asked job {job.job_id} to checkpoint at its next step.")


# -- usage, events --------------------------------------------------------------------------------------------------

@click.command()
@click.option("--team", help="One team (default: yours; every team for an admin).")
@click.option("--since", help="From this UTC date or time, e.g. 2026-10-01.")
@click.option("--until", help="Until this UTC date or time (default: now).")
@click.option("--by-day", is_flag=True, help="One row per day, team, flavour and nominal/borrowed.")
@json_option
def usage(team: str | None, since: str | None, until: str | None, by_day: bool, as_json: bool) -> None:
    """GPU-hours by team: nominal vs borrowed, and normalised by flavour speed (H100 = 1)."""
    with client() as api:
        report = api.usage(team=team, since=since, until=until)
    if as_json:
        emit_json(report)
        return
    if by_day:
        click.echo(render(["DAY", "TEAM", "FLAVOUR", "AS", "GPU-H", "NORM-GPU-H"],
                          [[r.day.isoformat(), r.team, r.flavour, r.admitted_as, hours(r.gpu_seconds),
                            hours(r.normalised_gpu_seconds)] for r in report.rows]))
        return
    click.echo(render(["TEAM", "NOMINAL-GPU-H", "BORROWED-GPU-H", "SCAVENGER-GPU-H", "TOTAL-GPU-H", "NORM-GPU-H"],
                      [[t.team, hours(t.nominal_gpu_seconds), hours(t.borrowed_gpu_seconds),
                        hours(t.scavenger_gpu_seconds), hours(t.gpu_seconds), hours(t.normalised_gpu_seconds)]
                       for t in report.totals]))


@click.command()
@click.argument("job_id", required=False)
@click.option("--after", type=int, help="Only events after this id.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@json_option
def events(job_id: str | None, after: int | None, limit: int, as_json: bool) -> None:
    """Decisions and observations (admitted, preempted, waiting, node failed…), oldest first."""
    with client() as api:
        page = api.events(job_id, after=after, limit=limit)
    if as_json:
        emit_json(page)
        return
    click.echo(render(["ID", "TIME", "KIND", "REASON", "JOB", "NODE", "MESSAGE"],
                      [[e.id, when(e.at), e.kind, e.reason, e.job_id or "-", e.node or "-", e.message]
                       for e in page.events]))
