"""Gang placement: every pod of a job on exact units, or nothing at all.

Rules (DESIGN §3.2, step 3):

* **Topology.** A job's pods share one domain of its level. ``required`` never leaves that level; ``preferred``
  and no-topology jobs try the smallest domain first (node, leaf, block) and may spread over blocks only once
  widened (``preferred`` after ``topology_widen_after_s`` of waiting; no topology at once), then over as few
  blocks as possible. A ``preferred`` gang as large as a block never spans more blocks than the fewest it could
  ever need (``Pool.max_blocks``: a 256-GPU job stays in one block, a 1,024-GPU job within four) for
  ``topology_cap_wait_s`` (2 h) — long enough for moves and reservations to open whole blocks, short of leaving
  a gang idle for the 48 hours a failed node takes to repair when no whole block is left — and one that can
  never fit a single block spreads at once: waiting for one buys nothing.
* **Best fit.** Among the domains that hold the job, the one with the least free capacity that still does, so
  emptier blocks stay whole for the next big job. A single pod goes to the node with the fewest free units
  that fit; one that takes a whole node takes it from a block with a node out (``Pool.broken``), which no
  block-sized gang can have before the repair, when there is one.
* **Small work together.** Single-node jobs, notebooks and trials try the small-job blocks first; larger gangs
  try them last.
* **Spares last.** Multi-node gangs use a hot spare only when they cannot fit otherwise; single-node work never
  does. A gang restarted after a failure (``restart_block``) takes its own block's spare first.
* **MIG by geometry.** Slices of one pod go on the GPU with the fewest free slices that still holds them.
* **Reservations.** A job that would still run when a reservation starts may use that reservation's nodes only
  for units the reservation does not need (``Hold.slack``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from enum import IntEnum

from ..model.durations import format_duration
from ..model.job import JobKind, TopologyLevel
from .capacity import Capacity, Hold, Pool
from .decisions import Reason
from .record import record
from .snapshot import JobRequest, Placement, PodPlacement


class Fit(IntEnum):
    """How well a job fits one flavour this cycle; the order is the preference (Kueue's shape)."""

    NO_FIT = 0      # not now, not even by preempting
    PREEMPT = 1     # fits once chosen victims leave
    DEFERRED = 2    # fits the free units, but only by delaying a reservation: wait for it
    FIT = 3         # fits now


@record
class PlaceContext:
    """What a placement may use besides the job's shape.

    ``end``: when the job would end if started now (checked against reservations). ``avoid``: node indices it
    must not use. ``widened``: a ``preferred`` job may spread over blocks. ``within_block``: only this block
    (the preemption search, one domain at a time)."""

    end: float
    avoid: frozenset[int] = frozenset()
    restart_block: int | None = None
    widened: bool = True
    ignore_holds: bool = False
    within_block: int | None = None
    #: A ``preferred`` gang as large as a block keeps to the fewest blocks it could need (``Pool.max_blocks``)
    #: plus this many; ``None``: no cap (it has waited ``topology_cap_wait_s``).
    block_cap: int | None = 0


@record
class Miss:
    """Why a job does not fit a flavour now: the reason users see, and whether it can ever fit here."""

    fit: Fit
    reason: Reason
    message: str
    never: bool = False
    hold: Hold | None = None


_LEVEL_NAME = {TopologyLevel.NODE: "node", TopologyLevel.LEAF: "leaf", TopologyLevel.BLOCK: "block",
               TopologyLevel.CLUSTER: "cluster"}


def is_small(request: JobRequest, small_job_max_units: int) -> bool:
    """Single-node jobs, notebooks, trials and anything of at most ``small_job_max_units`` units."""
    return (request.pods == 1 or request.kind is not JobKind.BATCH
            or request.units <= small_job_max_units)


class Counts:
    """Per block, with spares or without: the nodes that can take pods of one job now and how many each, and
    their sum. Every domain level and the spread over blocks read the same per-node counts, so one ``place``
    counts each block once instead of once per level and twice more across blocks; a victim search keeps one
    for its whole run and forgets only the blocks whose nodes a victim's leaving or return changes
    (``forget_block``). Valid only while the job, its ``PlaceContext`` and the nodes of a remembered block
    stay as they were: a cache of pure counts, so it changes no decision."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[tuple[int, bool], tuple[list[tuple[int, int]], int]] = {}

    def forget_block(self, b: int) -> None:
        self.rows.pop((b, False), None)
        self.rows.pop((b, True), None)


def place(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
          counts: Counts | None = None) -> Placement | None:
    """Exact units for every pod of ``request`` on ``pool``'s nodes, or ``None``. Changes nothing.
    ``counts``: a victim search's cache of per-block counts for this job and context (see ``Counts``)."""
    found = _search(_place, cap, pool, request, ctx, small, counts)
    return found if isinstance(found, Placement) else None


def fits(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
         counts: Counts | None = None) -> bool:
    """``place(...) is not None``, without choosing the nodes and units: what a victim search asks for every
    candidate set."""
    return bool(_search(_fits, cap, pool, request, ctx, small, counts))


_Attempt = Callable[[Capacity, Pool, JobRequest, PlaceContext, bool, bool, Counts], Placement | bool | None]


def _search(attempt: _Attempt, cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
            counts: Counts | None) -> Placement | bool | None:
    """What ``place`` and ``fits`` share: a pod larger than any node never fits; a gang restarted after a failure
    tries its old block first, spares first, then anywhere."""
    g = request.units_per_pod
    if g <= 0 or g > pool.max_cap:
        return None
    if counts is None:
        counts = Counts()
    if ctx.restart_block is not None and ctx.within_block is None and ctx.restart_block in pool.blocks:
        found = attempt(cap, pool, request, replace(ctx, within_block=ctx.restart_block), small, True, counts)
        if found:
            return found
    return attempt(cap, pool, request, ctx, small, False, counts)


def occupy(cap: Capacity, pool: Pool, request: JobRequest, placement: Placement, end: float) -> None:
    """Apply a placement to the working copy and use up the reservation slack it takes."""
    cap.occupy(request, placement)
    for pod in placement.pods:
        pool.consume_holds(pool.pos[cap.index[pod.node]], len(pod.units), end)


def _single_node(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext,
                 spares_first: bool) -> int | None:
    if ctx.within_block is None:
        return _best_single_node(cap, pool, request, ctx)
    return _best_node_in(cap, pool, request, ctx, pool.blocks.get(ctx.within_block, []), spares_first)


def _place(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
           spares_first: bool, counts: Counts) -> Placement | None:
    if request.pods == 1:
        j = _single_node(cap, pool, request, ctx, spares_first)
        return None if j is None else _build(cap, pool, request, [(j, 1)])
    chosen = _gang(cap, pool, request, ctx, small, spares_first, counts, False)
    return None if chosen is None else _build(cap, pool, request, chosen)


def _fits(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
          spares_first: bool, counts: Counts) -> bool:
    if request.pods == 1:
        return _single_node(cap, pool, request, ctx, spares_first) is not None
    return _gang(cap, pool, request, ctx, small, spares_first, counts, True) is not None


# -- single pods -----------------------------------------------------------------------------------------------

def _node_ok(cap: Capacity, pool: Pool, j: int, request: JobRequest, ctx: PlaceContext) -> bool:
    i = pool.members[j]
    if i in ctx.avoid:
        return False
    if cap.free_cpu[i] < request.cpus_per_pod or cap.free_mem[i] < request.memory_gb_per_pod:
        return False
    return ctx.ignore_holds or pool.hold_room(j, ctx.end) >= request.units_per_pod


def _best_single_node(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext) -> int | None:
    """Small-job nodes first, then the rest; within each, the fewest free units that fit (best fit)."""
    g = request.units_per_pod
    for group in pool.buckets:
        for count in range(g, len(group)):
            bucket = group[count]
            if not bucket:
                continue
            if count == pool.uniform_cap and len(bucket) > 1 and pool.broken:
                # A whole node: from a block that cannot be whole anyway (a node out), so the others stay whole.
                broken, block = pool.broken, pool.block
                for j in sorted(bucket, key=lambda j: (block[j] not in broken, j)):
                    if _node_ok(cap, pool, j, request, ctx):
                        return j
                continue
            first = min(bucket)
            if _node_ok(cap, pool, first, request, ctx):
                return first
            if len(bucket) > 1:
                for j in sorted(bucket):
                    if j != first and _node_ok(cap, pool, j, request, ctx):
                        return j
    return None


def _best_node_in(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, nodes: list[int],
                  spares_first: bool) -> int | None:
    best: tuple[int, int, int] | None = None
    for j in nodes:
        if not pool.usable[j] or pool.free[j] < request.units_per_pod:
            continue
        if pool.spare[j] and not spares_first:
            continue
        if not _node_ok(cap, pool, j, request, ctx):
            continue
        rank = (0 if pool.spare[j] == spares_first else 1, pool.free[j], j)
        if best is None or rank < best:
            best = rank
    return None if best is None else best[2]


# -- gangs -----------------------------------------------------------------------------------------------------

def _levels(request: JobRequest, ctx: PlaceContext) -> tuple[list[TopologyLevel], bool]:
    """Domain levels to try, smallest first, and whether the job may spread over blocks."""
    level = request.topology_level
    inner = [TopologyLevel.NODE, TopologyLevel.LEAF, TopologyLevel.BLOCK]
    if level is None or level >= TopologyLevel.CLUSTER:
        return inner, True
    levels = [lvl for lvl in inner if lvl <= level]
    return levels, (not request.topology_required) and ctx.widened


def _podcap(cap: Capacity, pool: Pool, j: int, request: JobRequest, ctx: PlaceContext, spares: bool) -> int:
    """How many of the job's pods node ``j`` can take now."""
    if not pool.usable[j] or (pool.spare[j] and not spares):
        return 0
    i = pool.members[j]
    if i in ctx.avoid:
        return 0
    free = pool.free[j] if ctx.ignore_holds else pool.hold_room(j, ctx.end)
    count = free // request.units_per_pod
    if count and request.cpus_per_pod:
        count = min(count, cap.free_cpu[i] // request.cpus_per_pod)
    if count and request.memory_gb_per_pod:
        count = min(count, cap.free_mem[i] // request.memory_gb_per_pod)
    return count


def _block_caps(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, b: int, spares: bool,
                counts: Counts) -> tuple[list[tuple[int, int]], int]:
    """(node, pods it can take) for the nodes of block ``b`` that can take any (``_podcap`` of each, in node
    order), and their sum; from ``counts`` when it already has them."""
    key = (b, spares)
    hit = counts.rows.get(key)
    if hit is not None:
        return hit
    g, cpus, mem = request.units_per_pod, request.cpus_per_pod, request.memory_gb_per_pod
    usable, spare, members, free, holds = pool.usable, pool.spare, pool.members, pool.free, pool.holds
    free_cpu, free_mem = cap.free_cpu, cap.free_mem
    avoid, ignore, end = ctx.avoid, ctx.ignore_holds, ctx.end
    caps: list[tuple[int, int]] = []
    total = 0
    for j in pool.blocks.get(b, ()):
        if not usable[j] or (spare[j] and not spares):
            continue
        i = members[j]
        if i in avoid:
            continue
        count = (free[j] if ignore or j not in holds else pool.hold_room(j, end)) // g
        if count and cpus:
            count = min(count, free_cpu[i] // cpus)
        if count and mem:
            count = min(count, free_mem[i] // mem)
        if count > 0:
            caps.append((j, count))
            total += count
    hit = counts.rows[key] = (caps, total)
    return hit


def _block_bound(pool: Pool, b: int, g: int, spares: bool) -> int:
    """An upper bound on the pods block ``b`` can take, from counts alone."""
    if pool.uniform_cap == g:
        return pool.whole[b] + (pool.whole_spare[b] if spares else 0)
    return (pool.bfree[b] + (pool.bfree_spare[b] if spares else 0)) // g


def _domain_rank(pool: Pool, first: int, small: bool) -> int:
    """0 for the domains this job should try first: small-job blocks for small work, the others for gangs."""
    return 0 if pool.small[first] == small else 1


def _gang(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
          spares_first: bool, counts: Counts, check: bool) -> list[tuple[int, int]] | None:
    """The nodes and pods on each, or ``None``. ``check``: only whether it fits; any list (maybe empty) for
    yes, without choosing the nodes."""
    levels, widen = _levels(request, ctx)
    limit = pool.block_limit(request, ctx.block_cap)
    if limit is not None and limit > 1:
        widen = True                     # it can never fit one block: waiting for one buys nothing
    if ctx.within_block is not None:
        widen = False
    passes = (True,) if spares_first else (False, True)
    for spares in passes:
        if spares and not spares_first and not pool.has_spare:
            break
        for level in levels:
            found = _one_domain(cap, pool, request, ctx, small, level, spares, spares_first, counts, check)
            if found is not None:
                return found
    if not widen:
        return None
    without = _across_blocks(cap, pool, request, ctx, small, False, limit, counts, check)
    if without is not None and (check or len({pool.block[j] for j, _ in without}) == 1):
        return without
    with_spares = _across_blocks(cap, pool, request, ctx, small, True, limit, counts, check) if pool.free_spare \
        else None
    if with_spares is None:
        return without
    if without is None:
        return with_spares
    blocks_without = len({pool.block[j] for j, _ in without})
    blocks_with = len({pool.block[j] for j, _ in with_spares})
    return with_spares if blocks_with < blocks_without else without


def _one_domain(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
                level: TopologyLevel, spares: bool, spares_first: bool, counts: Counts,
                check: bool) -> list[tuple[int, int]] | None:
    g, pods = request.units_per_pod, request.pods
    blocks = [ctx.within_block] if ctx.within_block is not None else sorted(pool.blocks)
    if level is TopologyLevel.NODE:
        if pods * g > pool.max_cap:
            return None
        best: tuple[int, int, int, int] | None = None
        for b in blocks:
            if _block_bound(pool, b, g, spares) < 1:
                continue
            for j, c in _block_caps(cap, pool, request, ctx, b, spares, counts)[0]:
                if c >= pods:        # so its free units are at least pods × g
                    if check:
                        return []
                    node_rank = (0 if pool.spare[j] == spares_first else 1, _domain_rank(pool, j, small),
                                 pool.free[j], j)
                    if best is None or node_rank < best:
                        best = node_rank
        return None if best is None else [(best[3], pods)]
    best_domain: tuple[tuple[int, int, int], list[tuple[int, int]]] | None = None
    for b in blocks:
        if _block_bound(pool, b, g, spares) < pods:
            continue
        caps, total = _block_caps(cap, pool, request, ctx, b, spares, counts)
        if total < pods:
            continue                 # no domain inside it can hold the job either
        domains: list[tuple[int, int, list[tuple[int, int]]]]
        if level is TopologyLevel.LEAF:
            # A leaf lies in one block, so its nodes here are all of ``pool.leaves[leaf]``.
            groups: dict[int, list[tuple[int, int]]] = {}
            for jc in caps:
                groups.setdefault(pool.leaf[jc[0]], []).append(jc)
            domains = [(key, pool.leaves[key][0], groups[key]) for key in sorted(groups)]
        else:
            domains = [(b, pool.blocks[b][0], caps)]
        for key, first, domain_caps in domains:
            if (level is TopologyLevel.LEAF and not spares and pool.uniform_cap == g
                    and pool.whole_leaf[key] < pods):
                continue
            domain_total = total if level is not TopologyLevel.LEAF else sum(c for _, c in domain_caps)
            if domain_total < pods:
                continue
            if check:
                return []
            rank = (_domain_rank(pool, first, small), domain_total, key)
            if best_domain is None or rank < best_domain[0]:
                best_domain = (rank, domain_caps)
    if best_domain is None:
        return None
    return _choose_nodes(pool, best_domain[1], pods, spares_first)


def _across_blocks(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool,
                   spares: bool, limit: int | None, counts: Counts, check: bool) -> list[tuple[int, int]] | None:
    """Spread over as few blocks as possible: the largest first, the last one by best fit; ``None`` if that
    takes more than ``limit`` blocks (taking the largest first is the fewest there can be). ``check``: ``[]``
    instead of the nodes."""
    g, pods = request.units_per_pod, request.pods
    table: list[tuple[int, int, int, list[tuple[int, int]]]] = []
    grand = 0
    for b in sorted(pool.blocks):
        if _block_bound(pool, b, g, spares) <= 0:
            continue
        caps, total = _block_caps(cap, pool, request, ctx, b, spares, counts)
        if total:
            table.append((_domain_rank(pool, pool.blocks[b][0], small), total, b, caps))
            grand += total
    if grand < pods:
        return None
    remaining = pods
    chosen: list[tuple[int, int]] = []
    available = sorted(table, key=lambda row: (row[0], -row[1], row[2]))
    used = 0
    while remaining > 0:
        used += 1
        if limit is not None and used > limit:
            return None
        fitting = [row for row in available if row[1] >= remaining]
        if fitting:
            if check:
                return chosen
            row = min(fitting, key=lambda r: (r[0], r[1], r[2]))
            chosen.extend(_choose_nodes(pool, row[3], remaining, False))
            break
        row = available.pop(0)
        if not check:
            chosen.extend(_choose_nodes(pool, row[3], row[1], False))
        remaining -= row[1]
    return chosen


def _choose_nodes(pool: Pool, caps: list[tuple[int, int]], pods: int,
                  spares_first: bool) -> list[tuple[int, int]]:
    """Nodes inside one domain: one node if one holds every pod (best fit), else as few leaves and nodes as
    possible; spares last (first for a restarted gang)."""
    def spare_rank(j: int) -> int:
        return 0 if pool.spare[j] == spares_first else 1

    single = [(spare_rank(j), pool.free[j], j) for j, c in caps if c >= pods]
    if single:
        return [(min(single)[2], pods)]
    leaf_total: dict[int, int] = {}
    for j, c in caps:
        leaf_total[pool.leaf[j]] = leaf_total.get(pool.leaf[j], 0) + c
    order = sorted(caps, key=lambda jc: (spare_rank(jc[0]), -leaf_total[pool.leaf[jc[0]]], pool.leaf[jc[0]],
                                         -jc[1], jc[0]))
    out: list[tuple[int, int]] = []
    left = pods
    for j, c in order:
        take = min(c, left)
        out.append((j, take))
        left -= take
        if left == 0:
            break
    return out


def _build(cap: Capacity, pool: Pool, request: JobRequest, chosen: list[tuple[int, int]]) -> Placement:
    g = request.units_per_pod
    pods: list[PodPlacement] = []
    for j, count in chosen:
        mask = pool.mask[j]
        name = cap.nodes[pool.members[j]].name
        for _ in range(count):
            units = pool.pick_units(j, g, mask)
            for unit in units:
                mask &= ~(1 << unit)
            pods.append(PodPlacement(node=name, units=units))
    return Placement(flavour=pool.flavour, pods=tuple(pods))


# -- why not ---------------------------------------------------------------------------------------------------

def domain_limit(pool: Pool, request: JobRequest) -> int:
    """The most pods of this shape one domain of the job's required level could ever hold (empty cluster)."""
    g = request.units_per_pod
    level = request.topology_level
    if level is None or not request.topology_required or level >= TopologyLevel.CLUSTER:
        return sum(c // g for c in pool.cap)
    if level is TopologyLevel.NODE:
        return pool.max_cap // g
    groups = pool.leaves if level is TopologyLevel.LEAF else pool.blocks
    return max((sum(pool.cap[j] // g for j in nodes) for nodes in groups.values()), default=0)


def explain(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, small: bool, now: float,
            widen_at: float | None) -> Miss:
    """Why ``request`` does not fit ``pool`` now (call only after ``place`` failed with ``ctx``)."""
    g, pods, flavour = request.units_per_pod, request.pods, pool.flavour
    if not ctx.ignore_holds:
        loose = place(cap, pool, request, replace(ctx, ignore_holds=True), small)
        if loose is not None:
            hold = None
            for pod in loose.pods:
                hold = pool.blocking_hold(pool.pos[cap.index[pod.node]], len(pod.units), ctx.end)
                if hold is not None:
                    break
            when = f" (starts in {format_duration(hold.start_at - now)})" if hold else ""
            who = hold.job_id if hold else "an earlier job"
            return Miss(Fit.DEFERRED, Reason.BEHIND_RESERVATION,
                        f"would delay the reservation of {who}{when}", hold=hold)
    shape = f"{pods} × {g} {flavour}" if pods > 1 else f"{g} {flavour}"
    if domain_limit(pool, request) < pods:
        level = request.topology_level or TopologyLevel.CLUSTER
        return Miss(Fit.NO_FIT, Reason.WAITING_FOR_TOPOLOGY,
                    f"can never fit: needs {shape} in one {_LEVEL_NAME[level]} (required), and no "
                    f"{_LEVEL_NAME[level]} of this cluster is that large", never=True)
    multi = pods > 1
    whole = pool.uniform_cap == g
    if whole:
        have = sum(pool.whole.values()) + (sum(pool.whole_spare.values()) if multi else 0)
        sick = pool.whole_unusable
    else:
        have = (pool.free_units + (pool.free_spare if multi else 0)) // g
        sick = pool.free_unusable // g
    free_units = pool.free_units + (pool.free_spare if multi else 0)
    if have >= pods:
        return Miss(Fit.NO_FIT, Reason.WAITING_FOR_TOPOLOGY,
                    _topology_message(cap, pool, request, ctx, now, widen_at, free_units))
    if have + sick >= pods:
        return Miss(Fit.NO_FIT, Reason.NODE_UNHEALTHY,
                    f"needs {shape}; enough are free only counting nodes that are not ready "
                    f"({pool.free_unusable:,} {flavour} free on unhealthy nodes)")
    unit = "whole nodes" if whole and multi else flavour
    return Miss(Fit.NO_FIT, Reason.WAITING_FOR_CAPACITY,
                f"needs {shape}; {have:,} {unit} free on schedulable nodes")


def _topology_message(cap: Capacity, pool: Pool, request: JobRequest, ctx: PlaceContext, now: float,
                      widen_at: float | None, free_units: int) -> str:
    g, pods, flavour = request.units_per_pod, request.pods, pool.flavour
    if pods == 1:
        most = max((count for group in pool.buckets for count in range(len(group)) if group[count]), default=0)
        return (f"needs {g} free {flavour} on one node; {free_units:,} free in all, at most {most} on any "
                f"schedulable node")
    level = request.topology_level
    if level is None or level >= TopologyLevel.CLUSTER:
        level = TopologyLevel.BLOCK
    how = "required" if request.topology_required else "preferred"
    spares = True
    limit = pool.block_limit(request, ctx.block_cap)
    if limit is not None and limit > 1:
        counts = sorted((sum(_podcap(cap, pool, j, request, ctx, spares) for j in nodes)
                         for nodes in pool.blocks.values()), reverse=True)
        unit = "whole free nodes" if pool.uniform_cap == g else f"pods of {g} {flavour}"
        return (f"needs {pods} {unit} in at most {limit} blocks, the fewest it fits ({how}: "
                f"{_LEVEL_NAME[request.topology_level or TopologyLevel.BLOCK]}); the {limit} largest free blocks "
                f"have {sum(counts[:limit])} ({free_units:,} {flavour} free in all)")
    if level is TopologyLevel.NODE:
        largest = max((_podcap(cap, pool, j, request, ctx, spares) for j in range(len(pool.members))), default=0)
    else:
        groups = pool.leaves if level is TopologyLevel.LEAF else pool.blocks
        largest = max((sum(_podcap(cap, pool, j, request, ctx, spares) for j in nodes)
                       for nodes in groups.values()), default=0)
    name = _LEVEL_NAME[level]
    if pool.uniform_cap == g:
        text = (f"needs {pods} whole free nodes in one {name} ({how}: {name}); the largest free {name} has "
                f"{largest} ({free_units:,} {flavour} free in all)")
    else:
        text = (f"needs {pods} × {g} {flavour} in one {name} ({how}: {name}); the largest free {name} holds "
                f"{largest} such pods ({free_units:,} {flavour} free in all)")
    if not request.topology_required and limit is None and widen_at is not None and widen_at > now:
        text += f"; may spread over blocks in {format_duration(widen_at - now)}"
    return text
