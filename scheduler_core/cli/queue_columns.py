"""The columns ``shoal queue`` can show, by name (``--format``/``-o``), as ``squeue --format`` picks fields.

Each column is a name a user types, a header, and how to write one queue entry's cell; ``COLUMNS`` is the table
``shoal queue --help`` lists, in the order given here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import click

from ..schemas import QueueEntry
from .table import clock, when


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    header: str
    help: str
    cell: Callable[[str, QueueEntry], str]


def _shape(job: QueueEntry) -> str:
    return f"{job.pods}×{job.gpus_per_pod} {'|'.join(job.flavour)}"


def _pending(job: QueueEntry) -> bool:
    return job.state == "PENDING"


def _start(job: QueueEntry) -> str:
    """When it started, or (pending) when the scheduler expects it to; ``N/A`` when it cannot say, as squeue."""
    if _pending(job):
        return when(job.estimated_start) if job.estimated_start is not None else "N/A"
    return when(job.started_at)


def _nodelist(job: QueueEntry) -> str:
    """squeue's NODELIST(REASON): the nodes it holds, or why it waits."""
    if job.node_names:
        return ",".join(job.node_names)
    return f"({job.reason})" if job.reason else "-"


COLUMNS: tuple[Column, ...] = (
    Column("job", "JOB", "job id", lambda team, j: j.job_id),
    Column("team", "TEAM", "the team whose queue and quota it uses", lambda team, j: team),
    Column("name", "NAME", "job name", lambda team, j: j.name),
    Column("user", "USER", "who submitted it", lambda team, j: j.user),
    Column("state", "STATE", "PENDING, ADMITTED, RUNNING, TERMINATING, or how it ended", lambda team, j: j.state),
    Column("shape", "SHAPE", "pods × GPUs per pod, and flavours in preference order", lambda team, j: _shape(j)),
    Column("priority", "PRIORITY", "priority class", lambda team, j: j.priority_class),
    Column("as", "AS", "how it holds its GPUs: nominal, borrowed or scavenger",
           lambda team, j: j.admitted_as or "-"),
    Column("elapsed", "ELAPSED", "how long the current run has lasted (squeue's TIME)",
           lambda team, j: clock(j.elapsed_s)),
    Column("limit", "LIMIT", "the time limit of one run", lambda team, j: clock(j.time_limit_s)),
    Column("left", "LEFT", "time until a running job reaches its limit", lambda team, j: clock(j.time_left_s)),
    Column("pos", "POS", "place in the team's queue (pending jobs)",
           lambda team, j: str(j.position) if _pending(j) and j.position is not None else "-"),
    Column("start", "START", "when it started; for a pending job, the estimated start (N/A: none yet)",
           lambda team, j: _start(j)),
    Column("submitted", "SUBMITTED", "when it was submitted", lambda team, j: when(j.submitted_at)),
    Column("nodes", "NODES", "how many nodes it holds (a pending job: how many pods it asks for)",
           lambda team, j: str(len(j.node_names) or j.pods)),
    Column("nodelist", "NODELIST(REASON)", "the nodes it holds, or (the reason code) it waits",
           lambda team, j: _nodelist(j)),
    Column("reason", "REASON", "the reason code a pending job waits for", lambda team, j: j.reason or "-"),
    Column("why", "WHY", "the reason in words (pending jobs)",
           lambda team, j: (j.reason_message or "-") if _pending(j) else "-"),
)

BY_NAME = {column.name: column for column in COLUMNS}
DEFAULT = "job,team,name,user,state,shape,elapsed,limit,left,pos,start,nodelist"


def parse_format(text: str) -> list[Column]:
    """``job,state,why`` → those columns; every unknown name is reported at once, with the valid ones."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in BY_NAME]
    if unknown or not names:
        raise click.BadParameter(f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(unknown) or '(none)'};"
                                 f" choose from {', '.join(BY_NAME)}", param_hint="--format")
    return [BY_NAME[name] for name in names]


def format_help() -> str:
    """The column table for ``shoal queue --help``."""
    width = max(len(c.name) for c in COLUMNS)
    return "\b\nColumns for --format (default " + DEFAULT + "):\n" + "\n".join(
        f"  {c.name.ljust(width)}  {c.help}" for c in COLUMNS)
