"""``MemoryLauncher``: a ``Launcher`` with a small job table of its own, driven by the test like a cluster would be
(start a job, report from it, preempt it, let it exit). It keeps the launcher contract (idempotent launch,
``Conflict`` on finishing a finished trial) and counts how many trial jobs ever ran at once."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler_core.errors import Conflict, NotFound, ValidationFailed
from scheduler_core.model import JobSpec, SweepSpec
from scheduler_core.model.sweep import Choice, SweepState, TrialState
from sweeps.launcher import Launcher, SweepInfo, TrialInfo


@dataclass
class FakeJob:
    id: str
    spec: JobSpec
    state: str = "PENDING"
    cancel_requested: bool = False
    preemptions: int = 0
    exit_code: int | None = None
    message: str = ""


@dataclass
class FakeTrial:
    sweep_id: str
    number: int
    job_id: str
    params: dict[str, Choice]
    state: TrialState = TrialState.ACTIVE
    value: float | None = None
    message: str = ""
    intermediate: dict[int, float] = field(default_factory=dict)


@dataclass
class FakeSweep:
    id: str
    spec: SweepSpec
    state: SweepState = SweepState.RUNNING
    message: str = ""


class MemoryLauncher(Launcher):
    def __init__(self) -> None:
        self.sweeps: dict[str, FakeSweep] = {}
        self.trials_by_sweep: dict[str, dict[int, FakeTrial]] = {}
        self.jobs: dict[str, FakeJob] = {}
        self._ids = itertools.count(1)
        self.refuse: str | None = None          # a reason: every launch is refused with it
        self.launch_calls = 0
        self.max_unfinished = 0                 # the most trial jobs ever unfinished at once

    # -- the test's side: a user and a cluster ------------------------------------------------------------------
    def create(self, spec: SweepSpec) -> str:
        sweep_id = f"sw-{next(self._ids)}"
        self.sweeps[sweep_id] = FakeSweep(sweep_id, spec)
        self.trials_by_sweep[sweep_id] = {}
        return sweep_id

    def trial(self, sweep_id: str, number: int) -> FakeTrial:
        return self.trials_by_sweep[sweep_id][number]

    def job_of(self, sweep_id: str, number: int) -> FakeJob:
        return self.jobs[self.trial(sweep_id, number).job_id]

    def start(self, job_id: str) -> None:
        job = self.jobs[job_id]
        assert job.state == "PENDING", job
        job.state = "RUNNING"

    def report(self, job_id: str, step: int, value: float) -> bool:
        """As the API does: keep the first value of a step (of an active trial); answer whether the job is being
        stopped."""
        trial = self._trial_of(job_id)
        if trial.state is TrialState.ACTIVE:
            trial.intermediate.setdefault(step, value)
        return self.jobs[job_id].cancel_requested

    def finish(self, job_id: str, value: float) -> None:
        trial = self._trial_of(job_id)
        if trial.state is not TrialState.ACTIVE:
            raise Conflict(f"trial {trial.number} is already {trial.state}")
        trial.state, trial.value = TrialState.COMPLETE, value

    def exit(self, job_id: str, code: int = 0, message: str = "") -> None:
        job = self.jobs[job_id]
        assert job.state in ("RUNNING", "TERMINATING"), job
        if job.state == "TERMINATING":
            job.state = "CANCELLED"
        else:
            job.state = "SUCCEEDED" if code == 0 else "FAILED"
        job.exit_code, job.message = code, message

    def preempt(self, job_id: str) -> None:
        """Checkpointed and requeued at the front of its queue: the same job, pending again."""
        job = self.jobs[job_id]
        assert job.state == "RUNNING", job
        job.state, job.preemptions = "PENDING", job.preemptions + 1

    def settle(self) -> None:
        """Every job asked to stop has stopped."""
        for job in self.jobs.values():
            if job.state == "TERMINATING":
                job.state = "CANCELLED"

    def cancel_sweep(self, sweep_id: str) -> None:
        """What the store does on ``POST /v1/sweeps/{id}:cancel``."""
        sweep = self.sweeps[sweep_id]
        sweep.state = SweepState.CANCELLING
        for trial in self.trials_by_sweep[sweep_id].values():
            if trial.state is TrialState.ACTIVE:
                trial.state, trial.message = TrialState.FAILED, "the sweep was cancelled"
                self.cancel_job(trial.job_id)

    def unfinished_jobs(self, sweep_id: str) -> list[FakeJob]:
        return [self.jobs[t.job_id] for t in self.trials_by_sweep[sweep_id].values()
                if self.jobs[t.job_id].state not in _FINISHED]

    def _trial_of(self, job_id: str) -> FakeTrial:
        for trials in self.trials_by_sweep.values():
            for trial in trials.values():
                if trial.job_id == job_id:
                    return trial
        raise NotFound(job_id)

    def _observe(self) -> None:
        unfinished = sum(1 for j in self.jobs.values() if j.state not in _FINISHED)
        self.max_unfinished = max(self.max_unfinished, unfinished)

    # -- the Launcher contract ----------------------------------------------------------------------------------
    def active_sweeps(self) -> list[SweepInfo]:
        return [SweepInfo(s.id, s.spec, s.state, "alice") for s in self.sweeps.values()
                if s.state in (SweepState.RUNNING, SweepState.CANCELLING)]

    def trials(self, sweep_id: str) -> list[TrialInfo]:
        return [self._info(t) for t in self.trials_by_sweep[sweep_id].values()]

    def launch(self, sweep: SweepInfo, number: int, params: Mapping[str, Choice]) -> TrialInfo:
        self.launch_calls += 1
        existing = self.trials_by_sweep[sweep.id].get(number)
        if existing is not None:
            return self._info(existing)
        if self.refuse is not None:
            raise ValidationFailed(self.refuse)
        spec = sweep.spec.trial_job(sweep_id=sweep.id, number=number, params=dict(params))
        job = FakeJob(f"job-{next(self._ids)}", spec)
        self.jobs[job.id] = job
        trial = FakeTrial(sweep.id, number, job.id, dict(params))
        self.trials_by_sweep[sweep.id][number] = trial
        self._observe()
        return self._info(trial)

    def finish_trial(self, sweep_id: str, number: int, state: TrialState, *, value: float | None = None,
                     message: str = "") -> TrialInfo:
        trial = self.trials_by_sweep[sweep_id][number]
        if trial.state is not TrialState.ACTIVE:
            raise Conflict(f"trial {number} is already {trial.state}")
        trial.state, trial.value, trial.message = state, value, message
        return self._info(trial)

    def cancel_job(self, job_id: str) -> None:
        job = self.jobs[job_id]
        job.cancel_requested = True
        if job.state == "PENDING":
            job.state = "CANCELLED"
        elif job.state in ("ADMITTED", "RUNNING"):
            job.state = "TERMINATING"

    def finish_sweep(self, sweep_id: str, state: SweepState, message: str) -> None:
        sweep = self.sweeps[sweep_id]
        assert sweep.state in (SweepState.RUNNING, SweepState.CANCELLING), sweep
        sweep.state, sweep.message = state, message

    def _info(self, trial: FakeTrial) -> TrialInfo:
        job = self.jobs[trial.job_id]
        return TrialInfo(number=trial.number, job_id=job.id, state=trial.state, job_state=job.state,
                         params=dict(trial.params), intermediate=dict(trial.intermediate), value=trial.value,
                         message=trial.message, job_message=job.message, exit_code=job.exit_code,
                         preemptions=job.preemptions, cancel_requested=job.cancel_requested)


_FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"})


class FlakyLauncher(MemoryLauncher):
    """Loses the connection on chosen launches, before anything is submitted (a controller crash between
    Optuna's ask and the scheduler's record looks the same from the study's side)."""

    def __init__(self, fail_on: set[int]) -> None:
        super().__init__()
        self.fail_on = fail_on

    def launch(self, sweep: SweepInfo, number: int, params: Mapping[str, Choice]) -> TrialInfo:
        if number in self.fail_on:
            self.fail_on.discard(number)
            raise ConnectionError("connection reset by peer")
        return super().launch(sweep, number, params)

