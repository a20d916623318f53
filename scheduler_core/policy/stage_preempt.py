"""Preempt: one victim search with one cost, used three ways (:class:`Strategy`).

:meth:`Preemptor.preempt` finds the cheapest victims that let a job in (simulated on the working copy: remove
candidates until it fits, add back those not needed) and signals them, or first checks whether jobs already
leaving are enough (then it claims them instead of stopping more). It returns :class:`VictimsPending`, what
the job now waits for, or None. Victims are signalled through ``WorkingCopy.preempt``, so every job after it
sees them leaving."""

from __future__ import annotations

from bisect import insort
from dataclasses import field
from enum import Enum

from ..model.durations import format_duration
from ..model.flavours import FLAVOURS
from ..model.job import PriorityClass
from .capacity import Pool
from .decisions import Preempt, PreemptReason
from .placement import Miss, PlaceContext, is_small, place
from .preemption import Found, Victim, VictimSearch, is_scavenger, may_preempt, victim
from .quota import Verdict
from .record import record
from .reservation import Slot
from .snapshot import AdmittedAs, Band, JobRequest, PendingJob, Placement, PolicyConfig, RunningJob, band_of
from .working_copy import WorkingCopy

#: How often a gang's move search drops a job that cannot restart elsewhere and tries again.
_MIGRATE_RETRIES = 4


class Strategy(Enum):
    """How a job preempts (:meth:`Preemptor.preempt`): the one victim search, three ways of using it."""

    NOW = "now"                      # reclaim, critical, single node; gangs only over scavenger work
    RESERVATION = "reservation"      # a gang whose reservation is far off, when that costs fewer GPU-hours
    MIGRATE = "migrate"              # move smaller jobs off the nodes a waiting gang needs, to room elsewhere


@record
class VictimsPending:
    """The preempt stage's outcome: the job waits for victims to exit (``PreemptingVictims``), by ``until``."""

    message: str
    until: float


@record
class VictimChoice:
    """The victim search's outcome: the victims, or none; ``none_for_shape``: no job of this shape, band and team
    finds any this cycle (remembered, so the next one does not search)."""

    found: Found | None
    none_for_shape: bool


@record
class _Unclaimed:
    """Leaving jobs nobody counts on yet, with bounds: their units, borrowed units and units per node."""

    victims: list[Victim]
    units: int
    borrowed: int
    per_node: dict[int, int]


@record(order=True)
class _LeavingEntry:
    until: float
    id: str
    victim: Victim = field(compare=False)


@record
class ReclaimEstimate:
    """When a job's victims will have left (enough borrowers for a reclaim, or victims out of proportion once its
    patience ends), and what that estimate counts on, in words."""

    at: float
    note: str


def grace(job: RunningJob) -> float:
    """How long a signalled job has to exit: its grace to checkpoint, none for scavenger or non-preemptible work."""
    if is_scavenger(job) or not job.request.preemptible:
        return 0.0
    return job.request.grace_s


class Preemptor:
    """Victim searches for the pass, with their caches (candidates per band, moves, jobs leaving)."""

    def __init__(self, work: WorkingCopy) -> None:
        self.work = work
        self.now = work.now
        self.config = work.config
        #: Leaving jobs a waiting job counts on (see ``_wait_for_leaving``), and shapes they cannot help.
        self.claimed: set[str] = set()
        #: Jobs whose only victims were out of proportion: when they will have left once its patience ends.
        self.patience: dict[str, ReclaimEstimate] = {}
        self._unsettled: set[tuple[object, ...]] = set()
        self._no_victims: set[tuple[object, ...]] = set()
        self._candidates: dict[tuple[str, Band], list[Victim]] = {}
        self._borrowed_units: dict[tuple[str, str], dict[str, int]] = {}
        self._leaving_lists: dict[str, list[_LeavingEntry]] | None = None
        self._released_seen = 0
        self._unclaimed: dict[tuple[str, int, int], _Unclaimed] = {}
        #: Victim candidates per (flavour, band, team, strategy, number of jobs leaving): the list only changes
        #: when more jobs are signalled.
        self._eligible: dict[tuple[object, ...], list[Victim]] = {}
        #: Young borrowers a reclaim may stop, per (flavour, team, band, cohort, size, number of jobs leaving).
        self._young: dict[tuple[object, ...], list[Victim]] = {}
        self._movable_cache: dict[tuple[str, int, int], list[Victim]] = {}
        self._spots: dict[str, list[tuple[int, int]]] = {}
        #: Each search's answer, with the working copy's version it was worked out on (``_search``).
        self._searched: dict[tuple[object, ...], tuple[int, Found | None]] = {}

    def preempt(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
                miss: Miss, strategy: Strategy, slot: Slot | None = None) -> VictimsPending | None:
        """Find and signal victims so ``pending`` fits ``pool``, by ``strategy`` (:class:`Strategy`): ``NOW``
        (reclaim, critical, single node; gangs only over scavenger work), ``RESERVATION`` (a gang whose
        reservation is far off, costed against ``slot``) or ``MIGRATE`` (a gang waiting for capacity or one
        domain: move smaller jobs off the nodes it needs to room they fit elsewhere now, costed; see
        :meth:`_movable`). None: nobody is stopped."""
        request = pending.request
        assert verdict.admitted_as is not None
        band = band_of(request.priority_class, verdict.admitted_as)
        if band is Band.SCAVENGER or miss.never:
            return None
        key = (pool.flavour, request.shape, band, request.team, verdict.reclaim, strategy, ctx.widened, ctx.block_cap)
        if key in self._no_victims:
            return None
        if strategy is Strategy.NOW:
            waiting = self._wait_for_leaving(pending, pool, verdict, ctx, small)
            if waiting is not None:
                return waiting
        cohort = self.work.snapshot.teams[request.team].cohort
        reclaim_only = verdict.reclaim and band is not Band.CRITICAL
        if reclaim_only and not self._reclaim_possible(request, pool.flavour, cohort, verdict.deficit):
            self._no_victims.add(key)
            return None
        eligible = self._eligible_victims(request, pool, verdict, band, strategy)
        if not eligible:
            self._no_victims.add(key)
            return None
        choice = self._cheapest_victims(pending, pool, verdict, ctx, small, eligible, band)
        if choice.found is None:
            if choice.none_for_shape:
                self._no_victims.add(key)
            return None
        found: Found | None = choice.found
        if (strategy is Strategy.NOW and not reclaim_only and band is not Band.CRITICAL
                and not self._proportionate(pending, verdict, choice.found)):
            # Room out of proportion: it waits its patience for units that come back as jobs end.
            victims = choice.found.victims
            self.patience[request.id] = after_patience(pending, self.config, len(victims),
                                                       max(grace(v.job) for v in victims), reclaim=False)
            return None
        if strategy is Strategy.MIGRATE:
            found = self._moves(pending, pool, verdict, ctx, small, eligible, choice.found)
        if found is None:
            return None
        if strategy is not Strategy.NOW and not self._worth_it(request, pool.flavour, found, slot):
            return None
        return self._signal(pending, pool, verdict, found, strategy, band)

    # -- candidates ------------------------------------------------------------------------------------------

    def _candidates_for(self, flavour: str, band: Band) -> list[Victim]:
        """Running jobs on ``flavour`` in bands below ``band``, cheapest first; built once per cycle and band.
        Below critical, jobs inside their minimum run time are left out (scavenger work excepted)."""
        key = (flavour, band)
        found = self._candidates.get(key)
        if found is None:
            victims = [victim(job, self.now, self.config) for job in self.work.running
                       if job.placement.flavour == flavour and not job.terminating and job.band < band]
            if band is not Band.CRITICAL:
                victims = [v for v in victims if v.scavenger or not v.protected]
            found = sorted(victims, key=lambda v: v.key)
            for v in found:
                self._note_spots(v)
            self._candidates[key] = found
        return found

    def _eligible_victims(self, request: JobRequest, pool: Pool, verdict: Verdict, band: Band,
                          strategy: Strategy) -> list[Victim]:
        """The jobs ``strategy`` may stop for ``request`` on ``pool``, cheapest first (cached while no more jobs
        are signalled): moves for ``MIGRATE``; else lower bands, only scavenger work for a gang preempting now
        (unless it reclaims or is critical), only the cohort's borrowers for a reclaim."""
        if strategy is Strategy.MIGRATE:
            return self._movable(pool.flavour, request)
        leaving = self.work.leaving
        immediate = verdict.reclaim or band is Band.CRITICAL or request.pods == 1
        scavengers_only = strategy is Strategy.NOW and not immediate
        reclaim_only = verdict.reclaim and band is not Band.CRITICAL
        # For a far-off reservation, no job larger than the one preempting: the larger would then wait for room
        # of its own, harder to find than the room the smaller lacked, its GPUs idle meanwhile.
        largest = request.units if strategy is Strategy.RESERVATION else None
        pick = (pool.flavour, band, request.team, scavengers_only, reclaim_only, largest, len(leaving))
        eligible = self._eligible.get(pick)
        if eligible is not None:
            return eligible
        teams = self.work.snapshot.teams
        cohort = teams[request.team].cohort
        eligible = []
        for v in self._candidates_for(pool.flavour, band):
            if v.id in leaving:
                continue
            if not v.scavenger:
                if scavengers_only:
                    break
                if not may_preempt(request, band, v) or (largest is not None and v.job.request.units > largest):
                    continue
                if reclaim_only:
                    other = teams.get(v.job.request.team)
                    if other is None or other.cohort != cohort:
                        continue
            eligible.append(v)
        self._eligible[pick] = eligible
        return eligible

    def _young_borrowers(self, pending: PendingJob, pool: Pool, verdict: Verdict, band: Band,
                         cohort: str) -> list[Victim]:
        """For a reclaim whose only victims past their minimum run time are far larger than it needs: borrowers of
        other teams in the cohort near its size, running for at least ``migrate_min_run_s``, cheapest first. The
        minimum run time guards against thrash; here it would make a 1-GPU reclaim stop a 1,024-GPU gang, whose
        GPUs then idle for hours because it cannot borrow them all back, while a young 8-GPU borrower loses
        minutes (it checkpoints on the way out). Cached, as ``_eligible_victims`` is, while no more jobs leave."""
        oversize = proportionate_units(_reclaim_need(pending.request, verdict))
        teams, leaving = self.work.snapshot.teams, self.work.leaving
        pick = (pool.flavour, pending.request.team, band, cohort, oversize, len(leaving))
        cached = self._young.get(pick)
        if cached is not None:
            return cached
        out: list[Victim] = []
        for job in self.work.running:
            other = teams.get(job.request.team)
            if (job.placement.flavour != pool.flavour or job.terminating or job.request.id in leaving
                    or job.admitted_as is not AdmittedAs.BORROWED or not job.request.preemptible
                    or job.request.team == pending.request.team or other is None or other.cohort != cohort
                    or job.band >= band or job.request.units > oversize
                    or self.now - job.started_at < self.config.migrate_min_run_s):
                continue
            out.append(self._victim(job))
        out.sort(key=lambda v: v.key)
        self._young[pick] = out
        return out

    def _movable(self, flavour: str, request: JobRequest) -> list[Victim]:
        """Jobs that may move for a gang waiting for room, cheapest first: preemptible, running for at least
        ``migrate_min_run_s`` (a shorter floor than the minimum run time that protects from preemption: a move
        costs the job a checkpoint, not its place), not critical, at most half the gang's size. Moving is not
        taking: a moved job checkpoints, goes back to the front of its queue and starts again at once elsewhere
        (the caller checks that it fits), so band and team do not matter — Gandiva's migration, at checkpoint
        boundaries."""
        leaving = self.work.leaving
        key = (flavour, request.units // 2, len(leaving))
        hit = self._movable_cache.get(key)
        if hit is None:
            hit = []
            for job in self.work.running:
                other = job.request
                if (job.placement.flavour != flavour or job.terminating or other.id in leaving
                        or not other.preemptible or other.priority_class is PriorityClass.CRITICAL
                        or is_scavenger(job) or other.units > request.units // 2
                        or self.now - job.started_at < self.config.migrate_min_run_s):
                    continue
                hit.append(self._victim(job))
            hit.sort(key=lambda v: v.key)
            self._movable_cache[key] = hit
        return hit

    def _victim(self, job: RunningJob) -> Victim:
        """``job`` as a victim candidate, with the units it holds per node noted for the victim search."""
        v = victim(job, self.now, self.config)
        self._note_spots(v)
        return v

    def _note_spots(self, v: Victim) -> None:
        """The units ``v`` holds on each node, one entry a node: a gang with two pods on one node is one victim
        there, not two (the search would otherwise stop it twice)."""
        if v.id not in self._spots:
            per_node: dict[int, int] = {}
            for _, j, bits, _ in self.work.cap.pod_bits(v.job.placement):
                per_node[j] = per_node.get(j, 0) + bits.bit_count()
            self._spots[v.id] = list(per_node.items())

    def _reclaim_possible(self, request: JobRequest, flavour: str, cohort: str, deficit: int) -> bool:
        """A quick bound before any search: could preempting every borrower the job may take restore its
        cohort's pool at all? (Borrowers inside their minimum run time, already leaving or non-preemptible — a
        borrowed notebook — do not count.)"""
        key = (flavour, cohort)
        by_team = self._borrowed_units.get(key)
        if by_team is None:
            by_team = {}
            for v in self._candidates_for(flavour, Band.GUARANTEED):
                team = v.job.request.team
                other = self.work.snapshot.teams.get(team)
                if (not v.scavenger and v.job.admitted_as is AdmittedAs.BORROWED and v.job.request.preemptible
                        and other is not None and other.cohort == cohort and v.id not in self.work.leaving):
                    by_team[team] = by_team.get(team, 0) + v.job.request.units
            self._borrowed_units[key] = by_team
        return deficit <= sum(by_team.values()) - by_team.get(request.team, 0)

    # -- the search ------------------------------------------------------------------------------------------

    def _cheapest_victims(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
                          eligible: list[Victim], band: Band) -> VictimChoice:
        """The one victim search with one cost. A reclaim looks at borrowers near its size first, and takes the
        lesser evil when the cheapest set is out of proportion."""
        request = pending.request
        reclaim_only = verdict.reclaim and band is not Band.CRITICAL
        oversize = None
        if reclaim_only:
            # Borrowers no more than twice what the reclaim needs first: stopping a far larger gang frees GPUs
            # nobody here needs, and that gang cannot come back until the cohort can lend it all again.
            oversize = _oversize(request, verdict)
            eligible = sorted(eligible, key=lambda v: (v.job.request.units > oversize, v.key))
        found = self._search(pending, pool, verdict, ctx, small, eligible, oversize)
        if reclaim_only and found is not None and not self._proportionate(pending, verdict, found):
            # The lesser evil: borrowers near its size inside their minimum run time, not a far larger gang.
            cohort = self.work.snapshot.teams[request.team].cohort
            found = self._search(pending, pool, verdict, ctx, small,
                                 self._young_borrowers(pending, pool, verdict, band, cohort))
            return VictimChoice(found, none_for_shape=False)
        return VictimChoice(found, none_for_shape=found is None)

    def _search(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
                eligible: list[Victim], oversize: int | None = None) -> Found | None:
        """The cheapest victims among ``eligible`` that let the job in (quota included), or ``None``.

        The answer is kept while no verb changes the working copy: jobs of one shape and team that wait in a row
        (a sweep's trials reclaiming their quota) ask the very same question, and a search leaves the copy as it
        found it. The key holds everything a search reads besides the copy."""
        if not eligible:
            return None
        request = pending.request
        ledger, held = self.work.ledger, self.work.held.now
        key = (pool.flavour, request.shape, request.team, ctx, small, verdict.reclaim, oversize,
               tuple(v.id for v in eligible), tuple(held))
        hit = self._searched.get(key)
        if hit is not None and hit[0] == self.work.version:
            return hit[1]
        undo = ledger.hold(held) if held else None
        try:
            target = ledger.reclaim_target(request, pool.flavour) if verdict.reclaim else None
            search = VictimSearch(self.work.cap, ledger, pool, request, ctx, small, target, self._spots, oversize)
            found = search.run(eligible)
        finally:
            if undo is not None:
                undo()
        self._searched[key] = (self.work.version, found)
        return found

    def _proportionate(self, pending: PendingJob, verdict: Verdict, found: Found) -> bool:
        """A reclaim, or a job stopping others for room now, stops at most four times what it needs (or 64 units
        more), until the job has waited ``reclaim_patience_s``: a 1-GPU job does not stop a 1,024-GPU gang —
        whose GPUs would then idle, the gang unable to come back — while smaller borrowers will soon pass their
        minimum run time or end, and units come back as jobs end (on Tuesday seed 7 an 8-GPU job stopped a
        256-GPU gang, assembled by 19 moves an hour before, for a node that freed 20 s later)."""
        stopped = sum(v.job.request.units for v in found.victims if not v.scavenger)
        return (stopped <= proportionate_units(_reclaim_need(pending.request, verdict))
                or self.now >= patience_ends(pending, self.config))

    def _moves(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
               eligible: list[Victim], found: Found) -> Found | None:
        """``found``, or the next cheapest set of moves, with every moved job able to restart elsewhere now and
        no more of them than ``_max_moves``: a job with nowhere to go is left out and the search runs again
        (``_MIGRATE_RETRIES`` times at most); ``None`` when no such set turns up."""
        limit = _max_moves(pending.request, self.config)
        for _ in range(_MIGRATE_RETRIES):
            if len(found.victims) > limit:
                return None
            stuck = self.stuck(pending.request, found)
            if stuck is None:
                return found
            eligible = [v for v in eligible if v.id != stuck]
            retry = self._search(pending, pool, verdict, ctx, small, eligible)
            if retry is None:
                return None
            found = retry
        return None

    def stuck(self, request: JobRequest, found: Found) -> str | None:
        """The first job ``found`` moves that does not fit now outside the gang's placement (placing them one
        after another), or ``None`` when they all do."""
        cap = self.work.cap
        pool = cap.pools[found.placement.flavour]
        # Units are bits: the moved jobs leave before the gang takes their units, and come back after it gives
        # them up (occupying the gang over them and releasing it would free their units too).
        for v in found.victims:
            cap.release(v.job.request, v.job.placement)
        cap.occupy(request, found.placement)
        placed: list[tuple[JobRequest, Placement]] = []
        try:
            for v in found.victims:
                moved = v.job.request
                ctx = PlaceContext(end=self.now + moved.time_limit_s)
                spot = place(cap, pool, moved, ctx, is_small(moved, self.config.small_job_max_units))
                if spot is None:
                    return moved.id
                cap.occupy(moved, spot)
                placed.append((moved, spot))
            return None
        finally:
            for moved, spot in reversed(placed):
                cap.release(moved, spot)
            cap.release(request, found.placement)
            for v in reversed(found.victims):
                cap.occupy(v.job.request, v.job.placement)

    def _worth_it(self, request: JobRequest, flavour: str, found: Found, slot: Slot | None) -> bool:
        """Preempting for a far-off reservation pays when it loses fewer GPU-hours than the job would wait."""
        if slot is None:
            return True
        longest = max((grace(v.job) for v in found.victims), default=0.0)
        speed = FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0
        saved = request.units * speed * max(0.0, slot.start - (self.now + longest)) / 3600.0
        return found.gpu_hours < saved

    # -- jobs already leaving --------------------------------------------------------------------------------

    def _wait_for_leaving(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext,
                          small: bool) -> VictimsPending | None:
        """Before stopping anyone: would the job fit once jobs that are already leaving have gone? Then it
        claims them and waits, as if it had preempted them (the controller need not remember whom a job
        preempted, and two cycles never preempt twice for one job)."""
        request = pending.request
        key = (pool.flavour, request.shape, ctx.widened, ctx.block_cap, request.team, verdict.reclaim)
        if key in self._unsettled or ctx.avoid or ctx.restart_block is not None:
            return None
        unclaimed = self._unclaimed_leaving(pool.flavour)
        g = request.units_per_pod
        if (not unclaimed.victims or verdict.deficit > unclaimed.borrowed
                or unclaimed.units + pool.free_units < request.units
                or (request.pods == 1 and not any(pool.free[j] + n >= g and pool.usable[j] and not pool.spare[j]
                                                  for j, n in unclaimed.per_node.items()))):
            self._unsettled.add(key)
            return None
        found = self._settle(request, pool, verdict, ctx, small, unclaimed.victims)
        if found is None:
            self._unsettled.add(key)
            return None
        assert verdict.admitted_as is not None
        by = max(self.work.leaving[v.id] for v in found.victims)
        self.claimed.update(v.id for v in found.victims)
        self.work.commit(request, pool.flavour, verdict.admitted_as)
        self.work.hold_for_victims(request, self._slot(pool, by, found))
        return VictimsPending(f"waiting for {len(found.victims)} job(s) already signalled to exit, within "
                              f"{format_duration(by - self.now)}", by)

    def _settle(self, request: JobRequest, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
                leaving: list[Victim]) -> Found | None:
        """The fewest of ``leaving`` (soonest gone first) the job fits once they have gone, or None."""
        ledger, held = self.work.ledger, self.work.held.now
        undo = ledger.hold(held) if held else None
        try:
            target = ledger.reclaim_target(request, pool.flavour) if verdict.reclaim else None
            search = VictimSearch(self.work.cap, ledger, pool, request, ctx, small, target, self._spots)
            return search.settle(leaving, self.work.leaving)
        finally:
            if undo is not None:
                undo()

    def _unclaimed_leaving(self, flavour: str) -> _Unclaimed:
        """Leaving jobs nobody counts on yet, with cheap bounds for ``_wait_for_leaving``: their units, their
        borrowed units (what they give back to quota; a team's own leaving jobs count too) and units per node."""
        key = (flavour, len(self.work.leaving), len(self.claimed))
        hit = self._unclaimed.get(key)
        if hit is None:
            leaving = [e.victim for e in self._leaving_victims(flavour) if e.victim.id not in self.claimed]
            per_node: dict[int, int] = {}
            for v in leaving:
                for j, n in self._spots[v.id]:
                    per_node[j] = per_node.get(j, 0) + n
            units = sum(v.job.request.units for v in leaving)
            borrowed = sum(v.job.request.units for v in leaving if v.job.admitted_as is not AdmittedAs.SCAVENGER)
            hit = _Unclaimed(leaving, units, borrowed, per_node)
            self._unclaimed[key] = hit
        return hit

    def _leaving_victims(self, flavour: str) -> list[_LeavingEntry]:
        """Jobs on ``flavour`` that are leaving (signalled before or during this cycle), soonest gone first;
        built once, then caught up with the jobs the working copy released since (``WorkingCopy.released``).

        A log the stage reads, not a callback the working copy calls: a callback would tie the working copy and
        this stage in a reference cycle, and every pass's whole working copy would then wait for the cyclic
        garbage collector instead of being freed when the pass returns."""
        lists = self._leaving_lists
        released = self.work.released
        if lists is None:
            lists = self._leaving_lists = {}
            for job in self.work.running:
                if job.request.id in self.work.leaving:
                    self._add_leaving(job, self.work.leaving[job.request.id])
        else:
            for job, until in released[self._released_seen:]:
                self._add_leaving(job, until)
        self._released_seen = len(released)
        return lists.get(flavour, [])

    def _add_leaving(self, job: RunningJob, until: float) -> None:
        assert self._leaving_lists is not None
        v = self._victim(job)
        insort(self._leaving_lists.setdefault(job.placement.flavour, []), _LeavingEntry(until, v.id, v))

    # -- signalling ------------------------------------------------------------------------------------------

    def _signal(self, pending: PendingJob, pool: Pool, verdict: Verdict, found: Found, strategy: Strategy,
                band: Band) -> VictimsPending:
        """Stop ``found``'s victims and hold their units for the job, counted as if it ran."""
        request = pending.request
        assert verdict.admitted_as is not None
        latest = self.now
        for v in found.victims:
            job = v.job
            other = self.work.snapshot.teams.get(job.request.team)
            wait = grace(job)
            if job.admitted_as is AdmittedAs.BORROWED and other is not None:
                by_team = self._borrowed_units.get((job.placement.flavour, other.cohort))
                if by_team is not None and job.request.team in by_team:
                    by_team[job.request.team] -= job.request.units
            avoid = found.placement.nodes if strategy is Strategy.MIGRATE else ()
            self.work.preempt(job, Preempt(job.request.id, self._reason(request, verdict, job, strategy, band),
                                           wait, requeue=True, for_job=request.id, avoid=avoid))
            self.claimed.add(job.request.id)
            latest = max(latest, self.now + wait)
        self.work.commit(request, pool.flavour, verdict.admitted_as)
        self.work.hold_for_victims(request, self._slot(pool, latest, found))
        return VictimsPending(f"preempting {len(found.victims)} job(s) ({found.gpu_hours:.1f} GPU-hours at risk); "
                              f"starts when they exit, within {format_duration(latest - self.now)}", latest)

    def _reason(self, request: JobRequest, verdict: Verdict, job: RunningJob, strategy: Strategy,
                band: Band) -> PreemptReason:
        """Why ``job`` is stopped for ``request``, as the victim is told."""
        if strategy is Strategy.RESERVATION:
            return PreemptReason.RESERVATION
        if strategy is Strategy.MIGRATE:
            return PreemptReason.DEFRAGMENT
        teams = self.work.snapshot.teams
        other = teams.get(job.request.team)
        if (job.admitted_as is AdmittedAs.BORROWED and band >= Band.GUARANTEED
                and verdict.admitted_as is AdmittedAs.NOMINAL and other is not None
                and other.cohort == teams[request.team].cohort):
            return PreemptReason.RECLAIM
        return PreemptReason.HIGHER_BAND

    def _slot(self, pool: Pool, start: float, found: Found) -> Slot:
        """The units ``found`` places the job on, from ``start``."""
        index = self.work.cap.index
        return Slot(pool.flavour, start, tuple((pool.pos[index[p.node]], p.units) for p in found.placement.pods))


def _reclaim_need(request: JobRequest, verdict: Verdict) -> int:
    """What a reclaim needs: the job's size, or its cohort's deficit if larger."""
    return max(request.units, verdict.deficit)


def proportionate_units(need: int) -> int:
    """The most a reclaim that needs ``need`` units should stop before it has waited ``reclaim_patience_s``
    (:func:`patience_ends`): four times what it needs, or 64 units more."""
    return max(4 * need, need + 64)


def patience_ends(pending: PendingJob, config: PolicyConfig) -> float:
    """When a reclaim may stop borrowers out of proportion to it (:meth:`Preemptor._proportionate`)."""
    return pending.queued_at + config.reclaim_patience_s


def after_patience(pending: PendingJob, config: PolicyConfig, count: int, most_grace: float, *,
                   reclaim: bool) -> ReclaimEstimate:
    """When ``count`` victims out of proportion to ``pending`` will have left: its patience, then the longest
    of their graces; ``reclaim``: they are borrowers it reclaims from, else jobs it stops for room."""
    waited, stopped = ("borrowers near its size", "borrowed job(s)") if reclaim else ("room", "job(s)")
    return ReclaimEstimate(patience_ends(pending, config) + most_grace,
                           f"after it has waited {format_duration(config.reclaim_patience_s)} for {waited}: then "
                           f"{count} far larger {stopped} are stopped for it")


def _max_moves(request: JobRequest, config: PolicyConfig) -> int:
    """How many jobs a gang may move out of its way: ``migrate_max_moves`` per 512 units it needs. A
    1,024-GPU gang waits for whole nodes on which the sweep trials it was reclaimed for have scattered; moving
    them costs each a checkpoint, and waiting for them to end costs the gang's 1,024 GPUs the while."""
    return config.migrate_max_moves * max(1, request.units // 512)


def _oversize(request: JobRequest, verdict: Verdict) -> int:
    """Victims larger than this are far larger than a reclaim needs: twice what it needs."""
    return 2 * _reclaim_need(request, verdict)
