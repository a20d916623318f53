"""The working copy one scheduling pass changes (Kueue's cycle snapshot), behind a few verbs.

It holds what the pass changes as it goes — free units (``Capacity``), quota usage (``QuotaLedger``), the
timeline of returning units, each team's allocation for fair share, the jobs leaving — and the decisions made
so far. The stages above it (:mod:`stage_nominate`, :mod:`stage_preempt`, :mod:`stage_reserve`,
:mod:`stage_explain`) read it freely but change it only through the verbs: :meth:`WorkingCopy.admit`,
:meth:`~WorkingCopy.commit`, :meth:`~WorkingCopy.hold`, :meth:`~WorkingCopy.hold_for_victims`,
:meth:`~WorkingCopy.hold_quota`, :meth:`~WorkingCopy.preempt`, :meth:`~WorkingCopy.release` and
:meth:`~WorkingCopy.relabel`. Each decision is seen by every job after it, so the order of the verbs is the
order of the cycle."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass

from ..model.flavours import FLAVOURS
from .capacity import Capacity, Pool
from .carried import Working
from .decisions import Admit, Preempt, Relabel, Reserve
from .fairshare import cluster_capacity, dominant_share, request_rates
from .placement import occupy
from .quota import EndRow, QuotaClock, QuotaEnds, QuotaLedger, may_borrow, unreclaimable_share
from .record import record
from .reservation import Slot, Timeline, add_holds, job_end
from .snapshot import AdmittedAs, JobRequest, Placement, PolicyConfig, RunningJob, Snapshot


@record(order=True)
class QuotaHold:
    """A reservation's quota, from ``start``: what backfill must leave it (ordered by start, for bisection)."""

    start: float
    team: str
    flavour: str
    units: int
    nominal_only: bool


@record
class HeldQuota:
    """The reservations' quota a job would overlap if it started now (:meth:`WorkingCopy.overlap`).

    ``now``: (team, flavour, units) of each reservation it overlaps; ``extra`` and ``nominal_extra``: that
    quota per (team, flavour), less what running jobs free before the first of them starts, counted against
    it by ``QuotaLedger.verdict``; ``nominal_only_keys``: (team, flavour) a reserved non-preemptible job needs
    within nominal; ``first_start``: when the first overlapped reservation starts (None: none)."""

    now: list[tuple[str, str, int]]
    extra: dict[tuple[str, str], int]
    nominal_extra: dict[tuple[str, str], int]
    nominal_only_keys: frozenset[tuple[str, str]]
    first_start: float | None


_NO_HOLDS = HeldQuota([], {}, {}, frozenset(), None)


@record
class VictimSlot:
    """A job that starts once its victims exit, on ``slot`` (held for it; the estimates' timeline books it)."""

    request: JobRequest
    slot: Slot


@record
class _Holding:
    """Quota this pass took (an admission, a job waiting for victims, a reservation) until ``end``."""

    end: float
    team: str
    flavour: str
    units: int


@dataclass(slots=True)
class _Alloc:
    """A team's current allocation: GPU-equivalents (speed-weighted), CPUs and memory (DRF)."""

    gpus: float = 0.0
    cpus: float = 0.0
    memory_gb: float = 0.0


def _index(snapshot: Snapshot, now: float) -> Working:
    """Free units, quota usage and the timeline of returning units: built from the snapshot, or brought up to
    date from the last pass's (``Snapshot.carried``)."""
    if snapshot.carried is None:
        cap = Capacity(snapshot.nodes, snapshot.running)
        return Working(cap, QuotaLedger(snapshot.teams, snapshot.running), Timeline(cap, snapshot.running, now),
                       cluster_capacity(snapshot.nodes))
    return snapshot.carried.working(snapshot.nodes, snapshot.teams, snapshot.running, now)


class WorkingCopy:
    """The snapshot as this pass has changed it so far, and the decisions that changed it."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot = snapshot
        self.now = now
        self.config: PolicyConfig = snapshot.config
        indexed = _index(snapshot, now)
        self.cap, self.ledger, self.timeline = indexed.cap, indexed.ledger, indexed.timeline
        self.capacity_totals = indexed.totals
        self._ends_index = indexed.quota_ends
        self._base_usage = dict(self.ledger.usage)
        self._base_nominal = dict(self.ledger.nominal_usage)
        self.running = sorted(snapshot.running, key=lambda r: r.request.id)
        #: Jobs leaving (signalled before or during this pass), with when their units come back.
        self.leaving: dict[str, float] = {}
        #: The jobs of ``leaving``, by id (the quota clock moves their quota ends: ``QuotaEnds.at``).
        self._leaving_jobs: dict[str, RunningJob] = {}
        #: Jobs signalled for a pending job by an earlier pass, per that job.
        self.victims_for: dict[str, list[RunningJob]] = {}
        self.alloc: dict[str, _Alloc] = {}
        self._shares: dict[str, float] = {}
        self._tally_running()
        # The decisions so far.
        self.admits: list[Admit] = []
        self.preempts: list[Preempt] = []
        self.reservations: list[Reserve] = []
        self.relabels: list[Relabel] = []
        #: The jobs this pass relabelled borrowed, by id (the running jobs' quota ends still list them as nominal).
        self.relabelled: dict[str, RunningJob] = {}
        #: What this pass started and the slots of jobs waiting for victims, for the estimates' timeline.
        self.admitted: list[RunningJob] = []
        self.victim_slots: list[VictimSlot] = []
        #: What this pass admitted, committed or reserved, for the quota clock.
        self._holdings: list[_Holding] = []
        self._clock: QuotaClock | None = None
        #: Each reservation's quota, sorted by start, and what the job being processed overlaps of it.
        self.quota_holds: list[QuotaHold] = []
        self.held: HeldQuota = _NO_HOLDS
        self._held_cache: dict[tuple[int, int], HeldQuota] = {}
        self._ended_cache: dict[float, dict[tuple[str, str], tuple[int, int]]] = {}
        #: The running jobs' quota ends as the pass knows them (``QuotaEnds.at``), until a job is released.
        self._end_lists: dict[tuple[str, str], list[EndRow]] | None = None
        #: Each job :meth:`release` marked leaving, and until when, in order (stages that keep their own lists
        #: of leaving jobs catch up from it).
        self.released: list[tuple[RunningJob, float]] = []
        #: Moved by every verb: a stage may keep what it worked out from the copy while this stays the same.
        self.version = 0
        self._awaited: frozenset[tuple[str, str]] | None = None

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
                self._leaving_jobs[job.request.id] = job
                if job.preempted_for is not None:
                    self.victims_for.setdefault(job.preempted_for, []).append(job)

    # -- verbs -----------------------------------------------------------------------------------------------

    def admit(self, request: JobRequest, pool: Pool, placement: Placement, admitted_as: AdmittedAs, end: float,
              backfill: bool) -> None:
        """Start ``request`` on ``placement`` until ``end``: its units, quota and share are taken now."""
        self.version += 1
        occupy(self.cap, pool, request, placement, end)
        self.ledger.add(request, pool.flavour, admitted_as)
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._holding(end, request.team, pool.flavour, request.units)
        self._add_alloc(request, pool.flavour, +1)
        self.timeline.set_until(request, placement, end, extend=True)
        self.admits.append(Admit(request.id, placement, admitted_as, backfill=backfill))
        self.admitted.append(RunningJob(request, placement, admitted_as, self.now))

    def commit(self, request: JobRequest, flavour: str, admitted_as: AdmittedAs) -> None:
        """Count a job that waits for its victims as if it ran: its team must not preempt twice for it."""
        self.version += 1
        self.ledger.add(request, flavour, admitted_as)
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._holding(self.now + request.grace_s + request.time_limit_s, request.team, flavour, request.units)
        self._add_alloc(request, flavour, +1)

    def hold(self, request: JobRequest, slot: Slot) -> None:
        """Keep ``slot``'s units for ``request`` from its start (lower work may use them only if it ends first)."""
        self.version += 1
        pool = self.cap.pools[slot.flavour]
        add_holds(pool, self.timeline.holds(slot, request.id))
        self.timeline.book(slot, request.time_limit_s)
        self.reservations.append(Reserve(request.id, slot.flavour,
                                         self.timeline.placement(slot).nodes, slot.start))

    def hold_for_victims(self, request: JobRequest, slot: Slot) -> None:
        """:meth:`hold` for a job that starts when its victims exit, noted for the estimates' timeline."""
        self.hold(request, slot)
        self.victim_slots.append(VictimSlot(request, slot))

    def hold_quota(self, request: JobRequest, slot: Slot, nominal_only: bool, start: float | None = None) -> None:
        """The quota side of a reservation: backfill may not take what the reserved job needs from ``start`` (the
        slot's unless given)."""
        self.version += 1
        start = slot.start if start is None else start
        insort(self.quota_holds, QuotaHold(start, request.team, slot.flavour, request.units, nominal_only))
        self._holding(slot.start + request.time_limit_s, request.team, slot.flavour, request.units)

    def preempt(self, job: RunningJob, decision: Preempt) -> None:
        """Signal ``job``: it leaves once its grace is up."""
        self.preempts.append(decision)
        self.release(job, self.now + decision.grace_s)

    def release(self, job: RunningJob, until: float) -> None:
        """``job``'s units come back at ``until`` (it is leaving)."""
        self.version += 1
        self.leaving[job.request.id] = until
        self._leaving_jobs[job.request.id] = job
        self._end_lists = None
        self.timeline.set_until(job.request, job.placement, until)
        self.released.append((job, until))

    def relabel(self, jobs: list[RunningJob], flavour: str, for_job: str) -> None:
        """The team's own ``jobs`` count as borrowed from now, so that ``for_job`` takes their nominal quota."""
        self.version += 1
        for job in jobs:
            self.ledger.relabel(job.request, flavour, AdmittedAs.NOMINAL, AdmittedAs.BORROWED)
            self.relabelled[job.request.id] = job
            self.relabels.append(Relabel(job.request.id, AdmittedAs.BORROWED, for_job=for_job))
        self._ended_cache.clear()
        self._held_cache.clear()

    # -- fair share ------------------------------------------------------------------------------------------

    def _add_alloc(self, request: JobRequest, flavour: str, sign: int) -> None:
        row = self.alloc.setdefault(request.team, _Alloc())
        gpus, cpus, memory_gb = request_rates(request, flavour)
        row.gpus += sign * gpus
        row.cpus += sign * cpus
        row.memory_gb += sign * memory_gb
        self._shares.pop(request.team, None)

    def share(self, team: str) -> float:
        """The team's weighted dominant share, as this pass has changed its allocation."""
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

    # -- quota over time -------------------------------------------------------------------------------------

    def quota_state(self, request: JobRequest) -> tuple[int, ...]:
        """Changes whenever the job's team's usage or its cohort's pool does."""
        state = self.snapshot.teams.get(request.team)
        versions = self.ledger.version
        return (versions.get(request.team, 0), versions.get("cohort:" + state.cohort, 0) if state else 0)

    def overlap(self, request: JobRequest) -> HeldQuota:
        """Reserved jobs' quota counts against a job that would still run when they start (backfill must not
        take the quota a reservation needs, any more than its nodes), less the quota of running jobs that will
        have ended by the first of those starts (by their time limits: never later). Kept as :attr:`held` until
        the next call; cached per number of holds and number overlapped."""
        holds = self.quota_holds                       # sorted by start
        ahead = bisect_left(holds, self.now + request.time_limit_s, key=_hold_start)
        key = (len(holds), ahead)
        held = self._held_cache.get(key)
        if held is None:
            overlapped = holds[:ahead]
            now = [(h.team, h.flavour, h.units) for h in overlapped]
            extra: dict[tuple[str, str], int] = {}
            nominal_extra: dict[tuple[str, str], int] = {}
            for team, f, units in now:
                extra[(team, f)] = extra.get((team, f), 0) + units
                nominal_extra[(team, f)] = nominal_extra.get((team, f), 0) + units
            if now:
                for pair, (total, nominal) in self._ended_by(holds[0].start).items():
                    extra[pair] = extra.get(pair, 0) - total
                    nominal_extra[pair] = nominal_extra.get(pair, 0) - nominal
            held = HeldQuota(now, extra, nominal_extra,
                             frozenset((h.team, h.flavour) for h in overlapped if h.nominal_only),
                             holds[0].start if now else None)
            self._held_cache[key] = held
        self.held = held
        return held

    def _ended_by(self, at: float) -> dict[tuple[str, str], tuple[int, int]]:
        """Quota units (all, of which nominal) per (team, flavour) of running jobs that end by ``at``."""
        hit = self._ended_cache.get(at)
        if hit is None:
            hit = {}
            for (_, flavour), rows in self._pass_end_lists().items():
                for end, team, units, nominal_units in rows:
                    if end > at:
                        break
                    total, nominal = hit.get((team, flavour), (0, 0))
                    hit[(team, flavour)] = (total + units, nominal + nominal_units)
            # A job relabelled borrowed this pass no longer holds nominal quota: its end frees none.
            for job in self.relabelled.values():
                pair = (job.request.team, job.placement.flavour)
                if pair in hit and self.leaving.get(job.request.id, max(job.limit_end, self.now)) <= at:
                    total, nominal = hit[pair]
                    hit[pair] = (total, nominal - job.request.units)
            self._ended_cache[at] = hit
        return hit

    def _holding(self, end: float, team: str, flavour: str, units: int) -> None:
        self._holdings.append(_Holding(end, team, flavour, units))
        if self._clock is not None:
            self._clock.add(end, team, flavour, units)

    def kept_share(self, request: JobRequest, flavour: str) -> float:
        """What a non-preemptible ``request`` must leave its cohort free to lend after borrowing ``flavour``
        (``quota.unreclaimable_share``): the quota verdict, the reservation and the estimate ask the same. Work that
        gives borrowed units back (``quota.may_borrow``) gets 1 without a look at the queue: the ledger and the clock
        do not read the share for it, and the estimate asks for every waiting job."""
        if may_borrow(request):
            return 1.0
        state = self.snapshot.teams.get(request.team)
        awaited = state is not None and (state.cohort, flavour) in self.quota_awaited()
        return unreclaimable_share(request, self.config, awaited)

    def quota_awaited(self) -> frozenset[tuple[str, str]]:
        """(cohort, flavour) where a preemptible job waits that quota held back at the last pass
        (``PendingJob.quota_held_after_s``): worked out once a pass, when a non-preemptible job first asks."""
        if self._awaited is None:
            teams = self.snapshot.teams
            self._awaited = frozenset(
                (teams[p.request.team].cohort, f) for p in self.snapshot.pending
                if p.quota_held_after_s is not None and p.request.preemptible and p.request.team in teams
                for f in p.request.flavours)
        return self._awaited

    def quota_clock(self) -> QuotaClock:
        """When quota frees up: built on first use from the pass's starting point (the running jobs' sorted quota
        ends, kept by the carried index or sorted here), then told of what it adds."""
        if self._clock is None:
            self._clock = QuotaClock.from_ends(self.ledger, self._base_usage, self._pass_end_lists(),
                                               self._base_nominal)
            for h in self._holdings:
                self._clock.add(h.end, h.team, h.flavour, h.units)
        return self._clock

    def _pass_end_lists(self) -> dict[tuple[str, str], list[EndRow]]:
        """The running jobs' quota ends per (cohort, flavour), sorted: a leaving job's when it has left, any other's
        at ``job_end`` (its time limit, or now if past it). From the carried index, or sorted here once."""
        if self._end_lists is None:
            if self._ends_index is None:
                self._ends_index = QuotaEnds(self.snapshot.teams, self.running)
            self._end_lists = self._ends_index.at(self.now, self.leaving, self._leaving_jobs)
        return self._end_lists

    def likely_clock(self, end_of: Callable[[RunningJob], float]) -> QuotaClock:
        """A fresh quota clock from the pass's starting point with running jobs ending at ``end_of``."""
        holdings = [(end_of(job), job.request.team, job.placement.flavour, job.request.units,
                     job.admitted_as is AdmittedAs.NOMINAL)
                    for job in self.running if job.admitted_as is not AdmittedAs.SCAVENGER]
        return QuotaClock(self.ledger, self._base_usage, holdings, self._base_nominal)


def _hold_start(hold: QuotaHold) -> float:
    return hold.start

