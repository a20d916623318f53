"""What the store keeps. Immutable records: a store returns copies, and a change is a method call on the store."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from operator import attrgetter
from typing import Any

from ..model.cluster import Health, Node
from ..model.job import JobSpec
from ..model.sweep import Choice, SweepSpec, SweepState, TrialState
from ..model.reasons import Reason
from ..model.allocation import AdmittedAs, Placement


class JobState(StrEnum):
    PENDING = "PENDING"          # in its team's queue (again, after a preemption or an infrastructure failure)
    ADMITTED = "ADMITTED"        # bound to nodes; pods are starting
    RUNNING = "RUNNING"          # every pod has started
    TERMINATING = "TERMINATING"  # signalled (preemption, cancel, time limit); holds its units until it exits
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"            # its own fault, restart budget spent
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"      # stopped at its time limit

    @property
    def finished(self) -> bool:
        return self in _FINISHED

    @property
    def holds_units(self) -> bool:
        return self in (JobState.ADMITTED, JobState.RUNNING, JobState.TERMINATING)


_FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT})


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    job_id: str
    step: int
    uri: str
    bytes: int
    written_at: float
    verified: bool
    cost_s: float | None = None


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job and everything the platform knows of it. ``wait_*`` is the latest cycle's answer to "why waiting"."""

    id: str
    spec: JobSpec
    user: str
    state: JobState
    submitted_at: float
    queued_at: float
    front_of_queue: bool = False
    admitted_as: AdmittedAs | None = None
    placement: Placement | None = None
    admitted_at: float | None = None
    #: When ``admitted_as`` last changed while the job held its units (``Store.relabel``); ``None``: at admission.
    labelled_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    terminate_by: float | None = None
    requeue_on_exit: bool = False
    restarts: int = 0               # the job's own faults; bounded by spec.max_restarts
    infra_restarts: int = 0         # node failures, readiness timeouts; not bounded by max_restarts
    preemptions: int = 0
    attained_gpu_s: float = 0.0
    last_checkpoint: CheckpointRecord | None = None
    restart_block: str | None = None
    avoid_nodes: frozenset[str] = frozenset()
    wait_reason: Reason | None = None
    #: Its waits for room (any ``wait_reason`` but a quota one) since it entered the queue: the start of the
    #: current run of them (``None`` while it waits for quota or has not waited), and the seconds of earlier runs.
    room_wait_since: float | None = None
    room_waited_s: float = 0.0
    wait_message: str = ""
    queue_position: int | None = None
    estimated_start: float | None = None
    exit_code: int | None = None
    message: str = ""
    cancel_requested: bool = False
    checkpoint_requested: bool = False
    epoch: int = 0                  # the fencing token its current binding was written with
    #: A notebook's idle clock as the idle reaper last reported it (``Store.set_idle_clock``): its last activity
    #: and the idle limit after which the reaper frees it. Cleared when the job is bound again.
    idle_since: float | None = None
    idle_limit_s: float | None = None

    @property
    def team(self) -> str:
        return self.spec.team

    def with_wait(self, reason: Reason, message: str, position: int | None, estimated_start: float | None,
                  room_wait_since: float | None, room_waited_s: float) -> JobRecord:
        """This record with a cycle's answer to "why waiting" (``Store.set_waits``). A store makes one for
        every pending job whose answer moved, every pass (a long queue's positions all move when its head
        starts): built positionally, it costs half of ``dataclasses.replace``."""
        values = _JOB_FIELDS(self)
        return JobRecord(*values[:_WAIT_AT], reason, room_wait_since, room_waited_s,  # type: ignore[call-arg]
                         message, position, estimated_start, *values[_WAIT_AT + len(_WAIT_FIELDS):])


_NAMES = tuple(f.name for f in fields(JobRecord))
_JOB_FIELDS = attrgetter(*_NAMES)
#: The fields ``with_wait`` sets, in their order in ``JobRecord``.
_WAIT_FIELDS = ("wait_reason", "room_wait_since", "room_waited_s", "wait_message", "queue_position",
                "estimated_start")
_WAIT_AT = _NAMES.index(_WAIT_FIELDS[0])
assert _NAMES[_WAIT_AT:_WAIT_AT + len(_WAIT_FIELDS)] == _WAIT_FIELDS, "with_wait needs these fields together"


def room_wait(since: float | None, waited_s: float, reason: Reason, now: float) -> tuple[float | None, float]:
    """The rule both stores apply to (``room_wait_since``, ``room_waited_s``) when a cycle at ``now`` says
    ``reason``: a wait for room starts a run (or continues it), a quota wait ends it and banks its seconds — so
    the time a job has waited for room survives a reason that flips with the cycle's reservations, and quota
    waits never count."""
    if not reason.is_quota:
        return (now if since is None else since), waited_s
    return None, waited_s + (now - since if since is not None else 0.0)


@dataclass(frozen=True, slots=True)
class NodeRecord:
    node: Node
    health: Health = Health.READY
    health_reason: str = ""
    heartbeat_at: float | None = None
    #: When ``health`` was last set (``None``: never since the node was configured).
    health_changed_at: float | None = None
    gpu_utilization: float | None = None


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """GPU-seconds one job held on one flavour over ``[start, end)``, and how it held them: the bill's raw material."""

    team: str
    job_id: str
    flavour: str
    admitted_as: AdmittedAs
    start: float
    end: float
    units: int

    @property
    def gpu_seconds(self) -> float:
        return self.units * (self.end - self.start)


@dataclass(frozen=True, slots=True)
class Event:
    """An append-only record of a decision or an observation, with a machine-readable ``reason``."""

    at: float
    kind: str
    reason: str
    message: str = ""
    job_id: str | None = None
    node: str | None = None
    team: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True, slots=True)
class SweepRecord:
    """A sweep as the store keeps it. Its trials are ``TrialRecord``s; its study lives in Optuna storage."""

    id: str
    spec: SweepSpec
    user: str
    state: SweepState
    created_at: float
    finished_at: float | None = None
    message: str = ""

    @property
    def team(self) -> str:
        return self.spec.team


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One trial of a sweep: its Optuna number, its parameters, its job, and what it reported.

    ``intermediate`` is ``(step, value)`` in step order, the first value of each step (a trial resumed from a
    checkpoint repeats steps; Optuna keeps the first too). ``value`` is the final objective of a COMPLETE trial.
    """

    sweep_id: str
    number: int
    job_id: str
    params: dict[str, Choice]
    state: TrialState
    created_at: float
    value: float | None = None
    intermediate: tuple[tuple[int, float], ...] = ()
    message: str = ""
    finished_at: float | None = None
