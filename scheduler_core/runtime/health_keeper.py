"""``HealthKeeper``: the node lifecycle (``runtime.node_lifecycle``) applied through the store and the executor.

The controller owns one and calls it each step, in the live loop and the simulator alike: it reads the executor's
GPU error counters and the store's heartbeats, asks ``node_lifecycle.plan`` what is due, writes each transition
with its event in one store call, and runs the burn-ins. Operators' actions (``shoal nodes fail|drain|repair``
through the API) and the backend's reports go through ``transition`` too, so every change of health is the same
checked, evented write.

Burn-ins are the scheduler's own gangs, not jobs in the store: one pod per flavour of the node holding every unit
of it, so the check exercises each GPU or slice, with ``SHOAL_BURNIN=1`` in its environment. They run only on a
node in burn-in that no job holds units on (the policy places nothing on such a node). Passed: every pod exited
0. Failed: any other exit, a lost pod, a launch the executor refused, or the time limit (the pods are killed).
Their ids start with ``burnin-``; a scheduler that restarts ends the burn-ins its predecessor left and runs them
again, which is simpler than adopting them and costs a minute.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import is_

from ..errors import Conflict, NotFound, ShoalError
from ..executor.base import Executor, LaunchRequest, PodEvent, PodEventKind
from ..job_env import gang_env
from ..model.cluster import Health, Node
from ..model.job import JobSpec
from ..policy.snapshot import Placement, PodPlacement
from ..store.base import Store
from ..store.records import Event, JobRecord, NodeRecord
from .events import EventKind
from .node_lifecycle import HealthConfig, NodeLook, Signal, next_health, plan

log = logging.getLogger(__name__)

BURNIN_PREFIX = "burnin-"
#: Healths ``plan`` may act on without a heartbeat or a GPU error (an idle suspect node, a burn-in due or running).
_WATCHED = frozenset({Health.SUSPECT, Health.BURNIN})
#: The built-in burn-in (``scheduler_core.executor.burnin``): its exit codes, worded for the node's reason.
BURNIN_EXIT_MEANING = {2: "a matrix product came out wrong", 3: "a GPU is much slower than its peers",
                       4: "a GPU could not be used"}


def default_burnin_command() -> tuple[str, ...]:
    """``python …/executor/burnin.py``: run by path, so a pod imports nothing of Shoal's (it starts in tens of
    milliseconds, and in any image that has Python)."""
    return (sys.executable, str(Path(__file__).resolve().parent.parent / "executor" / "burnin.py"))


def is_burnin(job_id: str) -> bool:
    return job_id.startswith(BURNIN_PREFIX)


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of a node's health, as written to the store (and its event)."""

    node: str
    was: Health
    to: Health
    signal: Signal
    message: str


def transition(store: Store, name: str, signal: Signal, message: str, now: float, *, by: str | None = None,
               current: NodeRecord | None = None) -> Transition | None:
    """Send ``signal`` to node ``name``: if the lifecycle moves it, write the new health and its event together,
    on the condition that the node is still as read (``Conflict`` otherwise: someone else moved it meanwhile).
    ``None``: the signal does not move a node in its health (nothing is written). ``by``: the user who acted,
    named in the event. ``NotFound`` for an unknown node."""
    record = current or {r.node.name: r for r in store.list_nodes()}.get(name)
    if record is None:
        raise NotFound(f"no node {name!r}")
    target = next_health(record.health, signal)
    if target is None:
        return None
    reason = f"{message} (by {by})" if by else message
    event = Event(at=now, kind=EventKind.NODE_HEALTH, reason=signal.value, node=name,
                  message=f"{name} {record.health} → {target}: {reason}",
                  data={"health": target.value, "was": record.health.value, **({"by": by} if by else {})})
    store.set_node_health(name, target, reason, now, expect=record.health, event=event)
    return Transition(name, record.health, target, signal, reason)


@dataclass(slots=True)
class _BurnIn:
    node: str
    started_at: float
    pods: dict[str, int]                                   # job id → pods (one per flavour of the node)
    ended: dict[str, int] = field(default_factory=dict)    # job id → pods ended
    failure: str | None = None
    settled: bool = False                                  # its verdict (or the node's move away) is written

    @property
    def all_ended(self) -> bool:
        return all(self.ended.get(job_id, 0) >= pods for job_id, pods in self.pods.items())


class HealthKeeper:
    """Node health for one controller. Not thread-safe: called from the controller's step only."""

    def __init__(self, store: Store, executor: Executor, nodes: Mapping[str, Node],
                 config: HealthConfig = HealthConfig()) -> None:
        self.store = store
        self.executor = executor
        self.nodes = nodes
        self.config = config
        self._command = config.burnin_command or default_burnin_command()
        self._watching_since: float | None = None
        self._errors_seen: dict[str, int] = {}
        self._active: dict[str, _BurnIn] = {}                # node → its current burn-in
        self._by_job: dict[str, _BurnIn] = {}                # burn-in job id → burn-in (until all its pods end)
        self.transitions: list[Transition] = []               # since the caller last took them
        #: The node records last listed and those of them watched by state alone (``_watched``).
        self._listed: tuple[list[NodeRecord], list[NodeRecord]] = ([], [])

    # -- what the controller calls ---------------------------------------------------------------------------
    def owns(self, job_id: str) -> bool:
        return job_id in self._by_job or is_burnin(job_id)

    def signal(self, node: str, signal: Signal, message: str, now: float) -> Transition | None:
        """Apply one signal (the controller's own observations: a lost pod, a slow rank)."""
        try:
            moved = transition(self.store, node, signal, message, now)
        except (NotFound, Conflict) as exc:
            log.info("node %s: %s not applied (%s)", node, signal, exc)
            return None
        if moved is not None:
            self._moved(moved)
        return moved

    def recover(self, now: float) -> None:
        """After a (re)start: end the burn-ins a previous scheduler left running (they are run again)."""
        self._watch(now)
        leftover = {job_id for job_id in self.executor.running_jobs() if is_burnin(job_id)}
        if leftover:
            self.executor.adopt(leftover)
        for job_id in sorted(leftover):
            self.executor.terminate(job_id, 0.0)

    def observe(self, event: PodEvent, now: float) -> None:
        """A pod event of a burn-in."""
        burnin = self._by_job.get(event.job_id)
        if burnin is None or event.kind not in (PodEventKind.EXITED, PodEventKind.FAILED):
            return
        burnin.ended[event.job_id] = burnin.ended.get(event.job_id, 0) + 1
        if burnin.failure is None:
            if event.kind is PodEventKind.FAILED:
                burnin.failure = f"burn-in pod lost: {event.message or 'the node is down'}"
            elif event.exit_code != 0:
                meaning = BURNIN_EXIT_MEANING.get(event.exit_code or 0, "")
                burnin.failure = f"burn-in exited {event.exit_code}" + (f": {meaning}" if meaning else "")
            if burnin.failure is not None:
                for job_id in burnin.pods:
                    self.executor.terminate(job_id, 0.0)
        if burnin.all_ended:
            for job_id in burnin.pods:
                self._by_job.pop(job_id, None)
            if not burnin.settled:
                self._settle(burnin, now)

    def step(self, now: float, holding: Iterable[JobRecord]) -> list[Transition]:
        """Judge every node at ``now`` and act: transitions, burn-in time limits, burn-in launches. ``holding``:
        the jobs that hold units (a node any of them is on is busy). Returns (and keeps) the transitions made."""
        self._watch(now)
        assert self._watching_since is not None
        errors = self._new_gpu_errors(now)
        # Only nodes something can happen to: suspect or in burn-in, judged by heartbeats, or with new GPU errors
        # (the simulator's 512 ready nodes without heartbeats cost nothing per step).
        listed = self.store.list_nodes()
        records = self._watched(listed) if not errors else [
            record for record in listed
            if record.health in _WATCHED or record.heartbeat_at is not None or record.node.name in errors]
        if not records:
            return []
        busy = {pod.node for record in holding if record.placement is not None for pod in record.placement.pods}
        held = {name for name, report in self.executor.node_health(now).items() if report.health is not Health.READY}
        looks = [NodeLook(record.node.name, record.health, record.heartbeat_at, record.node.name in busy,
                          self._active[record.node.name].started_at if record.node.name in self._active else None,
                          record.node.name in held)
                 for record in records]
        decided = plan(looks, now=now, config=self.config, watching_since=self._watching_since, gpu_errors=errors)
        made: list[Transition] = []
        for move in decided.moves:
            moved = self.signal(move.node, move.signal, move.message, now)
            if moved is not None:
                made.append(moved)
        for name in decided.launch_burnin:
            if name in self.nodes and name not in self._active:
                self._launch(name, now)
        return made

    def take_transitions(self) -> list[Transition]:
        taken, self.transitions = self.transitions, []
        return taken

    def burnin_running(self, node: str) -> bool:
        return node in self._active

    # -- inside --------------------------------------------------------------------------------------------------
    def _watched(self, listed: list[NodeRecord]) -> list[NodeRecord]:
        """The nodes watched by their state (suspect or in burn-in) or by heartbeats, in list order: worked out
        again only when the store hands back other records (``MemoryStore`` hands back the same objects until a
        node changes), not over every node every step."""
        last, watched = self._listed
        if len(last) == len(listed) and all(map(is_, last, listed)):
            return watched
        watched = [record for record in listed if record.health in _WATCHED or record.heartbeat_at is not None]
        self._listed = (listed, watched)
        return watched

    def _watch(self, now: float) -> None:
        if self._watching_since is None:
            self._watching_since = now

    def _new_gpu_errors(self, now: float) -> dict[str, str]:
        found: dict[str, str] = {}
        for node, report in self.executor.gpu_errors(now).items():
            seen = self._errors_seen.get(node, 0)
            if report.count > seen:
                found[node] = f"{report.count - seen} new ({report.detail})" if report.detail else \
                    f"{report.count - seen} new"
            self._errors_seen[node] = max(seen, report.count)
        return found

    def _moved(self, moved: Transition) -> None:
        self.transitions.append(moved)
        burnin = self._active.get(moved.node)
        if burnin is not None and moved.to is not Health.BURNIN:
            # Away from burn-in (its verdict, a time limit, a drain, a failure): it is over; stop what still runs.
            burnin.settled = True
            del self._active[moved.node]
            if not burnin.all_ended:
                for job_id in burnin.pods:
                    self.executor.terminate(job_id, 0.0)

    def _settle(self, burnin: _BurnIn, now: float) -> None:
        burnin.settled = True
        if self._active.get(burnin.node) is burnin:
            del self._active[burnin.node]
        if burnin.failure is None:
            self.signal(burnin.node, Signal.BURNIN_PASSED, f"burn-in passed in {now - burnin.started_at:.0f}s", now)
        else:
            self.signal(burnin.node, Signal.BURNIN_FAILED, burnin.failure, now)

    def _launch(self, name: str, now: float) -> None:
        node = self.nodes[name]
        burnin = _BurnIn(node=name, started_at=now, pods={})
        self._active[name] = burnin
        stamp = int(now * 1000)
        for flavour, devices in sorted(node.devices.items()):
            if not devices:
                continue
            job_id = f"{BURNIN_PREFIX}{name}-{flavour}-{stamp}"
            request = self._request(job_id, node, flavour, len(devices))
            try:
                self.executor.launch(request)
            except (ShoalError, OSError) as exc:
                burnin.failure = f"the burn-in could not be launched: {exc}"
                break
            burnin.pods[job_id] = 1
            self._by_job[job_id] = burnin
        if burnin.failure is not None or not burnin.pods:
            for job_id in burnin.pods:
                self.executor.terminate(job_id, 0.0)
            burnin.failure = burnin.failure or "the node has no units to check"
            if not burnin.pods:
                self._settle(burnin, now)
            return
        self.store.append_event(Event(at=now, kind=EventKind.NODE_HEALTH, reason="BurnInStarted", node=name,
                                      message=f"burn-in of {name} started: {' '.join(self._command)}",
                                      data={"jobs": sorted(burnin.pods)}))

    def _request(self, job_id: str, node: Node, flavour: str, units: int) -> LaunchRequest:
        # Built without validation: a burn-in holds every unit of its node, which may be more than a user's pod
        # may ask for, and its time limit is the keeper's, not the policy's.
        spec = JobSpec.model_construct(
            name="burnin", team="shoal", flavour=(flavour,), pods=1, gpus_per_pod=units, command=self._command,
            env={"SHOAL_BURNIN": "1", "SHOAL_BURNIN_FLAVOUR": flavour}, preemptible=False, max_restarts=0,
            time_limit=max(60.0, self.config.burnin_time_limit_s))
        placement = Placement(flavour, (PodPlacement(node.name, tuple(range(units))),))
        env = gang_env(job_id, spec, placement, checkpoint_uri="", checkpoint_interval_s=0.0,
                       master_addr=self.executor.master_addr(job_id, placement, 0))
        return LaunchRequest(job_id=job_id, spec=spec, placement=placement, nodes={node.name: node}, env=env,
                             attempt=0, container_devices=self.executor.container_devices)
