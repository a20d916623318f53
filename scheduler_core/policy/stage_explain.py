"""Explain: every job that does not start this pass gets a reason, its position in its team's queue and an
estimated start (with, when it is a guess, what the guess counts on).

Estimates come from the plan: every waiting job booked, in cycle order, at the earliest instant its shape and
its quota allow (:meth:`Explainer.plan_waits`), or carried from the last plan (:meth:`Explainer.carry_plan`).
On the reservations' timeline (time limits) unless the snapshot says how long jobs really run or which
notebooks are idle: then on the likely one (:class:`Guess`)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..model.durations import format_duration
from .contexts import JobContexts
from .decisions import CycleResult, Reason, Wait
from .estimates import expected_duration, expected_end, idle_release
from .quota import QuotaClock
from .record import record
from .reservation import Slot, Timeline, job_end
from .snapshot import AdmittedAs, JobRequest, PendingJob, Plan, RunningJob
from .stage_preempt import ReclaimEstimate, after_patience, grace, proportionate_units
from .working_copy import WorkingCopy


@record
class PlanOption:
    """A flavour the plan may start a waiting job on, with what holds it back besides capacity.

    ``quota_reason``: the quota reason holding it back, or None; ``reclaim``: it waits for borrowers to be
    reclaimable; ``nominal_only``: it must fit within nominal (a reserved non-preemptible job of its team needs
    the nominal quota); ``by_relabel``: a non-preemptible job whose team's own preemptible work holds the
    nominal it needs, so it also gets in as soon as the cohort can lend for that work (``stage_nominate``
    relabels it borrowed)."""

    flavour: str
    quota_reason: Reason | None
    reclaim: bool
    nominal_only: bool
    by_relabel: bool = False


@dataclass(slots=True)
class Waiting:
    """A job that does not start this cycle, before the plan gives it an estimated start.

    ``plan_for`` lists the flavours the plan may start it on (:class:`PlanOption`)."""

    job: PendingJob
    reason: Reason
    message: str
    plan_for: list[PlanOption] = field(default_factory=list)
    estimate: float | None = None
    planned: bool = False        # the estimate is fixed already (reservation, victims)
    reserved: bool = False       # planned by a reservation: the estimate may still come out sooner (``Guess``)
    note: str = ""               # what the estimate counts on, when it is a guess


@record
class Guess:
    """The likely timeline and quota clock (:meth:`Explainer._guess`)."""

    timeline: Timeline
    clock: QuotaClock


@record
class _Earliest:
    """The soonest a waiting job may start by the plan: a slot on the timeline, or a reclaim."""

    slot: Slot | None
    reclaim: ReclaimEstimate | None


@record(order=True)
class _Borrower:
    """A borrower a reclaim may wait for: when it may go, its team and units, and what holds it."""

    at: float
    team: str
    units: int
    holder: str
    grace: float


class Explainer:
    """The jobs that wait this pass, in cycle order, and their estimates."""

    def __init__(self, work: WorkingCopy, contexts: JobContexts) -> None:
        self.work = work
        self.contexts = contexts
        self.now = work.now
        self.config = work.config
        self.waiting: dict[str, Waiting] = {}
        #: Every job the pass looked at, in cycle order.
        self.processed: list[str] = []
        self._reclaim_ready: dict[tuple[str, str, bool], list[_Borrower]] = {}
        self._guess_notes: dict[str, str] = {}

    def wait(self, pending: PendingJob, reason: Reason, message: str) -> Waiting:
        """``pending`` does not start this pass, for ``reason`` (the last word for a job is the one that holds)."""
        waiting = Waiting(pending, reason, message)
        self.waiting[pending.request.id] = waiting
        return waiting

    # -- estimates -------------------------------------------------------------------------------------------

    def plan_waits(self) -> None:
        """Estimated starts for every waiting job, in cycle order: each job is booked at the earliest instant
        its shape fits (and its quota allows), after those before it. On the reservations' timeline (time
        limits) unless the snapshot says how long jobs really run or which notebooks are idle: then on the
        likely one (``_guess``), where reserved jobs are planned too and start no later than reserved."""
        to_plan = [waiting for job_id in self.processed
                   if (waiting := self.waiting.get(job_id)) is not None and (not waiting.planned or waiting.reserved)]
        if not to_plan:
            return                      # nothing to plan: the likely timeline is not worth building
        guess = self._guess()
        timeline = self.work.timeline if guess is None else guess.timeline
        for waiting in to_plan:
            if waiting.planned and guess is None:
                continue                # reserved, and only a likely timeline could tell it sooner
            request = waiting.job.request
            earliest = self._earliest(waiting, timeline, guess)
            reclaim, best = earliest.reclaim, earliest.slot
            reserved_at = waiting.estimate if waiting.reserved else None
            if reclaim is not None and (best is None or reclaim.at <= best.start):
                waiting.estimate, waiting.note = reclaim.at, reclaim.note
            elif best is not None:
                duration = request.time_limit_s if guess is None else expected_duration(request,
                                                                                        self.work.snapshot.runtimes)
                timeline.book(best, duration)
                waiting.estimate = best.start
                if guess is not None:
                    waiting.note = self._guess_note(best.flavour)
            if reserved_at is not None and (waiting.estimate is None or reserved_at <= waiting.estimate):
                waiting.estimate, waiting.note = reserved_at, ""

    def _earliest(self, waiting: Waiting, timeline: Timeline, guess: Guess | None) -> _Earliest:
        """The earliest slot over the job's plan options, and the earliest reclaim of its lent-out nominal."""
        request = waiting.job.request
        best: Slot | None = None
        reclaim: ReclaimEstimate | None = None
        for option in waiting.plan_for:
            flavour, quota_reason = option.flavour, option.quota_reason
            if option.reclaim:
                # Its nominal quota is lent out: it starts when borrowers may be preempted and have left.
                after = self._reclaim_after(waiting.job, flavour, guess is not None)
                if after is not None:
                    if reclaim is None or after.at < reclaim.at:
                        reclaim = after
                    continue
            not_before = self.now
            if quota_reason is not None:
                clock = self.work.quota_clock() if guess is None else guess.clock
                quota_free = clock.free_at(request, flavour, quota_reason, option.nominal_only,
                                           self.work.kept_share(request, flavour))
                if option.by_relabel:
                    # In as nominal once the cohort can lend for the relabelled work: when it could lend to
                    # the job itself, were it preemptible (the same units above the team's nominal).
                    lent = clock.free_at(replace(request, preemptible=True), flavour, Reason.COHORT_FULL)
                    if lent is not None and (quota_free is None or lent < quota_free):
                        quota_free = lent
                if quota_free is None:
                    continue
                not_before = max(not_before, quota_free)
            slot = timeline.earliest(request, flavour, not_before=max(not_before, self.now),
                                     widen_at=self.contexts.widen_at(waiting.job), best_fit=False,
                                     block_cap=self.contexts.block_cap(waiting.job))
            if slot is not None and (best is None or slot.start < best.start):
                best = slot
        return _Earliest(best, reclaim)

    def _guess(self) -> Guess | None:
        """The timeline and quota clock of what is likely (``estimates``): running jobs end when they are
        likely to, what this cycle started and the jobs waiting for victims hold their units for as long as
        they are likely to. ``None`` when that is the promise itself (no run-time history, no idle clocks)."""
        work = self.work
        runtimes = work.snapshot.runtimes
        if not runtimes.known and not any(job.idle_since is not None for job in work.running):
            return None
        leaving, now = work.leaving, self.now
        ends: dict[str, float] = {}

        def end_of(job: RunningJob) -> float:
            """Asked twice per job (timeline, clock): worked out once."""
            job_id = job.request.id
            end = ends.get(job_id)
            if end is None:
                end = leaving.get(job_id)
                if end is None:
                    end = expected_end(job, now, runtimes)
                ends[job_id] = end
            return end

        timeline = Timeline(work.cap, list(work.running) + work.admitted, now, end_of=end_of)
        for held in work.victim_slots:
            timeline.book(held.slot, expected_duration(held.request, runtimes))
        clock = work.likely_clock(end_of)
        # What this cycle started holds quota for as long as it is likely to run. Reservations are left out:
        # the promise timeline counts their quota as held from now (safe for backfill), which would tell every
        # job of the cohort it waits hours for quota a reservation only takes later.
        for job in work.admitted:
            if job.admitted_as is not AdmittedAs.SCAVENGER:
                clock.add(end_of(job), job.request.team, job.placement.flavour, job.request.units)
        for held in work.victim_slots:
            request, slot = held.request, held.slot
            clock.add(slot.start + expected_duration(request, runtimes), request.team, slot.flavour, request.units)
        return Guess(timeline, clock)

    def _guess_note(self, flavour: str) -> str:
        """What an estimate on the likely timeline counts on, in words: idle notebooks the reaper will free,
        and how long jobs have lately run against their limits. The same for every job of a flavour in a pass,
        so worked out once per flavour (it counts the running jobs)."""
        note = self._guess_notes.get(flavour)
        if note is not None:
            return note
        idle = sum(1 for job in self.work.running
                   if job.placement.flavour == flavour and idle_release(job, self.now) is not None)
        parts = [f"the idle reaper freeing {idle} idle notebook(s)"] if idle else []
        if self.work.snapshot.runtimes.known:
            parts.append("jobs ending as they have lately, not at their time limits")
        note = self._guess_notes[flavour] = "a guess counting on " + " and ".join(parts) if parts else ""
        return note

    def _reclaim_after(self, pending: PendingJob, flavour: str, likely: bool) -> ReclaimEstimate | None:
        """When enough borrowers of other teams in the job's cohort have left for it: each can be preempted
        once its minimum run time is up (then its grace), or ends (a borrowed notebook is never preempted: it
        gives its units back when it ends or the reaper finds it idle — ``likely``: by its idle clock and
        usual length, see ``estimates``). Borrowers out of proportion to the job's size are stopped only once
        its patience ends (``stage_preempt.patience_ends``), so not before then and their grace (the cohort's
        deficit, which may make them proportionate, is not known here: the estimate errs late). With the words
        that say what the estimate counts on; ``None``: no such borrower (the job's plan is its timeline's)."""
        request = pending.request
        cohort = self.work.snapshot.teams[request.team].cohort
        ready = self._reclaim_ready.get((cohort, flavour, likely))
        if ready is None:
            ready = self._borrowers(cohort, flavour, likely)
            self._reclaim_ready[(cohort, flavour, likely)] = ready
        got = count = 0
        held: dict[str, int] = {}
        last = self.now
        most_grace = 0.0
        for borrower in ready:
            if borrower.team == request.team:
                continue
            got, count, last = got + borrower.units, count + 1, borrower.at
            most_grace = max(most_grace, borrower.grace)
            held[borrower.holder] = held.get(borrower.holder, 0) + 1
            if got >= request.units:
                break
        if not count:
            return None
        patient = (after_patience(pending, self.config, count, most_grace, reclaim=True)
                   if got > proportionate_units(request.units) else None)
        if patient is not None and patient.at > last:
            last, note = patient.at, patient.note
        elif held.get("young"):
            note = (f"after the {format_duration(self.config.min_run_time_s)} minimum run time of "
                    f"{held['young']} borrowed job(s)")
        elif held.get("idle"):
            note = f"a guess counting on the idle reaper freeing {held['idle']} borrowed notebook(s)"
        else:
            note = f"when {count} borrowed job(s) can be reclaimed"
        return ReclaimEstimate(max(last, self.now), note)

    def _borrowers(self, cohort: str, flavour: str, likely: bool) -> list[_Borrower]:
        """The cohort's borrowers on ``flavour`` not yet leaving, soonest reclaimable first: those that ran
        before this pass (relabelled borrowed by it included) and those it started (a borrower admitted a
        moment ago holds its units as long as one admitted an hour ago; without it a lender's job waiting in
        the same pass was told it starts now)."""
        work, now = self.work, self.now
        ready: list[_Borrower] = []
        for job in itertools.chain(work.running, work.admitted):
            other = work.snapshot.teams.get(job.request.team)
            borrowed = job.admitted_as is AdmittedAs.BORROWED or job.request.id in work.relabelled
            if (job.placement.flavour != flavour or not borrowed
                    or job.request.id in work.leaving or other is None or other.cohort != cohort):
                continue
            end = expected_end(job, now, work.snapshot.runtimes) if likely else job_end(job, now)
            # A borrower past its minimum run time still needs its grace to leave once signalled.
            at = (max(job.started_at + self.config.min_run_time_s, now) + grace(job) if job.request.preemptible
                  else end)
            # What holds it: its minimum run time, or (never preempted) the idle reaper's clock, or its end.
            holder = ("young" if job.started_at + self.config.min_run_time_s > now and at < end else
                      "idle" if not job.request.preemptible and likely and idle_release(job, now) is not None
                      else "")
            ready.append(_Borrower(min(at, end), job.request.team, job.request.units, holder, grace(job)))
        ready.sort()
        return ready

    def covered_by(self, plan: Plan) -> bool:
        """Whether ``plan`` has an estimate (or knows there is none) for every job that waits this pass."""
        estimates, waiting = plan.estimates, self.waiting
        return all(job_id in estimates for job_id in self.processed if job_id in waiting)

    def carry_plan(self, plan: Plan) -> None:
        """Estimated starts from the last plan (made on its own cadence), never earlier than now."""
        for waiting in self.waiting.values():
            job_id = waiting.job.request.id
            estimate = plan.estimates.get(job_id)
            note = plan.notes.get(job_id, "")
            if waiting.reserved and note and estimate is not None and waiting.estimate is not None:
                if estimate < waiting.estimate:                  # a guess sooner than the reservation: plan_waits
                    waiting.estimate, waiting.note = max(estimate, self.now), note
            if waiting.planned:
                continue
            waiting.estimate = None if estimate is None else max(estimate, self.now)
            waiting.note = note

    def plan(self) -> Plan:
        """The estimates ``plan_waits`` made, as a ``Plan`` the next passes carry."""
        waiting = sorted(self.waiting.items())
        return Plan(made_at=self.now, estimates={job_id: w.estimate for job_id, w in waiting},
                    notes={job_id: w.note for job_id, w in waiting if w.note})

    # -- the result ------------------------------------------------------------------------------------------

    def result(self, queues: Mapping[str, Sequence[PendingJob]], plan: Plan | None = None) -> CycleResult:
        """The pass's decisions, with each waiting job's 1-based position among its team's waiting jobs, and the
        plan it made (``None`` when it carried one)."""
        waiting = self.waiting
        position: dict[str, int] = {}
        for team in queues:
            count = 0
            for job in queues[team]:
                job_id = job.request.id
                if job_id in waiting:
                    count += 1
                    position[job_id] = count
        waits = [Wait(job_id, w.reason, w.message, position[job_id], w.estimate, w.note)
                 for job_id in self.processed if (w := waiting.get(job_id)) is not None]
        work = self.work
        return CycleResult(now=self.now, admits=work.admits, preempts=work.preempts,
                           reservations=work.reservations, waits=waits, relabels=work.relabels, plan=plan)
