"""The figures of a run, computed from its records alone (pure functions; ``summarise`` gathers them).

Definitions (the report repeats them):

* A job's **wait** is submission to its first admission (the scheduler binding it to nodes); pod start-up is
  reported apart (``start_latency_p50_s``). A job never admitted counts as waiting until the run's end.
* Job figures cover the *measured* jobs (submitted inside the workload's window, not warm-up). Cluster figures
  (utilisation, preemptions, GPU-hours lost, placement) cover everything from the window's start to the run's end.
* **utilization_while_waiting**: allocated ÷ healthy GPUs, integrated over the time some pending job of a flavour
  would fit in that flavour's idle units by count (so a reservation that idles GPUs while small jobs wait counts,
  and a big job waiting for a hole it cannot fit does not). Healthy means a ready node outside the hot spares,
  plus spares while they hold a restarted gang. MIG slices count as a seventh of a GPU.
  **utilization_while_waiting_in_window** is the same inside the workload's window only (the day itself, not the
  drain after it); **utilization_while_admissible_waiting** is the same over the spans where such a job waited
  for a reason other than quota (capacity, topology, a reservation, victims leaving), by the policy's own
  reasons; and
  **fitting_wait_hours_by_reason** says, per flavour and reason, how long such jobs waited.
  **idle_gpu_hours_while_waiting** is the waste itself: healthy GPUs left idle over those spans, in GPU-hours.
* **utilization** is allocated ÷ healthy GPUs from the window's start to the run's end, whatever waits;
  **utilization_in_window** the same over the window only — the span ``--load``'s offered load is defined on (a
  trace's long jobs can run for days after its last submission, and that drain is not the load it offered).
* **in_quota**: at submission, the team's allocated plus earlier pending units of the job's flavour, plus the job,
  were within its nominal quota. The same test for every policy, including those that ignore quotas.
* **placement_violations**: admissions of a whole-GPU job of G ≥ one block's GPUs (256 on the reference cluster)
  spread over more than ceil(G / block) blocks: a 256-GPU job outside one block, a 1,024-GPU job over four.
* **gpu_hours_lost**: work done since the last checkpoint and thrown away by a failure or a preemption.
* **eta_error_p50_s** / **eta_error_p90_s**: how far estimated starts were from the truth. For every measured job
  that waited at least 5 minutes, the estimate it was given at submission and the one it held at each hour of its
  first wait, each against its first admission: ``|estimate - start|`` over all those readings (``sim.eta``).
  ``eta_readings`` counts them, ``eta_unknown_readings`` those with no estimate (``easy`` gives one only to its
  reserved job and those behind it, as ``squeue --start``; ``fifo`` and ``kueue`` give none), ``eta_early_share``
  the share that promised a start sooner than it came.
* **fairness_jain**: Jain's index over teams of min(1, used ÷ entitled GPU-hours), where used is what the team's
  measured jobs held inside the window, and entitled the smaller of the team's nominal quota over the window and
  the work its measured jobs asked for in it (a team that asked for less than its quota is owed only what it
  asked for). 1.0: every team got what it was owed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .eta import eta_figures
from .records import JobLog, RunRecord, Series

SMALL_JOB_GPUS = 8
BIG_JOB_GPUS = 1024


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation), or ``None`` for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def _durations(series: Series, since: float, until: float) -> np.ndarray:
    """Seconds each sample holds inside ``[since, until)``."""
    at = np.asarray(series.at, dtype=float)
    if len(at) == 0:
        return at
    ends = np.append(at[1:], max(until, at[-1]))
    held: np.ndarray = np.clip(np.minimum(ends, until) - np.maximum(at, since), 0.0, None)
    return held


def utilization_while_waiting(series: Series, units_per_gpu: dict[str, int], since: float,
                              until: float) -> float | None:
    """Allocated ÷ healthy GPU-seconds over the spans where fitting work of the flavour waited."""
    return _utilization(series, units_per_gpu, since, until, only_fitting=True)


def utilization(series: Series, units_per_gpu: dict[str, int], since: float, until: float) -> float | None:
    """Allocated ÷ healthy GPU-seconds over ``[since, until)``, whatever waits."""
    return _utilization(series, units_per_gpu, since, until, only_fitting=False)


def utilization_while_admissible_waiting(series: Series, units_per_gpu: dict[str, int], since: float,
                                         until: float) -> float | None:
    """The same, counting only the spans where a fitting job waited for a reason other than quota."""
    return _utilization(series, units_per_gpu, since, until, only_fitting=True, column="admissible")


def _utilization(series: Series, units_per_gpu: dict[str, int], since: float, until: float, *,
                 only_fitting: bool, column: str = "fitting") -> float | None:
    dt = _durations(series, since, until)
    allocated = healthy = 0.0
    condition = series.admissible if column == "admissible" else series.fitting
    for flavour in series.flavours:
        weight = dt / units_per_gpu.get(flavour, 1)
        if only_fitting:
            weight = weight * np.asarray(condition[flavour], dtype=float)
        allocated += float((np.asarray(series.allocated[flavour], dtype=float) * weight).sum())
        healthy += float((np.asarray(series.healthy[flavour], dtype=float) * weight).sum())
    return allocated / healthy if healthy else None


def idle_gpu_hours_while_waiting(series: Series, units_per_gpu: dict[str, int], since: float,
                                 until: float) -> float:
    """Healthy GPUs left idle, in GPU-hours, over the spans where fitting work of the flavour waited: the waste
    itself. Unlike the ratio it only falls as waits are removed (a policy that removes the busy-hour waits can
    lower the ratio, whose remaining spans are the quieter hours, while wasting less)."""
    dt = _durations(series, since, until)
    idle = 0.0
    for flavour in series.flavours:
        weight = dt / units_per_gpu.get(flavour, 1) * np.asarray(series.fitting[flavour], dtype=float)
        gap = np.asarray(series.healthy[flavour], dtype=float) - np.asarray(series.allocated[flavour], dtype=float)
        idle += float((np.clip(gap, 0.0, None) * weight).sum())
    return idle / 3600.0


def placement_violations(jobs: Iterable[JobLog], block_gpus: int, since: float) -> int:
    count = 0
    for job in jobs:
        if job.gpus < block_gpus or block_gpus <= 0:
            continue
        allowed = math.ceil(job.gpus / block_gpus - 1e-9)
        count += sum(1 for a in job.admissions if a.at >= since and a.blocks > allowed)
    return count


def jain(values: Sequence[float]) -> float | None:
    if not values:
        return None
    total = sum(values)
    squares = sum(v * v for v in values)
    return (total * total) / (len(values) * squares) if squares else 1.0


def used_gpu_s_by_team(record: RunRecord, since: float, until: float, *,
                       measured_only: bool = True) -> dict[str, float]:
    """GPU-seconds each team's (measured) jobs held in ``[since, until)``, from each admission to the next
    interruption or the end."""
    used: dict[str, float] = {}
    for job in record.jobs:
        if measured_only and not job.measured:
            continue
        for start, end, flavour in holding_spans(job, record.end):
            lo, hi = max(start, since), min(end, until)
            if hi > lo:
                used[job.team] = used.get(job.team, 0.0) + (hi - lo) * job.units / record.units_per_gpu.get(
                    flavour, 1)
    return used


def holding_spans(job: JobLog, end: float) -> list[tuple[float, float, str]]:
    """``(start, end, flavour)`` of each time the job held units."""
    stops = sorted(i.at for i in job.interruptions)
    spans = []
    for admission in job.admissions:
        later = [s for s in stops if s >= admission.at]
        stop = later[0] if later else (job.finished_at if job.finished_at is not None else end)
        if later:
            stops.remove(later[0])
        spans.append((admission.at, max(stop, admission.at), admission.flavour))
    return spans


def fairness(record: RunRecord) -> tuple[float | None, dict[str, tuple[float, float]]]:
    """Jain's index as defined above, and per team (used, entitled) GPU-hours."""
    start, stop = record.window
    until = max(stop, start + 1.0)
    span = until - start
    used = used_gpu_s_by_team(record, start, until)
    asked: dict[str, float] = {}
    for job in record.jobs:
        if job.measured:
            run = min(job.work_s, max(until - job.submitted_at, 0.0))
            asked[job.team] = asked.get(job.team, 0.0) + run * job.gpus
    per_team: dict[str, tuple[float, float]] = {}
    shares = []
    for team, quotas in sorted(record.quotas.items()):
        nominal = sum(units / record.units_per_gpu.get(f, 1) for f, units in quotas.items()) * span
        entitled = min(nominal, asked.get(team, 0.0))
        per_team[team] = (used.get(team, 0.0) / 3600.0, entitled / 3600.0)
        if entitled > 0:
            shares.append(min(1.0, used.get(team, 0.0) / entitled))
    return jain(shares), per_team


def summarise(record: RunRecord) -> dict[str, Any]:
    """Every figure of the run, as ``shoal sim --json`` prints it."""
    start = record.window[0]
    measured = [job for job in record.jobs if job.measured]
    waits = [job.wait_s(record.end) for job in measured]
    small = [job.wait_s(record.end) for job in measured if job.gpus <= SMALL_JOB_GPUS]
    in_quota = [job.wait_s(record.end) for job in measured if job.in_quota]
    big = [job.wait_s(record.end) for job in measured if job.gpus >= BIG_JOB_GPUS]
    startup = [job.running_at - job.admissions[0].at for job in measured
               if job.running_at is not None and job.admissions]
    finished = [job.finished_at - job.submitted_at for job in measured
                if job.finished_at is not None and job.final_state == "SUCCEEDED"]
    interruptions = [i for job in record.jobs for i in job.interruptions if i.at >= start]
    lost = sum(i.lost_gpu_s for i in interruptions if i.cause in ("preemption", "failure"))
    jain_index, _ = fairness(record)
    return {
        "workload": record.workload,
        "policy": record.policy,
        "seed": record.seed,
        "jobs": len(measured),
        "jobs_finished": sum(1 for job in measured if job.final_state == "SUCCEEDED"),
        "jobs_never_started": sum(1 for job in measured if not job.admissions),
        "utilization_while_waiting": _round(utilization_while_waiting(record.series, record.units_per_gpu, start,
                                                                      record.end), 4),
        "utilization_while_waiting_in_window": _round(utilization_while_waiting(
            record.series, record.units_per_gpu, start, record.window[1]), 4),
        "utilization_while_admissible_waiting": _round(utilization_while_admissible_waiting(
            record.series, record.units_per_gpu, start, record.end), 4),
        "idle_gpu_hours_while_waiting": _round(idle_gpu_hours_while_waiting(
            record.series, record.units_per_gpu, start, record.end), 1),
        "fitting_wait_hours_by_reason": {key: round(value / 3600.0, 1) for key, value in
                                         sorted(record.fitting_wait_s.items(), key=lambda kv: -kv[1])},
        "utilization": _round(utilization(record.series, record.units_per_gpu, start, record.end), 4),
        "utilization_in_window": _round(utilization(record.series, record.units_per_gpu, start,
                                                    max(record.window[1], start + 1.0)), 4),
        "wait_p50_s": _round(percentile(waits, 50), 1),
        "wait_p99_s": _round(percentile(waits, 99), 1),
        "small_job_wait_p50_s": _round(percentile(small, 50), 1),
        "in_quota_jobs": len(in_quota),
        "in_quota_wait_p99_s": _round(percentile(in_quota, 99), 1),
        "big_jobs": len(big),
        "big_job_start_s": _round(max(big), 1) if big else None,
        "placement_violations": placement_violations(record.jobs, record.block_gpus, start),
        "preemptions": sum(1 for i in interruptions if i.cause == "preemption"),
        "signals_by_reason": dict(sorted(getattr(record, "preempt_reasons", {}).items())),
        "failure_restarts": sum(1 for i in interruptions if i.cause == "failure"),
        "node_failures": record.node_failures,
        "gpu_hours_lost": _round(lost / 3600.0, 1),
        "mean_jct_s": _round(sum(finished) / len(finished), 1) if finished else None,
        "fairness_jain": _round(jain_index, 4),
        **eta_figures([(job.submitted_at, job.first_admitted_at, job.eta_readings) for job in measured]).as_dict(),
        "start_latency_p50_s": _round(percentile(startup, 50), 1),
        "simulated_s": _round(record.end - start, 0),
        "cycles": record.cycles,
        "wall_s": _round(record.wall_s, 1),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
