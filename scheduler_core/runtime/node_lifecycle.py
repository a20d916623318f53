"""The node health lifecycle (DESIGN §3.3) as pure policy: which signal moves a node from which health to which.

    ready ──(stale heartbeats | GPU errors | slow rank)──▶ suspect ──(idle)──▶ burnin ──(passed)──▶ ready
      │                                                     │                   │
      └──────────(node lost | failed | burn-in failed or timed out)──────────▶ repair ──(repaired)──▶ burnin

A suspect node keeps its healthy jobs and takes no new ones; once it is idle the scheduler checks it with a burn-in
and it rejoins only if that passes. A node in repair comes back through a burn-in too, never straight to ready.
Draining is the operator's (or the cluster's) word and only they lift it.

Nothing here does I/O or reads a clock: ``next_health`` is a table lookup, and ``plan`` looks at the nodes as they
are at ``now`` and says what should happen. ``runtime.health_keeper`` applies it through the store and the
executor, in the live loop and the simulator alike, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ..model.cluster import Health


class Signal(StrEnum):
    """What was seen or done to a node; the reason code of the transition's event."""

    HEARTBEAT_STALE = "HeartbeatStale"      # no heartbeat for longer than the limit
    GPU_ERRORS = "GpuErrors"                # the executor counted new GPU errors (NVML XID/ECC, or its own report)
    SLOW_RANK = "SlowRank"                  # the straggler detector: a rank consistently slower than its peers
    NODE_LOST = "NodeLost"                  # the executor lost a pod with the node
    FAILED = "NodeFailed"                   # an operator (or the simulator's hardware model) failed it
    DRAINED = "Drained"                     # an operator drained it
    REPAIRED = "Repaired"                   # an operator says it is fixed: check it before it takes work
    IDLE_SUSPECT = "IdleSuspect"            # a suspect node has no work left: check it
    BURNIN_PASSED = "BurnInPassed"
    BURNIN_FAILED = "BurnInFailed"
    BURNIN_TIMED_OUT = "BurnInTimedOut"     # a hanging burn-in, ended by its time limit: a failure
    CLUSTER_LOST = "ClusterLost"            # the executor's backend: not Ready, NoExecute taint, gone
    CLUSTER_CORDONED = "ClusterCordoned"    # the backend: cordoned or NoSchedule-tainted
    CLUSTER_SUSPECT = "ClusterSuspect"      # the backend: a suspect condition, fewer allocatable devices
    CLUSTER_READY = "ClusterReady"          # the backend saw the node recover


R, S, D, X, B = Health.READY, Health.SUSPECT, Health.DRAINING, Health.REPAIR, Health.BURNIN
_ALL = (R, S, D, X, B)

#: (health now, signal) → health next. A pair not listed changes nothing (no event either).
TRANSITIONS: Mapping[tuple[Health, Signal], Health] = {
    **{(R, signal): S for signal in (Signal.HEARTBEAT_STALE, Signal.GPU_ERRORS, Signal.SLOW_RANK,
                                     Signal.CLUSTER_SUSPECT)},
    # A burn-in that sees the node go silent or count GPU errors has failed, whatever its process says.
    (B, Signal.HEARTBEAT_STALE): X, (B, Signal.GPU_ERRORS): X,
    **{(h, signal): X for h in (R, S, D, B) for signal in (Signal.NODE_LOST, Signal.FAILED, Signal.CLUSTER_LOST)},
    **{(h, signal): D for h in (R, S, B) for signal in (Signal.DRAINED, Signal.CLUSTER_CORDONED)},
    **{(h, Signal.REPAIRED): B for h in (S, D, X)},
    (S, Signal.IDLE_SUSPECT): B,
    (B, Signal.BURNIN_PASSED): R,
    (B, Signal.BURNIN_FAILED): X,
    (B, Signal.BURNIN_TIMED_OUT): X,
    # The backend lifts its own words: an uncordoned or recovered node is ready, a lost one comes back via burn-in.
    (S, Signal.CLUSTER_READY): R, (D, Signal.CLUSTER_READY): R, (X, Signal.CLUSTER_READY): B,
}

#: The backend's judgement (``NodeReport.health``) as a signal.
CLUSTER_SIGNAL: Mapping[Health, Signal] = {
    R: Signal.CLUSTER_READY, S: Signal.CLUSTER_SUSPECT, D: Signal.CLUSTER_CORDONED, X: Signal.CLUSTER_LOST,
    B: Signal.CLUSTER_READY,
}


def next_health(current: Health, signal: Signal) -> Health | None:
    """Where ``signal`` takes a node that is ``current``; ``None``: it stays (and nothing is written)."""
    target = TRANSITIONS.get((current, signal))
    return None if target is None or target is current else target


@dataclass(frozen=True, slots=True)
class HealthConfig:
    """The lifecycle's settings (``shoal up --heartbeat-limit``, ``--burnin-command``, ``--burnin-time-limit``)."""

    #: A node whose newest heartbeat is older than this turns suspect (the live loop writes one every 5 s).
    heartbeat_limit_s: float = 60.0
    #: The burn-in's command; ``None``: ``scheduler_core/executor/burnin.py`` (a matrix-multiply check per GPU
    #: where torch sees one, a process exercising each slot on a virtual cluster).
    burnin_command: tuple[str, ...] | None = None
    #: A burn-in still running this long after its launch is ended and counts as failed.
    burnin_time_limit_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.heartbeat_limit_s > 0 or not self.burnin_time_limit_s > 0:
            raise ValueError(f"heartbeat_limit_s ({self.heartbeat_limit_s}) and burnin_time_limit_s "
                             f"({self.burnin_time_limit_s}) must be positive")
        if self.burnin_command is not None and not self.burnin_command:
            raise ValueError("burnin_command must name a program, or be None for the built-in check")


@dataclass(frozen=True, slots=True)
class NodeLook:
    """One node as ``plan`` sees it: its health, its newest heartbeat, whether jobs hold units on it, when its
    burn-in started (``None``: none runs), and whether the executor's backend itself judges it unfit right now
    (Kubernetes: a condition, a taint, a cordon). A node the backend holds gets no burn-in: it comes back when the
    backend says so (``CLUSTER_READY``), since a check that passed would be undone by the backend's next word."""

    name: str
    health: Health
    heartbeat_at: float | None
    busy: bool
    burnin_started_at: float | None = None
    held_by_cluster: bool = False


@dataclass(frozen=True, slots=True)
class Move:
    """A transition ``plan`` asks for: send ``signal`` to ``node``, with a message for its event."""

    node: str
    signal: Signal
    message: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What should happen to the nodes now: transitions, then burn-ins to launch (nodes in burn-in, idle, with none
    running, after the transitions)."""

    moves: tuple[Move, ...] = ()
    launch_burnin: tuple[str, ...] = ()


def plan(nodes: Iterable[NodeLook], *, now: float, config: HealthConfig, watching_since: float,
         gpu_errors: Mapping[str, str] = {}) -> Plan:
    """The transitions and burn-ins due at ``now``.

    ``watching_since``: when this scheduler started looking. Heartbeats are judged from then at the earliest, so a
    scheduler that was down does not find every node silent when it comes back. A node that never had a
    heartbeat is not judged (its backend reports none). ``gpu_errors``: node → what its new GPU errors are.
    """
    moves: list[Move] = []
    launch: list[str] = []
    for node in nodes:
        health = node.health
        move = next((m for m in _candidates(node, now, config, watching_since, gpu_errors)
                     if next_health(health, m.signal) is not None), None)
        if move is not None:
            moves.append(move)
            health = next_health(health, move.signal) or health
        if health is B and not node.busy and not node.held_by_cluster and node.burnin_started_at is None:
            launch.append(node.name)
    return Plan(tuple(moves), tuple(launch))


def _candidates(node: NodeLook, now: float, config: HealthConfig, watching_since: float,
                gpu_errors: Mapping[str, str]) -> Iterable[Move]:
    """The signals a node gives now, most telling first; the first that moves it wins."""
    if node.name in gpu_errors:
        yield Move(node.name, Signal.GPU_ERRORS, f"GPU errors: {gpu_errors[node.name]}")
    if node.heartbeat_at is not None:
        age = now - max(node.heartbeat_at, watching_since)
        if age > config.heartbeat_limit_s:
            yield Move(node.name, Signal.HEARTBEAT_STALE,
                       f"no heartbeat for {age:.0f}s (limit {config.heartbeat_limit_s:g}s)")
    if node.health is B and node.burnin_started_at is not None:
        ran = now - node.burnin_started_at
        if ran >= config.burnin_time_limit_s:
            yield Move(node.name, Signal.BURNIN_TIMED_OUT,
                       f"burn-in still running after {ran:.0f}s (limit {config.burnin_time_limit_s:g}s)")
    if node.health is S and not node.busy and not node.held_by_cluster:
        yield Move(node.name, Signal.IDLE_SUSPECT, "idle while suspect: running a burn-in")
