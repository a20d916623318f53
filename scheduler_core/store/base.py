"""The ``Store`` plug point: every piece of state the control plane keeps, behind one small interface.

Contract (checked by ``tests/scheduler_core/store_contract.py`` against every implementation):

* Every method is atomic: it happens whole or not at all, and a failure leaves nothing half-written.
* Records returned are immutable copies; changing state is always a method call.
* Thread safety: a store may be called from several threads (API handlers and the controller) at once.
* Fencing: methods that bind or release units take ``epoch``. A store rejects, with ``StaleLeader``, any such write
  whose epoch is older than the newest lease granted, so a deposed scheduler can never bind a GPU twice.
* Time is always passed in (``now``): a store never reads a clock, so the simulator can drive it in virtual time.
* Errors: ``NotFound`` for an unknown id, ``Conflict`` for a repeated ``Idempotency-Key`` with another body
  or a transition from the wrong state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from ..model.cluster import Health, Node
from ..model.job import JobSpec
from ..model.team import TeamConfig
from ..model.reasons import Reason
from ..model.allocation import AdmittedAs, Placement
from ..model.sweep import Choice, SweepSpec, SweepState, TrialState
from .health import StoreHealth
from .records import CheckpointRecord, Event, JobRecord, JobState, NodeRecord, SweepRecord, TrialRecord, UsageRecord

_ALWAYS_HEALTHY = StoreHealth()


class Store(ABC):
    # -- availability --------------------------------------------------------------------------------------------
    @property
    def health(self) -> StoreHealth:
        """Whether writes succeed now (``/healthz``). A store that can be unavailable (a disk, a server) raises
        ``StoreUnavailable`` from any call meanwhile, and notes it here. Default: always healthy (in memory)."""
        return _ALWAYS_HEALTHY

    def probe_write(self) -> None:
        """One tiny write that changes nothing (``/readyz``): ``StoreUnavailable`` when the store cannot write."""

    # -- configuration -------------------------------------------------------------------------------------------
    @abstractmethod
    def sync_nodes(self, nodes: Sequence[Node]) -> None:
        """Make the configured nodes exactly ``nodes``; health and heartbeats of nodes that stay are kept."""

    @abstractmethod
    def list_nodes(self) -> list[NodeRecord]: ...

    @abstractmethod
    def set_node_health(self, name: str, health: Health, reason: str, now: float, *, expect: Health | None = None,
                        event: Event | None = None) -> NodeRecord:
        """Set a node's health and its reason (``health_changed_at`` = ``now``). ``expect``: only if the node is
        in that health now, else ``Conflict`` and nothing written, so two writers deciding from what they read
        (the controller, an operator through the API) cannot undo each other's transition unseen. ``event``:
        appended in the same transaction (a transition is never without its event). ``NotFound`` for an unknown
        node."""

    @abstractmethod
    def heartbeat(self, name: str, now: float, gpu_utilization: float | None = None) -> None: ...

    @abstractmethod
    def sync_teams(self, teams: Sequence[TeamConfig]) -> None:
        """Make the configured teams exactly ``teams`` (their jobs and usage stay)."""

    @abstractmethod
    def list_teams(self) -> list[TeamConfig]: ...

    # -- jobs ----------------------------------------------------------------------------------------------------
    @abstractmethod
    def submit(self, spec: JobSpec, *, user: str, now: float, idempotency_key: str | None = None) -> JobRecord:
        """Store a new PENDING job. The same ``idempotency_key`` with an equal spec returns the first job;
        with a different spec it raises ``Conflict`` and stores nothing."""

    @abstractmethod
    def get(self, job_id: str) -> JobRecord: ...

    @abstractmethod
    def list_jobs(self, *, team: str | None = None, states: Iterable[JobState] | None = None,
                  limit: int | None = None) -> list[JobRecord]:
        """Jobs, oldest submission first."""

    @abstractmethod
    def bind(self, job_id: str, placement: Placement, admitted_as: AdmittedAs, *, epoch: int,
             now: float) -> JobRecord:
        """PENDING → ADMITTED on exactly ``placement``. Raises ``StaleLeader`` for an old epoch and ``Conflict``
        if the job is not pending or any unit of ``placement`` is held by another job. Also ``Conflict`` when the
        placement is not of the job's shape (pod count, units per pod, a flavour it asked for, a unit index the
        node has) and ``NotFound`` for an unknown node: the store is the last guard against a double allocation.
        Binding clears the job's wait fields and stamps it with ``epoch``."""

    @abstractmethod
    def relabel(self, job_id: str, admitted_as: AdmittedAs, *, epoch: int, now: float) -> JobRecord:
        """Change how a job that holds units is counted against quota (nothing stops): writes the
        ``UsageRecord`` of the time since it was last labelled under the old label and counts on from ``now``
        (``labelled_at``) under the new one. ``StaleLeader`` for an old epoch, ``Conflict`` if the job holds no
        units or ``admitted_as`` is scavenger (scavenger work is outside quota either way)."""

    @abstractmethod
    def mark_running(self, job_id: str, now: float) -> JobRecord:
        """ADMITTED → RUNNING once every pod has started."""

    @abstractmethod
    def mark_terminating(self, job_id: str, *, requeue: bool, terminate_by: float, now: float,
                         epoch: int) -> JobRecord:
        """ADMITTED/RUNNING → TERMINATING (signalled; still holds its units). A job already TERMINATING may be
        signalled again (a cancel after a preemption): the earlier ``terminate_by`` stands and it is requeued on
        exit only if every signal asked for that. Any other state is a ``Conflict``."""

    @abstractmethod
    def release(self, job_id: str, *, state: JobState, now: float, epoch: int, exit_code: int | None = None,
                message: str = "", infra_fault: bool = False, own_fault: bool = False,
                restart_block: str | None = None, avoid_nodes: Iterable[str] = ()) -> JobRecord:
        """Free the job's units and move it to ``state``: PENDING (requeued at the front of its queue, counting a
        preemption, an infrastructure restart or an own-fault restart) or a finished state. Writes the
        ``UsageRecord`` of the time it held them (``labelled_at`` or else ``admitted_at`` → ``now``, with its
        ``admitted_as``).

        Requeued: ``own_fault`` counts in ``restarts``, else ``infra_fault`` in ``infra_restarts``, else it is a
        preemption; ``restart_block`` and ``avoid_nodes`` replace the previous ones; placement is cleared,
        ``last_checkpoint`` and ``attained_gpu_s`` are kept. Finished: ``finished_at`` is set, placement kept for
        the record. A job whose cancel was requested is never requeued: asked for PENDING, it ends CANCELLED (the
        cancel was answered, so it must outlive the stop that raced it). ``Conflict`` if the job holds no units or
        ``state`` is one that holds units."""

    @abstractmethod
    def set_waits(self, waits: Sequence[tuple[str, Reason, str, int, float | None]], now: float, *,
                  events: Sequence[Event] = ()) -> list[Event]:
        """Record each pending job's (job_id, reason, message, position, estimated_start) from the cycle at
        ``now``, with ``room_wait_since`` and ``room_waited_s`` by ``records.room_wait`` (binding the job clears
        both), and append ``events`` (the cycle's WAIT and RESERVE events), all in one transaction: a cycle that
        explains 2,000 waits is one round trip, not 2,000. Returns the events with their ids.
        An unknown id is ``NotFound`` (nothing written, events neither); a job no longer pending is skipped."""

    @abstractmethod
    def request_cancel(self, job_id: str, now: float) -> JobRecord:
        """A pending job is cancelled at once; a running one is flagged for the controller to stop. Cancelling a
        cancelled job returns it unchanged; one that ended otherwise is a ``Conflict``."""

    @abstractmethod
    def request_checkpoint(self, job_id: str, now: float) -> JobRecord:
        """Flag a job holding units to checkpoint (``Conflict`` otherwise); the controller passes it on."""

    @abstractmethod
    def clear_checkpoint_request(self, job_id: str) -> None: ...

    @abstractmethod
    def set_idle_clock(self, job_id: str, idle_since: float | None, idle_limit_s: float | None) -> JobRecord:
        """Record a running notebook's idle clock, as the idle reaper sees it (``None``, ``None``: busy, no clock);
        estimated starts of the jobs waiting for its slice read it. ``Conflict`` if the job holds no units,
        ``NotFound`` if there is no such job. Not fenced: it is an observation, not a decision."""

    @abstractmethod
    def add_attained(self, job_id: str, gpu_seconds: float) -> None: ...

    # -- checkpoints, usage, events -----------------------------------------------------------------------------
    @abstractmethod
    def record_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        """Remember a checkpoint; a verified one becomes the job's ``last_checkpoint`` unless a verified one written
        later (``written_at``) is already there."""

    @abstractmethod
    def checkpoints(self, job_id: str) -> list[CheckpointRecord]: ...

    @abstractmethod
    def usage(self, *, team: str | None = None, since: float | None = None,
              until: float | None = None) -> list[UsageRecord]:
        """Records whose interval ended in ``[since, until)``, in the order they were written."""

    @abstractmethod
    def append_event(self, event: Event) -> Event:
        """Append and return the event with its ``id`` (strictly increasing)."""

    def append_events(self, events: Sequence[Event]) -> list[Event]:
        """Append several events at once, in order (one transaction where the backend has them); returns them
        with their ids. A cycle that explains 2,000 waits writes 2,000 events: one round trip, not 2,000."""
        return [self.append_event(event) for event in events]

    @abstractmethod
    def events(self, *, job_id: str | None = None, after_id: int | None = None,
               limit: int | None = None) -> list[Event]:
        """Oldest first; ``after_id`` pages forward from the last id a reader saw; ``limit`` keeps the first ones."""

    # -- sweeps -------------------------------------------------------------------------------------------------
    # A sweep and its trials (DESIGN §6). The store keeps the scheduler's record; the sweep controller keeps the
    # Optuna study in step with it through the API. A trial's job is an ordinary job (kind: trial).
    @abstractmethod
    def create_sweep(self, spec: SweepSpec, *, user: str, now: float,
                     idempotency_key: str | None = None) -> SweepRecord:
        """Store a new RUNNING sweep with no trials. The same ``idempotency_key`` with an equal spec returns the
        first sweep; with a different spec it raises ``Conflict`` and stores nothing."""

    @abstractmethod
    def get_sweep(self, sweep_id: str) -> SweepRecord: ...

    @abstractmethod
    def list_sweeps(self, *, team: str | None = None, states: Iterable[SweepState] | None = None,
                    limit: int | None = None) -> list[SweepRecord]:
        """Sweeps, oldest first."""

    @abstractmethod
    def cancel_sweep(self, sweep_id: str, now: float) -> SweepRecord:
        """RUNNING → CANCELLING, and in the same transaction every ACTIVE trial → FAILED ("the sweep was
        cancelled") with its job cancel-requested as ``request_cancel`` would (a pending one CANCELLED at once).
        A CANCELLING or CANCELLED sweep is returned unchanged; a SUCCEEDED or FAILED one is a ``Conflict``."""

    @abstractmethod
    def finish_sweep(self, sweep_id: str, state: SweepState, message: str, now: float) -> SweepRecord:
        """RUNNING → SUCCEEDED or FAILED, CANCELLING → CANCELLED; anything else is a ``Conflict``."""

    @abstractmethod
    def add_trial(self, sweep_id: str, number: int, params: dict[str, Choice], job: JobSpec, *,
                  now: float) -> tuple[TrialRecord, JobRecord]:
        """Submit ``job`` (as the sweep's user) and record trial ``number`` ACTIVE with it, together. Idempotent: a
        trial ``number`` already recorded with equal ``params`` is returned as it is and nothing is submitted;
        with other params it is a ``Conflict``. A sweep not RUNNING is a ``Conflict`` (no new trials)."""

    @abstractmethod
    def list_trials(self, sweep_id: str) -> list[tuple[TrialRecord, JobRecord]]:
        """Every trial of the sweep by number, each with its job as it is now, read together: a trial seen ACTIVE
        with its job finished really ended without a final report."""

    @abstractmethod
    def report_trial(self, job_id: str, *, step: int | None, value: float, final: bool,
                     now: float) -> tuple[TrialRecord, JobRecord]:
        """A trial job's report. ``final``: ACTIVE → COMPLETE with ``value`` (``Conflict`` if the trial already
        ended). Otherwise the value of ``step``; a step already reported keeps its first value, and a report to a
        trial that has ended changes nothing (the answer tells the job to stop). ``NotFound`` if ``job_id`` is not
        a trial's job."""

    @abstractmethod
    def finish_trial(self, sweep_id: str, number: int, state: TrialState, *, value: float | None = None,
                     message: str = "", now: float) -> TrialRecord:
        """ACTIVE → ``state`` (COMPLETE needs ``value``); a trial already ended is a ``Conflict``."""

    # -- leadership ---------------------------------------------------------------------------------------------
    @abstractmethod
    def acquire_lease(self, holder: str, *, ttl_s: float, now: float) -> int | None:
        """Take or renew the scheduler lease. Returns the epoch while ``holder`` leads, ``None`` if another holder's
        lease is still live. A new holder gets a strictly larger epoch than any before; the holder renewing keeps
        its epoch (also just after expiry, if nobody took the lease meanwhile). The first epoch is ≥ 1, and writes
        with epoch 0 pass only while no lease was ever granted (tests, single-process use)."""

    @abstractmethod
    def current_epoch(self) -> int: ...
