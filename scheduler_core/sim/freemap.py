"""Free units per node, and first-fit gang placement on them: the placement the baseline policies share.

The baselines stand for what people would otherwise run (strict FIFO, Kueue, Slurm's EASY backfill), so they place
the way those do by default: the first nodes, in the cluster's order, that have room — not Shoal's best fit.
They honour the same hard rules Shoal does, so a comparison measures the policy and nothing else: all pods or none,
``required`` topology never splits, unhealthy nodes take nothing, and hot spares come last: a gang restarted
after a failure may take its own block's spare, any other multi-node gang a spare only when it cannot fit without
one, and single-node work never. A ``preferred`` topology is tried first and dropped at once (no bounded wait).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence

from ..model.job import TopologyLevel
from ..policy.snapshot import JobRequest, NodeState, PendingJob, Placement, PodPlacement, RunningJob


class FreeMap:
    """Which unit indices of each flavour are free on each node. Mutable: a policy takes units as it admits.

    Free units are one bitmask per node and flavour (bit ``u`` set: unit ``u`` free), with a running total per
    flavour over schedulable nodes, so a cycle can reject a job that cannot fit anywhere in O(1) and copy the map
    for a what-if in a few microseconds per node.
    """

    __slots__ = ("nodes", "pos", "masks", "by_flavour", "total", "_ok")

    def __init__(self, nodes: Sequence[NodeState], running: Iterable[RunningJob] = ()) -> None:
        self.nodes = tuple(nodes)
        self.pos = {node.name: i for i, node in enumerate(self.nodes)}
        self._ok = [node.schedulable for node in self.nodes]
        self.masks: dict[str, list[int]] = {}
        self.by_flavour: dict[str, list[int]] = {}
        self.total: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            for flavour, count in node.capacity.items():
                if count:
                    self.masks.setdefault(flavour, [0] * len(self.nodes))[i] = (1 << count) - 1
                    self.by_flavour.setdefault(flavour, []).append(i)
                    if self._ok[i]:
                        self.total[flavour] = self.total.get(flavour, 0) + count
        for job in running:
            self.take(job.placement)

    def copy(self) -> FreeMap:
        clone = FreeMap.__new__(FreeMap)
        clone.nodes, clone.pos, clone.by_flavour, clone._ok = self.nodes, self.pos, self.by_flavour, self._ok
        clone.masks = {flavour: list(masks) for flavour, masks in self.masks.items()}
        clone.total = dict(self.total)
        return clone

    def take(self, placement: Placement) -> None:
        self._change(placement, take=True)

    def give(self, placement: Placement) -> None:
        self._change(placement, take=False)

    def _change(self, placement: Placement, *, take: bool) -> None:
        masks = self.masks.get(placement.flavour)
        if masks is None:
            return
        changed = 0
        for pod in placement.pods:
            i = self.pos.get(pod.node)
            if i is None:
                continue
            before = masks[i]
            bits = 0
            for unit in pod.units:
                bits |= 1 << unit
            after = before & ~bits if take else before | (bits & self._capacity_mask(i, placement.flavour))
            masks[i] = after
            if self._ok[i]:
                changed += after.bit_count() - before.bit_count()
        if changed:
            self.total[placement.flavour] = self.total.get(placement.flavour, 0) + changed

    def _capacity_mask(self, i: int, flavour: str) -> int:
        return (1 << self.nodes[i].capacity.get(flavour, 0)) - 1

    def free_units(self, flavour: str) -> int:
        """Free units of ``flavour`` on schedulable nodes (hot spares included)."""
        return self.total.get(flavour, 0)

    def place(self, request: JobRequest, flavour: str, *, restart_block: str | None = None,
              avoid: frozenset[str] = frozenset(), exclude: frozenset[str] = frozenset()) -> Placement | None:
        """First fit for every pod of ``request`` on ``flavour``, or ``None``. Nothing is taken."""
        if self.total.get(flavour, 0) < request.units:
            return None
        found = self._place(request, flavour, restart_block, avoid, exclude, spares=False)
        if found is None and request.pods > 1:
            found = self._place(request, flavour, restart_block, avoid, exclude, spares=True)
        return found

    def _place(self, request: JobRequest, flavour: str, restart_block: str | None, avoid: frozenset[str],
               exclude: frozenset[str], *, spares: bool) -> Placement | None:
        per_pod, pods = request.units_per_pod, request.pods
        masks = self.masks[flavour]
        nodes, ok = self.nodes, self._ok
        skip = avoid | exclude
        candidates = []
        slots = 0
        for i in self.by_flavour[flavour]:
            if not ok[i]:
                continue
            fits = masks[i].bit_count() // per_pod
            if not fits:
                continue
            node = nodes[i]
            if node.spare and not spares and node.block != restart_block:
                continue
            if skip and node.name in skip:
                continue
            candidates.append(i)
            slots += fits
        if slots < pods:
            return None
        level = request.topology_level
        if level is not None and level < TopologyLevel.CLUSTER:
            domains: dict[str, list[int]] = {}
            for i in candidates:
                domains.setdefault(_domain(nodes[i], level), []).append(i)
            for members in domains.values():
                found = self._fill(members, pods, per_pod, flavour)
                if found is not None:
                    return found
            if request.topology_required:
                return None
        return self._fill(candidates, pods, per_pod, flavour)

    def _fill(self, members: list[int], pods: int, per_pod: int, flavour: str) -> Placement | None:
        masks = self.masks[flavour]
        if sum(masks[i].bit_count() // per_pod for i in members) < pods:
            return None
        chosen: list[PodPlacement] = []
        for i in members:
            units = _units(masks[i])
            k = min(pods - len(chosen), len(units) // per_pod)
            for p in range(k):
                chosen.append(PodPlacement(self.nodes[i].name, tuple(units[p * per_pod:(p + 1) * per_pod])))
            if len(chosen) == pods:
                return Placement(flavour, tuple(chosen))
        return None


class CarriedFree:
    """``FreeMap(nodes, running)`` and the running jobs' units per (team, flavour), carried from one snapshot to
    the next instead of rebuilt: the baselines' ``CarriedIndex``.

    Rebuilding the free map from every running job was a third of a baseline replay, although between two passes
    only a few jobs start or end. The snapshot builder hands back the very same ``RunningJob`` while nothing about
    a job changed and the very same nodes tuple while no node did, so a job whose object is new or gone is
    exactly what moved: its units are given back or taken (bit operations, so the map equals a rebuild whatever
    the order). New nodes rebuild from scratch. Read only: a pass copies what it changes. Not thread-safe: one
    pass at a time, as the controller runs them."""

    __slots__ = ("nodes", "jobs", "free", "usage", "_limits", "_pushed")

    def __init__(self) -> None:
        self.nodes: Sequence[NodeState] | None = None
        #: The carried running jobs by ``id()`` of their objects.
        self.jobs: dict[int, RunningJob] = {}
        self.free = FreeMap(())
        #: Units of the running jobs per (team, flavour), as ``QuotaBook`` counts them.
        self.usage: dict[tuple[str, str], int] = {}
        #: A heap of (time limit's end, push count, job) of the carried jobs not terminating; entries of jobs gone
        #: stay until they reach the top (``first_limit_end``).
        self._limits: list[tuple[float, int, RunningJob]] = []
        self._pushed = 0

    def update(self, nodes: Sequence[NodeState], running: Sequence[RunningJob]) -> CarriedFree:
        """Bring the map and usage up to ``running`` on ``nodes``; returns itself. Nodes not in a tuple (which
        could change in place) are never carried."""
        if nodes is not self.nodes or not isinstance(nodes, tuple):
            self.nodes, self.jobs, self.free, self.usage, self._limits = nodes, {}, FreeMap(nodes), {}, []
        # Jobs by object identity, without a Python loop over every running job: the carried objects are alive
        # in ``self.jobs`` meanwhile, so no new object can share an id with one of them.
        jobs = self.jobs
        current = dict(zip(map(id, running), running))
        if current.keys() == jobs.keys():
            return self
        # What left first (ended, or changed: its old object), then what came: a unit may pass from one to the
        # other. Taking and giving bits and adding units commute, so the sets' order does not matter.
        for key in jobs.keys() - current.keys():
            self._count(jobs[key], -1)
        for key in current.keys() - jobs.keys():
            job = current[key]
            self._count(job, +1)
            if not job.terminating:
                self._pushed += 1
                heapq.heappush(self._limits, (job.limit_end, self._pushed, job))
        self.jobs = current
        return self

    def first_limit_end(self) -> float:
        """No carried job that is not terminating reaches its time limit before this (``inf``: none runs)."""
        limits, jobs = self._limits, self.jobs
        while limits and jobs.get(id(limits[0][2])) is not limits[0][2]:
            heapq.heappop(limits)
        return limits[0][0] if limits else math.inf

    def _count(self, job: RunningJob, sign: int) -> None:
        if sign > 0:
            self.free.take(job.placement)
        else:
            self.free.give(job.placement)
        key = (job.request.team, job.placement.flavour)
        self.usage[key] = self.usage.get(key, 0) + sign * job.request.units


def _units(mask: int) -> list[int]:
    """Indices of the set bits, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _domain(node: NodeState, level: TopologyLevel) -> str:
    if level is TopologyLevel.NODE:
        return node.name
    if level is TopologyLevel.LEAF:
        return node.leaf
    return node.block


def placement_key(pending: PendingJob, flavour: str) -> tuple[object, ...]:
    """Jobs with equal keys place identically on the same free map: a failed fit need not be tried twice."""
    return (pending.request.shape, flavour, pending.restart_block, pending.avoid_nodes)
