"""What a placement may use for each job this pass: the nodes it keeps off, how far it may spread over the
topology and from when (``PlaceContext``). Every stage asks; the block cap is decided once per job per pass."""

from __future__ import annotations

from collections.abc import Callable

from ..model.job import PriorityClass, TopologyLevel
from .capacity import Pool, blocks_may_be_limited
from .ordering import waited_long
from .placement import PlaceContext
from .reservation import job_end
from .snapshot import JobRequest, PendingJob
from .working_copy import WorkingCopy


class JobContexts:
    """Each job's :class:`PlaceContext` and topology windows, on the pass's working copy."""

    def __init__(self, work: WorkingCopy) -> None:
        self.work = work
        self.config = work.config
        self.now = work.now
        self._block_caps: dict[str, int | None] = {}
        self._unmovable: dict[tuple[str, int], dict[int, float]] = {}

    def context(self, pending: PendingJob) -> PlaceContext:
        request = pending.request
        cap = self.work.cap
        avoid = self.avoid(pending)
        restart = None
        if pending.restart_block is not None and pending.restart_block in cap.block_names:
            restart = cap.block_names.index(pending.restart_block)
        return PlaceContext(end=self.now + request.time_limit_s, avoid=avoid, restart_block=restart,
                            widened=self.widened(pending), block_cap=self.block_cap(pending))

    def avoid(self, pending: PendingJob) -> frozenset[int]:
        """The nodes the job keeps off, for ``avoid_nodes_for_s`` after it was requeued (``PendingJob``)."""
        if not pending.avoid_nodes or self.now >= self.avoid_until(pending):
            return frozenset()
        index = self.work.cap.index
        return frozenset(index[n] for n in pending.avoid_nodes if n in index)

    def avoid_until(self, pending: PendingJob) -> float:
        return pending.queued_at + self.config.avoid_nodes_for_s

    def block_cap(self, pending: PendingJob) -> int | None:
        """How many blocks beyond the fewest a block-sized ``preferred`` gang may take (``PlaceContext``): none
        for ``topology_cap_wait_s`` from ``PendingJob.block_cap_since`` while that compact shape is in reach by
        then, one while it is not, any once the window has passed. 0 for any other job: the cap does not apply,
        and its equivalence class must not split on it. Decided once per job per cycle (it is asked often)."""
        request = pending.request
        if not blocks_may_be_limited(request):
            return 0
        if request.id in self._block_caps:
            return self._block_caps[request.id]
        cap: int | None
        if not self.any_pool(request, lambda pool: pool.max_blocks(request) is not None):
            cap = 0
        elif self.now - pending.block_cap_since(self.now) >= self.config.topology_cap_wait_s:
            cap = None
        else:
            cap = 0 if self._compact_in_reach(pending) else 1
        self._block_caps[request.id] = cap
        return cap

    def any_pool(self, request: JobRequest, test: Callable[[Pool], bool]) -> bool:
        """Whether ``test`` holds for the pool of some flavour the job may use (a ``preferred`` gang as large as
        a block: ``Pool.max_blocks``; any gang as large as one: ``Pool.fills_blocks``)."""
        pools = self.work.cap.pools
        return any(test(pool) for f in request.flavours if (pool := pools.get(f)) is not None)

    def _compact_in_reach(self, pending: PendingJob) -> bool:
        """Whether waiting out the window can give the gang its compact shape: enough blocks can be whole by the
        window's end and hold it (``_clearable_pods``: moves clear what they may shift, time limits end the rest), or the
        timeline has the shape by then. Otherwise waiting would only idle the GPUs the gang could run on, and it
        may take one block more at once: every block is short a node in repair or holds work no move shifts
        past the window (Tuesday seed 24, docs/scheduling.md). A gang broken by a failure counts the timeline
        alone (the failed node keeps one of its blocks short once the block's spare is taken), and one of a
        single block keeps its window."""
        request = pending.request
        deadline = pending.block_cap_since(self.now) + self.config.topology_cap_wait_s
        avoid = self.avoid(pending)
        for flavour in request.flavours:
            pool = self.work.cap.pools.get(flavour)
            if pool is None:
                continue
            fewest = pool.max_blocks(request)
            if fewest is None:
                return True
            if pending.restart_block is None:
                if self._clearable_pods(pool, request, deadline, fewest) >= request.pods:
                    return True
            elif fewest < 2:
                return True
            slot = self.work.timeline.earliest(request, flavour, not_before=self.now, widen_at=None, avoid=avoid,
                                               block_cap=0)
            if slot is not None and slot.start <= deadline:
                return True
        return False

    def _clearable_pods(self, pool: Pool, request: JobRequest, deadline: float, fewest: int) -> int:
        """Pods of ``request`` the ``fewest`` largest blocks of ``pool`` that can be whole by ``deadline`` hold: no
        node out, and every job on them either one the move stage may shift for it (``Preemptor._movable``:
        preemptible, not critical, at most half the gang's size; none when moves are off) or due to end by then
        (its time limit, a promise). Counted in pods, not blocks: a smaller block, whole, does not hold the gang's
        share (a 3-node gang on blocks of 3, 2 and 2 nodes, the 3-node one with a node out, was told its compact
        shape was in reach and never planned: Hypothesis, docs/BENCHMARKS.md, session 38)."""
        movable = request.units // 2 if self.config.migrate_max_moves > 0 else -1
        ends = self._unmovable_ends(pool, movable)
        holds = sorted((pool.pods_in_block(b, request.units_per_pod) for b in pool.blocks
                        if b not in pool.broken and ends.get(b, deadline) <= deadline), reverse=True)
        return sum(holds[:fewest])

    def _unmovable_ends(self, pool: Pool, movable: int) -> dict[int, float]:
        """Per block of ``pool``: the latest promised end (``job_end``) of the jobs on it that a gang moving jobs
        of at most ``movable`` units may not move (larger ones, non-preemptible or critical work); blocks with
        none are absent. Worked out once per pass, flavour and ``movable``."""
        key = (pool.flavour, movable)
        hit = self._unmovable.get(key)
        if hit is not None:
            return hit
        cap, critical = self.work.cap, PriorityClass.CRITICAL
        ends: dict[int, float] = {}
        for job in self.work.running:
            other = job.request
            if (job.placement.flavour != pool.flavour
                    or (other.units <= movable and other.preemptible and other.priority_class is not critical)):
                continue
            end = job_end(job, self.now)
            for _, j, _, _ in cap.pod_bits(job.placement):
                b = pool.block[j]
                if b not in ends or end > ends[b]:
                    ends[b] = end
        self._unmovable[key] = ends
        return ends

    def widened(self, pending: PendingJob) -> bool:
        """Whether a ``preferred`` job may spread beyond its level's domain now (it has waited long enough)."""
        request = pending.request
        if request.topology_level is None or request.topology_level >= TopologyLevel.CLUSTER:
            return True
        if request.topology_required:
            return False
        return self.now - pending.queued_at >= self.config.topology_widen_after_s

    def starving_gang(self, pending: PendingJob) -> bool:
        """A preemptible job larger than small work that has waited ``starvation_after_s``."""
        request = pending.request
        return (request.preemptible and request.units > self.config.small_job_max_units
                and waited_long(pending, self.now, self.config))

    def nominal_first(self, pending: PendingJob) -> bool:
        """Whether quota offers the job its team's nominal, taken from the team's newer preemptible jobs, before a
        borrower's place (``Nominator.quota``): a starving gang (``starving_gang``), and a preemptible gang as
        large as a block from its first pass. Admitted as a borrower, such a gang is what a lender's reclaim
        stops whole, its GPUs idle while it reassembles (the Tuesday's morning 1,024-GPU gang); as nominal, the
        team's small jobs are the borrowers instead, and a reclaim stops one near its size. Over Tuesday seeds
        0–39: idle GPU-hours 1,270 → 1,242, in-quota p99 136 → 120 s (docs/BENCHMARKS.md, session 40)."""
        return self.starving_gang(pending) or (pending.request.preemptible and self._fills_a_block(pending.request))

    def drains(self, pending: PendingJob) -> bool:
        """A starving gang (``starving_gang``) as large as a block (``Pool.fills_blocks``): held back by quota, it
        may hold its cohort's quota from now (``Reserver.after_quota``)."""
        return self.starving_gang(pending) and self._fills_a_block(pending.request)

    def _fills_a_block(self, request: JobRequest) -> bool:
        return self.any_pool(request, lambda pool: pool.fills_blocks(request))

    def widen_at(self, pending: PendingJob) -> float | None:
        """When a ``preferred`` job may spread (None: ``required``, never)."""
        request = pending.request
        if request.topology_required:
            return None
        return pending.queued_at + self.config.topology_widen_after_s
