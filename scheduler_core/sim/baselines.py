"""The policies Shoal is measured against, on the same engine, snapshot and decision types.

* ``fifo``: strict FIFO by submission per flavour (Slurm's ``sched/builtin``, a partition per GPU type),
  gang-aware: a queue's head starts when all its pods fit; nothing passes it on that flavour.
* ``kueue``: Kueue's quota model — per-team nominal quota, borrowing from the cohort within borrowing and lending
  limits, reclaim of lent quota by preempting borrowers — with its BestEffortFIFO queueing (a head that does not
  fit does not block the next), heads that fit without borrowing first, no reservation, first-fit placement.
* ``easy``: Slurm-style EASY backfill: FIFO by submission, one reservation for the first job that does not fit,
  computed from running jobs' time limits; a later job starts only if it ends (by its time limit) before the
  reservation or uses none of its nodes. No quotas.

Each is a pure ``Policy``: ``(snapshot, now) -> CycleResult``. Every pending job that does not start gets a
``Wait`` with a reason and its position in the policy's own order (``kueue``: in its team's queue, as Kueue
reports a workload's position in its ClusterQueue). All three enforce time limits the same way
(a job at its limit is signalled and not requeued), since that is part of the job's spec, not of the policy.
Placement is first fit (``freemap``), with the same hard rules as Shoal's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from ..model.team import Quota
from ..policy.types import Policy
from ..policy.decisions import Admit, CycleResult, Preempt, PreemptReason, Reason, Reserve, Wait
from ..policy.snapshot import AdmittedAs, NodeState, PendingJob, Placement, RunningJob, Snapshot, TeamState
from .freemap import CarriedFree, FreeMap, placement_key

POLICIES = ("fifo", "kueue", "easy")


@dataclass
class _Cycle:
    """What one cycle has decided so far, and the free map it decided on."""

    snapshot: Snapshot
    now: float
    free: FreeMap
    result: CycleResult
    failed: set[tuple[object, ...]] = field(default_factory=set)
    signalled: set[str] = field(default_factory=set)
    _after: FreeMap | None = None
    _after_failed: set[tuple[object, ...]] = field(default_factory=set)
    _after_fits: set[tuple[object, ...]] = field(default_factory=set)
    #: The running jobs' units per (team, flavour), for ``QuotaBook`` (read only).
    quota_usage: Mapping[tuple[str, str], int] = field(default_factory=dict)
    _borrowers: dict[str, list[RunningJob]] | None = None
    #: Waits so far per team, when positions count within each team's queue (``kueue``); ``None``: one order.
    _team_waits: dict[str, int] | None = None

    @classmethod
    def start(cls, snapshot: Snapshot, now: float) -> _Cycle:
        carried = _CARRIED.update(snapshot.nodes, snapshot.running)
        cycle = cls(snapshot, now, carried.free.copy(), CycleResult(now=now), quota_usage=carried.usage)
        if carried.first_limit_end() <= now:        # most passes: nobody is at the limit, without a scan
            cycle.result.preempts.extend(time_limit_preempts(snapshot.running, now))
        cycle.signalled = {p.job_id for p in cycle.result.preempts}
        return cycle

    def after_exits(self) -> FreeMap:
        """The free map once every signalled job has exited (kept up to date as the cycle admits and signals)."""
        if self._after is None:
            self._after = self.free.copy()
            for job in self.snapshot.running:
                if job.terminating or job.request.id in self.signalled:
                    self._after.give(job.placement)
        return self._after

    def borrowers(self, flavour: str) -> list[RunningJob]:
        """The running jobs on ``flavour`` that borrowed and may be preempted, in the snapshot's order: the
        candidates of every reclaim of the pass, listed once per pass instead of once per reclaiming job."""
        if self._borrowers is None:
            self._borrowers = {}
            for job in self.snapshot.running:
                if (not job.terminating and job.admitted_as is AdmittedAs.BORROWED and job.request.preemptible
                        and job.request.team in self.snapshot.teams):
                    self._borrowers.setdefault(job.placement.flavour, []).append(job)
        return self._borrowers.get(flavour, [])

    def fits_after_exits(self, pending: PendingJob, flavour: str) -> bool:
        """Whether the job would fit once the signalled jobs exit. Both answers are remembered: whether a shape
        fits only grows as jobs are signalled (a failure is forgotten then) and only shrinks as jobs are admitted
        (a fit is forgotten then); a long queue of one shape asks once per pass, not once per job."""
        key = placement_key(pending, flavour)
        if key in self._after_failed:
            return False
        if key in self._after_fits:
            return True
        found = self.after_exits().place(pending.request, flavour, restart_block=pending.restart_block,
                                         avoid=pending.avoid_nodes) is not None
        (self._after_fits if found else self._after_failed).add(key)
        return found

    def signal(self, victim: RunningJob, preempt: Preempt) -> None:
        self.signalled.add(victim.request.id)
        self.result.preempts.append(preempt)
        if self._after is not None:
            self._after.give(victim.placement)
        self._after_failed.clear()

    def place(self, pending: PendingJob, *, exclude: frozenset[str] = frozenset(),
              flavours: tuple[str, ...] | None = None) -> Placement | None:
        """The first listed flavour (of ``flavours``, when given) that fits now, or ``None``; failures are
        remembered for the cycle (capacity only shrinks within a cycle, so a shape that failed fails again)."""
        for flavour in pending.request.flavours if flavours is None else flavours:
            key = placement_key(pending, flavour) + (exclude,)
            if key in self.failed:
                continue
            found = self.free.place(pending.request, flavour, restart_block=pending.restart_block,
                                    avoid=pending.avoid_nodes, exclude=exclude)
            if found is not None:
                return found
            self.failed.add(key)
        return None

    def admit(self, pending: PendingJob, placement: Placement, admitted_as: AdmittedAs, *,
              backfill: bool = False) -> None:
        self.free.take(placement)
        if self._after is not None:
            self._after.take(placement)
            self._after_fits.clear()
        self.result.admits.append(Admit(pending.request.id, placement, admitted_as, backfill=backfill))

    def can_ever_fit(self, pending: PendingJob) -> bool:
        """Whether the job fits the healthy cluster with nothing running (else waiting for it blocks for ever)."""
        empty = _empty_cluster(self.snapshot.nodes)
        key = (pending.request.shape, pending.restart_block, pending.avoid_nodes)
        fits = empty.fits.get(key)
        if fits is None:
            if len(empty.fits) >= 10_000:
                empty.fits.clear()
            fits = empty.fits[key] = any(
                empty.free.place(pending.request, f, restart_block=pending.restart_block,
                                 avoid=pending.avoid_nodes) is not None
                for f in pending.request.flavours)
        return fits

    def why(self, pending: PendingJob) -> tuple[Reason, str]:
        """Why a job that did not fit waits: no such flavour, not enough free units, or units in the wrong places."""
        request = pending.request
        known = [f for f in request.flavours if f in self.free.by_flavour]
        if not known:
            return Reason.INVALID_FLAVOUR, f"no node of this cluster offers {', '.join(request.flavours)}"
        if not self.can_ever_fit(pending):
            return Reason.WAITING_FOR_TOPOLOGY, "does not fit this cluster's healthy nodes even when empty"
        if any(self.free.free_units(f) >= request.units for f in known):
            return Reason.WAITING_FOR_TOPOLOGY, "enough free units, but not where the job's shape needs them"
        return Reason.WAITING_FOR_CAPACITY, "not enough free units"

    def wait(self, pending: PendingJob, reason: Reason, message: str, estimated_start: float | None = None) -> None:
        """``pending`` waits: its position is its place among the pass's waits, or among its team's (see
        ``per_team_positions``)."""
        counts = self._team_waits
        if counts is None:
            position = len(self.result.waits) + 1
        else:
            team = pending.request.team
            position = counts[team] = counts.get(team, 0) + 1
        self.result.waits.append(Wait(pending.request.id, reason, message, position, estimated_start))

    def per_team_positions(self) -> None:
        """Number waits within each team's queue from now on, as Kueue reports a workload's position in its
        ClusterQueue. One team's admission then moves only that team's positions, not those of every job
        behind it in the pass (each moved position is a store write, every pass, in a long queue)."""
        self._team_waits = {}


@dataclass(slots=True)
class _Empty:
    """The cluster with nothing running, and whether each shape fits it: the same cycle after cycle while no
    node's health changes (memoising pure functions of the nodes keeps the policy pure). Read only but ``fits``."""

    free: FreeMap
    fits: dict[tuple[object, ...], bool]


_EMPTY: dict[tuple[tuple[str, str], ...], _Empty] = {}
#: The last nodes asked for and their ``_Empty``: the snapshot builder hands over the very same nodes tuple while
#: no node changes.
_LAST_EMPTY: list[tuple[tuple[NodeState, ...], _Empty]] = []
#: The free map and quota usage of the last snapshot's running jobs (a memo: each pass copies what it changes).
_CARRIED = CarriedFree()


def _empty_cluster(nodes: tuple[NodeState, ...]) -> _Empty:
    """``_Empty`` for ``nodes``, memoised on the nodes' names and health."""
    if _LAST_EMPTY and _LAST_EMPTY[0][0] is nodes and isinstance(nodes, tuple):
        return _LAST_EMPTY[0][1]
    key = tuple((node.name, str(node.health)) for node in nodes)
    found = _EMPTY.get(key)
    if found is None:
        if len(_EMPTY) >= 8:
            _EMPTY.clear()
        found = _EMPTY[key] = _Empty(FreeMap(nodes), {})
    _LAST_EMPTY[:] = [(nodes, found)]
    return found


def time_limit_preempts(running: Iterable[RunningJob], now: float) -> list[Preempt]:
    """Signal every job that has run for its whole time limit; it ends (TIMED_OUT), it is not requeued."""
    out = []
    for job in running:
        if not job.terminating and now >= job.limit_end:
            out.append(Preempt(job.request.id, PreemptReason.TIME_LIMIT, job.request.grace_s, requeue=False))
    return out


def _by_submission(pending: Iterable[PendingJob]) -> list[PendingJob]:
    return sorted(pending, key=_SUBMISSION)


_SUBMISSION = attrgetter("request.submitted_at", "request.id")
_REQUEUED = attrgetter("queued_at", "request.id")
_RANK = attrgetter("request.priority_class.rank")


@dataclass(frozen=True, slots=True)
class _Pools:
    """What the teams' quotas alone decide: each cohort's pool per flavour (the sum of its members' lendable
    quota), and per (team, flavour) its pool's key and the part of its nominal quota that is its own alone."""

    pool: dict[tuple[str, str], int]
    own: dict[tuple[str, str], tuple[tuple[str, str], int]]


_TEAM_TERMS = attrgetter("name", "quotas", "cohort")
#: The last teams' (name, quotas, cohort) and their ``_Pools``: the snapshot builder hands over each team's quotas
#: as the same object while they stay the same, and every pass of a baseline builds a ``QuotaBook``.
_LAST_POOLS: list[tuple[tuple[tuple[str, Mapping[str, Quota], str], ...], _Pools]] = []


def _pools(teams: Mapping[str, TeamState]) -> _Pools:
    """``_Pools`` of ``teams``, worked out again only when a team, its quotas object or its cohort changes."""
    key = tuple(map(_TEAM_TERMS, teams.values()))
    if _LAST_POOLS and _LAST_POOLS[0][0] == key:
        return _LAST_POOLS[0][1]
    pool: dict[tuple[str, str], int] = {}
    own: dict[tuple[str, str], tuple[tuple[str, str], int]] = {}
    for team in teams.values():
        for flavour in team.quotas:
            lendable = QuotaBook._lendable(team, flavour)
            pool[(team.cohort, flavour)] = pool.get((team.cohort, flavour), 0) + lendable
            own[(team.name, flavour)] = ((team.cohort, flavour), team.nominal(flavour) - lendable)
    pools = _Pools(pool, own)
    _LAST_POOLS[:] = [(key, pools)]
    return pools


class QuotaBook:
    """Kueue's quota arithmetic for one cycle, per team and flavour.

    A team's lendable quota is its nominal quota, or its ``lending_limit`` when set; the rest of its nominal
    quota is its own alone. The cohort's pool, per flavour, is the sum of its members' lendable quota; a team's
    use above its own part draws on the pool. A job fits as *nominal* within the team's nominal quota, as
    *borrowed* within its borrowing limit while the pool lasts.
    """

    def __init__(self, teams: dict[str, TeamState], usage: Mapping[tuple[str, str], int]) -> None:
        """``usage``: the running jobs' units per (team, flavour) (``CarriedFree.usage``)."""
        self.teams = teams
        self.usage = dict(usage)
        pools = _pools(teams)
        self.pool = pools.pool                     # read only: shared by every book of the same quotas
        self.pool_used: dict[tuple[str, str], int] = {}
        pool_used = self.pool_used
        for team_flavour, used in self.usage.items():
            terms = pools.own.get(team_flavour)
            if terms is not None and used > terms[1]:
                pool_used[terms[0]] = pool_used.get(terms[0], 0) + used - terms[1]

    def used(self, team: str, flavour: str) -> int:
        return self.usage.get((team, flavour), 0)

    @staticmethod
    def _lendable(team: TeamState, flavour: str) -> int:
        quota = team.quotas.get(flavour)
        if quota is None:
            return 0
        return quota.nominal if quota.lending_limit is None else quota.lending_limit

    def _drawn(self, team: TeamState, flavour: str, used: int) -> int:
        own = team.nominal(flavour) - self._lendable(team, flavour)
        return max(0, used - own)

    def classify(self, team_name: str, flavour: str, units: int) -> AdmittedAs | None:
        """How the job would be admitted on quota alone, or ``None`` if quota does not allow it."""
        team = self.teams.get(team_name)
        if team is None or flavour not in team.quotas:
            return None
        quota = team.quotas[flavour]
        used = self.used(team_name, flavour)
        key = (team.cohort, flavour)
        extra = self._drawn(team, flavour, used + units) - self._drawn(team, flavour, used)
        if self.pool_used.get(key, 0) + extra > self.pool.get(key, 0):
            return None
        if used + units <= quota.nominal:
            return AdmittedAs.NOMINAL
        if quota.borrowing_limit is not None and used + units - quota.nominal > quota.borrowing_limit:
            return None
        return AdmittedAs.BORROWED

    def nominal_fits(self, team_name: str, flavour: str, units: int) -> bool:
        team = self.teams.get(team_name)
        return team is not None and self.used(team_name, flavour) + units <= team.nominal(flavour)

    def copy(self) -> QuotaBook:
        clone = QuotaBook.__new__(QuotaBook)
        clone.teams = self.teams
        clone.usage = dict(self.usage)
        clone.pool = self.pool
        clone.pool_used = dict(self.pool_used)
        return clone

    def add(self, team_name: str, flavour: str, units: int) -> None:
        team = self.teams[team_name]
        used = self.used(team_name, flavour)
        key = (team.cohort, flavour)
        self.pool_used[key] = self.pool_used.get(key, 0) + self._drawn(team, flavour, used + units) - \
            self._drawn(team, flavour, used)
        self.usage[(team_name, flavour)] = used + units

    def quota_reason(self, team_name: str, flavours: Iterable[str], units: int) -> tuple[Reason, str]:
        team = self.teams.get(team_name)
        listed = [f for f in flavours if team is not None and f in team.quotas]
        if not listed:
            return Reason.INVALID_FLAVOUR, f"team {team_name!r} has no quota for any listed flavour"
        for flavour in listed:
            quota = self.teams[team_name].quotas[flavour]
            limit = None if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit
            if limit is None or self.used(team_name, flavour) + units <= limit:
                return Reason.COHORT_FULL, f"the cohort has no idle {flavour} quota to lend"
        return Reason.QUOTA_FULL, "the team is at its nominal quota plus borrowing limit"


def fifo(snapshot: Snapshot, now: float) -> CycleResult:
    """Strict FIFO per flavour, as Slurm's ``sched/builtin`` is per partition: jobs start in submission order, and
    once a job that could fit is left pending, nothing behind it starts on any flavour it lists ("once any job in
    a partition is left pending, no other jobs in that partition will be scheduled"). A job listing several
    flavours may still start on one whose queue is not blocked."""
    cycle = _Cycle.start(snapshot, now)
    book = QuotaBook(dict(snapshot.teams), cycle.quota_usage)
    heads: dict[str, str] = {}   # flavour -> the job that blocks its queue
    behind: dict[str, str] = {}  # head -> the message of the jobs behind it
    offered = cycle.free.by_flavour
    for pending in _by_submission(snapshot.pending):
        request = pending.request
        flavours = request.flavours
        open_flavours: tuple[str, ...]
        # Most jobs list one flavour, and a long queue passes through here every pass: that case spelt out.
        if len(flavours) == 1:
            open_flavours = () if flavours[0] in heads else flavours
        else:
            open_flavours = tuple(f for f in flavours if f not in heads)
        if not open_flavours:
            on_offer = flavours[0] in offered if len(flavours) == 1 else any(f in offered for f in flavours)
            if on_offer:
                cycle.wait(pending, Reason.WAITING_FOR_CAPACITY, behind[heads[flavours[0]]])
            else:
                cycle.wait(pending, *cycle.why(pending))
            continue
        placement = cycle.place(pending, flavours=open_flavours)
        if placement is not None:
            flavour = placement.flavour
            cycle.admit(pending, placement, book.classify(request.team, flavour, request.units)
                        or AdmittedAs.BORROWED)
            if request.team in book.teams:
                book.add(request.team, flavour, request.units)
            continue
        reason, message = cycle.why(pending)
        cycle.wait(pending, reason, message)
        if reason is not Reason.INVALID_FLAVOUR and cycle.can_ever_fit(pending):
            heads.update((f, request.id) for f in open_flavours)
            behind[request.id] = f"strict FIFO: behind {request.id}"
    return cycle.result


def kueue(snapshot: Snapshot, now: float) -> CycleResult:
    """Kueue with BestEffortFIFO queues in one cohort: quota, borrowing, reclaim; no reservation; first fit."""
    cycle = _Cycle.start(snapshot, now)
    cycle.per_team_positions()
    book = QuotaBook(dict(snapshot.teams), cycle.quota_usage)
    queues: dict[str, list[PendingJob]] = {}
    for pending in snapshot.pending:
        queues.setdefault(pending.request.team, []).append(pending)
    for queue in queues.values():
        # Within a ClusterQueue: priority, then the time it (re-)entered the queue (Kueue's eviction timestamp).
        # Two sorts on C-level keys, the second stable (``reverse`` keeps equal keys in order): every pass sorts
        # every waiting job, and one Python key function per job was the larger cost.
        queue.sort(key=_REQUEUED)
        queue.sort(key=_RANK, reverse=True)

    def needs_borrowing(p: PendingJob) -> bool:
        return not any(book.nominal_fits(p.request.team, f, p.request.units) for f in p.request.flavours)

    # A job that waits waits for a reason its team, shape and placement rules decide, while nothing was admitted
    # or signalled since (the count of both stamps that): a long queue of like jobs is worked out once a pass.
    waited: dict[tuple[object, ...], tuple[int, Reason, str]] = {}
    result = cycle.result
    # Round after round, each team's next head; a round's heads in order, those that fit without borrowing first.
    ordered = [queues[team] for team in sorted(queues)]
    depth = 0
    while ordered:
        heads = [queue[depth] for queue in ordered]
        depth += 1
        ordered = [queue for queue in ordered if len(queue) > depth]     # one long queue is not walked with forty
        if len(heads) > 1:      # a sort works out the key of a lone head too: deep in one long queue, every round
            heads.sort(key=lambda p: (needs_borrowing(p), -p.request.priority_class.rank, p.queued_at,
                                      p.request.id))
        for pending in heads:
            key = (pending.request.team, pending.request.shape, pending.restart_block, pending.avoid_nodes)
            stamp = len(result.admits) + len(result.preempts)
            seen = waited.get(key)
            if seen is not None and seen[0] == stamp:
                cycle.wait(pending, seen[1], seen[2])
                continue
            _kueue_one(cycle, book, pending)
            if len(result.admits) + len(result.preempts) == stamp:
                wait = result.waits[-1]
                waited[key] = (stamp, wait.reason, wait.message)
    return result


def _kueue_one(cycle: _Cycle, book: QuotaBook, pending: PendingJob) -> None:
    request = pending.request
    quota_ok = False
    for flavour in request.flavours:
        admitted_as = book.classify(request.team, flavour, request.units)
        if admitted_as is None:
            continue
        quota_ok = True
        placement = _place_on(cycle, pending, flavour)
        if placement is None:
            continue
        cycle.admit(pending, placement, admitted_as)
        book.add(request.team, flavour, request.units)
        return
    # Reclaim: a job within its team's nominal quota may preempt other teams' borrowers, for quota and for room.
    reclaimable = [f for f in request.flavours if book.nominal_fits(request.team, f, request.units)]
    for flavour in reclaimable:
        if cycle.fits_after_exits(pending, flavour):
            cycle.wait(pending, Reason.PREEMPTING_VICTIMS, "waiting for signalled jobs to exit")
            return
        victims = _reclaim_victims(cycle, book, pending, flavour)
        if victims:
            for victim in victims:
                cycle.signal(victim, Preempt(victim.request.id, PreemptReason.RECLAIM, victim.request.grace_s,
                                             requeue=True, for_job=request.id))
            cycle.wait(pending, Reason.PREEMPTING_VICTIMS, f"reclaiming quota from {len(victims)} borrower(s)")
            return
    if not quota_ok and not reclaimable:
        reason, message = book.quota_reason(request.team, request.flavours, request.units)
    else:
        reason, message = cycle.why(pending)
    cycle.wait(pending, reason, message)


def _place_on(cycle: _Cycle, pending: PendingJob, flavour: str) -> Placement | None:
    key = placement_key(pending, flavour) + (frozenset(),)
    if key in cycle.failed:
        return None
    found = cycle.free.place(pending.request, flavour, restart_block=pending.restart_block,
                             avoid=pending.avoid_nodes)
    if found is None:
        cycle.failed.add(key)
    return found


def _reclaim_victims(cycle: _Cycle, book: QuotaBook, pending: PendingJob, flavour: str) -> list[RunningJob]:
    """Kueue's classic order: borrowers of other teams in the cohort, lowest priority first, then the most
    recently admitted. Remove candidates until the job fits, then add back those it did not need."""
    request = pending.request
    teams = cycle.snapshot.teams
    team = teams[request.team]
    candidates = [
        job for job in cycle.borrowers(flavour)
        if job.request.id not in cycle.signalled and job.request.team != team.name
        and (other := teams[job.request.team]).cohort == team.cohort
        and book.used(job.request.team, flavour) > other.nominal(flavour)
    ]
    if not candidates:
        return []
    candidates.sort(key=lambda j: (j.request.priority_class.rank, -j.started_at, j.request.id))
    trial = cycle.after_exits().copy()
    quota = book.copy()

    def fits() -> bool:
        return (trial.free_units(flavour) >= request.units
                and quota.classify(request.team, flavour, request.units) is not None
                and trial.place(request, flavour, restart_block=pending.restart_block,
                                avoid=pending.avoid_nodes) is not None)

    removed: list[RunningJob] = []
    for job in candidates:
        trial.give(job.placement)
        quota.add(job.request.team, flavour, -job.request.units)
        removed.append(job)
        if fits():
            break
    else:
        return []
    for job in reversed(list(removed)):
        trial.take(job.placement)
        quota.add(job.request.team, flavour, job.request.units)
        if fits():
            removed.remove(job)
        else:
            trial.give(job.placement)
            quota.add(job.request.team, flavour, -job.request.units)
    return removed


def easy(snapshot: Snapshot, now: float) -> CycleResult:
    """EASY backfill: FIFO, one reservation for the first job that does not fit, backfill that cannot delay it."""
    cycle = _Cycle.start(snapshot, now)
    book = QuotaBook(dict(snapshot.teams), cycle.quota_usage)
    ending = {p.job_id for p in cycle.result.preempts}
    reservation: Reserve | None = None
    reserved: frozenset[str] = frozenset()
    for pending in _by_submission(snapshot.pending):
        request = pending.request
        if reservation is None:
            placement = cycle.place(pending)
            if placement is None:
                reason, message = cycle.why(pending)
                found = None if reason is Reason.INVALID_FLAVOUR else _shadow(cycle, pending, ending)
                if found is None:
                    cycle.wait(pending, reason, message)
                    continue
                reservation = found
                reserved = frozenset(found.nodes)
                cycle.result.reservations.append(found)
                cycle.wait(pending, reason, message, estimated_start=found.start_at)
                continue
            backfill = False
        else:
            placement = cycle.place(pending, exclude=reserved)
            if placement is None and now + request.time_limit_s <= reservation.start_at:
                placement = cycle.place(pending)
            if placement is None:
                cycle.wait(pending, Reason.BEHIND_RESERVATION,
                           f"would delay {reservation.job_id}, reserved from t={reservation.start_at:.0f}",
                           estimated_start=reservation.start_at)
                continue
            backfill = True
        admitted_as = book.classify(request.team, placement.flavour, request.units) or AdmittedAs.BORROWED
        if request.team in book.teams:
            book.add(request.team, placement.flavour, request.units)
        cycle.admit(pending, placement, admitted_as, backfill=backfill)
    return cycle.result


def _shadow(cycle: _Cycle, pending: PendingJob, ending: set[str]) -> Reserve | None:
    """When and where the job fits if running jobs end at their time limits (signalled ones by their deadline):
    Slurm's shadow time. ``None`` if it never fits."""
    best: Reserve | None = None
    for flavour in pending.request.flavours:
        if flavour not in cycle.free.by_flavour:
            continue
        ends = []
        for job in cycle.snapshot.running:
            if job.placement.flavour != flavour:
                continue
            if job.terminating or job.request.id in ending:
                end = job.terminate_by if job.terminate_by is not None else cycle.now + job.request.grace_s
            else:
                end = job.limit_end
            ends.append((max(end, cycle.now), job.request.id, job))
        ends.sort(key=lambda e: (e[0], e[1]))
        trial = cycle.free.copy()
        need = pending.request.units
        for end, _, job in ends:
            trial.give(job.placement)
            if best is not None and end >= best.start_at:
                break
            if trial.free_units(flavour) < need:
                continue
            placement = trial.place(pending.request, flavour, restart_block=pending.restart_block,
                                    avoid=pending.avoid_nodes)
            if placement is not None:
                best = Reserve(pending.request.id, flavour, placement.nodes, end)
                break
    return best


BASELINES: dict[str, Policy] = {"fifo": fifo, "kueue": kueue, "easy": easy}
