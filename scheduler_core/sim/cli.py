"""``shoal sim``: replay a workload through a policy in virtual time and print (or write) the figures.

    shoal sim --workload tuesday --cluster reference --policy shoal --json
    shoal sim --workload traces/itp_microsoft_2021_day.csv --load 0.9 --policy easy --report out/
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import load_cluster, load_teams, resolve
from ..errors import ConfigError
from .compare import comparison_markdown, write_comparison
from .engine import POLICIES, SimConfig, simulate
from .metrics import summarise
from .report import markdown, write_report
from .waste import explain, explain_markdown
from .workloads.csvtrace import load_csv
from .workloads.scaling import scale_to_load
from .workloads.tuesday import busy_tuesday
from .workloads.types import Workload


def _teams_for(cluster: str, teams: str | None) -> str:
    if teams is not None:
        return teams
    builtin = Path(cluster).suffix not in (".yaml", ".yml") and "/" not in cluster
    try:
        if builtin:
            resolve("teams", cluster)
    except ConfigError:
        builtin = False
    if not builtin:
        raise click.UsageError(f"--cluster {cluster} is not a built-in cluster: give its teams with --teams")
    return cluster


def load_workload(workload: str, cluster: str, teams: str | None, seed: int, load: float | None,
                  skip_bad_rows: bool) -> tuple[Workload, list[str]]:
    """The workload named on the command line, and warnings to print (bad rows skipped)."""
    config, nodes = load_cluster(cluster)
    team_config = load_teams(_teams_for(cluster, teams), nodes)
    warnings: list[str] = []
    if workload == "tuesday":
        if load is not None:
            raise click.UsageError("--load scales a trace's cluster; the busy Tuesday sets its own load (93 %)")
        return busy_tuesday(config, team_config, seed=seed), warnings
    path = Path(workload)
    if path.suffix.lower() != ".csv":
        raise click.BadParameter(f"{workload!r} is neither 'tuesday' nor a .csv trace", param_hint="--workload")
    loaded = load_csv(path, config, team_config, skip_bad_rows=skip_bad_rows)
    warnings += [f"skipped {row}" for row in loaded.bad_rows]
    result = loaded.workload
    if load is not None:
        try:
            result = scale_to_load(result, load)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--load") from None
    return result, warnings


@click.command("sim")
@click.option("--workload", required=True, metavar="tuesday|PATH.csv",
              help="'tuesday' (the generated busy Tuesday) or a job trace CSV (schema: traces/README.md).")
@click.option("--cluster", default="reference", show_default=True, metavar="reference|PATH.yaml",
              help="Cluster to simulate: a built-in name or a cluster YAML.")
@click.option("--teams", default=None, metavar="NAME|PATH.yaml",
              help="Teams and quotas (default: the built-in set named like the cluster).")
@click.option("--policy", type=click.Choice(POLICIES + ("all",)), default="shoal", show_default=True,
              help="'all' runs each policy on the same input; --json then prints one object per policy.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the generated day, pod start-up and node failures.")
@click.option("--load", "load", type=float, default=None,
              help="Scale a trace's cluster so its offered load is about this (e.g. 0.9).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with every figure.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False), default=None,
              help="Write report.md, summary.json and PNG plots into this directory.")
@click.option("--skip-bad-rows", is_flag=True, help="Replay a trace's good rows and list the bad ones on stderr.")
@click.option("--no-failures", is_flag=True, help="No node failures.")
@click.option("--gpu-hours-per-failure", type=float, default=50_700.0, show_default=True,
              help="One node failure per this many GPU-hours (Llama 3 report's rate).")
@click.option("--repair-hours", type=float, default=48.0, show_default=True, help="How long a failed node is out.")
@click.option("--horizon-days", type=float, default=30.0, show_default=True,
              help="Stop this many days after the last submission even if jobs remain.")
@click.option("--explain-waste", "explain_waste", is_flag=True,
              help="Also list the 20 waiting jobs the idle GPUs waited on most (JSON: idle_gpu_hours_by_job).")
@click.option("--tick", "tick_s", type=float, default=10.0, show_default=True,
              help="Scheduler tick in virtual seconds: the controller steps at most once per tick (the live loop's "
                   "is 10 s; a longer one replays long traces faster, adding up to a tick to each wait).")
def command(workload: str, cluster: str, teams: str | None, policy: str, seed: int, load: float | None,
            as_json: bool, report_dir: str | None, skip_bad_rows: bool, no_failures: bool,
            gpu_hours_per_failure: float, repair_hours: float, horizon_days: float, explain_waste: bool,
            tick_s: float) -> None:
    """Replay a workload through a policy in virtual time, on the real controller, and measure it."""
    if gpu_hours_per_failure <= 0 or repair_hours < 0 or horizon_days <= 0 or not 1 <= tick_s <= 3600:
        raise click.UsageError("--gpu-hours-per-failure and --horizon-days must be positive, --repair-hours not "
                               "negative, --tick between 1 and 3600 seconds")
    loaded, warnings = load_workload(workload, cluster, teams, seed, load, skip_bad_rows)
    for warning in warnings:
        click.echo(f"shoal sim: {warning}", err=True)
    config = SimConfig(seed=seed, gpu_hours_per_failure=None if no_failures else gpu_hours_per_failure,
                       repair_s=repair_hours * 3600.0, horizon_s=horizon_days * 86400.0, tick_s=tick_s,
                       progress=True)
    policies = POLICIES if policy == "all" else (policy,)
    records = []
    for name in policies:
        record = simulate(loaded, name, config)
        records.append(record)
        if report_dir is not None:
            path = write_report(record, Path(report_dir) / name if policy == "all" else report_dir)
            if not as_json:
                click.echo(f"report: {path}", err=True)
    if report_dir is not None and policy == "all":
        path = write_comparison(records, report_dir)
        if not as_json:
            click.echo(f"comparison: {path}", err=True)
    summaries = [summarise(record) for record in records]
    if explain_waste:
        for summary, record in zip(summaries, records):
            summary["idle_gpu_hours_by_job"] = explain(record)
    if as_json:
        click.echo(json.dumps(summaries[0] if policy != "all" else {s["policy"]: s for s in summaries}))
    elif policy == "all":
        click.echo(comparison_markdown(summaries))
    else:
        click.echo(markdown(summaries[0]).split("\n![")[0].rstrip())
    if explain_waste and not as_json:
        for record in records:
            click.echo(f"\n{record.policy}: {explain_markdown(record)}")
