"""Nominate: what quota and placement say about one job this pass (Kueue's flavour assigner).

:meth:`Nominator.quota` asks the quota ledger about each of the job's flavours in its order of preference and
returns a :class:`QuotaNomination`; :meth:`Nominator.placement` tries to place the job on the flavours quota
allows and returns a :class:`PlacementNomination`: where it starts now, or a :class:`FlavourMiss` per flavour
saying why not (misses of identical shapes are shared for the rest of the pass: free units only shrink and
reservations only grow within one). Nothing here changes the working copy; the cycle applies what it chooses."""

from __future__ import annotations

from dataclasses import replace

from ..model.durations import format_duration
from ..model.job import PriorityClass
from .capacity import Pool
from .contexts import JobContexts
from .decisions import Reason
from .placement import Fit, Miss, PlaceContext, explain, place
from .quota import Verdict
from .record import record
from .reservation import job_end
from .snapshot import AdmittedAs, Band, JobRequest, PendingJob, Placement, RunningJob
from .stage_explain import PlanOption
from .working_copy import WorkingCopy

#: How close to running each reason is: the job's reason is that of its most promising flavour.
REASON_RANK = {
    Reason.INVALID_FLAVOUR: 0, Reason.QUOTA_FULL: 1, Reason.COHORT_FULL: 2, Reason.NODE_UNHEALTHY: 3,
    Reason.WAITING_FOR_CAPACITY: 4, Reason.WAITING_FOR_TOPOLOGY: 5, Reason.BEHIND_RESERVATION: 6,
    Reason.PREEMPTING_VICTIMS: 7,
}

#: Reasons that capacity coming back resolves: a reservation can wait them out.
CAPACITY_REASONS = frozenset({Reason.WAITING_FOR_CAPACITY, Reason.WAITING_FOR_TOPOLOGY,
                              Reason.BEHIND_RESERVATION, Reason.NODE_UNHEALTHY})

#: A non-preemptible job's verdict when it borrows what the cohort's idle quota can spare for good.
_UNRECLAIMABLE = Verdict(AdmittedAs.BORROWED)


@record
class ShapedPools:
    """The pools a job's pods fit on, or why there are none (``problem``: the message of ``InvalidFlavour``)."""

    pools: list[Pool]
    problem: str | None


@record
class QuotaOption:
    """A flavour quota lets the job use; ``relabel``: only once these jobs of its team count as borrowed."""

    flavour: str
    pool: Pool
    verdict: Verdict
    relabel: list[RunningJob] | None = None


@record
class RefusalReason:
    """The most promising quota refusal so far (ties: the flavour listed first)."""

    rank: int
    index: int
    reason: Reason
    message: str


@record
class QuotaNomination:
    """The quota stage's outcome: usable flavours, refused ones the plan may use later, the best refusal."""

    options: list[QuotaOption]
    refused: list[PlanOption]
    best: RefusalReason | None


@record
class FlavourMiss:
    """Why a job that passed quota on ``flavour`` (``index`` in its order of preference) does not start there."""

    index: int
    flavour: str
    pool: Pool
    verdict: Verdict
    miss: Miss


@record
class PlacedFit:
    """Where the job starts now, and as what."""

    option: QuotaOption
    placement: Placement
    admitted_as: AdmittedAs


@record
class PlacementNomination:
    """The placement stage's outcome: a fit now, or why each flavour missed."""

    fit: PlacedFit | None
    misses: list[FlavourMiss]


@record
class _NominalRoom:
    """A non-preemptible job's way in as nominal: the team's own preemptible ``jobs`` relabelled borrowed.
    ``verdict``: what quota says once they are, ``None`` while the cohort cannot lend for them."""

    verdict: Verdict | None
    jobs: list[RunningJob]


@record
class _NominalFit:
    version: int
    fits: bool


@record
class _CachedMiss:
    """A shape's miss, valid for jobs ending no sooner than ``end`` (or always when it is ``NO_FIT``)."""

    miss: Miss
    end: float

    def holds_for(self, end: float) -> bool:
        return self.miss.fit is Fit.NO_FIT or end >= self.end


class Nominator:
    """Quota and placement options for each job, on the pass's working copy."""

    def __init__(self, work: WorkingCopy, contexts: JobContexts) -> None:
        self.work = work
        self.contexts = contexts
        self.now = work.now
        self._nominal_fit: dict[tuple[str, int, tuple[str, ...]], _NominalFit] = {}
        self._miss_cache: dict[tuple[object, ...], _CachedMiss] = {}
        self._by_team: dict[tuple[str, str], list[RunningJob]] | None = None     # running jobs per (team, flavour)
        self._newest: dict[tuple[str, str], list[RunningJob]] = {}              # the same, the newest first

    # -- order -----------------------------------------------------------------------------------------------

    def band_hint(self, job: PendingJob) -> Band:
        """The band a job would run in if admitted now: what orders it against other teams' work (asked for
        every job the order hands out)."""
        request = job.request
        priority = request.priority_class
        if priority is PriorityClass.CRITICAL:
            return Band.CRITICAL
        if priority is PriorityClass.SCAVENGER:
            return Band.SCAVENGER
        return Band.GUARANTEED if self._fits_nominal(request) else Band.BORROWED

    def _fits_nominal(self, request: JobRequest) -> bool:
        ledger = self.work.ledger
        key = (request.team, request.units, request.flavours)
        version = ledger.version.get(request.team, 0)
        hit = self._nominal_fit.get(key)
        if hit is not None and hit.version == version:
            return hit.fits
        state = self.work.snapshot.teams.get(request.team)
        fits = False
        if state is not None:
            usage = ledger.nominal_usage
            for f in request.flavours:
                quota = state.quotas.get(f)
                if quota is not None and usage.get((request.team, f), 0) + request.units <= quota.nominal:
                    fits = True
                    break
        self._nominal_fit[key] = _NominalFit(version, fits)
        return fits

    # -- quota -----------------------------------------------------------------------------------------------

    def shaped_pools(self, request: JobRequest) -> ShapedPools:
        """The pools of the job's flavours that exist here and have nodes large enough for one of its pods."""
        all_pools = self.work.cap.pools
        pools = [(f, all_pools[f]) for f in request.flavours if f in all_pools]
        if not pools:
            return ShapedPools([], f"none of {', '.join(request.flavours)} exists in this cluster")
        shaped = [pool for _, pool in pools if 0 < request.units_per_pod <= pool.max_cap]
        if not shaped:
            return ShapedPools([], f"no node has {request.units_per_pod} units of {' or '.join(f for f, _ in pools)}")
        return ShapedPools(shaped, None)

    def quota(self, request: JobRequest, pools: list[Pool], *, nominal_first: bool = False) -> QuotaNomination:
        """What quota says on each flavour, in the job's order of preference: the flavours it may use (some only
        once its team's own preemptible jobs give it their nominal quota; a non-preemptible job's also borrowed,
        while the cohort keeps enough idle, see ``QuotaLedger.verdict``), those refused that the plan may
        start it on later, and the most promising refusal. Counts the reservations' quota the job overlaps
        (``WorkingCopy.held``). ``nominal_first``: a gang that has waited ``starvation_after_s`` or is as large
        as a block (``JobContexts.nominal_first``); where quota would let it in only as a borrower, it is first
        offered its team's nominal, relabelling the team's own newer preemptible work borrowed (see
        :meth:`_nominal_room`)."""
        held = self.work.held
        options: list[QuotaOption] = []
        refused: list[PlanOption] = []
        best: RefusalReason | None = None
        for index, pool in enumerate(pools):
            f = pool.flavour
            verdict = self.work.ledger.verdict(request, f, held.extra, held.nominal_only_keys, held.nominal_extra,
                                               self.work.kept_share(request, f))
            if verdict.admitted_as is not None:
                if nominal_first and verdict.admitted_as is AdmittedAs.BORROWED:
                    room = self._nominal_room(request, f)
                    if room is not None and room.verdict is not None:
                        options.append(QuotaOption(f, pool, room.verdict, relabel=room.jobs))
                options.append(QuotaOption(f, pool, verdict))
                continue
            assert verdict.reason is not None
            room = (self._nominal_room(request, f)
                    if verdict.reason is Reason.QUOTA_FULL and not request.preemptible else None)
            if verdict.unreclaimable:
                # Taking the team's own nominal back from its preemptible work comes first (it lends nothing) when
                # that starts the job now; else it waits as the borrower the allowance lets in, as it would if the
                # team had no such work (dropping the option left it waiting for quota, its slot given away).
                if room is not None and room.verdict is not None:
                    options.append(QuotaOption(f, pool, room.verdict, relabel=room.jobs))
                options.append(QuotaOption(f, pool, _UNRECLAIMABLE))
                continue
            best = _better(best, index, verdict.reason, verdict.message)
            if verdict.reason in (Reason.QUOTA_FULL, Reason.COHORT_FULL):
                refused.append(PlanOption(f, verdict.reason, False, (request.team, f) in held.nominal_only_keys,
                                          by_relabel=room is not None))
            if room is not None and room.verdict is not None:
                options.append(QuotaOption(f, pool, room.verdict, relabel=room.jobs))
        return QuotaNomination(options, refused, best)

    def _nominal_room(self, request: JobRequest, flavour: str) -> _NominalRoom | None:
        """For a job whose team's nominal quota is held by the team's own preemptible work — a non-preemptible
        job refused, or a gang that could only borrow (``nominal_first``) — the fewest of those jobs (the newest
        first) that, relabelled borrowed, let it in as nominal now without reclaim — that is, when the cohort can
        lend for them (until it can, the room has no verdict: the plan then estimates the job as if it borrowed). The
        team's guarantee goes to the work that cannot checkpoint, or that waited longest; the relabelled jobs keep
        running, now reclaimable. A gang admitted as a borrower instead would be the first a morning's reclaim
        stops, and wait its reservation again behind the team's younger work (the festive week's daily
        1,024-GPU jobs, docs/BENCHMARKS.md)."""
        work, held = self.work, self.work.held
        state = work.snapshot.teams.get(request.team)
        quota = state.quotas.get(flavour) if state else None
        if quota is None or request.priority_class is PriorityClass.SCAVENGER:
            return None
        key = (request.team, flavour)
        if key in held.nominal_only_keys:
            return None                      # a reserved non-preemptible job of the team claims that nominal
        need = (work.ledger.nominal_usage.get(key, 0) + max(0, held.nominal_extra.get(key, 0))
                + request.units - quota.nominal)
        if need <= 0:
            return None                      # refused for something else (the borrowing limit)
        chosen = self._newest_to_relabel(key, need)
        if chosen is None:
            return None
        for job in chosen:
            work.ledger.relabel(job.request, flavour, AdmittedAs.NOMINAL, AdmittedAs.BORROWED, bump=False)
        try:
            verdict = work.ledger.verdict(request, flavour, held.extra, held.nominal_only_keys, held.nominal_extra)
        finally:
            for job in chosen:
                work.ledger.relabel(job.request, flavour, AdmittedAs.BORROWED, AdmittedAs.NOMINAL, bump=False)
        return _NominalRoom(verdict if verdict.admitted_as is AdmittedAs.NOMINAL and not verdict.reclaim else None,
                            chosen)

    def _newest_to_relabel(self, key: tuple[str, str], need: int) -> list[RunningJob] | None:
        """The team's newest nominal preemptible jobs on the flavour that free ``need`` units, or None."""
        work = self.work
        newest = self._newest.get(key)
        if newest is None:                   # sorted when first asked: a pass asks of a few teams only
            if self._by_team is None:
                self._by_team = {}
                for job in work.running:
                    self._by_team.setdefault((job.request.team, job.placement.flavour), []).append(job)
            newest = self._newest[key] = sorted(self._by_team.get(key, ()),
                                                key=lambda job: (-job.started_at, job.request.id))
        # A job that ends before the first reservation this one would outlive has already given that
        # reservation its nominal quota (``WorkingCopy.overlap``): relabelling it frees nothing this job may keep.
        first_hold = work.held.first_start
        mine = [job for job in newest
                if job.admitted_as is AdmittedAs.NOMINAL and job.request.preemptible and not job.terminating
                and job.request.id not in work.leaving and job.request.id not in work.relabelled
                and (first_hold is None or job_end(job, self.now) > first_hold)]
        chosen: list[RunningJob] = []
        for job in mine:
            if need <= 0:
                break
            chosen.append(job)
            need -= job.request.units
        return None if need > 0 else chosen

    # -- placement -------------------------------------------------------------------------------------------

    def placement(self, pending: PendingJob, options: list[QuotaOption], ctx: PlaceContext, small: bool,
                  inflight: bool) -> PlacementNomination:
        """The first flavour the job fits now without preemption, else why it fits none (misses cached per
        shape). A flavour it may use only by relabelling is only worth it if the job starts now.

        A nominal job whose quota is lent out (``Verdict.reclaim``) is placed like any other: on free units it
        starts at once and stops nobody. The cohort's borrowers then give the quota back by ending, and the
        cohort lends nothing until they have (its pool is below zero, so ``QuotaLedger.verdict`` refuses every
        borrower), as YARN's preemption counts on containers ending by themselves before it kills any. Stopping a
        borrower for quota alone freed units the lender did not need, which then idled: on the Tuesday the
        1,024-GPU gang, stopped for a 1-GPU trial, spent an hour reassembling (docs/BENCHMARKS.md, session 35).
        Only when it misses the free units does it reclaim (:func:`_reclaim_miss`)."""
        request = pending.request
        cap = self.work.cap
        misses: list[FlavourMiss] = []
        for index, option in enumerate(options):
            pool, verdict = option.pool, option.verdict
            if option.relabel is not None:
                placement = place(cap, pool, request, ctx, small)
                if placement is not None:
                    return PlacementNomination(PlacedFit(option, placement, AdmittedAs.NOMINAL), [])
                continue
            miss = self._known_miss(pending, pool, ctx)
            if miss is None:
                placement = place(cap, pool, request, ctx, small)
                if placement is not None:
                    assert verdict.admitted_as is not None
                    return PlacementNomination(PlacedFit(option, placement, verdict.admitted_as), [])
                miss = self._miss(pending, pool, ctx, small)
            if verdict.reclaim and not inflight:
                miss = _reclaim_miss(miss, option.flavour)
            misses.append(FlavourMiss(index, option.flavour, pool, verdict, miss))
        return PlacementNomination(None, misses)

    def _known_miss(self, pending: PendingJob, pool: Pool, ctx: PlaceContext) -> Miss | None:
        """The cached miss of an identical shape, when it still holds (see :meth:`_miss`)."""
        if ctx.avoid or ctx.restart_block is not None:
            return None
        hit = self._miss_cache.get((pool.flavour, pending.request.shape, ctx.widened, ctx.block_cap))
        if hit is not None and hit.holds_for(ctx.end):
            return hit.miss
        return None

    def _miss(self, pending: PendingJob, pool: Pool, ctx: PlaceContext, small: bool) -> Miss:
        """Why the job does not fit ``pool``; identical shapes share the answer for the rest of the cycle
        (free units only shrink and reservations only grow within a cycle, so a miss stays a miss)."""
        request = pending.request
        cap = self.work.cap
        cacheable = not ctx.avoid and ctx.restart_block is None
        key = (pool.flavour, request.shape, ctx.widened, ctx.block_cap)
        if cacheable:
            hit = self._miss_cache.get(key)
            if hit is not None and hit.holds_for(ctx.end):
                return hit.miss
        miss = explain(cap, pool, request, ctx, small, self.now, self.contexts.widen_at(pending))
        if ctx.avoid and miss.fit is Fit.NO_FIT and place(cap, pool, request, replace(ctx, avoid=frozenset()),
                                                          small) is not None:
            left = ", ".join(sorted(pending.avoid_nodes))
            until = self.contexts.avoid_until(pending)
            miss = replace(miss, message=f"fits only on nodes it left after a failure or a move ({left}); may use "
                                         f"them in {format_duration(until - self.now)}")
        if cacheable:
            self._miss_cache[key] = _CachedMiss(miss, ctx.end)
        return miss


def _reclaim_miss(miss: Miss, flavour: str) -> Miss:
    """Why a job whose quota is lent out, and which misses the free units, does not start now: it reclaims (the
    preempt stage looks for borrowers to stop, whose units it then takes: ``NO_FIT`` lets it), and if it finds
    none it waits for them — or, where free units are there but a reservation or a job waiting for its victims
    holds them (``DEFERRED``), behind that job, as its reason says (the liveness property found it told only that
    no borrower could be stopped)."""
    if miss.fit is Fit.DEFERRED:
        return replace(miss, fit=Fit.NO_FIT)
    return Miss(Fit.NO_FIT, Reason.WAITING_FOR_CAPACITY,
                f"fits the team's nominal {flavour} quota, which is lent out, but not the free units; no borrower "
                f"can be stopped for it yet (all inside their minimum run time, far larger than this job, or "
                f"notebooks, which give their slices back when they end or go idle)")


def _better(best: RefusalReason | None, index: int, reason: Reason, message: str) -> RefusalReason:
    """Keep the most promising reason (ties: the flavour listed first)."""
    rank = REASON_RANK[reason]
    if best is None or (rank, -index) > (best.rank, -best.index):
        return RefusalReason(rank, index, reason, message)
    return best
