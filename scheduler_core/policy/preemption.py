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

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..model.flavours import FLAVOURS
from ..model.job import PriorityClass, TopologyLevel
from .capacity import Capacity, Pool
from .placement import PlaceContext, place
from .quota import QuotaLedger
from .snapshot import AdmittedAs, Band, JobRequest, Placement, PolicyConfig, RunningJob


@dataclass(frozen=True, slots=True)
class Victim:
    """A running job the cycle might stop, with what stopping it costs."""

    job: RunningJob
    key: tuple[int, float, float, int, int, float, str]
    gpu_hours: float

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


def victim(job: RunningJob, now: float) -> Victim:
    request = job.request
    free = is_scavenger(job)
    lost = 0.0 if free else at_risk_gpu_hours(job, now)
    flavour = FLAVOURS.get(job.placement.flavour)
    speed = flavour.speed if flavour else 1.0
    checkpoint = 0.0 if free else request.units * speed * request.checkpoint_cost_s / 3600.0
    key = (0 if free else 1, lost, checkpoint, request.units, request.priority_class.rank, -job.started_at,
           request.id)
    return Victim(job=job, key=key, gpu_hours=lost + checkpoint)


def highest_pending_band(request: JobRequest) -> Band:
    """The highest band a job could hold if it were pending again (what it could preempt with)."""
    if request.priority_class is PriorityClass.CRITICAL:
        return Band.CRITICAL
    if request.priority_class is PriorityClass.SCAVENGER:
        return Band.SCAVENGER
    return Band.GUARANTEED


def may_preempt(preemptor: JobRequest, band: Band, target: RunningJob, now: float, config: PolicyConfig) -> bool:
    """Whether a job running in ``band`` may stop ``target`` (the rules in the module docstring)."""
    if target.terminating or target.band >= band:
        return False
    if is_scavenger(target):
        return True
    if not target.request.preemptible or target.request.team == preemptor.team:
        return False
    if band is not Band.CRITICAL and now - target.started_at < config.min_run_time_s:
        return False
    return highest_pending_band(target.request) <= band


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


@dataclass(frozen=True, slots=True)
class Found:
    victims: list[Victim]
    placement: Placement

    @property
    def gpu_hours(self) -> float:
        return sum(v.gpu_hours for v in self.victims)


class VictimSearch:
    """Runs :func:`minimal_victims` for one job, one domain at a time, and keeps the cheapest answer."""

    def __init__(self, cap: Capacity, ledger: QuotaLedger, pool: Pool, request: JobRequest, ctx: PlaceContext,
                 small: bool, reclaim_target: int | None) -> None:
        self.cap = cap
        self.ledger = ledger
        self.pool = pool
        self.request = request
        self.ctx = ctx
        self.small = small
        self.reclaim_target = reclaim_target

    def _remove(self, v: Victim) -> None:
        self.cap.release(v.job.request, v.job.placement)
        self.ledger.remove(v.job.request, v.job.placement.flavour, v.job.admitted_as)

    def _restore(self, v: Victim) -> None:
        self.cap.occupy(v.job.request, v.job.placement)
        self.ledger.add(v.job.request, v.job.placement.flavour, v.job.admitted_as)

    def _quota_ok(self) -> bool:
        if self.reclaim_target is None:
            return True
        return self.ledger.reclaim_met(self.request, self.pool.flavour, self.reclaim_target)

    def _try(self, candidates: Sequence[Victim], ctx: PlaceContext) -> Found | None:
        if not candidates:
            return None

        def fits() -> bool:
            return self._quota_ok() and place(self.cap, self.pool, self.request, ctx, self.small) is not None

        victims = minimal_victims(candidates, self._remove, self._restore, fits)
        if victims is None:
            return None
        for v in victims:
            self._remove(v)
        placement = place(self.cap, self.pool, self.request, ctx, self.small)
        for v in victims:
            self._restore(v)
        assert placement is not None
        return Found(victims, placement)

    def run(self, candidates: Sequence[Victim], by_block: dict[int, list[Victim]]) -> Found | None:
        """Cheapest victims over the job's domains: one block at a time when its topology confines it to a
        block (or it is one pod), across the cluster when it may spread or quota must be reclaimed."""
        request = self.request
        level = request.topology_level
        confined = request.pods == 1 or (level is not None and level < TopologyLevel.CLUSTER and (
            request.topology_required or not self.ctx.widened))
        if self.reclaim_target is not None or not confined:
            return self._try(candidates, self.ctx)
        best: tuple[tuple[float, int, int], Found] | None = None
        for b in sorted(by_block):
            found = self._try(by_block[b], replace(self.ctx, within_block=b))
            if found is not None:
                rank = (found.gpu_hours, len(found.victims), b)
                if best is None or rank < best[0]:
                    best = (rank, found)
        return None if best is None else best[1]
