"""Node administration (``POST /v1/nodes/{node}:fail|drain|repair``, ``shoal nodes fail|drain|repair``): what an
operator does to a node, through the node lifecycle (``runtime.node_lifecycle``) like every other change of health,
and, for a failure or a repair, to the executor that runs the node's pods.

Draining is the store's business only: a draining node takes no new work and the policy moves nothing off it;
its jobs finish. Failing a node is what hardware does: the executor kills its pods at once and reports them
FAILED, and the controller restarts their gangs elsewhere as an infrastructure fault (no restart budget spent).
Repairing one does not put it back to work: it goes to burn-in, the controller runs its check job, and only a
passed check makes it ready.

Each action is idempotent where it can be (draining a draining node, failing a failed one, repairing a node in
burn-in or ready returns it as it is); draining a node in repair is a ``Conflict`` (repair it first).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from enum import StrEnum
from typing import Protocol

from ..errors import Conflict, NotFound
from ..executor.base import NodeReport
from ..model.cluster import Health
from ..runtime.health_keeper import transition
from ..runtime.node_lifecycle import CLUSTER_SIGNAL, Signal
from ..store.base import Store
from ..store.records import NodeRecord


class NodeFaults(Protocol):
    """An executor that can lose and repair a node (``LocalExecutor``, ``SimExecutor``)."""

    def fail_node(self, node: str, now: float) -> object: ...

    def repair_node(self, node: str) -> None: ...


class NodeAction(StrEnum):
    FAIL = "fail"
    DRAIN = "drain"
    REPAIR = "repair"


def _record(store: Store, name: str) -> NodeRecord:
    record = {r.node.name: r for r in store.list_nodes()}.get(name)
    if record is None:
        raise NotFound(f"no node {name!r}")
    return record


def _act(store: Store, name: str, signal: Signal, message: str, now: float, by: str) -> NodeRecord:
    current = _record(store, name)
    transition(store, name, signal, message, now, by=by, current=current)
    return _record(store, name)


def drain_node(store: Store, name: str, *, now: float, by: str = "admin", reason: str = "") -> NodeRecord:
    """Take no new work on ``name``; running jobs finish there."""
    if _record(store, name).health is Health.REPAIR:
        raise Conflict(f"node {name} is in repair and takes no work already; repair it first")
    return _act(store, name, Signal.DRAINED, reason or "drained", now, by)


def fail_node(store: Store, executor: NodeFaults | None, name: str, *, now: float, by: str = "admin",
              reason: str = "") -> NodeRecord:
    """Treat ``name`` as failed: into repair in the store, and its pods killed and reported FAILED."""
    record = _act(store, name, Signal.FAILED, reason or "failed", now, by)
    if executor is not None:
        executor.fail_node(name, now)
    return record


def repair_node(store: Store, executor: NodeFaults | None, name: str, *, now: float, by: str = "admin",
                reason: str = "") -> NodeRecord:
    """The hardware is fixed: the executor may place pods there again, and the node goes to burn-in (the
    controller checks it, and makes it ready only if the check passes)."""
    _record(store, name)
    if executor is not None:
        executor.repair_node(name)
    return _act(store, name, Signal.REPAIRED, reason or "repaired", now, by)


def act_on_node(store: Store, executor: NodeFaults | None, name: str, action: NodeAction, *, now: float, by: str,
                reason: str = "") -> NodeRecord:
    if action is NodeAction.FAIL:
        return fail_node(store, executor, name, now=now, by=by, reason=reason)
    if action is NodeAction.DRAIN:
        return drain_node(store, name, now=now, by=by, reason=reason)
    return repair_node(store, executor, name, now=now, by=by, reason=reason)


def apply_backend_health(store: Store, reports: Mapping[str, NodeReport], seen: MutableMapping[str, Health], *,
                         now: float) -> list[NodeRecord]:
    """Apply what the executor's backend says of its nodes (``Executor.node_health``) to the store.

    Edge-triggered, so an operator's word is not overwritten every few seconds: a node's health is changed when the
    backend's judgement of it *changes*, and then as the lifecycle says (a node the backend saw recover from repair
    goes to burn-in, not straight to ready). On the first report of a node (``seen`` is empty after a restart) only
    a worse judgement is applied: the cluster may always take a node out of service, but it puts one back only
    when it itself saw the node recover. ``seen`` is the caller's memory of the last judgement per node. Nodes the
    store does not know are ignored. Returns the records changed.
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
        try:
            moved = transition(store, name, CLUSTER_SIGNAL[report.health], report.reason or str(report.health),
                               now, current=record)
        except (Conflict, NotFound):
            continue   # changed meanwhile: the next report is judged against the new health
        if moved is not None:
            changed.append(_record(store, name))
    return changed
