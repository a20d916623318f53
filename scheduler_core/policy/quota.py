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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..model.job import PriorityClass
from .decisions import Reason
from .snapshot import AdmittedAs, JobRequest, RunningJob, TeamState


@dataclass(frozen=True, slots=True)
class Verdict:
    """What quota says about one job on one flavour. ``admitted_as`` is None when it does not fit quota;
    ``reclaim`` is set when it fits nominal only after borrowers give back units (the pool it must restore
    to, see :meth:`QuotaLedger.reclaim_met`)."""

    admitted_as: AdmittedAs | None
    reason: Reason | None = None
    message: str = ""
    reclaim: bool = False


class QuotaLedger:
    """Usage per (team, flavour) and pool per (cohort, flavour), kept exact as the cycle changes things."""

    def __init__(self, teams: Mapping[str, TeamState], running: Iterable[RunningJob]) -> None:
        self.teams = teams
        self.usage: dict[tuple[str, str], int] = {}
        self.pool: dict[tuple[str, str], int] = {}
        self.members: dict[str, list[str]] = {}
        #: Bumped whenever a team's usage or a cohort's pool changes: "has quota moved since?" in O(1).
        self.version: dict[str, int] = {}
        for name in sorted(teams):
            self.members.setdefault(teams[name].cohort, []).append(name)
        for job in running:
            if job.admitted_as is not AdmittedAs.SCAVENGER:
                key = (job.request.team, job.placement.flavour)
                self.usage[key] = self.usage.get(key, 0) + job.request.units
        flavours = {f for team in teams.values() for f in team.quotas} | {f for _, f in self.usage}
        for cohort, names in self.members.items():
            for flavour in flavours:
                total = 0
                for name in names:
                    offer, borrowed = self.terms(name, flavour, self.usage.get((name, flavour), 0))
                    total += offer - borrowed
                self.pool[(cohort, flavour)] = total

    def terms(self, team: str, flavour: str, usage: int) -> tuple[int, int]:
        """(what ``team`` offers to lend, what it borrows) at ``usage``."""
        state = self.teams.get(team)
        quota = state.quotas.get(flavour) if state else None
        if quota is None:
            return 0, usage
        lendable = quota.nominal if quota.lending_limit is None else quota.lending_limit
        return max(0, min(lendable, quota.nominal - usage)), max(0, usage - quota.nominal)

    def _change(self, team: str, flavour: str, delta: int) -> None:
        key = (team, flavour)
        before = self.usage.get(key, 0)
        after = before + delta
        self.usage[key] = after
        self.version[team] = self.version.get(team, 0) + 1
        state = self.teams.get(team)
        if state is None:
            return
        self.version["cohort:" + state.cohort] = self.version.get("cohort:" + state.cohort, 0) + 1
        offer0, borrow0 = self.terms(team, flavour, before)
        offer1, borrow1 = self.terms(team, flavour, after)
        pkey = (state.cohort, flavour)
        self.pool[pkey] = self.pool.get(pkey, 0) + (offer1 - borrow1) - (offer0 - borrow0)

    def add(self, request: JobRequest, flavour: str, admitted_as: AdmittedAs) -> None:
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._change(request.team, flavour, request.units)

    def remove(self, request: JobRequest, flavour: str, admitted_as: AdmittedAs) -> None:
        if admitted_as is not AdmittedAs.SCAVENGER:
            self._change(request.team, flavour, -request.units)

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
        return self.usage.get((request.team, flavour), 0) + request.units <= state.nominal(flavour)

    def reclaim_target(self, request: JobRequest, flavour: str) -> int:
        """The pool a nominal admission must leave: as whole as it was (never below zero on its account)."""
        state = self.teams[request.team]
        return min(0, self.pool.get((state.cohort, flavour), 0))

    def reclaim_met(self, request: JobRequest, flavour: str, target: int) -> bool:
        return self.pool_after(request.team, flavour, request.units) >= target

    def verdict(self, request: JobRequest, flavour: str) -> Verdict:
        """Nominal, borrowed, scavenger, or why not (QuotaFull / CohortFull / InvalidFlavour)."""
        state = self.teams.get(request.team)
        if state is None:
            return Verdict(None, Reason.INVALID_FLAVOUR, f"team {request.team!r} is not configured")
        if request.priority_class is PriorityClass.SCAVENGER:
            return Verdict(AdmittedAs.SCAVENGER)
        quota = state.quotas.get(flavour)
        if quota is None:
            return Verdict(None, Reason.INVALID_FLAVOUR, f"team {request.team!r} has no quota of {flavour}")
        usage = self.usage.get((request.team, flavour), 0)
        after = usage + request.units
        if after <= quota.nominal:
            pool = self.pool.get((state.cohort, flavour), 0)
            return Verdict(AdmittedAs.NOMINAL, reclaim=self.pool_after(request.team, flavour, request.units)
                           < min(0, pool))
        if not request.preemptible:
            return Verdict(None, Reason.QUOTA_FULL,
                           f"non-preemptible work runs only within nominal quota: {usage} of {quota.nominal} "
                           f"{flavour} in use, needs {request.units}")
        borrowed = after - quota.nominal
        if quota.borrowing_limit is not None and borrowed > quota.borrowing_limit:
            return Verdict(None, Reason.QUOTA_FULL,
                           f"team at {usage} of {quota.nominal} {flavour} nominal + {quota.borrowing_limit} "
                           f"borrowing limit; needs {request.units} more")
        if self.pool_after(request.team, flavour, request.units) < 0:
            offer, borrowing = self.terms(request.team, flavour, usage)
            room = max(0, self.pool.get((state.cohort, flavour), 0) - offer + borrowing)
            return Verdict(None, Reason.COHORT_FULL,
                           f"would borrow {borrowed} {flavour} in all; cohort {state.cohort!r} can lend {room} "
                           f"now")
        return Verdict(AdmittedAs.BORROWED)


class QuotaClock:
    """When quota will let a job in, replaying the ends of the jobs that hold it (for estimated starts).

    ``holdings`` are (end, team, flavour, units) of everything that counts against quota at the end of the
    cycle: running jobs (at their time limit, or their termination deadline) and the cycle's own admissions.
    A team's usage only falls as its jobs end, so the replay is exact for the quota as configured."""

    def __init__(self, ledger: QuotaLedger, holdings: Iterable[tuple[float, str, str, int]]) -> None:
        self.ledger = ledger
        self.ends: dict[tuple[str, str], list[tuple[float, str, int]]] = {}
        for end, team, flavour, units in holdings:
            state = ledger.teams.get(team)
            cohort = state.cohort if state else "team:" + team
            self.ends.setdefault((cohort, flavour), []).append((end, team, units))
        for rows in self.ends.values():
            rows.sort()
        self._cache: dict[tuple[str, str, int, Reason, bool], float | None] = {}

    def free_at(self, request: JobRequest, flavour: str, reason: Reason) -> float | None:
        """The earliest instant quota could admit ``request`` (``None``: never, as configured)."""
        key = (request.team, flavour, request.units, reason, request.preemptible)
        if key not in self._cache:
            self._cache[key] = self._free_at(request, flavour, reason)
        return self._cache[key]

    def _free_at(self, request: JobRequest, flavour: str, reason: Reason) -> float | None:
        ledger = self.ledger
        state = ledger.teams.get(request.team)
        quota = state.quotas.get(flavour) if state else None
        if state is None or quota is None:
            return None
        if reason is Reason.QUOTA_FULL:
            limit = quota.nominal if not request.preemptible else (
                None if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit)
            if limit is None or request.units > limit:
                return None
        usage = {team: ledger.usage.get((team, flavour), 0) for team in ledger.members.get(state.cohort, [])}
        usage.setdefault(request.team, ledger.usage.get((request.team, flavour), 0))
        pool = ledger.pool.get((state.cohort, flavour), 0)

        def fits() -> bool:
            after = usage[request.team] + request.units
            if after <= quota.nominal:
                return True
            if not request.preemptible:
                return False
            if quota.borrowing_limit is not None and after - quota.nominal > quota.borrowing_limit:
                return False
            offer0, borrow0 = ledger.terms(request.team, flavour, usage[request.team])
            offer1, borrow1 = ledger.terms(request.team, flavour, after)
            return pool + (offer1 - borrow1) - (offer0 - borrow0) >= 0

        if fits():
            return -math.inf
        for end, team, units in self.ends.get((state.cohort, flavour), []):
            before = usage.get(team, 0)
            offer0, borrow0 = ledger.terms(team, flavour, before)
            offer1, borrow1 = ledger.terms(team, flavour, before - units)
            pool += (offer1 - borrow1) - (offer0 - borrow0)
            usage[team] = before - units
            if fits():
                return end
        return None
