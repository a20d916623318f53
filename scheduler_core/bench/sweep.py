"""``shoal bench sweep``: what a 500-trial sweep costs the scheduler.

Two figures, each printed with the machine it ran on:

* **policy** — ``run_cycle`` on the reference cluster in its busy-hour steady state (``bench.workload``) with the
  500 trial jobs of one sweep pending, built from a ``SweepSpec`` exactly as the sweep controller builds them. The
  trials differ only in name, env, args and labels, none of which is part of ``JobRequest.shape``, so they form
  one equivalence class: once one trial waits, the other 499 wait for the same reason without a placement search.
  The control run gives each trial a distinct but equally small shape (CPUs and memory per pod varied below the
  trial's share of a node), which defeats the classes: the difference is what the classes save.
* **live** (``--live``) — a real ``shoal up`` (SQLite, demo cluster, local executor, sweep controller) in a child
  process: the latency of ``POST /v1/sweeps`` with 500 trials, how long the controller takes to submit all 500
  trial jobs, and the scheduler's cycle time while they are pending (from its own ``/metrics``).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import click

from ..model.sweep import SweepSpec
from ..policy.cycle import plan, run_cycle
from ..policy.snapshot import JobRequest, PendingJob, Snapshot

H = 3600.0


def sweep_spec(n_trials: int = 500, *, flavour: str = "h100", team: str = "search",
               command: tuple[str, ...] = ("python", "-m", "sweeps.examples.mlp")) -> SweepSpec:
    return SweepSpec.model_validate({
        "name": "bench-sweep", "team": team, "n_trials": n_trials, "parallelism": n_trials,
        "search_space": {"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
                         "hidden": {"type": "int", "low": 8, "high": 512, "step": 8},
                         "activation": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]}},
        "trial": {"flavour": flavour, "gpus_per_pod": 1, "command": list(command), "time_limit": "2h"},
    })


def trial_jobs(spec: SweepSpec, now: float, *, distinct_shapes: bool = False) -> list[PendingJob]:
    """The sweep's trial jobs as the policy sees them (``distinct_shapes``: each its own CPU count)."""
    jobs = []
    for number in range(spec.n_trials):
        params = {"lr": 10 ** (-4 + 4 * number / spec.n_trials), "hidden": 8 * (1 + number % 64),
                  "activation": ("relu", "tanh", "gelu")[number % 3]}
        job = spec.trial_job(sweep_id="sweep_bench", number=number, params=params)
        if distinct_shapes:     # as small as the trial's own share of a node, but each one different
            job = job.model_copy(update={"cpus_per_pod": 1 + number % 24, "memory_gb_per_pod": 1 + number // 24})
        request = JobRequest.from_spec(f"job_t{number:04d}", job, now - 600 + number * 0.01)
        jobs.append(PendingJob(request, request.submitted_at))
    return jobs


@dataclass(frozen=True)
class PolicyFigure:
    label: str
    pending: int
    trials: int
    shapes: int
    admitted: int
    preempting: int
    median_ms: float
    p90_ms: float
    plan_ms: float


def time_cycles(snapshot: Snapshot, now: float, repeat: int) -> tuple[list[float], int, int]:
    """Milliseconds per cycle; admissions and preemptions decided by the (deterministic) cycle."""
    times, admitted, preempting = [], 0, 0
    for _ in range(repeat):
        started = time.perf_counter()
        result = run_cycle(snapshot, now)
        times.append((time.perf_counter() - started) * 1000)
        admitted, preempting = len(result.admits), len(result.preempts)
    return times, admitted, preempting


def policy_figures(*, repeat: int, running: int, background: int, seed: int) -> list[PolicyFigure]:
    from .workload import busy_snapshot

    now = 30 * 86400.0                  # the instant busy_snapshot's last warm-up cycle describes
    base = busy_snapshot(background, 512, running, seed=seed, now=now)
    spec = sweep_spec()
    out = []
    for label, distinct in (("500 trials, one sweep (one equivalence class)", False),
                            ("control: the same 500 jobs, each its own shape", True)):
        trials = trial_jobs(spec, now, distinct_shapes=distinct)
        snap = replace(base, pending=base.pending + tuple(trials), plan=None)
        # The controller plans estimated starts on its own cadence and hands the plan to every cycle: so here.
        started = time.perf_counter()
        snap = replace(snap, plan=plan(snap, now))
        plan_ms = (time.perf_counter() - started) * 1000
        times, admitted, preempting = time_cycles(snap, now, repeat)
        times.sort()
        out.append(PolicyFigure(
            label=label, pending=len(snap.pending), trials=len(trials),
            shapes=len({t.request.shape for t in trials}), admitted=admitted, preempting=preempting,
            median_ms=round(statistics.median(times), 2), p90_ms=round(times[int(0.9 * (len(times) - 1))], 2),
            plan_ms=round(plan_ms, 1)))
    return out


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        memory = "? GiB"
    return f"{os.cpu_count()} cores, {memory}, {cpu}"


@click.command()
@click.option("--repeat", type=click.IntRange(1, 1000), default=20, show_default=True, help="Cycles timed per case.")
@click.option("--running", type=click.IntRange(0, 5000), default=300, show_default=True,
              help="Jobs running on the reference cluster (the busy hour).")
@click.option("--background", type=click.IntRange(0, 10000), default=0, show_default=True,
              help="Other pending jobs besides the sweep's (the reference mix; ≥ 100 adds a 1,024-GPU run).")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--live", is_flag=True, help="Also measure a real 'shoal up' (POST latency, submission, cycle time).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def command(repeat: int, running: int, background: int, seed: int, live: bool, as_json: bool) -> None:
    """What a 500-trial sweep costs the scheduler: the policy pass with its trials pending, and (--live) the
    whole system."""
    figures = policy_figures(repeat=repeat, running=running, background=background, seed=seed)
    live_figures: dict[str, Any] | None = None
    if live:
        from .sweep_live import measure
        live_figures = measure()
    if as_json:
        click.echo(json.dumps({"machine": machine(), "policy": [asdict(f) for f in figures],
                               "live": live_figures}, indent=2))
        return
    click.echo(f"machine: {machine()}")
    click.echo(f"run_cycle, reference cluster (512 nodes), {running} running, {repeat} cycles each:")
    for f in figures:
        click.echo(f"  {f.label}: {f.pending} pending ({f.trials} trials in {f.shapes} shape(s)), "
                   f"{f.admitted} admitted and {f.preempting} preemptions per cycle; cycle median {f.median_ms} ms, p90 {f.p90_ms} ms "
                   f"(the plan of estimated starts, made once: {f.plan_ms} ms)")
    if live_figures is not None:
        click.echo("shoal up (SQLite, demo cluster, local executor, sweep controller):")
        for key, value in live_figures.items():
            click.echo(f"  {key}: {value}")
