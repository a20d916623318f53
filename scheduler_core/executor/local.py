"""``LocalExecutor``: every pod a real process on this machine, on a virtual cluster or the machine's own GPUs.

How a pod runs. ``launch`` starts ``podwrap.py`` (a tiny stdlib wrapper) as a new session — its own process group,
detached from the scheduler, so it keeps running when the scheduler stops — and the wrapper starts the job's
command with the job contract's environment (``job_env.pod_env``; ``CUDA_VISIBLE_DEVICES`` as GPU indices or MIG
UUIDs), stdout and stderr to ``<state_dir>/logs/<job_id>/<attempt>/rank-<r>.log``.

Everything the executor knows lives in files under ``<state_dir>/pods/<job_id>/<attempt>/``, so any executor
instance — this one, or a restarted scheduler's — can pick a gang up (``adopt``) and keep reporting it exactly once:

* ``rank-<r>/pod.json``: node, wrapper pid and its start time in ``/proc`` (a recycled pid is never mistaken for it);
* ``rank-<r>/exit.json``: written by the wrapper when the command ends (an adopted pod is not our child);
* ``rank-<r>/kill_at``: the grace deadline; the wrapper enforces it too, so it holds with no scheduler running;
* ``rank-<r>/killed``, ``failed``, ``term_sent``, ``usr1_requested``: what the executor did to the pod;
* ``rank-<r>/reported.json`` and ``reports.offset``: which events were already handed out;
* ``reports.jsonl``: the job contract helper's reports (checkpoints, step times), one JSON line each.

Signals. Terminating sends SIGTERM to the pod's process group and SIGKILL at the deadline. A job started a moment
ago may not have installed its SIGTERM handler yet; SIGTERM is held back until the command handles or ignores it
(``/proc/<pid>/status``) or ``sigterm_startup_window_s`` has passed, so a preemption in the first milliseconds does
not kill a job that would have checkpointed. Checkpoint requests (SIGUSR1) go only to processes of the pod that
handle SIGUSR1 — its default action would kill the job — and wait, like SIGTERM, until one does.

Time: events are stamped with the ``now`` given to ``poll``; deadlines use the wall clock, since they are shared
with the wrapper and with later executor instances.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Conflict, NotFound, SpecNotLaunchable
from ..job_env import pod_env
from ..model.cluster import Node
from . import procfs
from .base import CANNOT_START, Executor, GpuErrorReport, LaunchRequest, PodEvent, PodEventKind

log = logging.getLogger(__name__)

WRAPPER = Path(__file__).with_name("podwrap.py")
#: How long SIGTERM (and SIGUSR1) wait for a just-started command to install its handler; the stop's deadline
#: (SIGKILL) is kept whatever this says. It only delays stopping a job preempted in its first seconds, so it is
#: generous: a Python job importing its framework on a loaded node takes well over 5 s to reach its handler.
SIGTERM_STARTUP_WINDOW_S = 30.0
#: ``execve`` failures caused by the spec's argv or environment, not by this machine.
_SPEC_ERRNOS = frozenset({errno.E2BIG, errno.ENAMETOOLONG})
KILLED = -signal.SIGKILL
TERMINATED = -signal.SIGTERM

#: Popen objects of pods whose executor was closed: reaped later so they never linger as zombies.
_detached: list[subprocess.Popen[bytes]] = []


def _reap_detached() -> None:
    _detached[:] = [proc for proc in _detached if proc.poll() is None]


def _write_text(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temp.write_text(text)
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)   # a full disk leaves no half-written temporaries behind
        raise


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(slots=True)
class _Pod:
    job_id: str
    attempt: int
    rank: int
    node: str
    dir: Path
    pid: int                     # the wrapper: session and process group leader; 0 if the pod never started
    start_ticks: int
    launched_at: float
    popen: subprocess.Popen[bytes] | None = None
    started_reported: bool = False
    ended_reported: bool = False

    def marker(self, name: str) -> Path:
        return self.dir / name

    def has(self, name: str) -> bool:
        return (self.dir / name).exists()

    def child_pid(self) -> int | None:
        data = _read_json(self.dir / "child.json")
        return int(data["pid"]) if data and "pid" in data else None

    def save_reported(self) -> None:
        _write_text(self.dir / "reported.json",
                    json.dumps({"started": self.started_reported, "ended": self.ended_reported}))


@dataclass(frozen=True, slots=True)
class _End:
    """How a pod ended, as its files say."""

    kind: PodEventKind
    exit_code: int | None
    message: str
    cannot_start: bool = False


def _try_write(write: Callable[[], None]) -> bool:
    """Run one state-file write; ``False`` (logged) when the disk refuses it, so the caller tries again later."""
    try:
        write()
    except OSError as exc:
        log.warning("a pod state file could not be written (tried again at the next poll): %s", exc)
        return False
    return True


@dataclass(slots=True)
class _Gang:
    job_id: str
    attempt: int
    dir: Path
    pods: list[_Pod]
    report_offset: int = 0
    done: bool = False
    unsaved: set[int] = field(default_factory=set)   # ranks whose reported.json could not be written yet

    @property
    def live(self) -> list[_Pod]:
        return [pod for pod in self.pods if not pod.ended_reported]


class LocalExecutor(Executor):
    """Runs gangs as local processes. ``nodes``: the (virtual or real) nodes pods may be placed on.

    ``python``: the interpreter that runs the wrapper. ``env``: the base environment of every pod (default: this
    process's, as Slurm's ``--export=ALL``); the job contract's variables always win over it.
    """

    def __init__(self, state_dir: str | os.PathLike[str], nodes: Iterable[Node] | Mapping[str, Node] = (), *,
                 python: str = sys.executable, env: Mapping[str, str] | None = None,
                 sigterm_startup_window_s: float = SIGTERM_STARTUP_WINDOW_S,
                 clock: Callable[[], float] = time.time,
                 device_names: Mapping[tuple[str, int, int], str] | None = None,
                 gpu_utilization: Callable[[str], float | None] | None = None,
                 gpu_errors: Callable[[str], GpuErrorReport | None] | None = None) -> None:
        self.state_dir = Path(state_dir).resolve()  # pods run in other cwds: keep every path absolute
        node_list = list(nodes.values()) if isinstance(nodes, Mapping) else list(nodes)
        self.nodes: dict[str, Node] = {node.name: node for node in node_list}
        self.python = python
        self.base_env = dict(os.environ if env is None else env)
        self.sigterm_startup_window_s = sigterm_startup_window_s
        self._clock = clock
        # Real MIG devices have NVML UUIDs; (node, gpu, slice) → "MIG-…" overrides the derived ones.
        self._device_names = dict(device_names or {})
        self._gpu_utilization = gpu_utilization
        self._gpu_errors = gpu_errors
        self._gangs: dict[str, _Gang] = {}
        for sub in ("pods", "logs", "work", "nodes"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)

    # -- paths --------------------------------------------------------------------------------------------------
    def gang_dir(self, job_id: str, attempt: int) -> Path:
        return self.state_dir / "pods" / job_id / str(attempt)

    def log_path(self, job_id: str, attempt: int, rank: int) -> Path:
        """Where pod ``rank`` of that attempt writes its stdout and stderr."""
        return self.state_dir / "logs" / job_id / str(attempt) / f"rank-{rank}.log"

    def work_dir(self, job_id: str) -> Path:
        """The pods' working directory; kept across attempts so a restart finds what the last one left."""
        return self.state_dir / "work" / job_id

    def _failed_marker(self, node: str) -> Path:
        return self.state_dir / "nodes" / f"{node}.failed"

    # -- the Executor interface ---------------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> None:
        job_id = request.job_id
        if job_id in self.running_jobs():
            raise Conflict(f"job {job_id} still has pods running; it cannot be launched again")
        pods = request.placement.pods
        for rank, placed in enumerate(pods):
            node = request.nodes.get(placed.node)
            if node is None:
                raise Conflict(f"pod {rank} of job {job_id} is placed on {placed.node}, which the request "
                               f"does not describe")
            if self.nodes and placed.node not in self.nodes:
                raise NotFound(f"pod {rank} of job {job_id} is placed on {placed.node}, which is not a node of "
                               f"this executor ({len(self.nodes)} nodes)")
            available = len(node.devices.get(request.placement.flavour, ()))
            if any(not 0 <= unit < available for unit in placed.units):
                raise Conflict(f"pod {rank} of job {job_id} names units {placed.units} of "
                               f"{request.placement.flavour}, but {placed.node} has {available}")
        gang_dir = self.gang_dir(job_id, request.attempt)
        if gang_dir.exists():
            raise Conflict(f"job {job_id} attempt {request.attempt} was launched before; a relaunch needs a new "
                           f"attempt number")
        gang_dir.mkdir(parents=True)
        self.log_path(job_id, request.attempt, 0).parent.mkdir(parents=True, exist_ok=True)
        work = self.work_dir(job_id)
        work.mkdir(parents=True, exist_ok=True)
        gang = _Gang(job_id=job_id, attempt=request.attempt, dir=gang_dir, pods=[])
        # Named current before any pod starts, so a crash mid-launch leaves pods a later instance can see.
        _write_text(self.state_dir / "pods" / job_id / "current", str(request.attempt))
        now = self._clock()
        try:
            for rank, placed in enumerate(pods):
                gang.pods.append(self._start_pod(request, rank, placed.node, gang_dir, work, now))
        except BaseException as exc:
            for pod in gang.pods:
                self._kill(pod)
                pod.started_reported = pod.ended_reported = True
                pod.save_reported()
            _write_text(gang_dir / "done", "launch failed")
            if isinstance(exc, ValueError) or (isinstance(exc, OSError) and exc.errno in _SPEC_ERRNOS):
                # The spec's own argv or environment (a NUL byte, more than the kernel takes): no retry helps.
                raise SpecNotLaunchable(f"job {job_id}'s command and environment cannot be executed: {exc}") from exc
            if isinstance(exc, OSError):
                raise Conflict(f"job {job_id} could not be launched: {exc}") from exc
            raise
        self._gangs[job_id] = gang

    def terminate(self, job_id: str, grace_s: float) -> None:
        gang = self._gang(job_id)
        if gang is None:
            return
        now = self._clock()
        deadline = now + max(grace_s, 0.0)
        for pod in gang.live:
            if pod.pid == 0:
                continue
            kill_at = self._kill_at(pod)
            if kill_at is None or deadline < kill_at:
                _write_text(pod.marker("kill_at"), repr(deadline))
                kill_at = deadline
            pod.marker("usr1_requested").unlink(missing_ok=True)
            if kill_at <= now:
                self._kill(pod)
            else:
                if not pod.has("term_requested"):
                    _write_text(pod.marker("term_requested"), repr(now))
                self._deliver_term(pod, now)

    def request_checkpoint(self, job_id: str) -> None:
        gang = self._gang(job_id)
        if gang is None:
            return
        for pod in gang.live:
            if pod.pid == 0 or pod.has("term_requested") or pod.has("killed"):
                continue
            _write_text(pod.marker("usr1_requested"), repr(self._clock()))
            self._deliver_usr1(pod)

    def poll(self, now: float) -> list[PodEvent]:
        _reap_detached()
        events: list[PodEvent] = []
        for gang in list(self._gangs.values()):
            events.extend(self._poll_gang(gang, now))
            if gang.done:
                del self._gangs[gang.job_id]
        return events

    def running_jobs(self) -> set[str]:
        running = {job_id for job_id, gang in self._gangs.items() if gang.live}
        for job_dir in (self.state_dir / "pods").iterdir():
            if job_dir.name in running or job_dir.name in self._gangs:
                continue
            # A pod not yet reported counts as running, ended or not: a gang that ended while no scheduler could
            # record it (down, or its store full) is adopted and its ends reported, never taken for lost.
            gang = self._load(job_dir.name)
            if gang is not None and gang.live:
                running.add(job_dir.name)
        return running

    def adopt(self, job_ids: set[str]) -> None:
        """Take over gangs started by another executor instance over the same ``state_dir``."""
        for job_id in job_ids:
            if job_id not in self._gangs:
                gang = self._load(job_id)
                if gang is not None:
                    self._gangs[job_id] = gang

    def close(self) -> None:
        """Forget the gangs (they keep running); their processes are reaped by whoever polls next."""
        for gang in self._gangs.values():
            for pod in gang.pods:
                if pod.popen is not None and pod.popen.poll() is None:
                    _detached.append(pod.popen)
                pod.popen = None
        self._gangs.clear()

    # -- nodes --------------------------------------------------------------------------------------------------
    def fail_node(self, node: str, now: float | None = None) -> list[str]:
        """Lose ``node`` as hardware would: kill its pods at once (SIGKILL) and report them FAILED — an
        infrastructure fault, not the job's. Pods placed there later fail at once, until ``repair_node``.
        Returns the jobs hit. Works from any executor instance over the same ``state_dir``."""
        self._check_node(node)
        _write_text(self._failed_marker(node), repr(self._clock() if now is None else now))
        hit = []
        for job_id in sorted(self.running_jobs()):
            gang = self._gang(job_id)
            if gang is None:
                continue
            victims = [pod for pod in gang.live if pod.node == node and pod.pid != 0]
            for pod in victims:
                _write_text(pod.marker("failed"), f"node {node} failed")
                self._kill(pod)
            if victims:
                hit.append(job_id)
        return hit

    def repair_node(self, node: str) -> None:
        self._check_node(node)
        self._failed_marker(node).unlink(missing_ok=True)

    def failed_nodes(self) -> set[str]:
        return {path.name.removesuffix(".failed") for path in (self.state_dir / "nodes").glob("*.failed")}

    def heartbeats(self, now: float) -> dict[str, float | None]:
        """The nodes this machine can vouch for right now (all but failed ones), with GPU utilisation when a real
        GPU reports it. The controller writes these to the store as node heartbeats."""
        failed = self.failed_nodes()
        return {name: (self._gpu_utilization(name) if self._gpu_utilization else None)
                for name in self.nodes if name not in failed}

    def gpu_errors(self, now: float) -> dict[str, GpuErrorReport]:
        """Each node's GPU error count: NVML's (``gpus.LocalGpus.errors``) on a real GPU, plus the executor's own
        report, ``<state_dir>/nodes/<node>.gpu_errors`` (``{"count": N, "detail": "..."}``), which a node
        agent, a health script or a test writes for any node, virtual ones included. Failed nodes are left out."""
        failed = self.failed_nodes()
        reports: dict[str, GpuErrorReport] = {}
        for name in self.nodes:
            if name in failed:
                continue
            found = [report for report in (self._gpu_errors(name) if self._gpu_errors else None,
                                            self._reported_gpu_errors(name)) if report is not None]
            if found:
                reports[name] = GpuErrorReport(sum(r.count for r in found),
                                               "; ".join(r.detail for r in found if r.detail))
        return reports

    def report_gpu_errors(self, node: str, count: int, detail: str = "") -> None:
        """Write ``node``'s own GPU error report (the counter only grows: a lower count is ignored)."""
        self._check_node(node)
        _write_text(self.state_dir / "nodes" / f"{node}.gpu_errors", json.dumps({"count": count, "detail": detail}))

    def _reported_gpu_errors(self, node: str) -> GpuErrorReport | None:
        data = _read_json(self.state_dir / "nodes" / f"{node}.gpu_errors")
        if data is None or not isinstance(data.get("count"), int) or isinstance(data.get("count"), bool):
            return None
        return GpuErrorReport(max(int(data["count"]), 0), str(data.get("detail", "")))

    # -- inspection ---------------------------------------------------------------------------------------------
    def pod_env(self, job_id: str, rank: int) -> dict[str, str]:
        """The environment pod ``rank`` of a live job was started with, as the kernel reports it."""
        gang = self._gang(job_id)
        if gang is None or not 0 <= rank < len(gang.pods):
            raise KeyError(f"job {job_id} has no live pod {rank}")
        pod = gang.pods[rank]
        child = pod.child_pid()
        env = procfs.environ(child) if child is not None else None
        if not env:
            env = procfs.environ(pod.pid)
        if not env:
            raise KeyError(f"pod {rank} of job {job_id} is not running")
        return env

    def pids(self, job_id: str) -> dict[int, int]:
        """rank → wrapper pid (the pod's process group) of a job's current attempt."""
        gang = self._gang(job_id)
        return {} if gang is None else {pod.rank: pod.pid for pod in gang.pods}

    # -- launching ----------------------------------------------------------------------------------------------
    def _start_pod(self, request: LaunchRequest, rank: int, node: str, gang_dir: Path, work: Path,
                   now: float) -> _Pod:
        pod_dir = gang_dir / f"rank-{rank}"
        pod_dir.mkdir()
        pod = _Pod(job_id=request.job_id, attempt=request.attempt, rank=rank, node=node, dir=pod_dir, pid=0,
                   start_ticks=0, launched_at=now)
        if self._failed_marker(node).exists():
            _write_text(pod.marker("failed"), f"node {node} is down")
            self._save_pod(pod, never_started=True)
            return pod
        # Recorded before the process exists: an executor killed right after starting it still leaves enough
        # behind (with the wrapper's own ``wrapper.json``) for the next one to find the pod.
        self._save_pod(pod, never_started=False)
        env = self._env(request, rank, gang_dir)
        log_path = self.log_path(request.job_id, request.attempt, rank)
        with log_path.open("ab") as log_file:
            popen = subprocess.Popen(
                [self.python, "-I", "-S", str(WRAPPER), str(pod_dir), "--", *request.spec.command],
                cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True)
        info = procfs.stat(popen.pid)
        pod.pid = popen.pid
        pod.start_ticks = info.start_ticks if info is not None else 0
        pod.popen = popen
        self._save_pod(pod, never_started=False)
        return pod

    def _env(self, request: LaunchRequest, rank: int, gang_dir: Path) -> dict[str, str]:
        env = dict(self.base_env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(pod_env(request, rank))
        placed = request.placement.pods[rank]
        node = request.nodes[placed.node]
        devices = node.devices[request.placement.flavour]
        real = [self._device_names.get((placed.node, devices[u].gpu, devices[u].slice or 0))
                for u in placed.units if devices[u].slice is not None]
        if real and all(real):
            env["CUDA_VISIBLE_DEVICES"] = ",".join(name for name in real if name)
        env.update({
            "SHOAL_NODE": placed.node,
            "SHOAL_ATTEMPT": str(request.attempt),
            "SHOAL_GANG_GPUS": str(sum(len(pod.units) for pod in request.placement.pods)),
            "SHOAL_REPORT_FILE": str(gang_dir / "reports.jsonl"),
            "SHOAL_LOG_FILE": str(self.log_path(request.job_id, request.attempt, rank)),
        })
        if request.spec.checkpoint.cost is not None:
            env.setdefault("SHOAL_CHECKPOINT_COST", str(request.spec.checkpoint.cost))
        return env

    @staticmethod
    def _save_pod(pod: _Pod, *, never_started: bool) -> None:
        _write_text(pod.dir / "pod.json", json.dumps({
            "job_id": pod.job_id, "attempt": pod.attempt, "rank": pod.rank, "node": pod.node, "pid": pod.pid,
            "start_ticks": pod.start_ticks, "launched_at": pod.launched_at, "never_started": never_started}))

    # -- polling ------------------------------------------------------------------------------------------------
    def _poll_gang(self, gang: _Gang, now: float) -> list[PodEvent]:
        wall = self._clock()
        for pod in gang.live:
            self._enforce(pod, wall)
        # Which pods ended is decided before the reports are read, so a report written before an exit we see is
        # always read below and comes out first. A gang being stopped is reported as it ends, as a whole: ranks
        # that leave at once do not come out before rank 0's last checkpoint (FAILED is never held back).
        live = gang.live
        ends = {pod.rank: end for pod in live if (end := self._end_of(pod)) is not None}
        stopping = any(pod.has("term_requested") or pod.has("killed") for pod in gang.pods)
        if stopping and len(ends) < len(live):
            ends = {rank: end for rank, end in ends.items() if end.kind is PodEventKind.FAILED}
        events: list[PodEvent] = []
        changed: set[int] = set()
        for pod in gang.pods:
            # STARTED once the command runs (the wrapper names its pid), or ended before we looked.
            runs = pod.rank in ends if pod.pid != 0 else False
            runs = runs or (pod.pid != 0 and pod.has("child.json"))
            if not pod.started_reported and runs:
                pod.started_reported = True
                changed.add(pod.rank)
                events.append(PodEvent(gang.job_id, pod.rank, PodEventKind.STARTED, now, node=pod.node))
        events.extend(self._read_reports(gang, now))
        for rank, end in sorted(ends.items()):
            pod = gang.pods[rank]
            pod.started_reported = True
            pod.ended_reported = True
            changed.add(rank)
            self._cleanup(pod)
            events.append(PodEvent(gang.job_id, rank, end.kind, now, node=pod.node, exit_code=end.exit_code,
                                   message=end.message, data={CANNOT_START: True} if end.cannot_start else {}))
        # What was handed out is saved; a write the disk refuses (full) is tried again at the next poll, and the
        # gang is kept until its "done" is written, so a later executor never reports these events twice.
        gang.unsaved |= changed
        for rank in sorted(gang.unsaved):
            if _try_write(gang.pods[rank].save_reported):
                gang.unsaved.discard(rank)
        if not gang.live and not gang.unsaved:
            gang.done = _try_write(lambda: _write_text(gang.dir / "done", repr(now)))
        return events

    def _end_of(self, pod: _Pod) -> _End | None:
        """How the pod ended, or ``None`` while it runs."""
        if pod.has("failed"):
            if pod.pid == 0 or not self._alive(pod):
                return _End(PodEventKind.FAILED, None, pod.marker("failed").read_text().strip())
            return None
        exit_info = _read_json(pod.marker("exit.json"))
        if exit_info is None:
            if self._alive(pod):
                return None
            # The wrapper is gone; it may have written its record just before it went.
            exit_info = _read_json(pod.marker("exit.json"))
        if exit_info is not None:
            code = int(exit_info["exit_code"])
            if pod.has("killed") and code == 0:
                code = KILLED
            return _End(PodEventKind.EXITED, code, str(exit_info.get("how", "")),
                        cannot_start=bool(exit_info.get(CANNOT_START)))
        if pod.has("killed"):
            return _End(PodEventKind.EXITED, KILLED, "killed")
        if pod.has("term_sent"):
            return _End(PodEventKind.EXITED, TERMINATED, "terminated")
        return _End(PodEventKind.FAILED, None,
                    "the pod vanished without recording an exit code (killed outside Shoal?)")

    def _alive(self, pod: _Pod) -> bool:
        if pod.pid == 0:
            return False
        if pod.popen is not None:
            pod.popen.poll()   # reap our own child, so it does not linger as a zombie
        return procfs.is_same_process(pod.pid, pod.start_ticks)

    def _enforce(self, pod: _Pod, wall: float) -> None:
        """Send what is due: SIGKILL past the deadline, a SIGTERM or SIGUSR1 held back until the job handles it."""
        if pod.pid == 0 or pod.has("killed"):
            return
        kill_at = self._kill_at(pod)
        if kill_at is not None and wall >= kill_at:
            self._kill(pod)
            return
        if pod.has("term_requested"):
            self._deliver_term(pod, wall)
        elif pod.has("usr1_requested"):
            self._deliver_usr1(pod)

    def _deliver_term(self, pod: _Pod, wall: float) -> None:
        if pod.has("term_sent"):
            return
        child = pod.child_pid()
        ready = child is not None and (procfs.handles(child, signal.SIGTERM) or
                                       not procfs.is_same_process(child, 0))
        if ready or wall - pod.launched_at >= self.sigterm_startup_window_s:
            procfs.signal_group(pod.pid, signal.SIGTERM, leader_start_ticks=pod.start_ticks)
            _try_write(lambda: _write_text(pod.marker("term_sent"), repr(wall)))

    def _deliver_usr1(self, pod: _Pod) -> None:
        targets = [pid for pid in procfs.group_members(pod.pid, since_ticks=pod.start_ticks)
                   if pid != pod.pid and procfs.handles(pid, signal.SIGUSR1)]
        for pid in targets:
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        if targets:
            pod.marker("usr1_requested").unlink(missing_ok=True)

    def _kill(self, pod: _Pod) -> None:
        if pod.pid == 0:
            return
        if not pod.has("killed"):
            # The kill goes out even when the disk is full; the marker only explains the exit code.
            _try_write(lambda: _write_text(pod.marker("killed"), repr(self._clock())))
        procfs.signal_group(pod.pid, signal.SIGKILL, leader_start_ticks=pod.start_ticks)
        if pod.popen is not None:
            try:
                pod.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.warning("pod %s/%d did not die within 5 s of SIGKILL", pod.job_id, pod.rank)

    def _cleanup(self, pod: _Pod) -> None:
        """A pod is over when its command is: whatever it left behind in its process group goes too."""
        if pod.pid != 0:
            procfs.signal_group(pod.pid, signal.SIGKILL, leader_start_ticks=pod.start_ticks)
        if pod.popen is not None:
            pod.popen.poll()
            if pod.popen.returncode is None:
                _detached.append(pod.popen)
            pod.popen = None

    @staticmethod
    def _kill_at(pod: _Pod) -> float | None:
        try:
            return float(pod.marker("kill_at").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def _read_reports(self, gang: _Gang, now: float) -> list[PodEvent]:
        """New complete lines of the gang's report file, as CHECKPOINT and STEP_TIME events."""
        path = gang.dir / "reports.jsonl"
        try:
            with path.open("rb") as handle:
                handle.seek(gang.report_offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        gang.report_offset += end + 1
        events = []
        for line in chunk[:end].splitlines():
            event = self._report_event(gang, line, now)
            if event is not None:
                events.append(event)
        _try_write(lambda: _write_text(gang.dir / "reports.offset", str(gang.report_offset)))
        return events

    @staticmethod
    def _report_event(gang: _Gang, line: bytes, now: float) -> PodEvent | None:
        try:
            record = json.loads(line)
            rank = int(record.get("rank", 0))
            kind = record["kind"]
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("job %s: ignoring a malformed report line %r", gang.job_id, line[:200])
            return None
        if not 0 <= rank < len(gang.pods):
            return None
        node = gang.pods[rank].node
        if kind == "checkpoint":
            data = {key: record[key] for key in ("step", "uri", "bytes", "cost_s", "verified", "written_at")
                    if key in record}
            return PodEvent(gang.job_id, rank, PodEventKind.CHECKPOINT, now, node=node, data=data)
        if kind == "step_time":
            data = {"step_time_s": record.get("step_time_s")}
            if "step" in record:
                data["step"] = record["step"]
            return PodEvent(gang.job_id, rank, PodEventKind.STEP_TIME, now, node=node, data=data)
        return None

    # -- loading from disk --------------------------------------------------------------------------------------
    def _gang(self, job_id: str) -> _Gang | None:
        gang = self._gangs.get(job_id)
        if gang is None:
            gang = self._load(job_id)
            if gang is not None and gang.live:
                self._gangs[job_id] = gang
        return gang

    def _load(self, job_id: str) -> _Gang | None:
        job_dir = self.state_dir / "pods" / job_id
        try:
            attempt = int((job_dir / "current").read_text())
        except (FileNotFoundError, ValueError):
            return None
        gang_dir = job_dir / str(attempt)
        if (gang_dir / "done").exists():
            return None
        pods = []
        for rank_dir in sorted(gang_dir.glob("rank-*"), key=lambda p: int(p.name.split("-")[1])):
            info = _read_json(rank_dir / "pod.json")
            if info is None:
                continue
            reported = _read_json(rank_dir / "reported.json") or {}
            pid, start_ticks = int(info["pid"]), int(info["start_ticks"])
            if pid == 0 and not info.get("never_started"):
                pid, start_ticks = _find_wrapper(rank_dir)
            pods.append(_Pod(job_id=job_id, attempt=attempt, rank=int(info["rank"]), node=str(info["node"]),
                             dir=rank_dir, pid=pid, start_ticks=start_ticks,
                             launched_at=float(info["launched_at"]),
                             started_reported=bool(reported.get("started")),
                             ended_reported=bool(reported.get("ended"))))
        try:
            offset = int((gang_dir / "reports.offset").read_text())
        except (FileNotFoundError, ValueError):
            offset = 0
        return _Gang(job_id=job_id, attempt=attempt, dir=gang_dir, pods=pods, report_offset=offset)

    def _check_node(self, node: str) -> None:
        if self.nodes and node not in self.nodes:
            raise NotFound(f"no node {node!r} in this executor's cluster")


def _find_wrapper(pod_dir: Path) -> tuple[int, int]:
    """The wrapper of a pod whose launch was cut short: its own pid record, trusted only while that process is
    still the wrapper of this very pod (its command line names the pod's directory)."""
    data = _read_json(pod_dir / "wrapper.json")
    if data is None:
        return 0, 0
    pid = int(data["pid"])
    argv = procfs.cmdline(pid)
    info = procfs.stat(pid)
    if argv is None or info is None or str(pod_dir) not in argv:
        return 0, 0
    return pid, info.start_ticks
