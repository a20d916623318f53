"""The order in which a cycle considers pending jobs (DESIGN §3.2, step 2).

* **Bands first**: critical > guaranteed (fits its team's unused nominal quota) > borrowed > scavenger.
* **Across teams**, within a band: teams whose next job has waited ``starvation_after_s`` first, then the rest;
  in each, the lowest weighted dominant share (DRF over GPUs, CPUs and memory, with decayed usage) goes next. The
  first tier is an age term, as in Slurm's multifactor priority: without it a waiting job's reservation is no
  promise against another team's newer work, which a lower share orders ahead of it, pass after pass. A team's
  band is its next job's, except that a team whose next job must borrow but which has work of the same priority
  behind it that fits its unused nominal quota is ordered with the nominal work (its queue keeps its own order).
  Shares are recomputed as the cycle admits work, so one team's burst does not take every free unit of the cycle.
* **Within a team**: priority class, then a preempted job back at the front, then — for short, small work —
  attained service (GPU·s already used) in a few discrete levels (Tiresias), then age. Work that has waited
  longer than ``starvation_after_s`` is promoted to the first level, so nothing starves.

Every key ends in explicit, unique fields (submission time, id): the order never depends on dict or hash order.
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterator, Mapping, Sequence

from .snapshot import Band, PendingJob, PolicyConfig


def waited_long(job: PendingJob, now: float, config: PolicyConfig) -> bool:
    """Whether ``job`` has waited ``starvation_after_s``: what promotes it in its queue, its team across teams, and
    its right to a reservation."""
    return now - job.queued_at >= config.starvation_after_s


def service_level(job: PendingJob, now: float, config: PolicyConfig) -> int:
    """0, 1, 2…: how much GPU·time a small job has already had. Large jobs and long waiters are level 0."""
    if job.request.units > config.small_job_max_units or waited_long(job, now, config):
        return 0
    attained = job.attained_gpu_s
    level = 0
    for threshold in config.service_levels_gpu_s:
        if attained >= threshold:
            level += 1
    return level


def team_key(job: PendingJob, now: float, config: PolicyConfig) -> tuple[int, int, int, float, float, str]:
    """The order of one team's queue: priority, front of queue, service level, age, id."""
    request = job.request
    return (-request.priority_class.rank, 0 if job.front_of_queue else 1, service_level(job, now, config),
            request.submitted_at, job.queued_at, request.id)


def team_queues(pending: Sequence[PendingJob], now: float, config: PolicyConfig) -> dict[str, list[PendingJob]]:
    """Each team's pending jobs in its own queue order (``team_key``, computed once per job)."""
    keyed: dict[str, list[tuple[tuple[int, int, int, float, float, str], PendingJob]]] = {}
    for job in pending:
        keyed.setdefault(job.request.team, []).append((team_key(job, now, config), job))
    queues: dict[str, list[PendingJob]] = {}
    for team in sorted(keyed):
        rows = keyed[team]
        rows.sort(key=lambda row: row[0])
        queues[team] = [job for _, job in rows]
    return queues


class TeamOrder:
    """Merges the team queues: always the head of the team with the highest band, then of a team whose head has
    waited long (``starving``), then lowest share.

    A team whose head must borrow but that has nominal-fitting work of the same priority behind it goes in the
    guaranteed band. Ordered by the head alone, that nominal work would come after other teams' borrowers,
    which take the room it reclaims: the job then stops another borrower, whose room goes the same way, cycle
    after cycle. Within the team nothing moves, so the team's own reservations stay where they were.

    Iterate it; after each job is handled (admitted or not) the team goes back in with its next job, its band
    and share computed *then*, so a cycle's own admissions move the team back.
    """

    def __init__(self, queues: Mapping[str, list[PendingJob]], band: Callable[[PendingJob], Band],
                 share: Callable[[str], float], starving: Callable[[PendingJob], bool]) -> None:
        self._queues = queues
        self._band = band
        self._share = share
        self._starving = starving
        self._next = dict.fromkeys(queues, 0)
        self._scan: dict[str, int] = {}        # how far the search for nominal work behind the head got
        self._heap: list[tuple[int, int, float, str]] = []
        for team in sorted(queues):
            if queues[team]:
                self._push(team)

    def _push(self, team: str) -> None:
        heapq.heappush(self._heap, self._key(team))

    def _key(self, team: str) -> tuple[int, int, float, str]:
        """(band, not starving, share, name) of the team's next job. The search for nominal-fitting work behind a
        borrowing head resumes where it stopped: within a cycle a team's nominal usage only grows, so a job that
        would borrow now would borrow later in it too."""
        queue = self._queues[team]
        index = self._next[team]
        job = queue[index]
        band = self._band(job)
        if band is Band.BORROWED:
            rank = job.request.priority_class.rank
            scan = max(self._scan.get(team, 0), index + 1)
            while scan < len(queue) and queue[scan].request.priority_class.rank == rank:
                if self._band(queue[scan]) is Band.GUARANTEED:
                    band = Band.GUARANTEED
                    break
                scan += 1
            self._scan[team] = scan
        return (-int(band), 0 if self._starving(job) else 1, self._share(team), team)

    def __iter__(self) -> Iterator[PendingJob]:
        heap = self._heap
        while heap:
            team = heapq.heappop(heap)[-1]
            queue = self._queues[team]
            while True:
                index = self._next[team]
                self._next[team] = index + 1
                yield queue[index]
                if index + 1 >= len(queue):
                    break
                key = self._key(team)
                if heap and heap[0] < key:
                    heapq.heappush(heap, key)
                    break
                # Still first: go on with this team without touching the heap.
