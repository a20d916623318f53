"""Node administration (``shoal nodes fail|drain|repair NODE``): what an operator does to a node, applied to the
store (health, an event) and, for a failure, to the executor that runs the node's pods.

Draining is the store's business only: a draining node takes no new work and the policy moves nothing off it;
its jobs finish. Failing a node is what hardware does: the executor kills its pods at once and reports them
FAILED, and the controller restarts their gangs elsewhere as an infrastructure fault (no restart budget spent).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Protocol

from ..executor.base import NodeReport
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


def apply_backend_health(store: Store, reports: Mapping[str, NodeReport], seen: MutableMapping[str, Health], *,
                         now: float) -> list[NodeRecord]:
    """Apply what the executor's backend says of its nodes (``Executor.node_health``) to the store.

    Edge-triggered, so an operator's word is not overwritten every few seconds: a node's health is changed when the
    backend's judgement of it *changes*. On the first report of a node (``seen`` is empty after a restart) only a
    worse judgement is applied: the cluster may always take a node out of service, but it puts one back only when it
    itself saw the node recover. ``seen`` is the caller's memory of the last judgement per node. Nodes the store
    does not know are ignored. Returns the records changed.
    """
    known = {record.node.name: record for record in store.list_nodes()}
    changed: list[NodeRecord] = []
    for name, report in sorted(reports.items()):
        record = known.get(name)
        previous = seen.get(name)
        seen[name] = report.health
        if record is None or report.health is previous or record.health is report.health:
            continue
        if previous is None and report.health is Health.READY:
            continue
        updated = store.set_node_health(name, report.health, report.reason, now)
        store.append_event(Event(at=now, kind="node_health", reason="ClusterReported", node=name,
                                 message=f"{name} → {report.health}: {report.reason}",
                                 data={"health": report.health.value, "was": record.health.value}))
        changed.append(updated)
    return changed
