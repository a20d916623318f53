"""Node administration (``shoal nodes fail|drain|repair NODE``): what an operator does to a node, applied to the
store (health, an event) and, for a failure, to the executor that runs the node's pods.

Draining is the store's business only: a draining node takes no new work and the policy moves nothing off it;
its jobs finish. Failing a node is what hardware does: the executor kills its pods at once and reports them
FAILED, and the controller restarts their gangs elsewhere as an infrastructure fault (no restart budget spent).
"""

from __future__ import annotations

from typing import Protocol

from ..model.cluster import Health
from ..store.base import Store
from ..store.records import Event, NodeRecord


class NodeFaults(Protocol):
    """An executor that can lose and repair a node (``LocalExecutor``, ``SimExecutor``)."""

    def fail_node(self, node: str, now: float) -> object: ...

    def repair_node(self, node: str) -> None: ...


def drain_node(store: Store, name: str, *, now: float, by: str = "admin") -> NodeRecord:
    """Take no new work on ``name``; running jobs finish there."""
    record = store.set_node_health(name, Health.DRAINING, f"drained by {by}", now)
    store.append_event(Event(at=now, kind="node_health", reason="Drained", node=name,
                             message=f"{name} → draining (by {by})", data={"health": Health.DRAINING.value}))
    return record


def fail_node(store: Store, executor: NodeFaults | None, name: str, *, now: float, by: str = "admin") -> NodeRecord:
    """Treat ``name`` as failed: into repair in the store, and its pods killed and reported FAILED."""
    record = store.set_node_health(name, Health.REPAIR, f"failed by {by}", now)
    if executor is not None:
        executor.fail_node(name, now)
    store.append_event(Event(at=now, kind="node_health", reason="NodeFailed", node=name,
                             message=f"{name} → repair (failed by {by})", data={"health": Health.REPAIR.value}))
    return record


def repair_node(store: Store, executor: NodeFaults | None, name: str, *, now: float,
                by: str = "admin") -> NodeRecord:
    """Back in service: ready in the store, and the executor places pods there again."""
    record = store.set_node_health(name, Health.READY, f"returned to service by {by}", now)
    if executor is not None:
        executor.repair_node(name)
    store.append_event(Event(at=now, kind="node_health", reason="Repaired", node=name,
                             message=f"{name} → ready (by {by})", data={"health": Health.READY.value}))
    return record
