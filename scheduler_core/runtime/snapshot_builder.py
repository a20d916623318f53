"""Build the policy's ``Snapshot`` from store records, fast.

A cycle over 2,000 pending jobs must take milliseconds, so the builder keeps what does not change between cycles:
each job's ``JobRequest`` (its spec is immutable), each pending job's ``PendingJob`` while its queue fields stay
the same, and each node's ``NodeState`` while its health stays the same. What changes every cycle (the set of jobs,
running placements, decayed usage) is rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from operator import is_
from types import MappingProxyType

from ..model.cluster import Node
from ..model.team import Quota, TeamConfig
from ..policy.carried import CarriedIndex
from ..policy.snapshot import (JobRequest, NodeState, PendingJob, PolicyConfig, RunningJob, RunTimes, Snapshot,
                               TeamState)
from ..store.records import JobRecord, JobState, NodeRecord

_DEFAULT_SHAPE = (192, 2048, 8)
_NO_USAGE: Mapping[str, float] = MappingProxyType({})


T = TypeVar("T")


class SnapshotBuilder:
    def __init__(self, nodes: Sequence[Node], config: PolicyConfig) -> None:
        self.config = config
        self._shape: dict[str, tuple[int, int, int]] = {}
        for node in nodes:
            for flavour, units in node.capacity.items():
                self._shape.setdefault(flavour, (node.cpus, node.memory_gb, units))
        self._requests: dict[str, JobRequest] = {}
        #: Per pending job: its key, its ``PendingJob``, and the record it was built from.
        self._pending: dict[str, tuple[JobRecord, PendingJob, tuple[object, ...]]] = {}
        self._running: dict[str, tuple[JobRecord, RunningJob]] = {}
        self._node_states: dict[str, tuple[Node, NodeState]] = {}
        self._nodes: tuple[list[NodeRecord], tuple[NodeState, ...]] | None = None
        self._quotas: dict[str, tuple[TeamConfig, Mapping[str, Quota]]] = {}
        #: The policy's index of the running jobs, carried from one snapshot's pass to the next.
        self.carried = CarriedIndex()

    def request(self, record: JobRecord) -> JobRequest:
        """The job's ``JobRequest``, derived once per job: CPUs and memory default to the GPU's share of a node
        of its first flavour."""
        request = self._requests.get(record.id)
        if request is None:
            request = self._requests[record.id] = self.derive(record)
        return request

    def derive(self, record: JobRecord) -> JobRequest:
        """The ``JobRequest`` of any job, without caching it (for finished jobs read once)."""
        cpus, memory_gb, units = self._shape.get(record.spec.flavour[0], _DEFAULT_SHAPE)
        return JobRequest.from_spec(record.id, record.spec, record.submitted_at, node_cpus=cpus,
                                    node_memory_gb=memory_gb, gpus_per_node=units)

    def forget(self, job_id: str) -> None:
        """Drop a finished job's cached parts (the simulator runs tens of thousands through one builder)."""
        self._requests.pop(job_id, None)
        self._pending.pop(job_id, None)
        self._running.pop(job_id, None)

    def build(self, *, nodes: Iterable[NodeRecord], teams: Iterable[TeamConfig], pending: Iterable[JobRecord],
              running: Iterable[JobRecord], decayed_usage: Mapping[str, Mapping[str, float]],
              runtimes: RunTimes = RunTimes()) -> Snapshot:
        """``runtimes``: how long jobs really run, for estimated starts."""
        return Snapshot(
            nodes=self._node_tuple(list(nodes)),
            teams={team.name: self._team_state(team, decayed_usage.get(team.name)) for team in teams},
            pending=self._pending_jobs(pending),
            running=self._running_jobs(running),
            config=self.config,
            runtimes=runtimes,
            carried=self.carried,
        )

    def _team_state(self, team: TeamConfig, usage: Mapping[str, float] | None) -> TeamState:
        """``TeamState.from_config``, its quotas' read-only view made once per team config (every pass builds
        forty of these). ``usage`` is never changed afterwards (``UsageLedger.decayed`` promises so)."""
        quotas = self._quotas.get(team.name)
        if quotas is None or quotas[0] is not team:
            quotas = self._quotas[team.name] = (team, MappingProxyType(team.quotas))
        return TeamState(team.name, team.cohort, team.weight, quotas[1],
                         MappingProxyType(usage) if usage else _NO_USAGE)

    def _node_tuple(self, records: list[NodeRecord]) -> tuple[NodeState, ...]:
        """The same tuple as last time while the store hands back the same node records (``MemoryStore`` does
        until a node changes), so the policy's carried index sees "no node changed" at once."""
        last = self._nodes
        if last is not None and len(last[0]) == len(records) and all(map(is_, last[0], records)):
            return last[1]
        states = tuple(self._node_state(record) for record in records)
        self._nodes = (records, states)
        return states

    def _node_state(self, record: NodeRecord) -> NodeState:
        cached = self._node_states.get(record.node.name)
        if cached is not None and cached[0] is record.node and cached[1].health is record.health:
            return cached[1]
        state = NodeState.from_node(record.node, record.health)
        self._node_states[record.node.name] = (record.node, state)
        return state

    def _pending_jobs(self, records: Iterable[JobRecord]) -> tuple[PendingJob, ...]:
        """Every pending job's ``PendingJob`` (``_reused``; ``_pending_job`` for a record not seen before)."""
        return _reused(records, self._pending, self._pending_job)

    def _running_jobs(self, records: Iterable[JobRecord]) -> tuple[RunningJob, ...]:
        """Every running job's ``RunningJob`` (``_reused``; ``_running_job`` for a record not seen before)."""
        return _reused(records, self._running, self._running_job)

    def _pending_job(self, record: JobRecord) -> PendingJob:
        cached = self._pending.get(record.id)
        # The runs of its room waits laid end to end: fixed while it waits for room, ending at the pass's clock
        # while quota holds it (``PendingJob.block_cap_since``).
        room_wait_since = quota_held_after_s = None
        if record.room_wait_since is not None:
            room_wait_since = record.room_wait_since - record.room_waited_s
        elif record.room_waited_s or (record.wait_reason is not None and record.wait_reason.is_quota):
            quota_held_after_s = record.room_waited_s
        key = (record.queued_at, record.front_of_queue, record.attained_gpu_s, record.restart_block,
               record.avoid_nodes, room_wait_since, quota_held_after_s)
        if cached is not None and cached[2] == key:
            self._pending[record.id] = (record, cached[1], key)
            return cached[1]
        job = PendingJob(request=self.request(record), queued_at=record.queued_at,
                         front_of_queue=record.front_of_queue, attained_gpu_s=record.attained_gpu_s,
                         restart_block=record.restart_block, avoid_nodes=record.avoid_nodes,
                         room_wait_since=room_wait_since, quota_held_after_s=quota_held_after_s)
        self._pending[record.id] = (record, job, key)
        return job

    def _running_job(self, record: JobRecord) -> RunningJob:
        assert record.placement is not None and record.admitted_as is not None and record.admitted_at is not None
        self._pending.pop(record.id, None)
        checkpoint = record.last_checkpoint
        job = RunningJob(request=self.request(record), placement=record.placement, admitted_as=record.admitted_as,
                         started_at=record.started_at if record.started_at is not None else record.admitted_at,
                         last_checkpoint_at=checkpoint.written_at if checkpoint is not None else None,
                         terminating=record.state is JobState.TERMINATING, terminate_by=record.terminate_by,
                         idle_since=record.idle_since, idle_limit_s=record.idle_limit_s)
        self._running[record.id] = (record, job)
        return job


def _reused(records: Iterable[JobRecord], cache: Mapping[str, tuple[Any, ...]],
            make: Callable[[JobRecord], T]) -> tuple[T, ...]:
    """Each record's job as last pass (``cache[id][1]``) when it is the very record it was built from
    (``cache[id][0]``: a store that shares unchanged records hands back the same object), else ``make``'s.
    Tested in this loop, not in ``make``: a long queue passes through every pass."""
    jobs = []
    for record in records:
        cached = cache.get(record.id)
        jobs.append(cached[1] if cached is not None and cached[0] is record else make(record))
    return tuple(jobs)
