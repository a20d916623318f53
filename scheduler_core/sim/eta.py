"""Estimated starts as a measured quantity: what a waiting job was told, against when it started.

A user reads a pending job's estimated start when they submit it and again now and then while it waits; the
figure that matters is how far those readings were from the truth. For every measured job whose first wait
(submission to first admission, as ``metrics`` defines a wait) lasted at least ``MIN_WAIT_S``, the recorder keeps
the estimate the job was given at submission (the first the policy gave it: a plan made on a cadence names a
new job within seconds) and the one it held at each whole hour of its wait after that. The error of a reading
is ``|estimated - actual first admission|``; ``eta_error_p50_s`` and ``eta_error_p90_s`` are taken over all
readings of all such jobs, so a job that waits five hours counts six times, as a user checking every hour
would. A reading with no estimate ("no start in sight") has no error: it is counted in
``eta_unknown_readings``, beside the readings that had one. Policies that give no estimates (``fifo``,
``kueue``) report ``None``.

Only the first wait is measured: a preempted job's second wait starts from a state the user did not submit
into, and the requirement is about submissions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..policy.decisions import Reason

#: Jobs that waited less than this are not measured: their estimate was "now" and right.
MIN_WAIT_S = 300.0
#: Readings after the first, one per this much of the wait.
READING_EVERY_S = 3600.0


@dataclass(slots=True)
class EtaReadings:
    """The estimates one job held during its first wait: ``(at, estimate, reason)``, the first at submission,
    then one per hour. ``done``: the job has been admitted once; later waits are not read."""

    submitted_at: float
    readings: list[tuple[float, float | None, str]] = field(default_factory=list)
    next_at: float | None = None
    done: bool = False

    def due(self, now: float) -> bool:
        """Whether a reading may be taken at ``now``: the job still waits its first wait, and it has no reading
        yet or the next hour's has come."""
        return not self.done and (self.next_at is None or now >= self.next_at)

    def observe(self, now: float, estimate: float | None, reason: str = "") -> None:
        """Called with the job's estimate (and reason) each time the policy explains its wait."""
        if not self.due(now):
            return
        if self.next_at is None:
            if estimate is None and now - self.submitted_at < READING_EVERY_S:
                return                   # the plan has not reached it yet; the first real answer is its reading
            self.readings.append((now, estimate, reason))
            self.next_at = self.submitted_at + READING_EVERY_S * (1 + (now - self.submitted_at) // READING_EVERY_S)
            return
        self.readings.append((now, estimate, reason))
        self.next_at += READING_EVERY_S * (1 + (now - self.next_at) // READING_EVERY_S)


class EtaRecorder:
    """The readings of every job, fed by the store's ``set_waits`` and ``bind`` (see ``RecordingStore``)."""

    def __init__(self) -> None:
        self.jobs: dict[str, EtaReadings] = {}

    def submitted(self, job_id: str, at: float, into: list[tuple[float, float | None, str]]) -> None:
        """Start reading ``job_id``'s estimates into ``into`` (its ``JobLog.eta_readings``)."""
        self.jobs[job_id] = EtaReadings(submitted_at=at, readings=into)

    def waits(self, waits: Iterable[tuple[str, Reason, str, int, float | None]], now: float) -> None:
        """A pass's waits as the store receives them (``Store.set_waits``): job id, reason, message, position,
        estimate. Every pending job is in every pass's waits and few are due a reading, so those that are not are
        passed over before anything else is looked at (a long queue's replay calls this for each of its jobs)."""
        jobs = self.jobs
        for wait in waits:
            readings = jobs.get(wait[0])
            if readings is not None and readings.due(now):
                readings.observe(now, wait[4], wait[1].value)

    def admitted(self, job_id: str) -> None:
        readings = self.jobs.pop(job_id, None)
        if readings is not None:
            readings.done = True


@dataclass(frozen=True, slots=True)
class EtaFigures:
    jobs: int
    readings: int
    unknown: int
    p50_s: float | None
    p90_s: float | None
    early_share: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"eta_jobs": self.jobs, "eta_readings": self.readings, "eta_unknown_readings": self.unknown,
                "eta_error_p50_s": self.p50_s, "eta_error_p90_s": self.p90_s,
                "eta_early_share": self.early_share}


def eta_figures(jobs: Sequence[tuple[float, float | None, Sequence[tuple[float, float | None, str]]]]) -> EtaFigures:
    """From ``(submitted_at, first admitted at or None, readings)`` per measured job. ``early_share``: of the
    readings with an estimate, the share that promised a start earlier than the real one (a user waits
    longer than told)."""
    errors: list[float] = []
    early = 0
    counted = unknown = 0
    for submitted_at, started_at, readings in jobs:
        if started_at is None or started_at - submitted_at < MIN_WAIT_S:
            continue
        taken = [(at, est) for at, est, _ in readings if at < started_at]
        if not taken:
            continue
        counted += 1
        for _, estimate in taken:
            if estimate is None:
                unknown += 1
                continue
            errors.append(abs(estimate - started_at))
            early += estimate < started_at
    if not errors:
        return EtaFigures(counted, len(errors) + unknown, unknown, None, None, None)
    values = np.asarray(errors, dtype=float)
    return EtaFigures(counted, len(errors) + unknown, unknown, round(float(np.percentile(values, 50)), 1),
                      round(float(np.percentile(values, 90)), 1), round(early / len(errors), 4))
