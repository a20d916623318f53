"""A generated busy Tuesday on the reference cluster, after the reference document's day.

The day (virtual time 0 is Tuesday 00:00; figures cover Tuesday, ``window = (0, 86400)``):

* 5,600 jobs submitted on Tuesday by ~40 teams, arriving mostly in office hours (ramp 07–09, flat 09–17,
  falling to 20:00, a trickle at night);
* the GenAI team's pre-training run on 1,024 H100s, ten days into a three-week run (11 days of work left), and
  a second 1,024-H100 GenAI job submitted at 09:00;
* search's 500-trial sweep arriving within one minute at 10:30;
* the fraud team's 7B fine-tune on 4 × 8 H100s inside one block (the document's example job), and other
  fine-tunes of 8–256 GPUs; thousands of small jobs of 1–8 GPUs (evaluations, data jobs, debugging);
* ~300 notebooks on MIG 1g.10gb slices, opened mostly between 08:30 and 10:30 and kept for a working day;
* 85 % of small jobs and 95 % of fine-tunes are preemptible; a job is non-preemptible only if it fits its team's
  nominal quota (non-preemptible work may not borrow); notebooks are non-preemptible;
* demand: fine-tune and small-job run times are scaled (one factor per flavour, found by bisection) so the work
  offered in office hours (09–18), counted as if nothing waited, averages 93 % of each whole-GPU flavour's
  working capacity;
* warm-up: Monday from 12:00 has the same kind of traffic (not measured), so Tuesday does not start on an empty
  cluster. Node failures are the engine's, not the workload's.

Everything is drawn from ``numpy.random.default_rng(seed)``: one seed, one day.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...model.cluster import ClusterConfig, capacity_by_flavour
from ...model.flavours import FLAVOURS
from ...model.job import CheckpointPolicy, JobKind, JobSpec, PriorityClass, Topology
from ...model.team import TeamConfig, TeamsConfig
from .types import Workload, WorkloadJob

DAY = 86400.0
HOUR = 3600.0
WARMUP_S = 12 * HOUR
JOBS_PER_DAY = 5600
NOTEBOOKS = 300
SWEEP_TRIALS = 500
FINE_TUNES = 250
FINE_TUNE_H100_SHARE = 0.4
SMALL_H100_SHARE = 0.3
OFFICE = (9 * HOUR, 18 * HOUR)
TARGET_LOAD = 0.93

#: (hour, relative arrival rate); linear in between. Office hours are flat.
PROFILE = ((0, 0.12), (7, 0.12), (9, 1.0), (17, 1.0), (20, 0.3), (24, 0.12))
FINE_TUNE_GPUS = ((8, 0.40), (16, 0.25), (32, 0.17), (64, 0.10), (128, 0.05), (256, 0.03))
SMALL_GPUS = ((1, 0.45), (2, 0.15), (4, 0.15), (8, 0.25))

BIG_TEAM = "genai-core"
SWEEP_TEAM = "search"
FRAUD_TEAM = "fraud-ml"


@dataclass
class _Draft:
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


def _preemptible(rng: np.random.Generator, share: float, team: TeamConfig, units: int, flavour: str) -> bool:
    """Preemptible with probability ``share``; a job is non-preemptible only if it fits its team's nominal quota
    (non-preemptible work may not borrow, so a bigger one could never run, and nobody would submit it)."""
    draw = rng.random() < share
    quota = team.quotas.get(flavour)
    return bool(draw or quota is None or units > quota.nominal)


def _rate(hour: np.ndarray) -> np.ndarray:
    xs = np.array([p[0] for p in PROFILE], dtype=float)
    ys = np.array([p[1] for p in PROFILE], dtype=float)
    rate: np.ndarray = np.interp(np.mod(hour, 24.0), xs, ys)
    return rate


def _arrivals(rng: np.random.Generator, count: int, start: float, end: float) -> np.ndarray:
    """``count`` instants in ``[start, end)`` drawn from the daily profile (inverse CDF on a one-minute grid)."""
    grid = np.arange(start, end + 60.0, 60.0)
    weights = _rate(grid[:-1] / HOUR)
    cdf = np.concatenate([[0.0], np.cumsum(weights)])
    cdf /= cdf[-1]
    return np.sort(np.interp(rng.random(count), cdf, grid))


def _expected_share(start: float, end: float) -> float:
    """Traffic in ``[start, end)`` relative to one whole day's."""
    grid = np.arange(0.0, DAY, 60.0)
    day = float(_rate(grid / HOUR).sum())
    span = np.arange(start, end, 60.0)
    return float(_rate(span / HOUR).sum()) / day


def _choose(rng: np.random.Generator, table: tuple[tuple[int, float], ...]) -> int:
    values = [v for v, _ in table]
    weights = np.array([w for _, w in table])
    return int(rng.choice(values, p=weights / weights.sum()))


def _lognormal(rng: np.random.Generator, median: float, sigma: float, low: float, high: float) -> float:
    return float(np.clip(median * math.exp(sigma * rng.standard_normal()), low, high))


def busy_tuesday(cluster: ClusterConfig, teams: TeamsConfig, seed: int = 0) -> Workload:
    """The day described in the module docstring, for ``cluster`` and ``teams`` (the reference ones by intent;
    any cluster with H100s works, with the big jobs and the sweep given to whichever teams exist)."""
    rng = np.random.default_rng(seed)
    by_name = teams.by_name()
    names = [t.name for t in teams.teams]
    capacity = capacity_by_flavour(cluster.expand())
    whole = [f for f in capacity if not FLAVOURS[f].is_mig]
    mig = next((f for f in capacity if FLAVOURS[f].is_mig and FLAVOURS[f].units_per_gpu == 7), None)
    big_team = BIG_TEAM if BIG_TEAM in by_name else names[0]
    sweep_team = SWEEP_TEAM if SWEEP_TEAM in by_name else names[min(1, len(names) - 1)]
    fraud_team = FRAUD_TEAM if FRAUD_TEAM in by_name else names[min(2, len(names) - 1)]
    big_flavour = "h100" if "h100" in capacity else whole[0]

    # How busy each team is today: a log-normal spread, larger teams (by quota) a little busier.
    spread = np.exp(0.8 * rng.standard_normal(len(names)))
    size = np.array([1.0 + sum(q.nominal / FLAVOURS[f].units_per_gpu for f, q in by_name[n].quotas.items()
                               if not FLAVOURS[f].is_mig) / 400.0 for n in names])
    activity = spread * size
    activity /= activity.sum()
    notebook_activity = np.sqrt(spread)
    notebook_activity /= notebook_activity.sum()

    drafts: list[_Draft] = []

    def flavour_for(team: TeamConfig, h100_share: float) -> str:
        options = [f for f in whole if f in team.quotas] or whole
        if "h100" in options and "a100" in options:
            return "h100" if rng.random() < h100_share else "a100"
        return options[0]

    # The pre-training run, ten days in: submitted alone before the warm-up so it starts on the empty cluster.
    nodes = capacity.get(big_flavour, 8) // 8
    big_pods = 128 if nodes >= 256 else max(1, nodes // 3)
    drafts.append(_Draft(
        id="genai-pretrain-70b", team=big_team, kind=JobKind.BATCH, flavour=big_flavour, pods=big_pods, per_pod=8,
        submit=-WARMUP_S - 600.0, work=11 * DAY, scalable=False, topology=Topology(preferred="block"),
        preemptible=True, priority=PriorityClass.STANDARD, cost=50.0, limit_factor=1.0, limit_round=HOUR,
        time_limit=14 * DAY, measured=False, max_restarts=20))
    drafts.append(_Draft(
        id="genai-1024-morning", team=big_team, kind=JobKind.BATCH, flavour=big_flavour, pods=big_pods,
        per_pod=8, submit=9 * HOUR + float(rng.integers(0, 300)), work=2 * DAY, scalable=False,
        topology=Topology(preferred="block"), preemptible=True, priority=PriorityClass.STANDARD, cost=50.0,
        limit_factor=1.0, limit_round=HOUR, time_limit=4 * DAY, max_restarts=20))
    drafts.append(_Draft(
        id="fraud-risk-7b-ft-festive", team=fraud_team, kind=JobKind.BATCH, flavour=big_flavour, pods=4,
        per_pod=8, submit=9.5 * HOUR + float(rng.integers(0, 600)), work=6 * HOUR, scalable=False,
        topology=Topology(required="block"), preemptible=True, priority=PriorityClass.STANDARD, cost=20.0,
        limit_factor=1.0, limit_round=HOUR, time_limit=12 * HOUR, max_restarts=20))

    # Search's sweep: 500 one-GPU trials within a minute at 10:30.
    sweep_at = 10.5 * HOUR
    for i, offset in enumerate(np.sort(rng.random(SWEEP_TRIALS) * 60.0)):
        drafts.append(_Draft(
            id=f"search-sweep-t{i:03d}", team=sweep_team, kind=JobKind.TRIAL, flavour=big_flavour, pods=1,
            per_pod=1, submit=sweep_at + float(offset), work=_lognormal(rng, 40 * 60, 0.4, 600, 2 * HOUR),
            scalable=False, topology=None, preemptible=True, priority=PriorityClass.STANDARD, cost=5.0,
            limit_factor=1.0, limit_round=HOUR, time_limit=2 * HOUR))

    # Notebooks: opened mostly 08:30–10:30, kept for a working day; never preempted.
    if mig is not None:
        for i in range(NOTEBOOKS):
            if rng.random() < 0.7:
                opened = 8.5 * HOUR + float(rng.random()) * 2 * HOUR
            else:
                opened = float(_arrivals(rng, 1, OFFICE[0], OFFICE[1])[0])
            team = names[int(rng.choice(len(names), p=notebook_activity))]
            drafts.append(_Draft(
                id=f"nb-{i:03d}", team=team, kind=JobKind.NOTEBOOK, flavour=mig, pods=1, per_pod=1, submit=opened,
                work=float(np.clip(rng.normal(7 * HOUR, 1.5 * HOUR), HOUR, 11 * HOUR)), scalable=False,
                topology=None, preemptible=False, priority=PriorityClass.STANDARD, cost=0.0, limit_factor=1.0,
                limit_round=HOUR, time_limit=12 * HOUR))

    fixed_today = len(drafts) - 1  # the pre-training run was submitted on day −10
    small_today = JOBS_PER_DAY - fixed_today - FINE_TUNES
    warm_share = _expected_share(DAY - WARMUP_S, DAY)
    periods = (
        ("tue", 0.0, DAY, FINE_TUNES, small_today, True),
        ("mon", -WARMUP_S, 0.0, round(FINE_TUNES * warm_share), round(small_today * warm_share), False),
    )
    for prefix, start, end, n_ft, n_small, measured in periods:
        for i, at in enumerate(_arrivals(rng, n_ft, start, end)):
            team_config = by_name[names[int(rng.choice(len(names), p=activity))]]
            gpus = _choose(rng, FINE_TUNE_GPUS)
            ft_flavour = flavour_for(team_config, FINE_TUNE_H100_SHARE)
            pods = max(1, gpus // 8)
            required = pods > 1 and gpus <= 128 and rng.random() < 0.25
            topology = None if pods == 1 else (Topology(required="block") if required
                                               else Topology(preferred="block"))
            drafts.append(_Draft(
                id=f"{prefix}-ft-{i:04d}", team=team_config.name, kind=JobKind.BATCH, flavour=ft_flavour,
                pods=pods, per_pod=min(gpus, 8), submit=float(at), work=_lognormal(rng, 3 * HOUR, 0.7, 1800, 20 * HOUR),
                scalable=True, topology=topology, preemptible=_preemptible(rng, 0.95, team_config, gpus, ft_flavour),
                priority=PriorityClass.HIGH if rng.random() < 0.1 else PriorityClass.STANDARD,
                cost=10.0 + 40.0 * math.sqrt(gpus / 256) * (0.75 + 0.5 * float(rng.random())),
                limit_factor=1.3 + 1.7 * float(rng.random()), limit_round=HOUR, measured=measured, max_restarts=10))
        for i, at in enumerate(_arrivals(rng, n_small, start, end)):
            team_config = by_name[names[int(rng.choice(len(names), p=activity))]]
            gpus = _choose(rng, SMALL_GPUS)
            draw = float(rng.random())
            priority = PriorityClass.HIGH if draw < 0.1 else PriorityClass.LOW if draw < 0.2 else \
                PriorityClass.STANDARD
            small_flavour = flavour_for(team_config, SMALL_H100_SHARE)
            drafts.append(_Draft(
                id=f"{prefix}-job-{i:04d}", team=team_config.name, kind=JobKind.BATCH, flavour=small_flavour,
                pods=1, per_pod=gpus, submit=float(at), work=_lognormal(rng, 40 * 60, 1.0, 300, 12 * HOUR),
                scalable=True, topology=None, preemptible=_preemptible(rng, 0.85, team_config, gpus, small_flavour),
                priority=priority,
                cost=5.0 + 15.0 * float(rng.random()), limit_factor=1.3 + 1.7 * float(rng.random()),
                limit_round=900.0, measured=measured))

    factors = _calibrate(drafts, capacity)
    jobs = [_finish(d, factors) for d in drafts]
    jobs.sort(key=lambda j: (j.submit_at, j.id))
    notes = (
        f"busy Tuesday, seed {seed}: {sum(j.measured for j in jobs)} jobs submitted on Tuesday, "
        f"{sum(not j.measured for j in jobs)} warm-up jobs from Monday 12:00 (not measured), "
        "the 1,024-GPU pre-training run among them.",
        "run times of fine-tunes and small jobs scaled by "
        + ", ".join(f"{f} ×{k:.2f}" for f, k in sorted(factors.items()))
        + f" so office-hours (09–18) offered load is {TARGET_LOAD:.0%} of each whole-GPU flavour's working "
          "capacity.",
    )
    return Workload(name="tuesday", jobs=tuple(jobs), cluster=cluster, teams=teams, window=(0.0, DAY), notes=notes)


def _office_load(submit: np.ndarray, work: np.ndarray, units: np.ndarray) -> float:
    start, end = OFFICE
    overlap = np.clip(np.minimum(submit + work, end) - np.maximum(submit, start), 0.0, None)
    return float((overlap * units).sum() / (end - start))


def office_hours_load(jobs: list[WorkloadJob] | tuple[WorkloadJob, ...], flavour: str) -> float:
    """Units of ``flavour`` the jobs would keep busy on average over Tuesday's office hours if none waited."""
    chosen = [j for j in jobs if j.spec.flavour[0] == flavour]
    if not chosen:
        return 0.0
    return _office_load(np.array([j.submit_at for j in chosen]), np.array([j.work_s for j in chosen]),
                        np.array([j.units for j in chosen], dtype=float))


def _calibrate(drafts: list[_Draft], capacity: dict[str, int]) -> dict[str, float]:
    """Per whole-GPU flavour, the run-time factor for scalable jobs that makes office-hours load hit the target."""
    factors: dict[str, float] = {}
    for flavour, units in capacity.items():
        if FLAVOURS[flavour].is_mig or units == 0:
            continue
        mine = [d for d in drafts if d.flavour == flavour]
        submit = np.array([d.submit for d in mine])
        work = np.array([d.work for d in mine])
        size = np.array([d.units for d in mine], dtype=float)
        scalable = np.array([d.scalable for d in mine])
        target = TARGET_LOAD * units
        low, high = 0.01, 50.0
        for _ in range(60):
            mid = math.sqrt(low * high)
            load = _office_load(submit, np.where(scalable, work * mid, work), size)
            low, high = (mid, high) if load < target else (low, mid)
        factors[flavour] = math.sqrt(low * high)
    return factors


def _finish(d: _Draft, factors: dict[str, float]) -> WorkloadJob:
    work = d.work * factors.get(d.flavour, 1.0) if d.scalable else d.work
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
                       measured=d.measured, source="tuesday")
