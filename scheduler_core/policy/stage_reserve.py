"""Reserve: the head of the line keeps the earliest slot it can have (Slurm's backfill reservations).

The first ``max_reservations`` blocked jobs in cycle order (long waiters up to twice that) hold the earliest
slot on the timeline, nodes and quota both, so later jobs backfill only around them. A gang whose slot is far
off may instead preempt for it, or move smaller jobs out of its way, when that costs fewer GPU-hours than the
wait (through :class:`~scheduler_core.policy.stage_preempt.Preemptor`)."""

from __future__ import annotations


from ..model.durations import format_duration
from ..model.job import PriorityClass
from .contexts import JobContexts
from .decisions import Reason
from .ordering import waited_long
from .placement import PlaceContext
from .quota import may_borrow
from .record import record
from .reservation import Slot
from .snapshot import PendingJob
from .stage_explain import PlanOption, Waiting
from .stage_nominate import CAPACITY_REASONS, FlavourMiss
from .stage_preempt import Preemptor, Strategy, VictimsPending
from .working_copy import WorkingCopy


#: The misses moving smaller jobs can mend: units free in all but scattered. A node that is not ready does not
#: change that (it only names the reason: the gang would fit on it too), so it does not stop the moves.
_MOVABLE_REASONS = frozenset({Reason.WAITING_FOR_TOPOLOGY, Reason.WAITING_FOR_CAPACITY, Reason.NODE_UNHEALTHY})


@record
class _SlotChoice:
    """The earliest reservable slot among a job's misses, and the miss it belongs to."""

    slot: Slot
    entry: FlavourMiss


class Reserver:
    """Reservations for blocked jobs, on the pass's working copy."""

    def __init__(self, work: WorkingCopy, contexts: JobContexts, preemptor: Preemptor) -> None:
        self.work = work
        self.contexts = contexts
        self.preemptor = preemptor
        self.now = work.now
        self.config = work.config
        #: Reservations made so far this pass: a job admitted after the first one is backfill.
        self.blocked = 0

    def may_reserve(self, pending: PendingJob) -> bool:
        """The first ``max_reservations`` blocked jobs in cycle order hold their plan; long waiters up to
        twice that. Scavenger work never reserves."""
        limit = self.config.max_reservations
        starving = waited_long(pending, self.now, self.config)
        return (pending.request.priority_class is not PriorityClass.SCAVENGER
                and self.blocked < (2 * limit if starving else limit))

    def reserve_or_preempt(self, pending: PendingJob, waiting: Waiting, misses: list[FlavourMiss], ctx: PlaceContext,
                           small: bool) -> VictimsPending | None:
        """Reserve the earliest slot for a blocked job (or, for a gang whose slot is far off, preempt for it
        when that costs less: then what it waits for instead).

        A gang as large as a block may move jobs out of its way even when it is not among the jobs that hold
        reservations: it waits for whole blocks, which small jobs fragment, and moving them (each fits elsewhere
        now and restarts at once) is how it gets one, whatever its place in the cycle's order."""
        request = pending.request
        may_reserve = self.may_reserve(pending)
        if not may_reserve and not self.contexts.any_pool(request, lambda pool: pool.fills_blocks(request)):
            return None
        best = self._earliest_reservable(pending, misses, ctx)
        if request.pods > 1 and best is not None:
            for m in misses:
                if (best.entry.flavour == m.flavour and not m.verdict.reclaim
                        and m.pool.free_units >= request.units
                        and m.miss.reason in _MOVABLE_REASONS):
                    moved = self.preemptor.preempt(pending, m.pool, m.verdict, ctx, small, m.miss, Strategy.MIGRATE,
                                                   slot=best.slot)
                    if moved is not None:
                        return moved
        if not may_reserve:
            return None
        far = self.config.reservation_preempt_after_s
        if request.pods > 1 and (best is None or best.slot.start - self.now > far):
            for m in misses:
                slot_f = best.slot if best is not None and best.entry.flavour == m.flavour else None
                if not m.miss.never and not m.verdict.reclaim:
                    stopped = self.preemptor.preempt(pending, m.pool, m.verdict, ctx, small, m.miss,
                                                     Strategy.RESERVATION, slot=slot_f)
                    if stopped is not None:
                        return stopped
        if best is not None:
            self.reserve(pending, waiting, best.slot)
        return None

    def _earliest_reservable(self, pending: PendingJob, misses: list[FlavourMiss],
                             ctx: PlaceContext) -> _SlotChoice | None:
        """The earliest slot over the misses a reservation can wait out (ties: the flavour listed first)."""
        best: _SlotChoice | None = None
        for entry in misses:
            miss = entry.miss
            if miss.never or entry.verdict.reclaim or miss.reason not in CAPACITY_REASONS:
                continue
            slot = self._earliest_avoiding(pending, entry.flavour, ctx)
            if slot is not None and (best is None or (slot.start, entry.index) < (best.slot.start, best.entry.index)):
                best = _SlotChoice(slot, entry)
        return best

    def _earliest_avoiding(self, pending: PendingJob, flavour: str, ctx: PlaceContext) -> Slot | None:
        """The earliest slot that keeps off ``ctx.avoid`` while the job avoids those nodes, or uses them once
        it no longer does (``JobContexts.avoid``), whichever comes first."""
        request, widen_at = pending.request, self.contexts.widen_at(pending)
        timeline = self.work.timeline
        slot = timeline.earliest(request, flavour, not_before=self.now, widen_at=widen_at, avoid=ctx.avoid,
                                 block_cap=ctx.block_cap)
        if not ctx.avoid:
            return slot
        later = timeline.earliest(request, flavour, not_before=self.contexts.avoid_until(pending), widen_at=widen_at,
                                  block_cap=ctx.block_cap)
        return later if slot is None or (later is not None and later.start < slot.start) else slot

    def after_quota(self, pending: PendingJob, waiting: Waiting, refused: list[PlanOption]) -> None:
        """A job held back by quota that its team's (or cohort's) jobs free at a known time is planned in its
        place in the queue like any other: reserved from when both quota and nodes allow.

        On the allowance that lets non-preemptible work borrow while its cohort is half idle only for a job larger
        than its team's nominal quota, which can run on nothing else: reserving every non-preemptible job on it
        cost 0.3 points of utilisation over the 20 Tuesday seeds (docs/BENCHMARKS.md, session 25). Another such job
        is reserved for its nominal quota, and told its likely start with the allowance counted (``Explainer``)."""
        if not self.may_reserve(pending):
            return
        request = pending.request
        team = self.work.snapshot.teams.get(request.team)
        best: Slot | None = None
        for option in refused:
            flavour, reason = option.flavour, option.quota_reason
            if flavour not in self.work.cap.pools or reason is None:
                continue
            share = (self.work.kept_share(request, flavour)
                     if team is not None and request.units > team.nominal(flavour) else 1.0)
            quota_free = self.work.quota_clock().free_at(request, flavour, reason, option.nominal_only, share)
            if quota_free is None:
                continue
            slot = self.work.timeline.earliest(request, flavour, not_before=max(quota_free, self.now),
                                               widen_at=self.contexts.widen_at(pending),
                                               block_cap=self.contexts.block_cap(pending))
            if slot is not None and (best is None or slot.start < best.start):
                best = slot
        if best is not None:
            self.reserve(pending, waiting, best, quota_from=self._quota_from(pending, best))

    def _quota_from(self, pending: PendingJob, slot: Slot) -> float:
        """From when a quota-held job's reservation keeps its quota from backfill: its slot's start, or now for a
        starving block-sized gang (``JobContexts.drains``) whose nodes are in reach within ``starvation_after_s``.

        Planned on time limits, such a gang's start lies hours or days out, and every borrower that ends before
        it backfills into each unit the cohort frees: a gang that must borrow a thousand units at once never has
        them (the festive week's daily 1,024-GPU jobs waited 24-104 h, nine tenths of it ``CohortFull``). Held
        from now, what the cohort frees waits for it, as Slurm drains nodes for its top job; nominal work is
        not held back (``QuotaLedger.verdict``). Only while its nodes are near: holding quota for a gang that
        also waits hours for a whole block idles the cohort (docs/BENCHMARKS.md, session 29)."""
        if not self.contexts.drains(pending):
            return slot.start
        room = self.work.timeline.earliest(pending.request, slot.flavour, not_before=self.now,
                                           widen_at=self.contexts.widen_at(pending),
                                           block_cap=self.contexts.block_cap(pending))
        near = room is not None and room.start - self.now <= self.config.starvation_after_s
        return self.now if near else slot.start

    def reserve(self, pending: PendingJob, waiting: Waiting, slot: Slot, quota_from: float | None = None) -> None:
        """Hold ``slot`` (its nodes and its quota) for ``pending``: its estimate is the slot's start. ``quota_from``:
        when its quota starts to count against backfill (default: the slot's start)."""
        request = pending.request
        self.blocked += 1
        self.work.hold(request, slot)
        self.work.hold_quota(request, slot, nominal_only=not may_borrow(request), start=quota_from)
        waiting.estimate = slot.start
        waiting.planned = True
        waiting.reserved = True
        waiting.message += f"; reserved from {format_duration(slot.start - self.now)} from now"
