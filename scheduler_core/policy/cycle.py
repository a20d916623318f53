"""``run_cycle(snapshot, now) -> CycleResult``: every scheduling decision, as one pure function.

It reads the snapshot and ``now`` and nothing else (no clock, no I/O, no global random state) and returns
decisions; nothing changes until the caller applies them. Inside, a working copy of the cluster
(:mod:`working_copy`) is changed as the cycle goes, so each admission, each simulated preemption and each
reservation is seen by the jobs after it. The phases follow Kueue's scheduler: index the snapshot, enforce
time limits, order the queues, then for each job nominate (:mod:`stage_nominate`: quota, then placement),
fall back to preemption (:mod:`stage_preempt`) or a reservation (:mod:`stage_reserve`), and finally explain
every job that does not start (:mod:`stage_explain`). ``docs/scheduling.md`` tells the story for a new
engineer.
"""

from __future__ import annotations

from dataclasses import field

from ..model.durations import format_duration
from .contexts import JobContexts
from .decisions import CycleResult, Preempt, PreemptReason, Reason
from .defrag import fragmented, moves_in_flight, plan_moves
from .ordering import TeamOrder, team_queues, waited_long
from .placement import Fit, PlaceContext, is_small
from .preemption import is_scavenger
from .quota import may_borrow
from .record import record
from .snapshot import PendingJob, Plan, RunningJob, Snapshot
from .stage_explain import Explainer, PlanOption, Waiting
from .stage_nominate import (CAPACITY_REASONS, REASON_RANK, FlavourMiss, Nominator, PlacedFit, QuotaNomination,
                             QuotaOption)
from .stage_preempt import Preemptor, Strategy, VictimsPending, grace
from .stage_reserve import Reserver
from .working_copy import WorkingCopy


def run_cycle(snapshot: Snapshot, now: float) -> CycleResult:
    """One scheduling pass over ``snapshot`` at ``now`` (DESIGN §3.2)."""
    # 1. Index: a working copy of free units, quota usage, fair shares and the timeline of returning units.
    cycle = _Cycle(snapshot, now)
    # 2. Time limits: a job at its limit is stopped, to checkpoint if it is preemptible.
    cycle.enforce_time_limits()
    # 3. Order: each team's queue (priority, front, service level, age), merged by band, then teams whose next
    #    job has waited starvation_after_s, then lowest DRF share.
    order = cycle.order()
    # 4. Nominate and process: quota, placement (once per shape), else preemption, else a reservation.
    for job in order:
        cycle.process(job)
    # 5. Defragment: when free units are scattered and a gang waits, move a few small jobs to small-job blocks.
    cycle.defragment()
    # 6. Explain: every job that does not start gets a reason, its queue position and an estimated start
    #    (from the plan carried in the snapshot, or planned here when there is none or it has not seen a job
    #    that waits: a new job's first estimate is the one its user reads, see ``cadence``).
    if snapshot.plan is not None and cycle.explain.covered_by(snapshot.plan):
        cycle.explain.carry_plan(snapshot.plan)
        return cycle.explain.result(cycle.queues)
    cycle.explain.plan_waits()
    return cycle.explain.result(cycle.queues, cycle.explain.plan())


def plan(snapshot: Snapshot, now: float) -> Plan:
    """Estimated starts for every job that will not start at ``now`` (Slurm's backfill plan, on its own cadence).

    It runs the cycle's decisions on a scratch copy, then books every waiting job on the timeline in cycle
    order. Put the result in ``Snapshot.plan`` and ``run_cycle`` takes its estimates from it instead of
    planning every pass; estimates of jobs that arrived since are ``None`` until the next plan."""
    cycle = _Cycle(snapshot, now)
    cycle.enforce_time_limits()
    for job in cycle.order():
        cycle.process(job)
    cycle.defragment()
    cycle.explain.plan_waits()
    return cycle.explain.plan()


@record
class _Class:
    """What every job of one equivalence class gets for the rest of the cycle once one of them waited."""

    reason: Reason
    message: str
    plan_for: list[PlanOption]
    misses: list[FlavourMiss]
    min_limit: float
    quota: tuple[int, ...] | None      # None: refused by quota, which only tightens within a cycle
    refused: list[PlanOption] = field(default_factory=list)


class _Cycle:
    """One pass: the working copy, the stages on it, and the steps of :func:`run_cycle` that tie them."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.now = now
        self.config = snapshot.config
        self.work = WorkingCopy(snapshot, now)
        self.queues = team_queues(snapshot.pending, now, self.config)
        self.contexts = JobContexts(self.work)
        self.explain = Explainer(self.work, self.contexts)
        self.nominate = Nominator(self.work, self.contexts)
        self.preempt = Preemptor(self.work)
        self.reserve = Reserver(self.work, self.contexts, self.preempt)
        self._classes: dict[tuple[object, ...], _Class] = {}

    def order(self) -> TeamOrder:
        """The pass's order of pending work (``ordering``), long waiters' teams first in each band."""
        return TeamOrder(self.queues, self.nominate.band_hint, self.work.share,
                         lambda job: waited_long(job, self.now, self.config))

    # -- phase 2 ---------------------------------------------------------------------------------------------

    def enforce_time_limits(self) -> None:
        for job in self.work.running:
            request = job.request
            if job.terminating or self.now < job.limit_end:
                continue
            wait = request.grace_s if request.preemptible and not is_scavenger(job) else 0.0
            self.work.preempt(job, Preempt(request.id, PreemptReason.TIME_LIMIT, wait, requeue=False))

    # -- phase 4 ---------------------------------------------------------------------------------------------

    def process(self, pending: PendingJob) -> None:
        request = pending.request
        self.explain.processed.append(request.id)
        # a. A job just like one that already waits this cycle waits too: quota and free units only shrink
        #    within a cycle and reservations only grow, so the first answer holds (equivalence classes).
        klass = None
        nominal_first = self.contexts.nominal_first(pending)
        if pending.restart_block is None and not pending.avoid_nodes and request.id not in self.work.victims_for:
            widened = True if request.topology_level is None else self.contexts.widened(pending)
            klass = (request.team, request.shape, request.priority_class, request.preemptible, may_borrow(request),
                     widened, self.contexts.block_cap(pending), nominal_first)
            known = self._classes.get(klass)
            if (known is not None and request.time_limit_s >= known.min_limit
                    and (known.quota is None or known.quota == self.work.quota_state(request))):
                self._wait_as(pending, known)
                return
        # b. Reserved jobs' quota counts against a job that would still run when they start.
        self.work.overlap(request)
        outcome = self._process(pending, nominal_first)
        if klass is not None and outcome is not None:
            self._classes[klass] = outcome

    def _wait_as(self, pending: PendingJob, known: _Class) -> None:
        """Wait like the job of the same class before, reserving as it would have."""
        waiting = self.explain.wait(pending, known.reason, known.message)
        waiting.plan_for = known.plan_for
        if (known.misses or known.refused) and self.reserve.may_reserve(pending):
            if known.misses:
                small = is_small(pending.request, self.config.small_job_max_units)
                self._reserve_or_preempt(pending, waiting, known.misses, self.contexts.context(pending), small)
            else:
                self.reserve.after_quota(pending, waiting, known.refused)

    def _process(self, pending: PendingJob, nominal_first: bool) -> _Class | None:
        """Handle one job (``nominal_first``: see ``JobContexts.nominal_first``); returns what a job of the same class
        would get, when it simply waits."""
        request = pending.request
        quota = self.work.quota_state(request)
        pools = self.nominate.shaped_pools(request)
        if pools.problem is not None:
            return self._refuse(pending, quota, Reason.INVALID_FLAVOUR, pools.problem)
        # b. Victims already leaving for this job: start if it fits anyway, else wait for them.
        inflight = [v for v in self.work.victims_for.get(request.id, ()) if v.request.id in self.work.leaving]
        if inflight:
            self.preempt.claimed.update(v.request.id for v in inflight)
        # c. Quota on each flavour, in the job's order of preference.
        nominated = self.nominate.quota(request, pools.pools, nominal_first=nominal_first)
        if not nominated.options:
            return self._refuse_by_quota(pending, quota, nominated)
        ctx = self.contexts.context(pending)
        small = is_small(request, self.config.small_job_max_units)
        # d. Placement now: the first flavour that fits without preemption (misses cached per shape).
        placed = self.nominate.placement(pending, nominated.options, ctx, small, bool(inflight))
        if placed.fit is not None:
            self._admit(pending, placed.fit, ctx.end)
            return None
        if inflight:
            self._await_victims(pending, inflight, nominated.options)
            return None
        if not placed.misses:
            return self._refuse_by_quota(pending, quota, nominated)
        # e. Preemption, when the job's band allows it and its best flavour is not merely deferred.
        if max(m.miss.fit for m in placed.misses) < Fit.DEFERRED:
            for m in placed.misses:
                stopped = self.preempt.preempt(pending, m.pool, m.verdict, ctx, small, m.miss, Strategy.NOW)
                if stopped is not None:
                    self._wait_for_victims(pending, stopped)
                    return None
        # f. Wait, with a reservation for the head of the line.
        return self._wait_for_room(pending, placed.misses, ctx, small, quota)

    def _admit(self, pending: PendingJob, fit: PlacedFit, end: float) -> None:
        if fit.option.relabel is not None:
            self.work.relabel(fit.option.relabel, fit.option.flavour, for_job=pending.request.id)
        self.work.admit(pending.request, fit.option.pool, fit.placement, fit.admitted_as, end,
                        backfill=self.reserve.blocked > 0)

    def _await_victims(self, pending: PendingJob, victims: list[RunningJob], options: list[QuotaOption]) -> None:
        """Victims an earlier pass signalled for this job are still leaving: it waits for them, counted as if it
        ran, on the slot their units make once they have gone."""
        request = pending.request
        by = max(self.work.leaving[v.request.id] for v in victims)
        flavour = victims[0].placement.flavour
        option = next((o for o in options if o.flavour == flavour), options[0])
        f, verdict = option.flavour, option.verdict
        assert verdict.admitted_as is not None
        self.work.commit(request, f, verdict.admitted_as)
        waiting = self.explain.wait(pending, Reason.PREEMPTING_VICTIMS,
                                    f"{len(victims)} victim(s) signalled; starts when they exit, by "
                                    f"{format_duration(by - self.now)} from now")
        # Where they leave: their search placed the job as admission does, on a spare if it fits no other way.
        slot = self.work.timeline.earliest(request, f, not_before=by, widen_at=self.contexts.widen_at(pending),
                                           block_cap=self.contexts.block_cap(pending), spares_sooner=True)
        if slot is not None:
            self.work.hold_for_victims(request, slot)
            waiting.estimate = slot.start
        else:
            waiting.estimate = by
        waiting.planned = True

    def _wait_for_victims(self, pending: PendingJob, stopped: VictimsPending) -> None:
        waiting = self.explain.wait(pending, Reason.PREEMPTING_VICTIMS, stopped.message)
        waiting.estimate = stopped.until
        waiting.planned = True

    def _wait_for_room(self, pending: PendingJob, misses: list[FlavourMiss], ctx: PlaceContext, small: bool,
                       quota: tuple[int, ...]) -> _Class | None:
        """The job waits with its most promising miss's reason; the head of the line reserves (or preempts
        for a gang, which returns None: it no longer simply waits)."""
        request = pending.request
        choice = max(misses, key=lambda m: (REASON_RANK[m.miss.reason], -m.index))
        miss = choice.miss
        waiting = self.explain.wait(pending, miss.reason, miss.message)
        waiting.plan_for = [PlanOption(m.flavour, None, m.verdict.reclaim, False) for m in misses if not m.miss.never]
        reservable = [m for m in misses
                      if not m.miss.never and not m.verdict.reclaim and m.miss.reason in CAPACITY_REASONS]
        outcome = _Class(miss.reason, miss.message, waiting.plan_for, reservable, request.time_limit_s, quota)
        if reservable and miss.reason in CAPACITY_REASONS and not miss.never:
            if self._reserve_or_preempt(pending, waiting, reservable, ctx, small):
                return None
        patience = self.preempt.patience.get(request.id)
        if patience is not None and (waiting.estimate is None or patience.at < waiting.estimate):
            # It stops far larger jobs for room once its patience ends, if none has come back by then.
            waiting.estimate, waiting.note, waiting.planned = patience.at, patience.note, True
        return outcome

    def _reserve_or_preempt(self, pending: PendingJob, waiting: Waiting, misses: list[FlavourMiss],
                            ctx: PlaceContext, small: bool) -> bool:
        """Reserve for a blocked job, or preempt for it; True when it now waits for victims instead."""
        stopped = self.reserve.reserve_or_preempt(pending, waiting, misses, ctx, small)
        if stopped is None:
            return False
        self._wait_for_victims(pending, stopped)
        return True

    def _refuse_by_quota(self, pending: PendingJob, quota: tuple[int, ...], nominated: QuotaNomination) -> _Class:
        assert nominated.best is not None
        return self._refuse(pending, quota, nominated.best.reason, nominated.best.message, nominated.refused)

    def _refuse(self, pending: PendingJob, quota: tuple[int, ...], reason: Reason, message: str,
                plan_for: list[PlanOption] | None = None) -> _Class:
        waiting = self.explain.wait(pending, reason, message)
        waiting.plan_for = plan_for or []
        refused = [entry for entry in waiting.plan_for if entry.quota_reason is not None]
        if refused:
            self.reserve.after_quota(pending, waiting, refused)
        # A job of a shorter limit overlaps fewer reservations' quota (``WorkingCopy.overlap``): only a longer one
        # waits unasked.
        return _Class(reason, message, waiting.plan_for, [], pending.request.time_limit_s, None, refused)

    # -- phase 5 ---------------------------------------------------------------------------------------------

    def defragment(self) -> None:
        work = self.work
        gangs: dict[str, int] = {}
        for waiting in self.explain.waiting.values():
            request = waiting.job.request
            if request.pods > 1 and waiting.reason in CAPACITY_REASONS and waiting.plan_for:
                flavour = waiting.plan_for[0].flavour
                gangs[flavour] = gangs.get(flavour, 0) + 1
        for flavour in sorted(gangs):
            pool = work.cap.pools[flavour]
            if not fragmented(pool, self.config) or moves_in_flight(work.cap, pool, work.running, self.config):
                continue
            still = [job for job in work.running
                     if job.placement.flavour == flavour and job.request.id not in work.leaving]
            for v in plan_moves(work.cap, pool, still, self.now, self.config):
                work.preempt(v.job, Preempt(v.id, PreemptReason.DEFRAGMENT, grace(v.job), requeue=True))
