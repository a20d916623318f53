"""Reservations and the plan: when will a job that does not fit now fit, and on which nodes.

The timeline knows, for every unit, when it becomes free: now if free, else the end of the job holding it
(``started_at + time_limit_s``, or the termination deadline of a signalled job) — time limits are enforced, so
that is a promise, as in Slurm's backfill. A job planned at ``T`` holds its units from then to ``T + time
limit``; units are never planned into a hole before a later booking (conservative, no holes), which keeps
each query a sort of a few numbers.

A reservation is the plan of a blocked head job turned into :class:`~.capacity.Hold`\\ s on its nodes: from
``start_at`` it needs units that will be free by then, so a job that would still be running at ``start_at``
may use a held node only for the units the reservation can spare. That is the backfill rule: start a
lower job only if it ends before the reservation starts or uses none of what it needs.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from typing import Any, Callable, Iterable, TypeVar

from ..model.job import TopologyLevel
from .capacity import Capacity, Hold, Pool
from .record import record
from .snapshot import JobRequest, Placement, PodPlacement, RunningJob

INF = math.inf


@record
class Slot:
    """A planned start: ``pods`` lists (node position in the pool, unit indices) per pod."""

    flavour: str
    start: float
    pods: tuple[tuple[int, tuple[int, ...]], ...]


def job_end(job: RunningJob, now: float) -> float:
    """When a running job's units come back, as far as the plan knows."""
    if job.terminating:
        end = job.terminate_by if job.terminate_by is not None else now + job.request.grace_s
    else:
        end = job.limit_end
    return max(end, now)


#: Bookings that touch more nodes than this drop the flavour's ``_WholeNodes`` instead of updating it node by node.
_REBUILD_AFTER = 16


class _WholeNodes:
    """For a flavour whose nodes all have the same number of units: each node's "wholly free" time, kept
    sorted per block, per leaf and over the cluster, so a whole-node gang asks "when are the k-th earliest
    nodes of this block free" in O(1) instead of sorting the cluster for every job."""

    def __init__(self, pool: Pool, times: list[float]) -> None:
        self.pool = pool
        self.cur = list(times)
        self.block: dict[int, list[tuple[float, int]]] = {b: [] for b in pool.blocks}
        self.spare: dict[int, list[tuple[float, int]]] = {b: [] for b in pool.blocks}
        self.leaf: dict[int, list[tuple[float, int]]] = {k: [] for k in pool.leaves}
        self.leaf_spare: dict[int, list[tuple[float, int]]] = {k: [] for k in pool.leaves}
        self.all: list[tuple[float, int]] = []
        self.all_spare: list[tuple[float, int]] = []
        usable, spare, block, leaf = pool.usable, pool.spare, pool.block, pool.leaf
        for j, t in enumerate(times):            # what ``_lists(j)`` names, spelt out: this runs every pass
            if not usable[j]:
                continue
            entry = (t, j)
            if spare[j]:
                self.spare[block[j]].append(entry)
                self.leaf_spare[leaf[j]].append(entry)
                self.all_spare.append(entry)
            else:
                self.block[block[j]].append(entry)
                self.leaf[leaf[j]].append(entry)
                self.all.append(entry)
        for group in (self.block, self.spare, self.leaf, self.leaf_spare):
            for lst in group.values():
                lst.sort()
        self.all.sort()
        self.all_spare.sort()
        #: Derived lists, until a node they cover changes: per block its nodes with its spares, and each
        #: block's times alone (with spares or without, for ``_spread``); the cluster's with its spares.
        self._merged: dict[int, list[tuple[float, int]]] = {}
        self._times: dict[tuple[int, bool], list[float]] = {}
        self._everything: list[tuple[float, int]] | None = None

    def with_spares(self, b: int) -> list[tuple[float, int]]:
        """Block ``b``'s nodes and its spares, sorted (read only)."""
        spare = self.spare[b]
        if not spare:
            return self.block[b]
        hit = self._merged.get(b)
        if hit is None:
            hit = self._merged[b] = sorted(self.block[b] + spare)
        return hit

    def leaf_with_spares(self, k: int) -> list[tuple[float, int]]:
        """Leaf ``k``'s nodes and its spares, sorted (read only; a leaf is a few nodes, so not kept)."""
        spare = self.leaf_spare[k]
        return sorted(self.leaf[k] + spare) if spare else self.leaf[k]

    def block_times(self, b: int, spares: bool) -> list[float]:
        """The times of ``with_spares(b)`` (``spares``) or of ``block[b]``, in order (read only)."""
        key = (b, spares)
        hit = self._times.get(key)
        if hit is None:
            hit = self._times[key] = [t for t, _ in (self.with_spares(b) if spares else self.block[b])]
        return hit

    def everything(self) -> list[tuple[float, int]]:
        """Every node and spare of the cluster, sorted (read only)."""
        if self._everything is None:
            self._everything = sorted(self.all + self.all_spare)
        return self._everything

    def _lists(self, j: int) -> list[list[tuple[float, int]]]:
        pool = self.pool
        if not pool.usable[j]:
            return []
        if pool.spare[j]:
            return [self.spare[pool.block[j]], self.leaf_spare[pool.leaf[j]], self.all_spare]
        return [self.block[pool.block[j]], self.leaf[pool.leaf[j]], self.all]

    def update(self, j: int, t: float) -> None:
        old = self.cur[j]
        if old == t:
            return
        for lst in self._lists(j):
            del lst[bisect_left(lst, (old, j))]
            insort(lst, (t, j))
        self.cur[j] = t
        b = self.pool.block[j]
        self._merged.pop(b, None)
        self._times.pop((b, False), None)
        self._times.pop((b, True), None)
        self._everything = None


class Timeline:
    """Per flavour and node, the instant each unit becomes free."""

    def __init__(self, cap: Capacity, running: Iterable[RunningJob], now: float,
                 end_of: Callable[[RunningJob], float] | None = None,
                 laid: dict[str, list[list[float]]] | None = None, shared: bool = False,
                 ordered: dict[str, list[list[float] | None]] | None = None) -> None:
        """``end_of``: when each running job's units come back (default ``job_end``: by its time limit, a
        promise; estimated starts pass what is likely instead, see ``estimates``).
        ``laid``: the running jobs' units already laid down (``from_times``, which passes no ``running``);
        ``shared``: its rows belong to someone else too, so each is copied before this timeline first changes
        it. ``ordered``: rows of ``laid`` already sorted (``None`` where not known), read only."""
        self.cap = cap
        self.now = now
        self.times: dict[str, list[list[float]]] = laid if laid is not None else {
            flavour: [[now] * c for c in pool.cap] for flavour, pool in cap.pools.items()}
        #: Per flavour, the rows this timeline has made its own; ``None``: all are.
        self._own: dict[str, set[int]] | None = {flavour: set() for flavour in self.times} if shared else None
        self._sorted: dict[str, list[list[float] | None]] = ordered if ordered is not None else {
            flavour: [None] * len(pool.cap) for flavour, pool in cap.pools.items()}
        self._kth_cache: dict[tuple[str, int], tuple[list[float], list[tuple[float, int]]]] = {}
        self._whole: dict[str, _WholeNodes] = {}
        #: (flavour, node) → unit → when the earliest booking on that unit starts.
        self.booked: dict[tuple[str, int], dict[int, float]] = {}
        laid_out = self.times
        for job in running:
            placement = job.placement
            times = laid_out.get(placement.flavour)
            if times is None:
                continue
            until = job_end(job, now) if end_of is None else end_of(job)
            for _, j, bits, units in cap.pod_bits(placement):
                row = times[j]
                size = len(row)
                if bits == (1 << size) - 1:      # the whole node (every pod of most gangs): a new row at once
                    times[j] = [until] * size
                    continue
                for unit in units:
                    if unit < size:
                        row[unit] = until

    @classmethod
    def from_times(cls, cap: Capacity, times: dict[str, list[list[float]]], now: float,
                   ordered: dict[str, list[list[float] | None]] | None = None) -> Timeline:
        """A timeline whose running jobs are already laid down in ``times`` (flavour → pool node → unit →
        when it is back, never before ``now``): what a carried index hands a pass. The rows may be shared
        (with the index, or one row object for many nodes): the timeline copies a row before changing it.
        ``ordered``: the same rows sorted where the index knows them (``None`` elsewhere), never changed."""
        return cls(cap, (), now, laid=times, shared=True, ordered=ordered)

    def _row(self, flavour: str, j: int) -> list[float]:
        """Node ``j``'s row, to change: copied first if it is not yet this timeline's own."""
        rows = self.times[flavour]
        own = self._own
        if own is None:
            return rows[j]
        mine = own[flavour]
        if j not in mine:
            rows[j] = rows[j][:]
            mine.add(j)
        return rows[j]

    # -- updates -----------------------------------------------------------------------------------------------

    def set_until(self, request: JobRequest, placement: Placement, until: float, *, extend: bool = False) -> None:
        """The units of ``placement`` are busy until ``until``: a job leaving early (``extend=False``: the new
        time replaces the old) or a job admitted now (``extend=True``). A job admitted now may take a unit a
        booking planned to use only if it ends first or the node can spare another unit free by the booking's
        start (the hold's slack); then the booking moves to that unit, so the plan never counts one unit
        twice."""
        flavour = placement.flavour
        times = self.times.get(flavour)
        if times is None:
            return
        for i, j, bits, _ in self.cap.pod_bits(placement):
            row = self._row(flavour, j)
            taken = [unit for unit in range(len(row)) if bits >> unit & 1]
            booked = self.booked.get((flavour, j))
            for unit in taken:
                if not extend:
                    row[unit] = until
                    continue
                start = booked.get(unit) if booked else None
                if booked is not None and start is not None and until > start:
                    spare = [v for v in range(len(row)) if v not in booked and v not in taken and row[v] <= start]
                    if spare:
                        v = max(spare, key=lambda u: (row[u], u))
                        row[v] = row[unit]
                        booked[v] = booked.pop(unit)
                        row[unit] = until
                        continue
                row[unit] = max(row[unit], until)
            self._touch(flavour, j)

    def book(self, slot: Slot, duration: float) -> None:
        """Plan the slot's units as busy from its start for ``duration`` (no holes before it)."""
        start = slot.start
        end = start + duration
        touched = set()
        for j, units in slot.pods:          # a 1,024-GPU gang books 1,024 units: comparisons, not max()/min()
            row = self._row(slot.flavour, j)
            booked = self.booked.setdefault((slot.flavour, j), {})
            for unit in units:
                if row[unit] < end:
                    row[unit] = end
                first = booked.get(unit)
                if first is None or start < first:
                    booked[unit] = start
            touched.add(j)
        if len(touched) > _REBUILD_AFTER:
            # A big gang: sorting the flavour's whole-node index again when next asked costs less than moving
            # each of its nodes in it (it is derived from ``times`` alone, so both give the same index).
            self._whole.pop(slot.flavour, None)
        for j in touched:
            self._touch(slot.flavour, j)

    def _touch(self, flavour: str, j: int) -> None:
        self._sorted[flavour][j] = None
        pool = self.cap.pools[flavour]
        whole = self._whole.get(flavour)
        if whole is not None:
            whole.update(j, max(self.times[flavour][j]))
        for (f, g), (values, heap) in self._kth_cache.items():
            if f == flavour:
                value = self._kth_value(pool, j, g)
                if values[j] != value:
                    values[j] = value
                    heapq.heappush(heap, (value, j))

    # -- queries -----------------------------------------------------------------------------------------------

    def sorted_times(self, flavour: str, j: int) -> list[float]:
        cache = self._sorted[flavour]
        row = cache[j]
        if row is None:
            row = sorted(self.times[flavour][j])
            cache[j] = row
        return row

    def _kth_value(self, pool: Pool, j: int, g: int) -> float:
        if not pool.usable[j] or pool.spare[j] or pool.cap[j] < g:
            return INF
        return self.sorted_times(pool.flavour, j)[g - 1]

    def _kth(self, flavour: str, g: int) -> tuple[list[float], list[tuple[float, int]]]:
        entry = self._kth_cache.get((flavour, g))
        if entry is None:
            pool = self.cap.pools[flavour]
            usable, spare, cap, ordered = pool.usable, pool.spare, pool.cap, self.sorted_times
            # ``_kth_value`` of every node, spelt out.
            values = [INF if not usable[j] or spare[j] or cap[j] < g else ordered(flavour, j)[g - 1]
                      for j in range(len(cap))]
            heap = [(value, j) for j, value in enumerate(values) if value < INF]
            heapq.heapify(heap)
            entry = (values, heap)
            self._kth_cache[(flavour, g)] = entry
        return entry

    def earliest(self, request: JobRequest, flavour: str, *, not_before: float, widen_at: float | None,
                 avoid: frozenset[int] = frozenset(), best_fit: bool = True, block_cap: int | None = 0,
                 spares_sooner: bool = False) -> Slot | None:
        """The earliest slot for ``request`` on ``flavour`` no sooner than ``not_before``; ``None`` if the plan
        never frees enough (unhealthy nodes, a shape larger than any domain). ``widen_at``: when a
        ``preferred`` job may spread over blocks (``None``: never). ``best_fit``: when the job may start
        only later than a unit frees (``not_before``), take the node that frees last by then, not the first
        (what a reservation does; an estimate alone can skip the scan). ``block_cap``: see ``PlaceContext``.
        A gang takes hot spares only when it never fits without them, or (``spares_sooner``) when they start it
        sooner (see :func:`_with_spares_if`)."""
        pool = self.cap.pools.get(flavour)
        if pool is None or request.units_per_pod > pool.max_cap:
            return None
        if request.pods == 1:
            return self._earliest_single(pool, request, not_before, avoid, best_fit)
        return self._earliest_gang(pool, request, not_before, widen_at, avoid, block_cap, spares_sooner)

    def _units_at(self, pool: Pool, j: int, count: int, start: float) -> tuple[int, ...]:
        """The ``count`` units of node ``j`` a booking from ``start`` takes: among those free by then, the
        ones that free last (best fit in time), so units free sooner stay for jobs that can use them sooner."""
        row = self.times[pool.flavour][j]
        if count >= len(row):
            return tuple(range(len(row)))   # the whole node (most gang pods): nothing to choose
        ready = sorted((u for u in range(len(row)) if row[u] <= start), key=lambda u: (-row[u], u))
        if len(ready) < count:
            ready += sorted((u for u in range(len(row)) if row[u] > start), key=lambda u: (row[u], u))
        return tuple(sorted(ready[:count]))

    def _earliest_single(self, pool: Pool, request: JobRequest, not_before: float, avoid: frozenset[int],
                         best_fit: bool) -> Slot | None:
        g = request.units_per_pod
        values, heap = self._kth(pool.flavour, g)
        if avoid:
            best = min(((v, j) for j, v in enumerate(values) if pool.members[j] not in avoid and v < INF),
                       default=None)
        else:
            while heap and heap[0][0] != values[heap[0][1]]:
                heapq.heappop(heap)
            best = heap[0] if heap else None
        if best is None or best[0] == INF:
            return None
        at = max(best[0], not_before, self.now)
        j = best[1]
        if best_fit and at > best[0] and not avoid:
            # Free before it may start anyway: take the node that frees last by then (best fit in time).
            fitting = [(v, -k) for k, v in enumerate(values) if v <= at]
            j = -max(fitting)[1]
        return Slot(pool.flavour, at, ((j, self._units_at(pool, j, g, at)),))

    def _events(self, pool: Pool, nodes: Iterable[int], g: int, spares: bool,
                avoid: frozenset[int]) -> list[tuple[float, int]]:
        """(time, node) each time a node can take one more pod: its (k·g)-th free unit."""
        out: list[tuple[float, int]] = []
        for j in nodes:
            if not pool.usable[j] or (pool.spare[j] and not spares) or pool.members[j] in avoid:
                continue
            row = self.sorted_times(pool.flavour, j)
            for k in range(g, len(row) + 1, g):
                out.append((row[k - 1], j))
        return out

    def _whole_nodes(self, pool: Pool) -> _WholeNodes:
        whole = self._whole.get(pool.flavour)
        if whole is None:
            times = self.times[pool.flavour]
            ordered = self._sorted[pool.flavour]      # a sorted row's last is its max
            whole = _WholeNodes(pool, [known[-1] if known else max(row) if row else INF
                                       for row, known in zip(times, ordered)])
            self._whole[pool.flavour] = whole
        return whole

    def _earliest_whole(self, pool: Pool, pods: int, domain_level: TopologyLevel, spread_at: float | None,
                        floor: float, limit: int | None, spares_sooner: bool) -> Slot | None:
        """Whole-node gangs: the k-th smallest "wholly free" time per domain, from the sorted indexes."""
        whole = self._whole_nodes(pool)
        best = _with_spares_if(spares_sooner, pool, floor, lambda spares: self._whole_best(
            whole, pods, domain_level, spread_at, floor, limit, spares))
        if best is None:
            return None
        g = pool.uniform_cap or 0
        chosen = _latest_ready(pool, best[3], best[0], pods)
        return Slot(pool.flavour, best[0], tuple((j, self._units_at(pool, j, g, best[0]))
                                                 for _, j in sorted(chosen, key=lambda e: e[1])))

    @staticmethod
    def _whole_best(whole: _WholeNodes, pods: int, domain_level: TopologyLevel, spread_at: float | None,
                    floor: float, limit: int | None,
                    spares: bool) -> tuple[float, int, int, list[tuple[float, int]]] | None:
        """The earliest (start, spread, domain, its nodes' events) for a whole-node gang, on the nodes without
        their spares or with them."""
        best: tuple[float, int, int, list[tuple[float, int]]] | None = None
        by_block = domain_level is TopologyLevel.BLOCK
        if by_block:
            domains = [(k, whole.block[k], whole.spare[k]) for k in sorted(whole.block)]
        else:
            domains = [(k, whole.leaf[k], whole.leaf_spare[k]) for k in sorted(whole.leaf)]
        for key, lst, spare in domains:
            if spares and spare:
                if len(lst) + len(spare) < pods:
                    continue
                lst = whole.with_spares(key) if by_block else whole.leaf_with_spares(key)
            elif len(lst) < pods:
                continue
            start = max(lst[pods - 1][0], floor)
            if best is None or (start, 0, key) < best[:3]:
                best = (start, 0, key, lst)
        if spread_at is not None:
            if limit is None:
                lst = whole.everything() if spares else whole.all
                spread = (lst[pods - 1][0], lst) if len(lst) >= pods else None
            else:
                blocks = sorted(whole.block)
                spread = _spread([whole.with_spares(k) if spares else whole.block[k] for k in blocks], pods,
                                 limit, [whole.block_times(k, spares) for k in blocks])
            if spread is not None:
                start = max(spread[0], floor, spread_at)
                if best is None or (start, 1, 0) < best[:3]:
                    best = (start, 1, 0, spread[1])
        return best

    def _earliest_gang(self, pool: Pool, request: JobRequest, not_before: float, widen_at: float | None,
                       avoid: frozenset[int], block_cap: int | None, spares_sooner: bool) -> Slot | None:
        g, pods = request.units_per_pod, request.pods
        level = request.topology_level
        if level is None or level >= TopologyLevel.CLUSTER:
            domain_level: TopologyLevel | None = TopologyLevel.BLOCK
            spread_at: float | None = self.now
        else:
            domain_level = min(level, TopologyLevel.BLOCK)
            spread_at = None if request.topology_required else widen_at
        floor = max(not_before, self.now)
        limit = pool.block_limit(request, block_cap)
        if limit is not None and limit > 1:
            spread_at = self.now             # it can never fit one block: it spreads at once (see placement)
        if (pool.uniform_cap == g and not avoid and domain_level is not None
                and domain_level >= TopologyLevel.LEAF):
            return self._earliest_whole(pool, pods, domain_level, spread_at, floor, limit, spares_sooner)
        best = _with_spares_if(spares_sooner, pool, floor, lambda spares: self._gang_best(
            pool, g, pods, domain_level, spread_at, floor, limit, avoid, spares))
        if best is None:
            return None
        start = best[0]
        chosen = _latest_ready(pool, best[2], start, pods)
        per_node: dict[int, int] = {}
        for _, j in chosen:
            per_node[j] = per_node.get(j, 0) + 1
        slot_pods: list[tuple[int, tuple[int, ...]]] = []
        for j in sorted(per_node):
            units = self._units_at(pool, j, per_node[j] * g, start)
            for k in range(per_node[j]):
                slot_pods.append((j, units[k * g:(k + 1) * g]))
        return Slot(pool.flavour, start, tuple(slot_pods))

    def _gang_best(self, pool: Pool, g: int, pods: int, domain_level: TopologyLevel | None,
                   spread_at: float | None, floor: float, limit: int | None, avoid: frozenset[int],
                   spares: bool) -> tuple[float, int, list[tuple[float, int]]] | None:
        """The earliest (start, spread, the domain's events) for a gang of ``pods`` × ``g`` units, on the nodes
        without their spares or with them."""
        best: tuple[float, int, list[tuple[float, int]]] | None = None
        if domain_level is TopologyLevel.NODE:
            groups: list[list[int]] = [[j] for j in range(len(pool.cap))]
        elif domain_level is TopologyLevel.LEAF:
            groups = [pool.leaves[k] for k in sorted(pool.leaves)]
        else:
            groups = [pool.blocks[k] for k in sorted(pool.blocks)]
        for nodes in groups:
            events = self._events(pool, nodes, g, spares, avoid)
            if len(events) < pods:
                continue
            events.sort()
            start = max(events[pods - 1][0], floor)
            if best is None or start < best[0]:
                best = (start, 0, events)
        if spread_at is not None:
            if limit is None:
                events = sorted(self._events(pool, range(len(pool.cap)), g, spares, avoid))
                spread = (events[pods - 1][0], events) if len(events) >= pods else None
            else:
                spread = _spread([sorted(self._events(pool, pool.blocks[k], g, spares, avoid))
                                  for k in sorted(pool.blocks)], pods, limit)
            if spread is not None:
                start = max(spread[0], floor, spread_at)
                if best is None or start < best[0]:
                    best = (start, 1, spread[1])
        return best

    # -- reservations ------------------------------------------------------------------------------------------

    def holds(self, slot: Slot, job_id: str) -> dict[int, Hold]:
        """The holds that keep ``slot`` free from jobs that would still run at its start."""
        times = self.times[slot.flavour]
        need: dict[int, int] = {}
        for j, units in slot.pods:
            need[j] = need.get(j, 0) + len(units)
        out: dict[int, Hold] = {}
        for j, count in need.items():
            ready = sum(1 for t in times[j] if t <= slot.start)
            out[j] = Hold(job_id=job_id, start_at=slot.start, slack=max(ready - count, 0))
        return out

    def placement(self, slot: Slot) -> Placement:
        pool = self.cap.pools[slot.flavour]
        return Placement(flavour=slot.flavour, pods=tuple(
            PodPlacement(node=self.cap.nodes[pool.members[j]].name, units=units) for j, units in slot.pods))


def _spread(per_block: list[list[tuple[float, int]]], pods: int, limit: int,
            block_times: list[list[float]] | None = None) -> tuple[float, list[tuple[float, int]]] | None:
    """The earliest instant some ``limit`` blocks together have ``pods`` slots free, from each block's sorted
    (time, node) events, and those blocks' events; ``None``: never. Counts only grow with time, so the first
    such instant is found by bisection over the event times. ``block_times``: the events' times, if known."""
    times = block_times if block_times is not None else [[t for t, _ in events] for events in per_block]
    candidates = sorted({t for row in times for t in row})

    first = [bisect_right(row, candidates[0]) for row in times] if candidates else []

    def top(at: float) -> list[int]:
        """The ``limit`` blocks with the most slots at ``at``; of equals, those with more slots sooner."""
        counts = [bisect_right(row, at) for row in times]
        return sorted(range(len(times)), key=lambda b: (-counts[b], -first[b]))[:limit]

    def enough(at: float) -> bool:
        return sum(bisect_right(times[b], at) for b in top(at)) >= pods

    if not candidates or not enough(candidates[-1]):
        return None
    low, high = 0, len(candidates) - 1
    while low < high:
        mid = (low + high) // 2
        if enough(candidates[mid]):
            high = mid
        else:
            low = mid + 1
    at = candidates[low]
    return at, sorted(e for b in top(at) for e in per_block[b])


_Best = TypeVar("_Best", bound=tuple[Any, ...])


def _with_spares_if(sooner: bool, pool: Pool, floor: float,
                    best_of: Callable[[bool], _Best | None]) -> _Best | None:
    """A gang's earliest slot (``best_of(spares)``, whose first item is its start) on the nodes without their hot
    spares; with them when it never fits without, or (``sooner``) when they start it sooner. ``None``: no slot.

    ``sooner`` is for a job waiting for victims a search chose as admission places (a spare when the gang fits
    no other way now): its slot is where they leave. Planned off the spare, a later slot took the units of the
    head's reservation (Hypothesis). Other plans keep spares last: counting every spare that starts a gang sooner
    put estimates further from starts on 14 of 20 Tuesday seeds (docs/BENCHMARKS.md, session 38)."""
    best = best_of(False)
    if pool.has_spare and (best is None or best[0] == INF or (sooner and best[0] > floor)):
        with_spares = best_of(True)
        if with_spares is not None and (best is None or with_spares[0] < best[0]):
            best = with_spares
    return best if best is not None and best[0] < INF else None


def _latest_ready(pool: Pool, events: list[tuple[float, int]], start: float,
                  count: int) -> list[tuple[float, int]]:
    """Of (time, node) events, ``count`` ready by ``start``: non-spare nodes first, then those that free last,
    so a booking leaves what frees sooner to jobs that can use it sooner."""
    ready = sorted((e for e in events if e[0] <= start), key=lambda e: (pool.spare[e[1]], -e[0], e[1]))
    return ready[:count]


def add_holds(pool: Pool, holds: dict[int, Hold]) -> None:
    for j, hold in holds.items():
        pool.holds.setdefault(j, []).append(hold)
