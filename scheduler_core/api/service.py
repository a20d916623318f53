"""What the API does, without HTTP: check who may do what, validate, call the store, build the answer.

Every method is synchronous and may block on the store; the tornado handlers run them in worker threads (the store
is thread safe by contract). Errors are ``ShoalError``s; ``api.errors`` turns them into status codes.

Validation happens before anything is written: a spec that pydantic rejects, or that this cluster could never run,
or that names a team the caller may not act for, leaves the store exactly as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from ..auth.tokens import Identity
from ..errors import Forbidden, NotFound, ValidationFailed
from ..model.job import JobSpec
from ..model.team import TeamConfig
from ..policy.fairshare import cluster_capacity
from ..policy.snapshot import NodeState, PolicyConfig
from ..runtime.ledger import UsageLedger, usage_amounts
from ..runtime.snapshot_builder import SnapshotBuilder
from ..schemas import (CheckpointView, EventList, IdleClockRequest, JobView, NodeList, QueueList, QueueView, QuotaView,
                       SubmitResponse, UsageReport,
                       WhoAmI)
from ..store.base import Store
from ..store.records import Event, JobRecord, JobState
from . import accounting, views
from .limits import ClusterLimits, check_spec
from .metrics import FreeShape, allocations, free_shapes

#: What ``shoal queue`` shows by default: everything not finished.
ACTIVE_STATES: tuple[JobState, ...] = tuple(s for s in JobState if not s.finished)
_HOLDING = tuple(s for s in JobState if s.holds_units)
MAX_EVENTS = 1000


class InvalidSpec(ValidationFailed):
    """A job spec that is malformed or impossible on this cluster (HTTP 422)."""

    code = "invalid_spec"


class ApiService:
    """The API's logic over one ``Store``.

    ``wake`` is called after a change the controller should act on soon (a submission, a cancel, a checkpoint
    request), so a job does not wait a whole tick to be looked at. ``clock`` gives epoch seconds.
    """

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time,
                 wake: Callable[[], None] | None = None, policy_config: PolicyConfig = PolicyConfig()) -> None:
        self.store = store
        self.clock = clock
        self.policy_config = policy_config
        self._wake = wake or (lambda: None)
        self._usage_shapes: dict[str, tuple[int, int, int]] = {}   # job id → (pods, CPUs, GB per pod)
        self.reload()

    def wake(self) -> None:
        """Ask the controller to look at the queue now (after a change it should act on soon)."""
        self._wake()

    def reload(self) -> None:
        """Re-read nodes and teams (they change only when the operator syncs new configuration)."""
        nodes = [record.node for record in self.store.list_nodes()]
        self.teams: dict[str, TeamConfig] = {team.name: team for team in self.store.list_teams()}
        self.limits = ClusterLimits.build(nodes, self.teams.values())
        self.block_of = {node.name: node.block for node in nodes}
        self.node_by_name = {node.name: node for node in nodes}
        # The policy's own yardsticks, so the fair-share value shown is the one the cycle orders teams by.
        self.requests = SnapshotBuilder(nodes, self.policy_config)
        self.capacity = cluster_capacity(NodeState.from_node(node) for node in nodes)

    # -- jobs ----------------------------------------------------------------------------------------------------
    def submit(self, identity: Identity, payload: Any, *, idempotency_key: str | None = None) -> SubmitResponse:
        spec = parse_spec(payload)
        if spec.team not in self.teams:
            raise InvalidSpec(f"unknown team {spec.team!r}",
                              {"team": f"unknown team {spec.team!r}; teams here: {', '.join(sorted(self.teams))}"})
        if not identity.may_act_on(spec.team):
            raise Forbidden(f"user {identity.user!r} of team {identity.team!r} may not submit jobs for team "
                            f"{spec.team!r}")
        problems = check_spec(spec, self.limits)
        if problems:
            field, message = next(iter(problems.items()))
            raise InvalidSpec(f"this job can never run here: {field}: {message}", problems)
        # Keys are scoped to the user, so two people picking the same key never see each other's jobs.
        key = f"{identity.user}/{idempotency_key}" if idempotency_key is not None else None
        record = self.store.submit(spec, user=identity.user, now=self.clock(), idempotency_key=key)
        self._wake()
        return views.submit_response(record)

    def job(self, identity: Identity, job_id: str) -> JobView:
        return self._job_view(self._visible_job(identity, job_id))

    def cancel(self, identity: Identity, job_id: str, reason: str = "") -> JobView:
        """``reason`` (the idle reaper's, say) is kept in the ``CancelRequested`` event, where the job's owner
        reads why it was stopped."""
        record = self._visible_job(identity, job_id)
        now = self.clock()
        updated = self.store.request_cancel(record.id, now)
        if updated != record:
            message = f"cancel requested by {identity.user}" + (f": {reason}" if reason else "")
            self.store.append_event(Event(at=now, kind="request", reason="CancelRequested", job_id=record.id,
                                          team=record.team, message=message,
                                          data={"reason": reason} if reason else {}))
        self._wake()
        return self._job_view(updated)

    def idle_clock(self, identity: Identity, job_id: str, request: IdleClockRequest) -> JobView:
        """The idle reaper's view of a running notebook (admins, or the job's own team): estimated starts of the
        jobs waiting for its slice count on the reaper freeing it at last activity + limit. Not an event: it
        changes every sweep and decides nothing."""
        record = self._visible_job(identity, job_id)
        since = request.last_activity.timestamp() if request.last_activity is not None else None
        return self._job_view(self.store.set_idle_clock(record.id, since, request.idle_limit_s))

    def checkpoint(self, identity: Identity, job_id: str) -> JobView:
        record = self._visible_job(identity, job_id)
        now = self.clock()
        updated = self.store.request_checkpoint(record.id, now)
        self.store.append_event(Event(at=now, kind="request", reason="CheckpointRequested", job_id=record.id,
                                      team=record.team, message=f"checkpoint requested by {identity.user}"))
        self._wake()
        return self._job_view(updated)

    # -- queues and teams ----------------------------------------------------------------------------------------
    def queue(self, identity: Identity, team: str, states: Sequence[JobState] = ACTIVE_STATES) -> QueueView:
        self._team(identity, team)
        records = self.store.list_jobs(team=team, states=states)
        now = self.clock()
        return QueueView(team=team, jobs=[views.queue_entry(r, now) for r in views.queue_order(records)])

    def queues(self, identity: Identity, states: Sequence[JobState] = ACTIVE_STATES) -> QueueList:
        """Every queue the caller may read: their own team's, or all of them for an admin."""
        teams = sorted(self.teams) if identity.admin else [identity.team]
        return QueueList(queues=[self.queue(identity, team, states) for team in teams if team in self.teams])

    def quota(self, identity: Identity, team: str) -> QuotaView:
        config = self._team(identity, team)
        holding = self.store.list_jobs(states=_HOLDING)
        pending = self.store.list_jobs(team=team, states=(JobState.PENDING,))
        return accounting.quota_view(
            config, list(self.teams.values()), holding, pending, request_of=self.requests.request,
            capacity=self.capacity, decayed=self._decayed_usage(team),
            half_life_s=self.policy_config.usage_half_life_s)

    def _decayed_usage(self, team: str) -> dict[str, float]:
        """The team's past use decayed to now, from its usage records, as the controller's ledger keeps it.
        Records older than 20 half-lives weigh under a millionth and are not read."""
        now = self.clock()
        half_life = self.policy_config.usage_half_life_s
        ledger = UsageLedger(half_life)
        since = now - 20 * half_life if half_life > 0 else now
        for usage in self.store.usage(team=team, since=since):
            shape = self._usage_shapes.get(usage.job_id)
            if shape is None:
                try:
                    request = self.requests.request(self.store.get(usage.job_id))
                    shape = (request.pods, request.cpus_per_pod, request.memory_gb_per_pod)
                except NotFound:
                    shape = (0, 0, 0)
                self._usage_shapes[usage.job_id] = shape
            ledger.add(team, usage_amounts(usage.flavour, usage.units, *shape, usage.end - usage.start), usage.end)
        return ledger.decayed(now).get(team, {})

    # -- nodes, events, usage ------------------------------------------------------------------------------------
    def nodes(self, identity: Identity) -> NodeList:
        allocated: dict[str, dict[str, int]] = {}
        jobs_on: dict[str, list[str]] = {}
        for job in self.store.list_jobs(states=_HOLDING):
            assert job.placement is not None
            for pod in job.placement.pods:
                per_node = allocated.setdefault(pod.node, {})
                per_node[job.placement.flavour] = per_node.get(job.placement.flavour, 0) + len(pod.units)
                if identity.may_act_on(job.team):
                    names = jobs_on.setdefault(pod.node, [])
                    if job.id not in names:
                        names.append(job.id)
        return NodeList(nodes=[views.node_view(record, allocated=allocated.get(record.node.name, {}),
                                               jobs=jobs_on.get(record.node.name, []))
                               for record in self.store.list_nodes()])

    def events(self, identity: Identity, *, job_id: str | None = None, after: int | None = None,
               limit: int = 100) -> EventList:
        """Events the caller may read, oldest first: their team's and the cluster's own (nodes), or all for an
        admin. ``next_after`` is where the next page starts, even when the caller could read none of this one."""
        if job_id is not None:
            self._visible_job(identity, job_id)
        limit = max(1, min(limit, MAX_EVENTS))
        shown: list[Event] = []
        cursor = after
        # Non-admins skip other teams' events; read on (a bounded number of pages) until the page is full.
        for _ in range(20):
            batch = self.store.events(job_id=job_id, after_id=cursor, limit=limit)
            if not batch:
                break
            shown.extend(e for e in batch if identity.admin or e.team is None or e.team == identity.team)
            cursor = batch[-1].id
            if len(shown) >= limit or len(batch) < limit:
                break
        shown = shown[:limit]
        if shown and len(shown) == limit:
            cursor = shown[-1].id
        return EventList(events=[views.event_view(e) for e in shown], next_after=cursor)

    def usage(self, identity: Identity, *, team: str | None = None, since: float | None = None,
              until: float | None = None) -> UsageReport:
        """GPU-seconds by day, team, flavour and nominal/borrowed; the jobs holding GPUs now count up to now."""
        if team is not None:
            self._team(identity, team)
        elif not identity.admin:
            team = identity.team
        now = self.clock()
        end = now if until is None else until
        return accounting.usage_report(self._intervals(team, since, until, now), since=since, until=end)

    def usage_series(self, identity: Identity, team: str, *, since: float, until: float,
                     step: float) -> dict[str, list[float]]:
        """``team``'s GPU-seconds per flavour in each ``step`` of ``[since, until)``: its usage over time."""
        self._team(identity, team)
        return accounting.usage_series(self._intervals(team, since, until, self.clock()), since=since, until=until,
                                       step=step)

    def utilisation(self, *, since: float, until: float, step: float) -> dict[str, list[float]]:
        """The fraction of each flavour's units held by any team in each ``step`` of ``[since, until)`` (a step
        still under way: of its part so far). Open to every caller, as ``/metrics`` is: it sums all teams and names
        none."""
        now = self.clock()
        held = accounting.usage_series(self._intervals(None, since, until, now), since=since, until=until, step=step)
        capacity: dict[str, int] = {}
        for node in self.node_by_name.values():
            for flavour, units in node.capacity.items():
                capacity[flavour] = capacity.get(flavour, 0) + units
        out = {}
        for flavour, units in sorted(capacity.items()):
            row = held.get(flavour, [])
            # The current hour is judged on its part so far, not diluted by the minutes still to come.
            spans = [min(step, min(until, now) - (since + i * step)) for i in range(len(row))]
            out[flavour] = [seconds / (units * span) if units and span > 0 else 0.0
                            for seconds, span in zip(row, spans)]
        return out

    def free_shapes(self) -> dict[str, FreeShape]:
        """Per flavour the free units and the largest shape one job could take now: the figures ``/metrics``
        serves as ``shoal_units_free`` and ``shoal_largest_free_shape_units``, from the same function."""
        return free_shapes(self.store.list_nodes(), allocations(self.store.list_jobs(states=_HOLDING)))

    def checkpoints(self, identity: Identity, job_id: str) -> list[CheckpointView]:
        """The job's checkpoints, oldest first."""
        record = self._visible_job(identity, job_id)
        views_ = [views.checkpoint_view(c) for c in self.store.checkpoints(record.id)]
        return sorted((v for v in views_ if v is not None), key=lambda v: (v.at, v.step))

    def _intervals(self, team: str | None, since: float | None, until: float | None,
                   now: float) -> list[accounting.Interval]:
        """What ``team`` (every team: ``None``) held in the window: the ledger's records, and the jobs holding
        units now up to ``now``."""
        intervals = [accounting.ledger_interval(u) for u in self.store.usage(team=team, since=since, until=until)]
        for job in self.store.list_jobs(team=team, states=_HOLDING):
            current = accounting.open_interval(job, now)
            if current is not None:
                intervals.append(current)
        return intervals

    @staticmethod
    def whoami(identity: Identity) -> WhoAmI:
        return WhoAmI(user=identity.user, team=identity.team, admin=identity.admin)

    # -- helpers -------------------------------------------------------------------------------------------------
    def _visible_job(self, identity: Identity, job_id: str) -> JobRecord:
        record = self.store.get(job_id)
        if not identity.may_act_on(record.team):
            raise Forbidden(f"job {job_id} belongs to team {record.team!r}; user {identity.user!r} of team "
                            f"{identity.team!r} may not see or change it")
        return record

    def _team(self, identity: Identity, team: str) -> TeamConfig:
        config = self.teams.get(team)
        if config is None:
            raise NotFound(f"no team {team!r}; teams here: {', '.join(sorted(self.teams))}")
        if not identity.may_act_on(team):
            raise Forbidden(f"user {identity.user!r} of team {identity.team!r} may not read team {team!r}")
        return config

    def _job_view(self, record: JobRecord) -> JobView:
        ledger = self.store.usage(team=record.team, since=record.submitted_at)
        seconds = accounting.job_gpu_seconds(record.id, ledger, record, self.clock())
        return views.job_view(record, block_of=self.block_of, gpu_seconds=seconds, nodes=self.node_by_name,
                              now=self.clock())


def parse_spec(payload: Any) -> JobSpec:
    """A ``JobSpec`` from a decoded JSON body, or ``InvalidSpec`` naming every bad field."""
    try:
        return JobSpec.model_validate(payload)
    except ValidationError as exc:
        fields: dict[str, str] = {}
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"]) or "spec"
            message = error["msg"].removeprefix("Value error, ")
            if field not in fields:
                fields[field] = message
        first_field, first_message = next(iter(fields.items()))
        more = len(fields) - 1
        suffix = f" (and {more} more field{'s' if more > 1 else ''})" if more else ""
        raise InvalidSpec(f"invalid job spec: {first_field}: {first_message}{suffix}", fields) from None

