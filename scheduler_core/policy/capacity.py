"""The cycle's working copy of the cluster: which units are free right now, with counts kept per node, leaf and block.

One ``Capacity`` is built per cycle from the immutable snapshot and then changed in place as the cycle admits
jobs, simulates preemptions and places reservations. Nothing here decides anything; it only answers "what is
free where" in O(1) or O(blocks), which is what makes a 2,000-job cycle fit in milliseconds:

* each (node, flavour) keeps its free units as an int bit mask and a count;
* nodes sit in buckets by free count (small-job nodes apart), so best fit for a single pod is a bucket scan;
* per block and leaf: free units and fully free nodes, so a gang skips hopeless blocks without looking inside.

Hot spares and unschedulable (not ``READY``) nodes are counted apart: spares are the last choice of any
placement, and free units on unhealthy nodes only serve to say ``NodeUnhealthy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from ..model.flavours import FLAVOURS
from ..model.job import TopologyLevel
from .snapshot import JobRequest, NodeState, Placement, RunningJob


@dataclass(slots=True)
class Hold:
    """A reservation's claim on one node: from ``start_at`` it needs units that are free by then.

    ``slack`` is how many of the node's units free at ``start_at`` the reservation does not need; a job that
    would still be running at ``start_at`` may take at most that many (and uses them up)."""

    job_id: str
    start_at: float
    slack: int


def blocks_may_be_limited(request: JobRequest) -> bool:
    """Whether a pool may cap the blocks ``request`` spreads over (:meth:`Pool.max_blocks`): only a ``preferred``
    topology below the whole cluster. Told by the request alone, so a pass answers every other job at once."""
    level = request.topology_level
    return level is not None and level < TopologyLevel.CLUSTER and not request.topology_required


class Pool:
    """All nodes that carry one flavour; ``j`` is a node's position in ``members`` (name order)."""

    __slots__ = ("flavour", "per_gpu", "members", "pos", "cap", "mask", "free", "usable", "spare", "small",
                 "block", "leaf", "blocks", "leaves", "whole", "whole_spare", "whole_leaf", "bfree",
                 "bfree_spare", "has_spare", "free_units", "free_spare", "free_unusable", "whole_unusable", "max_cap",
                 "uniform_cap", "buckets", "holds", "_block_pods", "broken")

    def __init__(self, flavour: str, nodes: Sequence[NodeState], members: list[int], block_ids: Sequence[int],
                 leaf_ids: Sequence[int]) -> None:
        self.flavour = flavour
        known = FLAVOURS.get(flavour)
        self.per_gpu = known.units_per_gpu if known else 1
        self.members = members
        self.pos = {i: j for j, i in enumerate(members)}
        self.cap = [nodes[i].capacity[flavour] for i in members]
        self.mask = [(1 << c) - 1 for c in self.cap]
        self.free = list(self.cap)
        self.usable = [nodes[i].schedulable for i in members]
        self.spare = [nodes[i].spare for i in members]
        self.small = [nodes[i].small_jobs for i in members]
        self.block = [block_ids[i] for i in members]
        self.leaf = [leaf_ids[i] for i in members]
        self.blocks: dict[int, list[int]] = {}
        self.leaves: dict[int, list[int]] = {}
        for j in range(len(members)):
            self.blocks.setdefault(self.block[j], []).append(j)
            self.leaves.setdefault(self.leaf[j], []).append(j)
        self.has_spare = any(self.spare)
        self.max_cap = max(self.cap, default=0)
        caps = set(self.cap)
        self.uniform_cap = caps.pop() if len(caps) == 1 else None
        self.holds: dict[int, list[Hold]] = {}
        self._block_pods: dict[int, int] = {}
        #: Blocks with a node that is not ready: none of them is whole for a block-sized gang before a repair.
        self.broken = frozenset(self.block[j] for j in range(len(members)) if not self.usable[j])
        self.recount()

    def copy(self) -> Pool:
        """A working copy for one pass: free units and their aggregates are its own; the pool's fixed shape
        (members, capacities, health, topology) is shared, and no pass changes it."""
        clone = Pool.__new__(Pool)
        for name in _POOL_SHARED:
            setattr(clone, name, getattr(self, name))
        clone.mask = list(self.mask)
        clone.free = list(self.free)
        clone.whole = dict(self.whole)
        clone.whole_spare = dict(self.whole_spare)
        clone.whole_leaf = dict(self.whole_leaf)
        clone.bfree = dict(self.bfree)
        clone.bfree_spare = dict(self.bfree_spare)
        clone.free_units, clone.free_spare = self.free_units, self.free_spare
        clone.free_unusable, clone.whole_unusable = self.free_unusable, self.whole_unusable
        clone.buckets = [[set(bucket) for bucket in group] for group in self.buckets]
        clone.holds = {}
        return clone

    def pods_in_block(self, b: int, units_per_pod: int) -> int:
        """Pods of ``units_per_pod`` units block ``b`` holds when every node of it (spares included) is free."""
        return sum(self.cap[j] // units_per_pod for j in self.blocks[b])

    def block_pods(self, units_per_pod: int) -> int:
        """Pods the largest block holds (``pods_in_block``): how many blocks a gang needs at the least is
        ``ceil(pods / block_pods)``."""
        hit = self._block_pods.get(units_per_pod)
        if hit is None:
            hit = self._block_pods[units_per_pod] = max(
                (self.pods_in_block(b, units_per_pod) for b in self.blocks), default=0)
        return hit

    def max_blocks(self, request: JobRequest) -> int | None:
        """The most blocks a ``preferred``-topology gang as large as a block or larger may spread over once
        widened: the fewest it could ever need (a 256-GPU job one block, a 1,024-GPU job four on the reference
        cluster). Such a gang fills whole blocks, so a spread would send all of its collectives over the spine
        for its whole run; a smaller gang may still spread after its bounded wait. ``None``: no limit."""
        if not blocks_may_be_limited(request) or not self.fills_blocks(request):
            return None
        return -(-request.pods // self.block_pods(request.units_per_pod))

    def fills_blocks(self, request: JobRequest) -> bool:
        """A gang at least as large as a block, whatever its topology: it needs whole blocks (or most of
        several), which small jobs fragment."""
        per_block = self.block_pods(request.units_per_pod)
        return request.pods > 1 and 0 < per_block <= request.pods

    def block_limit(self, request: JobRequest, extra: int | None) -> int | None:
        """``max_blocks`` plus ``extra`` blocks (``PlaceContext.block_cap``); ``None``: no limit."""
        fewest = self.max_blocks(request)
        return None if fewest is None or extra is None else fewest + extra

    def recount(self) -> None:
        """Rebuild every aggregate from the masks (once, after the running jobs are laid down)."""
        self.free = free_list = [mask.bit_count() for mask in self.mask]
        self.whole = whole = dict.fromkeys(self.blocks, 0)
        self.whole_spare = whole_spare = dict.fromkeys(self.blocks, 0)
        self.bfree = bfree = dict.fromkeys(self.blocks, 0)
        self.bfree_spare = bfree_spare = dict.fromkeys(self.blocks, 0)
        self.whole_leaf = whole_leaf = dict.fromkeys(self.leaves, 0)
        free_units = free_spare = free_unusable = whole_unusable = 0
        # buckets[0]: small-job nodes, buckets[1]: the rest; index = free units; only usable, non-spare nodes.
        buckets: list[list[set[int]]] = [[set() for _ in range(self.max_cap + 1)] for _ in range(2)]
        self.buckets = buckets
        cap, usable, spare, small, block, leaf = self.cap, self.usable, self.spare, self.small, self.block, self.leaf
        for j, free in enumerate(free_list):
            full = 1 if free == cap[j] else 0
            if not usable[j]:
                free_unusable += free
                whole_unusable += full
            elif spare[j]:
                free_spare += free
                bfree_spare[block[j]] += free
                whole_spare[block[j]] += full
            else:
                free_units += free
                bfree[block[j]] += free
                whole[block[j]] += full
                whole_leaf[leaf[j]] += full
                buckets[0 if small[j] else 1][free].add(j)
        self.free_units, self.free_spare = free_units, free_spare
        self.free_unusable, self.whole_unusable = free_unusable, whole_unusable

    # -- bookkeeping -------------------------------------------------------------------------------------------

    def _count(self, j: int, sign: int) -> None:
        """Add (+1) or remove (-1) node ``j``'s current free units from every aggregate."""
        free = self.free[j]
        whole = 1 if free == self.cap[j] else 0
        if not self.usable[j]:
            self.free_unusable += sign * free
            self.whole_unusable += sign * whole
            return
        b = self.block[j]
        if self.spare[j]:
            self.free_spare += sign * free
            self.bfree_spare[b] += sign * free
            self.whole_spare[b] += sign * whole
            return
        self.free_units += sign * free
        self.bfree[b] += sign * free
        self.whole[b] += sign * whole
        self.whole_leaf[self.leaf[j]] += sign * whole
        bucket = self.buckets[0 if self.small[j] else 1][free]
        if sign > 0:
            bucket.add(j)
        else:
            bucket.discard(j)

    def set_mask(self, j: int, mask: int) -> None:
        self._count(j, -1)
        self.mask[j] = mask
        self.free[j] = mask.bit_count()
        self._count(j, +1)

    def take(self, j: int, bits: int) -> None:
        self.set_mask(j, self.mask[j] & ~bits)

    def give(self, j: int, bits: int) -> None:
        self.set_mask(j, (self.mask[j] | bits) & ((1 << self.cap[j]) - 1))

    # -- queries -----------------------------------------------------------------------------------------------

    def units_free(self, j: int, mask: int | None = None) -> list[int]:
        if mask is None:
            mask = self.mask[j]
        return [u for u in range(self.cap[j]) if mask >> u & 1]

    def pick_units(self, j: int, count: int, mask: int | None = None) -> tuple[int, ...]:
        """``count`` free units of node ``j`` (of ``mask`` if given). MIG slices by geometry: the GPU with the
        fewest free slices that still holds the pod (best fit, so whole GPUs stay whole), else as few GPUs as
        possible. Whole GPUs: the lowest free indices (NVSwitch makes every set equal)."""
        free = self.units_free(j, mask)
        if self.per_gpu <= 1 or count >= len(free):
            return tuple(free[:count])
        by_gpu: dict[int, list[int]] = {}
        for unit in free:
            by_gpu.setdefault(unit // self.per_gpu, []).append(unit)
        fitting = [(len(units), gpu) for gpu, units in by_gpu.items() if len(units) >= count]
        if fitting:
            return tuple(by_gpu[min(fitting)[1]][:count])
        chosen: list[int] = []
        for _, gpu in sorted(((-len(units), gpu) for gpu, units in by_gpu.items())):
            chosen.extend(by_gpu[gpu][:count - len(chosen)])
            if len(chosen) == count:
                break
        return tuple(sorted(chosen))

    def hold_room(self, j: int, end: float) -> int:
        """Units of node ``j`` a job ending at ``end`` may take without delaying a reservation."""
        free = self.free[j]
        holds = self.holds.get(j)
        if holds:
            for hold in holds:
                if end > hold.start_at and hold.slack < free:
                    free = max(hold.slack, 0)
        return free

    def consume_holds(self, j: int, units: int, end: float) -> None:
        holds = self.holds.get(j)
        if holds:
            for hold in holds:
                if end > hold.start_at:
                    hold.slack -= units

    def blocking_hold(self, j: int, units: int, end: float) -> Hold | None:
        for hold in self.holds.get(j, ()):
            if end > hold.start_at and units > hold.slack:
                return hold
        return None


#: What a pass never changes in a pool: shared by its working copies (``_block_pods`` is a pure cache).
_POOL_SHARED = ("flavour", "per_gpu", "members", "pos", "cap", "usable", "spare", "small", "block", "leaf",
                "blocks", "leaves", "has_spare", "max_cap", "uniform_cap", "_block_pods", "broken")


#: Unit tuples → bit masks. Placements repeat a handful of unit sets ((0..7), (0,), (1, 2)…); a pure function
#: of its key, so sharing it between cycles changes nothing but the time.
_BITS: dict[tuple[int, ...], int] = {}


class Capacity:
    """Free units of every flavour on every node, and free CPUs and memory per node."""

    def __init__(self, nodes: Iterable[NodeState], running: Iterable[RunningJob]) -> None:
        self.nodes: list[NodeState] = sorted(nodes, key=lambda n: n.name)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.block_names = sorted({node.block for node in self.nodes})
        block_id = {name: b for b, name in enumerate(self.block_names)}
        self.leaf_names = sorted({(node.block, node.leaf) for node in self.nodes})
        leaf_id = {name: k for k, name in enumerate(self.leaf_names)}
        self.block_of = [block_id[node.block] for node in self.nodes]
        self.leaf_of = [leaf_id[(node.block, node.leaf)] for node in self.nodes]
        self.free_cpu = [node.cpus for node in self.nodes]
        self.free_mem = [node.memory_gb for node in self.nodes]
        members: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for flavour, count in node.capacity.items():
                if count > 0:
                    members.setdefault(flavour, []).append(i)
        self.pools = {flavour: Pool(flavour, self.nodes, idx, self.block_of, self.leaf_of)
                      for flavour, idx in sorted(members.items())}
        self._bits: dict[int, tuple[Placement, list[tuple[int, int, int, tuple[int, ...]]]]] = {}
        for job in running:
            pool = self.pools.get(job.placement.flavour)
            if pool is None:
                continue
            request = job.request
            for i, j, bits, _ in self.pod_bits(job.placement):
                pool.mask[j] &= ~bits
                self.free_cpu[i] -= request.cpus_per_pod
                self.free_mem[i] -= request.memory_gb_per_pod
        for pool in self.pools.values():
            pool.recount()

    def copy(self) -> Capacity:
        """A working copy for one pass (see ``Pool.copy``); the memo of placements' unit bits comes along."""
        clone = Capacity.__new__(Capacity)
        clone.nodes, clone.index, clone.block_names, clone.leaf_names = (
            self.nodes, self.index, self.block_names, self.leaf_names)
        clone.block_of, clone.leaf_of = self.block_of, self.leaf_of
        clone.free_cpu = list(self.free_cpu)
        clone.free_mem = list(self.free_mem)
        clone.pools = {flavour: pool.copy() for flavour, pool in self.pools.items()}
        clone._bits = dict(self._bits)
        return clone

    def forget(self, placement: Placement) -> None:
        """Drop ``placement`` from the memo (a carried index forgets the jobs that left)."""
        self._bits.pop(id(placement), None)

    def pod_bits(self, placement: Placement) -> list[tuple[int, int, int, tuple[int, ...]]]:
        """(global node, local node, unit bits, units) per pod of ``placement`` that lands on a known node.

        Memoised per placement object for the cycle (the entry keeps the object alive, so its id is not
        reused): a running job is looked at by the free map, the timeline and the victim search."""
        hit = self._bits.get(id(placement))
        if hit is not None and hit[0] is placement:
            return hit[1]
        out = self._pod_bits(placement)
        self._bits[id(placement)] = (placement, out)
        return out

    def _pod_bits(self, placement: Placement) -> list[tuple[int, int, int, tuple[int, ...]]]:
        pool = self.pools.get(placement.flavour)
        out: list[tuple[int, int, int, tuple[int, ...]]] = []
        if pool is None:
            return out
        for pod in placement.pods:
            i = self.index.get(pod.node)
            if i is None:
                continue
            j = pool.pos.get(i)
            if j is None:
                continue
            bits = _BITS.get(pod.units)
            if bits is None:
                bits = 0
                for unit in pod.units:
                    if 0 <= unit < 64:
                        bits |= 1 << unit
                if len(_BITS) < 4096:
                    _BITS[pod.units] = bits
            out.append((i, j, bits & ((1 << pool.cap[j]) - 1), pod.units))
        return out

    def occupy(self, request: JobRequest, placement: Placement) -> None:
        pool = self.pools.get(placement.flavour)
        if pool is None:
            return
        for i, j, bits, _ in self.pod_bits(placement):
            pool.take(j, bits)
            self.free_cpu[i] -= request.cpus_per_pod
            self.free_mem[i] -= request.memory_gb_per_pod

    def release(self, request: JobRequest, placement: Placement) -> None:
        pool = self.pools.get(placement.flavour)
        if pool is None:
            return
        for i, j, bits, _ in self.pod_bits(placement):
            pool.give(j, bits)
            self.free_cpu[i] += request.cpus_per_pod
            self.free_mem[i] += request.memory_gb_per_pod
