"""``MemoryStore``: the whole ``Store`` contract in process memory, for the simulator and for tests.

Why it exists beside the SQL store: the simulator drives tens of thousands of jobs through the real controller in
virtual time, and a database round trip per write would make a simulated day take hours. So every read the
controller makes each cycle is served from an index (jobs by state, by team; held units by node) rather than a
scan, and records are frozen dataclasses shared, never copied, because nothing can change them.

One lock makes every method atomic and the store safe to share between the API's threads and the controller.
Each method checks everything it can before it changes anything, so an error leaves the store as it was.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import Conflict, NotFound, StaleLeader
from ..model.cluster import Health, Node
from ..model.job import JobSpec
from ..model.team import TeamConfig
from ..model.reasons import Reason
from ..model.allocation import AdmittedAs, Placement
from ..model.sweep import Choice, SweepSpec, SweepState, TrialState
from .base import Store
from .ids import SWEEP_PREFIX, JobIdGenerator
from .records import (CheckpointRecord, Event, JobRecord, JobState, NodeRecord, SweepRecord, TrialRecord,
                      UsageRecord, room_wait)
from .sweep_rules import check_new_trial, check_same_params, check_sweep_finish, check_trial_finish

#: A unit is one GPU or MIG slice: (node, flavour, index into ``Node.devices[flavour]``).
Unit = tuple[str, str, int]


@dataclass(slots=True)
class _Lease:
    holder: str
    expires_at: float
    epoch: int


class MemoryStore(Store):
    """A ``Store`` held in memory. ``seed`` makes job ids repeat from run to run (the simulator wants that)."""

    def __init__(self, *, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._ids = JobIdGenerator(seed)
        self._nodes: dict[str, NodeRecord] = {}
        self._teams: dict[str, TeamConfig] = {}
        self._jobs: dict[str, JobRecord] = {}
        self._order: dict[str, tuple[float, int]] = {}      # job id → (submitted_at, sequence): the list order
        self._by_state: dict[JobState, dict[str, None]] = {state: {} for state in JobState}
        #: The ids in each set of states ``list_jobs`` was asked for, in list order, kept so as jobs move (the
        #: controller lists the pending and the holding jobs every step; sorting them each time was a twentieth
        #: of a replay).
        self._listed: dict[frozenset[JobState], list[str]] = {}
        self._by_team: dict[str, dict[str, None]] = {}
        self._idempotency: dict[str, str] = {}               # key → job id
        self._held: dict[Unit, str] = {}                      # unit → job id holding it
        self._checkpoints: dict[str, list[CheckpointRecord]] = {}
        self._usage: list[UsageRecord] = []
        self._events: list[Event] = []
        self._events_by_job: dict[str, list[int]] = {}       # job id → positions in ``_events``
        self._lease: _Lease | None = None
        self._epoch = 0
        self._sweep_ids = JobIdGenerator(seed, prefix=SWEEP_PREFIX)
        self._sweeps: dict[str, SweepRecord] = {}
        self._sweep_keys: dict[str, str] = {}                # key → sweep id
        self._trials: dict[str, dict[int, TrialRecord]] = {}  # sweep id → number → trial
        self._trial_of_job: dict[str, tuple[str, int]] = {}   # job id → (sweep id, number)

    # -- configuration -------------------------------------------------------------------------------------------
    def sync_nodes(self, nodes: Sequence[Node]) -> None:
        with self._lock:
            synced: dict[str, NodeRecord] = {}
            for node in nodes:
                old = self._nodes.get(node.name)
                synced[node.name] = NodeRecord(node) if old is None else dataclasses.replace(old, node=node)
            self._nodes = synced

    def list_nodes(self) -> list[NodeRecord]:
        with self._lock:
            return list(self._nodes.values())

    def set_node_health(self, name: str, health: Health, reason: str, now: float, *, expect: Health | None = None,
                        event: Event | None = None) -> NodeRecord:
        with self._lock:
            current = self._node(name)
            if expect is not None and current.health is not expect:
                raise Conflict(f"node {name} is {current.health}, not {expect}: its health changed meanwhile")
            record = dataclasses.replace(current, health=health, health_reason=reason, health_changed_at=now)
            self._nodes[name] = record
            if event is not None:
                self._append_event(event)
            return record

    def heartbeat(self, name: str, now: float, gpu_utilization: float | None = None) -> None:
        with self._lock:
            self._nodes[name] = dataclasses.replace(self._node(name), heartbeat_at=now,
                                                    gpu_utilization=gpu_utilization)

    def sync_teams(self, teams: Sequence[TeamConfig]) -> None:
        with self._lock:
            self._teams = {team.name: team for team in teams}

    def list_teams(self) -> list[TeamConfig]:
        with self._lock:
            return list(self._teams.values())

    # -- jobs ----------------------------------------------------------------------------------------------------
    def submit(self, spec: JobSpec, *, user: str, now: float, idempotency_key: str | None = None) -> JobRecord:
        with self._lock:
            if idempotency_key is not None and idempotency_key in self._idempotency:
                first = self._jobs[self._idempotency[idempotency_key]]
                if first.spec != spec:
                    raise Conflict(f"Idempotency-Key {idempotency_key!r} was used for job {first.id} "
                                   f"with a different spec")
                return first
            record = self._insert(spec, user, now)
            if idempotency_key is not None:
                self._idempotency[idempotency_key] = record.id
            return record

    def get(self, job_id: str) -> JobRecord:
        with self._lock:
            return self._job(job_id)

    def list_jobs(self, *, team: str | None = None, states: Iterable[JobState] | None = None,
                  limit: int | None = None) -> list[JobRecord]:
        with self._lock:
            ordered: list[str]
            if states is None:
                ordered = self._in_order(self._by_team.get(team, {}) if team is not None else self._jobs)
            elif team is None:
                ordered = self._listed_in(frozenset(states))
            else:
                wanted = set(states)
                team_ids = self._by_team.get(team, {})
                if len(team_ids) <= sum(len(self._by_state[state]) for state in wanted):
                    ordered = self._in_order(i for i in team_ids if self._jobs[i].state in wanted)
                else:
                    ordered = self._in_order(i for state in wanted for i in self._by_state[state]
                                             if self._jobs[i].spec.team == team)
            if limit is not None:
                ordered = ordered[:max(limit, 0)]
            return list(map(self._jobs.__getitem__, ordered))   # every pass lists every pending job: no Python loop

    def bind(self, job_id: str, placement: Placement, admitted_as: AdmittedAs, *, epoch: int,
             now: float) -> JobRecord:
        with self._lock:
            self._fence(epoch)
            job = self._job(job_id)
            if job.state is not JobState.PENDING:
                raise Conflict(f"job {job_id} is {job.state}, not PENDING: it cannot be bound")
            units = self._units_of(job, placement)
            for unit in units:
                holder = self._held.get(unit)
                if holder is not None:
                    raise Conflict(f"unit {unit[2]} of {unit[1]} on node {unit[0]} is held by job {holder}; "
                                   f"job {job_id} cannot be bound to it")
            for unit in units:
                self._held[unit] = job_id
            return self._put(dataclasses.replace(
                job, state=JobState.ADMITTED, placement=placement, admitted_as=admitted_as, admitted_at=now,
                labelled_at=None, started_at=None, finished_at=None, terminate_by=None, requeue_on_exit=False,
                epoch=epoch, wait_reason=None, room_wait_since=None, room_waited_s=0.0, wait_message="",
                queue_position=None, estimated_start=None, idle_since=None, idle_limit_s=None))

    def relabel(self, job_id: str, admitted_as: AdmittedAs, *, epoch: int, now: float) -> JobRecord:
        with self._lock:
            self._fence(epoch)
            job = self._job(job_id)
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state} and holds no units to relabel")
            if admitted_as is AdmittedAs.SCAVENGER or job.admitted_as is AdmittedAs.SCAVENGER:
                raise Conflict(f"job {job_id}: scavenger work is outside quota and keeps its label")
            assert job.placement is not None and job.admitted_as is not None and job.admitted_at is not None
            if admitted_as is job.admitted_as:
                return job
            self._usage.append(self._usage_record(job, now))
            return self._put(dataclasses.replace(job, admitted_as=admitted_as, labelled_at=max(now, job.admitted_at)))

    def _usage_record(self, job: JobRecord, now: float) -> UsageRecord:
        """The usage of a job's units since it was last labelled, under that label."""
        assert job.placement is not None and job.admitted_as is not None and job.admitted_at is not None
        start = job.labelled_at if job.labelled_at is not None else job.admitted_at
        return UsageRecord(team=job.spec.team, job_id=job.id, flavour=job.placement.flavour,
                           admitted_as=job.admitted_as, start=start, end=max(now, start),
                           units=sum(len(pod.units) for pod in job.placement.pods))

    def mark_running(self, job_id: str, now: float) -> JobRecord:
        with self._lock:
            job = self._job(job_id)
            if job.state is not JobState.ADMITTED:
                raise Conflict(f"job {job_id} is {job.state}, not ADMITTED: it cannot start running")
            return self._put(dataclasses.replace(job, state=JobState.RUNNING, started_at=now))

    def mark_terminating(self, job_id: str, *, requeue: bool, terminate_by: float, now: float,
                         epoch: int) -> JobRecord:
        """Also accepts a job already TERMINATING (a cancel after a preemption): the earlier deadline stands, and it
        is requeued on exit only if every signal asked for that."""
        with self._lock:
            self._fence(epoch)
            job = self._job(job_id)
            if job.state is JobState.TERMINATING:
                assert job.terminate_by is not None
                return self._put(dataclasses.replace(job, terminate_by=min(job.terminate_by, terminate_by),
                                                     requeue_on_exit=job.requeue_on_exit and requeue))
            if job.state not in (JobState.ADMITTED, JobState.RUNNING):
                raise Conflict(f"job {job_id} is {job.state}: only an ADMITTED or RUNNING job can be terminated")
            return self._put(dataclasses.replace(job, state=JobState.TERMINATING, terminate_by=terminate_by,
                                                 requeue_on_exit=requeue))

    def release(self, job_id: str, *, state: JobState, now: float, epoch: int, exit_code: int | None = None,
                message: str = "", infra_fault: bool = False, own_fault: bool = False,
                restart_block: str | None = None, avoid_nodes: Iterable[str] = ()) -> JobRecord:
        with self._lock:
            self._fence(epoch)
            job = self._job(job_id)
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state} and holds no units to release")
            if state.holds_units:
                raise Conflict(f"release moves a job to PENDING or a finished state, not {state}")
            assert job.placement is not None and job.admitted_as is not None and job.admitted_at is not None
            for unit in _units(job.placement):
                if self._held.get(unit) == job_id:
                    del self._held[unit]
            self._usage.append(self._usage_record(job, now))
            if state is JobState.PENDING and job.cancel_requested:
                # A cancel answered while the gang stopped for another reason wins: requeueing would forget it.
                released = dataclasses.replace(
                    job, state=JobState.CANCELLED, finished_at=now, terminate_by=None, requeue_on_exit=False,
                    exit_code=exit_code, message=f"cancelled ({message})" if message else "cancelled",
                    checkpoint_requested=False)
            elif state is JobState.PENDING:
                released = dataclasses.replace(
                    job, state=state, queued_at=now, front_of_queue=True, placement=None, admitted_as=None,
                    admitted_at=None, labelled_at=None, started_at=None, terminate_by=None, requeue_on_exit=False,
                    restarts=job.restarts + (1 if own_fault else 0),
                    infra_restarts=job.infra_restarts + (1 if infra_fault and not own_fault else 0),
                    preemptions=job.preemptions + (0 if infra_fault or own_fault else 1),
                    restart_block=restart_block, avoid_nodes=frozenset(avoid_nodes), exit_code=exit_code,
                    message=message, checkpoint_requested=False, cancel_requested=False)
            else:
                released = dataclasses.replace(
                    job, state=state, finished_at=now, terminate_by=None, requeue_on_exit=False,
                    exit_code=exit_code, message=message, checkpoint_requested=False)
            return self._put(released)

    def set_waits(self, waits: Sequence[tuple[str, Reason, str, int, float | None]], now: float, *,
                  events: Sequence[Event] = ()) -> list[Event]:
        """A job no longer pending when its wait arrives (cancelled meanwhile) is left alone: the cycle was
        computed before that happened, and the next one will not mention it."""
        with self._lock:
            jobs = self._jobs
            for wait in waits:
                if wait[0] not in jobs:
                    raise NotFound(f"no job {wait[0]!r}")
            stored = [self._append_event(event) for event in events]
            for job_id, reason, message, position, estimated_start in waits:
                job = self._jobs[job_id]
                if job.state is not JobState.PENDING:
                    continue
                if (job.queue_position == position and job.wait_reason == reason and job.wait_message == message
                        and job.estimated_start == estimated_start):
                    continue                     # unchanged (compared field by field: a long queue, every pass)
                since, waited_s = room_wait(job.room_wait_since, job.room_waited_s, reason, now)
                self._jobs[job_id] = job.with_wait(reason, message, position, estimated_start, since, waited_s)
            return stored

    def request_cancel(self, job_id: str, now: float) -> JobRecord:
        """Cancelling a cancelled job returns it unchanged; cancelling one that ended otherwise is a ``Conflict``."""
        with self._lock:
            return self._cancel(self._job(job_id), now)

    def request_checkpoint(self, job_id: str, now: float) -> JobRecord:
        with self._lock:
            job = self._job(job_id)
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state}: only a job holding GPUs can checkpoint")
            return self._put(dataclasses.replace(job, checkpoint_requested=True))

    def clear_checkpoint_request(self, job_id: str) -> None:
        with self._lock:
            job = self._job(job_id)
            if job.checkpoint_requested:
                self._put(dataclasses.replace(job, checkpoint_requested=False))

    def set_idle_clock(self, job_id: str, idle_since: float | None, idle_limit_s: float | None) -> JobRecord:
        with self._lock:
            job = self._job(job_id)
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state}: only a job holding a slice has an idle clock")
            if (job.idle_since, job.idle_limit_s) == (idle_since, idle_limit_s):
                return job
            return self._put(dataclasses.replace(job, idle_since=idle_since, idle_limit_s=idle_limit_s))

    def add_attained(self, job_id: str, gpu_seconds: float) -> None:
        with self._lock:
            job = self._job(job_id)
            self._put(dataclasses.replace(job, attained_gpu_s=job.attained_gpu_s + gpu_seconds))

    # -- checkpoints, usage, events -----------------------------------------------------------------------------
    def record_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        """The newest verified checkpoint (by ``written_at``; a tie goes to the later call) is ``last_checkpoint``."""
        with self._lock:
            job = self._job(checkpoint.job_id)
            self._checkpoints.setdefault(job.id, []).append(checkpoint)
            last = job.last_checkpoint
            if checkpoint.verified and (last is None or checkpoint.written_at >= last.written_at):
                self._put(dataclasses.replace(job, last_checkpoint=checkpoint))

    def checkpoints(self, job_id: str) -> list[CheckpointRecord]:
        with self._lock:
            self._job(job_id)
            return list(self._checkpoints.get(job_id, ()))

    def usage(self, *, team: str | None = None, since: float | None = None,
              until: float | None = None) -> list[UsageRecord]:
        """Records whose interval ended in ``[since, until)``, in the order they were written."""
        with self._lock:
            return [u for u in self._usage
                    if (team is None or u.team == team) and (since is None or u.end >= since)
                    and (until is None or u.end < until)]

    def append_event(self, event: Event) -> Event:
        with self._lock:
            return self._append_event(event)

    def _append_event(self, event: Event) -> Event:
        """Under the lock."""
        stored = dataclasses.replace(event, id=len(self._events) + 1)
        if stored.job_id is not None:
            self._events_by_job.setdefault(stored.job_id, []).append(len(self._events))
        self._events.append(stored)
        return stored

    def events(self, *, job_id: str | None = None, after_id: int | None = None,
               limit: int | None = None) -> list[Event]:
        """Oldest first; ``after_id`` pages forward from the last id a reader saw."""
        with self._lock:
            # Ids are positions + 1, so the first event after ``after_id`` sits at index ``after_id``.
            start = 0 if after_id is None else min(max(after_id, 0), len(self._events))
            if job_id is None:
                stop = len(self._events) if limit is None else min(len(self._events), start + max(limit, 0))
                return self._events[start:stop]
            positions = self._events_by_job.get(job_id, [])
            first = bisect.bisect_left(positions, start)
            chosen = positions[first:] if limit is None else positions[first:first + max(limit, 0)]
            return [self._events[p] for p in chosen]

    # -- leadership ---------------------------------------------------------------------------------------------
    def acquire_lease(self, holder: str, *, ttl_s: float, now: float) -> int | None:
        """The holder of a lease renews it at the same epoch, even just after it lapsed if nobody took it since."""
        with self._lock:
            lease = self._lease
            if lease is not None and lease.holder != holder and now < lease.expires_at:
                return None
            if lease is None or lease.holder != holder:
                self._epoch += 1
                self._lease = _Lease(holder, now + ttl_s, self._epoch)
            else:
                lease.expires_at = now + ttl_s
            return self._epoch

    def current_epoch(self) -> int:
        with self._lock:
            return self._epoch

    # -- sweeps -------------------------------------------------------------------------------------------------
    def create_sweep(self, spec: SweepSpec, *, user: str, now: float,
                     idempotency_key: str | None = None) -> SweepRecord:
        with self._lock:
            if idempotency_key is not None and idempotency_key in self._sweep_keys:
                first = self._sweeps[self._sweep_keys[idempotency_key]]
                if first.spec != spec:
                    raise Conflict(f"Idempotency-Key {idempotency_key!r} was used for sweep {first.id} "
                                   f"with a different spec")
                return first
            sweep_id = self._sweep_ids.next(self._sweeps)
            record = SweepRecord(id=sweep_id, spec=spec, user=user, state=SweepState.RUNNING, created_at=now)
            self._sweeps[sweep_id] = record
            self._trials[sweep_id] = {}
            if idempotency_key is not None:
                self._sweep_keys[idempotency_key] = sweep_id
            return record

    def get_sweep(self, sweep_id: str) -> SweepRecord:
        with self._lock:
            return self._sweep(sweep_id)

    def list_sweeps(self, *, team: str | None = None, states: Iterable[SweepState] | None = None,
                    limit: int | None = None) -> list[SweepRecord]:
        with self._lock:
            wanted = None if states is None else set(states)
            out = [s for s in self._sweeps.values()
                   if (team is None or s.team == team) and (wanted is None or s.state in wanted)]
            return out if limit is None else out[:max(limit, 0)]

    def cancel_sweep(self, sweep_id: str, now: float) -> SweepRecord:
        with self._lock:
            sweep = self._sweep(sweep_id)
            if sweep.state in (SweepState.CANCELLING, SweepState.CANCELLED):
                return sweep
            if sweep.state is not SweepState.RUNNING:
                raise Conflict(f"sweep {sweep_id} already ended as {sweep.state}; there is nothing to cancel")
            trials = self._trials[sweep_id]
            for number, trial in trials.items():
                if trial.state is TrialState.ACTIVE:
                    trials[number] = dataclasses.replace(trial, state=TrialState.FAILED, finished_at=now,
                                                         message="the sweep was cancelled")
                    job = self._jobs[trial.job_id]
                    if not job.state.finished:
                        self._cancel(job, now)
            record = dataclasses.replace(sweep, state=SweepState.CANCELLING)
            self._sweeps[sweep_id] = record
            return record

    def finish_sweep(self, sweep_id: str, state: SweepState, message: str, now: float) -> SweepRecord:
        with self._lock:
            sweep = self._sweep(sweep_id)
            check_sweep_finish(sweep, state)
            record = dataclasses.replace(sweep, state=state, message=message, finished_at=now)
            self._sweeps[sweep_id] = record
            return record

    def add_trial(self, sweep_id: str, number: int, params: dict[str, Choice], job: JobSpec, *,
                  now: float) -> tuple[TrialRecord, JobRecord]:
        with self._lock:
            sweep = self._sweep(sweep_id)
            existing = self._trials[sweep_id].get(number)
            if existing is not None:
                check_same_params(sweep_id, existing, params)
                return existing, self._jobs[existing.job_id]
            check_new_trial(sweep, number)
            record = self._insert(job, sweep.user, now)
            trial = TrialRecord(sweep_id=sweep_id, number=number, job_id=record.id, params=dict(params),
                                state=TrialState.ACTIVE, created_at=now)
            self._trials[sweep_id][number] = trial
            self._trial_of_job[record.id] = (sweep_id, number)
            return trial, record

    def list_trials(self, sweep_id: str) -> list[tuple[TrialRecord, JobRecord]]:
        with self._lock:
            self._sweep(sweep_id)
            return [(t, self._jobs[t.job_id]) for _, t in sorted(self._trials[sweep_id].items())]

    def report_trial(self, job_id: str, *, step: int | None, value: float, final: bool,
                     now: float) -> tuple[TrialRecord, JobRecord]:
        with self._lock:
            where = self._trial_of_job.get(job_id)
            if where is None:
                self._job(job_id)
                raise NotFound(f"job {job_id} is not a sweep trial")
            sweep_id, number = where
            trial = self._trials[sweep_id][number]
            if final:
                if trial.state is not TrialState.ACTIVE:
                    raise Conflict(f"trial {number} of sweep {sweep_id} already ended as {trial.state}: "
                                   f"its final value is not recorded")
                trial = dataclasses.replace(trial, state=TrialState.COMPLETE, value=value, finished_at=now)
            elif step is None:
                raise ValueError("an intermediate report needs a step")
            elif trial.state is TrialState.ACTIVE and all(s != step for s, _ in trial.intermediate):
                trial = dataclasses.replace(trial, intermediate=tuple(sorted((*trial.intermediate, (step, value)))))
            self._trials[sweep_id][number] = trial
            return trial, self._jobs[job_id]

    def finish_trial(self, sweep_id: str, number: int, state: TrialState, *, value: float | None = None,
                     message: str = "", now: float) -> TrialRecord:
        with self._lock:
            self._sweep(sweep_id)
            trial = self._trials[sweep_id].get(number)
            if trial is None:
                raise NotFound(f"sweep {sweep_id} has no trial {number}")
            check_trial_finish(trial, state, value)
            trial = dataclasses.replace(trial, state=state, value=value, message=message, finished_at=now)
            self._trials[sweep_id][number] = trial
            return trial

    # -- helpers (called with the lock held) --------------------------------------------------------------------
    def _insert(self, spec: JobSpec, user: str, now: float) -> JobRecord:
        """A new PENDING job in every index."""
        job_id = self._ids.next(self._jobs)
        record = JobRecord(id=job_id, spec=spec, user=user, state=JobState.PENDING, submitted_at=now, queued_at=now)
        self._jobs[job_id] = record
        self._order[job_id] = (now, len(self._order))
        self._by_state[JobState.PENDING][job_id] = None
        self._moved(job_id, None, JobState.PENDING)
        self._by_team.setdefault(spec.team, {})[job_id] = None
        return record

    def _cancel(self, job: JobRecord, now: float) -> JobRecord:
        if job.state is JobState.PENDING:
            return self._put(dataclasses.replace(job, state=JobState.CANCELLED, finished_at=now,
                                                 cancel_requested=True, message="cancelled while pending"))
        if job.state is JobState.CANCELLED:
            return job
        if job.state.finished:
            raise Conflict(f"job {job.id} already ended as {job.state}; there is nothing to cancel")
        return self._put(dataclasses.replace(job, cancel_requested=True))

    def _sweep(self, sweep_id: str) -> SweepRecord:
        try:
            return self._sweeps[sweep_id]
        except KeyError:
            raise NotFound(f"no sweep {sweep_id!r}") from None

    def _fence(self, epoch: int) -> None:
        if epoch < self._epoch:
            raise StaleLeader(f"epoch {epoch} is older than the current lease's epoch {self._epoch}: "
                              f"this scheduler is no longer the leader")

    def _job(self, job_id: str) -> JobRecord:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise NotFound(f"no job {job_id!r}") from None

    def _node(self, name: str) -> NodeRecord:
        try:
            return self._nodes[name]
        except KeyError:
            raise NotFound(f"no node {name!r}") from None

    def _put(self, record: JobRecord) -> JobRecord:
        old = self._jobs[record.id]
        if old.state is not record.state:
            del self._by_state[old.state][record.id]
            self._by_state[record.state][record.id] = None
            self._moved(record.id, old.state, record.state)
        self._jobs[record.id] = record
        return record

    def _in_order(self, ids: Iterable[str]) -> list[str]:
        return sorted(ids, key=self._order.__getitem__)

    def _listed_in(self, states: frozenset[JobState]) -> list[str]:
        """The ids of the jobs in ``states``, in list order: kept from one call to the next (``_moved``)."""
        listed = self._listed.get(states)
        if listed is None:
            listed = self._listed[states] = self._in_order(i for state in states for i in self._by_state[state])
        return listed

    def _moved(self, job_id: str, old: JobState | None, new: JobState) -> None:
        """Keep each listed set of states in list order as a job enters or leaves it."""
        order = self._order.__getitem__
        for states, ids in self._listed.items():
            was = old in states
            if was is (new in states):
                continue
            if was:
                del ids[bisect.bisect_left(ids, order(job_id), key=order)]
            else:
                bisect.insort(ids, job_id, key=order)

    def _units_of(self, job: JobRecord, placement: Placement) -> list[Unit]:
        """The units ``placement`` names, after checking it is a placement of this job's shape on known nodes."""
        spec = job.spec
        if placement.flavour not in spec.flavour:
            raise Conflict(f"job {job.id} asks for {', '.join(spec.flavour)}, not {placement.flavour}")
        if len(placement.pods) != spec.pods or any(len(p.units) != spec.gpus_per_pod for p in placement.pods):
            raise Conflict(f"placement of job {job.id} is not {spec.pods} pods × {spec.gpus_per_pod} units")
        for pod in placement.pods:
            available = len(self._node(pod.node).node.devices.get(placement.flavour, ()))
            for index in pod.units:
                if not 0 <= index < available:
                    raise Conflict(f"node {pod.node} has no unit {index} of {placement.flavour}")
        units = _units(placement)
        if len(set(units)) != len(units):
            raise Conflict(f"placement of job {job.id} names one unit twice")
        return units


def _units(placement: Placement) -> list[Unit]:
    return [(pod.node, placement.flavour, index) for pod in placement.pods for index in pod.units]
