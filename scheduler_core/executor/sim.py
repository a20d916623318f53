"""``SimExecutor``: gangs that run in virtual time, for the simulator and the controller's tests.

A simulated job is a counter of work: it needs ``work_s`` seconds of progress at full speed. Its pods start after a
latency; once all have started the gang computes, pausing while it writes a checkpoint. A checkpoint saves the
progress it began with under the job's ``SHOAL_CHECKPOINT_URI``; the next launch with that URI resumes from it, so
work done since the last checkpoint is lost on a kill or a node failure, exactly the cost the real platform pays.
On SIGTERM an honest job checkpoints and exits 0 if the grace allows; otherwise it is killed when the grace ends.

Time moves only when the caller says so (``poll(now)``, ``fail_node(node, now)``); between those calls the executor's
present is the latest ``now`` it was given. ``next_event_at()`` lets a discrete-event engine jump straight to the
next thing that will happen instead of ticking.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from ..errors import Conflict
from ..job_env import pod_env
from .base import Executor, GpuErrorReport, LaunchRequest, PodEvent, PodEventKind

#: Exit codes a simulated pod reports when signalled to death, as ``subprocess`` reports them (minus the signal).
KILLED = -9
TERMINATED = -15


@dataclass(frozen=True, slots=True)
class SimBehaviour:
    """How one launch of a simulated job behaves.

    ``work_s``: progress needed to finish (``math.inf``: runs until signalled). ``start_latency_s``: per pod (one value
    for all, or one per rank; ``math.inf``: that pod never starts). ``checkpoint_interval_s``: seconds between periodic
    checkpoints; ``"env"`` follows ``SHOAL_CHECKPOINT_INTERVAL`` as an honest job does; ``None``: only when asked or
    signalled. ``checkpoint_cost_s``: time to write one (``None``: the job cannot checkpoint). ``honours_sigterm``:
    checkpoints and exits within the grace; otherwise it runs on until killed. ``exit_code``: reported when the work
    is done (non-zero: the job's own fault). ``step_s``: seconds per training step at full speed.
    ``report_every_s``: how often each rank reports its step time (``None``: never).
    """

    work_s: float = 3600.0
    start_latency_s: float | tuple[float, ...] = 5.0
    checkpoint_interval_s: float | Literal["env"] | None = "env"
    checkpoint_cost_s: float | None = 30.0
    honours_sigterm: bool = True
    exit_code: int = 0
    step_s: float = 1.0
    report_every_s: float | None = None
    checkpoint_bytes: int = 1 << 30

    def latency(self, rank: int) -> float:
        if isinstance(self.start_latency_s, tuple):
            return self.start_latency_s[rank] if rank < len(self.start_latency_s) else self.start_latency_s[-1]
        return self.start_latency_s


BehaviourFn = Callable[[LaunchRequest], SimBehaviour]


class _Pod(Enum):
    STARTING = 0
    LIVE = 1
    DONE = 2


# What can happen next to a gang, in the order that wins a tie at one instant.
_START, _CKPT_DONE, _FINISH, _KILL, _CKPT_BEGIN, _REPORT = range(6)


@dataclass(slots=True)
class _Gang:
    request: LaunchRequest
    behaviour: SimBehaviour
    uri: str
    start_at: list[float]
    pods: list[_Pod]
    interval_s: float | None
    progress: float                       # work done as of ``since``
    saved: float                          # progress in the newest checkpoint
    since: float = 0.0
    rate: float = 0.0                     # progress per second now (0 unless computing)
    computing: bool = False
    broken: bool = False
    ckpt_begin_at: float | None = None    # a checkpoint is being written since then
    ckpt_progress: float = 0.0
    next_ckpt_at: float | None = None
    next_report_at: float | None = None
    checkpoint_wanted: bool = False       # asked before the gang was computing
    exit_after_ckpt: bool = False
    signalled: bool = False
    kill_at: float | None = None
    version: int = 0                      # the heap entry that is current for this gang
    slowdown: float = 1.0

    @property
    def job_id(self) -> str:
        return self.request.job_id

    @property
    def units(self) -> int:
        return sum(len(pod.units) for pod in self.request.placement.pods)

    @property
    def done(self) -> bool:
        return all(state is _Pod.DONE for state in self.pods)


@dataclass(slots=True)
class SimStats:
    """What the simulator reports about work: GPU-seconds lost to kills and failures, checkpoints written."""

    lost_gpu_s: dict[str, float] = field(default_factory=dict)
    checkpoints: int = 0


class SimExecutor(Executor):
    """An ``Executor`` in virtual time. ``behaviour`` says how each launch behaves (default: ``SimBehaviour()``)."""

    def __init__(self, behaviour: BehaviourFn | SimBehaviour | None = None, *, now: float = 0.0) -> None:
        """``now``: the virtual instant the executor starts at (a simulation may start before 0, in warm-up)."""
        if behaviour is None or isinstance(behaviour, SimBehaviour):
            fixed = behaviour or SimBehaviour()
            self._behaviour: BehaviourFn = lambda request: fixed
        else:
            self._behaviour = behaviour
        self._now = now
        self._gangs: dict[str, _Gang] = {}
        self._heap: list[tuple[float, int, int, str, int]] = []
        self._seq = 0
        self._outbox: list[PodEvent] = []
        self._saved: dict[str, float] = {}           # checkpoint URI → progress saved there
        self._uri_of: dict[str, str] = {}             # job id → its checkpoint URI (last launch)
        self._failed_nodes: set[str] = set()
        self._slow_nodes: dict[str, float] = {}
        self._gpu_errors: dict[str, GpuErrorReport] = {}
        self._ends_waiting = 0                        # EXITED/FAILED events in the outbox
        self.stats = SimStats()

    # -- the Executor interface ----------------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> None:
        if request.job_id in self._gangs:
            raise Conflict(f"job {request.job_id} still has pods running; it cannot be launched again")
        for rank, pod in enumerate(request.placement.pods):
            node = request.nodes.get(pod.node)
            if node is None:
                raise Conflict(f"pod {rank} of job {request.job_id} is placed on {pod.node}, which the request "
                               f"does not describe")
            available = len(node.devices.get(request.placement.flavour, ()))
            if any(not 0 <= unit < available for unit in pod.units):
                raise Conflict(f"pod {rank} of job {request.job_id} names units {pod.units} of "
                               f"{request.placement.flavour}, but {pod.node} has {available}")
        behaviour = self._behaviour(request)
        uri = request.env.get("SHOAL_CHECKPOINT_URI", f"sim://{request.job_id}/")
        interval: float | None
        if behaviour.checkpoint_interval_s == "env":
            raw = request.env.get("SHOAL_CHECKPOINT_INTERVAL")
            interval = float(raw) if raw else None
        else:
            interval = behaviour.checkpoint_interval_s
        saved = self._saved.get(uri, 0.0)
        now = self._now
        pods = request.placement.pods
        gang = _Gang(request=request, behaviour=behaviour, uri=uri,
                     start_at=[now + behaviour.latency(rank) for rank in range(len(pods))],
                     pods=[_Pod.STARTING] * len(pods), interval_s=interval, progress=saved, saved=saved, since=now)
        self._gangs[request.job_id] = gang
        self._uri_of[request.job_id] = uri
        for rank, pod in enumerate(pods):
            if pod.node in self._failed_nodes:
                self._end_pod(gang, rank, PodEventKind.FAILED, now, message=f"node {pod.node} is down")
        if gang.pods.count(_Pod.DONE):
            self._break(gang, now)
        self._reschedule(gang)

    def terminate(self, job_id: str, grace_s: float) -> None:
        gang = self._gangs.get(job_id)
        if gang is None:
            return
        now = self._now
        kill_at = now + max(grace_s, 0.0)
        gang.kill_at = kill_at if gang.kill_at is None else min(gang.kill_at, kill_at)
        if gang.kill_at <= now:
            self._kill(gang, now)
        elif not gang.signalled:
            gang.signalled = True
            self._sigterm(gang, now)
        self._reschedule(gang)

    def request_checkpoint(self, job_id: str) -> None:
        gang = self._gangs.get(job_id)
        if gang is None or gang.signalled or gang.broken or gang.behaviour.checkpoint_cost_s is None:
            return
        if gang.computing:
            if gang.ckpt_begin_at is None:
                self._begin_checkpoint(gang, self._now)
                self._reschedule(gang)
        else:
            gang.checkpoint_wanted = True

    def poll(self, now: float) -> list[PodEvent]:
        self._advance(now)
        events, self._outbox = self._outbox, []
        self._ends_waiting = 0
        return events

    def running_jobs(self) -> set[str]:
        return set(self._gangs)

    # -- what the simulator drives -------------------------------------------------------------------------------
    def next_event_at(self) -> float | None:
        """When the next pod event will happen (the present if some wait to be polled); ``None``: nothing will."""
        if self._outbox:
            return self._now
        while self._heap:
            at, _, _, job_id, version = self._heap[0]
            gang = self._gangs.get(job_id)
            if gang is not None and gang.version == version:
                return at
            heapq.heappop(self._heap)
        return None

    def advance_to_pod_end(self, limit: float) -> float | None:
        """Let simulated time run, event by event, up to ``limit`` at most, and stop just after the first event that
        ends a pod (an exit, a kill, a loss); return when that was, or ``None`` if none happened by ``limit``.

        Everything that fired (starts, checkpoints, ...) waits for the next ``poll`` with its own timestamp, as if
        the controller had not looked in between. A simulator uses it to skip controller steps that would only see
        pods start or checkpoint, which frees no units. If a pod end is already waiting, returns the present."""
        while not self._ends_waiting:
            due = self.next_scheduled_at()
            if due is None or due > limit:
                return None
            at, what, _, job_id, version = heapq.heappop(self._heap)
            gang = self._gangs.get(job_id)
            if gang is None or gang.version != version:
                continue
            self._now = max(self._now, at)
            self._fire(gang, what, at)
            self._reschedule(gang)
        return self._now

    def next_scheduled_at(self) -> float | None:
        """When the next scheduled event will happen, whatever waits in the outbox already."""
        while self._heap:
            at, _, _, job_id, version = self._heap[0]
            gang = self._gangs.get(job_id)
            if gang is not None and gang.version == version:
                return at
            heapq.heappop(self._heap)
        return None

    def fail_node(self, node: str, now: float) -> None:
        """The node is lost at ``now``: its pods FAIL (an infrastructure fault) and their gangs stop making progress
        until the controller stops them. Pods launched there later fail at once, until ``repair_node``."""
        self._advance(now)
        self._failed_nodes.add(node)
        for gang in list(self._gangs.values()):
            hit = [rank for rank, pod in enumerate(gang.request.placement.pods)
                   if pod.node == node and gang.pods[rank] is not _Pod.DONE]
            if not hit:
                continue
            for rank in hit:
                self._end_pod(gang, rank, PodEventKind.FAILED, self._now, message=f"node {node} lost")
            self._break(gang, self._now)
            self._reschedule(gang)

    def repair_node(self, node: str) -> None:
        self._failed_nodes.discard(node)

    def report_gpu_errors(self, node: str, count: int, detail: str = "") -> None:
        """Set ``node``'s GPU error counter (``gpu_errors``), as NVML would count XID or ECC errors."""
        self._gpu_errors[node] = GpuErrorReport(count, detail)

    def gpu_errors(self, now: float) -> dict[str, GpuErrorReport]:
        return dict(self._gpu_errors)

    def set_node_slowdown(self, node: str, factor: float) -> None:
        """Make every step on ``node`` take ``factor`` times longer (1.0: healthy). The gang runs at the pace of its
        slowest rank, and that rank reports the longer step times."""
        if factor <= 0:
            raise ValueError(f"slowdown factor must be positive, got {factor}")
        if factor == 1.0:
            self._slow_nodes.pop(node, None)
        else:
            self._slow_nodes[node] = factor
        for gang in self._gangs.values():
            if node in gang.request.placement.nodes:
                self._sync(gang, self._now)
                gang.slowdown = self._gang_slowdown(gang)
                if gang.computing and gang.ckpt_begin_at is None:
                    gang.rate = 1.0 / gang.slowdown
                self._reschedule(gang)

    def progress(self, job_id: str) -> float:
        """Work done by the job: live if it runs, else what its newest checkpoint holds."""
        gang = self._gangs.get(job_id)
        if gang is not None:
            return gang.progress + gang.rate * (self._now - gang.since)
        uri = self._uri_of.get(job_id)
        return self._saved.get(uri, 0.0) if uri is not None else 0.0

    def pod_env(self, job_id: str, rank: int) -> dict[str, str]:
        """The environment pod ``rank`` of a live gang was started with (``KeyError`` if the job does not run)."""
        return pod_env(self._gangs[job_id].request, rank)

    @property
    def now(self) -> float:
        return self._now

    # -- the engine ----------------------------------------------------------------------------------------------
    def _advance(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            at, what, _, job_id, version = heapq.heappop(self._heap)
            gang = self._gangs.get(job_id)
            if gang is None or gang.version != version:
                continue
            self._now = max(self._now, at)
            self._fire(gang, what, at)
            self._reschedule(gang)
        self._now = max(self._now, now)

    def _reschedule(self, gang: _Gang) -> None:
        # Versions come from one executor-wide counter, so an entry left by an earlier launch of the same job id
        # can never pass for the current gang's.
        self._seq += 1
        gang.version = self._seq
        if gang.done:
            self._gangs.pop(gang.job_id, None)
            return
        due = self._due(gang)
        if due is not None:
            heapq.heappush(self._heap, (due[0], due[1], self._seq, gang.job_id, gang.version))

    def _due(self, gang: _Gang) -> tuple[float, int] | None:
        candidates: list[tuple[float, int]] = []
        starts = [at for at, state in zip(gang.start_at, gang.pods) if state is _Pod.STARTING and math.isfinite(at)]
        if starts:
            candidates.append((min(starts), _START))
        if gang.ckpt_begin_at is not None:
            assert gang.behaviour.checkpoint_cost_s is not None
            candidates.append((gang.ckpt_begin_at + gang.behaviour.checkpoint_cost_s, _CKPT_DONE))
        elif gang.computing and gang.rate > 0:
            if math.isfinite(gang.behaviour.work_s):
                candidates.append((gang.since + max(gang.behaviour.work_s - gang.progress, 0.0) / gang.rate, _FINISH))
            if gang.next_ckpt_at is not None and not gang.signalled:
                candidates.append((gang.next_ckpt_at, _CKPT_BEGIN))
        if gang.computing and gang.next_report_at is not None:
            candidates.append((gang.next_report_at, _REPORT))
        if gang.kill_at is not None:
            candidates.append((gang.kill_at, _KILL))
        return min(candidates) if candidates else None

    def _fire(self, gang: _Gang, what: int, at: float) -> None:
        if what == _START:
            for rank, state in enumerate(gang.pods):
                if state is _Pod.STARTING and gang.start_at[rank] <= at:
                    gang.pods[rank] = _Pod.LIVE
                    self._emit(gang, rank, PodEventKind.STARTED, at)
            if all(state is _Pod.LIVE for state in gang.pods) and not gang.broken:
                self._start_computing(gang, at)
        elif what == _CKPT_DONE:
            self._finish_checkpoint(gang, at)
        elif what == _FINISH:
            self._sync(gang, at)
            gang.progress = gang.behaviour.work_s
            for rank in self._live(gang):
                self._end_pod(gang, rank, PodEventKind.EXITED, at, exit_code=gang.behaviour.exit_code)
        elif what == _KILL:
            self._kill(gang, at)
        elif what == _CKPT_BEGIN:
            self._begin_checkpoint(gang, at)
        elif what == _REPORT:
            self._report(gang, at)

    # -- transitions ---------------------------------------------------------------------------------------------
    def _start_computing(self, gang: _Gang, at: float) -> None:
        gang.computing = True
        gang.since = at
        gang.slowdown = self._gang_slowdown(gang)
        gang.rate = 1.0 / gang.slowdown
        if gang.interval_s is not None:
            gang.next_ckpt_at = at + gang.interval_s
        if gang.behaviour.report_every_s is not None:
            gang.next_report_at = at + gang.behaviour.report_every_s
        if gang.checkpoint_wanted:
            gang.checkpoint_wanted = False
            self._begin_checkpoint(gang, at)

    def _begin_checkpoint(self, gang: _Gang, at: float) -> None:
        self._sync(gang, at)
        gang.ckpt_begin_at = at
        gang.ckpt_progress = gang.progress
        gang.rate = 0.0

    def _finish_checkpoint(self, gang: _Gang, at: float) -> None:
        behaviour = gang.behaviour
        assert behaviour.checkpoint_cost_s is not None
        self._sync(gang, at)
        gang.saved = gang.ckpt_progress
        self._saved[gang.uri] = gang.saved
        self.stats.checkpoints += 1
        step = int(gang.saved / behaviour.step_s)
        self._emit(gang, 0, PodEventKind.CHECKPOINT, at, data={
            "step": step, "uri": f"{gang.uri}step-{step:08d}/", "bytes": behaviour.checkpoint_bytes,
            "cost_s": behaviour.checkpoint_cost_s, "verified": True, "progress_s": gang.saved})
        gang.ckpt_begin_at = None
        if gang.exit_after_ckpt:
            for rank in self._live(gang):
                self._end_pod(gang, rank, PodEventKind.EXITED, at, exit_code=0)
            return
        gang.rate = 1.0 / gang.slowdown
        if gang.interval_s is not None:
            gang.next_ckpt_at = at + gang.interval_s

    def _sigterm(self, gang: _Gang, at: float) -> None:
        behaviour = gang.behaviour
        for rank, state in enumerate(gang.pods):
            if state is _Pod.STARTING:
                self._end_pod(gang, rank, PodEventKind.EXITED, at, exit_code=TERMINATED,
                              message="terminated before it started")
        if gang.broken:
            for rank in self._live(gang):
                self._end_pod(gang, rank, PodEventKind.EXITED, at, exit_code=TERMINATED, message="gang broken")
            return
        if not behaviour.honours_sigterm:
            return
        if not gang.computing or behaviour.checkpoint_cost_s is None:
            for rank in self._live(gang):
                self._end_pod(gang, rank, PodEventKind.EXITED, at, exit_code=0)
            return
        gang.exit_after_ckpt = True
        if gang.ckpt_begin_at is None:
            self._begin_checkpoint(gang, at)

    def _kill(self, gang: _Gang, at: float) -> None:
        for rank, state in enumerate(gang.pods):
            if state is not _Pod.DONE:
                self._end_pod(gang, rank, PodEventKind.EXITED, at, exit_code=KILLED, message="killed at grace end")

    def _break(self, gang: _Gang, at: float) -> None:
        self._sync(gang, at)
        gang.broken = True
        gang.computing = False
        gang.rate = 0.0
        gang.ckpt_begin_at = None
        gang.next_report_at = None

    def _report(self, gang: _Gang, at: float) -> None:
        behaviour = gang.behaviour
        assert behaviour.report_every_s is not None
        step = int((gang.progress + gang.rate * (at - gang.since)) / behaviour.step_s)
        for rank in self._live(gang):
            node = gang.request.placement.pods[rank].node
            self._emit(gang, rank, PodEventKind.STEP_TIME, at, data={
                "step": step, "step_time_s": behaviour.step_s * self._slow_nodes.get(node, 1.0)})
        gang.next_report_at = at + behaviour.report_every_s

    def _end_pod(self, gang: _Gang, rank: int, kind: PodEventKind, at: float, *, exit_code: int | None = None,
                 message: str = "") -> None:
        if gang.pods[rank] is _Pod.DONE:
            return
        gang.pods[rank] = _Pod.DONE
        self._emit(gang, rank, kind, at, exit_code=exit_code, message=message)
        if gang.done:
            self._sync(gang, at)
            finished = gang.progress >= gang.behaviour.work_s
            lost = 0.0 if finished else max(gang.progress - gang.saved, 0.0)
            if lost > 0:
                self.stats.lost_gpu_s[gang.job_id] = self.stats.lost_gpu_s.get(gang.job_id, 0.0) + lost * gang.units
            gang.rate = 0.0
            gang.computing = False

    def _emit(self, gang: _Gang, rank: int, kind: PodEventKind, at: float, *, exit_code: int | None = None,
              message: str = "", data: dict[str, object] | None = None) -> None:
        self._outbox.append(PodEvent(job_id=gang.job_id, rank=rank, kind=kind, at=at,
                                     node=gang.request.placement.pods[rank].node, exit_code=exit_code,
                                     message=message, data=data or {}))
        if kind is PodEventKind.EXITED or kind is PodEventKind.FAILED:
            self._ends_waiting += 1

    # -- helpers -------------------------------------------------------------------------------------------------
    @staticmethod
    def _sync(gang: _Gang, at: float) -> None:
        if at > gang.since:
            gang.progress += gang.rate * (at - gang.since)
            gang.since = at

    @staticmethod
    def _live(gang: _Gang) -> list[int]:
        return [rank for rank, state in enumerate(gang.pods) if state is _Pod.LIVE]

    def _gang_slowdown(self, gang: _Gang) -> float:
        return max((self._slow_nodes.get(node, 1.0) for node in gang.request.placement.nodes), default=1.0)
