"""What the spawn page says while a notebook waits for its slice: a pure function of the job's latest view.

JupyterHub shows ``message`` under a progress bar. Waiting is the common case when the pool is full, so the message
carries all the scheduler knows: the reason, the queue position and the estimated start.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypedDict

from .profiles import Profile
from .scheduler import NotebookJob, RoomNow

#: Plain words for the scheduler's reason codes; its own one-line message follows when it gives one.
REASON_WORDS = {
    "QuotaFull": "your team has used all of its quota for this GPU size",
    "CohortFull": "no idle quota to borrow from other teams right now",
    "WaitingForCapacity": "every slice of this size is in use",
    "WaitingForTopology": "no free slice of this shape on one node",
    "BehindReservation": "slices are reserved for a larger job that starts first",
    "PreemptingVictims": "making room: other work is being stopped",
    "NodeUnhealthy": "the free slices are on unhealthy nodes",
    "InvalidFlavour": "this GPU size is not offered to your team",
}


class ProgressEvent(TypedDict, total=False):
    progress: int
    message: str
    html_message: str


def format_wait(seconds: float) -> str:
    if seconds < 60:
        return "less than a minute"
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"about {minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes:02d} min"


#: Reasons for which another profile, with free slices and quota, would start at once.
ROOM_REASONS = frozenset({"WaitingForCapacity", "WaitingForTopology", "BehindReservation", "QuotaFull",
                          "CohortFull", "NodeUnhealthy"})


def startable_profiles(profiles: Sequence[Profile], chosen: str, room: RoomNow) -> list[Profile]:
    """The other profiles a notebook of this team could start on right now: a ready node has the units free
    and the team's quota has room for them (pure; the scheduler decides, this only points)."""
    return [p for p in profiles if p.slug != chosen and room.largest_free.get(p.flavour, 0) >= p.units
            and room.quota_room.get(p.flavour, 0) >= p.units]


def waiting_message(job: NotebookJob, now: float, alternatives: Sequence[str] = ()) -> str:
    parts = ["Waiting for a GPU slice"]
    if job.queue_position is not None:
        parts.append(f"position {job.queue_position} in team {job.team}'s queue" if job.team
                     else f"position {job.queue_position} in the queue")
    if job.reason:
        why = REASON_WORDS.get(job.reason, job.reason)
        detail = f" ({job.reason_message})" if job.reason_message else ""
        parts.append(f"{job.reason}: {why}{detail}")
    if job.estimated_start is not None:
        clock = time.strftime("%H:%M", time.localtime(job.estimated_start))
        parts.append(f"estimated start {clock} (in {format_wait(max(0.0, job.estimated_start - now))})")
    else:
        parts.append("estimated start unknown until a slice frees up")
    if alternatives:
        names = " or ".join(f"'{name}'" for name in alternatives)
        parts.append(f"{names} could start now: stop this server and choose it on the spawn page")
    return "; ".join(parts)


def progress_event(job: NotebookJob, now: float, alternatives: Sequence[str] = ()) -> ProgressEvent:
    """The spawn page's line for ``job`` as it is now; ``alternatives``: names of other profiles that could
    start now (``startable_profiles``)."""
    if job.pending:
        return {"progress": 20, "message": waiting_message(job, now, alternatives)}
    if job.state == "ADMITTED":
        where = f" on {job.node}" if job.node else ""
        devices = f" ({', '.join(job.devices)})" if job.devices else ""
        lent = (" (borrowed from another team, as your team's slices are in use: the idle reaper gives it back "
                "sooner than one of your own)" if job.admitted_as == "borrowed" else "")
        return {"progress": 60, "message": f"Slice granted{where}{devices}{lent}; starting the notebook server"}
    if job.state == "RUNNING":
        return {"progress": 80, "message": "Notebook server running; waiting for it to answer"}
    if job.finished:
        return {"progress": 100, "message": f"Notebook job ended ({job.state}): {job.message or 'no message'}"}
    return {"progress": 90, "message": f"Notebook job is {job.state.lower()}"}
