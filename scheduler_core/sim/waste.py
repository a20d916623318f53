"""Which waiting jobs the idle GPUs waited on, and what held them: ``shoal sim --explain-waste``.

``idle_gpu_hours_while_waiting`` says how much a policy wasted; this says on whose account, two ways.

*By waiting job*: after each cycle the engine hands over, per flavour, the waiting jobs that would fit its idle
units by count (the metric's own test, with the policy's reason and message for each); until the next cycle that
flavour's idle GPUs are split evenly among them. The shares add up to the metric, less the spans in which only
jobs submitted since the cycle fitted. An even split names who waited, not why the GPUs stayed idle: a 2-GPU job
held back by its quota is charged its share of a block held for a gang.

*By holder*: the same idle GPUs, split by what kept them idle (:class:`Holder`): units on nodes the cycle reserved
for a job (charged to that job and the reason it waited for then), idle whole nodes nobody reserved, and idle units
of nodes partly in use. Reserved nodes are what reservations held, which is not always what they cost: the
nodes of a job held back by quota may have had no other taker (docs/BENCHMARKS.md, session 26). Idle whole nodes
nobody reserved wait beside work held back by something other than room (quota, mostly); partly used ones are
fragmentation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
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


class Holder(StrEnum):
    """What kept idle units idle while fitting work waited."""

    RESERVED = "held for reservations"
    WHOLE_NODES = "idle whole nodes, not reserved"
    PARTLY_USED = "idle units of partly used nodes, not reserved"


@dataclass(frozen=True, slots=True)
class Held:
    """Idle units of one flavour kept by one holder until the next cycle; ``job_id``: the reserved job
    (workload id), for :attr:`Holder.RESERVED` only."""

    flavour: str
    holder: Holder
    units: int
    job_id: str | None = None


class WasteLedger:
    """Idle GPU-seconds while fitting work waited, split evenly among the jobs that would have fitted them, each
    job's share also by the reason it waited for at the time (``by_reason``); and how long such jobs waited, by
    "flavour/reason" (``fitting_wait_hours_by_reason``)."""

    def __init__(self, units_per_gpu: Mapping[str, int], *, explain: bool = True) -> None:
        """``explain``: keep the split by job and by holder as well (``--explain-waste``); without it only the
        wait hours by reason are kept, and a replay of a long queue does not pay for a share per waiting job."""
        self.units_per_gpu = units_per_gpu
        self.explains = explain
        #: Each job's share by the reason it waited for while it accrued: a job's last reason alone misnames
        #: a wait spent mostly on another (a gang that waited an hour for capacity, then 40 s for its victims).
        self.by_reason: dict[str, dict[str, float]] = {}
        #: Each job's last fitting wait: its flavour and the policy's ``Wait``.
        self.why: dict[str, tuple[str, Wait]] = {}
        self.wait_s: dict[str, float] = {}
        self._shares: list[tuple[str, str, float]] = []
        self._reasons: set[str] = set()
        #: GPU-seconds by holder, and by reserved job and the reason it waited for then (a job may hold nodes
        #: first for capacity, then for its victims to leave), with the flavour and the last wait of each.
        self.held_s: dict[Holder, float] = {}
        self.reserved_s: dict[tuple[str, str], float] = {}
        self.reserved_why: dict[tuple[str, str], tuple[str, Wait]] = {}
        self._held: list[tuple[Holder, tuple[str, str] | None, float]] = []

    def open(self, fitting: Mapping[str, Sequence[tuple[str, Wait]]], idle_units: Mapping[str, int]) -> None:
        """From now until the next ``charge``, ``idle_units`` of each flavour wait on its ``fitting`` jobs
        (each named by its workload id, with its wait)."""
        shares: list[tuple[str, str, float]] = []
        reasons: set[str] = set()
        why = self.why
        for flavour, waits in fitting.items():
            if not waits:
                continue
            reasons.update(f"{flavour}/{reason.value}" for reason in {wait.reason for _, wait in waits})
            if not self.explains:
                continue
            share = max(0, idle_units.get(flavour, 0)) / self.units_per_gpu.get(flavour, 1) / len(waits)
            for job_id, wait in waits:
                shares.append((job_id, wait.reason.value, share))
                why[job_id] = (flavour, wait)
        self._shares = shares
        self._reasons = reasons
        self._held = []

    def hold(self, held: Sequence[Held], waits: Mapping[str, tuple[str, Wait]]) -> None:
        """After ``open``: from now until the next ``charge``, these idle units are kept by these holders;
        ``waits``: each reserved job's flavour and wait, by workload id."""
        self._held = []
        for h in held:
            key = None
            if h.job_id is not None:
                why = waits.get(h.job_id)
                key = (h.job_id, why[1].reason.value if why else "")
                if why is not None:
                    self.reserved_why[key] = why
            self._held.append((h.holder, key, h.units / self.units_per_gpu.get(h.flavour, 1)))

    def charge(self, seconds: float) -> None:
        """The spans opened last lasted ``seconds``."""
        by_reason = self.by_reason
        for job_id, reason, share in self._shares:
            split = by_reason.setdefault(job_id, {})
            split[reason] = split.get(reason, 0.0) + share * seconds
        for key in self._reasons:
            self.wait_s[key] = self.wait_s.get(key, 0.0) + seconds
        for holder, reserved_for, gpus in self._held:
            self.held_s[holder] = self.held_s.get(holder, 0.0) + gpus * seconds
            if reserved_for is not None:
                self.reserved_s[reserved_for] = self.reserved_s.get(reserved_for, 0.0) + gpus * seconds

    @property
    def gpu_s(self) -> dict[str, float]:
        """Each job's whole share, GPU-seconds."""
        return {job_id: sum(split.values()) for job_id, split in self.by_reason.items()}

    def top(self, count: int) -> list[Waste]:
        """The ``count`` jobs with the largest shares, largest first."""
        ranked = sorted(self.gpu_s.items(), key=lambda item: (-item[1], item[0]))[:count]
        return [Waste(job_id, gpu_s, self.why[job_id][0], self.why[job_id][1].reason.value,
                      self.why[job_id][1].message) for job_id, gpu_s in ranked]


def _explained(record: RunRecord) -> WasteLedger | None:
    """The run's ledger, which must have kept the splits (``SimConfig.explain_waste``)."""
    if record.waste is not None and not record.waste.explains:
        raise ValueError("this run did not split its idle GPUs: simulate it with SimConfig(explain_waste=True)")
    return record.waste


def explain(record: RunRecord, count: int = 20) -> list[dict[str, Any]]:
    """The ``count`` waiting jobs that idle GPUs waited on most, as JSON-ready rows."""
    ledger = _explained(record)
    if ledger is None:
        return []
    logs = {log.id: log for log in record.jobs}
    rows = []

    def hours(at: float) -> float:
        return round((at - record.window[0]) / 3600, 2)

    for waste in ledger.top(count):
        log = logs.get(waste.job_id)
        rows.append({
            "job": waste.job_id, "team": log.team if log else None, "kind": log.kind if log else None,
            "gpus": log.gpus if log else None, "submitted_h": hours(log.submitted_at) if log else None,
            # When it ran and why it stopped, so a row's story can be read off the command's own output.
            "admitted_h": [hours(a.at) for a in log.admissions] if log else [],
            "interrupted_h": [[hours(i.at), i.cause] for i in log.interruptions] if log else [],
            "flavour": waste.flavour, "reason": waste.reason, "message": waste.message,
            "idle_gpu_hours": round(waste.gpu_s / 3600, 1),
            "idle_gpu_hours_by_reason": {reason: round(gpu_s / 3600, 1) for reason, gpu_s in sorted(
                ledger.by_reason.get(waste.job_id, {}).items(), key=lambda item: (-item[1], item[0]))}})
    return rows


def explain_holders(record: RunRecord, count: int = 20) -> dict[str, Any]:
    """The idle GPU-hours by what held them, and the ``count`` reservations that held the most, as JSON-ready
    rows: one per job and reason, so a job that held nodes for capacity and then for its victims shows both."""
    ledger = _explained(record)
    if ledger is None:
        return {"by_holder": {}, "reservations": []}
    logs = {log.id: log for log in record.jobs}
    ranked = sorted(ledger.reserved_s.items(), key=lambda item: (-item[1], item[0]))[:count]
    rows = []
    for (job_id, reason), gpu_s in ranked:
        log = logs.get(job_id)
        why = ledger.reserved_why.get((job_id, reason))
        rows.append({"job": job_id, "team": log.team if log else None, "gpus": log.gpus if log else None,
                     "flavour": why[0] if why else None, "reason": reason or None,
                     "message": why[1].message if why else "", "idle_gpu_hours": round(gpu_s / 3600, 1)})
    return {"by_holder": {holder.value: round(ledger.held_s.get(holder, 0.0) / 3600, 1) for holder in Holder},
            "reservations": rows}


def explain_markdown(record: RunRecord, count: int = 20) -> str:
    """``explain`` as a Markdown table, with the total it shares out."""
    rows = explain(record, count)
    total = sum(record.waste.gpu_s.values()) / 3600 if record.waste is not None else 0.0
    lines = [f"Idle GPU-hours while fitting work waited, by the waiting jobs that would have fitted them "
             f"({total:,.0f} GPU-h shared out; the top {len(rows)}):", "",
             "| job | team | kind | GPUs | submitted (h) | flavour | last reason | idle GPU-h | by reason "
             "| last message |",
             "|---|---|---|---:|---:|---|---|---:|---|---|"]
    for row in rows:
        message = str(row["message"]).replace("|", "/")
        split = ", ".join(f"{reason} {hours:,.1f}" for reason, hours in row["idle_gpu_hours_by_reason"].items())
        lines.append(f"| {row['job']} | {row['team']} | {row['kind']} | {row['gpus']:g} | {row['submitted_h']} "
                     f"| {row['flavour']} | {row['reason']} | {row['idle_gpu_hours']:,.1f} | {split} | {message} |")
    held = explain_holders(record, count)
    lines += ["", "The same idle GPU-hours by what held them:", "", "| held by | idle GPU-h |", "|---|---:|"]
    lines += [f"| {holder} | {hours:,.1f} |" for holder, hours in held["by_holder"].items()]
    top = len(held["reservations"])
    lines += ["", f"Reservations that held the most idle GPUs, by job and reason (the top {top}):", "",
              "| job | team | GPUs | flavour | reason | idle GPU-h | last message |", "|---|---|---:|---|---|---:|---|"]
    for row in held["reservations"]:
        message = str(row["message"]).replace("|", "/")
        lines.append(f"| {row['job']} | {row['team']} | {row['gpus'] or 0:g} | {row['flavour']} | {row['reason']} "
                     f"| {row['idle_gpu_hours']:,.1f} | {message} |")
    return "\n".join(lines)
