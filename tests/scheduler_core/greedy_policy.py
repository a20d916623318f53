"""A small, real policy for the controller's tests: FIFO first-fit with the few rules the controller must carry out.

It is here so the controller is tested against the ``Policy`` protocol alone, not against ``run_cycle``'s internals:
* pending jobs in order (victims at the front of the queue first, then by when they were queued), each placed
  first-fit, pod by pod, on distinct schedulable nodes it is not told to avoid; a job restarted after a failure
  looks at its ``restart_block`` first, and only such a job may take that block's hot spare;
* admitted as nominal while its team's usage of the flavour stays within nominal quota, else borrowed;
* a running job at its time limit is preempted without requeue (reason ``TimeLimit``);
* the test may ask for preemptions (``preempt``) or for every borrower to be reclaimed (``reclaim_borrowed``);
* every job that does not fit waits with ``WaitingForCapacity`` and its position.
"""

from __future__ import annotations

from scheduler_core.policy.decisions import Admit, CycleResult, Preempt, PreemptReason, Reason, Relabel, Wait
from scheduler_core.policy.snapshot import AdmittedAs, NodeState, PendingJob, Placement, PodPlacement, Snapshot


class GreedyPolicy:
    def __init__(self) -> None:
        self.reclaim_borrowed = False
        self.admit_nothing = False
        self.snapshots: list[Snapshot] = []
        self._asked: list[Preempt] = []
        self._relabels: list[Relabel] = []

    def preempt(self, job_id: str, reason: PreemptReason = PreemptReason.RECLAIM, *, grace_s: float = 300.0,
                requeue: bool = True, avoid: tuple[str, ...] = ()) -> None:
        """Preempt ``job_id`` in the next cycle."""
        self._asked.append(Preempt(job_id, reason, grace_s, requeue, avoid=avoid))

    def relabel(self, job_id: str, admitted_as: AdmittedAs, for_job: str) -> None:
        """Relabel ``job_id`` in the next cycle."""
        self._relabels.append(Relabel(job_id, admitted_as, for_job))

    def __call__(self, snapshot: Snapshot, now: float) -> CycleResult:
        self.snapshots.append(snapshot)
        free: dict[tuple[str, str], list[int]] = {
            (node.name, flavour): list(range(units)) for node in snapshot.nodes
            for flavour, units in node.capacity.items()}
        used: dict[tuple[str, str], int] = {}
        for running in snapshot.running:
            flavour = running.placement.flavour
            for pod in running.placement.pods:
                taken = set(pod.units)
                free[(pod.node, flavour)] = [u for u in free.get((pod.node, flavour), []) if u not in taken]
            key = (running.request.team, flavour)
            used[key] = used.get(key, 0) + running.request.units
        result = CycleResult(now=now)
        result.preempts.extend(self._preempts(snapshot, now))
        result.relabels.extend(self._relabels)
        self._relabels.clear()
        order = sorted(snapshot.pending, key=lambda p: (not p.front_of_queue, p.queued_at, p.request.submitted_at))
        position = 0
        for pending in order:
            placement = None if self.admit_nothing else self._fit(pending, snapshot.nodes, free)
            if placement is None:
                position += 1
                result.waits.append(Wait(pending.request.id, Reason.WAITING_FOR_CAPACITY,
                                         f"{pending.request.units} units do not fit", position))
                continue
            key = (pending.request.team, placement.flavour)
            team = snapshot.teams.get(pending.request.team)
            nominal = team.nominal(placement.flavour) if team is not None else 0
            admitted_as = (AdmittedAs.NOMINAL if used.get(key, 0) + pending.request.units <= nominal
                           else AdmittedAs.BORROWED)
            used[key] = used.get(key, 0) + pending.request.units
            result.admits.append(Admit(pending.request.id, placement, admitted_as))
        return result

    def _preempts(self, snapshot: Snapshot, now: float) -> list[Preempt]:
        preempts, self._asked = self._asked, []
        chosen = {p.job_id for p in preempts}
        for running in snapshot.running:
            request = running.request
            if running.terminating or request.id in chosen:
                continue
            if now - running.started_at >= request.time_limit_s:
                preempts.append(Preempt(request.id, PreemptReason.TIME_LIMIT, request.grace_s, requeue=False))
            elif self.reclaim_borrowed and running.admitted_as is AdmittedAs.BORROWED:
                preempts.append(Preempt(request.id, PreemptReason.RECLAIM, request.grace_s))
        return preempts

    @staticmethod
    def _fit(pending: PendingJob, nodes: tuple[NodeState, ...],
             free: dict[tuple[str, str], list[int]]) -> Placement | None:
        request = pending.request
        candidates = [n for n in nodes if n.schedulable and n.name not in pending.avoid_nodes
                      and (not n.spare or n.block == pending.restart_block)]
        candidates.sort(key=lambda n: n.block != pending.restart_block)   # stable: the restart block first
        for flavour in request.flavours:
            pods: list[PodPlacement] = []
            for node in candidates:
                if len(pods) == request.pods:
                    break
                units = free.get((node.name, flavour), [])
                if len(units) >= request.units_per_pod:
                    pods.append(PodPlacement(node.name, tuple(units[:request.units_per_pod])))
            if len(pods) == request.pods:
                for pod in pods:
                    taken = set(pod.units)
                    free[(pod.node, flavour)] = [u for u in free[(pod.node, flavour)] if u not in taken]
                return Placement(flavour, tuple(pods))
        return None
