"""Free units per node, and first-fit gang placement on them: the placement the baseline policies share.

The baselines stand for what people would otherwise run (strict FIFO, Kueue, Slurm's EASY backfill), so they place
the way those do by default: the first nodes, in the cluster's order, that have room — not Shoal's best fit.
They honour the same hard rules Shoal does, so a comparison measures the policy and nothing else: all pods or none,
``required`` topology never splits, unhealthy nodes take nothing, and hot spares come last: a gang restarted
after a failure may take its own block's spare, any other multi-node gang a spare only when it cannot fit without
one, and single-node work never. A ``preferred`` topology is tried first and dropped at once (no bounded wait).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..model.job import TopologyLevel
from ..policy.snapshot import JobRequest, NodeState, PendingJob, Placement, PodPlacement, RunningJob


class FreeMap:
    """Which unit indices of each flavour are free on each node. Mutable: a policy takes units as it admits."""

    __slots__ = ("nodes", "pos", "free", "by_flavour")

    def __init__(self, nodes: Sequence[NodeState], running: Iterable[RunningJob] = ()) -> None:
        self.nodes = tuple(nodes)
        self.pos = {node.name: i for i, node in enumerate(self.nodes)}
        self.free: list[dict[str, list[int]]] = [
            {flavour: list(range(count)) for flavour, count in node.capacity.items()} for node in self.nodes]
        self.by_flavour: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for flavour, count in node.capacity.items():
                if count:
                    self.by_flavour.setdefault(flavour, []).append(i)
        for job in running:
            self.take(job.placement)

    def copy(self) -> FreeMap:
        clone = FreeMap.__new__(FreeMap)
        clone.nodes = self.nodes
        clone.pos = self.pos
        clone.by_flavour = self.by_flavour
        clone.free = [{f: list(units) for f, units in node.items()} for node in self.free]
        return clone

    def take(self, placement: Placement) -> None:
        for pod in placement.pods:
            i = self.pos.get(pod.node)
            if i is None:
                continue
            units = self.free[i].get(placement.flavour)
            if units is None:
                continue
            for unit in pod.units:
                if unit in units:
                    units.remove(unit)

    def give(self, placement: Placement) -> None:
        for pod in placement.pods:
            i = self.pos.get(pod.node)
            if i is None:
                continue
            units = self.free[i].setdefault(placement.flavour, [])
            for unit in pod.units:
                if unit not in units:
                    units.append(unit)
            units.sort()

    def free_units(self, flavour: str, *, schedulable_only: bool = True) -> int:
        return sum(len(self.free[i].get(flavour, ())) for i in self.by_flavour.get(flavour, ())
                   if not schedulable_only or self.nodes[i].schedulable)

    def place(self, request: JobRequest, flavour: str, *, restart_block: str | None = None,
              avoid: frozenset[str] = frozenset(), exclude: frozenset[str] = frozenset()) -> Placement | None:
        """First fit for every pod of ``request`` on ``flavour``, or ``None``. Nothing is taken."""
        found = self._place(request, flavour, restart_block, avoid, exclude, spares=False)
        if found is None and request.pods > 1:
            found = self._place(request, flavour, restart_block, avoid, exclude, spares=True)
        return found

    def _place(self, request: JobRequest, flavour: str, restart_block: str | None, avoid: frozenset[str],
               exclude: frozenset[str], *, spares: bool) -> Placement | None:
        per_pod, pods = request.units_per_pod, request.pods
        candidates = []
        slots = 0
        for i in self.by_flavour.get(flavour, ()):
            node = self.nodes[i]
            if not node.schedulable or node.name in avoid or node.name in exclude:
                continue
            if node.spare and not spares and node.block != restart_block:
                continue
            fits = len(self.free[i][flavour]) // per_pod
            if fits:
                candidates.append(i)
                slots += fits
        if slots < pods:
            return None
        level = request.topology_level
        if level is not None and level < TopologyLevel.CLUSTER:
            domains: dict[str, list[int]] = {}
            for i in candidates:
                domains.setdefault(_domain(self.nodes[i], level), []).append(i)
            for members in domains.values():
                found = self._fill(members, pods, per_pod, flavour)
                if found is not None:
                    return found
            if request.topology_required:
                return None
        return self._fill(candidates, pods, per_pod, flavour)

    def _fill(self, members: list[int], pods: int, per_pod: int, flavour: str) -> Placement | None:
        chosen: list[PodPlacement] = []
        for i in members:
            units = self.free[i][flavour]
            k = min(pods - len(chosen), len(units) // per_pod)
            for p in range(k):
                chosen.append(PodPlacement(self.nodes[i].name, tuple(units[p * per_pod:(p + 1) * per_pod])))
            if len(chosen) == pods:
                return Placement(flavour, tuple(chosen))
        return None


def _domain(node: NodeState, level: TopologyLevel) -> str:
    if level is TopologyLevel.NODE:
        return node.name
    if level is TopologyLevel.LEAF:
        return node.leaf
    return node.block


def placement_key(pending: PendingJob, flavour: str) -> tuple[object, ...]:
    """Jobs with equal keys place identically on the same free map: a failed fit need not be tried twice."""
    return (pending.request.shape, flavour, pending.restart_block, pending.avoid_nodes)
