"""A festive week on the reference cluster: seven days of the festive-sale rush that tests the hardest promise.

After the reference document's festive-sale rush (virtual time 0 is Monday 00:00; figures cover the week,
``window = (0, 7 days)``):

* **demand**: every day's office hours (09–18) offer 100–110 % of each whole-GPU flavour's working capacity (the
  day's share drawn per seed, run times of fine-tunes and small jobs scaled day by day, found by bisection), with
  the Tuesday's mix: 250 fine-tunes of 8–256 GPUs and 3,000 small jobs of 1–8 GPUs a day on the daily profile,
  ~300 notebooks a day on MIG slices (opened mostly 08:30–10:30, kept for a working day, never preempted);
* **a 1,024-GPU job submitted every day** between 09:00 and 11:00 — into a full cluster — by GenAI, 8–14 h of work;
* GenAI's **ten-day pre-training run** on 1,024 H100s, submitted before the warm-up (not measured), under the
  engine's node failures at the Llama 3 rate;
* search's **500-trial sweep** within a minute at 10:30 on Tuesday;
* the **fraud team's fine-tune surge** mid-week (Wednesday and Thursday, 09:00–14:00): 12 fine-tunes a day of
  16–128 GPUs, high priority, each inside one block — past its 256-GPU quota, so it borrows;
* **the inference fleet lends at night**: its own block of 32 H100 nodes (256 GPUs) joins the cluster and the
  cohort as the team ``inference`` (nominal 256, lends all of it, borrows nothing). Eight serving replicas (one
  node each) run all week; 24 more run each day from the reclaim to the night scale-down (23:30–00:30). The
  reclaim comes 30–60 min before the 07:00 morning ramp — each replica submitted between 06:00 and 06:30, in the
  **critical band** (priority ``critical``, non-preemptible, within the fleet's nominal quota), so at night its 192
  idle GPUs are lent to the cohort and every morning the borrowers on them are preempted to checkpoint. Replicas
  are quota, not pinned nodes: a reclaim may take any H100 node a borrower holds.
* **the night queue**: each evening 20:00–23:00 teams submit preemptible evaluations and fine-tunes (8–64
  H100s, ending between 06:30 and 08:30, past the reclaim) until the night (01:00–06:00) offers the reference
  H100s plus the fleet's 192 lent GPUs, so the lent GPUs are borrowed and the reclaim has borrowers to preempt;
* warm-up: Sunday from 12:00 has Monday's kind of traffic and Sunday night's queue (not measured).

``days`` shortens the week for tests (the surge then falls on the middle days there are). Every draw comes from
``numpy.random.default_rng(seed)``: one seed, one week.
"""

from __future__ import annotations

import numpy as np

from ...model.cluster import ClusterConfig, capacity_by_flavour
from ...model.flavours import FLAVOURS
from ...model.job import JobKind, PriorityClass, Topology
from ...model.team import Quota, TeamConfig, TeamsConfig
from . import generator as gen
from .generator import DAY, HOUR, Draft
from .types import Workload

WARMUP_S = 12 * HOUR
SMALL_PER_DAY = 3000
FINE_TUNES_PER_DAY = 250
NOTEBOOKS_PER_DAY = 300
SWEEP_TRIALS = 500
OFFICE = (9 * HOUR, 18 * HOUR)
DEMAND = (1.00, 1.10)
SURGE_PER_DAY = 12
SURGE_GPUS = ((16, 0.2), (32, 0.4), (64, 0.3), (128, 0.1))
INFERENCE_TEAM = "inference"
INFERENCE_NODES = 32
ALWAYS_ON = 8
#: The morning ramp starts at 07:00 (the daily profile); replicas come back 30–60 min before it.
RAMP = 7 * HOUR
RECLAIM = (RAMP - HOUR, RAMP - 0.5 * HOUR)
SCALE_DOWN = (23.5 * HOUR, 24.5 * HOUR)
#: The night queue: evaluations and fine-tunes submitted 20:00–23:00 to run overnight (ending 06:30–08:30), enough to
#: keep the reference H100s and the fleet's lent GPUs full over 01:00–06:00.
NIGHT_SUBMIT = (20 * HOUR, 23 * HOUR)
NIGHT_SPAN = (1 * HOUR, 6 * HOUR)
NIGHT_END = (6.5 * HOUR, 8.5 * HOUR)
NIGHT_GPUS = ((8, 0.4), (16, 0.3), (32, 0.2), (64, 0.1))


def surge_days(days: int) -> list[int]:
    """Wednesday and Thursday of a week; the middle day(s) of a shorter run."""
    return sorted({d for d in (days // 2 - 1, (days - 1) // 2) if d >= 0})


def with_inference_fleet(cluster: ClusterConfig, teams: TeamsConfig) -> tuple[ClusterConfig, TeamsConfig]:
    """``cluster`` plus the inference fleet's block, ``teams`` plus the fleet as a lending team of the cohort."""
    blocks = [{**b.model_dump(), "gpu": None} for b in cluster.blocks]
    blocks.append({"name": "inference-b00", "gpu": "h100", "nodes": INFERENCE_NODES, "nodes_per_leaf": 8,
                   "spares": 0})
    grown = ClusterConfig.model_validate({
        "name": f"{cluster.name}-festive"[:63], "blocks": blocks,
        "description": f"{cluster.name} and the inference fleet's {INFERENCE_NODES} H100 nodes, lent at night"})
    gpus = INFERENCE_NODES * 8
    fleet = TeamConfig(name=INFERENCE_TEAM, cohort=teams.teams[0].cohort, weight=1.0,
                       quotas={"h100": Quota(nominal=gpus, borrowing_limit=0, lending_limit=gpus)})
    return grown, TeamsConfig(teams=[*teams.teams, fleet])


def festive_week(cluster: ClusterConfig, teams: TeamsConfig, seed: int = 0, days: int = 7) -> Workload:
    """The week of the module docstring on ``cluster`` (the reference one by intent; any with H100s works)."""
    if not 1 <= days <= 14:
        raise ValueError(f"a festive run is 1 to 14 days, got {days}")
    if INFERENCE_TEAM in teams.by_name():
        raise ValueError(f"the teams already have a team named {INFERENCE_TEAM!r}")
    rng = np.random.default_rng(seed)
    capacity = capacity_by_flavour(cluster.expand())
    if "h100" not in capacity:
        raise ValueError("the festive week needs a cluster with H100s")
    whole = [f for f in capacity if not FLAVOURS[f].is_mig]
    mig = next((f for f in capacity if FLAVOURS[f].is_mig and FLAVOURS[f].units_per_gpu == 7), None)
    who = gen.Teams.draw(rng, teams)
    pods = gen.big_pods(capacity, "h100")
    targets = [float(t) for t in rng.uniform(*DEMAND, size=days)]

    drafts: list[Draft] = [gen.big_run("genai-pretrain-llama", who.big, "h100", pods, -WARMUP_S - 600.0, 10 * DAY,
                                       14 * DAY, measured=False)]
    for d in range(days):
        submit = d * DAY + 9 * HOUR + float(rng.integers(0, 2 * 3600))
        drafts.append(gen.big_run(f"genai-1024-d{d}", who.big, "h100", pods, submit,
                                  float(rng.uniform(8 * HOUR, 14 * HOUR)), 2 * DAY))
    sweep_day = min(1, days - 1)
    drafts += gen.sweep(rng, who.sweep, "h100", sweep_day * DAY + 10.5 * HOUR, SWEEP_TRIALS, "search-sweep-t")
    surge = surge_days(days)
    warm_share = gen.expected_share(DAY - WARMUP_S, DAY)
    for d in range(-1, days):
        start, end = (-WARMUP_S, 0.0) if d < 0 else (d * DAY, (d + 1) * DAY)
        n_ft = round(FINE_TUNES_PER_DAY * (warm_share if d < 0 else 1.0))
        n_small = round(SMALL_PER_DAY * (warm_share if d < 0 else 1.0))
        tag = "warm" if d < 0 else f"d{d}"
        if mig is not None and d >= 0:
            drafts += gen.notebooks(rng, who, mig, NOTEBOOKS_PER_DAY, d * DAY, OFFICE, f"nb-{tag}-")
        drafts += gen.fine_tunes(rng, who, whole, n_ft, start, end, f"{tag}-ft-", measured=d >= 0)
        drafts += gen.small_jobs(rng, who, whole, n_small, start, end, f"{tag}-job-", measured=d >= 0)
        if d in surge:
            drafts += _surge(rng, who.fraud, d)
    factors = _calibrate(drafts, capacity, targets, days)
    for night in range(-1, days - 1):
        drafts += _night_queue(rng, who, drafts, factors, capacity["h100"], night, days)
    drafts += _inference(rng, days)

    jobs = [gen.finish(d, factors[_day_of(d, days)].get(d.flavour, 1.0), "festive") for d in drafts]
    jobs.sort(key=lambda j: (j.submit_at, j.id))
    grown, fleet = with_inference_fleet(cluster, teams)
    notes = (
        f"festive week, seed {seed}: {days} days, {sum(j.measured for j in jobs)} jobs submitted in them, "
        f"{sum(not j.measured for j in jobs)} warm-up jobs from the day before 12:00 (not measured), the ten-day "
        "1,024-GPU pre-training run among them; a 1,024-GPU job each day between 09:00 and 11:00.",
        "office-hours (09–18) offered load per day, of each whole-GPU flavour's working capacity: "
        + ", ".join(f"day {d} {t:.0%}" for d, t in enumerate(targets))
        + "; fine-tune and small-job run times scaled per day and flavour by "
        + "; ".join(f"day {d} " + ", ".join(f"{f} ×{k:.2f}" for f, k in sorted(factors[d].items()))
                    for d in range(days)) + ".",
        f"fraud-ml's surge on day(s) {', '.join(map(str, surge))}: {SURGE_PER_DAY} fine-tunes of 16–128 GPUs a "
        "day, 09:00–14:00.",
        "a night queue each evening 20:00–23:00 (preemptible, 8–64 H100s, ending 06:30–08:30) fills 01:00–06:00 "
        "to the reference H100s plus the fleet's lent GPUs.",
        f"the inference fleet ({INFERENCE_NODES} H100 nodes, team {INFERENCE_TEAM!r}, nominal {INFERENCE_NODES * 8},"
        f" lends all of it): {ALWAYS_ON} replicas all week, {INFERENCE_NODES - ALWAYS_ON} more each day from a "
        "critical-band reclaim at 06:00–06:30 (30–60 min before the 07:00 ramp) to a 23:30–00:30 scale-down.",
    )
    return Workload(name="festive", jobs=tuple(jobs), cluster=grown, teams=fleet, window=(0.0, days * DAY),
                    notes=notes)


def _day_of(draft: Draft, days: int) -> int:
    return min(max(int(draft.submit // DAY), 0), days - 1)


def _calibrate(drafts: list[Draft], capacity: dict[str, int], targets: list[float],
               days: int) -> list[dict[str, float]]:
    """Day by day: the factor for that day's scalable drafts (the warm-up counts with Monday) that makes its
    office hours offer its target, earlier days' work already scaled."""
    factors: list[dict[str, float]] = []
    for d in range(days):
        def scaled(draft: Draft, d: int = d) -> bool:
            return draft.scalable and _day_of(draft, days) == d

        def earlier(draft: Draft) -> float:
            day = _day_of(draft, days)
            return factors[day].get(draft.flavour, 1.0) if draft.scalable and day < len(factors) else 1.0

        span = (d * DAY + OFFICE[0], d * DAY + OFFICE[1])
        factors.append(gen.calibrate(drafts, capacity, targets[d], span, scaled=scaled, factor_of=earlier))
    return factors


def _night_queue(rng: np.random.Generator, who: gen.Teams, drafts: list[Draft], factors: list[dict[str, float]],
                 h100: int, day: int, days: int) -> list[Draft]:
    """Preemptible overnight H100 work submitted on the evening of ``day``, drawn until the night after it
    (01:00–06:00, office-day work already scaled) offers the reference H100s plus what the fleet lends: with
    the cohort's own work only, half the cluster idles at night and nobody borrows the fleet's GPUs. Each job
    ends by 08:30 if it never waits, so the office hours' calibration is untouched."""
    span = ((day + 1) * DAY + NIGHT_SPAN[0], (day + 1) * DAY + NIGHT_SPAN[1])
    mine = [d for d in drafts if d.flavour == "h100"]
    work = np.array([d.work * (factors[_day_of(d, days)].get("h100", 1.0) if d.scalable else 1.0) for d in mine])
    load = gen.span_load(np.array([d.submit for d in mine]), work, np.array([d.units for d in mine], dtype=float),
                         span)
    goal = h100 + (INFERENCE_NODES - ALWAYS_ON) * 8
    out: list[Draft] = []
    while load < goal and len(out) < 2000:
        team = who.pick(rng)
        gpus = gen.choose(rng, NIGHT_GPUS)
        at = day * DAY + float(rng.uniform(*NIGHT_SUBMIT))
        run = (day + 1) * DAY + float(rng.uniform(*NIGHT_END)) - at
        pods = max(1, gpus // 8)
        out.append(Draft(
            id=f"night-{'warm' if day < 0 else f'd{day}'}-{len(out):03d}", team=team.name, kind=JobKind.BATCH,
            flavour="h100", pods=pods, per_pod=min(gpus, 8), submit=at, work=run, scalable=False,
            topology=Topology(preferred="block") if pods > 1 else None, preemptible=True,
            priority=PriorityClass.STANDARD, cost=10.0 + 20.0 * float(rng.random()), limit_factor=1.5,
            limit_round=HOUR, measured=day >= 0))
        load += gpus * max(min(at + run, span[1]) - max(at, span[0]), 0.0) / (span[1] - span[0])
    return out


def _surge(rng: np.random.Generator, team: str, day: int) -> list[Draft]:
    out = []
    for i, at in enumerate(np.sort(rng.uniform(day * DAY + 9 * HOUR, day * DAY + 14 * HOUR, SURGE_PER_DAY))):
        gpus = gen.choose(rng, SURGE_GPUS)
        pods = gpus // 8
        topology = Topology(required="block")
        out.append(Draft(
            id=f"fraud-surge-d{day}-{i:02d}", team=team, kind=JobKind.BATCH, flavour="h100", pods=pods, per_pod=8,
            submit=float(at), work=gen.lognormal(rng, 4 * HOUR, 0.5, HOUR, 12 * HOUR), scalable=False,
            topology=topology, preemptible=True, priority=PriorityClass.HIGH, cost=20.0 + 10.0 * float(rng.random()),
            limit_factor=1.5, limit_round=HOUR, max_restarts=20))
    return out


def _replica(job_id: str, submit: float, end: float, measured: bool) -> Draft:
    return Draft(id=job_id, team=INFERENCE_TEAM, kind=JobKind.BATCH, flavour="h100", pods=1, per_pod=8,
                 submit=submit, work=end - submit, scalable=False, topology=None, preemptible=False,
                 priority=PriorityClass.CRITICAL, cost=0.0, limit_factor=1.0, limit_round=HOUR,
                 time_limit=min(60 * DAY, end - submit + 2 * HOUR), measured=measured)


def _inference(rng: np.random.Generator, days: int) -> list[Draft]:
    """The serving fleet's replicas: always-on ones, and each day's from the morning reclaim to the night."""
    week_end = days * DAY + DAY
    out = [_replica(f"inference-base-{i}", -WARMUP_S - 300.0, week_end, False) for i in range(ALWAYS_ON)]
    daily = INFERENCE_NODES - ALWAYS_ON
    for d in range(-1, days):
        ups = np.sort(rng.uniform(*RECLAIM, daily)) + d * DAY
        downs = rng.uniform(*SCALE_DOWN, daily) + d * DAY
        for i, (up, down) in enumerate(zip(ups, downs)):
            submit = -WARMUP_S if d < 0 else float(up)
            out.append(_replica(f"inference-d{d}-{i:02d}" if d >= 0 else f"inference-warm-{i:02d}", submit,
                                float(down), d >= 0))
    return out
