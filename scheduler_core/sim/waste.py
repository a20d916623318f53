"""Which waiting jobs the idle GPUs waited on: ``shoal sim --explain-waste``.

``idle_gpu_hours_while_waiting`` says how much a policy wasted; this says on whose account. After each cycle the
engine hands over, per flavour, the waiting jobs that would fit its idle units by count (the metric's own test,
with the policy's reason and message for each); until the next cycle that flavour's idle GPUs are split evenly
among them. The shares add up to the metric, less the spans in which only jobs submitted since the cycle fitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..policy.decisions import Wait

if TYPE_CHECKING:
    from .records import RunRecord


@dataclass(frozen=True, slots=True)
class Waste:
    """One waiting job's share of the idle GPUs: GPU-seconds, and why it waited (its last fitting wait)."""

    job_id: str
    gpu_s: float
    flavour: str
    reason: str
    message: str


class WasteLedger:
    """Idle GPU-seconds while fitting work waited, split evenly among the jobs that would have fitted them; and
    how long such jobs waited, by "flavour/reason" (``fitting_wait_hours_by_reason``)."""

    def __init__(self, units_per_gpu: Mapping[str, int]) -> None:
        self.units_per_gpu = units_per_gpu
        self.gpu_s: dict[str, float] = {}
        #: Each job's last fitting wait: its flavour and the policy's ``Wait``.
        self.why: dict[str, tuple[str, Wait]] = {}
        self.wait_s: dict[str, float] = {}
        self._shares: list[tuple[str, float]] = []
        self._reasons: set[str] = set()

    def open(self, fitting: Mapping[str, Sequence[tuple[str, Wait]]], idle_units: Mapping[str, int]) -> None:
        """From now until the next ``charge``, ``idle_units`` of each flavour wait on its ``fitting`` jobs
        (each named by its workload id, with its wait)."""
        shares: list[tuple[str, float]] = []
        reasons: set[str] = set()
        why = self.why
        for flavour, waits in fitting.items():
            if not waits:
                continue
            share = max(0, idle_units.get(flavour, 0)) / self.units_per_gpu.get(flavour, 1) / len(waits)
            for job_id, wait in waits:
                shares.append((job_id, share))
                why[job_id] = (flavour, wait)
            reasons.update(f"{flavour}/{reason.value}" for reason in {wait.reason for _, wait in waits})
        self._shares = shares
        self._reasons = reasons

    def charge(self, seconds: float) -> None:
        """The spans opened last lasted ``seconds``."""
        gpu_s = self.gpu_s
        for job_id, share in self._shares:
            gpu_s[job_id] = gpu_s.get(job_id, 0.0) + share * seconds
        for key in self._reasons:
            self.wait_s[key] = self.wait_s.get(key, 0.0) + seconds

    def top(self, count: int) -> list[Waste]:
        """The ``count`` jobs with the largest shares, largest first."""
        ranked = sorted(self.gpu_s.items(), key=lambda item: (-item[1], item[0]))[:count]
        return [Waste(job_id, gpu_s, self.why[job_id][0], self.why[job_id][1].reason.value,
                      self.why[job_id][1].message) for job_id, gpu_s in ranked]


def explain(record: RunRecord, count: int = 20) -> list[dict[str, Any]]:
    """The ``count`` waiting jobs that idle GPUs waited on most, as JSON-ready rows."""
    if record.waste is None:
        return []
    logs = {log.id: log for log in record.jobs}
    rows = []

    def hours(at: float) -> float:
        return round((at - record.window[0]) / 3600, 2)

    for waste in record.waste.top(count):
        log = logs.get(waste.job_id)
        rows.append({
            "job": waste.job_id, "team": log.team if log else None, "kind": log.kind if log else None,
            "gpus": log.gpus if log else None, "submitted_h": hours(log.submitted_at) if log else None,
            # When it ran and why it stopped, so a row's story can be read off the command's own output.
            "admitted_h": [hours(a.at) for a in log.admissions] if log else [],
            "interrupted_h": [[hours(i.at), i.cause] for i in log.interruptions] if log else [],
            "flavour": waste.flavour, "reason": waste.reason, "message": waste.message,
            "idle_gpu_hours": round(waste.gpu_s / 3600, 1)})
    return rows


def explain_markdown(record: RunRecord, count: int = 20) -> str:
    """``explain`` as a Markdown table, with the total it shares out."""
    rows = explain(record, count)
    total = sum(record.waste.gpu_s.values()) / 3600 if record.waste is not None else 0.0
    lines = [f"Idle GPU-hours while fitting work waited, by the waiting jobs that would have fitted them "
             f"({total:,.0f} GPU-h shared out; the top {len(rows)}):", "",
             "| job | team | kind | GPUs | submitted (h) | flavour | reason | idle GPU-h | last message |",
             "|---|---|---|---:|---:|---|---|---:|---|"]
    for row in rows:
        message = str(row["message"]).replace("|", "/")
        lines.append(f"| {row['job']} | {row['team']} | {row['kind']} | {row['gpus']:g} | {row['submitted_h']} "
                     f"| {row['flavour']} | {row['reason']} | {row['idle_gpu_hours']:,.1f} | {message} |")
    return "\n".join(lines)
