"""``SqlStore``: the ``Store`` (and ``TokenStore``) contract on SQLite or PostgreSQL, through SQLAlchemy 2 Core.

Every method is one transaction (``Database.write``/``read``), checks everything before it writes, and so either
happens whole or not at all. Two guarantees hold across processes, not just threads, because the database itself
enforces them:

* **No unit bound twice.** ``bound_units`` is keyed by (node, flavour, unit); a bind inserts one row per unit, so
  of two binds of one GPU only one can commit. The loser gets ``Conflict`` naming the holder.
* **Fencing.** A fenced write (bind, mark_terminating, release) reads the lease's epoch in its own transaction —
  under a share lock on PostgreSQL, which ``acquire_lease``'s update must wait for — and raises ``StaleLeader``
  if the caller's epoch is older. So once a new leader's epoch is committed, no write of the old one can commit.

Records are built from rows on every read; specs, which never change after submission, are parsed once per
process and cached, since the controller reads every pending job each cycle.
"""

from __future__ import annotations

import json
import operator
import threading
from collections.abc import Container, Iterable, Sequence
from typing import Any

from sqlalchemy import (
    Connection, CursorResult, Row, Table, and_, bindparam, delete, func, insert, select, text, update,
)
from sqlalchemy.exc import IntegrityError

from ...auth.tokens import Identity, TokenStore, hash_token, new_token
from ...errors import Conflict, NotFound, StaleLeader
from ...model.cluster import Health, Node
from ...model.job import JobSpec
from ...model.team import TeamConfig
from ...model.reasons import Reason
from ...model.allocation import AdmittedAs, Placement
from ...model.sweep import Choice, SweepSpec, SweepState, TrialState
from ..base import Store
from ..ids import SWEEP_PREFIX, JobIdGenerator
from ..records import (CheckpointRecord, Event, JobRecord, JobState, NodeRecord, SweepRecord, TrialRecord,
                       UsageRecord, room_wait)
from ..sweep_rules import check_new_trial, check_same_params, check_sweep_finish, check_trial_finish
from . import codec
from ..health import StoreHealth
from .database import Database
from .schema import (
    SCHEDULER_LEASE, allocations, api_tokens, bound_units, checkpoints, events, jobs, lease, nodes, sweep_trial_values,
    sweep_trials, sweeps, teams, usage,
)

_CHUNK = 500
#: Any constant: PostgreSQL's advisory lock that orders event appends (ids then commit in id order).
_EVENTS_LOCK_KEY = 0x5_40A1_E7


class LeaseInfo:
    """The scheduler lease as stored: who holds it, at which epoch, until when."""

    __slots__ = ("epoch", "expires_at", "holder")

    def __init__(self, holder: str | None, epoch: int, expires_at: float | None) -> None:
        self.holder = holder
        self.epoch = epoch
        self.expires_at = expires_at

    def __repr__(self) -> str:
        return f"LeaseInfo(holder={self.holder!r}, epoch={self.epoch}, expires_at={self.expires_at})"


def _new_id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    assert key is not None, "an INSERT of one row has a primary key"
    return int(key[0])


class _Taken(Container[str]):
    """Ids already in the database (jobs, or another table with ``seq`` and ``id``), asked one at a time (a
    collision is rare: ids are random)."""

    def __init__(self, conn: Connection, table: Table = jobs) -> None:
        self._conn = conn
        self._table = table

    def __contains__(self, job_id: object) -> bool:
        query = _ID_TAKEN if self._table is jobs else select(self._table.c.seq).where(
            self._table.c.id == bindparam("id"))
        return self._conn.execute(query, {"id": job_id}).first() is not None


_CK = [checkpoints.c.step.label("ck_step"), checkpoints.c.uri.label("ck_uri"),
       checkpoints.c.bytes.label("ck_bytes"), checkpoints.c.written_at.label("ck_written_at"),
       checkpoints.c.verified.label("ck_verified"), checkpoints.c.cost_s.label("ck_cost_s")]
_INSERT_EVENT = insert(events)
_SET_WAIT = ("UPDATE jobs SET wait_reason = ?, wait_message = ?, queue_position = ?, estimated_start = ?, "
             "room_wait_since = ?, room_waited_s = ? WHERE id = ?")
#: One encoder for every event's data: ``json.dumps`` with options builds a new one per call, which a cycle's 2,000
#: wait events would pay 2,000 times.
_event_json = json.JSONEncoder(sort_keys=True, default=str).encode
_EVENT_COLUMNS = ("at", "kind", "reason", "message", "job_id", "node", "team", "data")
_SQLITE_INSERT_EVENTS = (f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}) "
                         f"VALUES ({', '.join('?' for _ in _EVENT_COLUMNS)})")
#: PostgreSQL: a cycle's events as one array per column, inserted in their order.
_PG_INSERT_EVENTS = (
    f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}) SELECT {', '.join(_EVENT_COLUMNS)} "
    "FROM unnest(%s::float8[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[]) "
    f"WITH ORDINALITY AS e({', '.join(_EVENT_COLUMNS)}, n) ORDER BY n RETURNING id")
#: PostgreSQL: a cycle's changed waits as one array per column (the order of ``_SET_WAIT``'s parameters).
_PG_SET_WAITS = (
    "UPDATE jobs SET wait_reason = w.wait_reason, wait_message = w.wait_message, queue_position = w.queue_position, "
    "estimated_start = w.estimated_start, room_wait_since = w.room_wait_since, room_waited_s = w.room_waited_s "
    "FROM unnest(%s::text[], %s::text[], %s::int[], %s::float8[], %s::float8[], %s::float8[], %s::text[]) "
    "AS w(wait_reason, wait_message, queue_position, estimated_start, room_wait_since, room_waited_s, id) "
    "WHERE jobs.id = w.id")
_JOB_SELECT = select(jobs, *_CK).select_from(
    jobs.outerjoin(checkpoints, jobs.c.last_checkpoint_id == checkpoints.c.id))
# The submission path's statements, built once with bound parameters: building a statement per call (``.values``,
# ``.where`` on a literal) costs more than the SQLite write itself, and submission is the API's hot path.
_ID_TAKEN = select(jobs.c.seq).where(jobs.c.id == bindparam("id"))
_JOB_BY_KEY = _JOB_SELECT.where(jobs.c.idempotency_key == bindparam("key"))
_JOB_INSERT = insert(jobs)
#: Column values to their enums by a dict lookup (an enum's constructor costs more, 2,300 times in a first cycle).
_JOB_STATES = {state.value: state for state in JobState}
_ADMITTED_AS = {admitted.value: admitted for admitted in AdmittedAs}
_REASONS = {reason.value: reason for reason in Reason}
_NO_NODES: frozenset[str] = frozenset()
#: A job row's columns by position, in the order ``_build_job_record`` unpacks them: by name (``row.state``) each
#: costs about a microsecond, and a first cycle after a start builds 2,300 records of 40 columns each.
_JOB_KEYS = tuple(column.key for column in _JOB_SELECT.selected_columns)
_JOB_ID = _JOB_KEYS.index("id")
_RECORD_FIELDS = operator.itemgetter(*(_JOB_KEYS.index(name) for name in (
    "id", "spec", "user_name", "state", "submitted_at", "queued_at", "front_of_queue", "admitted_as", "placement",
    "admitted_at", "labelled_at", "started_at", "finished_at", "terminate_by", "requeue_on_exit", "restarts",
    "infra_restarts", "preemptions", "attained_gpu_s", "restart_block", "avoid_nodes", "wait_reason",
    "room_wait_since", "room_waited_s", "wait_message", "queue_position", "estimated_start", "exit_code", "message",
    "cancel_requested", "checkpoint_requested", "epoch", "idle_since", "idle_limit_s", "ck_step", "ck_uri",
    "ck_bytes", "ck_written_at", "ck_verified", "ck_cost_s")))


class SqlStore(Store, TokenStore):
    """A ``Store`` in a SQL database. ``url``: ``sqlite:///path.db`` or ``postgresql+psycopg://user@host/db``.

    The schema must be at the newest migration: use ``open_store(url)``, which migrates first, or ``migrate()``.
    Safe to share between threads and between processes.
    """

    def __init__(self, url: str, *, seed: int | None = None, echo: bool = False) -> None:
        self.db = Database(url, echo=echo)
        self._ids = JobIdGenerator(seed)
        self._ids_lock = threading.Lock()
        self._specs: dict[str, JobSpec] = {}
        self._records: dict[str, tuple[tuple[Any, ...], JobRecord]] = {}
        self._sweep_ids = JobIdGenerator(seed, prefix=SWEEP_PREFIX)
        self._sweep_specs: dict[str, SweepSpec] = {}
        self._nodes: dict[str, Node] = {}
        self._node_records: dict[str, tuple[tuple[Any, ...], NodeRecord]] = {}
        self._teams: dict[str, TeamConfig] = {}

    @property
    def url(self) -> str:
        return self.db.url

    def migrate(self, revision: str = "head") -> None:
        """Bring the schema to ``revision`` (Alembic, shipped in ``scheduler_core/migrations``)."""
        from .migrate import upgrade
        upgrade(self.db, revision)

    @property
    def health(self) -> StoreHealth:
        return self.db.health

    def probe_write(self) -> None:
        # A real write (SQLite writes the page, PostgreSQL a new row version) of a value unchanged.
        self.db.write(lambda conn: conn.execute(
            update(lease).where(lease.c.name == SCHEDULER_LEASE).values(epoch=lease.c.epoch)), probe=True)

    def dispose(self) -> None:
        """Close the connection pool (running jobs are unaffected: they live in the executor)."""
        self.db.dispose()

    # -- configuration -------------------------------------------------------------------------------------------
    def sync_nodes(self, nodes_: Sequence[Node]) -> None:
        def run(conn: Connection) -> None:
            existing: set[str] = set(conn.execute(select(nodes.c.name)).scalars())
            wanted = {node.name for node in nodes_}
            gone = existing - wanted
            if gone:
                conn.execute(delete(nodes).where(nodes.c.name.in_(gone)))
            for position, node in enumerate(nodes_):
                config = codec.node_to_json(node)
                # The very nodes configured, as MemoryStore keeps them: list_nodes need not parse 512 configs.
                self._nodes[config] = node
                if node.name in existing:
                    conn.execute(update(nodes).where(nodes.c.name == node.name)
                                 .values(position=position, config=config))
                else:
                    conn.execute(insert(nodes).values(name=node.name, position=position, config=config,
                                                      health=Health.READY.value, health_reason=""))
        self.db.write(run)

    def list_nodes(self) -> list[NodeRecord]:
        rows = self.db.read(lambda conn: conn.execute(select(nodes).order_by(nodes.c.position)).all())
        return [self._node_record(row) for row in rows]

    def set_node_health(self, name: str, health: Health, reason: str, now: float, *, expect: Health | None = None,
                        event: Event | None = None) -> NodeRecord:
        def run(conn: Connection) -> NodeRecord:
            where = nodes.c.name == name
            if expect is not None:
                where = and_(where, nodes.c.health == expect.value)
            changed = conn.execute(update(nodes).where(where).values(
                health=health.value, health_reason=reason, health_changed_at=now))
            if changed.rowcount == 0:
                row = conn.execute(select(nodes.c.health).where(nodes.c.name == name)).first()
                if row is None:
                    raise NotFound(f"no node {name!r}")
                raise Conflict(f"node {name} is {row.health}, not {expect}: its health changed meanwhile")
            if event is not None:
                self._insert_events(conn, [event])
            return self._node_record(conn.execute(select(nodes).where(nodes.c.name == name)).one())
        return self.db.write(run)

    def heartbeat(self, name: str, now: float, gpu_utilization: float | None = None) -> None:
        def run(conn: Connection) -> None:
            changed = conn.execute(update(nodes).where(nodes.c.name == name).values(
                heartbeat_at=now, gpu_utilization=gpu_utilization))
            if changed.rowcount == 0:
                raise NotFound(f"no node {name!r}")
        self.db.write(run)

    def sync_teams(self, teams_: Sequence[TeamConfig]) -> None:
        configs = [codec.dumps(team) for team in teams_]

        def run(conn: Connection) -> None:
            conn.execute(delete(teams))
            if teams_:
                conn.execute(insert(teams), [
                    {"name": team.name, "position": position, "config": config}
                    for position, (team, config) in enumerate(zip(teams_, configs, strict=True))])
        self.db.write(run)
        self._teams.update(zip(configs, teams_))

    def list_teams(self) -> list[TeamConfig]:
        # Every step lists the teams: each config is validated once per process (teams are frozen models).
        rows = self.db.read(lambda conn: conn.execute(select(teams.c.config).order_by(teams.c.position)).all())
        return [self._team(row[0]) for row in rows]

    def _team(self, config: str) -> TeamConfig:
        team = self._teams.get(config)
        if team is None:
            team = self._teams[config] = TeamConfig.model_validate(json.loads(config))
        return team

    # -- jobs ----------------------------------------------------------------------------------------------------
    def submit(self, spec: JobSpec, *, user: str, now: float, idempotency_key: str | None = None) -> JobRecord:
        spec_json = codec.spec_to_json(spec)

        def run(conn: Connection) -> JobRecord:
            if idempotency_key is not None:
                row = conn.execute(_JOB_BY_KEY, {"key": idempotency_key}).first()
                if row is not None:
                    first = self._job_record(row)
                    if first.spec != spec:
                        raise Conflict(f"Idempotency-Key {idempotency_key!r} was used for job {first.id} "
                                       f"with a different spec")
                    return first
            return self._insert_job(conn, spec, spec_json, user=user, now=now, idempotency_key=idempotency_key)

        # Two processes may pick the same id, or race on one idempotency key: the loser retries and then sees
        # the winner's row.
        for attempt in range(5):
            try:
                return self.db.write(run)
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def get(self, job_id: str) -> JobRecord:
        return self.db.read(lambda conn: self._job_record(self._job_row(conn, job_id)))

    def list_jobs(self, *, team: str | None = None, states: Iterable[JobState] | None = None,
                  limit: int | None = None) -> list[JobRecord]:
        query = _JOB_SELECT
        if states is not None:
            wanted = [state.value for state in states]
            if not wanted:
                return []
            query = query.where(jobs.c.state.in_(wanted))
        if team is not None:
            query = query.where(jobs.c.team == team)
        query = query.order_by(jobs.c.submitted_at, jobs.c.seq)
        if limit is not None:
            query = query.limit(max(limit, 0))
        rows = self.db.read(lambda conn: conn.execute(query).all())
        return [self._job_record(row) for row in rows]

    def bind(self, job_id: str, placement: Placement, admitted_as: AdmittedAs, *, epoch: int,
             now: float) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            self._fence(conn, epoch)
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if job.state is not JobState.PENDING:
                raise Conflict(f"job {job_id} is {job.state}, not PENDING: it cannot be bound")
            units = self._units_of(conn, job, placement)
            holders = self._holders(conn, placement.flavour, units)
            if holders:
                (node, flavour, unit), holder = next(iter(holders.items()))
                raise Conflict(f"unit {unit} of {flavour} on node {node} is held by job {holder}; "
                               f"job {job_id} cannot be bound to it")
            placement_json = codec.placement_to_json(placement)
            allocation_id = _new_id(conn.execute(insert(allocations).values(
                job_id=job_id, epoch=epoch, admitted_as=admitted_as.value, placement=placement_json,
                bound_at=now)))
            conn.execute(insert(bound_units), [
                {"node": node, "flavour": flavour, "unit": unit, "job_id": job_id, "allocation_id": allocation_id}
                for node, flavour, unit in units])
            conn.execute(update(jobs).where(jobs.c.id == job_id).values(
                state=JobState.ADMITTED.value, placement=placement_json, admitted_as=admitted_as.value,
                admitted_at=now, labelled_at=None, started_at=None, finished_at=None, terminate_by=None,
                requeue_on_exit=False, epoch=epoch, wait_reason=None, room_wait_since=None, room_waited_s=0.0, wait_message="",
                queue_position=None, estimated_start=None, idle_since=None, idle_limit_s=None))
            return self._job_record(self._job_row(conn, job_id))

        try:
            return self.db.write(run)
        except IntegrityError:
            # A concurrent bind (another thread or process) committed one of these units first.
            raise Conflict(self._lost_race_message(job_id, placement)) from None

    def relabel(self, job_id: str, admitted_as: AdmittedAs, *, epoch: int, now: float) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            self._fence(conn, epoch)
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state} and holds no units to relabel")
            if admitted_as is AdmittedAs.SCAVENGER or job.admitted_as is AdmittedAs.SCAVENGER:
                raise Conflict(f"job {job_id}: scavenger work is outside quota and keeps its label")
            assert job.admitted_at is not None
            if admitted_as is job.admitted_as:
                return job
            conn.execute(insert(usage).values(self._usage_row(job, now)))
            conn.execute(update(allocations).where(and_(allocations.c.job_id == job_id,
                                                        allocations.c.released_at.is_(None)))
                         .values(admitted_as=admitted_as.value))
            return self._update_job(conn, job_id, admitted_as=admitted_as.value,
                                    labelled_at=max(now, job.admitted_at))

        return self.db.write(run)

    @staticmethod
    def _usage_row(job: JobRecord, now: float) -> dict[str, object]:
        """The usage of a job's units since it was last labelled, under that label."""
        assert job.placement is not None and job.admitted_as is not None and job.admitted_at is not None
        start = job.labelled_at if job.labelled_at is not None else job.admitted_at
        return dict(team=job.spec.team, job_id=job.id, flavour=job.placement.flavour,
                    admitted_as=job.admitted_as.value, start_at=start, end_at=max(now, start),
                    units=sum(len(pod.units) for pod in job.placement.pods))

    def mark_running(self, job_id: str, now: float) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if job.state is not JobState.ADMITTED:
                raise Conflict(f"job {job_id} is {job.state}, not ADMITTED: it cannot start running")
            return self._update_job(conn, job_id, state=JobState.RUNNING.value, started_at=now)
        return self.db.write(run)

    def mark_terminating(self, job_id: str, *, requeue: bool, terminate_by: float, now: float,
                         epoch: int) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            self._fence(conn, epoch)
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if job.state is JobState.TERMINATING:
                assert job.terminate_by is not None
                return self._update_job(conn, job_id, terminate_by=min(job.terminate_by, terminate_by),
                                        requeue_on_exit=job.requeue_on_exit and requeue)
            if job.state not in (JobState.ADMITTED, JobState.RUNNING):
                raise Conflict(f"job {job_id} is {job.state}: only an ADMITTED or RUNNING job can be terminated")
            return self._update_job(conn, job_id, state=JobState.TERMINATING.value, terminate_by=terminate_by,
                                    requeue_on_exit=requeue)
        return self.db.write(run)

    def release(self, job_id: str, *, state: JobState, now: float, epoch: int, exit_code: int | None = None,
                message: str = "", infra_fault: bool = False, own_fault: bool = False,
                restart_block: str | None = None, avoid_nodes: Iterable[str] = ()) -> JobRecord:
        avoid = sorted(set(avoid_nodes))

        def run(conn: Connection) -> JobRecord:
            self._fence(conn, epoch)
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state} and holds no units to release")
            if state.holds_units:
                raise Conflict(f"release moves a job to PENDING or a finished state, not {state}")
            assert job.placement is not None and job.admitted_as is not None and job.admitted_at is not None
            conn.execute(delete(bound_units).where(bound_units.c.job_id == job_id))
            conn.execute(update(allocations).where(and_(allocations.c.job_id == job_id,
                                                        allocations.c.released_at.is_(None)))
                         .values(released_at=now))
            conn.execute(insert(usage).values(self._usage_row(job, now)))
            if state is JobState.PENDING and job.cancel_requested:
                # A cancel answered while the gang stopped for another reason (a failed launch, a node lost)
                # wins: requeueing would forget it.
                return self._update_job(conn, job_id, state=JobState.CANCELLED.value, finished_at=now,
                                        terminate_by=None, requeue_on_exit=False, exit_code=exit_code,
                                        message=f"cancelled ({message})" if message else "cancelled",
                                        checkpoint_requested=False)
            if state is JobState.PENDING:
                return self._update_job(
                    conn, job_id, state=state.value, queued_at=now, front_of_queue=True, placement=None,
                    admitted_as=None, admitted_at=None, labelled_at=None, started_at=None, terminate_by=None,
                    requeue_on_exit=False,
                    restarts=job.restarts + (1 if own_fault else 0),
                    infra_restarts=job.infra_restarts + (1 if infra_fault and not own_fault else 0),
                    preemptions=job.preemptions + (0 if infra_fault or own_fault else 1),
                    restart_block=restart_block, avoid_nodes=json.dumps(avoid), exit_code=exit_code,
                    message=message, checkpoint_requested=False, cancel_requested=False)
            return self._update_job(conn, job_id, state=state.value, finished_at=now, terminate_by=None,
                                    requeue_on_exit=False, exit_code=exit_code, message=message,
                                    checkpoint_requested=False)
        return self.db.write(run)

    def set_waits(self, waits: Sequence[tuple[str, Reason, str, int, float | None]], now: float, *,
                  events: Sequence[Event] = ()) -> list[Event]:
        """A job no longer pending is skipped; an unchanged wait is not rewritten (most are, cycle to cycle)."""
        if not waits:
            return self.append_events(events)

        columns = (jobs.c.id, jobs.c.state, jobs.c.wait_reason, jobs.c.wait_message, jobs.c.queue_position,
                   jobs.c.estimated_start, jobs.c.room_wait_since, jobs.c.room_waited_s)

        def run(conn: Connection) -> list[Event]:
            ids = list(dict.fromkeys(wait[0] for wait in waits))
            # The waits are of pending jobs: read those in one query (a 2,000-long IN list costs more than this),
            # then the few others by id.
            current: dict[str, tuple[Any, ...]] = {
                row[0]: tuple(row)
                for row in conn.execute(select(*columns).where(jobs.c.state == JobState.PENDING.value))}
            others = [job_id for job_id in ids if job_id not in current]
            for start in range(0, len(others), _CHUNK):
                for row in conn.execute(select(*columns).where(jobs.c.id.in_(others[start:start + _CHUNK]))):
                    current[row[0]] = tuple(row)
            missing = [job_id for job_id in ids if job_id not in current]
            if missing:
                raise NotFound(f"no job {missing[0]!r}")
            pending = JobState.PENDING.value
            changes: list[tuple[Any, ...]] = []
            for job_id, reason, message, position, estimated_start in waits:
                # By position (the columns above): a row's attributes cost a microsecond each, 2,000 times.
                _, state, old_reason, old_message, old_position, old_start, since, waited_s = current[job_id]
                if state != pending:
                    continue
                value = reason.value
                if (old_reason, old_message, old_position, old_start) == (value, message, position, estimated_start):
                    continue
                since, waited_s = room_wait(since, waited_s, reason, now)
                changes.append((value, message, position, estimated_start, since, waited_s, job_id))
            if changes and self.db.is_postgres:
                # One statement over arrays, one per column: 2,000 statements (even pipelined by the driver) cost
                # the client more than the server's work.
                conn.exec_driver_sql(_PG_SET_WAITS, tuple(list(column) for column in zip(*changes)))
            elif changes:
                # The driver's own executemany: SQLAlchemy's per-row parameter processing would cost more than
                # the 2,000 updates of a first cycle themselves.
                conn.exec_driver_sql(_SET_WAIT, changes)
            return self._insert_events(conn, events)
        return self.db.write(run)

    def request_cancel(self, job_id: str, now: float) -> JobRecord:
        return self.db.write(lambda conn: self._cancel(conn, job_id, now))

    def request_checkpoint(self, job_id: str, now: float) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state}: only a job holding GPUs can checkpoint")
            return self._update_job(conn, job_id, checkpoint_requested=True)
        return self.db.write(run)

    def clear_checkpoint_request(self, job_id: str) -> None:
        def run(conn: Connection) -> None:
            changed = conn.execute(update(jobs).where(jobs.c.id == job_id).values(checkpoint_requested=False))
            if changed.rowcount == 0:
                raise NotFound(f"no job {job_id!r}")
        self.db.write(run)

    def set_idle_clock(self, job_id: str, idle_since: float | None, idle_limit_s: float | None) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            job = self._job_record(self._job_row(conn, job_id, lock=True))
            if not job.state.holds_units:
                raise Conflict(f"job {job_id} is {job.state}: only a job holding a slice has an idle clock")
            if (job.idle_since, job.idle_limit_s) == (idle_since, idle_limit_s):
                return job
            return self._update_job(conn, job_id, idle_since=idle_since, idle_limit_s=idle_limit_s)
        return self.db.write(run)

    def add_attained(self, job_id: str, gpu_seconds: float) -> None:
        def run(conn: Connection) -> None:
            changed = conn.execute(update(jobs).where(jobs.c.id == job_id).values(
                attained_gpu_s=jobs.c.attained_gpu_s + gpu_seconds))
            if changed.rowcount == 0:
                raise NotFound(f"no job {job_id!r}")
        self.db.write(run)

    # -- checkpoints, usage, events -----------------------------------------------------------------------------
    def record_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        def run(conn: Connection) -> None:
            job = self._job_record(self._job_row(conn, checkpoint.job_id, lock=True))
            checkpoint_id = _new_id(conn.execute(insert(checkpoints).values(
                job_id=checkpoint.job_id, step=checkpoint.step, uri=checkpoint.uri, bytes=checkpoint.bytes,
                written_at=checkpoint.written_at, verified=checkpoint.verified,
                cost_s=checkpoint.cost_s)))
            last = job.last_checkpoint
            if checkpoint.verified and (last is None or checkpoint.written_at >= last.written_at):
                conn.execute(update(jobs).where(jobs.c.id == job.id).values(last_checkpoint_id=checkpoint_id))
        self.db.write(run)

    def checkpoints(self, job_id: str) -> list[CheckpointRecord]:
        def run(conn: Connection) -> list[CheckpointRecord]:
            self._job_row(conn, job_id)
            rows = conn.execute(select(checkpoints).where(checkpoints.c.job_id == job_id)
                                .order_by(checkpoints.c.id)).all()
            return [CheckpointRecord(job_id=row.job_id, step=row.step, uri=row.uri, bytes=row.bytes,
                                     written_at=row.written_at, verified=bool(row.verified), cost_s=row.cost_s)
                    for row in rows]
        return self.db.read(run)

    def usage(self, *, team: str | None = None, since: float | None = None,
              until: float | None = None) -> list[UsageRecord]:
        query = select(usage)
        if team is not None:
            query = query.where(usage.c.team == team)
        if since is not None:
            query = query.where(usage.c.end_at >= since)
        if until is not None:
            query = query.where(usage.c.end_at < until)
        rows = self.db.read(lambda conn: conn.execute(query.order_by(usage.c.id)).all())
        return [UsageRecord(team=row.team, job_id=row.job_id, flavour=row.flavour,
                            admitted_as=AdmittedAs(row.admitted_as), start=row.start_at, end=row.end_at,
                            units=row.units) for row in rows]

    def append_event(self, event: Event) -> Event:
        return self.append_events([event])[0]

    def append_events(self, events_: Sequence[Event]) -> list[Event]:
        if not events_:
            return []
        return self.db.write(lambda conn: self._insert_events(conn, events_))

    def _insert_events(self, conn: Connection, events_: Sequence[Event]) -> list[Event]:
        """Append ``events_`` inside the caller's transaction, in one multi-row INSERT … RETURNING."""
        if not events_:
            return []
        if self.db.is_postgres:
            # Ids come from a sequence, which hands them out before commit; holding this lock to commit
            # makes ids become visible in order, so a reader paging with ``after_id`` never skips one.
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _EVENTS_LOCK_KEY})
        ids: Sequence[int]
        if len(events_) > 1 and not self.db.is_postgres:
            # SQLite: the driver's own executemany (SQLAlchemy's per-row bookkeeping costs more than the insert).
            # This transaction holds the write lock, so nobody else appends meanwhile and the new rows are the ones
            # above ``before``: a rowid table gives them consecutive ids, which one aggregate query confirms.
            before: int = conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one()
            conn.exec_driver_sql(_SQLITE_INSERT_EVENTS, [
                (event.at, event.kind, event.reason, event.message, event.job_id, event.node, event.team,
                 _event_json(event.data)) for event in events_])
            count, last = conn.execute(select(func.count(), func.max(events.c.id)).where(events.c.id > before)).one()
            if count != len(events_):
                raise RuntimeError(f"appended {len(events_)} events but found {count} new ids")
            ids = (range(before + 1, last + 1) if last == before + count else
                   list(conn.execute(select(events.c.id).where(events.c.id > before).order_by(events.c.id)).scalars()))
        elif len(events_) > 1:
            # PostgreSQL: one INSERT … SELECT over arrays, in the events' order, so the sequence hands out their
            # ids in that order (SQLAlchemy's insertmanyvalues relies on the same); a multi-row VALUES statement
            # of 2,000 × 8 placeholders costs more to render and for the driver to parse than the insert itself.
            columns = ([event.at for event in events_], [str(event.kind) for event in events_],
                       [str(event.reason) for event in events_], [event.message for event in events_],
                       [event.job_id for event in events_], [event.node for event in events_],
                       [event.team for event in events_], [_event_json(event.data) for event in events_])
            ids = sorted(int(row[0]) for row in conn.exec_driver_sql(_PG_INSERT_EVENTS, columns))
            if len(ids) != len(events_):
                raise RuntimeError(f"appended {len(events_)} events but got {len(ids)} ids")
        else:
            event = events_[0]
            ids = [_new_id(conn.execute(_INSERT_EVENT, {
                "at": event.at, "kind": event.kind, "reason": event.reason, "message": event.message,
                "job_id": event.job_id, "node": event.node, "team": event.team, "data": _event_json(event.data)}))]
        return [Event(at=event.at, kind=event.kind, reason=event.reason, message=event.message,
                      job_id=event.job_id, node=event.node, team=event.team, data=dict(event.data), id=event_id)
                for event, event_id in zip(events_, ids, strict=True)]

    def events(self, *, job_id: str | None = None, after_id: int | None = None,
               limit: int | None = None) -> list[Event]:
        query = select(events)
        if job_id is not None:
            query = query.where(events.c.job_id == job_id)
        if after_id is not None:
            query = query.where(events.c.id > after_id)
        query = query.order_by(events.c.id)
        if limit is not None:
            query = query.limit(max(limit, 0))
        rows = self.db.read(lambda conn: conn.execute(query).all())
        return [Event(at=row.at, kind=row.kind, reason=row.reason, message=row.message, job_id=row.job_id,
                      node=row.node, team=row.team, data=json.loads(row.data), id=int(row.id)) for row in rows]

    # -- leadership ---------------------------------------------------------------------------------------------
    def acquire_lease(self, holder: str, *, ttl_s: float, now: float) -> int | None:
        """The holder of a lease renews it at the same epoch, even just after it lapsed if nobody took it since."""
        def run(conn: Connection) -> int | None:
            row = self._lease_row(conn, lock=True)
            if row.holder is not None and row.holder != holder and row.expires_at is not None \
                    and now < row.expires_at:
                return None
            epoch = int(row.epoch)
            if row.holder != holder:
                epoch += 1
            conn.execute(update(lease).where(lease.c.name == SCHEDULER_LEASE).values(
                holder=holder, epoch=epoch, expires_at=now + ttl_s))
            return epoch
        return self.db.write(run)

    def release_lease(self, holder: str) -> bool:
        """Give the lease up at once (a clean shutdown), so a standby need not wait for it to lapse. The next
        holder still gets a larger epoch. Returns whether ``holder`` held it."""
        def run(conn: Connection) -> bool:
            row = self._lease_row(conn, lock=True)
            if row.holder != holder:
                return False
            conn.execute(update(lease).where(lease.c.name == SCHEDULER_LEASE).values(holder=None, expires_at=None))
            return True
        return self.db.write(run)

    def lease_info(self) -> LeaseInfo:
        row = self.db.read(lambda conn: self._lease_row(conn))
        return LeaseInfo(row.holder, int(row.epoch), row.expires_at)

    def current_epoch(self) -> int:
        return self.lease_info().epoch

    # -- tokens (TokenStore) -------------------------------------------------------------------------------------
    def create_token(self, identity: Identity, *, now: float, note: str = "") -> str:
        token = new_token()
        self.db.write(lambda conn: conn.execute(insert(api_tokens).values(
            token_hash=hash_token(token), user_name=identity.user, team=identity.team, admin=identity.admin,
            note=note, created_at=now, revoked=False)))
        return token

    def resolve_token(self, token: str) -> Identity | None:
        row = self.db.read(lambda conn: conn.execute(
            select(api_tokens).where(and_(api_tokens.c.token_hash == hash_token(token),
                                          api_tokens.c.revoked.is_(False)))).first())
        if row is None:
            return None
        return Identity(user=row.user_name, team=row.team, admin=bool(row.admin))

    def revoke_token(self, token: str) -> None:
        self.db.write(lambda conn: conn.execute(
            update(api_tokens).where(api_tokens.c.token_hash == hash_token(token)).values(revoked=True)))

    def revoke_noted(self, note: str) -> int:
        def run(conn: Connection) -> int:
            result = conn.execute(update(api_tokens).where(and_(api_tokens.c.note == note,
                                                                api_tokens.c.revoked.is_(False))).values(revoked=True))
            return int(result.rowcount)
        return self.db.write(run)

    # -- allocation audit ----------------------------------------------------------------------------------------
    def bound_unit_count(self) -> int:
        """Units held right now (each row is one GPU or slice; the primary key makes each held at most once)."""
        return int(self.db.read(lambda conn: conn.execute(select(func.count()).select_from(bound_units)).scalar_one()))

    # -- sweeps -------------------------------------------------------------------------------------------------
    def create_sweep(self, spec: SweepSpec, *, user: str, now: float,
                     idempotency_key: str | None = None) -> SweepRecord:
        spec_json = codec.dumps(spec)

        def run(conn: Connection) -> SweepRecord:
            if idempotency_key is not None:
                row = conn.execute(select(sweeps).where(sweeps.c.idempotency_key == idempotency_key)).first()
                if row is not None:
                    first = self._sweep_record(row)
                    if first.spec != spec:
                        raise Conflict(f"Idempotency-Key {idempotency_key!r} was used for sweep {first.id} "
                                       f"with a different spec")
                    return first
            with self._ids_lock:
                sweep_id = self._sweep_ids.next(_Taken(conn, sweeps))
            conn.execute(insert(sweeps).values(
                id=sweep_id, team=spec.team, user_name=user, state=SweepState.RUNNING.value, spec=spec_json,
                idempotency_key=idempotency_key, created_at=now, finished_at=None, message=""))
            self._sweep_specs[sweep_id] = spec
            return SweepRecord(id=sweep_id, spec=spec, user=user, state=SweepState.RUNNING, created_at=now)

        for attempt in range(5):
            try:
                return self.db.write(run)
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def get_sweep(self, sweep_id: str) -> SweepRecord:
        return self.db.read(lambda conn: self._sweep_record(self._sweep_row(conn, sweep_id)))

    def list_sweeps(self, *, team: str | None = None, states: Iterable[SweepState] | None = None,
                    limit: int | None = None) -> list[SweepRecord]:
        query = select(sweeps).order_by(sweeps.c.seq)
        if team is not None:
            query = query.where(sweeps.c.team == team)
        if states is not None:
            query = query.where(sweeps.c.state.in_([state.value for state in states]))
        if limit is not None:
            query = query.limit(max(limit, 0))
        rows = self.db.read(lambda conn: conn.execute(query).all())
        return [self._sweep_record(row) for row in rows]

    def cancel_sweep(self, sweep_id: str, now: float) -> SweepRecord:
        def run(conn: Connection) -> SweepRecord:
            sweep = self._sweep_record(self._sweep_row(conn, sweep_id, lock=True))
            if sweep.state in (SweepState.CANCELLING, SweepState.CANCELLED):
                return sweep
            if sweep.state is not SweepState.RUNNING:
                raise Conflict(f"sweep {sweep_id} already ended as {sweep.state}; there is nothing to cancel")
            active = conn.execute(select(sweep_trials.c.number, sweep_trials.c.job_id).where(and_(
                sweep_trials.c.sweep_id == sweep_id, sweep_trials.c.state == TrialState.ACTIVE.value))).all()
            for row in active:
                conn.execute(update(sweep_trials).where(and_(
                    sweep_trials.c.sweep_id == sweep_id, sweep_trials.c.number == row.number)).values(
                    state=TrialState.FAILED.value, finished_at=now, message="the sweep was cancelled"))
                job = self._job_record(self._job_row(conn, row.job_id, lock=True))
                if not job.state.finished:
                    self._cancel(conn, row.job_id, now)
            conn.execute(update(sweeps).where(sweeps.c.id == sweep_id).values(state=SweepState.CANCELLING.value))
            return self._sweep_record(self._sweep_row(conn, sweep_id))
        return self.db.write(run)

    def finish_sweep(self, sweep_id: str, state: SweepState, message: str, now: float) -> SweepRecord:
        def run(conn: Connection) -> SweepRecord:
            sweep = self._sweep_record(self._sweep_row(conn, sweep_id, lock=True))
            check_sweep_finish(sweep, state)
            conn.execute(update(sweeps).where(sweeps.c.id == sweep_id).values(
                state=state.value, message=message, finished_at=now))
            return self._sweep_record(self._sweep_row(conn, sweep_id))
        return self.db.write(run)

    def add_trial(self, sweep_id: str, number: int, params: dict[str, Choice], job: JobSpec, *,
                  now: float) -> tuple[TrialRecord, JobRecord]:
        spec_json = codec.spec_to_json(job)

        def run(conn: Connection) -> tuple[TrialRecord, JobRecord]:
            sweep = self._sweep_record(self._sweep_row(conn, sweep_id, lock=True))
            row = conn.execute(select(sweep_trials).where(and_(
                sweep_trials.c.sweep_id == sweep_id, sweep_trials.c.number == number))).first()
            if row is not None:
                existing = self._trial_record(row, ())
                check_same_params(sweep_id, existing, params)
                return existing, self._job_record(self._job_row(conn, existing.job_id))
            check_new_trial(sweep, number)
            record = self._insert_job(conn, job, spec_json, user=sweep.user, now=now, idempotency_key=None)
            conn.execute(insert(sweep_trials).values(
                sweep_id=sweep_id, number=number, job_id=record.id, params=json.dumps(params, sort_keys=True),
                state=TrialState.ACTIVE.value, value=None, message="", created_at=now, finished_at=None))
            return TrialRecord(sweep_id=sweep_id, number=number, job_id=record.id, params=dict(params),
                               state=TrialState.ACTIVE, created_at=now), record

        for attempt in range(5):
            try:
                return self.db.write(run)
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def list_trials(self, sweep_id: str) -> list[tuple[TrialRecord, JobRecord]]:
        def run(conn: Connection) -> list[tuple[TrialRecord, JobRecord]]:
            self._sweep_row(conn, sweep_id)
            values: dict[int, list[tuple[int, float]]] = {}
            for row in conn.execute(select(sweep_trial_values).where(sweep_trial_values.c.sweep_id == sweep_id)
                                    .order_by(sweep_trial_values.c.number, sweep_trial_values.c.step)):
                values.setdefault(row.number, []).append((row.step, row.value))
            rows = conn.execute(
                select(sweep_trials.c.number.label("t_number"), sweep_trials.c.params.label("t_params"),
                       sweep_trials.c.state.label("t_state"), sweep_trials.c.value.label("t_value"),
                       sweep_trials.c.message.label("t_message"), sweep_trials.c.created_at.label("t_created_at"),
                       sweep_trials.c.finished_at.label("t_finished_at"), *_JOB_SELECT.selected_columns)
                .select_from(sweep_trials.join(jobs, sweep_trials.c.job_id == jobs.c.id)
                             .outerjoin(checkpoints, jobs.c.last_checkpoint_id == checkpoints.c.id))
                .where(sweep_trials.c.sweep_id == sweep_id).order_by(sweep_trials.c.number)).all()
            return [(TrialRecord(
                sweep_id=sweep_id, number=row.t_number, job_id=row.id, params=json.loads(row.t_params),
                state=TrialState(row.t_state), created_at=row.t_created_at, value=row.t_value,
                intermediate=tuple(values.get(row.t_number, ())), message=row.t_message,
                finished_at=row.t_finished_at), self._build_job_record(tuple(row))) for row in rows]
        return self.db.read(run)

    def report_trial(self, job_id: str, *, step: int | None, value: float, final: bool,
                     now: float) -> tuple[TrialRecord, JobRecord]:
        if not final and step is None:
            raise ValueError("an intermediate report needs a step")

        def run(conn: Connection) -> tuple[TrialRecord, JobRecord]:
            job = self._job_record(self._job_row(conn, job_id))
            query = select(sweep_trials).where(sweep_trials.c.job_id == job_id)
            row = conn.execute(query.with_for_update()).first()
            if row is None:
                raise NotFound(f"job {job_id} is not a sweep trial")
            trial = self._trial_record(row, ())
            if final:
                if trial.state is not TrialState.ACTIVE:
                    raise Conflict(f"trial {trial.number} of sweep {trial.sweep_id} already ended as {trial.state}: "
                                   f"its final value is not recorded")
                conn.execute(update(sweep_trials).where(sweep_trials.c.job_id == job_id).values(
                    state=TrialState.COMPLETE.value, value=value, finished_at=now))
            elif trial.state is TrialState.ACTIVE:
                key = and_(sweep_trial_values.c.sweep_id == trial.sweep_id,
                           sweep_trial_values.c.number == trial.number, sweep_trial_values.c.step == step)
                if conn.execute(select(sweep_trial_values.c.step).where(key)).first() is None:
                    conn.execute(insert(sweep_trial_values).values(
                        sweep_id=trial.sweep_id, number=trial.number, step=step, value=value))
            return self._trial_with_values(conn, trial.sweep_id, trial.number), job

        for attempt in range(5):
            try:
                return self.db.write(run)
            except IntegrityError:          # two reports of one new step at once: the loser finds it recorded
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def finish_trial(self, sweep_id: str, number: int, state: TrialState, *, value: float | None = None,
                     message: str = "", now: float) -> TrialRecord:
        def run(conn: Connection) -> TrialRecord:
            self._sweep_row(conn, sweep_id)
            key = and_(sweep_trials.c.sweep_id == sweep_id, sweep_trials.c.number == number)
            row = conn.execute(select(sweep_trials).where(key).with_for_update()).first()
            if row is None:
                raise NotFound(f"sweep {sweep_id} has no trial {number}")
            check_trial_finish(self._trial_record(row, ()), state, value)
            conn.execute(update(sweep_trials).where(key).values(
                state=state.value, value=value, message=message, finished_at=now))
            return self._trial_with_values(conn, sweep_id, number)
        return self.db.write(run)

    # -- helpers (inside a transaction) --------------------------------------------------------------------------
    def _insert_job(self, conn: Connection, spec: JobSpec, spec_json: str, *, user: str, now: float,
                    idempotency_key: str | None) -> JobRecord:
        with self._ids_lock:
            job_id = self._ids.next(_Taken(conn))
        conn.execute(_JOB_INSERT, dict(
            id=job_id, team=spec.team, user_name=user, state=JobState.PENDING.value, spec=spec_json,
            idempotency_key=idempotency_key, submitted_at=now, queued_at=now, front_of_queue=False,
            requeue_on_exit=False, restarts=0, infra_restarts=0, preemptions=0, attained_gpu_s=0.0,
            avoid_nodes="[]", wait_message="", message="", cancel_requested=False, checkpoint_requested=False,
            epoch=0))
        self._specs[job_id] = spec
        return JobRecord(id=job_id, spec=spec, user=user, state=JobState.PENDING, submitted_at=now, queued_at=now)

    def _cancel(self, conn: Connection, job_id: str, now: float) -> JobRecord:
        job = self._job_record(self._job_row(conn, job_id, lock=True))
        if job.state is JobState.PENDING:
            return self._update_job(conn, job_id, state=JobState.CANCELLED.value, finished_at=now,
                                    cancel_requested=True, message="cancelled while pending")
        if job.state is JobState.CANCELLED:
            return job
        if job.state.finished:
            raise Conflict(f"job {job_id} already ended as {job.state}; there is nothing to cancel")
        return self._update_job(conn, job_id, cancel_requested=True)

    def _sweep_row(self, conn: Connection, sweep_id: str, *, lock: bool = False) -> Row[Any]:
        query = select(sweeps).where(sweeps.c.id == sweep_id)
        if lock:
            query = query.with_for_update()
        row = conn.execute(query).first()
        if row is None:
            raise NotFound(f"no sweep {sweep_id!r}")
        return row

    def _sweep_record(self, row: Row[Any]) -> SweepRecord:
        spec = self._sweep_specs.get(row.id)
        if spec is None:
            spec = self._sweep_specs[row.id] = SweepSpec.model_validate(json.loads(row.spec))
        return SweepRecord(id=row.id, spec=spec, user=row.user_name, state=SweepState(row.state),
                           created_at=row.created_at, finished_at=row.finished_at, message=row.message)

    @staticmethod
    def _trial_record(row: Row[Any], intermediate: Iterable[tuple[int, float]]) -> TrialRecord:
        return TrialRecord(sweep_id=row.sweep_id, number=row.number, job_id=row.job_id,
                           params=json.loads(row.params), state=TrialState(row.state), created_at=row.created_at,
                           value=row.value, intermediate=tuple(intermediate), message=row.message,
                           finished_at=row.finished_at)

    def _trial_with_values(self, conn: Connection, sweep_id: str, number: int) -> TrialRecord:
        row = conn.execute(select(sweep_trials).where(and_(
            sweep_trials.c.sweep_id == sweep_id, sweep_trials.c.number == number))).one()
        values = conn.execute(select(sweep_trial_values.c.step, sweep_trial_values.c.value).where(and_(
            sweep_trial_values.c.sweep_id == sweep_id, sweep_trial_values.c.number == number))
            .order_by(sweep_trial_values.c.step)).all()
        return self._trial_record(row, ((v.step, v.value) for v in values))

    def _fence(self, conn: Connection, epoch: int) -> None:
        current = int(self._lease_row(conn, share=True).epoch)
        if epoch < current:
            raise StaleLeader(f"epoch {epoch} is older than the current lease's epoch {current}: "
                              f"this scheduler is no longer the leader")

    def _lease_row(self, conn: Connection, *, lock: bool = False, share: bool = False) -> Row[Any]:
        query = select(lease).where(lease.c.name == SCHEDULER_LEASE)
        if lock or share:
            query = query.with_for_update(read=share and not lock)
        row = conn.execute(query).first()
        if row is None:
            # A database made before the row was seeded (or by hand): create it, then lock it.
            conn.execute(insert(lease).values(name=SCHEDULER_LEASE, holder=None, epoch=0, expires_at=None))
            row = conn.execute(query).one()
        return row

    def _job_row(self, conn: Connection, job_id: str, *, lock: bool = False) -> Row[Any]:
        query = _JOB_SELECT.where(jobs.c.id == job_id)
        if lock:
            query = query.with_for_update(of=jobs)
        row = conn.execute(query).first()
        if row is None:
            raise NotFound(f"no job {job_id!r}")
        return row

    def _update_job(self, conn: Connection, job_id: str, **values: Any) -> JobRecord:
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(**values))
        return self._job_record(self._job_row(conn, job_id))

    def _units_of(self, conn: Connection, job: JobRecord, placement: Placement) -> list[tuple[str, str, int]]:
        """The units ``placement`` names, after checking it is a placement of this job's shape on known nodes."""
        spec = job.spec
        if placement.flavour not in spec.flavour:
            raise Conflict(f"job {job.id} asks for {', '.join(spec.flavour)}, not {placement.flavour}")
        if len(placement.pods) != spec.pods or any(len(p.units) != spec.gpus_per_pod for p in placement.pods):
            raise Conflict(f"placement of job {job.id} is not {spec.pods} pods × {spec.gpus_per_pod} units")
        names = list(placement.nodes)
        configs = {row.name: row.config for row in conn.execute(
            select(nodes.c.name, nodes.c.config).where(nodes.c.name.in_(names)))}
        for pod in placement.pods:
            if pod.node not in configs:
                raise NotFound(f"no node {pod.node!r}")
            available = len(self._node(configs[pod.node]).devices.get(placement.flavour, ()))
            for index in pod.units:
                if not 0 <= index < available:
                    raise Conflict(f"node {pod.node} has no unit {index} of {placement.flavour}")
        units = [(pod.node, placement.flavour, index) for pod in placement.pods for index in pod.units]
        if len(set(units)) != len(units):
            raise Conflict(f"placement of job {job.id} names one unit twice")
        return units

    @staticmethod
    def _holders(conn: Connection, flavour: str, units: list[tuple[str, str, int]]
                 ) -> dict[tuple[str, str, int], str]:
        wanted = set(units)
        node_names = sorted({node for node, _, _ in units})
        rows = conn.execute(select(bound_units.c.node, bound_units.c.flavour, bound_units.c.unit,
                                   bound_units.c.job_id)
                            .where(and_(bound_units.c.flavour == flavour, bound_units.c.node.in_(node_names))))
        return {(r.node, r.flavour, r.unit): r.job_id for r in rows if (r.node, r.flavour, r.unit) in wanted}

    def _lost_race_message(self, job_id: str, placement: Placement) -> str:
        units = [(pod.node, placement.flavour, index) for pod in placement.pods for index in pod.units]
        holders = self.db.read(lambda conn: self._holders(conn, placement.flavour, units))
        for (node, flavour, unit), holder in holders.items():
            if holder != job_id:
                return (f"unit {unit} of {flavour} on node {node} is held by job {holder}; "
                        f"job {job_id} cannot be bound to it")
        return f"job {job_id} lost a race for its units to a concurrent bind; it stays pending"

    def _node(self, config: str) -> Node:
        node = self._nodes.get(config)
        if node is None:
            node = self._nodes[config] = codec.node_from_json(config)
        return node

    def _node_record(self, row: Row[Any]) -> NodeRecord:
        # The same record for an equal row (the controller lists the 512 nodes twice a cycle, and the snapshot
        # builder reuses its node states while the records are the very same objects).
        values = tuple(row)
        m = row._mapping
        cached = self._node_records.get(m["name"])
        if cached is not None and cached[0] == values:
            return cached[1]
        record = NodeRecord(node=self._node(m["config"]), health=Health(m["health"]), health_reason=m["health_reason"],
                            health_changed_at=m["health_changed_at"], heartbeat_at=m["heartbeat_at"],
                            gpu_utilization=m["gpu_utilization"])
        self._node_records[m["name"]] = (values, record)
        return record

    def _job_record(self, row: Row[Any]) -> JobRecord:
        # Most rows read in a cycle did not change since the last one: reuse the record built from an equal row.
        values = tuple(row)
        job_id = values[_JOB_ID]
        cached = self._records.get(job_id)
        if cached is not None and cached[0] == values:
            return cached[1]
        record = self._build_job_record(values)
        self._records[job_id] = (values, record)
        return record

    def _build_job_record(self, values: Sequence[Any]) -> JobRecord:
        """The record of a job row: ``_JOB_SELECT``'s columns, last in ``values``."""
        (job_id, spec_text, user, state, submitted_at, queued_at, front_of_queue, admitted_as, placement,
         admitted_at, labelled_at, started_at, finished_at, terminate_by, requeue_on_exit, restarts, infra_restarts,
         preemptions, attained_gpu_s, restart_block, avoid_nodes, wait_reason, room_wait_since, room_waited_s,
         wait_message, queue_position, estimated_start, exit_code, message, cancel_requested, checkpoint_requested,
         epoch, idle_since, idle_limit_s, ck_step, ck_uri, ck_bytes, ck_written_at, ck_verified, ck_cost_s,
         ) = _RECORD_FIELDS(values[-len(_JOB_KEYS):])   # a whole tuple's slice is the tuple itself
        spec = self._specs.get(job_id)
        if spec is None:
            spec = self._specs[job_id] = codec.spec_from_json(spec_text)
        last = None
        if ck_step is not None:
            last = CheckpointRecord(job_id=job_id, step=ck_step, uri=ck_uri, bytes=ck_bytes, written_at=ck_written_at,
                                    verified=bool(ck_verified), cost_s=ck_cost_s)
        return JobRecord(
            id=job_id, spec=spec, user=user, state=_JOB_STATES[state], submitted_at=submitted_at, queued_at=queued_at,
            front_of_queue=bool(front_of_queue),
            admitted_as=_ADMITTED_AS[admitted_as] if admitted_as is not None else None,
            placement=codec.placement_from_json(placement) if placement is not None else None,
            admitted_at=admitted_at, labelled_at=labelled_at, started_at=started_at, finished_at=finished_at,
            terminate_by=terminate_by, requeue_on_exit=bool(requeue_on_exit), restarts=restarts,
            infra_restarts=infra_restarts, preemptions=preemptions, attained_gpu_s=attained_gpu_s,
            last_checkpoint=last, restart_block=restart_block,
            avoid_nodes=_NO_NODES if avoid_nodes == "[]" else frozenset(json.loads(avoid_nodes)),
            wait_reason=_REASONS[wait_reason] if wait_reason is not None else None,
            room_wait_since=room_wait_since, room_waited_s=room_waited_s, wait_message=wait_message,
            queue_position=queue_position, estimated_start=estimated_start, exit_code=exit_code, message=message,
            cancel_requested=bool(cancel_requested), checkpoint_requested=bool(checkpoint_requested), epoch=epoch,
            idle_since=idle_since, idle_limit_s=idle_limit_s)
