"""A tiny in-memory world that applies a cycle's decisions, for the benchmark's warm-up and the policy tests.

It is the reference reading of :class:`~scheduler_core.policy.decisions.CycleResult`: an admitted job starts
now on its placement; a preempted job is signalled (``terminating``, out by ``now + grace``, remembering whom
it was preempted for) and, when it exits, goes back to the front of its team's queue unless it was stopped at
its time limit; reservations change nothing. The live controller and the simulator do the same against their
store and executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from ..policy.decisions import CycleResult
from ..policy.snapshot import PendingJob, RunningJob, Snapshot


@dataclass
class World:
    snapshot: Snapshot
    #: How long each job really runs once started (seconds); absent: until its time limit.
    runtime: dict[str, float] = field(default_factory=dict)
    requeue: dict[str, bool] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)

    def apply(self, result: CycleResult) -> None:
        snap = self.snapshot
        now = result.now
        pending = {p.request.id: p for p in snap.pending}
        running = {r.request.id: r for r in snap.running}
        for admit in result.admits:
            job = pending.pop(admit.job_id)
            running[admit.job_id] = RunningJob(job.request, admit.placement, admit.admitted_as, now)
        for relabel in result.relabels:
            running[relabel.job_id] = replace(running[relabel.job_id], admitted_as=relabel.admitted_as)
        for preempt in result.preempts:
            victim = running[preempt.job_id]
            running[preempt.job_id] = replace(victim, terminating=True, terminate_by=now + preempt.grace_s,
                                              preempted_for=preempt.for_job)
            self.requeue[preempt.job_id] = preempt.requeue
        self.snapshot = replace(snap, pending=tuple(pending.values()), running=tuple(running.values()))

    def advance(self, to: float) -> None:
        """Let time pass: signalled jobs exit at their deadline (requeued at the front), others finish."""
        snap = self.snapshot
        pending = list(snap.pending)
        still: list[RunningJob] = []
        for job in snap.running:
            request = job.request
            if job.terminating:
                gone_at = job.terminate_by if job.terminate_by is not None else to
                if gone_at <= to:
                    if self.requeue.pop(request.id, True):
                        pending.append(PendingJob(request, gone_at, front_of_queue=True,
                                                  attained_gpu_s=request.units * (gone_at - job.started_at)))
                    else:
                        self.finished.append(request.id)
                    continue
            else:
                end = job.started_at + min(self.runtime.get(request.id, request.time_limit_s), request.time_limit_s)
                if end <= to:
                    self.finished.append(request.id)
                    continue
            still.append(job)
        self.snapshot = replace(snap, pending=tuple(pending), running=tuple(still))

    def submit(self, *jobs: PendingJob, runtimes: Mapping[str, float] | None = None) -> None:
        self.snapshot = replace(self.snapshot, pending=self.snapshot.pending + tuple(jobs))
        if runtimes:
            self.runtime.update(runtimes)
