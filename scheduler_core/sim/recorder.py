"""``RecordingStore``: the in-memory store, plus a log of what the controller did to each job.

The simulator measures the real controller without reaching into it: every decision that matters for the figures
passes through the store (bind, mark_running, release, health changes), so a subclass of ``MemoryStore`` that
notes them as they happen sees exactly what the controller did, in the order it did it. It also keeps the running
totals the time series needs (units held per flavour on healthy nodes, pending demand per flavour), so sampling the
cluster after a step costs a few dictionary reads rather than a scan of every job.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ..model.cluster import Health, Node
from ..model.flavours import FLAVOURS
from ..model.job import JobSpec
from ..policy.decisions import Reason
from ..policy.snapshot import AdmittedAs, Placement
from ..store.memory import MemoryStore
from ..store.records import Event, JobRecord, JobState, NodeRecord
from .eta import EtaRecorder
from .records import Admission, Interruption, JobLog
from .workloads.types import WorkloadJob


class RecordingStore(MemoryStore):
    """A ``MemoryStore`` that keeps a ``JobLog`` per job and the cluster's running totals.

    ``lost_units_s(job_id)`` (set by the engine) returns the executor's running total of unit-seconds of work the
    job has lost; the difference at each release is that interruption's loss.
    """

    def __init__(self, nodes: Sequence[Node], quotas: dict[str, dict[str, int]], *, seed: int | None = None,
                 readiness_timeout_s: float = 600.0) -> None:
        super().__init__(seed=seed)
        self.readiness_timeout_s = readiness_timeout_s
        #: Instants at which a rule with a clock may act (readiness timeouts, time limits); the engine drains it.
        self.deadlines: list[float] = []
        #: Measured jobs not yet finished.
        self.measured_open = 0
        self.logs: dict[str, JobLog] = {}
        self.workload_jobs: dict[str, WorkloadJob] = {}
        self.lost_units_s: Callable[[str], float] = lambda job_id: 0.0
        self.changes = 0
        self._lost_seen: dict[str, float] = {}
        self._quotas = quotas
        self._node_of: dict[str, Node] = {node.name: node for node in nodes}
        self._block_of = {node.name: node.block for node in nodes}
        self._ready: dict[str, bool] = {node.name: True for node in nodes}
        self._held_on: dict[str, Counter[str]] = {node.name: Counter() for node in nodes}
        self.flavours = tuple(sorted({f for node in nodes for f in node.capacity}))
        self.allocated: Counter[str] = Counter()          # units held on ready nodes
        self.spare_allocated: Counter[str] = Counter()    # of which on ready hot spares
        self.working: Counter[str] = Counter()            # units of ready, non-spare nodes
        #: Units of ready, non-spare nodes that hold none of that flavour: idle whole nodes (``waste.Holder``).
        self.whole_free: Counter[str] = Counter()
        for node in nodes:
            if not node.spare:
                self.working.update(node.capacity)
                self.whole_free.update(node.capacity)
        self.team_held: Counter[tuple[str, str]] = Counter()
        self.team_pending: Counter[tuple[str, str]] = Counter()
        self.pending_sizes: dict[str, Counter[int]] = {f: Counter() for f in self.flavours}
        self.pending_count = 0
        self.holding_count = 0
        self.eta = EtaRecorder()

    # -- what the engine asks ------------------------------------------------------------------------------------
    def idle_on(self, nodes: Iterable[str], flavour: str) -> tuple[int, int]:
        """Idle units of ``flavour`` on those of ``nodes`` that are ready and not hot spares (the units the
        utilisation figures count as idle), and how many of them are on nodes that hold none of it."""
        idle = whole = 0
        for name in nodes:
            node = self._node_of[name]
            if node.spare or not self._ready.get(name, True):
                continue
            capacity = node.capacity.get(flavour, 0)
            free = capacity - self._held_on[name][flavour]
            idle += free
            whole += capacity if free == capacity else 0
        return idle, whole

    def cluster_state(self) -> dict[str, tuple[int, int, bool]]:
        """Per flavour: (allocated, healthy, some pending job fits the idle units by count)."""
        state = {}
        for flavour in self.flavours:
            healthy = self.working[flavour] + self.spare_allocated[flavour]
            allocated = self.allocated[flavour]
            idle = healthy - allocated
            sizes = self.pending_sizes[flavour]
            smallest = min((size for size, n in sizes.items() if n > 0), default=math.inf)
            state[flavour] = (allocated, healthy, idle > 0 and smallest <= idle)
        return state

    def submit_workload_job(self, job: WorkloadJob) -> JobRecord:
        record = self.submit(job.spec, user=f"sim-{job.spec.team}", now=job.submit_at, idempotency_key=job.id)
        self.workload_jobs[record.id] = job
        in_quota = any(self.team_held[(job.spec.team, f)] + self.team_pending[(job.spec.team, f)] + job.units
                       <= self._quotas.get(job.spec.team, {}).get(f, 0) for f in job.spec.flavour)
        self.logs[record.id] = JobLog(
            id=job.id, team=job.spec.team, kind=str(job.spec.kind), flavours=job.spec.flavour, units=job.units,
            gpus=job.gpus, submitted_at=job.submit_at, work_s=job.work_s, measured=job.measured, in_quota=in_quota)
        self._pending_add(record.id, job.spec, +1)
        if job.measured:
            self.eta.submitted(record.id, job.submit_at, self.logs[record.id].eta_readings)
        self.measured_open += job.measured
        self.changes += 1
        return record

    # -- the hooks -----------------------------------------------------------------------------------------------
    def bind(self, job_id: str, placement: Placement, admitted_as: AdmittedAs, *, epoch: int,
             now: float) -> JobRecord:
        record = super().bind(job_id, placement, admitted_as, epoch=epoch, now=now)
        self._pending_add(job_id, record.spec, -1)
        self._hold(record.spec.team, placement, +1)
        self.holding_count += 1
        self.deadlines.append(now + self.readiness_timeout_s)
        self.eta.admitted(job_id)
        log = self.logs.get(job_id)
        if log is not None:
            blocks = {self._block_of.get(node, node) for node in placement.nodes}
            log.admissions.append(Admission(now, placement.flavour, placement.nodes, len(blocks),
                                            str(admitted_as)))
        self.changes += 1
        return record

    def mark_running(self, job_id: str, now: float) -> JobRecord:
        record = super().mark_running(job_id, now)
        self.deadlines.append(now + record.spec.time_limit)
        log = self.logs.get(job_id)
        if log is not None and log.running_at is None:
            log.running_at = now
        return record

    def mark_terminating(self, job_id: str, *, requeue: bool, terminate_by: float, now: float,
                         epoch: int) -> JobRecord:
        record = super().mark_terminating(job_id, requeue=requeue, terminate_by=terminate_by, now=now, epoch=epoch)
        self.changes += 1
        return record

    def release(self, job_id: str, *, state: JobState, now: float, epoch: int, exit_code: int | None = None,
                message: str = "", infra_fault: bool = False, own_fault: bool = False,
                restart_block: str | None = None, avoid_nodes: Iterable[str] = ()) -> JobRecord:
        before = self.get(job_id)
        record = super().release(job_id, state=state, now=now, epoch=epoch, exit_code=exit_code, message=message,
                                 infra_fault=infra_fault, own_fault=own_fault, restart_block=restart_block,
                                 avoid_nodes=avoid_nodes)
        assert before.placement is not None
        self._hold(before.spec.team, before.placement, -1)
        self.holding_count -= 1
        if state is JobState.PENDING:
            self._pending_add(job_id, record.spec, +1)
        lost_units = self.lost_units_s(job_id)
        delta = lost_units - self._lost_seen.get(job_id, 0.0)
        self._lost_seen[job_id] = lost_units
        log = self.logs.get(job_id)
        if log is not None:
            lost_gpu_s = delta / FLAVOURS[before.placement.flavour].units_per_gpu
            if state is JobState.PENDING:
                cause = "failure" if infra_fault and not own_fault else "own_fault" if own_fault else "preemption"
                log.interruptions.append(Interruption(now, cause, lost_gpu_s))
            else:
                if state is JobState.TIMED_OUT:
                    log.interruptions.append(Interruption(now, "time_limit", lost_gpu_s))
                elif state is JobState.FAILED:
                    log.interruptions.append(Interruption(now, "own_fault", lost_gpu_s))
                self._finished(log, now, str(state))
        self.changes += 1
        return record

    def set_waits(self, waits: Sequence[tuple[str, Reason, str, int, float | None]], now: float, *,
                  events: Sequence[Event] = ()) -> list[Event]:
        self.eta.waits(waits, now)
        return super().set_waits(waits, now, events=events)

    def request_cancel(self, job_id: str, now: float) -> JobRecord:
        before = self.get(job_id)
        record = super().request_cancel(job_id, now)
        if before.state is JobState.PENDING and record.state is JobState.CANCELLED:
            self._pending_add(job_id, record.spec, -1)
            log = self.logs.get(job_id)
            if log is not None:
                self._finished(log, now, str(record.state))
        self.changes += 1
        return record

    def set_node_health(self, name: str, health: Health, reason: str, now: float, *, expect: Health | None = None,
                        event: Event | None = None) -> NodeRecord:
        record = super().set_node_health(name, health, reason, now, expect=expect, event=event)
        ready = health is Health.READY
        if ready != self._ready.get(name, ready):
            self._ready[name] = ready
            node = self._node_of[name]
            sign = 1 if ready else -1
            if not node.spare:
                for flavour, units in node.capacity.items():
                    self.working[flavour] += sign * units
                    if not self._held_on[name][flavour]:
                        self.whole_free[flavour] += sign * units
            for flavour, units in self._held_on[name].items():
                self.allocated[flavour] += sign * units
                if node.spare:
                    self.spare_allocated[flavour] += sign * units
            self.changes += 1
        return record

    # -- bookkeeping ---------------------------------------------------------------------------------------------
    def _finished(self, log: JobLog, now: float, state: str) -> None:
        if log.finished_at is None and log.measured:
            self.measured_open -= 1
        log.finished_at = now
        log.final_state = state

    def _pending_add(self, job_id: str, spec: JobSpec, sign: int) -> None:
        self.pending_count += sign
        units = spec.total_units
        self.team_pending[(spec.team, spec.flavour[0])] += sign * units
        for flavour in spec.flavour:
            if flavour in self.pending_sizes:
                self.pending_sizes[flavour][units] += sign

    def _hold(self, team: str, placement: Placement, sign: int) -> None:
        flavour = placement.flavour
        for pod in placement.pods:
            units = len(pod.units)
            held = self._held_on[pod.node]
            before = held[flavour]
            held[flavour] = before + sign * units
            self.team_held[(team, flavour)] += sign * units
            if self._ready.get(pod.node, True):
                self.allocated[flavour] += sign * units
                node = self._node_of[pod.node]
                if node.spare:
                    self.spare_allocated[flavour] += sign * units
                elif not before or not held[flavour]:         # the node was, or is now, wholly free
                    self.whole_free[flavour] -= sign * node.capacity[flavour]
