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

import numpy as np

from ...model.cluster import ClusterConfig, capacity_by_flavour
from ...model.flavours import FLAVOURS
from ...model.job import JobKind, PriorityClass, Topology
from ...model.team import TeamsConfig
from . import generator as gen
from .generator import DAY, HOUR, Draft
from .types import Workload, WorkloadJob

__all__ = ["DAY", "HOUR", "busy_tuesday", "office_hours_load"]

WARMUP_S = 12 * HOUR
JOBS_PER_DAY = 5600
NOTEBOOKS = 300
SWEEP_TRIALS = 500
FINE_TUNES = 250
OFFICE = (9 * HOUR, 18 * HOUR)
TARGET_LOAD = 0.93


def busy_tuesday(cluster: ClusterConfig, teams: TeamsConfig, seed: int = 0) -> Workload:
    """The day described in the module docstring, for ``cluster`` and ``teams`` (the reference ones by intent;
    any cluster with H100s works, with the big jobs and the sweep given to whichever teams exist)."""
    rng = np.random.default_rng(seed)
    capacity = capacity_by_flavour(cluster.expand())
    whole = [f for f in capacity if not FLAVOURS[f].is_mig]
    mig = next((f for f in capacity if FLAVOURS[f].is_mig and FLAVOURS[f].units_per_gpu == 7), None)
    who = gen.Teams.draw(rng, teams)
    big_flavour = "h100" if "h100" in capacity else whole[0]
    big_pods = gen.big_pods(capacity, big_flavour)

    # The pre-training run, ten days in: submitted alone before the warm-up so it starts on the empty cluster.
    drafts: list[Draft] = [
        gen.big_run("genai-pretrain-70b", who.big, big_flavour, big_pods, -WARMUP_S - 600.0, 11 * DAY, 14 * DAY,
                    measured=False),
        gen.big_run("genai-1024-morning", who.big, big_flavour, big_pods, 9 * HOUR + float(rng.integers(0, 300)),
                    2 * DAY, 4 * DAY),
        Draft(id="fraud-risk-7b-ft-festive", team=who.fraud, kind=JobKind.BATCH, flavour=big_flavour, pods=4,
              per_pod=8, submit=9.5 * HOUR + float(rng.integers(0, 600)), work=6 * HOUR, scalable=False,
              topology=Topology(required="block"), preemptible=True, priority=PriorityClass.STANDARD, cost=20.0,
              limit_factor=1.0, limit_round=HOUR, time_limit=12 * HOUR, max_restarts=20),
    ]
    # Search's sweep: 500 one-GPU trials within a minute at 10:30.
    drafts += gen.sweep(rng, who.sweep, big_flavour, 10.5 * HOUR, SWEEP_TRIALS, "search-sweep-t")
    # Notebooks: opened mostly 08:30–10:30, kept for a working day; never preempted.
    if mig is not None:
        drafts += gen.notebooks(rng, who, mig, NOTEBOOKS, 0.0, OFFICE, "nb-")

    fixed_today = len(drafts) - 1  # the pre-training run was submitted on day −10
    small_today = JOBS_PER_DAY - fixed_today - FINE_TUNES
    warm_share = gen.expected_share(DAY - WARMUP_S, DAY)
    periods = (
        ("tue", 0.0, DAY, FINE_TUNES, small_today, True),
        ("mon", -WARMUP_S, 0.0, round(FINE_TUNES * warm_share), round(small_today * warm_share), False),
    )
    for prefix, start, end, n_ft, n_small, measured in periods:
        drafts += gen.fine_tunes(rng, who, whole, n_ft, start, end, f"{prefix}-ft-", measured=measured)
        drafts += gen.small_jobs(rng, who, whole, n_small, start, end, f"{prefix}-job-", measured=measured)

    factors = gen.calibrate(drafts, capacity, TARGET_LOAD, OFFICE)
    jobs = [gen.finish(d, factors.get(d.flavour, 1.0), "tuesday") for d in drafts]
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


def office_hours_load(jobs: list[WorkloadJob] | tuple[WorkloadJob, ...], flavour: str,
                      span: tuple[float, float] = OFFICE) -> float:
    """Units of ``flavour`` the jobs would keep busy on average over ``span`` (Tuesday's office hours) if none
    waited."""
    chosen = [j for j in jobs if j.spec.flavour[0] == flavour]
    if not chosen:
        return 0.0
    return gen.span_load(np.array([j.submit_at for j in chosen]), np.array([j.work_s for j in chosen]),
                         np.array([j.units for j in chosen], dtype=float), span)
