"""``/metrics`` for Prometheus, read from the store at scrape time.

The one figure that matters most sits next to the free GPUs: the largest shape a job could get right now. "96 GPUs
free" means little if they are one per node; ``shoal_largest_free_shape_units`` says what a gang could actually
start on, and the gap between the two is fragmentation.

Preemptions, restarts and admissions are counted from the store's event log, which the controller writes for each
one (so the counts are right whichever process serves the API, and survive restarts). Cycle latency is measured
where the cycle runs: ``CycleTimer`` is observed by the composition root around each controller step.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from ..model.cluster import Health
from ..store.base import Store
from ..store.records import JobRecord, JobState, NodeRecord


@dataclass(frozen=True, slots=True)
class FreeShape:
    """Free units of one flavour on healthy working nodes, and the largest single job shape among them."""

    free_units: int
    largest_shape_units: int
    largest_whole_nodes: int


def free_shapes(nodes: Iterable[NodeRecord], allocated: Mapping[tuple[str, str], int]) -> dict[str, FreeShape]:
    """Per flavour: free units, and the largest shape one job could take now — the most wholly free nodes in one
    block (whole nodes, one block: how gangs are placed), or the most free units on one node if that is more.

    ``allocated`` maps (node, flavour) to units held. Hot spares and nodes that are not ready are left out: they
    take no new work.
    """
    free: dict[str, int] = {}
    best_node: dict[str, int] = {}
    whole_by_block: dict[tuple[str, str], list[int]] = {}
    for record in nodes:
        node = record.node
        if node.spare or record.health is not Health.READY:
            continue
        for flavour, capacity in node.capacity.items():
            left = capacity - allocated.get((node.name, flavour), 0)
            free[flavour] = free.get(flavour, 0) + left
            best_node[flavour] = max(best_node.get(flavour, 0), left)
            if left == capacity:
                whole_by_block.setdefault((flavour, node.block), []).append(capacity)
    shapes: dict[str, FreeShape] = {}
    for flavour, units in free.items():
        blocks = [v for (f, _), v in whole_by_block.items() if f == flavour]
        whole_units = max((sum(v) for v in blocks), default=0)
        whole_nodes = max((len(v) for v in blocks), default=0)
        shapes[flavour] = FreeShape(units, max(whole_units, best_node.get(flavour, 0)), whole_nodes)
    return shapes


def allocations(jobs: Iterable[JobRecord]) -> dict[tuple[str, str], int]:
    held: dict[tuple[str, str], int] = {}
    for job in jobs:
        if job.placement is None:
            continue
        for pod in job.placement.pods:
            key = (pod.node, job.placement.flavour)
            held[key] = held.get(key, 0) + len(pod.units)
    return held


class StoreCollector:
    """Gauges of the cluster and the queues, computed from the store at each scrape."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def describe(self) -> list[Metric]:
        # Described lazily: an empty description keeps registration from scraping the store.
        return []

    def collect(self) -> Iterator[Metric]:
        nodes = self._store.list_nodes()
        active = self._store.list_jobs(states=[s for s in JobState if not s.finished])
        holding = [job for job in active if job.state.holds_units]
        held = allocations(holding)

        capacity = GaugeMetricFamily("shoal_units_capacity", "Units (GPUs or MIG slices) configured, hot spares "
                                     "included", labels=["flavour"])
        healthy = GaugeMetricFamily("shoal_units_healthy", "Units on ready nodes", labels=["flavour"])
        allocated = GaugeMetricFamily("shoal_units_allocated", "Units held by jobs", labels=["flavour"])
        free = GaugeMetricFamily("shoal_units_free", "Units free on ready working nodes (spares excluded)",
                                 labels=["flavour"])
        largest = GaugeMetricFamily("shoal_largest_free_shape_units", "Largest shape one job could take now: "
                                    "wholly free nodes in one block, or free units on one node",
                                    labels=["flavour"])
        whole = GaugeMetricFamily("shoal_largest_free_whole_nodes", "Most wholly free ready nodes in one block",
                                  labels=["flavour"])
        node_health = GaugeMetricFamily("shoal_nodes", "Nodes by health", labels=["health"])

        total_cap: dict[str, int] = {}
        total_healthy: dict[str, int] = {}
        by_health = {health.value: 0 for health in Health}
        for record in nodes:
            by_health[record.health.value] += 1
            for flavour, units in record.node.capacity.items():
                total_cap[flavour] = total_cap.get(flavour, 0) + units
                if record.health is Health.READY:
                    total_healthy[flavour] = total_healthy.get(flavour, 0) + units
        total_held: dict[str, int] = {}
        for (_, flavour), units in held.items():
            total_held[flavour] = total_held.get(flavour, 0) + units
        shapes = free_shapes(nodes, held)
        for flavour in sorted(total_cap):
            capacity.add_metric([flavour], total_cap[flavour])
            healthy.add_metric([flavour], total_healthy.get(flavour, 0))
            allocated.add_metric([flavour], total_held.get(flavour, 0))
            shape = shapes.get(flavour, FreeShape(0, 0, 0))
            free.add_metric([flavour], shape.free_units)
            largest.add_metric([flavour], shape.largest_shape_units)
            whole.add_metric([flavour], shape.largest_whole_nodes)
        for health, count in sorted(by_health.items()):
            node_health.add_metric([health], count)

        depth = GaugeMetricFamily("shoal_queue_pending_jobs", "Pending jobs per team", labels=["team"])
        depth_units = GaugeMetricFamily("shoal_queue_pending_units", "Units asked for by pending jobs per team",
                                        labels=["team"])
        jobs = GaugeMetricFamily("shoal_jobs", "Jobs not yet finished, by state", labels=["state"])
        per_team: dict[str, tuple[int, int]] = {team.name: (0, 0) for team in self._store.list_teams()}
        per_state = {state.value: 0 for state in JobState if not state.finished}
        for job in active:
            per_state[job.state.value] += 1
            if job.state is JobState.PENDING:
                count, units = per_team.get(job.team, (0, 0))
                per_team[job.team] = (count + 1, units + job.spec.total_units)
        for team, (count, units) in sorted(per_team.items()):
            depth.add_metric([team], count)
            depth_units.add_metric([team], units)
        for state, count in per_state.items():
            jobs.add_metric([state], count)
        yield from (capacity, healthy, allocated, free, largest, whole, node_health, depth, depth_units, jobs)


#: Event kinds (the controller's vocabulary, ``runtime.events.EventKind``) that count as what the metric names.
PREEMPT_KIND = "preempt"
REQUEUE_KIND = "requeue"
ADMIT_KIND = "admit"
NODE_HEALTH_KIND = "node_health"
#: A requeue after a preemption is the preemption's end, not a restart.
_NOT_A_RESTART = frozenset({"Preempted"})
_PAGE = 1000
_PAGES_PER_SCRAPE = 100


class EventCounters:
    """Counters read forward from the event log: each scrape reads only the events appended since the last."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._after: int | None = None
        self._counts: dict[tuple[str, str], int] = {}
        self._transitions: dict[tuple[str, str, str], int] = {}   # (was, health, reason) → count

    def describe(self) -> list[Metric]:
        return []

    def _catch_up(self) -> None:
        for _ in range(_PAGES_PER_SCRAPE):
            page = self._store.events(after_id=self._after, limit=_PAGE)
            for event in page:
                key = (event.kind, event.reason)
                self._counts[key] = self._counts.get(key, 0) + 1
                if event.kind == NODE_HEALTH_KIND and "health" in event.data:
                    move = (str(event.data.get("was", "")), str(event.data["health"]), event.reason)
                    self._transitions[move] = self._transitions.get(move, 0) + 1
            if page:
                self._after = page[-1].id
            if len(page) < _PAGE:
                return

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self._catch_up()
            counts = dict(self._counts)
            moves = dict(self._transitions)
        preemptions = CounterMetricFamily("shoal_preemptions", "Jobs signalled to make room, by reason",
                                          labels=["reason"])
        restarts = CounterMetricFamily("shoal_restarts", "Gangs requeued to restart (node lost, readiness "
                                       "timeout, own fault, …), by reason", labels=["reason"])
        admissions = CounterMetricFamily("shoal_admissions", "Jobs bound to nodes, by how they hold them",
                                         labels=["admitted_as"])
        events = CounterMetricFamily("shoal_events", "Every event in the log, by kind and reason",
                                     labels=["kind", "reason"])
        transitions = CounterMetricFamily("shoal_node_transitions", "Node health changes (the lifecycle's "
                                          "transitions), by health before and after and reason",
                                          labels=["from", "to", "reason"])
        for (was, health, reason), count in sorted(moves.items()):
            transitions.add_metric([was, health, reason], count)
        for (kind, reason), count in sorted(counts.items()):
            events.add_metric([kind, reason], count)
            if kind == PREEMPT_KIND:
                preemptions.add_metric([reason], count)
            elif kind == REQUEUE_KIND and reason not in _NOT_A_RESTART:
                restarts.add_metric([reason], count)
            elif kind == ADMIT_KIND and reason in ("nominal", "borrowed", "scavenger"):
                admissions.add_metric([reason], count)
        yield from (preemptions, restarts, admissions, transitions, events)


class CycleTimer:
    """Seconds per controller step (snapshot, policy, apply), observed where the loop runs."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "shoal_cycle_seconds", "Wall time of one controller step: snapshot, run_cycle, apply",
            buckets=(0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0), registry=registry)

    def observe(self, seconds: float) -> None:
        self.histogram.observe(seconds)


def make_registry(store: Store) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    registry.register(EventCounters(store))
    return registry
