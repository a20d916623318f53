"""The REST API's request and response bodies, as pydantic models shared by the server and the client SDK.

Pure on purpose: this module imports pydantic and the public model only, so ``scheduler_core.client`` (and through
it the spawner, the magics and the sweeps) can use the very types the server validates, without pulling in tornado,
SQLAlchemy or an executor. The OpenAPI document in ``docs/openapi.json`` is generated from these classes.

Times are ISO-8601 UTC strings on the wire and timezone-aware ``datetime`` objects in Python.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .model.job import JobSpec
from .model.sweep import INT64_MAX, Choice, Finite, SweepSpec
from .model.text import Text500, Text4000

#: Job states, as the store keeps them (``scheduler_core.store.records.JobState``; a test keeps the two equal).
JobStateName = Literal["PENDING", "ADMITTED", "RUNNING", "TERMINATING",
                       "SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"]
FINISHED_STATES: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"})
AdmittedAsName = Literal["nominal", "borrowed", "scavenger"]
HealthName = Literal["ready", "suspect", "draining", "repair", "burnin"]


def utc(seconds: float | None) -> datetime | None:
    """Epoch seconds (as the store keeps time) → an aware UTC ``datetime`` (as the API shows it)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


class _Body(BaseModel):
    # Responses may grow fields; a client built against an older server must still parse them.
    model_config = ConfigDict(extra="ignore", frozen=True)


# -- errors ---------------------------------------------------------------------------------------------------------

class ErrorDetail(_Body):
    code: str = Field(description="machine-readable: invalid_json, invalid_spec, invalid_request, unauthorized, "
                                  "forbidden, not_found, conflict, …")
    message: str = Field(description="one line a person can act on")
    fields: dict[str, str] = Field(default_factory=dict,
                                   description="dotted field path → what is wrong with it")


class ErrorResponse(_Body):
    error: ErrorDetail


# -- jobs -----------------------------------------------------------------------------------------------------------

class SubmitResponse(_Body):
    """The reply to ``POST /v1/jobs``: it comes straight back, and the job waits in its team's queue."""

    job_id: str
    state: JobStateName
    queue: str = Field(description="the team whose queue the job waits in")
    position: int | None = Field(description="1-based place in the team's queue; null until the first cycle")
    reason: str | None = Field(description="why it is not running yet (a reason code); null until the first cycle")
    estimated_start: datetime | None


class PodView(_Body):
    rank: int
    node: str
    units: list[int] = Field(description="indices into the node's units of the placement's flavour")
    devices: list[str] = Field(default_factory=list,
                               description="the pod's CUDA_VISIBLE_DEVICES entries: GPU indices or MIG-… UUIDs")


class PlacementView(_Body):
    flavour: str
    blocks: list[str]
    nodes: int
    node_names: list[str]
    pods: list[PodView]


class CheckpointView(_Body):
    step: int
    at: datetime
    bytes: int
    uri: str


class JobView(_Body):
    """``GET /v1/jobs/{id}``: where a job runs, how it holds its GPUs, and how it is doing."""

    job_id: str
    name: str
    team: str
    user: str
    kind: str
    state: JobStateName
    admitted_as: AdmittedAsName | None
    placement: PlacementView | None
    restarts: int = Field(description="restarts for the job's own faults (bounded by max_restarts)")
    infra_restarts: int = Field(description="restarts after node failures; not counted against max_restarts")
    preemptions: int
    last_checkpoint: CheckpointView | None
    gpu_hours_used: float = Field(description="GPU-hours held so far, all attempts, the current one included")
    submitted_at: datetime
    admitted_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    position: int | None
    reason: str | None
    reason_message: str
    estimated_start: datetime | None
    exit_code: int | None
    message: str
    cancel_requested: bool
    checkpoint_requested: bool
    spec: JobSpec
    elapsed_s: float | None = Field(default=None, description="seconds the current (or last) run has lasted, by "
                                                              "the server's clock; null before it first starts")
    time_left_s: float | None = Field(default=None, description="seconds until the running job reaches its time "
                                                                "limit; null unless it holds GPUs")


class QueueEntry(_Body):
    job_id: str
    name: str
    user: str
    state: JobStateName
    priority_class: str
    flavour: list[str]
    pods: int
    gpus_per_pod: int
    admitted_as: AdmittedAsName | None
    position: int | None
    reason: str | None
    reason_message: str
    estimated_start: datetime | None
    submitted_at: datetime
    time_limit_s: float | None = Field(default=None, description="the job's time limit per run, in seconds")
    started_at: datetime | None = None
    elapsed_s: float | None = Field(default=None, description="as in JobView")
    time_left_s: float | None = Field(default=None, description="as in JobView")
    node_names: list[str] = Field(default_factory=list, description="the nodes it holds, in rank order")


class QueueView(_Body):
    """``GET /v1/queues/{team}``: the team's jobs in queue order (pending first by position, then the rest)."""

    team: str
    jobs: list[QueueEntry]


class QueueList(_Body):
    queues: list[QueueView]


# -- teams ----------------------------------------------------------------------------------------------------------

class FlavourQuotaView(_Body):
    flavour: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int = Field(description="units the team's jobs hold now")
    borrowed: int = Field(description="units held above nominal, on the cohort's idle quota")
    lent: int = Field(description="units of this team's unused nominal that borrowers hold now")
    pending: int = Field(description="units the team's pending jobs ask for (first listed flavour)")


class QuotaView(_Body):
    team: str
    cohort: str
    weight: float
    fair_share: float = Field(description="the policy's weighted dominant share: max over GPUs (normalised by "
                                          "speed), CPUs and memory of (held now + decayed past use as a steady "
                                          "rate) / the cluster's capacity, divided by the team's weight; lower "
                                          "is served first")
    dominant_resource: str
    flavours: list[FlavourQuotaView]


# -- nodes ----------------------------------------------------------------------------------------------------------

class NodeView(_Body):
    name: str
    block: str
    leaf: str
    gpu_model: str
    health: HealthName
    health_reason: str
    spare: bool
    small_jobs: bool
    capacity: dict[str, int]
    allocated: dict[str, int]
    free: dict[str, int]
    jobs: list[str] = Field(description="jobs on the node (other teams' jobs are shown to admins only)")
    heartbeat_at: datetime | None
    health_since: datetime | None = Field(default=None, description="when the node's health last changed")
    gpu_utilization: float | None = Field(default=None,
                                          description="percent, from the executor's latest heartbeat; null if none")


class NodeList(_Body):
    nodes: list[NodeView]


class NodeActionRequest(BaseModel):
    """The optional body of ``POST /v1/nodes/{node}:fail|drain|repair``: why, for the node's event."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=500, description="why; shown as the node's reason and in its event")


# -- events ---------------------------------------------------------------------------------------------------------

class EventView(_Body):
    id: int
    at: datetime
    kind: str
    reason: str
    message: str
    job_id: str | None
    node: str | None
    team: str | None
    data: dict[str, Any]


class EventList(_Body):
    events: list[EventView]
    next_after: int | None = Field(description="pass as ?after= to read on from here")


# -- usage ----------------------------------------------------------------------------------------------------------

class UsageRow(_Body):
    """GPU-seconds of one team on one flavour on one UTC day, held one way (nominal, borrowed or scavenger)."""

    day: date
    team: str
    flavour: str
    admitted_as: AdmittedAsName
    gpu_seconds: float
    normalised_gpu_seconds: float = Field(description="gpu_seconds × the flavour's speed relative to an H100")


class UsageTotal(_Body):
    team: str
    nominal_gpu_seconds: float
    borrowed_gpu_seconds: float
    scavenger_gpu_seconds: float
    gpu_seconds: float
    normalised_gpu_seconds: float


class UsageReport(_Body):
    since: datetime | None
    until: datetime
    rows: list[UsageRow]
    totals: list[UsageTotal]


# -- pod logs -------------------------------------------------------------------------------------------------------

class LogChunk(_Body):
    """``GET /v1/jobs/{id}/logs?rank=R&offset=N``: what one pod printed, read on from byte ``offset``.

    Read again with ``offset=next_offset`` to follow the pod. ``eof`` is true once nothing more will be written:
    the job has finished, or the attempt read was followed by another. ``attempt`` names the launch the text
    belongs to (a restart starts a new log, from offset 0); ``latest_attempt`` says whether a newer one exists, so
    a follower reads the old attempt to its end, then moves on (``?attempt=``).
    """

    job_id: str
    rank: int
    attempt: int | None = Field(description="the launch this log belongs to; null before the job first starts")
    latest_attempt: int | None = Field(default=None, description="the job's newest launch; null before the first")
    offset: int
    next_offset: int
    text: str
    eof: bool


# -- who am I -------------------------------------------------------------------------------------------------------

class WhoAmI(_Body):
    user: str
    team: str
    admin: bool


# -- sweeps ---------------------------------------------------------------------------------------------------------

SweepStateName = Literal["RUNNING", "CANCELLING", "SUCCEEDED", "FAILED", "CANCELLED"]
TrialStateName = Literal["ACTIVE", "COMPLETE", "PRUNED", "FAILED"]
FINISHED_SWEEP_STATES: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class TrialCounts(_Body):
    """Where a sweep's trials are. ``not_started``: not asked yet (waiting for a parallelism slot); ``pending``
    and ``running``: trials whose job is queued (also again, after a preemption) or holds GPUs."""

    not_started: int
    pending: int
    running: int
    complete: int
    pruned: int
    failed: int


class TrialView(_Body):
    """One trial: its parameters and outcome (Optuna's view) and its job's state (the scheduler's)."""

    sweep_id: str
    number: int
    job_id: str
    state: TrialStateName
    job_state: JobStateName
    params: dict[str, Choice]
    value: float | None = Field(description="the final objective of a COMPLETE trial")
    intermediate: list[tuple[int, float]] = Field(description="(step, value) reported so far, in step order")
    message: str = Field(description="why a finished trial ended the way it did")
    job_message: str
    exit_code: int | None
    preemptions: int
    restarts: int
    cancel_requested: bool
    created_at: datetime
    finished_at: datetime | None


class TrialList(_Body):
    trials: list[TrialView]


class BestTrial(_Body):
    number: int
    value: float
    params: dict[str, Choice]
    job_id: str


class SweepView(_Body):
    """``GET /v1/sweeps/{id}``: the sweep, how far it is, and its best trial so far."""

    sweep_id: str
    name: str
    team: str
    user: str
    state: SweepStateName
    message: str
    created_at: datetime
    finished_at: datetime | None
    study_name: str = Field(description="the Optuna study (open the controller's storage URL with optuna-dashboard)")
    n_trials: int
    parallelism: int
    objective: str
    direction: Literal["minimize", "maximize"]
    counts: TrialCounts
    progress: float = Field(description="finished trials / n_trials, 0–1")
    best: BestTrial | None
    spec: SweepSpec


class SweepList(_Body):
    sweeps: list[SweepView]


class AddTrialRequest(BaseModel):
    """``POST /v1/sweeps/{id}/trials`` (the sweep controller): record trial ``number`` and submit its job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int = Field(ge=0, le=2 ** 31 - 1, strict=True)
    params: dict[str, Choice] = Field(max_length=100)
    env: dict[str, str] = Field(default_factory=dict, description="added to the trial job's env (API URL, token)")


class FinishTrialRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    state: Literal["COMPLETE", "PRUNED", "FAILED"]
    value: Finite | None = None
    message: Text4000 = ""


class FinishSweepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    state: Literal["SUCCEEDED", "FAILED", "CANCELLED"]
    message: Text4000 = ""


class IdleClockRequest(BaseModel):
    """``POST /v1/jobs/{id}:idle`` from the idle reaper: a running notebook's last activity and the idle limit after
    which the reaper frees its slice, or both ``null`` while a kernel is busy (no clock runs). The scheduler
    estimates when the slice frees from it (last activity + limit) for notebooks waiting for one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    last_activity: datetime | None = Field(description="the latest hub, kernel or GPU activity; null: busy now")
    idle_limit_s: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                       description="seconds idle after which the reaper frees the slice")

    @model_validator(mode="after")
    def _both_or_neither(self) -> IdleClockRequest:
        if (self.last_activity is None) != (self.idle_limit_s is None):
            raise ValueError("give last_activity and idle_limit_s together, or neither (a busy kernel)")
        return self


class ReportRequest(BaseModel):
    """``POST /v1/jobs/{id}:report`` from a trial: ``{"step": 3, "value": 0.41}`` or ``{"value": 0.39,
    "final": true}``."""

    # The document says what the validator below does: an intermediate report (final absent or false) has a step.
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"anyOf": [
        {"required": ["final"], "properties": {"final": {"const": True}}},
        {"required": ["step"], "properties": {"step": {"type": "integer"}}}]})

    step: int | None = Field(default=None, ge=0, le=INT64_MAX, strict=True)
    value: Finite
    final: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _step_unless_final(self) -> ReportRequest:
        if not self.final and self.step is None:
            raise ValueError("an intermediate report needs a step; a final one says \"final\": true")
        return self


class CancelRequest(BaseModel):
    """The optional body of ``POST /v1/jobs/{id}:cancel``: why (kept in the job's ``CancelRequested`` event)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: Text500 = ""


class ReportResponse(_Body):
    should_stop: bool = Field(description="the trial's job is being stopped (pruned, or its sweep cancelled): "
                                          "stop now")
    trial: TrialView


__all__ = [
    "AddTrialRequest", "BestTrial", "CancelRequest", "FINISHED_SWEEP_STATES", "FinishSweepRequest", "FinishTrialRequest",
    "ReportRequest", "ReportResponse", "SweepList", "SweepStateName", "SweepView", "TrialCounts", "TrialList",
    "TrialStateName", "TrialView",
    "AdmittedAsName", "CheckpointView", "ErrorDetail", "ErrorResponse", "EventList", "EventView", "FINISHED_STATES",
    "FlavourQuotaView", "HealthName", "JobStateName", "JobView", "LogChunk", "NodeActionRequest", "NodeList",
    "NodeView", "PlacementView",
    "PodView", "QueueEntry", "QueueList", "QueueView", "QuotaView", "SubmitResponse", "UsageReport", "UsageRow",
    "UsageTotal", "WhoAmI", "utc",
]
