"""A scheduler with behaviour, for the spawner's and the reaper's unit tests (the real one is used in test_hub_*).

``FakeScheduler`` keeps a pool of slices per flavour and a per-team limit, queues what does not fit with the same
reason codes and positions the real scheduler gives, admits the head of the queue when a slice frees, and moves an
admitted job to RUNNING on the next read (as a started process would).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from hub_spawner.scheduler import NotebookJob, NotebookScheduler, SchedulerRefused, SchedulerUnavailable
from scheduler_core.model import JobSpec


@dataclass
class FakeScheduler(NotebookScheduler):
    pool: dict[str, int] = field(default_factory=lambda: {"h100-mig-1g": 1})
    team_limit: dict[tuple[str, str], int] = field(default_factory=dict)
    utilization: dict[str, float] = field(default_factory=dict)
    devices: dict[str, tuple[str, ...]] = field(default_factory=dict)   # job id → devices its grant names
    borrowed: set[str] = field(default_factory=set)   # job ids admitted on borrowed slices (the rest nominal)
    refuse: SchedulerRefused | None = None
    unreachable: int = 0                  # this many calls fail with SchedulerUnavailable first
    jobs: dict[str, NotebookJob] = field(default_factory=dict)
    specs: dict[str, JobSpec] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    cancel_reasons: dict[str, str] = field(default_factory=dict)
    #: job id → (last activity, idle limit) as the reaper last reported it.
    idle_clocks: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    closed: int = 0

    def _maybe_down(self) -> None:
        if self.unreachable > 0:
            self.unreachable -= 1
            raise SchedulerUnavailable("connection refused")

    def _used(self, flavour: str, team: str | None = None) -> int:
        return sum(1 for j in self.jobs.values()
                   if j.holds_slice and j.flavour == flavour and (team is None or j.team == team))

    async def submit(self, spec: JobSpec, *, idempotency_key: str) -> NotebookJob:
        self._maybe_down()
        if self.refuse is not None:
            raise self.refuse
        if idempotency_key in self.keys:
            return self.jobs[self.keys[idempotency_key]]
        job_id = f"j{next(self._ids)}"
        self.specs[job_id] = spec
        self.keys[idempotency_key] = job_id
        self.jobs[job_id] = NotebookJob(id=job_id, state="PENDING", team=spec.team, flavour=spec.flavour[0],
                                        labels=dict(spec.labels))
        self._cycle()
        return self.jobs[job_id]

    def _cycle(self) -> None:
        """Admit what fits, oldest first; give every waiting job its reason and place."""
        position: dict[str, int] = {}
        for job_id, job in self.jobs.items():
            if not job.pending:
                continue
            limit = self.team_limit.get((job.team, job.flavour))
            if limit is not None and self._used(job.flavour, job.team) >= limit:
                position[job.team] = position.get(job.team, 0) + 1
                self.jobs[job_id] = replace(job, reason="QuotaFull", queue_position=position[job.team],
                                            reason_message=f"team {job.team} holds {limit} of {limit}")
            elif self._used(job.flavour) >= self.pool.get(job.flavour, 0):
                position[job.team] = position.get(job.team, 0) + 1
                self.jobs[job_id] = replace(job, reason="WaitingForCapacity", queue_position=position[job.team],
                                            reason_message="no free h100-mig-1g slice", estimated_start=None)
            else:
                self.jobs[job_id] = replace(job, state="ADMITTED", reason=None, queue_position=None,
                                            node="mig-a-n00",
                                            admitted_as="borrowed" if job_id in self.borrowed else "nominal",
                                            devices=self.devices.get(job_id, (f"MIG-fake-{job_id}",)))

    async def get(self, job_id: str) -> NotebookJob:
        self._maybe_down()
        if job_id not in self.jobs:
            raise SchedulerRefused("not_found", f"no job {job_id}", status=404)
        job = self.jobs[job_id]
        if job.state == "ADMITTED":
            self.jobs[job_id] = job = replace(job, state="RUNNING")
        elif job.state == "TERMINATING":
            self.jobs[job_id] = job = replace(job, state="CANCELLED", exit_code=143)
            self._cycle()
        return job

    async def cancel(self, job_id: str, *, reason: str = "") -> NotebookJob:
        self._maybe_down()
        job = self.jobs[job_id]
        self.cancel_reasons.setdefault(job_id, reason)
        if not job.finished:
            state = "TERMINATING" if job.holds_slice else "CANCELLED"
            message = job.message or reason
            self.jobs[job_id] = replace(job, state=state, message=message, finished_at=1_700_000_000.0)
        return self.jobs[job_id]

    async def node_gpu_utilization(self, node: str) -> float | None:
        return self.utilization.get(node)

    async def report_idle_clock(self, job_id: str, last_activity: float | None, idle_limit_s: float | None) -> None:
        self._maybe_down()
        self.idle_clocks[job_id] = (last_activity, idle_limit_s)

    def finish(self, job_id: str, exit_code: int = 0) -> None:
        """The server process exited by itself."""
        self.jobs[job_id] = replace(self.jobs[job_id], state="SUCCEEDED" if exit_code == 0 else "FAILED",
                                    exit_code=exit_code)
        self._cycle()

    async def close(self) -> None:
        self.closed += 1
