"""Preemption: whom to stop so a job fits, chosen by cost and simulated on the cycle's working copy.

Who may be a victim (DESIGN §3.2, step 5):

* only a job in a strictly lower band (critical > guaranteed > borrowed > scavenger), so jobs in one band
  never preempt each other; never a job already terminating; never a non-preemptible one (unless it is
  scavenger work, which anyone may stop);
* not a job admitted less than ``min_run_time_s`` ago, unless the preemptor is critical or the victim is
  scavenger work (no thrashing);
* never one that could in turn preempt the preemptor (no cycles);
* never the preemptor's own team's work (other than scavenger work): a team orders its own queue instead.

Victims are tried cheapest first — GPU-hours lost since their last checkpoint, then checkpoint cost, then gang
size, then priority (Kueue's shape with a cost instead of a priority). The search removes candidates from the
working copy until the job fits, then adds back, most expensive first, every victim that turns out not to be
needed ("fill back"), and finally restores the working copy: nothing is changed until the caller applies it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

from ..model.flavours import FLAVOURS
from ..model.job import PriorityClass, TopologyLevel
from .capacity import Capacity, Pool
from .placement import Counts, PlaceContext, fits, place
from .quota import QuotaLedger
from .record import record
from .snapshot import AdmittedAs, Band, JobRequest, Placement, PolicyConfig, RunningJob


@record
class Victim:
    """A running job the cycle might stop, with what stopping it costs and what the rules need to know."""

    job: RunningJob
    key: tuple[int, float, float, int, int, float, str]
    gpu_hours: float
    band: Band
    scavenger: bool
    protected: bool          # admitted less than the minimum run time ago
    highest_band: Band       # the band it could preempt with if pending again

    @property
    def id(self) -> str:
        return self.job.request.id


def is_scavenger(job: RunningJob) -> bool:
    return job.admitted_as is AdmittedAs.SCAVENGER or job.request.priority_class is PriorityClass.SCAVENGER


def at_risk_gpu_hours(job: RunningJob, now: float) -> float:
    """Speed-weighted GPU-hours since the job's last checkpoint (or its start): what stopping it now loses."""
    since = job.last_checkpoint_at if job.last_checkpoint_at is not None else job.started_at
    flavour = FLAVOURS.get(job.placement.flavour)
    speed = flavour.speed if flavour else 1.0
    return job.request.units * speed * max(0.0, now - since) / 3600.0


def victim(job: RunningJob, now: float, config: PolicyConfig) -> Victim:
    request = job.request
    free = is_scavenger(job)
    lost = 0.0 if free else at_risk_gpu_hours(job, now)
    flavour = FLAVOURS.get(job.placement.flavour)
    speed = flavour.speed if flavour else 1.0
    checkpoint = 0.0 if free else request.units * speed * request.checkpoint_cost_s / 3600.0
    key = (0 if free else 1, lost, checkpoint, request.units, request.priority_class.rank, -job.started_at,
           request.id)
    return Victim(job=job, key=key, gpu_hours=lost + checkpoint, band=job.band, scavenger=free,
                  protected=now - job.started_at < config.min_run_time_s,
                  highest_band=highest_pending_band(request))


def highest_pending_band(request: JobRequest) -> Band:
    """The highest band a job could hold if it were pending again (what it could preempt with)."""
    if request.priority_class is PriorityClass.CRITICAL:
        return Band.CRITICAL
    if request.priority_class is PriorityClass.SCAVENGER:
        return Band.SCAVENGER
    return Band.GUARANTEED


def may_preempt(preemptor: JobRequest, band: Band, target: Victim) -> bool:
    """Whether a job running in ``band`` may stop ``target`` (the rules in the module docstring)."""
    if target.job.terminating or target.band >= band or target.highest_band > band:
        return False
    if target.scavenger:
        return True
    if not target.job.request.preemptible or target.job.request.team == preemptor.team:
        return False
    return band is Band.CRITICAL or not target.protected


def minimal_victims(candidates: Sequence[Victim], remove: Callable[[Victim], None],
                    restore: Callable[[Victim], None], fits: Callable[[], bool]) -> list[Victim] | None:
    """Remove candidates in order until ``fits()``, then add back every one not needed; restore the state.

    Returns the victims, cheapest first, or ``None`` when even removing them all is not enough."""
    removed: list[Victim] = []
    for candidate in candidates:
        remove(candidate)
        removed.append(candidate)
        if fits():
            break
    else:
        for candidate in reversed(removed):
            restore(candidate)
        return None
    needed = [removed[-1]]
    for candidate in reversed(removed[:-1]):
        restore(candidate)
        if fits():
            continue
        remove(candidate)
        needed.append(candidate)
    for candidate in needed:
        restore(candidate)
    needed.sort(key=lambda v: v.key)
    return needed


@record
class Found:
    victims: list[Victim]
    placement: Placement

    @property
    def gpu_hours(self) -> float:
        return sum(v.gpu_hours for v in self.victims)


class VictimSearch:
    """Runs :func:`minimal_victims` for one job and keeps the cheapest answer.

    ``spots[victim id]`` lists (node position in the pool, units) of each victim, so the search can look at
    the nodes where stopping jobs would help instead of trying every candidate in the cluster: one pod goes
    to the node whose cheapest victims free enough units; a gang confined to a block tries each block that
    could be cleared enough, and keeps the one that loses the fewest GPU-hours."""

    def __init__(self, cap: Capacity, ledger: QuotaLedger, pool: Pool, request: JobRequest, ctx: PlaceContext,
                 small: bool, reclaim_target: int | None, spots: Mapping[str, list[tuple[int, int]]],
                 oversize: int | None = None) -> None:
        self.cap = cap
        self.ledger = ledger
        self.pool = pool
        self.request = request
        self.ctx = ctx
        self.small = small
        self.reclaim_target = reclaim_target
        self.spots = spots
        #: Victims larger than this are the last resort (a reclaim should not stop a gang far larger than it needs).
        self.oversize = oversize
        #: The per-block counts of the search under way (``_try``), told of the blocks each victim changes.
        self._counts: Counts | None = None

    def _remove(self, v: Victim) -> None:
        self.cap.release(v.job.request, v.job.placement)
        self.ledger.remove(v.job.request, v.job.placement.flavour, v.job.admitted_as)
        self._changed(v)

    def _restore(self, v: Victim) -> None:
        self.cap.occupy(v.job.request, v.job.placement)
        self.ledger.add(v.job.request, v.job.placement.flavour, v.job.admitted_as)
        self._changed(v)

    def _changed(self, v: Victim) -> None:
        """Forget the counts of the blocks whose nodes ``v`` runs on (its units and CPUs came or went)."""
        counts = self._counts
        if counts is None:
            return
        pool, index = self.pool, self.cap.index
        for pod in v.job.placement.pods:
            j = pool.pos.get(index[pod.node])
            if j is not None:
                counts.forget_block(pool.block[j])

    def _quota_ok(self) -> bool:
        if self.reclaim_target is None:
            return True
        return self.ledger.reclaim_met(self.request, self.pool.flavour, self.reclaim_target)

    def _try(self, candidates: Sequence[Victim], ctx: PlaceContext) -> Found | None:
        if not candidates:
            return None

        pool, request = self.pool, self.request
        g, pods = request.units_per_pod, request.pods
        whole = pool.uniform_cap == g

        def enough() -> bool:
            """Counts alone say whether a gang could fit yet (skips placing while victims are removed)."""
            if pods == 1:
                return True
            b = ctx.within_block
            if b is None:
                if whole:
                    return sum(pool.whole.values()) + sum(pool.whole_spare.values()) >= pods
                return (pool.free_units + pool.free_spare) // g >= pods
            if whole:
                return pool.whole[b] + pool.whole_spare[b] >= pods
            return (pool.bfree[b] + pool.bfree_spare[b]) // g >= pods

        counts = self._counts = Counts()

        def fit() -> bool:
            return enough() and self._quota_ok() and fits(self.cap, self.pool, self.request, ctx, self.small, counts)

        try:
            victims = minimal_victims(candidates, self._remove, self._restore, fit)
            if victims is None:
                return None
            for v in victims:
                self._remove(v)
            placement = place(self.cap, self.pool, self.request, ctx, self.small, counts)
            for v in victims:
                self._restore(v)
        finally:
            self._counts = None
        assert placement is not None
        return Found(victims, placement)

    def settle(self, leaving: Sequence[Victim], gone_at: Mapping[str, float]) -> Found | None:
        """The fewest of ``leaving`` (soonest gone first) whose exit makes the job fit, or ``None``. One pod
        looks at the node whose leaving jobs free enough units soonest first."""
        if self.request.pods == 1:
            pool, ctx, g = self.pool, self.ctx, self.request.units_per_pod
            per_node: dict[int, list[tuple[Victim, int]]] = {}
            for v in leaving:
                for j, units in self.spots[v.id]:
                    per_node.setdefault(j, []).append((v, units))
            best: tuple[tuple[float, int], list[Victim]] | None = None
            for j in sorted(per_node):
                if not pool.usable[j] or pool.spare[j] or pool.cap[j] < g:
                    continue
                need = g - pool.hold_room(j, ctx.end)
                chosen: list[Victim] = []
                for v, units in per_node[j]:
                    if need <= 0:
                        break
                    need -= units
                    chosen.append(v)
                if need > 0 or not chosen:
                    continue
                rank = (max(gone_at[v.id] for v in chosen), j)
                if best is None or rank < best[0]:
                    best = (rank, chosen)
            if best is None:
                return None
            first = {v.id for v in best[1]}
            return self._try(best[1] + [v for v in leaving if v.id not in first], ctx)
        return self._try(leaving, self.ctx)

    def run(self, candidates: Sequence[Victim]) -> Found | None:
        """Cheapest victims for the job among ``candidates`` (sorted by cost), or ``None``."""
        request = self.request
        if self.reclaim_target is not None:
            deficit = self.reclaim_target - self.ledger.pool_after(request.team, self.pool.flavour, request.units)
            if deficit > sum(v.job.request.units for v in candidates if not v.scavenger):
                return None
        if request.pods == 1:
            return self._single(candidates)
        level = request.topology_level
        confined = level is not None and level < TopologyLevel.CLUSTER and (
            request.topology_required or not self.ctx.widened)
        if self.reclaim_target is not None:
            return self._try(candidates, self.ctx)
        if confined:
            return self._per_block(candidates)
        # A gang that may spread: one block if victims there suffice (the smaller domain), else anywhere.
        return self._per_block(candidates) or self._try(candidates, self.ctx)

    def _single(self, candidates: Sequence[Victim]) -> Found | None:
        pool, ctx, g = self.pool, self.ctx, self.request.units_per_pod
        per_node: dict[int, list[tuple[Victim, int]]] = {}
        for v in candidates:
            for j, units in self.spots[v.id]:
                per_node.setdefault(j, []).append((v, units))
        best: tuple[tuple[bool, float, int, int], list[Victim]] | None = None
        for j in sorted(per_node):
            if not pool.usable[j] or pool.spare[j] or pool.members[j] in ctx.avoid or pool.cap[j] < g:
                continue
            need = g - pool.hold_room(j, ctx.end)
            chosen: list[Victim] = []
            cost = 0.0
            for v, units in per_node[j]:
                if need <= 0:
                    break
                need -= units
                cost += v.gpu_hours
                chosen.append(v)
            if need > 0 or not chosen:
                continue
            oversize = self.oversize is not None and any(v.job.request.units > self.oversize for v in chosen)
            rank = (oversize, cost, len(chosen), j)
            if best is None or rank < best[0]:
                best = (rank, chosen)
        if best is None:
            return None
        first = {v.id for v in best[1]}
        return self._try(best[1] + [v for v in candidates if v.id not in first], ctx)

    def _per_block(self, candidates: Sequence[Victim]) -> Found | None:
        pool, g, pods = self.pool, self.request.units_per_pod, self.request.pods
        freed: dict[int, int] = {}
        by_block: dict[int, list[Victim]] = {}
        for v in candidates:
            blocks = set()
            for j, units in self.spots[v.id]:
                freed[j] = freed.get(j, 0) + units
                blocks.add(pool.block[j])
            for b in blocks:
                by_block.setdefault(b, []).append(v)
        best: tuple[tuple[float, int, int], Found] | None = None
        for b in sorted(by_block):
            could = sum((pool.free[j] + freed.get(j, 0)) // g for j in pool.blocks[b]
                        if pool.usable[j] and pool.members[j] not in self.ctx.avoid)
            if could < pods:
                continue
            found = self._try(by_block[b], replace(self.ctx, within_block=b))
            if found is not None:
                rank = (found.gpu_hours, len(found.victims), b)
                if best is None or rank < best[0]:
                    best = (rank, found)
                if found.gpu_hours == 0.0:
                    break      # scavenger work only: nothing cheaper exists
        return None if best is None else best[1]
