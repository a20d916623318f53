"""When a running job is *likely* to give its units back: what estimated starts are planned on.

Reservations and backfill plan on promises: a job ends by its time limit, a signalled one by its grace. Users
read estimated starts, and a plan made of promises is late — most jobs end well before their limits (Slurm's
``squeue --start`` has the same bias). So estimates are planned on a second timeline whose running jobs end when
they are likely to:

* a signalled job (preempted, at its limit, moved): at its deadline, as for reservations;
* a notebook the idle reaper reported idle for at least ``IDLE_TRUST_FRACTION`` of its idle limit: when the
  reaper will free it (last activity + limit) — a notebook left idle that long is seldom picked up again
  before the reaper comes, and a notebook is never stopped otherwise before its limit;
* any other job: after the share of its time limit that its team's recent jobs of its kind used, counting only
  those that ran at least as long as it has so far (``RunTimes.ratio_after``: a job that has outlived most of
  its team's is judged by the ones that ran longer, not by all); with too few of those, the share all of them
  used, and a job already past that is expected to use half of what its limit leaves.

Nothing here may decide anything: only ``stage_explain.Explainer.plan_waits`` reads it.
"""

from __future__ import annotations

from ..model.job import JobKind
from .reservation import job_end
from .snapshot import JobRequest, RunningJob, RunTimes

#: A notebook idle for this share of its idle limit is expected to be reaped at the limit.
IDLE_TRUST_FRACTION = 0.25


def idle_release(job: RunningJob, now: float) -> float | None:
    """When the idle reaper frees ``job`` if it stays idle, when that is to be expected; else ``None``."""
    if job.idle_since is None or job.idle_limit_s is None or job.request.kind is not JobKind.NOTEBOOK:
        return None
    if now - job.idle_since < IDLE_TRUST_FRACTION * job.idle_limit_s:
        return None
    return max(job.idle_since + job.idle_limit_s, now)


def expected_duration(request: JobRequest, runtimes: RunTimes) -> float:
    """How long a job that has not started yet is expected to hold its units."""
    return runtimes.ratio(request.team, request.kind.value) * request.time_limit_s


def expected_end(job: RunningJob, now: float, runtimes: RunTimes) -> float:
    """When ``job``'s units are likely to come back (never after ``job_end``, the promise)."""
    promised = job_end(job, now)
    if job.terminating:
        return promised
    release = idle_release(job, now)
    if release is not None:
        return min(release, promised)
    request = job.request
    after = runtimes.ratio_after(request.team, request.kind.value,
                                 (now - job.started_at) / request.time_limit_s)   # limits are at least a minute
    guess = job.started_at + (after * request.time_limit_s if after is not None
                              else expected_duration(request, runtimes))
    if guess <= now:
        guess = now + (promised - now) / 2
    return min(guess, promised)
