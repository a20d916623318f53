"""The bill and the share: GPU-seconds from the usage ledger (and from jobs holding GPUs right now), split by UTC
day, team, flavour and how they were held; and each team's quota as it stands (used, borrowed, lent).

Pure functions over store records and an instant, so they are tested with hand-made records and a fixed ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone

from ..model.flavours import FLAVOURS
from ..model.team import TeamConfig
from ..policy.fairshare import LN2, dominant_share, request_rates
from ..policy.snapshot import RESOURCES, AdmittedAs, JobRequest
from ..schemas import FlavourQuotaView, QuotaView, UsageReport, UsageRow, UsageTotal, utc
from ..store.records import JobRecord, JobState, UsageRecord

_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Interval:
    """``units`` of ``flavour`` held by ``team`` over ``[start, end)``, as ``admitted_as``."""

    team: str
    flavour: str
    admitted_as: AdmittedAs
    start: float
    end: float
    units: int


def held_units(record: JobRecord) -> int:
    if record.placement is None:
        return 0
    return sum(len(pod.units) for pod in record.placement.pods)


def open_interval(record: JobRecord, now: float) -> Interval | None:
    """The stretch a job holding units has held them so far; the store writes its ``UsageRecord`` only on
    release, so without this a week-long job would cost nothing until it ended."""
    if not record.state.holds_units or record.placement is None or record.admitted_as is None:
        return None
    if record.admitted_at is None:
        return None
    return Interval(record.team, record.placement.flavour, record.admitted_as, record.admitted_at,
                    max(now, record.admitted_at), held_units(record))


def ledger_interval(usage: UsageRecord) -> Interval:
    return Interval(usage.team, usage.flavour, usage.admitted_as, usage.start, usage.end, usage.units)


def job_gpu_seconds(job_id: str, ledger: Iterable[UsageRecord], record: JobRecord, now: float) -> float:
    total = sum(u.gpu_seconds for u in ledger if u.job_id == job_id)
    current = open_interval(record, now)
    if current is not None:
        total += current.units * (current.end - current.start)
    return total


def _day_start(seconds: float) -> float:
    return (seconds // _DAY) * _DAY


def usage_report(intervals: Iterable[Interval], *, since: float | None, until: float) -> UsageReport:
    """Sum ``intervals`` clipped to ``[since, until)`` into one row per (UTC day, team, flavour, admitted_as), and
    one total per team. Normalised GPU-seconds weigh each flavour by its speed relative to an H100, so a team sent
    to A100s is not billed as if it had H100s."""
    rows: dict[tuple[date, str, str, str], float] = {}
    for item in intervals:
        start = item.start if since is None else max(item.start, since)
        end = min(item.end, until)
        while start < end:
            day_end = min(end, _day_start(start) + _DAY)
            day = datetime.fromtimestamp(_day_start(start), tz=timezone.utc).date()
            key = (day, item.team, item.flavour, item.admitted_as.value)
            rows[key] = rows.get(key, 0.0) + item.units * (day_end - start)
            start = day_end
    out_rows: list[UsageRow] = []
    totals: dict[str, dict[str, float]] = {}
    for (day, team, flavour, held_as), seconds in sorted(rows.items()):
        speed = FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0
        out_rows.append(UsageRow(day=day, team=team, flavour=flavour, admitted_as=held_as,
                                 gpu_seconds=round(seconds, 3), normalised_gpu_seconds=round(seconds * speed, 3)))
        total = totals.setdefault(team, {"nominal": 0.0, "borrowed": 0.0, "scavenger": 0.0, "normalised": 0.0})
        total[held_as] += seconds
        total["normalised"] += seconds * speed
    out_totals = [
        UsageTotal(team=team, nominal_gpu_seconds=round(t["nominal"], 3), borrowed_gpu_seconds=round(t["borrowed"], 3),
                   scavenger_gpu_seconds=round(t["scavenger"], 3),
                   gpu_seconds=round(t["nominal"] + t["borrowed"] + t["scavenger"], 3),
                   normalised_gpu_seconds=round(t["normalised"], 3))
        for team, t in sorted(totals.items())
    ]
    until_dt = utc(until)
    assert until_dt is not None
    return UsageReport(since=utc(since), until=until_dt, rows=out_rows, totals=out_totals)


def usage_series(intervals: Iterable[Interval], *, since: float, until: float, step: float) -> dict[str, list[float]]:
    """GPU-seconds per flavour in each ``step``-long bucket of ``[since, until)`` (the last may be shorter): the
    usage-over-time plots. Each interval is clipped to the window and split across the buckets it spans."""
    count = max(1, int(-(-(until - since) // step)))
    series: dict[str, list[float]] = {}
    for item in intervals:
        start, end = max(item.start, since), min(item.end, until)
        if end <= start:
            continue
        row = series.setdefault(item.flavour, [0.0] * count)
        for index in range(min(count - 1, int((start - since) // step)), count):
            low = since + index * step
            high = until if index == count - 1 else low + step
            overlap = min(end, high) - max(start, low)
            if overlap > 0:
                row[index] += item.units * overlap
            if high >= end:
                break
    return series


def quota_view(team: TeamConfig, teams: Sequence[TeamConfig], holding: Iterable[JobRecord],
               pending: Iterable[JobRecord], *, request_of: Callable[[JobRecord], JobRequest],
               capacity: tuple[float, float, float], decayed: Mapping[str, float],
               half_life_s: float) -> QuotaView:
    """``team``'s quota as it stands, and its fair-share value exactly as the policy computes it.

    ``holding`` are the jobs of every team in the cohort that hold units; ``pending`` the team's pending jobs.
    ``lent`` apportions what the cohort's borrowers hold among the teams whose unused nominal they use, in
    proportion to each one's lendable idle quota (Kueue does not attribute borrowing to a lender either; this split
    is the one that sums to what is borrowed, or to the lenders' idle quota when that is less: a cohort whose
    lenders took their quota back onto free units while its borrowers still run, see docs/scheduling.md).
    ``decayed`` is the team's decayed past use (the controller's ledger over the same usage records); ``capacity``
    the cluster's speed-weighted GPUs, CPUs and memory.
    """
    cohort = [t for t in teams if t.cohort == team.cohort]
    used: dict[tuple[str, str], int] = {}        # (team, flavour) → units held
    nominal_used: dict[tuple[str, str], int] = {}
    borrowed: dict[tuple[str, str], int] = {}
    alloc = [0.0, 0.0, 0.0]
    names = {t.name for t in cohort}
    for job in holding:
        if job.team not in names or job.placement is None:
            continue
        key = (job.team, job.placement.flavour)
        units = held_units(job)
        used[key] = used.get(key, 0) + units
        if job.admitted_as is AdmittedAs.BORROWED:
            borrowed[key] = borrowed.get(key, 0) + units
        elif job.admitted_as is AdmittedAs.NOMINAL:
            nominal_used[key] = nominal_used.get(key, 0) + units
        if job.team == team.name:
            for index, value in enumerate(request_rates(request_of(job), job.placement.flavour)):
                alloc[index] += value
    asked: dict[str, int] = {}
    for job in pending:
        if job.team == team.name and job.state is JobState.PENDING:
            first = job.spec.flavour[0]
            asked[first] = asked.get(first, 0) + job.spec.total_units
    flavours = sorted(set(team.quotas) | {f for (t, f) in used if t == team.name} | set(asked))
    rows = []
    for flavour in flavours:
        quota = team.quotas.get(flavour)
        rows.append(FlavourQuotaView(
            flavour=flavour, nominal=quota.nominal if quota else 0,
            borrowing_limit=quota.borrowing_limit if quota else 0,
            lending_limit=quota.lending_limit if quota else None,
            used=used.get((team.name, flavour), 0), borrowed=borrowed.get((team.name, flavour), 0),
            lent=_lent(team.name, flavour, cohort, nominal_used, borrowed), pending=asked.get(flavour, 0),
        ))
    share = dominant_share((alloc[0], alloc[1], alloc[2]), decayed, capacity, team.weight, half_life_s)
    history = LN2 / half_life_s if half_life_s > 0 else 0.0
    per_resource = {r: (alloc[i] + decayed.get(r, 0.0) * history) / capacity[i] if capacity[i] > 0 else 0.0
                    for i, r in enumerate(RESOURCES)}
    dominant = max(RESOURCES, key=lambda r: (per_resource[r], r == "gpu"))
    return QuotaView(team=team.name, cohort=team.cohort, weight=team.weight, fair_share=round(share, 6),
                     dominant_resource=dominant, flavours=rows)


def _lent(name: str, flavour: str, cohort: Sequence[TeamConfig], nominal_used: Mapping[tuple[str, str], int],
          borrowed: Mapping[tuple[str, str], int]) -> int:
    total_borrowed = sum(units for (t, f), units in borrowed.items() if f == flavour)
    if total_borrowed == 0:
        return 0
    lendable: dict[str, int] = {}
    for team in cohort:
        quota = team.quotas.get(flavour)
        if quota is None:
            continue
        idle = max(0, quota.nominal - nominal_used.get((team.name, flavour), 0))
        limit = quota.nominal if quota.lending_limit is None else quota.lending_limit
        if min(idle, limit) > 0:
            lendable[team.name] = min(idle, limit)
    pool = sum(lendable.values())
    if pool == 0 or name not in lendable:
        return 0
    to_share = min(total_borrowed, pool)
    # Largest-remainder apportionment, so the teams' ``lent`` add up to exactly what is borrowed.
    exact = {t: to_share * amount / pool for t, amount in lendable.items()}
    floors = {t: int(v) for t, v in exact.items()}
    left = to_share - sum(floors.values())
    for t in sorted(exact, key=lambda t: (floors[t] - exact[t], t))[:left]:
        floors[t] += 1
    return floors[name]
