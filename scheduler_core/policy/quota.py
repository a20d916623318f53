"""Quota: per team and flavour, nominal vs borrowed, and the cohort's idle lendable pool (Kueue's model).

* ``usage`` of a team on a flavour: units of its running jobs, terminating ones included (they still hold
  them), plus jobs this cycle committed (admitted, or waiting for victims it preempted). Scavenger work is
  outside quota: it runs on idle units only and anyone may take them back.
* A lender offers ``min(lending_limit or nominal, nominal − usage)`` (never below zero); a borrower borrows
  ``usage − nominal``. A cohort's *pool* is offers minus borrowing. A team may borrow while the pool, not
  counting itself, covers all it borrows and it stays within its ``borrowing_limit``. Feasible pools are
  exactly those where each borrower's units can be assigned to lenders within their limits, so "no team
  lends more than its lending limit" is ``pool >= 0``.
* A team always gets its nominal back: a nominal admission that would drive the pool below zero needs
  *reclaim*, borrowers in its cohort preempted until the pool is whole again.
* Whether a job fits the team's *nominal* quota is judged on ``nominal_usage``: the units of its jobs admitted
  as nominal, not of those admitted as borrowed. A borrowed job stays borrowed for life (it is reclaimable),
  so it must not also use up the nominal quota: otherwise one big borrowed run would lock its own team's
  non-preemptible work (notebooks, jobs that cannot checkpoint) out of the quota it is guaranteed, beside idle
  GPUs. The pool stays on total usage, so a nominal admission beside borrowed work still lends nothing the
  cohort does not have (it needs reclaim if the pool would go below zero), and the team's total stays within
  ``nominal + borrowing_limit``, as in Kueue.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from ..model.job import JobKind, PriorityClass
from .decisions import Reason
from ..model.team import Quota
from .record import record
from .snapshot import AdmittedAs, JobRequest, PolicyConfig, RunningJob, TeamState


def may_borrow(request: JobRequest) -> bool:
    """Whether the job may run above its team's nominal quota. Borrowed units must come back to their lender:
    preemptible work checkpoints and leaves when reclaimed. A notebook is non-preemptible (a human is typing in
    it) but, as DESIGN §4 has it, reclaimable when idle: the idle reaper ends a notebook on borrowed slices
    sooner than one within its team's quota. Other non-preemptible work (jobs that cannot checkpoint) runs
    within nominal quota: nothing would ever give its units back. Its one way above nominal is the exception of
    ``unreclaimable_free_share`` (:meth:`QuotaLedger.verdict`): units no reclaim takes back, lent only while the
    cohort keeps so much of its quota idle that the lenders' own work still fits beside them."""
    return request.preemptible or request.kind is JobKind.NOTEBOOK


@record
class Verdict:
    """What quota says about one job on one flavour. ``admitted_as`` is None when it does not fit quota;
    ``reclaim`` is set when it fits nominal only after borrowers give back units (the pool it must restore
    to, see :meth:`QuotaLedger.reclaim_met`)."""

    admitted_as: AdmittedAs | None
    reason: Reason | None = None
    message: str = ""
    reclaim: bool = False
    #: How many borrowed units the cohort must give back before a nominal admission fits (0: none).
    deficit: int = 0
    #: Refused as non-preemptible work above nominal, yet the cohort is idle enough that it may borrow units no
    #: reclaim will ever take back (see ``unreclaimable_free_share`` of :meth:`QuotaLedger.verdict`).
    unreclaimable: bool = False


@dataclass(slots=True)
class _ExtraPool:
    """One ``extra`` mapping's effect on one cohort's pool of one flavour: per team, and in all."""

    extra: Mapping[tuple[str, str], int]
    rows: dict[str, int]
    contrib: dict[str, int]
    total: int
    seen: int


class QuotaLedger:
    """Usage per (team, flavour) and pool per (cohort, flavour), kept exact as the cycle changes things."""

    def __init__(self, teams: Mapping[str, TeamState], running: Iterable[RunningJob]) -> None:
        self.teams = teams
        self.usage: dict[tuple[str, str], int] = {}
        #: Units of jobs admitted as nominal (and reservations held as such), per (team, flavour).
        self.nominal_usage: dict[tuple[str, str], int] = {}
        self.pool: dict[tuple[str, str], int] = {}
        #: Units each cohort's teams borrow, per (cohort, flavour): what a reclaim could take back, kept as
        #: ``pool`` is so a nominal job's verdict does not sum the cohort's teams (``_borrowed_by_others``).
        self.borrowed: dict[tuple[str, str], int] = {}
        self.members: dict[str, list[str]] = {}
        #: Bumped whenever a team's usage or a cohort's pool changes: "has quota moved since?" in O(1).
        self.version: dict[str, int] = {}
        self._extra_cache: dict[tuple[int, str, str], _ExtraPool] = {}
        #: (team, flavour) of every usage change the cycle made, holds included, in order (see ``_extra_pool``).
        self._changed: list[tuple[str, str]] = []
        self._cohort_nominal: dict[tuple[str, str], int] = {}
        for name in sorted(teams):
            self.members.setdefault(teams[name].cohort, []).append(name)
        for job in running:
            if job.admitted_as is not AdmittedAs.SCAVENGER:
                key = (job.request.team, job.placement.flavour)
                self.usage[key] = self.usage.get(key, 0) + job.request.units
                if job.admitted_as is AdmittedAs.NOMINAL:
                    self.nominal_usage[key] = self.nominal_usage.get(key, 0) + job.request.units
        flavours = {f for team in teams.values() for f in team.quotas} | {f for _, f in self.usage}
        for cohort, names in self.members.items():
            for flavour in flavours:
                total = borrowing = 0
                for name in names:
                    offer, borrowed = self.terms(name, flavour, self.usage.get((name, flavour), 0))
                    total += offer - borrowed
                    borrowing += borrowed
                self.pool[(cohort, flavour)] = total
                self.borrowed[(cohort, flavour)] = borrowing

    def copy(self, teams: Mapping[str, TeamState]) -> QuotaLedger:
        """A working copy for one pass over ``teams`` (the same quotas and cohorts as this ledger's): usage and
        pools as they are, versions and the log of changes empty, as a new ledger's are."""
        clone = QuotaLedger.__new__(QuotaLedger)
        clone.teams = teams
        clone.usage = dict(self.usage)
        clone.nominal_usage = dict(self.nominal_usage)
        clone.pool = dict(self.pool)
        clone.borrowed = dict(self.borrowed)
        clone.members = self.members
        clone.version = {}
        clone._extra_cache = {}
        clone._changed = []
        clone._cohort_nominal = self._cohort_nominal
        return clone

    def count(self, job: RunningJob, sign: int) -> None:
        """Add (+1) or take out (-1) a running job's usage, as the constructor counts it, without moving versions
        or the log of changes (a carried index keeps its base ledger this way)."""
        if job.admitted_as is AdmittedAs.SCAVENGER:
            return
        self._change(job.request.team, job.placement.flavour, sign * job.request.units, bump=False,
                     nominal=job.admitted_as is AdmittedAs.NOMINAL)
        self._changed.clear()
        key = (job.request.team, job.placement.flavour)
        if not self.usage.get(key):
            self.usage.pop(key, None)
        if not self.nominal_usage.get(key):
            self.nominal_usage.pop(key, None)

    def terms(self, team: str, flavour: str, usage: int) -> tuple[int, int]:
        """(what ``team`` offers to lend, what it borrows) at ``usage``."""
        state = self.teams.get(team)
        quota = state.quotas.get(flavour) if state else None
        if quota is None:
            return 0, usage
        # Comparisons, not min()/max(): a pass asks this thousands of times.
        unused = quota.nominal - usage
        lendable = quota.nominal if quota.lending_limit is None else quota.lending_limit
        offer = unused if unused < lendable else lendable
        return (offer if offer > 0 else 0), (-unused if unused < 0 else 0)

    def _change(self, team: str, flavour: str, delta: int, bump: bool = True, nominal: bool = True) -> None:
        key = (team, flavour)
        before = self.usage.get(key, 0)
        after = before + delta
        self.usage[key] = after
        self._changed.append(key)
        if nominal:
            self.nominal_usage[key] = self.nominal_usage.get(key, 0) + delta
        state = self.teams.get(team)
        if bump:
            self.version[team] = self.version.get(team, 0) + 1
            if state is not None:
                self.version["cohort:" + state.cohort] = self.version.get("cohort:" + state.cohort, 0) + 1
        if state is None:
            return
        offer0, borrow0 = self.terms(team, flavour, before)
        offer1, borrow1 = self.terms(team, flavour, after)
        pkey = (state.cohort, flavour)
        self.pool[pkey] = self.pool.get(pkey, 0) + (offer1 - borrow1) - (offer0 - borrow0)
        self.borrowed[pkey] = self.borrowed.get(pkey, 0) + borrow1 - borrow0

    def add(self, request: JobRequest, flavour: str, admitted_as: AdmittedAs) -> None:
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._change(request.team, flavour, request.units, nominal=admitted_as is AdmittedAs.NOMINAL)

    def remove(self, request: JobRequest, flavour: str, admitted_as: AdmittedAs) -> None:
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._change(request.team, flavour, -request.units, nominal=admitted_as is AdmittedAs.NOMINAL)

    def relabel(self, request: JobRequest, flavour: str, before: AdmittedAs, after: AdmittedAs,
                bump: bool = True) -> None:
        """A running job's label changes: its team's nominal usage moves; total usage and the pool do not."""
        key = (request.team, flavour)
        delta = (request.units if after is AdmittedAs.NOMINAL else 0) - (
            request.units if before is AdmittedAs.NOMINAL else 0)
        self.nominal_usage[key] = self.nominal_usage.get(key, 0) + delta
        if bump:
            self.version[request.team] = self.version.get(request.team, 0) + 1

    def hold(self, held: list[tuple[str, str, int]]) -> Callable[[], None]:
        """Count reserved jobs' units as used, and as nominal (the safe side), for a job that would still run
        when they start; returns the undo. Versions do not move: a reservation only ever makes quota tighter."""
        for team, flavour, units in held:
            self._change(team, flavour, units, bump=False)

        def undo() -> None:
            for team, flavour, units in held:
                self._change(team, flavour, -units, bump=False)
        return undo

    def pool_after(self, team: str, flavour: str, units: int) -> int:
        """The cohort's pool if ``team`` took ``units`` more of ``flavour``."""
        state = self.teams[team]
        usage = self.usage.get((team, flavour), 0)
        offer0, borrow0 = self.terms(team, flavour, usage)
        offer1, borrow1 = self.terms(team, flavour, usage + units)
        return self.pool.get((state.cohort, flavour), 0) + (offer1 - borrow1) - (offer0 - borrow0)

    def fits_nominal(self, request: JobRequest, flavour: str) -> bool:
        state = self.teams.get(request.team)
        if state is None:
            return False
        return self.nominal_usage.get((request.team, flavour), 0) + request.units <= state.nominal(flavour)

    def reclaim_target(self, request: JobRequest, flavour: str) -> int:
        """The pool a nominal admission must leave: as whole as it was (never below zero on its account)."""
        state = self.teams[request.team]
        return min(0, self.pool.get((state.cohort, flavour), 0))

    def reclaim_met(self, request: JobRequest, flavour: str, target: int) -> bool:
        return self.pool_after(request.team, flavour, request.units) >= target

    def _extra_pool(self, cohort: str, flavour: str, extra: Mapping[tuple[str, str], int]) -> int:
        """How the cohort's pool moves if the teams in ``extra`` used that many more (or fewer) units. Kept per
        team and brought up to date from the log of usage changes, so each call costs only the teams whose
        usage moved since the last (``extra`` mappings live for the whole cycle)."""
        key = (id(extra), cohort, flavour)
        hit = self._extra_cache.get(key)
        if hit is None or hit.extra is not extra:
            rows = {team: units for (team, f), units in extra.items()
                    if f == flavour and team in self.teams and self.teams[team].cohort == cohort}
            contrib = {team: self._contribution(team, flavour, units) for team, units in rows.items()}
            hit = _ExtraPool(extra, rows, contrib, sum(contrib.values()), len(self._changed))
            self._extra_cache[key] = hit
            return hit.total
        if hit.seen < len(self._changed):
            for team, f in self._changed[hit.seen:]:
                if f == flavour and team in hit.rows:
                    value = self._contribution(team, flavour, hit.rows[team])
                    hit.total += value - hit.contrib[team]
                    hit.contrib[team] = value
            hit.seen = len(self._changed)
        return hit.total

    def _contribution(self, team: str, flavour: str, units: int) -> int:
        """How ``team``'s offer minus borrowing moves if it used ``units`` more of ``flavour``."""
        usage = self.usage.get((team, flavour), 0)
        offer0, borrow0 = self.terms(team, flavour, usage)
        offer1, borrow1 = self.terms(team, flavour, usage + units)
        return (offer1 - borrow1) - (offer0 - borrow0)

    def _borrowed_by_others(self, cohort: str, flavour: str, team: str) -> int:
        """Units of ``flavour`` the cohort's other teams borrow (``team`` is one of its members): all a reclaim
        could take back for ``team``."""
        own = self.terms(team, flavour, self.usage.get((team, flavour), 0))[1]
        return self.borrowed.get((cohort, flavour), 0) - own

    def cohort_nominal(self, cohort: str, flavour: str) -> int:
        """The nominal quota of ``flavour`` over the cohort's teams (fixed for the ledger's life)."""
        key = (cohort, flavour)
        value = self._cohort_nominal.get(key)
        if value is None:
            value = self._cohort_nominal[key] = sum(
                self.teams[name].nominal(flavour) for name in self.members.get(cohort, ()))
        return value

    def unreclaimable_floor(self, cohort: str, flavour: str, share: float) -> int:
        """What the cohort's pool must keep free to lend after a non-preemptible job borrows: ``share`` of the
        cohort's nominal quota of ``flavour`` (``PolicyConfig.unreclaimable_borrow_free_share``)."""
        return math.ceil(share * self.cohort_nominal(cohort, flavour))

    def verdict(self, request: JobRequest, flavour: str, extra: Mapping[tuple[str, str], int] | None = None,
                nominal_only: frozenset[tuple[str, str]] = frozenset(),
                nominal_extra: Mapping[tuple[str, str], int] | None = None,
                unreclaimable_free_share: float = 1.0) -> Verdict:
        """Nominal, borrowed, scavenger, or why not (QuotaFull / CohortFull / InvalidFlavour).

        ``extra``: how usage per (team, flavour) moves by the time reserved jobs start while this one would
        still run (their units, less those of jobs that end before; may be negative); ``nominal_extra``: the
        same for nominal usage (default: ``extra``); ``nominal_only``: (team, flavour) where such a reserved
        job can run only within nominal quota (non-preemptible), so this one may not take the team above
        nominal either. ``unreclaimable_free_share``: see :meth:`_above_nominal`."""
        state = self.teams.get(request.team)
        if state is None:
            return Verdict(None, Reason.INVALID_FLAVOUR, f"team {request.team!r} is not configured")
        if request.priority_class is PriorityClass.SCAVENGER:
            return Verdict(AdmittedAs.SCAVENGER)
        quota = state.quotas.get(flavour)
        if quota is None:
            return Verdict(None, Reason.INVALID_FLAVOUR, f"team {request.team!r} has no quota of {flavour}")
        key = (request.team, flavour)
        usage = self.usage.get(key, 0)
        nominal_usage = self.nominal_usage.get(key, 0)
        pool = self.pool.get((state.cohort, flavour), 0)
        if extra:
            # The job must fit both now and when the reserved jobs start: each figure takes the worse of the two.
            usage += max(0, extra.get(key, 0))
            nominal_usage += max(0, (extra if nominal_extra is None else nominal_extra).get(key, 0))
            pool += min(0, self._extra_pool(state.cohort, flavour, extra))
        after = usage + request.units
        offer0, borrow0 = self.terms(request.team, flavour, usage)
        offer1, borrow1 = self.terms(request.team, flavour, after)
        pool_after = pool + (offer1 - borrow1) - (offer0 - borrow0)
        if quota.borrowing_limit is not None and after > quota.nominal + quota.borrowing_limit:
            return Verdict(None, Reason.QUOTA_FULL, quota_full_message(
                request.team, flavour, usage, quota.nominal, quota.borrowing_limit, request.units))
        if nominal_usage + request.units <= quota.nominal:
            # Nominal quota is a promise, not backfill: whether it must reclaim is judged on the cohort as it is
            # now plus its own team's reserved jobs. Another team's reserved job that needs quota when it starts
            # reclaims it then, for itself; counting it here would make this job stop borrowers in its stead,
            # whose quota then goes to whoever comes first (itself again, next cycle).
            own = self.pool.get((state.cohort, flavour), 0) + self._contribution(
                request.team, flavour, usage - self.usage.get(key, 0))
            deficit = min(0, own) - (own + (offer1 - borrow1) - (offer0 - borrow0))
            held = self._held_by_own_borrowing(request, flavour, deficit, usage, nominal_usage, pool - offer0 + borrow0)
            return held or Verdict(AdmittedAs.NOMINAL, reclaim=deficit > 0, deficit=max(0, deficit))
        if not may_borrow(request):
            in_use = self.nominal_usage.get(key, 0)
            return self._above_nominal(request, state.cohort, flavour, in_use, nominal_usage - in_use, pool_after,
                                       1.0 if key in nominal_only else unreclaimable_free_share)
        if key in nominal_only:
            return Verdict(None, Reason.QUOTA_FULL,
                           f"the team's nominal {flavour} quota is reserved for a non-preemptible job that starts "
                           f"before this one would end")
        borrowed = after - quota.nominal
        if pool_after < 0:
            return Verdict(None, Reason.COHORT_FULL, cohort_full_message(
                state.cohort, flavour, borrowed, max(0, pool - offer0 + borrow0),
                -self.pool.get((state.cohort, flavour), 0)))
        return Verdict(AdmittedAs.BORROWED)

    def _held_by_own_borrowing(self, request: JobRequest, flavour: str, deficit: int, usage: int, nominal_usage: int,
                               room: int) -> Verdict | None:
        """A job within its team's nominal quota that would leave its cohort's pool ``deficit`` short: ``None``
        when reclaiming other teams' borrowers can make that up; else it is short because of the team's own
        borrowed work (its preemptible work relabelled for an earlier job, or work the cohort's allowance let
        borrow), no reclaim can mend it, and the job waits for the cohort as a borrower does, planned by the
        quota clock (Kueue, which counts usage and not labels, would call it out of quota too). ``room``: what
        the cohort can lend now."""
        state = self.teams[request.team]
        if deficit <= 0 or self._borrowed_by_others(state.cohort, flavour, request.team) >= deficit:
            return None
        borrowed = usage + request.units - state.nominal(flavour)
        return Verdict(None, Reason.COHORT_FULL,
                       f"{request.team} uses {usage} {flavour}, {usage - nominal_usage} of them admitted as borrowed; "
                       f"with this job it would borrow {borrowed} in all and cohort {state.cohort!r} can lend "
                       f"{max(0, room)} now")

    def _above_nominal(self, request: JobRequest, cohort: str, flavour: str, in_use: int, promised: int,
                       pool_after: int, share: float) -> Verdict:
        """A job that cannot give borrowed units back (see :func:`may_borrow`) does not fit nominal: ``QuotaFull``,
        saying (``Verdict.unreclaimable``) whether it may borrow anyway, because the cohort would keep at least
        ``share`` of its nominal quota of the flavour free to lend after it (1: never). ``in_use``: the team's
        nominal units in use now; ``promised``: those its reserved jobs need while this one would run."""
        cohort_nominal = self.cohort_nominal(cohort, flavour)
        floor = self.unreclaimable_floor(cohort, flavour, share)
        unreclaimable = share < 1.0 and pool_after >= floor
        nominal = self.teams[request.team].nominal(flavour)
        held = f"{in_use} of {nominal} {flavour} in use"
        if promised > 0:
            held += f" and {promised} promised to the team's reserved jobs that start before this one would end"
        message = f"non-preemptible work runs only within nominal quota: {held}, needs {request.units}"
        if share < 1.0:
            message += (f"; or borrows while cohort {cohort!r} keeps {floor} of its {cohort_nominal} {flavour} "
                        f"free to lend")
        return Verdict(None, Reason.QUOTA_FULL, message, unreclaimable=unreclaimable)


def unreclaimable_share(request: JobRequest, config: PolicyConfig, awaited: bool) -> float:
    """The share of its cohort's nominal quota that must stay free to lend after a non-preemptible ``request``
    borrows (1: it may not). A loan no reclaim ends costs the lenders its units for as long as the job may run: a
    job of a one-hour limit locks a twelfth of what one of twelve hours does, so it needs a twelfth of the kept
    share (``PolicyConfig.unreclaimable_borrow_free_share`` at ``unreclaimable_borrow_full_after_s`` and
    beyond). Lenders that come back meanwhile start on free units (``QuotaLedger.verdict``), which the short loans
    leave more of than the half-idle rule assumed. ``awaited``: a preemptible job that quota held back waits in
    the cohort for the flavour (``WorkingCopy.quota_awaited``); it borrows next, and any loan that cannot be
    recalled stands in its way for the whole of its limit, so the job needs the whole share: a reclaimed 1,024-GPU
    gang, or a 64-GPU borrower of a small pool, waited hours for the pool such loans held (docs/BENCHMARKS.md,
    session 36)."""
    share = config.unreclaimable_borrow_free_share
    if share >= 1.0 or awaited:
        return min(share, 1.0)
    return share * min(1.0, request.time_limit_s / config.unreclaimable_borrow_full_after_s)


def cohort_full_message(cohort: str, flavour: str, borrowed: int, room: int, owed: int) -> str:
    """Why a borrower waits for its cohort; ``owed``: how far the cohort's pool is below zero (its lenders took
    their nominal back onto free units, and its borrowers give it back as their jobs end)."""
    message = f"would borrow {borrowed} {flavour} in all; cohort {cohort!r} can lend {room} now"
    if owed > 0:
        message += f" (its borrowers hold {owed} more than its lenders spare: it lends again as their jobs end)"
    return message


def quota_full_message(team: str, flavour: str, usage: int, nominal: int, borrowing_limit: int,
                       units: int) -> str:
    """Why a job does not fit its team's nominal quota plus borrowing limit, in words a user reads at once:
    ``fraud-ml uses all 8 of its h100 and 16 borrowed; this job needs 24 more``."""
    borrowed = max(0, usage - nominal)
    if usage >= nominal + borrowing_limit:
        held = (f"all {nominal} of its {flavour} and {borrowed} borrowed" if borrowing_limit
                else f"all {nominal} of its {flavour} and may not borrow")
        return f"{team} uses {held}; this job needs {units} more"
    left = nominal + borrowing_limit - usage
    held = (f"all {nominal} of its {flavour} and {borrowed} borrowed" if usage >= nominal
            else f"{usage} of its {nominal} {flavour}")
    return (f"{team} uses {held}; this job needs {units}, and its borrowing limit of {borrowing_limit} leaves "
            f"room for {left}")


#: A running job's quota holding as ``QuotaClock`` replays it: (end, team, units, of which nominal).
EndRow = tuple[float, str, int, int]


def _end_row(job: RunningJob, end: float) -> EndRow:
    units = job.request.units
    return (end, job.request.team, units, units if job.admitted_as is AdmittedAs.NOMINAL else 0)


class QuotaEnds:
    """The running jobs' quota holdings per (cohort, flavour), sorted as ``QuotaClock`` replays them, each at
    its job's time-limit end: kept by a carried index (``policy.carried``) as jobs come and go, so that a
    pass's clock does not list and sort every running job again. :meth:`at` gives a pass's lists.

    Scavenger work holds no quota and is left out, as the clock leaves it out. Equal rows are interchangeable,
    so a job's row is found again by its value."""

    __slots__ = ("_cohorts", "rows")

    def __init__(self, teams: Mapping[str, TeamState], running: Iterable[RunningJob] = ()) -> None:
        self._cohorts = {name: state.cohort for name, state in teams.items()}
        self.rows: dict[tuple[str, str], list[EndRow]] = {}
        for job in running:
            if job.admitted_as is not AdmittedAs.SCAVENGER:
                self.rows.setdefault(self._key_of(job), []).append(_end_row(job, job.limit_end))
        for rows in self.rows.values():
            rows.sort()

    def key(self, team: str, flavour: str) -> tuple[str, str]:
        """``QuotaClock``'s key: the team's cohort (a team not configured is a cohort of its own) and flavour."""
        cohort = self._cohorts.get(team)
        return (cohort if cohort is not None else "team:" + team, flavour)

    def _key_of(self, job: RunningJob) -> tuple[str, str]:
        return self.key(job.request.team, job.placement.flavour)

    def count(self, job: RunningJob, sign: int) -> None:
        """Add (+1) or take out (-1) a running job's row."""
        if job.admitted_as is AdmittedAs.SCAVENGER:
            return
        rows = self.rows.setdefault(self._key_of(job), [])
        row = _end_row(job, job.limit_end)
        if sign > 0:
            insort(rows, row)
        else:
            del rows[bisect_left(rows, row)]

    def at(self, now: float, leaving: Mapping[str, float],
           jobs: Mapping[str, RunningJob]) -> dict[tuple[str, str], list[EndRow]]:
        """The lists ``QuotaClock`` sorts from the running jobs at ``now``: a job ``leaving`` (id → when its
        units come back; ``jobs``: id → the job) at that time, any other at its time-limit end or ``now`` if
        that has passed. Fresh lists: the caller may keep them while this index moves on."""
        moved: dict[tuple[str, str], list[tuple[EndRow, EndRow]]] = {}
        for job_id, until in leaving.items():
            job = jobs[job_id]
            if job.admitted_as is not AdmittedAs.SCAVENGER:
                moved.setdefault(self._key_of(job), []).append((_end_row(job, job.limit_end), _end_row(job, until)))
        out: dict[tuple[str, str], list[EndRow]] = {}
        for key, rows in self.rows.items():
            if not rows:
                continue
            rows = rows[:]
            changes = moved.get(key, ())
            for old, _ in changes:
                del rows[bisect_left(rows, old)]
            late = bisect_left(rows, (now,))           # the rows whose end has passed: they end now
            if late:
                rows[:late] = [(now, team, units, nominal) for _, team, units, nominal in rows[:late]]
            if late or changes:
                rows.extend(new for _, new in changes)
                rows.sort()
            out[key] = rows
        return out


class QuotaClock:
    """When quota will let a job in, replaying the ends of the jobs that hold it (for estimated starts).

    The *base* is the cycle's starting point: usage per team (``base_usage``), its nominal part
    (``base_nominal``) and the (end, team, flavour, units, nominal) of the running jobs that make them up. A
    team's usage only falls as its jobs end, so replaying those ends in time order is exact, and the replay is
    built once per cycle, as far as questions reach. A job fits as nominal when the team's *nominal* usage
    leaves room for it, as ``QuotaLedger.verdict`` counts it: a team's borrowed jobs stay borrowed after its
    nominal jobs end, and do not hold its nominal quota.

    What the cycle itself adds — admissions, and reservations (held from now, without holes, like their
    nodes) — are *changes* on top: the asking team's own are counted exactly, every other team's as taking
    its units straight out of the cohort's pool (an upper bound on what they can take: a team's offer minus
    its borrowing never drops by more than its usage grows). Estimates can only come out late, never early,
    which is the safe side for a reservation.

    A non-preemptible job may also borrow while the cohort keeps a share of its nominal quota free to lend after
    it, as ``QuotaLedger.verdict`` lets it: :meth:`free_at` counts that allowance when the caller passes the share
    (estimates always; reservations only for a job larger than its team's nominal, see ``Reserver.after_quota``).
    """

    def __init__(self, ledger: QuotaLedger, base_usage: Mapping[tuple[str, str], int],
                 holdings: Iterable[tuple[float, str, str, int, bool]],
                 base_nominal: Mapping[tuple[str, str], int] | None = None) -> None:
        """``holdings``: (end, team, flavour, units, counted as nominal) of the running jobs in quota;
        ``base_nominal``: the nominal part of ``base_usage`` (default: all of it)."""
        self.ledger = ledger
        self.base_usage = dict(base_usage)
        self.base_nominal = self.base_usage if base_nominal is None else dict(base_nominal)
        self.ends: dict[tuple[str, str], list[tuple[float, str, int, int]]] = {}
        lists: dict[tuple[str, str], list[tuple[float, str, int, int]]] = {}   # (team, flavour) → its cohort's
        for end, team, flavour, units, nominal in holdings:
            rows = lists.get((team, flavour))
            if rows is None:
                rows = lists[(team, flavour)] = self.ends.setdefault(self._key(team, flavour), [])
            rows.append((end, team, units, units if nominal else 0))
        for rows in self.ends.values():
            rows.sort()
        self._replays: dict[tuple[str, str], _Replay] = {}
        self._changes: dict[tuple[str, str], _Changes] = {}
        self._cache: dict[tuple[str, str, int, Reason, int | None], tuple[int, float | None]] = {}

    @classmethod
    def from_ends(cls, ledger: QuotaLedger, base_usage: Mapping[tuple[str, str], int],
                  ends: dict[tuple[str, str], list[EndRow]],
                  base_nominal: Mapping[tuple[str, str], int] | None = None) -> QuotaClock:
        """The clock ``QuotaClock(ledger, base_usage, holdings, base_nominal)`` builds, from its holdings'
        sorted lists as :meth:`QuotaEnds.at` gives them (the clock keeps them)."""
        clock = cls(ledger, base_usage, (), base_nominal)
        clock.ends = ends
        return clock

    def _key(self, team: str, flavour: str) -> tuple[str, str]:
        state = self.ledger.teams.get(team)
        return (state.cohort if state else "team:" + team, flavour)

    def add(self, end: float, team: str, flavour: str, units: int) -> None:
        """Something the cycle started holds quota from now until ``end`` (an admission, a reservation)."""
        key = self._key(team, flavour)
        changes = self._changes.get(key)
        if changes is None:
            changes = self._changes[key] = _Changes()
        changes.add(end, team, units)

    reserve = add

    def free_at(self, request: JobRequest, flavour: str, reason: Reason, nominal_only: bool = False,
                unreclaimable_share: float = 1.0) -> float | None:
        """The earliest instant quota could admit ``request`` (``None``: never, as configured);
        ``nominal_only``: it may not borrow (a reserved non-preemptible job of its team needs the nominal);
        ``unreclaimable_share``: a non-preemptible job may borrow while the cohort keeps this share of its nominal
        free to lend after it (``PolicyConfig.unreclaimable_borrow_free_share``; 1: it may not)."""
        floor = self._borrow_floor(request, flavour, nominal_only, unreclaimable_share)
        key = (request.team, flavour, request.units, reason, floor)
        changes = self._changes.get(self._key(request.team, flavour))
        version = changes.version if changes else 0
        hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = self._free_at(request, flavour, reason, floor, changes)
        self._cache[key] = (version, value)
        return value

    def _borrow_floor(self, request: JobRequest, flavour: str, nominal_only: bool, share: float) -> int | None:
        """What the cohort's pool must keep after the job for it to borrow: 0 for work that gives borrowed
        units back, the unreclaimable share of the cohort's nominal for other work; ``None``: it may not borrow."""
        if nominal_only:
            return None
        if may_borrow(request):
            return 0
        state = self.ledger.teams.get(request.team)
        if share >= 1.0 or state is None:
            return None
        return self.ledger.unreclaimable_floor(state.cohort, flavour, share)

    def _free_at(self, request: JobRequest, flavour: str, reason: Reason, floor: int | None,
                 changes: _Changes | None) -> float | None:
        state = self.ledger.teams.get(request.team)
        quota = state.quotas.get(flavour) if state else None
        if state is None or quota is None:
            return None
        if reason is Reason.QUOTA_FULL:
            limit = quota.nominal if floor is None else (
                None if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit)
            if limit is not None and request.units > limit:
                return None
        key = (state.cohort, flavour)
        replay = self._replays.get(key)
        if replay is None:
            members = self.ledger.members.get(state.cohort, [])
            usage = {team: self.base_usage.get((team, flavour), 0) for team in members}
            nominal = {team: self.base_nominal.get((team, flavour), 0) for team in members}
            replay = self._replays[key] = _Replay(self.ledger, flavour, members, usage, nominal,
                                                  self.ends.get(key, []))
        return replay.earliest(request, quota, floor, changes)


class _Changes:
    """Units the cycle added to one cohort's quota, each until its end: active totals at any instant."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, str, int]] = []
        self.version = 0
        self._built = -1
        self._ends: list[float] = []
        self._after: list[int] = []
        self._team: dict[str, tuple[list[float], list[int]]] = {}

    def add(self, end: float, team: str, units: int) -> None:
        insort(self.rows, (end, team, units))
        self.version += 1

    def _build(self) -> None:
        if self._built == self.version:
            return
        self._ends = [end for end, _, _ in self.rows]
        self._after = self._suffix([units for _, _, units in self.rows])
        rows_by_team: dict[str, list[tuple[float, int]]] = {}
        for end, team, units in self.rows:
            rows_by_team.setdefault(team, []).append((end, units))
        self._team = {team: ([end for end, _ in rows], self._suffix([units for _, units in rows]))
                      for team, rows in rows_by_team.items()}
        self._built = self.version

    @staticmethod
    def _suffix(values: list[int]) -> list[int]:
        out = [0] * (len(values) + 1)
        for index in range(len(values) - 1, -1, -1):
            out[index] = out[index + 1] + values[index]
        return out

    def ends_between(self, lower: float, upper: float) -> list[float]:
        """Ends of changes strictly after ``lower`` and before ``upper``, in order."""
        self._build()
        return self._ends[bisect_right(self._ends, lower):bisect_left(self._ends, upper)]

    def active(self, at: float, team: str) -> tuple[int, int]:
        """(units of all changes still held at ``at``, of which ``team``'s)."""
        self._build()
        total = self._after[bisect_right(self._ends, at)]
        ends, after = self._team.get(team, ([], [0]))
        return total, after[bisect_right(ends, at)]


class _Replay:
    """One cohort's quota of one flavour as its holdings end, one end after another.

    Usage only falls along the way, so "does this job fit quota after the k-th end" is monotone in k: a
    galloping search finds the first such k, and the replay is extended only as far as questions reach."""

    def __init__(self, ledger: QuotaLedger, flavour: str, members: list[str], usage: dict[str, int],
                 nominal: dict[str, int], ends: list[tuple[float, str, int, int]]) -> None:
        self.ends = ends
        self.times = [end for end, _, _, _ in ends]
        self.terms: dict[str, tuple[int, int] | None] = {}
        for team in members:
            state = ledger.teams.get(team)
            quota = state.quotas.get(flavour) if state else None
            self.terms[team] = None if quota is None else (
                quota.nominal, quota.nominal if quota.lending_limit is None else quota.lending_limit)
        self.current = dict(usage)
        self.pool = [sum(self._net(team, usage[team]) for team in members)]
        #: Beside each pool, the units the cohort's teams borrow in all (what reclaims could take back).
        self.borrowed = [sum(self._borrow(team, usage[team]) for team in members)]
        #: Per team, the ends (by index) at which its usage moved, and its usage and nominal usage after each.
        self.steps: dict[str, tuple[list[int], list[int], list[int]]] = {
            team: ([0], [used], [nominal.get(team, 0)]) for team, used in usage.items()}

    def _net(self, team: str, usage: int) -> int:
        """What ``team`` adds to the pool at ``usage``: its offer minus its borrowing."""
        terms = self.terms.get(team)
        if terms is None:
            return -usage
        nominal, lendable = terms
        spare = nominal - usage
        return min(lendable, spare) if spare > 0 else spare

    def _borrow(self, team: str, usage: int) -> int:
        """What ``team`` borrows at ``usage``."""
        terms = self.terms.get(team)
        above = usage - terms[0] if terms is not None else usage
        return above if above > 0 else 0

    def _extend(self, k: int) -> None:
        pool, borrowed = self.pool[-1], self.borrowed[-1]
        current, steps, terms, ends = self.current, self.steps, self.terms, self.ends
        append, append_borrowed = self.pool.append, self.borrowed.append
        for index in range(len(self.pool), min(k, len(ends)) + 1):
            _, team, units, nominal_units = ends[index - 1]
            if team in terms:
                before = current[team]
                after = before - units
                current[team] = after
                quota = terms[team]
                if quota is None:
                    pool += units
                    borrowed -= units
                else:
                    nominal, lendable = quota
                    spare0, spare1 = nominal - before, nominal - after
                    pool += ((min(lendable, spare1) if spare1 > 0 else spare1)
                             - (min(lendable, spare0) if spare0 > 0 else spare0))
                    borrowed += (-spare1 if spare1 < 0 else 0) - (-spare0 if spare0 < 0 else 0)
                ks, values, nominals = steps[team]
                ks.append(index)
                values.append(after)
                nominals.append(nominals[-1] - nominal_units)
            append(pool)
            append_borrowed(borrowed)

    def _usage(self, team: str, k: int) -> tuple[int, int]:
        """The team's usage and nominal usage after the first ``k`` ends."""
        ks, values, nominals = self.steps.get(team, ([0], [0], [0]))
        at = bisect_right(ks, k) - 1
        return values[at], nominals[at]

    def earliest(self, request: JobRequest, quota: Quota, floor: int | None,
                 changes: _Changes | None) -> float | None:
        """The first instant (a base end, or the end of one of the cycle's changes) at which the job fits:
        as nominal, or borrowing while the cohort's pool keeps ``floor`` after it (``None``: it may not borrow)."""
        team = request.team
        times = self.times

        def fits(at: float) -> bool:
            k = bisect_right(times, at)
            self._extend(k)
            base, nominal_base = self._usage(team, k)
            others = own = 0
            if changes is not None:
                total, own = changes.active(at, team)
                others = total - own
            after = base + own + request.units
            if quota.borrowing_limit is not None and after - quota.nominal > quota.borrowing_limit:
                return False            # the team's whole usage, its borrowed work included, as the verdict counts
            pool_after = self.pool[k] - self._net(team, base) - others + self._net(team, after)
            if nominal_base + own + request.units <= quota.nominal:
                # In as nominal, as ``QuotaLedger.verdict`` counts it (the cycle's own: all), once reclaiming
                # the other teams' borrowing could cover what the team itself borrows.
                return pool_after + self.borrowed[k] - self._borrow(team, base) >= 0
            return floor is not None and pool_after >= floor

        if fits(-math.inf):
            return -math.inf
        n = len(times)
        found: int | None = None          # the first base end at which it fits (1-based)
        if n:
            low, high = 0, 1              # not fits before ``low`` ends; gallop until fits(high)
            while high < n and not fits(times[high - 1]):
                low, high = high, min(2 * high, n)
            if high < n or fits(times[n - 1]):
                while high - low > 1:
                    mid = (low + high) // 2
                    if fits(times[mid - 1]):
                        high = mid
                    else:
                        low = mid
                found = high
        lower = times[found - 2] if found is not None and found >= 2 else -math.inf
        upper = times[found - 1] if found is not None else math.inf
        if changes is not None:
            for end in changes.ends_between(lower, upper):
                if fits(end):
                    return end
        return None if found is None else upper
