"""``shoal bench cycle``: time full ``run_cycle`` passes on a realistic busy-hour snapshot.

The controller plans on its own cadence (as Slurm's backfill does): ``plan()`` books every waiting job on the
timeline for its estimated start, and ``run_cycle`` reads those estimates from the snapshot instead of planning
every pass. Both are timed: ``median_ms`` is the cycle (with the last plan carried in the snapshot, as in
production), ``plan_median_ms`` the planning pass. ``--inline`` also times a cycle that plans for itself
(a snapshot without a plan), reported as ``inline_median_ms``.

The controller's snapshots carry the policy's index of the running jobs from pass to pass (``policy.carried``),
so a production pass copies free units, unit end times and quota usage instead of building them; ``median_ms``
is such a pass (the index brought up to date by the first pass, as after a step in which nothing moved) and
``rebuild_median_ms`` the same pass building them from the snapshot, as every pass did before.
"""

from __future__ import annotations

import gc
import json
import platform
import statistics
import time
from dataclasses import replace
from typing import Any, Callable

import click

from ..policy.carried import CarriedIndex
from ..policy.cycle import plan, run_cycle
from ..policy.snapshot import Snapshot
from .workload import busy_snapshot

NOW = 30 * 86400.0


def _times(repeat: int, run: Callable[[], object], cpu: list[float] | None = None) -> list[float]:
    """Wall-clock milliseconds of ``repeat`` runs (and, into ``cpu``, this process's CPU milliseconds: on a
    machine shared with other work the two differ by the time spent waiting for a core)."""
    out = []
    for _ in range(repeat):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        out.append((time.perf_counter() - start) * 1000.0)
        if cpu is not None:
            cpu.append((time.process_time() - start_cpu) * 1000.0)
    return out


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def measure(pending: int, nodes: int, running: int, repeat: int, *, seed: int = 7,
            inline: bool = False) -> dict[str, Any]:
    """Build the snapshot once, then time ``repeat`` plans and ``repeat`` cycles on it."""
    built = time.perf_counter()
    snapshot: Snapshot = busy_snapshot(pending, nodes, running, seed=seed, now=NOW)
    build_s = time.perf_counter() - built
    # Long-lived state leaves the collector's young generations (gc.freeze): what is timed is the cycle's own
    # work and the collections it causes, not rescans of the benchmark's own heap. (The live scheduler does not
    # freeze after start-up yet; docs/BENCHMARKS.md, "SQL store and the live loop", measures what it would gain.)
    gc.collect()
    gc.freeze()
    plan_ms = _times(repeat, lambda: plan(snapshot, NOW))
    rebuilt = replace(snapshot, plan=plan(snapshot, NOW))
    planned = replace(rebuilt, carried=CarriedIndex())
    result = run_cycle(planned, NOW)
    same = result == run_cycle(rebuilt, NOW)
    cycle_cpu: list[float] = []
    cycle_ms = _times(repeat, lambda: run_cycle(planned, NOW), cycle_cpu)
    rebuild_cpu: list[float] = []
    rebuild_ms = _times(repeat, lambda: run_cycle(rebuilt, NOW), rebuild_cpu)
    report: dict[str, Any] = {
        "pending": len(snapshot.pending), "nodes": len(snapshot.nodes), "running": len(snapshot.running),
        "gpus": sum(sum(n.capacity.values()) for n in snapshot.nodes if "h100-mig-1g" not in n.capacity),
        "repeat": repeat, "seed": seed,
        "median_ms": round(statistics.median(cycle_ms), 2), "p95_ms": round(_p95(cycle_ms), 2),
        "min_ms": round(min(cycle_ms), 2), "cpu_median_ms": round(statistics.median(cycle_cpu), 2),
        "rebuild_median_ms": round(statistics.median(rebuild_ms), 2),
        "rebuild_cpu_median_ms": round(statistics.median(rebuild_cpu), 2), "same_decisions_as_rebuild": same,
        "plan_median_ms": round(statistics.median(plan_ms), 2), "plan_p95_ms": round(_p95(plan_ms), 2),
        "admits": len(result.admits), "preempts": len(result.preempts),
        "reservations": len(result.reservations), "waits": len(result.waits),
        "waits_with_estimate": sum(1 for w in result.waits if w.estimated_start is not None),
        "snapshot_build_s": round(build_s, 2), "python": platform.python_version(),
    }
    if inline:
        inline_ms = _times(repeat, lambda: run_cycle(snapshot, NOW))
        report["inline_median_ms"] = round(statistics.median(inline_ms), 2)
        report["inline_p95_ms"] = round(_p95(inline_ms), 2)
    gc.unfreeze()
    return report


@click.command("cycle")
@click.option("--pending", type=click.IntRange(min=0), default=2000, show_default=True,
              help="jobs waiting in the queues")
@click.option("--nodes", type=click.IntRange(min=64), default=512, show_default=True,
              help="nodes of 8 GPUs (512: the reference cluster; otherwise the same design scaled)")
@click.option("--running", type=click.IntRange(min=0), default=None,
              help="running jobs [default: 1,500 per 512 nodes]")
@click.option("--repeat", type=click.IntRange(min=1), default=20, show_default=True, help="timed passes")
@click.option("--seed", type=int, default=7, show_default=True, help="workload seed")
@click.option("--inline", is_flag=True, help="also time cycles that plan for themselves (no carried plan)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def command(pending: int, nodes: int, running: int | None, repeat: int, seed: int, inline: bool,
            as_json: bool) -> None:
    """Time full run_cycle passes (and the planning pass) on a realistic busy-hour snapshot."""
    if running is None:
        running = round(nodes * 1500 / 512)
    report = measure(pending, nodes, running, repeat, seed=seed, inline=inline)
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"snapshot: {report['pending']} pending, {report['running']} running, {report['nodes']} nodes "
               f"(built in {report['snapshot_build_s']} s)")
    click.echo(f"run_cycle: median {report['median_ms']} ms, p95 {report['p95_ms']} ms over {repeat} passes "
               f"({report['admits']} admitted, {report['preempts']} preempted, {report['waits']} waiting)")
    click.echo(f"rebuilt:   median {report['rebuild_median_ms']} ms (indexes built from the snapshot; same "
               f"decisions: {report['same_decisions_as_rebuild']})")
    click.echo(f"plan:      median {report['plan_median_ms']} ms, p95 {report['plan_p95_ms']} ms")
    if inline:
        click.echo(f"inline:    median {report['inline_median_ms']} ms, p95 {report['inline_p95_ms']} ms")
