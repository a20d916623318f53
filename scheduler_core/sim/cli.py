"""``shoal sim``: replay a workload through a policy in virtual time and print (or write) the figures.

    shoal sim --workload tuesday --cluster reference --policy shoal --json
    shoal sim --workload traces/itp_microsoft_2021_day.csv --load 0.9 --policy easy --report out/
    shoal sim --workload tuesday --seeds 0-19 --policy all --jobs 2 --json
    shoal sim --workload tuesday --policy shoal --seed 1 --decision-log before.log   # then after.log; cmp them

The workload comes from ``inputs``, a many-seed run from ``seeds``; this module only reads the options.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from .against import AgainstError, against_markdown, compare, load_before
from .compare import comparison_markdown, write_comparison
from .decision_log import DecisionLog
from .engine import POLICIES, SimConfig, resolve_policy, simulate
from .inputs import WorkloadArgs, load_workload
from .metrics import summarise
from .report import markdown, write_report
from .seeds import SeedsError, aggregate_markdown, cluster_line, parse_seeds, per_seed_markdown, run_all, \
    seeds_document, write_seeds_report
from .waste import explain, explain_holders, explain_markdown
from .workloads.scaling import describe_cluster


@click.command("sim")
@click.option("--workload", required=True, metavar="tuesday|festive|PATH.csv",
              help="'tuesday' (the generated busy Tuesday), 'festive' (the generated festive week) or a job trace "
                   "CSV (schema: traces/README.md).")
@click.option("--days", type=click.IntRange(1, 14), default=None,
              help="The festive week's length in days (default 7; shorter for quick looks).")
@click.option("--cluster", default="reference", show_default=True, metavar="reference|PATH.yaml",
              help="Cluster to simulate: a built-in name or a cluster YAML.")
@click.option("--teams", default=None, metavar="NAME|PATH.yaml",
              help="Teams and quotas (default: the built-in set named like the cluster).")
@click.option("--policy", type=click.Choice(POLICIES + ("all",)), default="shoal", show_default=True,
              help="'all' runs each policy on the same input; --json then prints one object per policy.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Seeds the generated day, pod start-up and node failures (default 0).")
@click.option("--seeds", "seeds_text", default=None, metavar="A-B|A,B,C",
              help="Run every seed given (0-19, 0,3,7 or a mix) and report each and, per policy, the mean, min, "
                   "max and worst seed of every figure.")
@click.option("--jobs", "jobs", type=click.IntRange(min=1), default=None,
              help="With --seeds: replays run at once, each in its own process (default: the machine's cores).")
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
              help="Also list the 20 waiting jobs the idle GPUs waited on most (JSON: idle_gpu_hours_by_job), "
                   "and split the same idle GPU-hours by what held them: reservations (the 20 that held most, by "
                   "job and reason), idle whole nodes, partly used nodes (JSON: idle_gpu_hours_by_holder).")
@click.option("--decision-log", "decision_log", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write every decision of every pass to this file, a line each (one seed, one policy): compare "
                   "two runs' files to show a change decides the same.")
@click.option("--against", "against", type=click.Path(exists=True, dir_okay=False), default=None,
              help="With --seeds: also compare with an earlier run's --json output (FILE): per policy, each "
                   "headline figure's mean before and after, and the seeds it made better, worse or left equal.")
@click.option("--tick", "tick_s", type=float, default=10.0, show_default=True,
              help="Scheduler tick in virtual seconds: the controller steps at most once per tick (the live loop's "
                   "is 10 s; a longer one replays long traces faster, adding up to a tick to each wait).")
def command(workload: str, days: int | None, cluster: str, teams: str | None, policy: str, seed: int | None, seeds_text: str | None,
            jobs: int | None, load: float | None, as_json: bool, report_dir: str | None, skip_bad_rows: bool, no_failures: bool,
            gpu_hours_per_failure: float, repair_hours: float, horizon_days: float, explain_waste: bool,
            tick_s: float, decision_log: str | None, against: str | None) -> None:
    """Replay a workload through a policy in virtual time, on the real controller, and measure it."""
    if gpu_hours_per_failure <= 0 or repair_hours < 0 or horizon_days <= 0 or not 1 <= tick_s <= 3600:
        raise click.UsageError("--gpu-hours-per-failure and --horizon-days must be positive, --repair-hours not "
                               "negative, --tick between 1 and 3600 seconds")
    args = WorkloadArgs(workload=workload, cluster=cluster, teams=teams, load=load, skip_bad_rows=skip_bad_rows,
                        days=days)
    config = SimConfig(seed=seed or 0, gpu_hours_per_failure=None if no_failures else gpu_hours_per_failure,
                       repair_s=repair_hours * 3600.0, horizon_s=horizon_days * 86400.0, tick_s=tick_s,
                       progress=True, explain_waste=explain_waste)
    if seeds_text is not None:
        if seed is not None or explain_waste or decision_log is not None:
            raise click.UsageError("--seeds runs many seeds: drop --seed, --explain-waste and --decision-log (run "
                                   "one seed for those)")
        try:
            seeds = parse_seeds(seeds_text)
        except SeedsError as exc:
            raise click.UsageError(str(exc)) from None
        _many_seeds(args, config, seeds, POLICIES if policy == "all" else (policy,), jobs, as_json, report_dir,
                    against)
        return
    if jobs is not None or against is not None:
        raise click.UsageError("--jobs and --against are for many seeds: give them with --seeds")
    if decision_log is not None and policy == "all":
        raise click.UsageError("--decision-log records one policy: pick it with --policy")
    loaded, warnings = load_workload(args, config.seed)
    for warning in warnings:
        click.echo(f"shoal sim: {warning}", err=True)
    built = describe_cluster(loaded)
    policies = POLICIES if policy == "all" else (policy,)
    records = []
    for name in policies:
        if decision_log is None:
            record = simulate(loaded, name, config)
        else:
            with open(decision_log, "w", encoding="utf-8") as out:
                record = simulate(loaded, DecisionLog(resolve_policy(name), out), config, policy_name=name)
        records.append(record)
        if report_dir is not None:
            path = write_report(record, Path(report_dir) / name if policy == "all" else report_dir)
            if not as_json:
                click.echo(f"report: {path}", err=True)
    if report_dir is not None and policy == "all":
        path = write_comparison(records, report_dir)
        if not as_json:
            click.echo(f"comparison: {path}", err=True)
    summaries = [summarise(record) | {"cluster": built} for record in records]
    if explain_waste and as_json:           # as text, the tables follow the figures (below)
        for summary, record in zip(summaries, records):
            summary["idle_gpu_hours_by_job"] = explain(record)
            summary["idle_gpu_hours_by_holder"] = explain_holders(record)
    if as_json:
        click.echo(json.dumps(summaries[0] if policy != "all" else {s["policy"]: s for s in summaries}))
    elif policy == "all":
        click.echo(cluster_line(built))
        click.echo(comparison_markdown(summaries))
    else:
        click.echo(cluster_line(built))
        click.echo(markdown({k: v for k, v in summaries[0].items() if k != "cluster"}).split("\n![")[0].rstrip())
    if explain_waste and not as_json:
        for record in records:
            click.echo(f"\n{record.policy}: {explain_markdown(record)}")


def _many_seeds(args: WorkloadArgs, config: SimConfig, seeds: tuple[int, ...], policies: tuple[str, ...],
                jobs: int | None, as_json: bool, report_dir: str | None, against: str | None) -> None:
    """``--seeds``: build the first workload here (a bad file fails once, its skipped rows are told once; so
    does a bad ``--against`` file), then every (seed, policy) pair in worker processes."""
    first, warnings = load_workload(args, seeds[0])
    try:
        before = None if against is None else load_before(against, first.name)
    except AgainstError as exc:
        raise click.UsageError(str(exc)) from None
    for warning in warnings:
        click.echo(f"shoal sim: {warning}", err=True)
    rows = run_all(args, config, seeds, policies, jobs=jobs, progress=True)
    compared = None if before is None or against is None else compare(before, rows, Path(against).name)
    if report_dir is not None:
        path = write_seeds_report(rows, seeds, report_dir)
        if not as_json:
            click.echo(f"report: {path}", err=True)
    if as_json:
        document = seeds_document(rows, seeds)
        if compared is not None:
            document["against"] = compared.as_json()
        click.echo(json.dumps(document))
        return
    click.echo(cluster_line(rows[0].get("cluster")))
    click.echo("\n## Per seed\n\n" + per_seed_markdown(rows))
    click.echo("\n## Across seeds\n\n" + aggregate_markdown(rows))
    if compared is not None:
        click.echo("\n" + against_markdown(compared))
