"""``apply_backend_health``: what an executor's backend (Kubernetes) says of its nodes reaches the store when it
changes — never undoing an operator's word every few seconds, and after a restart only a worse word at once."""

from __future__ import annotations

import pytest

from scheduler_core.executor.base import NodeReport
from scheduler_core.model import Health
from scheduler_core.service.nodes import apply_backend_health, drain_node
from scheduler_core.store.memory import MemoryStore

from .runtime_builders import cluster_nodes

NODE = "h100-b0-n00"
R, S, D, X, B = Health.READY, Health.SUSPECT, Health.DRAINING, Health.REPAIR, Health.BURNIN


@pytest.fixture
def store() -> MemoryStore:
    s = MemoryStore(seed=1)
    s.sync_nodes(cluster_nodes())
    return s


def health(store: MemoryStore) -> Health:
    return {r.node.name: r.health for r in store.list_nodes()}[NODE]


# (what the cluster says, one report after another) → the store's health after each
CASES = [
    ("ready at first changes nothing", [R], [R]),
    ("a GPU error marks it suspect, recovery makes it ready", [R, S, S, R], [R, S, S, R]),
    ("after a restart a worse word applies at once", [X], [X]),
    ("worse words follow each other; back from repair through a burn-in", [S, D, X, R], [S, D, X, B]),
    ("an uncordoned node is ready at once", [R, D, R], [R, D, R]),
]


@pytest.mark.parametrize(("reports", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_clusters_word_is_applied_when_it_changes(store: MemoryStore, reports: list[Health],
                                                      expected: list[Health]) -> None:
    seen: dict[str, Health] = {}
    after = []
    for at, report in enumerate(reports):
        apply_backend_health(store, {NODE: NodeReport(report, f"said {report}")}, seen, now=float(at))
        after.append(health(store))
    assert after == expected


def test_an_operators_drain_is_not_undone_by_an_unchanged_ready(store: MemoryStore) -> None:
    seen: dict[str, Health] = {}
    apply_backend_health(store, {NODE: NodeReport(R)}, seen, now=0.0)
    drain_node(store, NODE, now=1.0)
    for at in range(2, 5):
        assert apply_backend_health(store, {NODE: NodeReport(R)}, seen, now=float(at)) == []
    assert health(store) is D


def test_a_restart_does_not_make_a_node_the_controller_put_in_repair_ready(store: MemoryStore) -> None:
    store.set_node_health(NODE, X, "lost a pod", 0.0)
    assert apply_backend_health(store, {NODE: NodeReport(R, "Ready")}, {}, now=1.0) == []
    assert health(store) is X


def test_changes_are_events_with_the_clusters_reason_and_unknown_nodes_are_ignored(store: MemoryStore) -> None:
    changed = apply_backend_health(store, {NODE: NodeReport(S, "GPUUnhealthy: double-bit ECC"),
                                           "not-a-node": NodeReport(X, "gone")}, {}, now=5.0)
    assert [(r.node.name, r.health, r.health_reason) for r in changed] == [
        (NODE, S, "GPUUnhealthy: double-bit ECC")]
    events = [(e.reason, e.node, e.data) for e in store.events() if e.kind == "node_health"]
    assert events == [("ClusterSuspect", NODE, {"health": "suspect", "was": "ready"})]
