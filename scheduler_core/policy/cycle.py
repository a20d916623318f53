"""``run_cycle(snapshot, now) -> CycleResult``: every scheduling decision, as one pure function.

It reads the snapshot and ``now`` and nothing else (no clock, no I/O, no global random state) and returns
decisions; nothing changes until the caller applies them. Inside, a working copy of the cluster is changed as
the cycle goes, so each admission, each simulated preemption and each reservation is seen by the jobs after
it. The phases follow Kueue's scheduler: index the snapshot, enforce time limits, order the queues, then for
each job nominate (quota, then placement), fall back to preemption or a reservation, and finally explain
every job that does not start. ``docs/scheduling.md`` tells the story for a new engineer.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

from ..model.durations import format_duration
from ..model.flavours import FLAVOURS
from ..model.job import PriorityClass, TopologyLevel
from .capacity import Capacity, Pool
from .carried import Working
from .decisions import Admit, CycleResult, Preempt, PreemptReason, Reason, Relabel, Reserve, Wait
from .defrag import fragmented, moves_in_flight, plan_moves
from .estimates import expected_duration, expected_end, idle_release
from .fairshare import cluster_capacity, dominant_share, request_rates
from .ordering import TeamOrder, band_hint, team_queues
from .placement import Fit, Miss, PlaceContext, explain, is_small, occupy, place
from .preemption import Found, Victim, VictimSearch, is_scavenger, may_preempt, victim
from .quota import QuotaClock, QuotaLedger, Verdict, may_borrow
from .reservation import Slot, Timeline, add_holds, job_end
from .snapshot import (AdmittedAs, Band, JobRequest, PendingJob, Placement, Plan, PolicyConfig, RunningJob, Snapshot,
                       band_of)

#: How close to running each reason is: the job's reason is that of its most promising flavour.
_REASON_RANK = {
    Reason.INVALID_FLAVOUR: 0, Reason.QUOTA_FULL: 1, Reason.COHORT_FULL: 2, Reason.NODE_UNHEALTHY: 3,
    Reason.WAITING_FOR_CAPACITY: 4, Reason.WAITING_FOR_TOPOLOGY: 5, Reason.BEHIND_RESERVATION: 6,
    Reason.PREEMPTING_VICTIMS: 7,
}


class Strategy(Enum):
    """How a job preempts (:meth:`_Cycle._try_preempt`): the one victim search, three ways of using it."""

    NOW = "now"                      # reclaim, critical, single node; gangs only over scavenger work
    RESERVATION = "reservation"      # a gang whose reservation is far off, when that costs fewer GPU-hours
    MIGRATE = "migrate"              # move smaller jobs off the nodes a waiting gang needs, to room elsewhere


@dataclass(frozen=True, slots=True)
class PlanOption:
    """A flavour the plan may start a waiting job on, with what holds it back besides capacity.

    ``quota_reason``: the quota reason holding it back, or None; ``reclaim``: it waits for borrowers to be
    reclaimable; ``nominal_only``: it must fit within nominal (a reserved non-preemptible job of its team needs
    the nominal quota)."""

    flavour: str
    quota_reason: Reason | None
    reclaim: bool
    nominal_only: bool


@dataclass(frozen=True, slots=True)
class FlavourMiss:
    """Why a job that passed quota on ``flavour`` (``index`` in its order of preference) does not start there."""

    index: int
    flavour: str
    pool: Pool
    verdict: Verdict
    miss: Miss


@dataclass(frozen=True, slots=True, order=True)
class QuotaHold:
    """A reservation's quota, from ``start``: what backfill must leave it (ordered by start, for bisection)."""

    start: float
    team: str
    flavour: str
    units: int
    nominal_only: bool


@dataclass(frozen=True, slots=True)
class NominalRoom:
    """A non-preemptible job's way in as nominal: the team's own preemptible ``jobs`` relabelled borrowed."""

    verdict: Verdict
    jobs: list[RunningJob]


@dataclass(frozen=True, slots=True)
class ReclaimEstimate:
    """When enough borrowers have left for a reclaim, and what that estimate counts on, in words."""

    at: float
    note: str


@dataclass(frozen=True, slots=True)
class Guess:
    """The likely timeline and quota clock (``_Cycle._guess``)."""

    timeline: Timeline
    clock: QuotaClock


@dataclass(frozen=True, slots=True)
class _Best:
    """The most promising quota reason so far (``_better``)."""

    rank: int
    index: int
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class _SlotChoice:
    """The earliest reservable slot among a job's misses, and the miss it belongs to."""

    slot: Slot
    entry: FlavourMiss


@dataclass(frozen=True, slots=True)
class _NominalFit:
    version: int
    fits: bool


@dataclass(frozen=True, slots=True)
class _CachedMiss:
    """A shape's miss, valid for jobs ending no sooner than ``end`` (or always when it is ``NO_FIT``)."""

    miss: Miss
    end: float

    def holds_for(self, end: float) -> bool:
        return self.miss.fit is Fit.NO_FIT or end >= self.end


@dataclass(frozen=True, slots=True)
class _HeldExtra:
    """Reserved quota a job would overlap, less what running jobs free by then (``_Cycle.process``)."""

    extra: dict[tuple[str, str], int]
    nominal_extra: dict[tuple[str, str], int]
    nominal_only_keys: frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class _Ending:
    end: float
    job: RunningJob


@dataclass(frozen=True, slots=True)
class _Unclaimed:
    """Leaving jobs nobody counts on yet, with bounds: their units, borrowed units and units per node."""

    victims: list[Victim]
    units: int
    borrowed: int
    per_node: dict[int, int]


@dataclass(frozen=True, slots=True, order=True)
class _Borrower:
    """A borrower a reclaim may wait for: when it may go, its team and units, and what holds it."""

    at: float
    team: str
    units: int
    holder: str


@dataclass(frozen=True, slots=True, order=True)
class _LeavingEntry:
    until: float
    id: str
    victim: Victim = field(compare=False)


@dataclass(frozen=True, slots=True)
class ShapedPools:
    """The pools a job's pods fit on, or why there are none (``problem``: the message of ``InvalidFlavour``)."""

    pools: list[Pool]
    problem: str | None


@dataclass(frozen=True, slots=True)
class QuotaOption:
    """A flavour quota lets the job use; ``relabel``: only once these jobs of its team count as borrowed."""

    flavour: str
    pool: Pool
    verdict: Verdict
    relabel: list[RunningJob] | None = None


@dataclass(frozen=True, slots=True)
class QuotaNomination:
    """The quota stage's outcome: usable flavours, refused ones the plan may use later, the best refusal."""

    options: list[QuotaOption]
    refused: list[PlanOption]
    best: _Best | None


@dataclass(frozen=True, slots=True)
class PlacedFit:
    """Where the job starts now, and as what."""

    option: QuotaOption
    placement: Placement
    admitted_as: AdmittedAs


@dataclass(frozen=True, slots=True)
class PlacementNomination:
    """The placement stage's outcome: a fit now, or why each flavour missed."""

    fit: PlacedFit | None
    misses: list[FlavourMiss]


@dataclass(frozen=True, slots=True)
class VictimChoice:
    """The victim search's outcome: the victims, or none; ``none_for_shape``: no job of this shape, band and team
    finds any this cycle (remembered, so the next one does not search)."""

    found: Found | None
    none_for_shape: bool


@dataclass(slots=True)
class _Alloc:
    """A team's current allocation: GPU-equivalents (speed-weighted), CPUs and memory (DRF)."""

    gpus: float = 0.0
    cpus: float = 0.0
    memory_gb: float = 0.0

_CAPACITY_REASONS = frozenset({Reason.WAITING_FOR_CAPACITY, Reason.WAITING_FOR_TOPOLOGY,
                               Reason.BEHIND_RESERVATION, Reason.NODE_UNHEALTHY})


def run_cycle(snapshot: Snapshot, now: float) -> CycleResult:
    """One scheduling pass over ``snapshot`` at ``now`` (DESIGN §3.2)."""
    # 1. Index: a working copy of free units, quota usage, fair shares and the timeline of returning units.
    cycle = _Cycle(snapshot, now)
    # 2. Time limits: a job at its limit is stopped, to checkpoint if it is preemptible.
    cycle.enforce_time_limits()
    # 3. Order: each team's queue (priority, front, service level, age), merged by band, then lowest DRF share.
    order = TeamOrder(cycle.queues, cycle.band_hint, cycle.share)
    # 4. Nominate and process: quota, placement (once per shape), else preemption, else a reservation.
    for job in order:
        cycle.process(job)
    # 5. Defragment: when free units are scattered and a gang waits, move a few small jobs to small-job blocks.
    cycle.defragment()
    # 6. Explain: every job that does not start gets a reason, its queue position and an estimated start
    #    (from the plan carried in the snapshot, or planned here when none is).
    if snapshot.plan is None:
        cycle.plan_waits()
    else:
        cycle.carry_plan(snapshot.plan)
    return cycle.result()


def plan(snapshot: Snapshot, now: float) -> Plan:
    """Estimated starts for every job that will not start at ``now`` (Slurm's backfill plan, on its own cadence).

    It runs the cycle's decisions on a scratch copy, then books every waiting job on the timeline in cycle
    order. Put the result in ``Snapshot.plan`` and ``run_cycle`` takes its estimates from it instead of
    planning every pass; estimates of jobs that arrived since are ``None`` until the next plan."""
    cycle = _Cycle(snapshot, now)
    cycle.enforce_time_limits()
    for job in TeamOrder(cycle.queues, cycle.band_hint, cycle.share):
        cycle.process(job)
    cycle.defragment()
    cycle.plan_waits()
    return Plan(made_at=now, estimates=cycle.estimates(),
                notes={job_id: w.note for job_id, w in sorted(cycle.waiting.items()) if w.note})


@dataclass(slots=True)
class _Waiting:
    """A job that does not start this cycle, before the plan gives it an estimated start.

    ``plan_for`` lists the flavours the plan may start it on, each with what holds it back besides capacity:
    a quota reason (it starts once the team's or cohort's jobs free quota), ``reclaim`` (once borrowers
    may be preempted), and whether it must fit within nominal quota (a reserved non-preemptible job of its
    team needs the nominal quota while both would run)."""

    job: PendingJob
    reason: Reason
    message: str
    plan_for: list[PlanOption] = field(default_factory=list)
    estimate: float | None = None
    planned: bool = False        # the estimate is fixed already (reservation, victims)
    reserved: bool = False       # planned by a reservation: the estimate may still come out sooner (``_guess``)
    note: str = ""               # what the estimate counts on, when it is a guess


@dataclass(slots=True)
class _Class:
    """What every job of one equivalence class gets for the rest of the cycle once one of them waited."""

    reason: Reason
    message: str
    plan_for: list[PlanOption]
    misses: list[FlavourMiss]
    min_limit: float
    quota: tuple[int, ...] | None      # None: refused by quota, which only tightens within a cycle
    refused: list[PlanOption] = field(default_factory=list)


def _index(snapshot: Snapshot, now: float) -> Working:
    """Free units, quota usage and the timeline of returning units: built from the snapshot, or brought up to
    date from the last pass's (``Snapshot.carried``)."""
    if snapshot.carried is None:
        cap = Capacity(snapshot.nodes, snapshot.running)
        return Working(cap, QuotaLedger(snapshot.teams, snapshot.running), Timeline(cap, snapshot.running, now),
                       cluster_capacity(snapshot.nodes))
    return snapshot.carried.working(snapshot.nodes, snapshot.teams, snapshot.running, now)


class _Cycle:
    """The mutable state of one cycle and the steps of :func:`run_cycle`."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot = snapshot
        self.now = now
        self.config = snapshot.config
        indexed = _index(snapshot, now)
        self.cap, self.ledger, self.timeline = indexed.cap, indexed.ledger, indexed.timeline
        self.capacity_totals = indexed.totals
        self._base_usage = dict(self.ledger.usage)
        self.queues = team_queues(snapshot.pending, now, self.config)
        self.alloc: dict[str, _Alloc] = {}
        self._shares: dict[str, float] = {}
        self._nominal_fit: dict[tuple[str, int, tuple[str, ...]], _NominalFit] = {}
        self.running = sorted(snapshot.running, key=lambda r: r.request.id)
        self.leaving: dict[str, float] = {}
        self.victims_for: dict[str, list[RunningJob]] = {}
        self._tally_running()
        self.admits: list[Admit] = []
        self.preempts: list[Preempt] = []
        self.reservations: list[Reserve] = []
        self.waiting: dict[str, _Waiting] = {}
        self.processed: list[str] = []
        self.blocked_reservations = 0
        self._miss_cache: dict[tuple[object, ...], _CachedMiss] = {}
        self._no_victims: set[tuple[object, ...]] = set()
        self._block_caps: dict[str, int | None] = {}
        self._candidates: dict[tuple[str, Band], list[Victim]] = {}
        self._borrowed_units: dict[tuple[str, str], dict[str, int]] = {}
        #: Leaving jobs a waiting job counts on (see ``_wait_for_leaving``), and shapes they cannot help.
        self._claimed: set[str] = set()
        self._unsettled: set[tuple[object, ...]] = set()
        self._leaving_lists: dict[str, list[_LeavingEntry]] | None = None
        self._unclaimed: dict[tuple[str, int, int], _Unclaimed] = {}
        #: Victim candidates per (flavour, band, team, mode, number of jobs leaving): the list only changes
        #: when more jobs are signalled.
        self._eligible: dict[tuple[object, ...], list[Victim]] = {}
        self._movable_cache: dict[tuple[str, int, int], list[Victim]] = {}
        self.relabels: list[Relabel] = []
        self._relabelled: set[str] = set()
        self._spots: dict[str, list[tuple[int, int]]] = {}
        self._reclaim_ready: dict[tuple[str, str, bool], list[_Borrower]] = {}
        self._clock: QuotaClock | None = None
        self._classes: dict[tuple[object, ...], _Class] = {}
        #: (end, team, flavour, units) of what this cycle admitted or committed, for the quota clock.
        self._holdings: list[tuple[float, str, str, int]] = []
        #: (start, team, flavour, units) of each reservation, for the quota side of backfill; those a job
        #: being processed would overlap if it started now.
        self._quota_holds: list[QuotaHold] = []
        self._held_now: list[tuple[str, str, int]] = []
        self._extra_now: dict[tuple[str, str], int] = {}
        self._nominal_extra_now: dict[tuple[str, str], int] = {}
        self._nominal_only_keys: frozenset[tuple[str, str]] = frozenset()
        self._held_extra: dict[tuple[int, int], _HeldExtra] = {}
        self._ended_cache: dict[float, dict[tuple[str, str], tuple[int, int]]] = {}
        self._ends: list[_Ending] | None = None
        self._by_team: dict[tuple[str, str], list[RunningJob]] | None = None
        #: What this cycle started and the slots of jobs waiting for victims, for the estimates' timeline.
        self._admitted: list[RunningJob] = []
        self._victim_slots: list[tuple[JobRequest, Slot]] = []

    def _tally_running(self) -> None:
        """Each team's allocation, and the jobs already leaving (and for whom)."""
        speed = {f: FLAVOURS[f].speed if f in FLAVOURS else 1.0 for f in self.cap.pools}
        for job in self.running:
            request = job.request
            row = self.alloc.get(request.team)
            if row is None:
                row = self.alloc[request.team] = _Alloc()
            row.gpus += request.units * speed.get(job.placement.flavour, 1.0)
            row.cpus += request.pods * request.cpus_per_pod
            row.memory_gb += request.pods * request.memory_gb_per_pod
            if job.terminating:
                self.leaving[job.request.id] = job_end(job, self.now)
                if job.preempted_for is not None:
                    self.victims_for.setdefault(job.preempted_for, []).append(job)

    # -- fair share and order --------------------------------------------------------------------------------

    def _add_alloc(self, request: JobRequest, flavour: str, sign: int) -> None:
        row = self.alloc.setdefault(request.team, _Alloc())
        gpus, cpus, memory_gb = request_rates(request, flavour)
        row.gpus += sign * gpus
        row.cpus += sign * cpus
        row.memory_gb += sign * memory_gb
        self._shares.pop(request.team, None)

    def share(self, team: str) -> float:
        value = self._shares.get(team)
        if value is None:
            state = self.snapshot.teams.get(team)
            if state is None:
                value = float("inf")
            else:
                a = self.alloc.get(team, _Alloc())
                value = dominant_share((a.gpus, a.cpus, a.memory_gb), state.decayed_usage, self.capacity_totals,
                                       state.weight, self.config.usage_half_life_s)
            self._shares[team] = value
        return value

    def band_hint(self, job: PendingJob) -> Band:
        return band_hint(job, self._fits_nominal)

    def _fits_nominal(self, job: PendingJob) -> bool:
        request = job.request
        key = (request.team, request.units, request.flavours)
        version = self.ledger.version.get(request.team, 0)
        hit = self._nominal_fit.get(key)
        if hit is not None and hit.version == version:
            return hit.fits
        state = self.snapshot.teams.get(request.team)
        fits = False
        if state is not None:
            usage = self.ledger.nominal_usage
            for f in request.flavours:
                quota = state.quotas.get(f)
                if quota is not None and usage.get((request.team, f), 0) + request.units <= quota.nominal:
                    fits = True
                    break
        self._nominal_fit[key] = _NominalFit(version, fits)
        return fits

    # -- phase 2 ---------------------------------------------------------------------------------------------

    def enforce_time_limits(self) -> None:
        for job in self.running:
            request = job.request
            if job.terminating or self.now < job.started_at + request.time_limit_s:
                continue
            grace = request.grace_s if request.preemptible and not is_scavenger(job) else 0.0
            self.preempts.append(Preempt(request.id, PreemptReason.TIME_LIMIT, grace, requeue=False))
            self._mark_leaving(job, self.now + grace)

    def _mark_leaving(self, job: RunningJob, until: float) -> None:
        self.leaving[job.request.id] = until
        self._ends = None
        self.timeline.set_until(job.request, job.placement, until)
        if self._leaving_lists is not None:
            self._add_leaving(job)

    # -- phase 4 ---------------------------------------------------------------------------------------------

    def process(self, pending: PendingJob) -> None:
        request = pending.request
        self.processed.append(request.id)
        # a. A job just like one that already waits this cycle waits too: quota and free units only shrink
        #    within a cycle and reservations only grow, so the first answer holds (equivalence classes).
        klass = None
        if pending.restart_block is None and not pending.avoid_nodes and request.id not in self.victims_for:
            widened = True if request.topology_level is None else self._widened(pending)
            klass = (request.team, request.shape, request.priority_class, request.preemptible, may_borrow(request),
                     widened, self._block_cap(pending))
            known = self._classes.get(klass)
            if (known is not None and request.time_limit_s >= known.min_limit
                    and (known.quota is None or known.quota == self._quota_state(request))):
                waiting = self._wait(pending, known.reason, known.message)
                waiting.plan_for = known.plan_for
                if (known.misses or known.refused) and self._may_reserve(pending):
                    if known.misses:
                        self._maybe_reserve(pending, waiting, known.misses, self._context(pending),
                                            is_small(request, self.config.small_job_max_units))
                    else:
                        self._reserve_after_quota(pending, waiting, known.refused)
                return
        # b. Reserved jobs' quota counts against a job that would still run when they start (backfill must
        #    not take the quota a reservation needs, any more than its nodes), less the quota of running jobs
        #    that will have ended by the first of those starts (by their time limits: never later).
        self._overlap_holds(request)
        outcome = self._process(pending)
        if klass is not None and outcome is not None:
            self._classes[klass] = outcome

    def _overlap_holds(self, request: JobRequest) -> None:
        """Set the reservations' quota that ``request`` would overlap if it started now (``_held_now`` and the
        extra usage the ledger counts against it), cached per number of holds and number overlapped."""
        holds = self._quota_holds                      # sorted by start
        ahead = bisect_left(holds, self.now + request.time_limit_s, key=_hold_start)
        overlapped = holds[:ahead]
        self._held_now = [(h.team, h.flavour, h.units) for h in overlapped]
        key = (len(holds), ahead)
        cached = self._held_extra.get(key)
        if cached is None:
            extra: dict[tuple[str, str], int] = {}
            nominal_extra: dict[tuple[str, str], int] = {}
            for team, f, units in self._held_now:
                extra[(team, f)] = extra.get((team, f), 0) + units
                nominal_extra[(team, f)] = nominal_extra.get((team, f), 0) + units
            if self._held_now:
                for pair, (total, nominal) in self._ended_by(holds[0].start).items():
                    extra[pair] = extra.get(pair, 0) - total
                    nominal_extra[pair] = nominal_extra.get(pair, 0) - nominal
            cached = _HeldExtra(extra, nominal_extra,
                                frozenset((h.team, h.flavour) for h in overlapped if h.nominal_only))
            self._held_extra[key] = cached
        self._extra_now = cached.extra
        self._nominal_extra_now = cached.nominal_extra
        self._nominal_only_keys = cached.nominal_only_keys

    def _ended_by(self, at: float) -> dict[tuple[str, str], tuple[int, int]]:
        """Quota units (all, of which nominal) per (team, flavour) of running jobs that end by ``at``."""
        hit = self._ended_cache.get(at)
        if hit is None:
            if self._ends is None:           # (end, job) of the running jobs in quota, soonest first
                self._ends = sorted((_Ending(self.leaving.get(job.request.id, job_end(job, self.now)), job)
                                     for job in self.running if job.admitted_as is not AdmittedAs.SCAVENGER),
                                    key=_ending_end)
            hit = {}
            for ending in self._ends:
                if ending.end > at:
                    break
                job = ending.job
                key = (job.request.team, job.placement.flavour)
                total, nominal = hit.get(key, (0, 0))
                units = job.request.units
                hit[key] = (total + units, nominal + (units if job.admitted_as is AdmittedAs.NOMINAL else 0))
            self._ended_cache[at] = hit
        return hit

    def _quota_state(self, request: JobRequest) -> tuple[int, ...]:
        """Changes whenever the job's team's usage or its cohort's pool does."""
        state = self.snapshot.teams.get(request.team)
        versions = self.ledger.version
        return (versions.get(request.team, 0), versions.get("cohort:" + state.cohort, 0) if state else 0)

    def _process(self, pending: PendingJob) -> _Class | None:
        """Handle one job; returns what a job of the same class would get, when it simply waits."""
        request = pending.request
        quota = self._quota_state(request)
        pools = self._shaped_pools(request)
        if pools.problem is not None:
            return self._refuse(pending, quota, Reason.INVALID_FLAVOUR, pools.problem)
        # b. Victims already leaving for this job: start if it fits anyway, else wait for them.
        inflight = [v for v in self.victims_for.get(request.id, ()) if v.request.id in self.leaving]
        if inflight:
            self._claimed.update(v.request.id for v in inflight)
        # c. Quota on each flavour, in the job's order of preference.
        nominated = self._nominate_quota(request, pools.pools)
        if not nominated.options:
            assert nominated.best is not None
            return self._refuse(pending, quota, nominated.best.reason, nominated.best.message, nominated.refused)
        ctx = self._context(pending)
        small = is_small(request, self.config.small_job_max_units)
        # d. Placement now: the first flavour that fits without preemption (misses cached per shape).
        placed = self._nominate_placement(pending, nominated.options, ctx, small, bool(inflight))
        if placed.fit is not None:
            self._admit_fit(pending, placed.fit, ctx.end)
            return None
        if inflight:
            self._await_victims(pending, inflight, nominated.options)
            return None
        if not placed.misses:
            assert nominated.best is not None
            return self._refuse(pending, quota, nominated.best.reason, nominated.best.message, nominated.refused)
        # e. Preemption, when the job's band allows it and its best flavour is not merely deferred.
        if max(m.miss.fit for m in placed.misses) < Fit.DEFERRED:
            for m in placed.misses:
                if self._try_preempt(pending, m.pool, m.verdict, ctx, small, m.miss, Strategy.NOW):
                    return None
        # f. Wait, with a reservation for the head of the line.
        return self._wait_for_room(pending, placed.misses, ctx, small, quota)

    def _shaped_pools(self, request: JobRequest) -> ShapedPools:
        """The pools of the job's flavours that exist here and have nodes large enough for one of its pods."""
        pools = [(f, self.cap.pools[f]) for f in request.flavours if f in self.cap.pools]
        if not pools:
            return ShapedPools([], f"none of {', '.join(request.flavours)} exists in this cluster")
        shaped = [pool for _, pool in pools if 0 < request.units_per_pod <= pool.max_cap]
        if not shaped:
            return ShapedPools([], f"no node has {request.units_per_pod} units of {' or '.join(f for f, _ in pools)}")
        return ShapedPools(shaped, None)

    def _nominate_quota(self, request: JobRequest, pools: list[Pool]) -> QuotaNomination:
        """What quota says on each flavour, in the job's order of preference: the flavours it may use (some only
        once its team's own preemptible jobs give it their nominal quota), those refused that the plan may
        start it on later, and the most promising refusal."""
        options: list[QuotaOption] = []
        refused: list[PlanOption] = []
        best: _Best | None = None
        for index, pool in enumerate(pools):
            f = pool.flavour
            verdict = self.ledger.verdict(request, f, self._extra_now, self._nominal_only_keys,
                                          self._nominal_extra_now)
            if verdict.admitted_as is not None:
                options.append(QuotaOption(f, pool, verdict))
                continue
            assert verdict.reason is not None
            best = _better(best, index, verdict.reason, verdict.message)
            if verdict.reason in (Reason.QUOTA_FULL, Reason.COHORT_FULL):
                refused.append(PlanOption(f, verdict.reason, False, (request.team, f) in self._nominal_only_keys))
            room = self._nominal_room(request, f) if verdict.reason is Reason.QUOTA_FULL else None
            if room is not None:
                options.append(QuotaOption(f, pool, room.verdict, relabel=room.jobs))
        return QuotaNomination(options, refused, best)

    def _nominate_placement(self, pending: PendingJob, options: list[QuotaOption], ctx: PlaceContext, small: bool,
                            inflight: bool) -> PlacementNomination:
        """The first flavour the job fits now without preemption, else why it fits none (misses cached per
        shape). A flavour it may use only by relabelling is only worth it if the job starts now."""
        request = pending.request
        misses: list[FlavourMiss] = []
        for index, option in enumerate(options):
            pool, verdict = option.pool, option.verdict
            if option.relabel is not None:
                placement = place(self.cap, pool, request, ctx, small)
                if placement is not None:
                    return PlacementNomination(PlacedFit(option, placement, AdmittedAs.NOMINAL), [])
                continue
            if verdict.reclaim and not inflight:
                misses.append(FlavourMiss(index, option.flavour, pool, verdict, _lent_out(option.flavour)))
                continue
            known_miss = self._known_miss(pending, pool, ctx)
            if known_miss is not None:
                misses.append(FlavourMiss(index, option.flavour, pool, verdict, known_miss))
                continue
            placement = place(self.cap, pool, request, ctx, small)
            if placement is not None:
                assert verdict.admitted_as is not None
                return PlacementNomination(PlacedFit(option, placement, verdict.admitted_as), [])
            misses.append(FlavourMiss(index, option.flavour, pool, verdict, self._miss(pending, pool, ctx, small)))
        return PlacementNomination(None, misses)

    def _admit_fit(self, pending: PendingJob, fit: PlacedFit, end: float) -> None:
        if fit.option.relabel is not None:
            self._relabel(pending.request, fit.option.flavour, fit.option.relabel)
        self._admit(pending, fit.option.pool, fit.placement, fit.admitted_as, end)

    def _wait_for_room(self, pending: PendingJob, misses: list[FlavourMiss], ctx: PlaceContext, small: bool,
                       quota: tuple[int, ...]) -> _Class | None:
        """The job waits with its most promising miss's reason; the head of the line reserves (or preempts
        for a gang, which returns None: it no longer simply waits)."""
        request = pending.request
        choice = max(misses, key=lambda m: (_REASON_RANK[m.miss.reason], -m.index))
        miss = choice.miss
        waiting = self._wait(pending, miss.reason, miss.message)
        waiting.plan_for = [PlanOption(m.flavour, None, m.verdict.reclaim, False) for m in misses if not m.miss.never]
        reservable = [m for m in misses
                      if not m.miss.never and not m.verdict.reclaim and m.miss.reason in _CAPACITY_REASONS]
        outcome = _Class(miss.reason, miss.message, waiting.plan_for, reservable, request.time_limit_s, quota)
        if reservable and miss.reason in _CAPACITY_REASONS and not miss.never:
            if self._maybe_reserve(pending, waiting, reservable, ctx, small):
                return None
        return outcome

    def _refuse(self, pending: PendingJob, quota: tuple[int, ...], reason: Reason, message: str,
                plan_for: list[PlanOption] | None = None) -> _Class:
        waiting = self._wait(pending, reason, message)
        waiting.plan_for = plan_for or []
        refused = [entry for entry in waiting.plan_for if entry.quota_reason is not None]
        if refused:
            self._reserve_after_quota(pending, waiting, refused)
        return _Class(reason, message, waiting.plan_for, [], 0.0, None, refused)

    def _context(self, pending: PendingJob) -> PlaceContext:
        request = pending.request
        avoid = self._avoid(pending)
        restart = None
        if pending.restart_block is not None and pending.restart_block in self.cap.block_names:
            restart = self.cap.block_names.index(pending.restart_block)
        return PlaceContext(end=self.now + request.time_limit_s, avoid=avoid, restart_block=restart,
                            widened=self._widened(pending), block_cap=self._block_cap(pending))

    def _avoid(self, pending: PendingJob) -> frozenset[int]:
        """The nodes the job keeps off, for ``avoid_nodes_for_s`` after it was requeued (``PendingJob``)."""
        if not pending.avoid_nodes or self.now >= self._avoid_until(pending):
            return frozenset()
        return frozenset(self.cap.index[n] for n in pending.avoid_nodes if n in self.cap.index)

    def _avoid_until(self, pending: PendingJob) -> float:
        return pending.queued_at + self.config.avoid_nodes_for_s

    def _block_cap(self, pending: PendingJob) -> int | None:
        """How many blocks beyond the fewest a block-sized ``preferred`` gang may take (``PlaceContext``): none
        for ``topology_cap_wait_s`` from ``PendingJob.block_cap_since`` while that compact shape is in reach by
        then, one while it is not, any once the window has passed. 0 for any other job: the cap does not apply,
        and its equivalence class must not split on it. Decided once per job per cycle (it is asked often)."""
        request = pending.request
        if request.id in self._block_caps:
            return self._block_caps[request.id]
        cap: int | None
        if not self._any_pool(request, lambda pool: pool.max_blocks(request) is not None):
            cap = 0
        elif self.now - pending.block_cap_since >= self.config.topology_cap_wait_s:
            cap = None
        else:
            cap = 0 if self._compact_in_reach(pending) else 1
        self._block_caps[request.id] = cap
        return cap

    def _any_pool(self, request: JobRequest, test: Callable[[Pool], bool]) -> bool:
        """Whether ``test`` holds for the pool of some flavour the job may use (a ``preferred`` gang as large as
        a block: ``Pool.max_blocks``; any gang as large as one: ``Pool.fills_blocks``)."""
        return any(test(pool) for f in request.flavours if (pool := self.cap.pools.get(f)) is not None)

    def _compact_in_reach(self, pending: PendingJob) -> bool:
        """False for a gang of several blocks broken by a failure whose compact slot (by the plan, as this
        cycle first sees it) starts after its window ends: the failed node keeps one of its blocks short for
        days once the block's spare is taken, so waiting would only idle its GPUs; it may take one block more.
        Other gangs keep their window whatever the plan says: moving jobs and reservations often open whole
        blocks sooner than time limits predict, and a one-block gang has no block to spare."""
        request = pending.request
        if pending.restart_block is None:
            return True
        deadline = pending.block_cap_since + self.config.topology_cap_wait_s
        avoid = self._avoid(pending)
        for flavour in request.flavours:
            pool = self.cap.pools.get(flavour)
            if pool is None:
                continue
            fewest = pool.max_blocks(request)
            if fewest is None or fewest < 2:
                return True
            slot = self.timeline.earliest(request, flavour, not_before=self.now, widen_at=None, avoid=avoid,
                                          block_cap=0)
            if slot is not None and slot.start <= deadline:
                return True
        return False

    def _widened(self, pending: PendingJob) -> bool:
        request = pending.request
        if request.topology_level is None or request.topology_level >= TopologyLevel.CLUSTER:
            return True
        if request.topology_required:
            return False
        return self.now - pending.queued_at >= self.config.topology_widen_after_s

    def _widen_at(self, pending: PendingJob) -> float | None:
        request = pending.request
        if request.topology_required:
            return None
        return pending.queued_at + self.config.topology_widen_after_s

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
        cacheable = not ctx.avoid and ctx.restart_block is None
        key = (pool.flavour, request.shape, ctx.widened, ctx.block_cap)
        if cacheable:
            hit = self._miss_cache.get(key)
            if hit is not None and hit.holds_for(ctx.end):
                return hit.miss
        miss = explain(self.cap, pool, request, ctx, small, self.now, self._widen_at(pending))
        if ctx.avoid and miss.fit is Fit.NO_FIT and place(self.cap, pool, request, replace(ctx, avoid=frozenset()),
                                                          small) is not None:
            left = ", ".join(sorted(pending.avoid_nodes))
            miss = replace(miss, message=f"fits only on nodes it left after a failure or a move ({left}); may use "
                                         f"them in {format_duration(self._avoid_until(pending) - self.now)}")
        if cacheable:
            self._miss_cache[key] = _CachedMiss(miss, ctx.end)
        return miss

    def _admit(self, pending: PendingJob, pool: Pool, placement: Placement, admitted_as: AdmittedAs,
               end: float) -> None:
        request = pending.request
        occupy(self.cap, pool, request, placement, end)
        self.ledger.add(request, pool.flavour, admitted_as)
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._holding(end, request.team, pool.flavour, request.units)
        self._add_alloc(request, pool.flavour, +1)
        self.timeline.set_until(request, placement, end, extend=True)
        self.admits.append(Admit(request.id, placement, admitted_as,
                                 backfill=self.blocked_reservations > 0))
        self._admitted.append(RunningJob(request, placement, admitted_as, self.now))

    def _wait(self, pending: PendingJob, reason: Reason, message: str) -> _Waiting:
        waiting = _Waiting(pending, reason, message)
        self.waiting[pending.request.id] = waiting
        return waiting

    def _commit(self, request: JobRequest, flavour: str, admitted_as: AdmittedAs) -> None:
        """Count a job that waits for its victims as if it ran: its team must not preempt twice for it."""
        self.ledger.add(request, flavour, admitted_as)
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._holding(self.now + request.grace_s + request.time_limit_s, request.team, flavour, request.units)
        self._add_alloc(request, flavour, +1)

    def _hold(self, request: JobRequest, slot: Slot) -> None:
        pool = self.cap.pools[slot.flavour]
        add_holds(pool, self.timeline.holds(slot, request.id))
        self.timeline.book(slot, request.time_limit_s)
        self.reservations.append(Reserve(request.id, slot.flavour,
                                         self.timeline.placement(slot).nodes, slot.start))

    def _await_victims(self, pending: PendingJob, victims: list[RunningJob], options: list[QuotaOption]) -> None:
        request = pending.request
        by = max(self.leaving[v.request.id] for v in victims)
        flavour = victims[0].placement.flavour
        option = next((o for o in options if o.flavour == flavour), options[0])
        f, verdict = option.flavour, option.verdict
        assert verdict.admitted_as is not None
        self._commit(request, f, verdict.admitted_as)
        waiting = self._wait(pending, Reason.PREEMPTING_VICTIMS,
                             f"{len(victims)} victim(s) signalled; starts when they exit, by "
                             f"{format_duration(by - self.now)} from now")
        slot = self.timeline.earliest(request, f, not_before=by, widen_at=self._widen_at(pending),
                                      block_cap=self._block_cap(pending))
        if slot is not None:
            self._hold(request, slot)
            self._victim_slots.append((request, slot))
            waiting.estimate = slot.start
        else:
            waiting.estimate = by
        waiting.planned = True

    def _reclaim_after(self, request: JobRequest, flavour: str, likely: bool) -> ReclaimEstimate | None:
        """When enough borrowers of other teams in the job's cohort have left for it: each can be preempted
        once its minimum run time is up (then its grace), or ends (a borrowed notebook is never preempted: it
        gives its units back when it ends or the reaper finds it idle — ``likely``: by its idle clock and
        usual length, see ``estimates``). With the words that say what the estimate counts on; ``None``: no
        such borrower (the job's plan is its timeline's)."""
        cohort = self.snapshot.teams[request.team].cohort
        ready = self._reclaim_ready.get((cohort, flavour, likely))
        if ready is None:
            ready = []
            for job in self.running:
                other = self.snapshot.teams.get(job.request.team)
                if (job.placement.flavour != flavour or job.admitted_as is not AdmittedAs.BORROWED
                        or job.request.id in self.leaving or other is None or other.cohort != cohort):
                    continue
                end = expected_end(job, self.now, self.snapshot.runtimes) if likely else job_end(job, self.now)
                at = job.started_at + self.config.min_run_time_s + self._grace(job) if job.request.preemptible else end
                # What holds it: its minimum run time, or (never preempted) the idle reaper's clock, or its end.
                holder = ("young" if job.started_at + self.config.min_run_time_s > self.now and at < end else
                          "idle" if not job.request.preemptible and likely and idle_release(job, self.now) is not None
                          else "")
                ready.append(_Borrower(min(at, end), job.request.team, job.request.units, holder))
            ready.sort()
            self._reclaim_ready[(cohort, flavour, likely)] = ready
        got = count = 0
        held: dict[str, int] = {}
        last = self.now
        for borrower in ready:
            if borrower.team == request.team:
                continue
            got, count, last = got + borrower.units, count + 1, borrower.at
            held[borrower.holder] = held.get(borrower.holder, 0) + 1
            if got >= request.units:
                break
        if not count:
            return None
        if held.get("young"):
            note = (f"after the {format_duration(self.config.min_run_time_s)} minimum run time of "
                    f"{held['young']} borrowed job(s)")
        elif held.get("idle"):
            note = f"a guess counting on the idle reaper freeing {held['idle']} borrowed notebook(s)"
        else:
            note = f"when {count} borrowed job(s) can be reclaimed"
        return ReclaimEstimate(max(last, self.now), note)

    # -- preemption ------------------------------------------------------------------------------------------

    def _candidates_for(self, flavour: str, band: Band) -> list[Victim]:
        """Running jobs on ``flavour`` in bands below ``band``, cheapest first; built once per cycle and band.
        Below critical, jobs inside their minimum run time are left out (scavenger work excepted)."""
        key = (flavour, band)
        found = self._candidates.get(key)
        if found is None:
            victims = [victim(job, self.now, self.config) for job in self.running
                       if job.placement.flavour == flavour and not job.terminating and job.band < band]
            if band is not Band.CRITICAL:
                victims = [v for v in victims if v.scavenger or not v.protected]
            found = sorted(victims, key=lambda v: v.key)
            for v in found:
                self._note_spots(v)
            self._candidates[key] = found
        return found

    def _try_preempt(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
                     miss: Miss, strategy: Strategy, slot: Slot | None = None) -> bool:
        """Find and signal victims so ``pending`` fits ``pool``, by ``strategy`` (:class:`Strategy`): ``NOW``
        (reclaim, critical, single node; gangs only over scavenger work), ``RESERVATION`` (a gang whose
        reservation is far off, costed) or ``MIGRATE`` (a gang waiting for capacity or one domain: move smaller
        jobs off the nodes it needs to room they fit elsewhere now, costed; see :meth:`_movable`)."""
        request = pending.request
        assert verdict.admitted_as is not None
        band = band_of(request.priority_class, verdict.admitted_as)
        if band is Band.SCAVENGER or miss.never:
            return False
        key = (pool.flavour, request.shape, band, request.team, verdict.reclaim, strategy, ctx.widened, ctx.block_cap)
        if key in self._no_victims:
            return False
        if strategy is Strategy.NOW and self._wait_for_leaving(pending, pool, verdict, ctx, small):
            return True
        cohort = self.snapshot.teams[request.team].cohort
        reclaim_only = verdict.reclaim and band is not Band.CRITICAL
        if reclaim_only and not self._reclaim_possible(request, pool.flavour, cohort, verdict.deficit):
            self._no_victims.add(key)
            return False
        eligible = self._eligible_victims(request, pool, verdict, band, strategy)
        if not eligible:
            self._no_victims.add(key)
            return False
        choice = self._cheapest_victims(pending, pool, verdict, ctx, small, eligible, band)
        if choice.found is None:
            if choice.none_for_shape:
                self._no_victims.add(key)
            return False
        found: Found | None = choice.found
        if strategy is Strategy.MIGRATE:
            found = self._moves(pending, pool, verdict, ctx, small, eligible, choice.found)
        if found is None:
            return False
        if strategy is not Strategy.NOW and not self._worth_it(request, pool.flavour, found, slot):
            return False
        self._signal(pending, pool, verdict, found, strategy, band)
        return True

    def _eligible_victims(self, request: JobRequest, pool: Pool, verdict: Verdict, band: Band,
                          strategy: Strategy) -> list[Victim]:
        """The jobs ``strategy`` may stop for ``request`` on ``pool``, cheapest first (cached while no more jobs
        are signalled): moves for ``MIGRATE``; else lower bands, only scavenger work for a gang preempting now
        (unless it reclaims or is critical), only the cohort's borrowers for a reclaim."""
        if strategy is Strategy.MIGRATE:
            return self._movable(pool.flavour, request)
        immediate = verdict.reclaim or band is Band.CRITICAL or request.pods == 1
        scavengers_only = strategy is Strategy.NOW and not immediate
        reclaim_only = verdict.reclaim and band is not Band.CRITICAL
        pick = (pool.flavour, band, request.team, scavengers_only, reclaim_only, len(self.leaving))
        eligible = self._eligible.get(pick)
        if eligible is not None:
            return eligible
        teams = self.snapshot.teams
        cohort = teams[request.team].cohort
        eligible = []
        for v in self._candidates_for(pool.flavour, band):
            if v.id in self.leaving:
                continue
            if not v.scavenger:
                if scavengers_only:
                    break
                if not may_preempt(request, band, v):
                    continue
                if reclaim_only:
                    other = teams.get(v.job.request.team)
                    if other is None or other.cohort != cohort:
                        continue
            eligible.append(v)
        self._eligible[pick] = eligible
        return eligible

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
            cohort = self.snapshot.teams[request.team].cohort
            found = self._search(pending, pool, verdict, ctx, small,
                                 self._young_borrowers(pending, pool, verdict, band, cohort))
            return VictimChoice(found, none_for_shape=False)
        return VictimChoice(found, none_for_shape=found is None)

    def _search(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
                eligible: list[Victim], oversize: int | None = None) -> Found | None:
        """The cheapest victims among ``eligible`` that let the job in (quota included), or ``None``."""
        if not eligible:
            return None
        request = pending.request
        undo = self.ledger.hold(self._held_now) if self._held_now else None
        try:
            target = self.ledger.reclaim_target(request, pool.flavour) if verdict.reclaim else None
            search = VictimSearch(self.cap, self.ledger, pool, request, ctx, small, target, self._spots, oversize)
            return search.run(eligible)
        finally:
            if undo is not None:
                undo()

    def _young_borrowers(self, pending: PendingJob, pool: Pool, verdict: Verdict, band: Band,
                         cohort: str) -> list[Victim]:
        """For a reclaim whose only victims past their minimum run time are far larger than it needs: borrowers of
        other teams in the cohort near its size, running for at least ``migrate_min_run_s``, cheapest first. The
        minimum run time guards against thrash; here it would make a 1-GPU reclaim stop a 1,024-GPU gang, whose
        GPUs then idle for hours because it cannot borrow them all back, while a young 8-GPU borrower loses
        minutes (it checkpoints on the way out)."""
        oversize = _proportionate_units(pending.request, verdict)
        out: list[Victim] = []
        for job in self.running:
            other = self.snapshot.teams.get(job.request.team)
            if (job.placement.flavour != pool.flavour or job.terminating or job.request.id in self.leaving
                    or job.admitted_as is not AdmittedAs.BORROWED or not job.request.preemptible
                    or job.request.team == pending.request.team or other is None or other.cohort != cohort
                    or job.band >= band or job.request.units > oversize
                    or self.now - job.started_at < self.config.migrate_min_run_s):
                continue
            out.append(self._victim(job))
        out.sort(key=lambda v: v.key)
        return out

    def _victim(self, job: RunningJob) -> Victim:
        """``job`` as a victim candidate, with the units it holds per node noted for the victim search."""
        v = victim(job, self.now, self.config)
        self._note_spots(v)
        return v

    def _note_spots(self, v: Victim) -> None:
        if v.id not in self._spots:
            self._spots[v.id] = [(j, bits.bit_count()) for _, j, bits, _ in self.cap.pod_bits(v.job.placement)]

    def _nominal_room(self, request: JobRequest, flavour: str) -> NominalRoom | None:
        """For a non-preemptible job refused because its team's nominal quota is held by the team's own
        preemptible work: the fewest of those jobs (the newest first) that, relabelled borrowed, let it in as
        nominal now without reclaim — that is, when the cohort can lend for them. The team's guarantee goes to
        the work that cannot checkpoint; the relabelled jobs keep running, now reclaimable."""
        state = self.snapshot.teams.get(request.team)
        quota = state.quotas.get(flavour) if state else None
        if request.preemptible or quota is None or request.priority_class is PriorityClass.SCAVENGER:
            return None
        key = (request.team, flavour)
        if key in self._nominal_only_keys:
            return None                      # a reserved non-preemptible job of the team claims that nominal
        need = (self.ledger.nominal_usage.get(key, 0) + max(0, self._nominal_extra_now.get(key, 0))
                + request.units - quota.nominal)
        if need <= 0:
            return None                      # refused for something else (the borrowing limit)
        if self._by_team is None:            # running jobs per (team, flavour), the newest first
            self._by_team = {}
            for job in sorted(self.running, key=lambda job: (-job.started_at, job.request.id)):
                self._by_team.setdefault((job.request.team, job.placement.flavour), []).append(job)
        # A job that ends before the first reservation this one would outlive has already given that
        # reservation its nominal quota (``_ended_by``): relabelling it frees nothing this job may keep.
        first_hold = self._quota_holds[0].start if self._held_now else None
        mine = [job for job in self._by_team.get(key, ())
                if job.admitted_as is AdmittedAs.NOMINAL and job.request.preemptible and not job.terminating
                and job.request.id not in self.leaving and job.request.id not in self._relabelled
                and (first_hold is None or job_end(job, self.now) > first_hold)]
        chosen: list[RunningJob] = []
        for job in mine:
            if need <= 0:
                break
            chosen.append(job)
            need -= job.request.units
        if need > 0:
            return None
        for job in chosen:
            self.ledger.relabel(job.request, flavour, AdmittedAs.NOMINAL, AdmittedAs.BORROWED, bump=False)
        try:
            verdict = self.ledger.verdict(request, flavour, self._extra_now, self._nominal_only_keys,
                                          self._nominal_extra_now)
        finally:
            for job in chosen:
                self.ledger.relabel(job.request, flavour, AdmittedAs.BORROWED, AdmittedAs.NOMINAL, bump=False)
        if verdict.admitted_as is not AdmittedAs.NOMINAL or verdict.reclaim:
            return None
        return NominalRoom(verdict, chosen)

    def _relabel(self, request: JobRequest, flavour: str, jobs: list[RunningJob]) -> None:
        for job in jobs:
            self.ledger.relabel(job.request, flavour, AdmittedAs.NOMINAL, AdmittedAs.BORROWED)
            self._relabelled.add(job.request.id)
            self.relabels.append(Relabel(job.request.id, AdmittedAs.BORROWED, for_job=request.id))

    def _proportionate(self, pending: PendingJob, verdict: Verdict, found: Found) -> bool:
        """A reclaim stops at most four times what it needs (or 64 units more), until the job has waited
        ``reclaim_patience_s``: a 1-GPU job does not stop a 1,024-GPU gang — whose GPUs would then idle, the
        gang unable to come back — while smaller borrowers will soon pass their minimum run time or end."""
        stopped = sum(v.job.request.units for v in found.victims if not v.scavenger)
        return (stopped <= _proportionate_units(pending.request, verdict)
                or self.now - pending.queued_at >= self.config.reclaim_patience_s)

    def _movable(self, flavour: str, request: JobRequest) -> list[Victim]:
        """Jobs that may move for a gang waiting for room, cheapest first: preemptible, running for at least
        ``migrate_min_run_s`` (a shorter floor than the minimum run time that protects from preemption: a move
        costs the job a checkpoint, not its place), not critical, at most half the gang's size. Moving is not
        taking: a moved job
        checkpoints, goes back to the front of its queue and starts again at once elsewhere (the caller checks
        that it fits), so band and team do not matter — Gandiva's migration, at checkpoint boundaries."""
        key = (flavour, request.units // 2, len(self.leaving))
        hit = self._movable_cache.get(key)
        if hit is None:
            hit = []
            for job in self.running:
                other = job.request
                if (job.placement.flavour != flavour or job.terminating or other.id in self.leaving
                        or not other.preemptible or other.priority_class is PriorityClass.CRITICAL
                        or is_scavenger(job) or other.units > request.units // 2
                        or self.now - job.started_at < self.config.migrate_min_run_s):
                    continue
                hit.append(self._victim(job))
            hit.sort(key=lambda v: v.key)
            self._movable_cache[key] = hit
        return hit

    def _moves(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext, small: bool,
               eligible: list[Victim], found: Found) -> Found | None:
        """``found``, or the next cheapest set of moves, with every moved job able to restart elsewhere now and
        no more of them than ``_max_moves``: a job with nowhere to go is left out and the search runs again
        (``_MIGRATE_RETRIES`` times at most); ``None`` when no such set turns up."""
        limit = _max_moves(pending.request, self.config)
        for _ in range(_MIGRATE_RETRIES):
            if len(found.victims) > limit:
                return None
            stuck = self._stuck(pending.request, found)
            if stuck is None:
                return found
            eligible = [v for v in eligible if v.id != stuck]
            retry = self._search(pending, pool, verdict, ctx, small, eligible)
            if retry is None:
                return None
            found = retry
        return None

    def _stuck(self, request: JobRequest, found: Found) -> str | None:
        """The first job ``found`` moves that does not fit now outside the gang's placement (placing them one
        after another), or ``None`` when they all do."""
        pool = self.cap.pools[found.placement.flavour]
        # Units are bits: the moved jobs leave before the gang takes their units, and come back after it gives
        # them up (occupying the gang over them and releasing it would free their units too).
        for v in found.victims:
            self.cap.release(v.job.request, v.job.placement)
        self.cap.occupy(request, found.placement)
        placed: list[tuple[JobRequest, Placement]] = []
        try:
            for v in found.victims:
                moved = v.job.request
                ctx = PlaceContext(end=self.now + moved.time_limit_s)
                spot = place(self.cap, pool, moved, ctx, is_small(moved, self.config.small_job_max_units))
                if spot is None:
                    return moved.id
                self.cap.occupy(moved, spot)
                placed.append((moved, spot))
            return None
        finally:
            for moved, spot in reversed(placed):
                self.cap.release(moved, spot)
            self.cap.release(request, found.placement)
            for v in reversed(found.victims):
                self.cap.occupy(v.job.request, v.job.placement)

    def _wait_for_leaving(self, pending: PendingJob, pool: Pool, verdict: Verdict, ctx: PlaceContext,
                          small: bool) -> bool:
        """Before stopping anyone: would the job fit once jobs that are already leaving have gone? Then it
        claims them and waits, as if it had preempted them (the controller need not remember whom a job
        preempted, and two cycles never preempt twice for one job)."""
        request = pending.request
        key = (pool.flavour, request.shape, ctx.widened, ctx.block_cap, request.team, verdict.reclaim)
        if key in self._unsettled or ctx.avoid or ctx.restart_block is not None:
            return False
        unclaimed = self._unclaimed_leaving(pool.flavour)
        g = request.units_per_pod
        if (not unclaimed.victims or verdict.deficit > unclaimed.borrowed
                or unclaimed.units + pool.free_units < request.units
                or (request.pods == 1 and not any(pool.free[j] + n >= g and pool.usable[j] and not pool.spare[j]
                                                  for j, n in unclaimed.per_node.items()))):
            self._unsettled.add(key)
            return False
        undo = self.ledger.hold(self._held_now) if self._held_now else None
        try:
            target = self.ledger.reclaim_target(request, pool.flavour) if verdict.reclaim else None
            search = VictimSearch(self.cap, self.ledger, pool, request, ctx, small, target, self._spots)
            found = search.settle(unclaimed.victims, self.leaving)
        finally:
            if undo is not None:
                undo()
        if found is None:
            self._unsettled.add(key)
            return False
        assert verdict.admitted_as is not None
        by = max(self.leaving[v.id] for v in found.victims)
        self._claimed.update(v.id for v in found.victims)
        self._commit(request, pool.flavour, verdict.admitted_as)
        slot = Slot(pool.flavour, by, tuple((pool.pos[self.cap.index[p.node]], p.units)
                                            for p in found.placement.pods))
        self._hold(request, slot)
        self._victim_slots.append((request, slot))
        waiting = self._wait(pending, Reason.PREEMPTING_VICTIMS,
                             f"waiting for {len(found.victims)} job(s) already signalled to exit, within "
                             f"{format_duration(by - self.now)}")
        waiting.estimate = by
        waiting.planned = True
        return True

    def _unclaimed_leaving(self, flavour: str) -> _Unclaimed:
        """Leaving jobs nobody counts on yet, with cheap bounds for ``_wait_for_leaving``: their units, their
        borrowed units (what they give back to quota; a team's own leaving jobs count too) and units per node."""
        key = (flavour, len(self.leaving), len(self._claimed))
        hit = self._unclaimed.get(key)
        if hit is None:
            leaving = [e.victim for e in self._leaving_victims(flavour) if e.victim.id not in self._claimed]
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
        built once, then kept up to date by ``_mark_leaving``."""
        if self._leaving_lists is None:
            self._leaving_lists = {}
            for job in self.running:
                if job.request.id in self.leaving:
                    self._add_leaving(job)
        return self._leaving_lists.get(flavour, [])

    def _add_leaving(self, job: RunningJob) -> None:
        assert self._leaving_lists is not None
        v = self._victim(job)
        insort(self._leaving_lists.setdefault(job.placement.flavour, []), _LeavingEntry(self.leaving[v.id], v.id, v))

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
                other = self.snapshot.teams.get(team)
                if (not v.scavenger and v.job.admitted_as is AdmittedAs.BORROWED and v.job.request.preemptible
                        and other is not None and other.cohort == cohort and v.id not in self.leaving):
                    by_team[team] = by_team.get(team, 0) + v.job.request.units
            self._borrowed_units[key] = by_team
        return deficit <= sum(by_team.values()) - by_team.get(request.team, 0)

    def _worth_it(self, request: JobRequest, flavour: str, found: Found, slot: Slot | None) -> bool:
        """Preempting for a far-off reservation pays when it loses fewer GPU-hours than the job would wait."""
        if slot is None:
            return True
        grace = max((self._grace(v.job) for v in found.victims), default=0.0)
        speed = FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0
        saved = request.units * speed * max(0.0, slot.start - (self.now + grace)) / 3600.0
        return found.gpu_hours < saved

    @staticmethod
    def _grace(job: RunningJob) -> float:
        if is_scavenger(job) or not job.request.preemptible:
            return 0.0
        return job.request.grace_s

    def _signal(self, pending: PendingJob, pool: Pool, verdict: Verdict, found: Found, strategy: Strategy,
                band: Band) -> None:
        request = pending.request
        state = self.snapshot.teams[request.team]
        assert verdict.admitted_as is not None
        latest = self.now
        for v in found.victims:
            job = v.job
            other = self.snapshot.teams.get(job.request.team)
            if strategy is Strategy.RESERVATION:
                reason = PreemptReason.RESERVATION
            elif strategy is Strategy.MIGRATE:
                reason = PreemptReason.DEFRAGMENT
            elif (job.admitted_as is AdmittedAs.BORROWED and band >= Band.GUARANTEED
                  and verdict.admitted_as is AdmittedAs.NOMINAL and other is not None
                  and other.cohort == state.cohort):
                reason = PreemptReason.RECLAIM
            else:
                reason = PreemptReason.HIGHER_BAND
            grace = self._grace(job)
            if job.admitted_as is AdmittedAs.BORROWED and other is not None:
                by_team = self._borrowed_units.get((job.placement.flavour, other.cohort))
                if by_team is not None and job.request.team in by_team:
                    by_team[job.request.team] -= job.request.units
            avoid = found.placement.nodes if strategy is Strategy.MIGRATE else ()
            self.preempts.append(Preempt(job.request.id, reason, grace, requeue=True, for_job=request.id,
                                         avoid=avoid))
            self._mark_leaving(job, self.now + grace)
            self._claimed.add(job.request.id)
            latest = max(latest, self.now + grace)
        self._commit(request, pool.flavour, verdict.admitted_as)
        slot = Slot(pool.flavour, latest, tuple((pool.pos[self.cap.index[p.node]], p.units)
                                                for p in found.placement.pods))
        self._hold(request, slot)
        self._victim_slots.append((request, slot))
        waiting = self._wait(pending, Reason.PREEMPTING_VICTIMS,
                             f"preempting {len(found.victims)} job(s) ({found.gpu_hours:.1f} GPU-hours at risk); "
                             f"starts when they exit, within {format_duration(latest - self.now)}")
        waiting.estimate = latest
        waiting.planned = True

    # -- reservations ----------------------------------------------------------------------------------------

    def _may_reserve(self, pending: PendingJob) -> bool:
        """The first ``max_reservations`` blocked jobs in cycle order hold their plan; long waiters up to
        twice that. Scavenger work never reserves."""
        limit = self.config.max_reservations
        starving = self.now - pending.queued_at >= self.config.starvation_after_s
        return (pending.request.priority_class is not PriorityClass.SCAVENGER
                and self.blocked_reservations < (2 * limit if starving else limit))

    def _reserve(self, pending: PendingJob, waiting: _Waiting, slot: Slot) -> None:
        request = pending.request
        self.blocked_reservations += 1
        self._hold(request, slot)
        insort(self._quota_holds, QuotaHold(slot.start, request.team, slot.flavour, request.units,
                                            not may_borrow(request)))
        self._holding(slot.start + request.time_limit_s, request.team, slot.flavour, request.units)
        waiting.estimate = slot.start
        waiting.planned = True
        waiting.reserved = True
        waiting.message += f"; reserved from {format_duration(slot.start - self.now)} from now"

    def _reserve_after_quota(self, pending: PendingJob, waiting: _Waiting, refused: list[PlanOption]) -> None:
        """A job held back by quota that its team's (or cohort's) jobs free at a known time is planned in its
        place in the queue like any other: reserved from when both quota and nodes allow."""
        if not self._may_reserve(pending):
            return
        request = pending.request
        best: Slot | None = None
        for option in refused:
            flavour, reason = option.flavour, option.quota_reason
            if flavour not in self.cap.pools or reason is None:
                continue
            quota_free = self._quota_clock().free_at(request, flavour, reason, option.nominal_only)
            if quota_free is None:
                continue
            slot = self.timeline.earliest(request, flavour, not_before=max(quota_free, self.now),
                                          widen_at=self._widen_at(pending), block_cap=self._block_cap(pending))
            if slot is not None and (best is None or slot.start < best.start):
                best = slot
        if best is not None:
            self._reserve(pending, waiting, best)

    def _earliest_avoiding(self, pending: PendingJob, flavour: str, ctx: PlaceContext) -> Slot | None:
        """The earliest slot that keeps off ``ctx.avoid`` while the job avoids those nodes, or uses them once
        it no longer does (``_avoid``), whichever comes first."""
        request, widen_at = pending.request, self._widen_at(pending)
        slot = self.timeline.earliest(request, flavour, not_before=self.now, widen_at=widen_at, avoid=ctx.avoid,
                                      block_cap=ctx.block_cap)
        if not ctx.avoid:
            return slot
        later = self.timeline.earliest(request, flavour, not_before=self._avoid_until(pending), widen_at=widen_at,
                                       block_cap=ctx.block_cap)
        return later if slot is None or (later is not None and later.start < slot.start) else slot

    def _maybe_reserve(self, pending: PendingJob, waiting: _Waiting,
                       misses: list[FlavourMiss], ctx: PlaceContext, small: bool) -> bool:
        """Reserve the earliest slot for a blocked job (or, for a gang whose slot is far off, preempt for it
        when that costs less). Returns True when it preempted instead.

        A gang as large as a block may move jobs out of its way even when it is not among the jobs that hold
        reservations: it waits for whole blocks, which small jobs fragment, and moving them (each fits elsewhere
        now and restarts at once) is how it gets one, whatever its place in the cycle's order."""
        request = pending.request
        may_reserve = self._may_reserve(pending)
        if not may_reserve and not self._any_pool(request, lambda pool: pool.fills_blocks(request)):
            return False
        best = self._earliest_reservable(pending, misses, ctx)
        if request.pods > 1 and best is not None:
            for m in misses:
                if (best.entry.flavour == m.flavour and not m.verdict.reclaim
                        and m.pool.free_units >= request.units
                        and m.miss.reason in (Reason.WAITING_FOR_TOPOLOGY, Reason.WAITING_FOR_CAPACITY)
                        and self._try_preempt(pending, m.pool, m.verdict, ctx, small, m.miss, Strategy.MIGRATE,
                                              slot=best.slot)):
                    return True
        if not may_reserve:
            return False
        far = self.config.reservation_preempt_after_s
        if request.pods > 1 and (best is None or best.slot.start - self.now > far):
            for m in misses:
                slot_f = best.slot if best is not None and best.entry.flavour == m.flavour else None
                if not m.miss.never and not m.verdict.reclaim and self._try_preempt(
                        pending, m.pool, m.verdict, ctx, small, m.miss, Strategy.RESERVATION, slot=slot_f):
                    return True
        if best is None:
            return False
        self._reserve(pending, waiting, best.slot)
        return False

    def _earliest_reservable(self, pending: PendingJob, misses: list[FlavourMiss],
                             ctx: PlaceContext) -> _SlotChoice | None:
        """The earliest slot over the misses a reservation can wait out (ties: the flavour listed first)."""
        best: _SlotChoice | None = None
        for entry in misses:
            miss = entry.miss
            if miss.never or entry.verdict.reclaim or miss.reason not in _CAPACITY_REASONS:
                continue
            slot = self._earliest_avoiding(pending, entry.flavour, ctx)
            if slot is not None and (best is None or (slot.start, entry.index) < (best.slot.start, best.entry.index)):
                best = _SlotChoice(slot, entry)
        return best

    # -- phase 5 ---------------------------------------------------------------------------------------------

    def defragment(self) -> None:
        gangs: dict[str, int] = {}
        for waiting in self.waiting.values():
            request = waiting.job.request
            if request.pods > 1 and waiting.reason in _CAPACITY_REASONS and waiting.plan_for:
                flavour = waiting.plan_for[0].flavour
                gangs[flavour] = gangs.get(flavour, 0) + 1
        for flavour in sorted(gangs):
            pool = self.cap.pools[flavour]
            if not fragmented(pool, self.config) or moves_in_flight(self.cap, pool, self.running, self.config):
                continue
            still = [job for job in self.running
                     if job.placement.flavour == flavour and job.request.id not in self.leaving]
            for v in plan_moves(self.cap, pool, still, self.now, self.config):
                grace = self._grace(v.job)
                self.preempts.append(Preempt(v.id, PreemptReason.DEFRAGMENT, grace, requeue=True))
                self._mark_leaving(v.job, self.now + grace)

    # -- phase 6 ---------------------------------------------------------------------------------------------

    def _holding(self, end: float, team: str, flavour: str, units: int) -> None:
        self._holdings.append((end, team, flavour, units))
        if self._clock is not None:
            self._clock.add(end, team, flavour, units)

    def _quota_clock(self) -> QuotaClock:
        """Built on first use from the cycle's starting point, then told of what the cycle adds."""
        if self._clock is None:
            holdings = [(self.leaving.get(job.request.id, job_end(job, self.now)), job.request.team,
                         job.placement.flavour, job.request.units)
                        for job in self.running if job.admitted_as is not AdmittedAs.SCAVENGER]
            self._clock = QuotaClock(self.ledger, self._base_usage, holdings)
            for row in self._holdings:
                self._clock.add(*row)
        return self._clock

    def _guess(self) -> Guess | None:
        """The timeline and quota clock of what is likely (``estimates``): running jobs end when they are
        likely to, what this cycle started and the jobs waiting for victims hold their units for as long as
        they are likely to. ``None`` when that is the promise itself (no run-time history, no idle clocks)."""
        runtimes = self.snapshot.runtimes
        if not runtimes.known and not any(job.idle_since is not None for job in self.running):
            return None
        leaving, now = self.leaving, self.now

        def end_of(job: RunningJob) -> float:
            until = leaving.get(job.request.id)
            return until if until is not None else expected_end(job, now, runtimes)

        timeline = Timeline(self.cap, list(self.running) + self._admitted, now, end_of=end_of)
        for request, slot in self._victim_slots:
            timeline.book(slot, expected_duration(request, runtimes))
        holdings = [(end_of(job), job.request.team, job.placement.flavour, job.request.units)
                    for job in self.running if job.admitted_as is not AdmittedAs.SCAVENGER]
        clock = QuotaClock(self.ledger, self._base_usage, holdings)
        # What this cycle started holds quota for as long as it is likely to run. Reservations are left out:
        # the promise timeline counts their quota as held from now (safe for backfill), which would tell every
        # job of the cohort it waits hours for quota a reservation only takes later.
        for job in self._admitted:
            if job.admitted_as is not AdmittedAs.SCAVENGER:
                clock.add(end_of(job), job.request.team, job.placement.flavour, job.request.units)
        for request, slot in self._victim_slots:
            clock.add(slot.start + expected_duration(request, runtimes), request.team, slot.flavour, request.units)
        return Guess(timeline, clock)

    def plan_waits(self) -> None:
        """Estimated starts for every waiting job, in cycle order: each job is booked at the earliest instant
        its shape fits (and its quota allows), after those before it. On the reservations' timeline (time
        limits) unless the snapshot says how long jobs really run or which notebooks are idle: then on the
        likely one (``_guess``), where reserved jobs are planned too and start no later than reserved."""
        guess = self._guess()
        timeline = self.timeline if guess is None else guess.timeline
        duration = (lambda r: r.time_limit_s) if guess is None else (
            lambda r: expected_duration(r, self.snapshot.runtimes))
        for job_id in self.processed:
            waiting = self.waiting.get(job_id)
            if waiting is None or (waiting.planned and not (guess is not None and waiting.reserved)):
                continue
            request = waiting.job.request
            best: Slot | None = None
            reclaim_at: float | None = None
            reclaim_note = ""
            for option in waiting.plan_for:
                flavour, quota_reason = option.flavour, option.quota_reason
                if option.reclaim:
                    # Its nominal quota is lent out: it starts when borrowers may be preempted and have left.
                    after = self._reclaim_after(request, flavour, guess is not None)
                    if after is not None:
                        if reclaim_at is None or after.at < reclaim_at:
                            reclaim_at, reclaim_note = after.at, after.note
                        continue
                not_before = self.now
                if quota_reason is not None:
                    clock = self._quota_clock() if guess is None else guess.clock
                    quota_free = clock.free_at(request, flavour, quota_reason, option.nominal_only)
                    if quota_free is None:
                        continue
                    not_before = max(not_before, quota_free)
                slot = timeline.earliest(request, flavour, not_before=max(not_before, self.now),
                                         widen_at=self._widen_at(waiting.job), best_fit=False,
                                         block_cap=self._block_cap(waiting.job))
                if slot is not None and (best is None or slot.start < best.start):
                    best = slot
            reserved_at = waiting.estimate if waiting.reserved else None
            if reclaim_at is not None and (best is None or reclaim_at <= best.start):
                waiting.estimate, waiting.note = reclaim_at, reclaim_note
            elif best is not None:
                timeline.book(best, duration(request))
                waiting.estimate = best.start
                if guess is not None:
                    waiting.note = self._guess_note(request, best.flavour)
            if reserved_at is not None and (waiting.estimate is None or reserved_at <= waiting.estimate):
                waiting.estimate, waiting.note = reserved_at, ""

    def _guess_note(self, request: JobRequest, flavour: str) -> str:
        """What an estimate on the likely timeline counts on, in words: idle notebooks the reaper will free,
        and how long jobs have lately run against their limits."""
        idle = sum(1 for job in self.running
                   if job.placement.flavour == flavour and idle_release(job, self.now) is not None)
        parts = [f"the idle reaper freeing {idle} idle notebook(s)"] if idle else []
        runtimes = self.snapshot.runtimes
        if runtimes.known:
            parts.append("jobs ending as they have lately, not at their time limits")
        return "a guess counting on " + " and ".join(parts) if parts else ""

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

    def estimates(self) -> dict[str, float | None]:
        return {job_id: w.estimate for job_id, w in sorted(self.waiting.items())}

    def result(self) -> CycleResult:
        waiting = self.waiting
        position: dict[str, int] = {}
        for team in self.queues:
            count = 0
            for job in self.queues[team]:
                job_id = job.request.id
                if job_id in waiting:
                    count += 1
                    position[job_id] = count
        waits = [Wait(job_id, w.reason, w.message, position[job_id], w.estimate, w.note)
                 for job_id in self.processed if (w := waiting.get(job_id)) is not None]
        return CycleResult(now=self.now, admits=self.admits, preempts=self.preempts,
                           reservations=self.reservations, waits=waits, relabels=self.relabels)


def _reclaim_need(request: JobRequest, verdict: Verdict) -> int:
    """What a reclaim needs: the job's size, or its cohort's deficit if larger."""
    return max(request.units, verdict.deficit)


def _proportionate_units(request: JobRequest, verdict: Verdict) -> int:
    """The most a reclaim should stop: four times what it needs, or 64 units more."""
    need = _reclaim_need(request, verdict)
    return max(4 * need, need + 64)


#: How often a gang's move search drops a job that cannot restart elsewhere and tries again.
_MIGRATE_RETRIES = 4


def _max_moves(request: JobRequest, config: PolicyConfig) -> int:
    """How many jobs a gang may move out of its way: ``migrate_max_moves`` per 512 units it needs. A
    1,024-GPU gang waits for whole nodes on which the sweep trials it was reclaimed for have scattered; moving
    them costs each a checkpoint, and waiting for them to end costs the gang's 1,024 GPUs the while."""
    return config.migrate_max_moves * max(1, request.units // 512)


def _oversize(request: JobRequest, verdict: Verdict) -> int:
    """Victims larger than this are far larger than a reclaim needs: twice what it needs."""
    return 2 * _reclaim_need(request, verdict)


def _lent_out(flavour: str) -> Miss:
    """The miss of a job that fits its team's nominal quota only once borrowers it cannot stop yet give it back."""
    return Miss(Fit.NO_FIT, Reason.WAITING_FOR_CAPACITY,
                f"fits the team's nominal {flavour} quota, which is lent out; no borrower can be stopped for it "
                f"yet (all inside their minimum run time, far larger than this job, or notebooks, which "
                f"give their slices back when they end or go idle)")


def _hold_start(hold: QuotaHold) -> float:
    return hold.start


def _ending_end(ending: _Ending) -> float:
    return ending.end


def _better(best: _Best | None, index: int, reason: Reason, message: str) -> _Best:
    """Keep the most promising reason (ties: the flavour listed first)."""
    rank = _REASON_RANK[reason]
    if best is None or (rank, -index) > (best.rank, -best.index):
        return _Best(rank, index, reason, message)
    return best

