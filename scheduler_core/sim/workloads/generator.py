"""The pieces of a generated workload that the busy Tuesday and the festive week share.

A generated day is drafted first (``Draft``: a job before its run time is scaled to the day's demand), from
``numpy.random.Generator`` draws in a fixed order: the same seed, the same jobs. The helpers here draft each kind
of work the reference document describes — the 1,024-GPU runs, the 500-trial sweep, notebooks on MIG slices,
fine-tunes and small jobs arriving on the daily profile — and ``calibrate`` finds, per whole-GPU flavour, the
factor on scalable run times that makes the offered load over a span (office hours) hit a target share of the
capacity. ``finish`` turns a draft into a ``WorkloadJob``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...model.flavours import FLAVOURS
from ...model.job import CheckpointPolicy, JobKind, JobSpec, PriorityClass, Topology
from ...model.team import TeamConfig, TeamsConfig
from .types import WorkloadJob

DAY = 86400.0
HOUR = 3600.0

#: (hour, relative arrival rate); linear in between. Office hours are flat.
PROFILE = ((0, 0.12), (7, 0.12), (9, 1.0), (17, 1.0), (20, 0.3), (24, 0.12))
FINE_TUNE_GPUS = ((8, 0.40), (16, 0.25), (32, 0.17), (64, 0.10), (128, 0.05), (256, 0.03))
SMALL_GPUS = ((1, 0.45), (2, 0.15), (4, 0.15), (8, 0.25))
FINE_TUNE_H100_SHARE = 0.4
SMALL_H100_SHARE = 0.3

BIG_TEAM = "genai-core"
SWEEP_TEAM = "search"
FRAUD_TEAM = "fraud-ml"


@dataclass
class Draft:
    """A job before its run time is scaled to the day's demand."""

    id: str
    team: str
    kind: JobKind
    flavour: str
    pods: int
    per_pod: int
    submit: float
    work: float
    scalable: bool
    topology: Topology | None
    preemptible: bool
    priority: PriorityClass
    cost: float
    limit_factor: float
    limit_round: float
    time_limit: float | None = None
    measured: bool = True
    max_restarts: int = 3

    @property
    def units(self) -> int:
        return self.pods * self.per_pod


def preemptible(rng: np.random.Generator, share: float, team: TeamConfig, units: int, flavour: str) -> bool:
    """Preemptible with probability ``share``; a job is non-preemptible only if it fits its team's nominal quota
    (non-preemptible work may not borrow, so a bigger one could never run, and nobody would submit it)."""
    draw = rng.random() < share
    quota = team.quotas.get(flavour)
    return bool(draw or quota is None or units > quota.nominal)


def rate(hour: np.ndarray) -> np.ndarray:
    xs = np.array([p[0] for p in PROFILE], dtype=float)
    ys = np.array([p[1] for p in PROFILE], dtype=float)
    out: np.ndarray = np.interp(np.mod(hour, 24.0), xs, ys)
    return out


def arrivals(rng: np.random.Generator, count: int, start: float, end: float) -> np.ndarray:
    """``count`` instants in ``[start, end)`` drawn from the daily profile (inverse CDF on a one-minute grid)."""
    grid = np.arange(start, end + 60.0, 60.0)
    weights = rate(grid[:-1] / HOUR)
    cdf = np.concatenate([[0.0], np.cumsum(weights)])
    cdf /= cdf[-1]
    return np.sort(np.interp(rng.random(count), cdf, grid))


def expected_share(start: float, end: float) -> float:
    """Traffic in ``[start, end)`` relative to one whole day's."""
    grid = np.arange(0.0, DAY, 60.0)
    day = float(rate(grid / HOUR).sum())
    span = np.arange(start, end, 60.0)
    return float(rate(span / HOUR).sum()) / day


def choose(rng: np.random.Generator, table: tuple[tuple[int, float], ...]) -> int:
    values = [v for v, _ in table]
    weights = np.array([w for _, w in table])
    return int(rng.choice(values, p=weights / weights.sum()))


def lognormal(rng: np.random.Generator, median: float, sigma: float, low: float, high: float) -> float:
    return float(np.clip(median * math.exp(sigma * rng.standard_normal()), low, high))


@dataclass(frozen=True, slots=True)
class Teams:
    """Who submits: the teams by name, how busy each is (log-normal spread, larger quotas a little busier), how
    many notebooks each opens, and the named teams of the reference document (or stand-ins)."""

    names: list[str]
    by_name: dict[str, TeamConfig]
    activity: np.ndarray
    notebook_activity: np.ndarray
    big: str
    sweep: str
    fraud: str

    @classmethod
    def draw(cls, rng: np.random.Generator, teams: TeamsConfig) -> Teams:
        by_name = teams.by_name()
        names = [t.name for t in teams.teams]
        spread = np.exp(0.8 * rng.standard_normal(len(names)))
        size = np.array([1.0 + sum(q.nominal / FLAVOURS[f].units_per_gpu for f, q in by_name[n].quotas.items()
                                   if not FLAVOURS[f].is_mig) / 400.0 for n in names])
        activity = spread * size
        activity /= activity.sum()
        notebook_activity = np.sqrt(spread)
        notebook_activity /= notebook_activity.sum()
        return cls(names=names, by_name=by_name, activity=activity, notebook_activity=notebook_activity,
                   big=BIG_TEAM if BIG_TEAM in by_name else names[0],
                   sweep=SWEEP_TEAM if SWEEP_TEAM in by_name else names[min(1, len(names) - 1)],
                   fraud=FRAUD_TEAM if FRAUD_TEAM in by_name else names[min(2, len(names) - 1)])

    def pick(self, rng: np.random.Generator) -> TeamConfig:
        return self.by_name[self.names[int(rng.choice(len(self.names), p=self.activity))]]


def flavour_for(rng: np.random.Generator, whole: Sequence[str], team: TeamConfig, h100_share: float) -> str:
    options = [f for f in whole if f in team.quotas] or list(whole)
    if "h100" in options and "a100" in options:
        return "h100" if rng.random() < h100_share else "a100"
    return options[0]


def big_run(job_id: str, team: str, flavour: str, pods: int, submit: float, work: float, time_limit: float, *,
            measured: bool = True) -> Draft:
    """A 1,024-GPU (``pods`` × 8) job, block-preferring, checkpointing, restarted up to 20 times."""
    return Draft(id=job_id, team=team, kind=JobKind.BATCH, flavour=flavour, pods=pods, per_pod=8, submit=submit,
                 work=work, scalable=False, topology=Topology(preferred="block"), preemptible=True,
                 priority=PriorityClass.STANDARD, cost=50.0, limit_factor=1.0, limit_round=HOUR,
                 time_limit=time_limit, measured=measured, max_restarts=20)


def big_pods(capacity: dict[str, int], flavour: str) -> int:
    """128 nodes (1,024 GPUs) on a cluster as large as the reference one; a third of the flavour on a smaller."""
    nodes = capacity.get(flavour, 8) // 8
    return 128 if nodes >= 256 else max(1, nodes // 3)


def sweep(rng: np.random.Generator, team: str, flavour: str, at: float, trials: int, prefix: str) -> list[Draft]:
    """``trials`` one-GPU trials within a minute of ``at``."""
    return [Draft(id=f"{prefix}{i:03d}", team=team, kind=JobKind.TRIAL, flavour=flavour, pods=1, per_pod=1,
                  submit=at + float(offset), work=lognormal(rng, 40 * 60, 0.4, 600, 2 * HOUR), scalable=False,
                  topology=None, preemptible=True, priority=PriorityClass.STANDARD, cost=5.0, limit_factor=1.0,
                  limit_round=HOUR, time_limit=2 * HOUR)
            for i, offset in enumerate(np.sort(rng.random(trials) * 60.0))]


def notebooks(rng: np.random.Generator, teams: Teams, mig: str, count: int, day: float, office: tuple[float, float],
              prefix: str) -> list[Draft]:
    """Notebooks on MIG slices, opened mostly 08:30–10:30 of ``day`` (else in office hours), kept for a working
    day; never preempted."""
    out = []
    for i in range(count):
        if rng.random() < 0.7:
            opened = day + 8.5 * HOUR + float(rng.random()) * 2 * HOUR
        else:
            opened = float(arrivals(rng, 1, day + office[0], day + office[1])[0])
        team = teams.names[int(rng.choice(len(teams.names), p=teams.notebook_activity))]
        out.append(Draft(
            id=f"{prefix}{i:03d}", team=team, kind=JobKind.NOTEBOOK, flavour=mig, pods=1, per_pod=1, submit=opened,
            work=float(np.clip(rng.normal(7 * HOUR, 1.5 * HOUR), HOUR, 11 * HOUR)), scalable=False, topology=None,
            preemptible=False, priority=PriorityClass.STANDARD, cost=0.0, limit_factor=1.0, limit_round=HOUR,
            time_limit=12 * HOUR))
    return out


def fine_tunes(rng: np.random.Generator, teams: Teams, whole: Sequence[str], count: int, start: float, end: float,
               prefix: str, *, measured: bool = True) -> list[Draft]:
    """Fine-tunes of 8–256 GPUs on the daily profile; a quarter of those of 2–16 nodes need one block."""
    out = []
    for i, at in enumerate(arrivals(rng, count, start, end)):
        team = teams.pick(rng)
        gpus = choose(rng, FINE_TUNE_GPUS)
        flavour = flavour_for(rng, whole, team, FINE_TUNE_H100_SHARE)
        pods = max(1, gpus // 8)
        required = pods > 1 and gpus <= 128 and rng.random() < 0.25
        topology = None if pods == 1 else (Topology(required="block") if required else Topology(preferred="block"))
        out.append(Draft(
            id=f"{prefix}{i:04d}", team=team.name, kind=JobKind.BATCH, flavour=flavour, pods=pods,
            per_pod=min(gpus, 8), submit=float(at), work=lognormal(rng, 3 * HOUR, 0.7, 1800, 20 * HOUR),
            scalable=True, topology=topology, preemptible=preemptible(rng, 0.95, team, gpus, flavour),
            priority=PriorityClass.HIGH if rng.random() < 0.1 else PriorityClass.STANDARD,
            cost=10.0 + 40.0 * math.sqrt(gpus / 256) * (0.75 + 0.5 * float(rng.random())),
            limit_factor=1.3 + 1.7 * float(rng.random()), limit_round=HOUR, measured=measured, max_restarts=10))
    return out


def small_jobs(rng: np.random.Generator, teams: Teams, whole: Sequence[str], count: int, start: float, end: float,
               prefix: str, *, measured: bool = True) -> list[Draft]:
    """Evaluations, data jobs and debugging: 1–8 GPUs on one node, on the daily profile."""
    out = []
    for i, at in enumerate(arrivals(rng, count, start, end)):
        team = teams.pick(rng)
        gpus = choose(rng, SMALL_GPUS)
        draw = float(rng.random())
        priority = PriorityClass.HIGH if draw < 0.1 else PriorityClass.LOW if draw < 0.2 else PriorityClass.STANDARD
        flavour = flavour_for(rng, whole, team, SMALL_H100_SHARE)
        out.append(Draft(
            id=f"{prefix}{i:04d}", team=team.name, kind=JobKind.BATCH, flavour=flavour, pods=1, per_pod=gpus,
            submit=float(at), work=lognormal(rng, 40 * 60, 1.0, 300, 12 * HOUR), scalable=True, topology=None,
            preemptible=preemptible(rng, 0.85, team, gpus, flavour), priority=priority,
            cost=5.0 + 15.0 * float(rng.random()), limit_factor=1.3 + 1.7 * float(rng.random()),
            limit_round=900.0, measured=measured))
    return out


def span_load(submit: np.ndarray, work: np.ndarray, units: np.ndarray, span: tuple[float, float]) -> float:
    """Units kept busy on average over ``span`` if no job waited."""
    start, end = span
    overlap = np.clip(np.minimum(submit + work, end) - np.maximum(submit, start), 0.0, None)
    return float((overlap * units).sum() / (end - start))


def calibrate(drafts: Sequence[Draft], capacity: dict[str, int], target: float, span: tuple[float, float], *,
              scaled: Callable[[Draft], bool] = lambda d: d.scalable,
              factor_of: Callable[[Draft], float] = lambda d: 1.0) -> dict[str, float]:
    """Per whole-GPU flavour, the factor on the run times of the drafts ``scaled`` picks that makes the offered
    load over ``span`` ``target`` × its capacity (bisection); other drafts count with ``factor_of`` (the factor
    an earlier span already gave them)."""
    factors: dict[str, float] = {}
    for flavour, units in capacity.items():
        if FLAVOURS[flavour].is_mig or units == 0:
            continue
        mine = [d for d in drafts if d.flavour == flavour]
        submit = np.array([d.submit for d in mine])
        work = np.array([d.work * (1.0 if scaled(d) else factor_of(d)) for d in mine])
        size = np.array([d.units for d in mine], dtype=float)
        chosen = np.array([scaled(d) for d in mine], dtype=bool)
        goal = target * units
        low, high = 0.01, 50.0
        for _ in range(60):
            mid = math.sqrt(low * high)
            load = span_load(submit, np.where(chosen, work * mid, work), size, span)
            low, high = (mid, high) if load < goal else (low, mid)
        factors[flavour] = math.sqrt(low * high)
    return factors


def finish(d: Draft, factor: float, source: str) -> WorkloadJob:
    """The job of a draft, its run time times ``factor`` if scalable; the time limit from the run time unless
    the draft sets one."""
    work = d.work * factor if d.scalable else d.work
    limit = d.time_limit
    if limit is None:
        limit = math.ceil((work * d.limit_factor + 600.0) / d.limit_round) * d.limit_round
    limit = float(min(max(limit, 60.0), 60 * DAY))
    grace = 0.0 if not d.preemptible else max(300.0, min(3600.0, 2 * d.cost))
    spec = JobSpec(
        name=d.id, team=d.team, kind=d.kind, priority_class=d.priority, flavour=(d.flavour,), pods=d.pods,
        gpus_per_pod=d.per_pod, topology=d.topology, command=("sim",), time_limit=limit, preemptible=d.preemptible,
        checkpoint=CheckpointPolicy(cost=d.cost if d.cost > 0 else None, grace_period=grace),
        max_restarts=d.max_restarts,
    )
    return WorkloadJob(id=d.id, spec=spec, submit_at=d.submit, work_s=work, checkpoint_cost_s=d.cost,
                       measured=d.measured, source=source)
