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

from ..model.durations import format_duration
from ..model.flavours import FLAVOURS
from ..model.job import PriorityClass, TopologyLevel
from .capacity import Capacity, Pool
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
#: A flavour the plan may start a waiting job on: (flavour, quota reason holding it back or None, waiting for
#: reclaim, within nominal only: a reserved non-preemptible job of its team needs the nominal quota).
_PlanFor = tuple[str, Reason | None, bool, bool]

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
    plan_for: list[_PlanFor] = field(default_factory=list)
    estimate: float | None = None
    planned: bool = False        # the estimate is fixed already (reservation, victims)
    reserved: bool = False       # planned by a reservation: the estimate may still come out sooner (``_guess``)
    note: str = ""               # what the estimate counts on, when it is a guess


@dataclass(slots=True)
class _Class:
    """What every job of one equivalence class gets for the rest of the cycle once one of them waited."""

    reason: Reason
    message: str
    plan_for: list[_PlanFor]
    misses: list[tuple[int, str, Pool, Verdict, Miss]]
    min_limit: float
    quota: tuple[int, ...] | None      # None: refused by quota, which only tightens within a cycle
    refused: list[_PlanFor] = field(default_factory=list)


class _Cycle:
    """The mutable state of one cycle and the steps of :func:`run_cycle`."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot = snapshot
        self.now = now
        self.config = snapshot.config
        if snapshot.carried is None:
            self.cap = Capacity(snapshot.nodes, snapshot.running)
            self.ledger = QuotaLedger(snapshot.teams, snapshot.running)
            self.timeline = Timeline(self.cap, snapshot.running, now)
            self.capacity_totals = cluster_capacity(snapshot.nodes)
        else:                                # the same, brought up to date from the last pass's
            working = snapshot.carried.working(snapshot.nodes, snapshot.teams, snapshot.running, now)
            self.cap, self.ledger, self.timeline = working.cap, working.ledger, working.timeline
            self.capacity_totals = working.totals
        self._base_usage = dict(self.ledger.usage)
        self.queues = team_queues(snapshot.pending, now, self.config)
        self.alloc: dict[str, list[float]] = {}
        self._shares: dict[str, float] = {}
        self._nominal_fit: dict[tuple[str, int, tuple[str, ...]], tuple[int, bool]] = {}
        self.running = sorted(snapshot.running, key=lambda r: r.request.id)
        self.leaving: dict[str, float] = {}
        self.victims_for: dict[str, list[RunningJob]] = {}
        alloc = self.alloc
        speed = {f: FLAVOURS[f].speed if f in FLAVOURS else 1.0 for f in self.cap.pools}
        for job in self.running:
            request = job.request
            row = alloc.get(request.team)
            if row is None:
                row = alloc[request.team] = [0.0, 0.0, 0.0]
            row[0] += request.units * speed.get(job.placement.flavour, 1.0)
            row[1] += request.pods * request.cpus_per_pod
            row[2] += request.pods * request.memory_gb_per_pod
            if job.terminating:
                self.leaving[job.request.id] = job_end(job, now)
                if job.preempted_for is not None:
                    self.victims_for.setdefault(job.preempted_for, []).append(job)
        self.admits: list[Admit] = []
        self.preempts: list[Preempt] = []
        self.reservations: list[Reserve] = []
        self.waiting: dict[str, _Waiting] = {}
        self.processed: list[str] = []
        self.blocked_reservations = 0
        self._miss_cache: dict[tuple[object, ...], tuple[Miss, float]] = {}
        self._no_victims: set[tuple[object, ...]] = set()
        self._block_caps: dict[str, int | None] = {}
        self._candidates: dict[tuple[str, Band], list[Victim]] = {}
        self._borrowed_units: dict[tuple[str, str], dict[str, int]] = {}
        #: Leaving jobs a waiting job counts on (see ``_wait_for_leaving``), and shapes they cannot help.
        self._claimed: set[str] = set()
        self._unsettled: set[tuple[object, ...]] = set()
        self._leaving_lists: dict[str, list[tuple[float, str, Victim]]] | None = None
        self._unclaimed: dict[tuple[str, int, int], tuple[list[Victim], int, int, dict[int, int]]] = {}
        #: Victim candidates per (flavour, band, team, mode, number of jobs leaving): the list only changes
        #: when more jobs are signalled.
        self._eligible: dict[tuple[object, ...], list[Victim]] = {}
        self._movable_cache: dict[tuple[str, int, int], list[Victim]] = {}
        self.relabels: list[Relabel] = []
        self._relabelled: set[str] = set()
        self._spots: dict[str, list[tuple[int, int]]] = {}
        self._reclaim_ready: dict[tuple[str, str, bool], list[tuple[float, str, int, str]]] = {}
        self._clock: QuotaClock | None = None
        self._classes: dict[tuple[object, ...], _Class] = {}
        #: (end, team, flavour, units) of what this cycle admitted or committed, for the quota clock.
        self._holdings: list[tuple[float, str, str, int]] = []
        #: (start, team, flavour, units) of each reservation, for the quota side of backfill; those a job
        #: being processed would overlap if it started now.
        self._quota_holds: list[tuple[float, str, str, int, bool]] = []
        self._held_now: list[tuple[str, str, int]] = []
        self._extra_now: dict[tuple[str, str], int] = {}
        self._nominal_extra_now: dict[tuple[str, str], int] = {}
        self._nominal_only_keys: frozenset[tuple[str, str]] = frozenset()
        self._held_extra: dict[tuple[int, int], tuple[dict[tuple[str, str], int], dict[tuple[str, str], int],
                                                      frozenset[tuple[str, str]]]] = {}
        self._ended_cache: dict[float, dict[tuple[str, str], tuple[int, int]]] = {}
        self._ends: list[tuple[float, RunningJob]] | None = None
        self._by_team: dict[tuple[str, str], list[RunningJob]] | None = None
        #: What this cycle started and the slots of jobs waiting for victims, for the estimates' timeline.
        self._admitted: list[RunningJob] = []
        self._victim_slots: list[tuple[JobRequest, Slot]] = []

    # -- fair share and order --------------------------------------------------------------------------------

    def _add_alloc(self, request: JobRequest, flavour: str, sign: int) -> None:
        row = self.alloc.setdefault(request.team, [0.0, 0.0, 0.0])
        for k, value in enumerate(request_rates(request, flavour)):
            row[k] += sign * value
        self._shares.pop(request.team, None)

    def share(self, team: str) -> float:
        value = self._shares.get(team)
        if value is None:
            state = self.snapshot.teams.get(team)
            if state is None:
                value = float("inf")
            else:
                a = self.alloc.get(team, [0.0, 0.0, 0.0])
                value = dominant_share((a[0], a[1], a[2]), state.decayed_usage, self.capacity_totals,
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
        if hit is not None and hit[0] == version:
            return hit[1]
        state = self.snapshot.teams.get(request.team)
        fits = False
        if state is not None:
            usage = self.ledger.nominal_usage
            for f in request.flavours:
                quota = state.quotas.get(f)
                if quota is not None and usage.get((request.team, f), 0) + request.units <= quota.nominal:
                    fits = True
                    break
        self._nominal_fit[key] = (version, fits)
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
        holds = self._quota_holds                      # sorted by start
        overlap = (len(holds), bisect_left(holds, (self.now + request.time_limit_s,)))
        self._held_now = [hold[1:4] for hold in holds[:overlap[1]]]
        cached = self._held_extra.get(overlap)
        if cached is None:
            extra: dict[tuple[str, str], int] = {}
            nominal_extra: dict[tuple[str, str], int] = {}
            for team, f, units in self._held_now:
                extra[(team, f)] = extra.get((team, f), 0) + units
                nominal_extra[(team, f)] = nominal_extra.get((team, f), 0) + units
            if self._held_now:
                for key, (total, nominal) in self._ended_by(holds[0][0]).items():
                    extra[key] = extra.get(key, 0) - total
                    nominal_extra[key] = nominal_extra.get(key, 0) - nominal
            cached = (extra, nominal_extra, frozenset((h[1], h[2]) for h in holds[:overlap[1]] if h[4]))
            self._held_extra[overlap] = cached
        self._extra_now, self._nominal_extra_now, self._nominal_only_keys = cached
        outcome = self._process(pending)
        if klass is not None and outcome is not None:
            self._classes[klass] = outcome

    def _ended_by(self, at: float) -> dict[tuple[str, str], tuple[int, int]]:
        """Quota units (all, of which nominal) per (team, flavour) of running jobs that end by ``at``."""
        hit = self._ended_cache.get(at)
        if hit is None:
            if self._ends is None:           # (end, job) of the running jobs in quota, soonest first
                self._ends = sorted(((self.leaving.get(job.request.id, job_end(job, self.now)), job)
                                     for job in self.running if job.admitted_as is not AdmittedAs.SCAVENGER),
                                    key=lambda e: e[0])
            hit = {}
            for end, job in self._ends:
                if end > at:
                    break
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
        pools = [(f, self.cap.pools[f]) for f in request.flavours if f in self.cap.pools]
        if not pools:
            return self._refuse(pending, quota, Reason.INVALID_FLAVOUR,
                                f"none of {', '.join(request.flavours)} exists in this cluster")
        shaped = [(f, p) for f, p in pools if 0 < request.units_per_pod <= p.max_cap]
        if not shaped:
            return self._refuse(pending, quota, Reason.INVALID_FLAVOUR,
                                f"no node has {request.units_per_pod} units of {' or '.join(f for f, _ in pools)}")
        # b. Victims already leaving for this job: start if it fits anyway, else wait for them.
        inflight = [v for v in self.victims_for.get(request.id, ()) if v.request.id in self.leaving]
        if inflight:
            self._claimed.update(v.request.id for v in inflight)
        # c. Quota on each flavour, in the job's order of preference.
        options: list[tuple[str, Pool, Verdict]] = []
        refused: list[_PlanFor] = []
        best: tuple[int, int, Reason, str] | None = None
        #: Flavours the job fits only once its team's own preemptible jobs give it their nominal quota.
        relabel: dict[str, list[RunningJob]] = {}
        for index, (f, pool) in enumerate(shaped):
            verdict = self.ledger.verdict(request, f, self._extra_now, self._nominal_only_keys,
                                          self._nominal_extra_now)
            if verdict.admitted_as is None:
                assert verdict.reason is not None
                best = _better(best, index, verdict.reason, verdict.message)
                if verdict.reason in (Reason.QUOTA_FULL, Reason.COHORT_FULL):
                    refused.append((f, verdict.reason, False, (request.team, f) in self._nominal_only_keys))
                room = self._nominal_room(request, f) if verdict.reason is Reason.QUOTA_FULL else None
                if room is not None:
                    relabel[f] = room[1]
                    options.append((f, pool, room[0]))
            else:
                options.append((f, pool, verdict))
        if not options:
            assert best is not None
            return self._refuse(pending, quota, best[2], best[3], refused)
        ctx = self._context(pending)
        small = is_small(request, self.config.small_job_max_units)
        # d. Placement now: the first flavour that fits without preemption (misses cached per shape).
        misses: list[tuple[int, str, Pool, Verdict, Miss]] = []
        for index, (f, pool, verdict) in enumerate(options):
            if f in relabel:                 # only worth it if the job starts now
                placement = place(self.cap, pool, request, ctx, small)
                if placement is not None:
                    self._relabel(request, f, relabel[f])
                    self._admit(pending, pool, placement, AdmittedAs.NOMINAL, ctx.end)
                    return None
                continue
            if verdict.reclaim and not inflight:
                misses.append((index, f, pool, verdict, Miss(
                    Fit.NO_FIT, Reason.WAITING_FOR_CAPACITY,
                    f"fits the team's nominal {f} quota, which is lent out; no borrower can be stopped for it "
                    f"yet (all inside their minimum run time, far larger than this job, or notebooks, which "
                    f"give their slices back when they end or go idle)")))
                continue
            known_miss = self._known_miss(pending, pool, ctx)
            if known_miss is not None:
                misses.append((index, f, pool, verdict, known_miss))
                continue
            placement = place(self.cap, pool, request, ctx, small)
            if placement is not None:
                assert verdict.admitted_as is not None
                self._admit(pending, pool, placement, verdict.admitted_as, ctx.end)
                return None
            misses.append((index, f, pool, verdict, self._miss(pending, pool, ctx, small)))
        if inflight:
            self._await_victims(pending, inflight, options)
            return None
        if not misses:
            assert best is not None
            return self._refuse(pending, quota, best[2], best[3], refused)
        # e. Preemption, when the job's band allows it and its best flavour is not merely deferred.
        if max(m[4].fit for m in misses) < Fit.DEFERRED:
            for index, f, pool, verdict, miss in misses:
                if self._try_preempt(pending, pool, verdict, ctx, small, miss, mode="now"):
                    return None
        # f. Wait, with a reservation for the head of the line.
        choice = max(misses, key=lambda m: (_REASON_RANK[m[4].reason], -m[0]))
        miss = choice[4]
        waiting = self._wait(pending, miss.reason, miss.message)
        waiting.plan_for = [(f, None, v.reclaim, False) for _, f, _, v, m in misses if not m.never]
        reservable = [m for m in misses if not m[4].never and not m[3].reclaim and m[4].reason in _CAPACITY_REASONS]
        outcome = _Class(miss.reason, miss.message, waiting.plan_for, reservable, request.time_limit_s, quota)
        if reservable and miss.reason in _CAPACITY_REASONS and not miss.never:
            if self._maybe_reserve(pending, waiting, reservable, ctx, small):
                return None
        return outcome

    def _refuse(self, pending: PendingJob, quota: tuple[int, ...], reason: Reason, message: str,
                plan_for: list[_PlanFor] | None = None) -> _Class:
        waiting = self._wait(pending, reason, message)
        waiting.plan_for = plan_for or []
        refused = [entry for entry in waiting.plan_for if entry[1] is not None]
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
        if hit is not None and (hit[0].fit is Fit.NO_FIT or ctx.end >= hit[1]):
            return hit[0]
        return None

    def _miss(self, pending: PendingJob, pool: Pool, ctx: PlaceContext, small: bool) -> Miss:
        """Why the job does not fit ``pool``; identical shapes share the answer for the rest of the cycle
        (free units only shrink and reservations only grow within a cycle, so a miss stays a miss)."""
        request = pending.request
        cacheable = not ctx.avoid and ctx.restart_block is None
        key = (pool.flavour, request.shape, ctx.widened, ctx.block_cap)
        if cacheable:
            hit = self._miss_cache.get(key)
            if hit is not None and (hit[0].fit is Fit.NO_FIT or ctx.end >= hit[1]):
                return hit[0]
        miss = explain(self.cap, pool, request, ctx, small, self.now, self._widen_at(pending))
        if ctx.avoid and miss.fit is Fit.NO_FIT and place(self.cap, pool, request, replace(ctx, avoid=frozenset()),
                                                          small) is not None:
            left = ", ".join(sorted(pending.avoid_nodes))
            miss = replace(miss, message=f"fits only on nodes it left after a failure or a move ({left}); may use "
                                         f"them in {format_duration(self._avoid_until(pending) - self.now)}")
        if cacheable:
            self._miss_cache[key] = (miss, ctx.end)
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

    def _await_victims(self, pending: PendingJob, victims: list[RunningJob],
                       options: list[tuple[str, Pool, Verdict]]) -> None:
        request = pending.request
        by = max(self.leaving[v.request.id] for v in victims)
        flavour = victims[0].placement.flavour
        option = next(((f, p, v) for f, p, v in options if f == flavour), options[0])
        f, pool, verdict = option
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

    def _reclaim_after(self, request: JobRequest, flavour: str, likely: bool) -> tuple[float, str] | None:
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
                ready.append((min(at, end), job.request.team, job.request.units, holder))
            ready.sort()
            self._reclaim_ready[(cohort, flavour, likely)] = ready
        got = count = 0
        held: dict[str, int] = {}
        last = self.now
        for at, team, units, why in ready:
            if team == request.team:
                continue
            got, count, last = got + units, count + 1, at
            held[why] = held.get(why, 0) + 1
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
        return max(last, self.now), note

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
                     miss: Miss, mode: str, slot: Slot | None = None) -> bool:
        """Find and signal victims so ``pending`` fits ``pool``. ``mode``: ``now`` (reclaim, critical, single
        node; gangs only over scavenger work), ``reservation`` (a gang whose reservation is far off, costed) or
        ``migrate`` (a gang waiting for capacity or one domain: move smaller jobs off the nodes it needs to room
        they fit elsewhere now, costed; see :meth:`_movable`)."""
        request = pending.request
        assert verdict.admitted_as is not None
        band = band_of(request.priority_class, verdict.admitted_as)
        if band is Band.SCAVENGER or miss.never:
            return False
        immediate = verdict.reclaim or band is Band.CRITICAL or request.pods == 1
        scavengers_only = mode == "now" and not immediate
        key = (pool.flavour, request.shape, band, request.team, verdict.reclaim, mode, ctx.widened, ctx.block_cap)
        if key in self._no_victims:
            return False
        if mode == "now" and self._wait_for_leaving(pending, pool, verdict, ctx, small):
            return True
        cohort = self.snapshot.teams[request.team].cohort
        teams = self.snapshot.teams
        reclaim_only = verdict.reclaim and band is not Band.CRITICAL
        if reclaim_only and not self._reclaim_possible(request, pool.flavour, cohort, verdict.deficit):
            self._no_victims.add(key)
            return False
        pick = (pool.flavour, band, request.team, scavengers_only, reclaim_only, len(self.leaving))
        eligible = self._movable(pool.flavour, request) if mode == "migrate" else self._eligible.get(pick)
        if eligible is None:
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
        if not eligible:
            self._no_victims.add(key)
            return False
        oversize = None
        if reclaim_only:
            # Borrowers no more than twice what the reclaim needs first: stopping a far larger gang frees GPUs
            # nobody here needs, and that gang cannot come back until the cohort can lend it all again.
            oversize = _oversize(request, verdict)
            eligible = sorted(eligible, key=lambda v: (v.job.request.units > oversize, v.key))
        found = self._search(pending, pool, verdict, ctx, small, eligible, oversize)
        if reclaim_only and found is not None and not self._proportionate(pending, verdict, found):
            # The lesser evil: borrowers near its size inside their minimum run time, not a far larger gang.
            found = self._search(pending, pool, verdict, ctx, small,
                                 self._young_borrowers(pending, pool, verdict, band, cohort))
            if found is None:
                return False
        if found is None:
            self._no_victims.add(key)
            return False
        if mode == "migrate":
            found = self._moves(pending, pool, verdict, ctx, small, eligible, found)
            if found is None:
                return False
        if mode != "now" and not self._worth_it(request, pool.flavour, found, slot):
            return False
        self._signal(pending, pool, verdict, found, mode, band)
        return True

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

    def _nominal_room(self, request: JobRequest, flavour: str) -> tuple[Verdict, list[RunningJob]] | None:
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
        first_hold = self._quota_holds[0][0] if self._held_now else None
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
        return verdict, chosen

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
        leaving, units, borrowed, per_node = self._unclaimed_leaving(pool.flavour)
        g = request.units_per_pod
        if (not leaving or verdict.deficit > borrowed or units + pool.free_units < request.units
                or (request.pods == 1 and not any(pool.free[j] + n >= g and pool.usable[j] and not pool.spare[j]
                                                  for j, n in per_node.items()))):
            self._unsettled.add(key)
            return False
        undo = self.ledger.hold(self._held_now) if self._held_now else None
        try:
            target = self.ledger.reclaim_target(request, pool.flavour) if verdict.reclaim else None
            search = VictimSearch(self.cap, self.ledger, pool, request, ctx, small, target, self._spots)
            found = search.settle(leaving, self.leaving)
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

    def _unclaimed_leaving(self, flavour: str) -> tuple[list[Victim], int, int, dict[int, int]]:
        """Leaving jobs nobody counts on yet, with cheap bounds for ``_wait_for_leaving``: their units, their
        borrowed units (what they give back to quota; a team's own leaving jobs count too) and units per node."""
        key = (flavour, len(self.leaving), len(self._claimed))
        hit = self._unclaimed.get(key)
        if hit is None:
            leaving = [v for _, _, v in self._leaving_victims(flavour) if v.id not in self._claimed]
            per_node: dict[int, int] = {}
            for v in leaving:
                for j, n in self._spots[v.id]:
                    per_node[j] = per_node.get(j, 0) + n
            units = sum(v.job.request.units for v in leaving)
            borrowed = sum(v.job.request.units for v in leaving if v.job.admitted_as is not AdmittedAs.SCAVENGER)
            hit = (leaving, units, borrowed, per_node)
            self._unclaimed[key] = hit
        return hit

    def _leaving_victims(self, flavour: str) -> list[tuple[float, str, Victim]]:
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
        insort(self._leaving_lists.setdefault(job.placement.flavour, []), (self.leaving[v.id], v.id, v))

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

    def _signal(self, pending: PendingJob, pool: Pool, verdict: Verdict, found: Found, mode: str,
                band: Band) -> None:
        request = pending.request
        state = self.snapshot.teams[request.team]
        assert verdict.admitted_as is not None
        latest = self.now
        for v in found.victims:
            job = v.job
            other = self.snapshot.teams.get(job.request.team)
            if mode == "reservation":
                reason = PreemptReason.RESERVATION
            elif mode == "migrate":
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
            avoid = found.placement.nodes if mode == "migrate" else ()
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
        insort(self._quota_holds, (slot.start, request.team, slot.flavour, request.units, not may_borrow(request)))
        self._holding(slot.start + request.time_limit_s, request.team, slot.flavour, request.units)
        waiting.estimate = slot.start
        waiting.planned = True
        waiting.reserved = True
        waiting.message += f"; reserved from {format_duration(slot.start - self.now)} from now"

    def _reserve_after_quota(self, pending: PendingJob, waiting: _Waiting, refused: list[_PlanFor]) -> None:
        """A job held back by quota that its team's (or cohort's) jobs free at a known time is planned in its
        place in the queue like any other: reserved from when both quota and nodes allow."""
        if not self._may_reserve(pending):
            return
        request = pending.request
        best: Slot | None = None
        for flavour, reason, _, nominal_only in refused:
            if flavour not in self.cap.pools or reason is None:
                continue
            quota_free = self._quota_clock().free_at(request, flavour, reason, nominal_only)
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
                       misses: list[tuple[int, str, Pool, Verdict, Miss]], ctx: PlaceContext, small: bool) -> bool:
        """Reserve the earliest slot for a blocked job (or, for a gang whose slot is far off, preempt for it
        when that costs less). Returns True when it preempted instead.

        A gang as large as a block may move jobs out of its way even when it is not among the jobs that hold
        reservations: it waits for whole blocks, which small jobs fragment, and moving them (each fits elsewhere
        now and restarts at once) is how it gets one, whatever its place in the cycle's order."""
        request = pending.request
        may_reserve = self._may_reserve(pending)
        if not may_reserve and not self._any_pool(request, lambda pool: pool.fills_blocks(request)):
            return False
        best: tuple[float, int, Slot, tuple[int, str, Pool, Verdict, Miss]] | None = None
        for entry in misses:
            index, f, pool, verdict, miss = entry
            if miss.never or verdict.reclaim or miss.reason not in _CAPACITY_REASONS:
                continue
            slot = self._earliest_avoiding(pending, f, ctx)
            if slot is not None and (best is None or (slot.start, index) < (best[0], best[1])):
                best = (slot.start, index, slot, entry)
        if request.pods > 1 and best is not None:
            for index, f, pool, verdict, miss in misses:
                slot_f = best[2] if best[3][1] == f else None
                if (slot_f is not None and not verdict.reclaim and pool.free_units >= request.units
                        and miss.reason in (Reason.WAITING_FOR_TOPOLOGY, Reason.WAITING_FOR_CAPACITY)
                        and self._try_preempt(pending, pool, verdict, ctx, small, miss, mode="migrate",
                                              slot=slot_f)):
                    return True
        if not may_reserve:
            return False
        far = self.config.reservation_preempt_after_s
        if request.pods > 1 and (best is None or best[0] - self.now > far):
            for index, f, pool, verdict, miss in misses:
                slot_f = best[2] if best is not None and best[3][1] == f else None
                if not miss.never and not verdict.reclaim and self._try_preempt(
                        pending, pool, verdict, ctx, small, miss, mode="reservation", slot=slot_f):
                    return True
        if best is None:
            return False
        self._reserve(pending, waiting, best[2])
        return False

    # -- phase 5 ---------------------------------------------------------------------------------------------

    def defragment(self) -> None:
        gangs: dict[str, int] = {}
        for waiting in self.waiting.values():
            request = waiting.job.request
            if request.pods > 1 and waiting.reason in _CAPACITY_REASONS and waiting.plan_for:
                flavour = waiting.plan_for[0][0]
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

    def _guess(self) -> tuple[Timeline, QuotaClock] | None:
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
        return timeline, clock

    def plan_waits(self) -> None:
        """Estimated starts for every waiting job, in cycle order: each job is booked at the earliest instant
        its shape fits (and its quota allows), after those before it. On the reservations' timeline (time
        limits) unless the snapshot says how long jobs really run or which notebooks are idle: then on the
        likely one (``_guess``), where reserved jobs are planned too and start no later than reserved."""
        guess = self._guess()
        timeline = self.timeline if guess is None else guess[0]
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
            for flavour, quota_reason, reclaim, nominal_only in waiting.plan_for:
                if reclaim:
                    # Its nominal quota is lent out: it starts when borrowers may be preempted and have left.
                    after = self._reclaim_after(request, flavour, guess is not None)
                    if after is not None:
                        if reclaim_at is None or after[0] < reclaim_at:
                            reclaim_at, reclaim_note = after
                        continue
                not_before = self.now
                if quota_reason is not None:
                    clock = self._quota_clock() if guess is None else guess[1]
                    quota_free = clock.free_at(request, flavour, quota_reason, nominal_only)
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


def _better(best: tuple[int, int, Reason, str] | None, index: int, reason: Reason,
            message: str) -> tuple[int, int, Reason, str]:
    """Keep the most promising reason (ties: the flavour listed first)."""
    rank = _REASON_RANK[reason]
    if best is None or (rank, -index) > (best[0], -best[1]):
        return (rank, index, reason, message)
    return best

