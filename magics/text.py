"""Plain-text views for a terminal IPython (and for ``%gpujob status``/``queue`` anywhere): no widget needed."""

from __future__ import annotations

from datetime import datetime

from scheduler_core.schemas import QueueView

from .fields import FIELD_LABELS, NONE, JobFacts, when

_WIDTH = max(len(label) for label in FIELD_LABELS.values())


def job_block(facts: JobFacts) -> str:
    """Every field, one per line; fields with nothing to say are left out."""
    lines = [f"job {facts.job_id} {facts.name!r} ({facts.team})"]
    for key, label in FIELD_LABELS.items():
        value = facts.values[key]
        if value != NONE or key == "state":
            lines.append(f"  {label:<{_WIDTH}}  {value}")
    return "\n".join(lines)


def state_line(facts: JobFacts) -> str:
    """One line per change while following a job: ``[shoal] job 7 PENDING · #2 in … · WaitingForCapacity: …``."""
    parts = [f"[shoal] job {facts.job_id} {facts.values['state']}"]
    for key in ("position", "reason", "estimated_start", "placement"):
        value = facts.values[key]
        if value != NONE:
            parts.append(f"starts {value}" if key == "estimated_start" else value)
    return " · ".join(parts)


def queue_table(queue: QueueView, now: datetime) -> str:
    if not queue.jobs:
        return f"{queue.team}: no pending or running jobs"
    header = ("ID", "NAME", "USER", "STATE", "SHAPE", "POS", "REASON / EST. START")
    rows = [header]
    for job in queue.jobs:
        shape = f"{job.pods}x{job.gpus_per_pod} {','.join(job.flavour)}"
        detail = job.reason or ""
        if job.estimated_start is not None and job.state == "PENDING":
            detail = f"{detail} {when(job.estimated_start, now)}".strip()
        if job.state != "PENDING" and job.admitted_as:
            detail = job.admitted_as
        rows.append((job.job_id, job.name, job.user, job.state, shape,
                     "" if job.position is None else str(job.position), detail))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [f"{queue.team}:"]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    return "\n".join(line.rstrip() for line in lines)
