"""The controller: one loop shared by the live scheduler and the simulator.

``step(now)`` is one turn of it: (1) apply what the executor saw since the last turn, (2) enforce the rules that
need a clock (readiness timeout, cancel and checkpoint requests), (3) snapshot the store, (4) ask the policy,
(5) apply its decisions through the store, then the executor. The policy is any ``Policy``; the store and the
executor are the plug points, so the same code runs against SQLite and Kubernetes or against ``MemoryStore`` and
``SimExecutor`` in virtual time. Nothing here reads a clock: time is the ``now`` it is given.

Ordering rules that keep it safe:
* The store first, then the executor. A bind or a terminate is written (with the lease epoch as a fencing token)
  before pods are launched or signalled, so a deposed leader is stopped by ``StaleLeader`` before it acts; the
  rest of that cycle is then dropped.
* Units are released only when every pod of the gang has been seen to end, so no GPU is ever handed out while a
  pod may still be on it.
* A gang is stopped whole: one pod's failure or non-zero exit stops the others at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from .errors import Conflict, NotFound, SpecNotLaunchable, StaleLeader
from .executor.base import CANNOT_START, Executor, LaunchRequest, PodEvent, PodEventKind
from .auth.job_tokens import JobTokens
from .job_env import default_checkpoint_uri, gang_env, nodes_of
from .model.cluster import Node
from .model.durations import format_instant
from .model.job import JobKind
from .policy.decisions import CycleResult, PreemptReason, Reserve
from .policy.snapshot import PolicyConfig, Snapshot
from .policy.types import Policy
from .runtime.events import EventKind, Why
from .runtime.gangs import Gang, Stop
from .runtime.health_keeper import HealthKeeper, Transition
from .runtime.node_lifecycle import HealthConfig, Signal
from .runtime.ledger import UsageLedger, usage_amounts
from .runtime.runtimes import RunTimeHistory
from .runtime.snapshot_builder import SnapshotBuilder
from .runtime.stragglers import StragglerDetector
from .store.base import Store
from .store.records import CheckpointRecord, Event, JobRecord, JobState
from .young_daly import GPU_HOURS_PER_INTERRUPTION, checkpoint_interval_s

HOLDING = (JobState.ADMITTED, JobState.RUNNING, JobState.TERMINATING)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The runtime rules' knobs (DESIGN §3.3)."""

    #: A gang whose pods are not all running this long after launch is evicted whole and requeued.
    readiness_timeout_s: float = 600.0
    #: Default checkpoint place: ``file://<root>/<team>/<job_id>/``.
    checkpoint_root: str = "/var/lib/shoal/checkpoints"
    #: A rank whose last ``straggler_window`` step times are all ≥ this × its peers' median marks its node suspect.
    straggler_threshold: float = 1.2
    straggler_window: int = 5
    #: Restarts for infrastructure faults (lost nodes, readiness timeouts, failed launches) before the job fails:
    #: separate from ``max_restarts`` (DESIGN §3.3), and generous, but a job the cluster can never start stops.
    max_infra_restarts: int = 50
    #: Failure rate behind the "auto" checkpoint interval (Llama 3: one interruption per ~50,700 GPU-hours).
    gpu_hours_per_interruption: float = GPU_HOURS_PER_INTERRUPTION
    #: The node lifecycle: heartbeat limit, burn-in command and time limit (``runtime.node_lifecycle``).
    health: HealthConfig = HealthConfig()


@dataclass(slots=True)
class StepReport:
    """What one step did, for the simulator's accounting and the live loop's metrics."""

    now: float
    pod_events: int = 0
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)          # the controller's own stops (cancel, faults, ...)
    requeued: list[str] = field(default_factory=list)
    finished: dict[str, JobState] = field(default_factory=dict)
    adopted: list[str] = field(default_factory=list)
    waits: int = 0
    cycle: CycleResult | None = None
    stale_leader: bool = False
    #: Node health changes this step made (the lifecycle's transitions, burn-in verdicts).
    health: list[Transition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Outcome:
    state: JobState
    why: str
    exit_code: int | None
    message: str
    infra_fault: bool = False
    own_fault: bool = False
    restart_block: str | None = None
    avoid_nodes: tuple[str, ...] = ()


_INFRA_WHY = {Stop.NODE_FAILURE: Why.NODE_LOST, Stop.READINESS: Why.READINESS_TIMEOUT,
              Stop.STRAGGLER: Why.STRAGGLER_MOVE, Stop.LOST: Why.LOST_ON_RESTART}


class Controller:
    """Applies the policy's decisions and the runtime rules. Not thread-safe: one step at a time."""

    def __init__(self, store: Store, executor: Executor, policy: Policy, *, nodes: Sequence[Node],
                 policy_config: PolicyConfig = PolicyConfig(), epoch: int = 0,
                 config: ControllerConfig = ControllerConfig(), job_tokens: JobTokens | None = None) -> None:
        self.store = store
        #: Mints the API token a trial's pods get at launch (never in the spec) and revokes it at release.
        self.job_tokens = job_tokens
        self.executor = executor
        self.policy = policy
        self.config = config
        #: The lease epoch every fenced write carries; the leader loop updates it when it renews the lease.
        self.epoch = epoch
        self._nodes = {node.name: node for node in nodes}
        self._builder = SnapshotBuilder(nodes, policy_config)
        self._ledger = UsageLedger(policy_config.usage_half_life_s)
        self._runtimes = RunTimeHistory()
        self._ledger_loaded = False
        self._gangs: dict[str, Gang] = {}
        self._reservations: dict[str, Reserve] = {}
        #: Node health: stale heartbeats, GPU errors, burn-ins (``runtime.health_keeper``).
        self.health = HealthKeeper(store, executor, self._nodes, config.health)

    # -- the loop ------------------------------------------------------------------------------------------------
    def recover(self, now: float) -> StepReport:
        """Take over after a (re)start: gangs the store says hold units and the executor still runs are adopted;
        events that happened meanwhile are applied; gangs the executor no longer has are requeued as an
        infrastructure fault (or finished, if they were being cancelled or stopped at their time limit)."""
        report = StepReport(now)
        try:
            self._load_ledger()
            self.health.recover(now)
            holders = self.store.list_jobs(states=HOLDING)
            live = self.executor.running_jobs()
            adopted = {record.id for record in holders if record.id in live}
            self.executor.adopt(adopted)
            for record in holders:
                self._gangs[record.id] = self._tracker(record)
                if record.id in adopted:
                    report.adopted.append(record.id)
                    self._event(EventKind.ADOPT, Why.ADOPTED, now, record, f"adopted {record.state} gang")
            self._observe(now, report)
            live = self.executor.running_jobs()
            for record in holders:
                gang = self._gangs.get(record.id)
                if gang is not None and record.id not in live:
                    if gang.stop is None:
                        gang.stop, gang.message = Stop.LOST, "gone from the executor while the scheduler was down"
                    self._finish(gang, now, report)
        except StaleLeader:
            self._lost_leadership(now, report)
        report.health = self.health.take_transitions()
        return report

    def step(self, now: float) -> StepReport:
        report = StepReport(now)
        try:
            self._load_ledger()
            self._observe(now, report)
            holding = _by_id(self.store.list_jobs(states=HOLDING))
            self._enforce(now, holding, report)
            self.health.step(now, holding.values())
            pending = self.store.list_jobs(states=[JobState.PENDING])
            snapshot = self._build(now, pending, holding.values())
            result = self.policy(snapshot, now)
            report.cycle = result
            self._apply(result, now, holding, _by_id(pending), report)
        except StaleLeader:
            self._lost_leadership(now, report)
        report.health = self.health.take_transitions()
        return report

    def build_snapshot(self, now: float) -> Snapshot:
        """The snapshot the policy would see at ``now`` (for tools and benchmarks)."""
        self._load_ledger()
        return self._build(now, self.store.list_jobs(states=[JobState.PENDING]),
                           self.store.list_jobs(states=HOLDING))

    @property
    def tracked_jobs(self) -> set[str]:
        """Jobs whose gangs this controller is following."""
        return set(self._gangs)

    # -- (1) observations ----------------------------------------------------------------------------------------
    def _observe(self, now: float, report: StepReport) -> None:
        events = self.executor.poll(now)
        report.pod_events += len(events)
        for event in events:
            if self.health.owns(event.job_id):
                self.health.observe(event, now)   # a burn-in's pod
                continue
            gang = self._gangs.get(event.job_id)
            if gang is None:
                continue   # a gang already released (its last pods' reports) or never ours
            if event.kind is PodEventKind.STARTED:
                self._on_started(gang, event)
            elif event.kind is PodEventKind.EXITED:
                self._on_exited(gang, event, now, report)
            elif event.kind is PodEventKind.FAILED:
                self._on_failed(gang, event, now, report)
            elif event.kind is PodEventKind.CHECKPOINT:
                self._on_checkpoint(gang, event, now, report)
            elif event.kind is PodEventKind.STEP_TIME:
                self._on_step_time(gang, event)
            if gang.all_ended and gang.job_id in self._gangs:
                self._finish(gang, now, report)

    def _on_started(self, gang: Gang, event: PodEvent) -> None:
        gang.started.add(event.rank)
        if gang.all_started and not gang.marked_running and gang.stop is None:
            gang.marked_running = True
            try:
                record = self.store.mark_running(gang.job_id, event.at)
            except Conflict:
                return   # it was signalled meanwhile; it will not run
            self._event(EventKind.RUNNING, Why.ALL_PODS_STARTED, event.at, record,
                        f"all {gang.pods} pods started")

    def _on_exited(self, gang: Gang, event: PodEvent, now: float, report: StepReport) -> None:
        gang.ended[event.rank] = event.exit_code
        if event.exit_code == 0 or gang.stop is not None:
            return
        gang.first_bad_exit = event.exit_code
        record = self.store.get(gang.job_id)
        self._event(EventKind.POD_EXIT, Why.EXIT_CODE, event.at, record,
                    f"rank {event.rank} exited {event.exit_code}", node=event.node,
                    data={"rank": event.rank, "exit_code": event.exit_code})
        # A command that could not even be started (no such executable) fails alike on every retry.
        gang.cannot_start = bool(event.data.get(CANNOT_START))
        again = record.restarts < record.spec.max_restarts and not gang.cannot_start
        detail = f": {event.message}" if gang.cannot_start and event.message else ""
        self._stop(gang, Stop.OWN_FAULT, grace_s=0.0, requeue=again, now=now, report=report,
                   message=f"rank {event.rank} exited {event.exit_code}{detail}")

    def _on_failed(self, gang: Gang, event: PodEvent, now: float, report: StepReport) -> None:
        gang.ended[event.rank] = None
        node = event.node or gang.nodes[event.rank]
        gang.avoid.add(node)
        if node in self._nodes:
            gang.restart_block = self._nodes[node].block
        record = self.store.get(gang.job_id)
        self._event(EventKind.POD_FAILED, Why.NODE_LOST, event.at, record,
                    f"rank {event.rank} lost with node {node}: {event.message}".rstrip(": "), node=node)
        self.health.signal(node, Signal.NODE_LOST, f"lost rank {event.rank} of {gang.job_id}", now)
        if gang.stop is not Stop.CANCEL:
            self._stop(gang, Stop.NODE_FAILURE, grace_s=0.0, requeue=True, now=now, report=report,
                       message=f"node {node} lost")

    def _on_checkpoint(self, gang: Gang, event: PodEvent, now: float, report: StepReport) -> None:
        data = event.data
        checkpoint = CheckpointRecord(
            job_id=gang.job_id, step=_int(data.get("step"), 0), uri=str(data.get("uri", "")),
            bytes=_int(data.get("bytes"), 0), written_at=event.at, verified=bool(data.get("verified", True)),
            cost_s=_float(data.get("cost_s")))
        self.store.record_checkpoint(checkpoint)
        record = self.store.get(gang.job_id)
        self._event(EventKind.CHECKPOINT, Why.CHECKPOINT_WRITTEN, event.at, record,
                    f"step {checkpoint.step} at {checkpoint.uri}",
                    data={"step": checkpoint.step, "verified": checkpoint.verified, "cost_s": checkpoint.cost_s})
        if gang.move_from is not None and gang.stop is None and checkpoint.verified:
            gang.avoid.add(gang.move_from)
            self._stop(gang, Stop.STRAGGLER, grace_s=record.spec.checkpoint.grace_period, requeue=True, now=now,
                       report=report, message=f"moving off slow node {gang.move_from} after its checkpoint")

    def _on_step_time(self, gang: Gang, event: PodEvent) -> None:
        step_time = _float(event.data.get("step_time_s"))
        if step_time is None or gang.stop is not None or gang.move_from is not None:
            return
        gang.detector.report(event.rank, step_time)
        slow = gang.detector.stragglers()
        if not slow:
            return
        node = gang.nodes[slow[0]]
        gang.move_from = node
        record = self.store.get(gang.job_id)
        self._event(EventKind.NODE_HEALTH, Why.SLOW_RANK, event.at, record,
                    f"rank {slow[0]} on {node} is consistently ≥ {self.config.straggler_threshold:g}× slower "
                    f"than its peers; the job moves at its next checkpoint", node=node)
        self.health.signal(node, Signal.SLOW_RANK, f"slow rank {slow[0]} of {gang.job_id}", event.at)

    # -- (2) rules with time -------------------------------------------------------------------------------------
    def _enforce(self, now: float, holding: dict[str, JobRecord], report: StepReport) -> None:
        for job_id, gang in list(self._gangs.items()):
            record = holding.get(job_id)
            if record is None:
                continue
            if record.cancel_requested and gang.stop is not Stop.CANCEL:
                self._event(EventKind.STOP, Why.CANCEL_REQUESTED, now, record, "cancel requested")
                holding[job_id] = self._stop(gang, Stop.CANCEL, grace_s=record.spec.checkpoint.grace_period,
                                             requeue=False, now=now, report=report, message="cancelled")
            elif (gang.stop is None and not gang.marked_running and not gang.all_started
                  and now - gang.launched_at >= self.config.readiness_timeout_s):   # marked: all started
                waiting = sorted({gang.nodes[r] for r in range(gang.pods) if r not in gang.started})
                gang.avoid.update(waiting)
                self._event(EventKind.STOP, Why.READINESS_TIMEOUT, now, record,
                            f"{gang.pods - len(gang.started)} of {gang.pods} pods not running after "
                            f"{self.config.readiness_timeout_s:g}s", data={"nodes": waiting})
                holding[job_id] = self._stop(gang, Stop.READINESS, grace_s=0.0, requeue=True, now=now,
                                             report=report, message="readiness timeout")
            if record.checkpoint_requested:
                if gang.stop is None:
                    self.executor.request_checkpoint(job_id)
                self.store.clear_checkpoint_request(job_id)

    # -- (3) snapshot --------------------------------------------------------------------------------------------
    def _build(self, now: float, pending: Iterable[JobRecord], running: Iterable[JobRecord]) -> Snapshot:
        return self._builder.build(nodes=self.store.list_nodes(), teams=self.store.list_teams(), pending=pending,
                                   running=running, decayed_usage=self._ledger.decayed(now),
                                   runtimes=self._runtimes.runtimes())

    # -- (4)/(5) decisions ---------------------------------------------------------------------------------------
    def _apply(self, result: CycleResult, now: float, holding: dict[str, JobRecord],
               pending: dict[str, JobRecord], report: StepReport) -> None:
        for preempt in result.preempts:
            gang = self._gangs.get(preempt.job_id)
            record = holding.get(preempt.job_id)
            if gang is None or record is None or gang.stop is not None:
                continue
            stop = Stop.PREEMPT if preempt.requeue else Stop.POLICY_END
            gang.preempt_reason = preempt.reason
            gang.avoid.update(preempt.avoid)
            self._stop(gang, stop, grace_s=preempt.grace_s, requeue=preempt.requeue, now=now, report=None,
                       message=f"preempted: {preempt.reason}")
            report.preempted.append(preempt.job_id)
            self._event(EventKind.PREEMPT, preempt.reason, now, record,
                        f"{preempt.reason}" + (f" for {preempt.for_job}" if preempt.for_job else ""),
                        data={"grace_s": preempt.grace_s, "requeue": preempt.requeue, "for_job": preempt.for_job})
        for relabel in result.relabels:
            record = holding.get(relabel.job_id)
            if record is None:
                continue
            try:
                relabelled = self.store.relabel(relabel.job_id, relabel.admitted_as, epoch=self.epoch, now=now)
            except (Conflict, NotFound) as exc:
                self._event(EventKind.RELABEL, Why.BIND_REJECTED, now, record, str(exc))
                continue
            holding[relabel.job_id] = relabelled
            self._event(EventKind.RELABEL, relabel.admitted_as, now, relabelled,
                        f"now {relabel.admitted_as}: {relabel.for_job}, non-preemptible, takes the team's nominal "
                        f"quota", data={"for_job": relabel.for_job})
        for admit in result.admits:
            record = pending.get(admit.job_id)
            if record is None:
                continue
            try:
                bound = self.store.bind(admit.job_id, admit.placement, admit.admitted_as, epoch=self.epoch, now=now)
            except (Conflict, NotFound) as exc:
                self._event(EventKind.ADMIT, Why.BIND_REJECTED, now, record, str(exc))
                continue
            launched = self._launch(bound, now)
            if launched is JobState.RUNNING:
                report.admitted.append(admit.job_id)
                self._event(EventKind.ADMIT, admit.admitted_as, now, bound,
                            f"{admit.admitted_as} on {', '.join(admit.placement.nodes)}",
                            data={"nodes": list(admit.placement.nodes), "backfill": admit.backfill})
            elif launched is JobState.PENDING:
                report.requeued.append(admit.job_id)
            else:
                report.finished[admit.job_id] = launched
        # The waits, their events and the reservations' events: one store call, one transaction on SQL stores.
        events = self._note_reservations(result, now)
        waits = [(w.job_id, w.reason, f"{w.message}; estimated start {w.estimate_note}" if w.estimate_note
                  else w.message, w.position, w.estimated_start) for w in result.waits]
        for wait in result.waits:
            record = pending.get(wait.job_id)
            if record is not None and record.wait_reason != wait.reason:
                events.append(Event(at=now, kind=EventKind.WAIT, reason=str(wait.reason), message=wait.message,
                                    job_id=record.id, team=record.team,
                                    data={"position": wait.position, "estimated_start": wait.estimated_start}))
        self.store.set_waits(waits, now, events=events)
        report.waits = len(waits)

    def _launch(self, record: JobRecord, now: float) -> JobState:
        """Start the gang the store just bound; where the job went (RUNNING: launched).

        A launch that fails because of the spec itself (``SpecNotLaunchable``: an argv the OS refuses, a NUL byte)
        fails the job at once, on its own budget: every retry would fail the same way. Any other failure is the
        infrastructure's: requeued, within ``max_infra_restarts``. Either way the units are released, so a failing
        launch never holds GPUs, and a cancel answered meanwhile ends the job (the store sees to that)."""
        assert record.placement is not None
        spec = record.spec
        measured = record.last_checkpoint.cost_s if record.last_checkpoint is not None else None
        interval = checkpoint_interval_s(spec.checkpoint.interval, units=spec.total_units, measured_cost_s=measured,
                                         spec_cost_s=spec.checkpoint.cost,
                                         gpu_hours_per_interruption=self.config.gpu_hours_per_interruption)
        uri = spec.checkpoint.uri or default_checkpoint_uri(self.config.checkpoint_root, spec.team, record.id)
        attempt = record.restarts + record.infra_restarts + record.preemptions
        env = gang_env(record.id, spec, record.placement, checkpoint_uri=uri, checkpoint_interval_s=interval,
                       master_addr=self.executor.master_addr(record.id, record.placement, attempt))
        if self.job_tokens is not None:
            env.update(self.job_tokens.env_for(record.id, record.user, spec))
        request = LaunchRequest(
            job_id=record.id, spec=spec, placement=record.placement, nodes=nodes_of(record.placement, self._nodes),
            env=env,
            attempt=attempt, container_devices=self.executor.container_devices)
        try:
            self.executor.launch(request)
        except StaleLeader:
            raise
        except SpecNotLaunchable as exc:
            return self._launch_failed(record, now, JobState.FAILED, f"cannot launch: {exc}", own_fault=True)
        except Exception as exc:   # noqa: BLE001 - whatever the backend raised, the units must not stay held
            if record.infra_restarts >= self.config.max_infra_restarts:
                return self._launch_failed(record, now, JobState.FAILED,
                                           f"launch failed: {exc}; infrastructure restart budget of "
                                           f"{self.config.max_infra_restarts} spent")
            return self._launch_failed(record, now, JobState.PENDING, f"launch failed: {exc}", infra_fault=True)
        self._gangs[record.id] = self._tracker(record, launched_at=now)
        return JobState.RUNNING

    def _launch_failed(self, record: JobRecord, now: float, state: JobState, message: str, *,
                       own_fault: bool = False, infra_fault: bool = False) -> JobState:
        released = self.store.release(record.id, state=state, now=now, epoch=self.epoch, message=message,
                                      own_fault=own_fault, infra_fault=infra_fault)
        if self.job_tokens is not None:
            self.job_tokens.released(record.id, record.spec)
        self._account(record, now)
        if released.state is JobState.PENDING:
            self._event(EventKind.REQUEUE, Why.LAUNCH_FAILED, now, released, message)
        else:
            self._builder.forget(record.id)
            self._event(EventKind.FINISH, Why.LAUNCH_FAILED, now, released, released.message,
                        data={"exit_code": released.exit_code})
        return released.state

    def _note_reservations(self, result: CycleResult, now: float) -> list[Event]:
        """The events of reservations that are new or changed (written with the cycle's waits)."""
        current = {r.job_id: r for r in result.reservations}
        events = [Event(at=now, kind=EventKind.RESERVE, reason="Reserved", job_id=job_id,
                        message=f"{len(reserve.nodes)} {reserve.flavour} nodes from {format_instant(reserve.start_at)}",
                        data={"nodes": list(reserve.nodes), "start_at": reserve.start_at})
                  for job_id, reserve in current.items() if self._reservations.get(job_id) != reserve]
        self._reservations = current
        return events

    # -- stopping and finishing gangs ----------------------------------------------------------------------------
    def _stop(self, gang: Gang, stop: Stop, *, grace_s: float, requeue: bool, now: float,
              report: StepReport | None, message: str) -> JobRecord:
        """Signal the whole gang: written to the store first (fenced), then the executor."""
        record = self.store.mark_terminating(gang.job_id, requeue=requeue, terminate_by=now + grace_s, now=now,
                                             epoch=self.epoch)
        if gang.stop is not Stop.CANCEL:
            gang.stop = stop
            gang.message = message
        self.executor.terminate(gang.job_id, grace_s)
        if report is not None:
            report.stopped.append(gang.job_id)
        return record

    def _finish(self, gang: Gang, now: float, report: StepReport) -> None:
        """Every pod has ended: release the units and send the job where its stop reason says."""
        record = self.store.get(gang.job_id)
        out = self._outcome(gang, record)
        state, why = out.state, out.why
        released = self.store.release(gang.job_id, state=state, now=now, epoch=self.epoch, exit_code=out.exit_code,
                                      message=out.message, infra_fault=out.infra_fault, own_fault=out.own_fault,
                                      restart_block=out.restart_block, avoid_nodes=out.avoid_nodes)
        del self._gangs[gang.job_id]
        if self.job_tokens is not None:
            self.job_tokens.released(gang.job_id, record.spec)
        self._account(record, now)
        state = released.state   # a cancel answered meanwhile turns a requeue into CANCELLED (Store.release)
        if state is JobState.PENDING:
            report.requeued.append(gang.job_id)
            self._event(EventKind.REQUEUE, why, now, released, released.message)
        else:
            report.finished[gang.job_id] = state
            self._note_runtime(record, state, now)
            self._builder.forget(gang.job_id)
            self._event(EventKind.FINISH, why, now, released, released.message,
                        data={"exit_code": released.exit_code})

    def _outcome(self, gang: Gang, record: JobRecord) -> _Outcome:
        """Where a job goes once its gang has ended. A cancel wins over everything; then infrastructure faults
        (free restarts), then the job's own fault (bounded by ``max_restarts``), then the policy's stop."""
        codes = [code for code in gang.ended.values() if code is not None]
        exit_code = gang.first_bad_exit if gang.first_bad_exit is not None else (codes[0] if codes else None)
        if gang.stop is Stop.CANCEL or record.cancel_requested:
            return _Outcome(JobState.CANCELLED, JobState.CANCELLED.value, exit_code, "cancelled")
        if gang.stop is not None and gang.stop.infra:
            if record.infra_restarts >= self.config.max_infra_restarts:
                return _Outcome(JobState.FAILED, JobState.FAILED.value, exit_code,
                                f"{gang.message}; infrastructure restart budget of "
                                f"{self.config.max_infra_restarts} spent")
            return _Outcome(JobState.PENDING, _INFRA_WHY[gang.stop], exit_code, gang.message, infra_fault=True,
                            restart_block=gang.restart_block, avoid_nodes=tuple(sorted(gang.avoid)))
        if gang.stop is Stop.OWN_FAULT:
            if gang.cannot_start:
                return _Outcome(JobState.FAILED, JobState.FAILED.value, exit_code,
                                f"{gang.message}; not retried: the command cannot be started")
            if record.restarts < record.spec.max_restarts:
                return _Outcome(JobState.PENDING, Why.OWN_FAULT, exit_code, gang.message, own_fault=True)
            return _Outcome(JobState.FAILED, JobState.FAILED.value, exit_code,
                            f"{gang.message}; restart budget of {record.spec.max_restarts} spent")
        if gang.stop is Stop.PREEMPT:
            return _Outcome(JobState.PENDING, Why.PREEMPTED, exit_code, gang.message,
                            avoid_nodes=tuple(sorted(gang.avoid)))
        if gang.stop is Stop.POLICY_END:
            state = JobState.TIMED_OUT if gang.preempt_reason is PreemptReason.TIME_LIMIT else JobState.CANCELLED
            return _Outcome(state, state.value, exit_code, gang.message)
        return _Outcome(JobState.SUCCEEDED, JobState.SUCCEEDED.value, 0, "")

    def _note_runtime(self, record: JobRecord, state: JobState, now: float) -> None:
        """A job that ended on its own, in one go, tells how long its team's jobs of its kind really run (for
        estimated starts): it succeeded, or it is a notebook its user or the reaper stopped."""
        ended_by_itself = state is JobState.SUCCEEDED or (state is JobState.CANCELLED
                                                          and record.spec.kind is JobKind.NOTEBOOK)
        if (not ended_by_itself or record.admitted_at is None or record.restarts or record.infra_restarts
                or record.preemptions):
            return
        self._runtimes.observe(record.team, record.spec.kind.value, now - record.admitted_at, record.spec.time_limit)

    def _account(self, record: JobRecord, now: float) -> None:
        """Attained service (for the policy's levels) and the fair-share ledger, for the time units were held."""
        assert record.placement is not None and record.admitted_at is not None
        held = max(now - record.admitted_at, 0.0)
        units = sum(len(pod.units) for pod in record.placement.pods)
        self.store.add_attained(record.id, units * held)
        request = self._builder.request(record)
        self._ledger.add(record.team, usage_amounts(record.placement.flavour, units, len(record.placement.pods),
                                                    request.cpus_per_pod, request.memory_gb_per_pod, held), now)

    # -- helpers -------------------------------------------------------------------------------------------------
    def _tracker(self, record: JobRecord, launched_at: float | None = None) -> Gang:
        assert record.placement is not None
        gang = Gang(job_id=record.id, nodes=tuple(pod.node for pod in record.placement.pods),
                    launched_at=launched_at if launched_at is not None else (record.admitted_at or 0.0),
                    detector=StragglerDetector(threshold=self.config.straggler_threshold,
                                               window=self.config.straggler_window))
        if record.state is not JobState.ADMITTED:
            gang.started = set(range(gang.pods))
            gang.marked_running = True
        if record.state is JobState.TERMINATING:
            gang.stop = (Stop.CANCEL if record.cancel_requested else
                         Stop.PREEMPT if record.requeue_on_exit else Stop.POLICY_END)
            gang.message = "stopping when the scheduler restarted"
            if gang.stop is Stop.POLICY_END:
                gang.preempt_reason = PreemptReason.TIME_LIMIT
        return gang

    def _load_ledger(self) -> None:
        if self._ledger_loaded:
            return
        self._ledger_loaded = True
        shapes: dict[str, tuple[int, int, int]] = {}   # job id → (pods, CPUs per pod, GB per pod)
        for usage in self.store.usage():
            if usage.job_id not in shapes:
                try:
                    record = self.store.get(usage.job_id)
                except NotFound:
                    shapes[usage.job_id] = (0, 0, 0)
                else:
                    request = self._builder.derive(record)
                    shapes[usage.job_id] = (request.pods, request.cpus_per_pod, request.memory_gb_per_pod)
            pods, cpus, memory = shapes[usage.job_id]
            self._ledger.add(usage.team, usage_amounts(usage.flavour, usage.units, pods, cpus, memory,
                                                       usage.end - usage.start), usage.end)

    def _event(self, kind: EventKind, reason: str, at: float, record: JobRecord, message: str = "", *,
               node: str | None = None, data: dict[str, object] | None = None) -> None:
        self.store.append_event(Event(at=at, kind=kind, reason=str(reason), message=message, job_id=record.id,
                                      node=node, team=record.team, data=dict(data or {})))

    def _lost_leadership(self, now: float, report: StepReport) -> None:
        report.stale_leader = True
        self.store.append_event(Event(at=now, kind=EventKind.LEADERSHIP, reason=Why.STALE_LEADER,
                                      message=f"epoch {self.epoch} is stale; this cycle's remaining decisions "
                                              f"were dropped"))


def _int(value: object, default: int) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_ID = attrgetter("id")


def _by_id(records: Sequence[JobRecord]) -> dict[str, JobRecord]:
    """Records by id, built without a Python loop: every pass does it for every holding and pending job."""
    return dict(zip(map(_ID, records), records))
