"""The cycle's indexes of the running jobs, carried from one pass to the next instead of rebuilt.

Every pass starts from the same three pictures of what runs: free units per node (``Capacity``), when each unit
comes back (``Timeline``) and quota usage per team and cohort (``QuotaLedger``). Rebuilding them from the whole
``Snapshot.running`` took half of a busy Tuesday's replay, although between two passes only a few jobs start,
end, are signalled or relabelled. ``CarriedIndex`` keeps them as of the last pass it saw and brings them up to
date from the difference: a ``RunningJob`` is immutable, and the snapshot builder hands back the very same object
while nothing about a job changed, so a job whose object is new (admitted, signalled, relabelled, checkpointed)
or gone (ended, requeued) is exactly what moved. The nodes (a health change) or the teams' quotas changing
rebuild from scratch: both are rare.

Each pass gets a working copy (``working``), which it changes as it admits and preempts; the carried base is
never touched by a pass. The copy equals what ``Capacity(nodes, running)``, ``QuotaLedger(teams, running)`` and
``Timeline(cap, running, now)`` build (a Hypothesis property checks it after every pass on random event
sequences), so decisions are the same with or without it: it is a cache, and a ``Snapshot`` without one
(``Snapshot.carried is None``) builds its indexes as before.

Not thread-safe: one pass at a time, as the controller runs them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from .capacity import Capacity
from .fairshare import cluster_capacity
from .quota import QuotaEnds, QuotaLedger
from .record import record
from .reservation import Timeline
from .snapshot import NodeState, RunningJob, TeamState

#: A free unit's "comes back at" in the carried timeline: any ``now`` is later.
_FREE = -math.inf


@record
class Working:
    """One pass's own indexes: change them freely. ``totals``: ``cluster_capacity(nodes)``, shared (read only);
    ``quota_ends``: the running jobs' quota holdings (read only: ``QuotaEnds.at`` gives a pass its own lists)."""

    cap: Capacity
    ledger: QuotaLedger
    timeline: Timeline
    totals: tuple[float, float, float]
    quota_ends: QuotaEnds | None = None


class CarriedIndex:
    """Free units, unit end times and quota usage of the running jobs of the last snapshot seen."""

    __slots__ = ("_nodes", "_teams", "_jobs", "_cap", "_ledger", "_quota_ends", "_ends", "_low", "_high", "_view",
                 "_ordered", "_open", "_busy_until", "_floating", "_totals", "rebuilds", "updates")

    def __init__(self) -> None:
        self._nodes: Sequence[NodeState] | None = None
        self._teams: dict[str, tuple[str, Mapping[str, object]]] | None = None
        self._jobs: dict[str, RunningJob] = {}
        self._cap: Capacity | None = None
        self._ledger: QuotaLedger | None = None
        self._quota_ends: QuotaEnds | None = None
        #: flavour → node position in the pool → unit → when the job holding it ends (``_FREE``: free). A row
        #: is replaced, never changed, once made: a pass's timeline may share it (``Timeline.from_times``).
        self._ends: dict[str, list[list[float]]] = {}
        #: Per row of ``_ends``: its earliest and latest end, so a pass copies most rows without looking inside.
        self._low: dict[str, list[float]] = {}
        self._high: dict[str, list[float]] = {}
        #: Per flavour, the rows a pass starts from: a row all of whose units were still busy at the last pass
        #: is its ``_ends`` row itself, shared; the others (``_open``: some unit back by then, or changed since)
        #: are clamped to each pass's ``now``. ``_busy_until``: (earliest end, node) of the shared rows, a heap,
        #: so a pass finds those whose first unit has come back without looking at the rest.
        self._view: dict[str, list[list[float]]] = {}
        #: The shared rows of ``_view`` sorted (what ``Timeline.sorted_times`` would sort again every pass).
        self._ordered: dict[str, list[list[float] | None]] = {}
        self._open: dict[str, set[int]] = {}
        self._busy_until: dict[str, list[tuple[float, int]]] = {}
        #: Signalled jobs without a termination deadline: their end moves with ``now`` (``job_end``).
        self._floating: dict[str, RunningJob] = {}
        self._totals = (0.0, 0.0, 0.0)
        #: How often the whole index was built, and how many job changes were applied (for tests and profiles).
        self.rebuilds = 0
        self.updates = 0

    def working(self, nodes: Sequence[NodeState], teams: Mapping[str, TeamState], running: Sequence[RunningJob],
                now: float) -> Working:
        """This pass's own copies of the three indexes, for ``running`` on ``nodes`` at ``now``."""
        if not self._same_nodes(nodes) or not self._same_teams(teams):
            self._rebuild(nodes, teams, running)
        else:
            self._update(running)
        assert self._cap is not None and self._ledger is not None
        cap = self._cap.copy()
        return Working(cap, self._ledger.copy(teams), self._timeline(cap, now), self._totals, self._quota_ends)

    # -- keeping the base --------------------------------------------------------------------------------------

    def _same_nodes(self, nodes: Sequence[NodeState]) -> bool:
        known = self._nodes
        if known is None:
            return False
        if known is nodes:
            return True
        if len(known) != len(nodes) or any(a is not b for a, b in zip(known, nodes)):
            return False
        self._nodes = nodes
        return True

    def _same_teams(self, teams: Mapping[str, TeamState]) -> bool:
        known = self._teams
        if known is None or len(known) != len(teams):
            return False
        for name, state in teams.items():
            terms = known.get(name)
            if terms is None or terms[0] != state.cohort or terms[1] != state.quotas:
                return False
        return True

    def _rebuild(self, nodes: Sequence[NodeState], teams: Mapping[str, TeamState],
                 running: Sequence[RunningJob]) -> None:
        self.rebuilds += 1
        self._nodes = nodes
        self._teams = {name: (state.cohort, dict(state.quotas)) for name, state in teams.items()}
        self._cap = Capacity(nodes, running)
        self._totals = cluster_capacity(nodes)
        self._ledger = QuotaLedger(teams, running)
        self._quota_ends = QuotaEnds(teams, running)
        self._ends = {flavour: [[_FREE] * c for c in pool.cap] for flavour, pool in self._cap.pools.items()}
        self._low = {flavour: [_FREE] * len(rows) for flavour, rows in self._ends.items()}
        self._high = {flavour: [_FREE] * len(rows) for flavour, rows in self._ends.items()}
        self._view = {flavour: list(rows) for flavour, rows in self._ends.items()}
        self._ordered = {flavour: [None] * len(rows) for flavour, rows in self._ends.items()}
        self._open = {flavour: set(range(len(rows))) for flavour, rows in self._ends.items()}
        self._busy_until = {flavour: [] for flavour in self._ends}
        self._jobs = {}
        self._floating = {}
        for job in running:
            self._jobs[job.request.id] = job
            self._set_ends(job, held=True)

    def _update(self, running: Sequence[RunningJob]) -> None:
        jobs = self._jobs
        seen = 0
        changed: list[RunningJob] = []
        for job in running:
            if jobs.get(job.request.id) is job:
                seen += 1
            else:
                changed.append(job)
        if seen == len(jobs) and not changed:
            return
        current = {job.request.id for job in running} if seen + len(changed) != len(jobs) or changed else None
        for job in changed:
            old = jobs.get(job.request.id)
            if old is not None:
                self._remove(old)
        if current is not None:
            for job_id in [job_id for job_id in jobs if job_id not in current]:
                self._remove(jobs[job_id])
        for job in changed:
            self._add(job)

    def _add(self, job: RunningJob) -> None:
        assert self._cap is not None and self._ledger is not None and self._quota_ends is not None
        self.updates += 1
        self._jobs[job.request.id] = job
        self._cap.occupy(job.request, job.placement)
        self._ledger.count(job, +1)
        self._quota_ends.count(job, +1)
        self._set_ends(job, held=True)

    def _remove(self, job: RunningJob) -> None:
        assert self._cap is not None and self._ledger is not None and self._quota_ends is not None
        self.updates += 1
        del self._jobs[job.request.id]
        self._cap.release(job.request, job.placement)
        self._ledger.count(job, -1)
        self._quota_ends.count(job, -1)
        self._set_ends(job, held=False)
        self._cap.forget(job.placement)

    def _set_ends(self, job: RunningJob, *, held: bool) -> None:
        assert self._cap is not None
        rows = self._ends.get(job.placement.flavour)
        if rows is None:
            return
        self._floating.pop(job.request.id, None)
        if held and job.terminating and job.terminate_by is None:
            self._floating[job.request.id] = job
        if not held:
            until = _FREE
        elif job.terminating:
            until = job.terminate_by if job.terminate_by is not None else _FREE
        else:
            until = job.limit_end
        flavour = job.placement.flavour
        low, high, changed = self._low[flavour], self._high[flavour], self._open[flavour]
        for _, j, bits, units in self._cap.pod_bits(job.placement):
            size = len(rows[j])
            if bits == (1 << size) - 1:          # the whole node
                rows[j] = [until] * size
                low[j] = high[j] = until
                changed.add(j)
                continue
            row = rows[j] = rows[j][:]           # a new row: the last pass's timeline may share the old one
            for unit in units:
                if unit < size:
                    row[unit] = until
            low[j], high[j] = min(row), max(row)
            changed.add(j)

    # -- this pass's copies --------------------------------------------------------------------------------------

    def _timeline(self, cap: Capacity, now: float) -> Timeline:
        """What ``Timeline(cap, running, now)`` builds: each unit back at ``max(its job's end, now)``."""
        times: dict[str, list[list[float]]] = {}
        ordered: dict[str, list[list[float] | None]] = {}
        for flavour, rows in self._ends.items():
            times[flavour], ordered[flavour] = self._rows(flavour, rows, now)
        for job in self._floating.values():
            laid = times.get(job.placement.flavour)
            if laid is None:
                continue
            until = max(now + job.request.grace_s, now)
            for _, j, _, units in cap.pod_bits(job.placement):
                row = laid[j] = laid[j][:]
                ordered[job.placement.flavour][j] = None
                for unit in units:
                    if unit < len(row):
                        row[unit] = until
        return Timeline.from_times(cap, times, now, ordered)

    def _rows(self, flavour: str, rows: list[list[float]],
              now: float) -> tuple[list[list[float]], list[list[float] | None]]:
        """One flavour's rows clamped to ``now``, and those of them known sorted: a row all back after now is
        shared as it is (sorted once, when it became shared), one all back by now is all now (one row object
        for every such node of a size, its own sorted form), and only the rest are clamped unit by unit. Only
        the rows not shared at the last pass, or whose first unit has come back since, are looked at
        (``_view``)."""
        low, high, view, open_ = self._low[flavour], self._high[flavour], self._view[flavour], self._open[flavour]
        ordered = self._ordered[flavour]
        heap = self._busy_until[flavour]
        while heap and heap[0][0] < now:
            _, j = heapq.heappop(heap)
            if low[j] < now:                     # else an entry left from before the row changed
                open_.add(j)
        out = view[:]
        out_ordered = ordered[:]
        idle: dict[int, list[float]] = {}
        shared: list[int] = []
        for j in open_:
            row, first = rows[j], low[j]
            if first >= now:
                out[j] = view[j] = row
                out_ordered[j] = ordered[j] = sorted(row)
                shared.append(j)
                heapq.heappush(heap, (first, j))
            elif high[j] <= now:
                size = len(row)
                same = idle.get(size)
                if same is None:
                    same = idle[size] = [now] * size
                out[j] = out_ordered[j] = same
            else:
                out[j] = [t if t > now else now for t in row]
                out_ordered[j] = None
        open_.difference_update(shared)
        return out, out_ordered
