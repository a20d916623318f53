"""Job traces as CSV, in the schema of ``traces/README.md``, with the overlay for what a file lacks.

Required columns: ``job_id, submit_time_s, duration_s, num_gpus``. The trace's own ``user``, ``vc_or_team`` and
``status`` may be present (``status`` is ignored: every row is replayed as the job it describes). Optional columns
win over the overlay: ``team``, ``flavour``, ``time_limit_s``, ``preemptible``, ``priority_class``, ``topology``
(``required:block``, ``preferred:leaf``, ``none``), ``kind`` and ``checkpoint_cost_s``.

A bad row is reported with its line number; by default one bad row fails the load (nothing is replayed from a file
that was misread), and ``skip_bad_rows`` replays the rest and returns the bad rows for the report.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from ...errors import ConfigError
from ...model.cluster import ClusterConfig, capacity_by_flavour
from ...model.flavours import FLAVOURS
from ...model.job import CheckpointPolicy, JobKind, JobSpec, PriorityClass, Topology
from ...model.team import TeamConfig, TeamsConfig
from . import overlay
from .types import Workload, WorkloadJob

_E = TypeVar("_E", bound=StrEnum)
REQUIRED = ("job_id", "submit_time_s", "duration_s", "num_gpus")
#: Spec field → the column that, when present and not empty, replaces the overlay's value.
_OVERLAID = {"team": "team", "flavour": "flavour", "time_limit": "time_limit_s", "preemptible": "preemptible",
             "priority_class": "priority_class", "topology": "topology", "kind": "kind",
             "checkpoint_cost": "checkpoint_cost_s"}
_NAME_BAD = re.compile(r"[^A-Za-z0-9._\-]")
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


@dataclass(frozen=True, slots=True)
class BadRow:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class TraceError(ConfigError):
    """A trace file cannot be replayed as it is; ``rows`` lists every bad row with its line number. A kind of
    ``ConfigError`` (the input is wrong, not the system), so the CLI exits 2 for it."""

    code = "invalid_trace"

    def __init__(self, path: str, message: str, rows: list[BadRow] | None = None) -> None:
        self.rows = list(rows or [])
        super().__init__(message, path=path)


@dataclass(frozen=True, slots=True)
class LoadedTrace:
    workload: Workload
    bad_rows: tuple[BadRow, ...]


class _Row(Exception):
    """One row's problem; becomes a ``BadRow`` with the line number."""


def load_csv(path: str | Path, cluster: ClusterConfig, teams: TeamsConfig, *,
             skip_bad_rows: bool = False) -> LoadedTrace:
    """Read ``path`` into a workload for ``cluster`` and ``teams``.

    Raises ``TraceError`` for an unreadable file, a missing column, no usable row, or (unless ``skip_bad_rows``)
    any bad row, naming up to five of them by line in the message and all of them in ``rows``.
    """
    path = Path(path)
    where = str(path)
    nodes = cluster.expand()
    capacity = capacity_by_flavour(nodes)
    by_team = teams.by_name()
    weights = overlay.team_weights(teams.teams)
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise TraceError(where, f"cannot read: {exc.strerror}") from None
    jobs: list[tuple[float, int, WorkloadJob]] = []
    bad: list[BadRow] = []
    seen: set[str] = set()
    with handle:
        reader = csv.DictReader(handle)
        header = [name.strip() for name in (reader.fieldnames or [])]
        missing = [name for name in REQUIRED if name not in header]
        if missing:
            raise TraceError(where, f"line 1: missing column{'s' if len(missing) > 1 else ''} "
                                    f"{', '.join(missing)} (need {', '.join(REQUIRED)})")
        reader.fieldnames = header
        for index, raw in enumerate(reader):
            line = reader.line_num
            row = {key: (value or "").strip() for key, value in raw.items() if key is not None}
            if None in raw:
                bad.append(BadRow(line, f"{len(header) + len(raw[None])} fields, header has {len(header)}"))
                continue
            try:
                job = _job(row, line, where, seen, by_team, weights, capacity)
            except _Row as exc:
                bad.append(BadRow(line, str(exc)))
                continue
            seen.add(job.id)
            jobs.append((job.submit_at, index, job))
    if bad and not skip_bad_rows:
        shown = "; ".join(str(row) for row in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise TraceError(where, f"{len(bad)} bad row{'s' if len(bad) > 1 else ''}: {shown}{more}", bad)
    if not jobs:
        raise TraceError(where, "no job to replay", bad)
    jobs.sort(key=lambda item: (item[0], item[1]))
    ordered = tuple(job for _, _, job in jobs)
    start, end = ordered[0].submit_at, ordered[-1].submit_at
    workload = Workload(name=path.stem, jobs=ordered, cluster=cluster, teams=teams, window=(start, max(end, start + 1)),
                        notes=overlay.OVERLAY_RULES)
    return LoadedTrace(workload, tuple(bad))


def _number(row: dict[str, str], name: str, *, minimum: float, strict: bool = False) -> float:
    text = row.get(name, "")
    try:
        value = float(text)
    except ValueError:
        raise _Row(f"{name} is {text!r}, not a number") from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"greater than {minimum:g}" if strict else f"at least {minimum:g}"
        raise _Row(f"{name} is {text}, must be {bound}")
    return value


def _job(row: dict[str, str], line: int, where: str, seen: set[str], by_team: Mapping[str, TeamConfig],
         weights: list[tuple[str, float]], capacity: dict[str, int]) -> WorkloadJob:
    job_id = row.get("job_id", "")
    if not job_id:
        raise _Row("job_id is empty")
    if job_id in seen:
        raise _Row(f"job_id {job_id!r} appears twice")
    submit = _number(row, "submit_time_s", minimum=0)
    duration = _number(row, "duration_s", minimum=0, strict=True)
    gpus_text = row.get("num_gpus", "")
    if not gpus_text.isdigit() or int(gpus_text) < 1:
        raise _Row(f"num_gpus is {gpus_text!r}, must be a whole number of at least 1")
    units = int(gpus_text)

    team = row.get("team") or ""
    if team:
        if team not in by_team:
            raise _Row(f"team {team!r} is not a configured team")
    elif row.get("vc_or_team", "") in by_team:
        team = row["vc_or_team"]
    else:
        team = overlay.overlay_team(job_id, weights)
    team_config = by_team[team]

    flavour_text = row.get("flavour", "")
    if flavour_text:
        flavours = tuple(f.strip() for f in flavour_text.split("|") if f.strip())
        for flavour in flavours:
            if flavour not in capacity:
                raise _Row(f"flavour {flavour!r} is not in this cluster (it has {', '.join(sorted(capacity))})")
    else:
        chosen = overlay.overlay_flavour(job_id, team_config, capacity)
        if chosen is None:
            raise _Row(f"team {team!r} has no quota for any whole-GPU flavour of this cluster")
        flavours = (chosen,)
    mig = FLAVOURS[flavours[0]].is_mig
    if mig or units <= 8:
        pods, per_pod = 1, units
    else:
        pods = math.ceil(units / 8)
        if units % pods:
            raise _Row(f"num_gpus {units} does not split into pods of at most 8 equal GPUs")
        per_pod = units // pods

    kind = _enum(row, "kind", JobKind, JobKind.BATCH)
    priority = _enum(row, "priority_class", PriorityClass, PriorityClass.STANDARD)
    topology = _topology(row.get("topology", ""), pods)
    gpus = units / FLAVOURS[flavours[0]].units_per_gpu
    time_limit = (_number(row, "time_limit_s", minimum=60) if row.get("time_limit_s")
                  else overlay.overlay_time_limit(job_id, duration))
    nominal = min(team_config.quotas[f].nominal if f in team_config.quotas else 0 for f in flavours)
    preemptible = (_bool(row, "preemptible") if row.get("preemptible")
                   else overlay.overlay_preemptible(job_id, units, nominal))
    cost = (_number(row, "checkpoint_cost_s", minimum=0) if row.get("checkpoint_cost_s")
            else overlay.overlay_checkpoint_cost(job_id, gpus))
    try:
        spec = JobSpec(
            name=_NAME_BAD.sub("-", job_id)[:128].lstrip("-._") or "job", team=team, kind=kind,
            priority_class=priority, flavour=flavours, pods=pods, gpus_per_pod=per_pod, topology=topology,
            command=("sim",), time_limit=min(time_limit, overlay.MAX_TIME_LIMIT_S), preemptible=preemptible,
            checkpoint=CheckpointPolicy(cost=cost, grace_period=max(300.0, min(3600.0, 2 * cost))),
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        raise _Row(f"{field}: {message}" if field else message) from None
    if time_limit > overlay.MAX_TIME_LIMIT_S:
        # Past what a user may ask for (the spec's bound is the API's): a trace's long job keeps a limit that
        # covers its run, set after validation so only the replay, never a submission, carries it.
        spec = spec.model_copy(update={"time_limit": time_limit})
    overlaid = frozenset(name for name, column in _OVERLAID.items() if not row.get(column))
    return WorkloadJob(id=job_id, spec=spec, submit_at=submit, work_s=duration, checkpoint_cost_s=cost,
                       source=f"{where}:{line}", overlaid=overlaid)


def _enum(row: dict[str, str], name: str, enum: type[_E], default: _E) -> _E:
    text = row.get(name, "")
    if not text:
        return default
    try:
        return enum(text.lower())
    except ValueError:
        raise _Row(f"{name} is {text!r}; use one of: {', '.join(str(e.value) for e in enum)}") from None


def _bool(row: dict[str, str], name: str) -> bool:
    text = row.get(name, "").lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _Row(f"{name} is {row.get(name)!r}; use true or false")


def _topology(text: str, pods: int) -> Topology | None:
    text = text.strip().lower()
    if not text:
        return overlay.overlay_topology(pods)
    if text == "none":
        return None
    kind, _, level = text.partition(":")
    if kind not in ("required", "preferred") or level not in ("node", "leaf", "block"):
        raise _Row(f"topology is {text!r}; use required:LEVEL, preferred:LEVEL (node, leaf, block) or none")
    return Topology.model_validate({kind: level})
