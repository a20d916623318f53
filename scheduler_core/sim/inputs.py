"""The workload a ``shoal sim`` command line names: a generated one (``tuesday``, ``festive``) or a trace CSV, scaled with
``--load``. One place, so a single run and every process of a many-seed run build the same workload from the same
words."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from ..config import load_cluster, load_teams, resolve
from ..errors import ConfigError
from .workloads.csvtrace import load_csv
from .workloads.festive import festive_week
from .workloads.scaling import scale_to_load
from .workloads.tuesday import busy_tuesday
from .workloads.types import Workload

GENERATED = ("tuesday", "festive")


@dataclass(frozen=True, slots=True)
class WorkloadArgs:
    """What the command line says about the workload; everything but the seed (a many-seed run varies it)."""

    workload: str
    cluster: str = "reference"
    teams: str | None = None
    load: float | None = None
    skip_bad_rows: bool = False
    #: The festive week's length (default 7); only for ``festive``.
    days: int | None = None

    @property
    def seeded(self) -> bool:
        """True when the seed changes the workload itself (a generated one), not only the replay."""
        return self.workload in GENERATED


def teams_for(cluster: str, teams: str | None) -> str:
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


def load_workload(args: WorkloadArgs, seed: int) -> tuple[Workload, list[str]]:
    """The workload named on the command line, and warnings to print (bad rows skipped)."""
    config, nodes = load_cluster(args.cluster)
    team_config = load_teams(teams_for(args.cluster, args.teams), nodes)
    warnings: list[str] = []
    if args.days is not None and args.workload != "festive":
        raise click.UsageError("--days sets the festive week's length: use it with --workload festive")
    if args.workload in GENERATED and args.load is not None:
        raise click.UsageError(f"--load scales a trace's cluster; the {args.workload} workload sets its own load")
    if args.workload == "tuesday":
        return busy_tuesday(config, team_config, seed=seed), warnings
    if args.workload == "festive":
        try:
            return festive_week(config, team_config, seed=seed, days=7 if args.days is None else args.days), warnings
        except ValueError as exc:
            raise click.UsageError(f"--workload festive: {exc}") from None
    path = Path(args.workload)
    if path.suffix.lower() != ".csv":
        raise click.BadParameter(f"{args.workload!r} is neither 'tuesday', 'festive' nor a .csv trace",
                                 param_hint="--workload")
    loaded = load_csv(path, config, team_config, skip_bad_rows=args.skip_bad_rows)
    warnings += [f"skipped {row}" for row in loaded.bad_rows]
    result = loaded.workload
    if args.load is not None:
        try:
            result = scale_to_load(result, args.load)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--load") from None
    return result, warnings
