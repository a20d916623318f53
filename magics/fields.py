"""What a person is shown about a job, as (label, text) pairs: one source for the widget and the terminal text.

Both renderers show the same facts worded the same way, so a screenshot and a terminal session tell one story.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from scheduler_core.model import format_duration
from scheduler_core.schemas import FINISHED_STATES, JobView

#: Field keys in display order, with their labels.
FIELD_LABELS: dict[str, str] = {
    "state": "state",
    "position": "queue position",
    "reason": "reason",
    "estimated_start": "estimated start",
    "placement": "placement",
    "restarts": "restarts",
    "checkpoint": "last checkpoint",
    "gpu_hours": "GPU-hours used",
}

NONE = "—"


@dataclass(frozen=True, slots=True)
class JobFacts:
    """The rendered facts of one ``JobView`` at one moment (``now`` matters for "in 5m" and "12m ago")."""

    job_id: str
    name: str
    team: str
    state: str
    finished: bool
    values: dict[str, str]


def describe(view: JobView, now: datetime) -> JobFacts:
    """The facts worth showing in the job's state: a field with nothing to say there (a queue position once it
    runs, restarts that never happened, GPU-hours before it started) is ``NONE``, and both renderers leave it out."""
    waiting = view.state == "PENDING"
    state: str = view.state
    if view.cancel_requested and view.state not in FINISHED_STATES:
        state += " (cancelling)"
    elif view.state == "FAILED" and view.exit_code not in (None, 0):
        state += f" (exit {view.exit_code})"
    values = {
        "state": state,
        "position": (f"#{view.position} in {view.team}'s queue" if waiting and view.position is not None
                     else NONE),
        "reason": _reason(view) if waiting or view.state in ("FAILED", "TIMED_OUT", "CANCELLED") else NONE,
        "estimated_start": (when(view.estimated_start, now) if waiting and view.estimated_start is not None
                            else NONE),
        "placement": placement(view),
        "restarts": (f"{view.restarts} (+{view.infra_restarts} after node failures, "
                     f"{view.preemptions} preemptions)"
                     if view.restarts or view.infra_restarts or view.preemptions else NONE),
        "checkpoint": (f"step {view.last_checkpoint.step}, {ago(view.last_checkpoint.at, now)}"
                       if view.last_checkpoint is not None else NONE),
        "gpu_hours": f"{view.gpu_hours_used:.2f}" if view.gpu_hours_used or not waiting else NONE,
    }
    return JobFacts(job_id=view.job_id, name=view.name, team=view.team, state=view.state,
                    finished=view.state in FINISHED_STATES, values=values)


def placement(view: JobView) -> str:
    p = view.placement
    if p is None:
        return NONE
    shown = ", ".join(p.node_names[:4]) + (f" +{len(p.node_names) - 4} more" if len(p.node_names) > 4 else "")
    blocks = ", ".join(p.blocks)
    how = f", {view.admitted_as}" if view.admitted_as else ""
    return f"{len(p.pods)} × {p.flavour} pods on {shown} (block {blocks}){how}"


def _reason(view: JobView) -> str:
    if view.reason and view.reason_message:
        return f"{view.reason}: {view.reason_message}"
    return view.reason or view.reason_message or view.message or NONE


def when(at: datetime, now: datetime) -> str:
    """``14:03:10 (in 5m)``, in the viewer's local time."""
    delta = (at - now).total_seconds()
    local = at.astimezone().strftime("%H:%M:%S")
    if delta <= 0:
        return f"{local} (now)"
    return f"{local} (in {format_duration(max(delta, 1))})"


def ago(at: datetime, now: datetime) -> str:
    delta = (now - at).total_seconds()
    local = at.astimezone().strftime("%H:%M:%S")
    if delta < 1:
        return f"{local} (just now)"
    return f"{local} ({format_duration(delta)} ago)"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
