"""The controller over the real API (``ApiLauncher``, the client SDK, a real server and store) with the trial helper
reporting over HTTP as a trial job would. The scheduler's part — starting, preempting and ending jobs — is played
on the store by hand, so each step is exact; ``test_e2e.py`` runs it all under ``shoal up``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import optuna
import pytest
from optuna.trial import TrialState as OptunaState

from scheduler_core.auth.job_tokens import JobTokens
from scheduler_core.client import ShoalClient
from scheduler_core.model.sweep import SweepState, TrialState
from scheduler_core.policy.snapshot import AdmittedAs, Placement, PodPlacement
from scheduler_core.store.records import JobState
from sweeps import trial
from sweeps.api_launcher import ApiLauncher
from sweeps.controller import SweepController
from sweeps.study import study_name
from tests.scheduler_core.api.harness import Harness, running_harness

from .builders import make_sweep

optuna.logging.set_verbosity(optuna.logging.WARNING)
MIG = "mig-a-n00"


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()


class Scheduler:
    """The scheduler's side, on the store: bind a job to a free 1g slice, end it, preempt it."""

    def __init__(self, api: Harness) -> None:
        self.api = api
        self.slot = 0

    def start(self, job_id: str) -> None:
        store, now = self.api.store, self.api.clock()
        self.slot += 1
        store.bind(job_id, Placement("h100-mig-1g", (PodPlacement(MIG, (self.slot,)),)), AdmittedAs.NOMINAL,
                   epoch=0, now=now)
        store.mark_running(job_id, now)

    def exit(self, job_id: str, code: int = 0, message: str = "") -> None:
        state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
        if self.api.store.get(job_id).cancel_requested:
            state = JobState.CANCELLED
        self.api.store.release(job_id, state=state, now=self.api.clock(), epoch=0, exit_code=code, message=message)

    def preempt(self, job_id: str) -> None:
        now = self.api.clock()
        self.api.store.mark_terminating(job_id, requeue=True, terminate_by=now + 30, now=now, epoch=0)
        self.api.store.release(job_id, state=JobState.PENDING, now=now, epoch=0, exit_code=0,
                               message="preempted")


class AsTrial:
    """Run the trial helper as the trial job ``job_id`` would: its env, real HTTP."""

    def __init__(self, api: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
        self.api = api
        self.monkeypatch = monkeypatch
        self.job_tokens = JobTokens(api.tokens, api.clock)

    def __call__(self, job_id: str) -> AsTrial:
        record = self.api.store.get(job_id)
        # The token the scheduler's launch injects (the spec carries none): the same JobTokens the controller uses.
        env = {**record.spec.env, **self.job_tokens.env_for(job_id, record.user, record.spec)}
        for name in ("SHOAL_API_URL", "SHOAL_API_TOKEN", "SHOAL_TRIAL_PARAMS", "SHOAL_TRIAL_NUMBER"):
            self.monkeypatch.setenv(name, env[name])
        self.monkeypatch.setenv("SHOAL_JOB_ID", job_id)
        return self


@pytest.fixture
def controller(api: Harness) -> Iterator[SweepController]:
    admin = ShoalClient(api.url, api.users["root"])
    launcher = ApiLauncher(admin, job_api_url=api.url)
    yield SweepController(launcher, optuna.storages.InMemoryStorage())
    admin.close()


def jobs_of(api: Harness, sweep_id: str) -> list[str]:
    return [t.job_id for t, _ in api.store.list_trials(sweep_id)]


def test_a_sweep_runs_through_the_api(api: Harness, controller: SweepController,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    spec = (make_sweep("api").trials(4).parallel(2)
            .pruner({"name": "median", "n_startup_trials": 1}).build())
    view = api.client("bob").create_sweep(spec)
    sweep_id = view.sweep_id
    cluster, as_trial = Scheduler(api), AsTrial(api, monkeypatch)

    assert controller.run_once()[sweep_id].launched == [0, 1]
    first, second = jobs_of(api, sweep_id)
    job = api.store.get(first)
    assert job.spec.kind == "trial" and job.user == "bob"
    assert "SHOAL_API_TOKEN" not in job.spec.env
    assert "shoal_" not in json.dumps(api.client("bob").job(first).model_dump(mode="json"))

    # Trial 0 runs, reports through the helper, completes; trial 1 runs, is preempted, resumes.
    cluster.start(first)
    as_trial(first)
    assert trial.params() == json.loads(job.spec.env["SHOAL_TRIAL_PARAMS"]) and trial.number() == 0
    assert trial.report(0, 2.0) is False
    assert trial.finish(1.0) is True
    cluster.exit(first)
    cluster.start(second)
    as_trial(second)
    trial.report(0, 1.5)
    cluster.preempt(second)
    result = controller.run_once()[sweep_id]
    assert 0 in result.told and result.failed == [] and result.launched == [2]
    third = jobs_of(api, sweep_id)[2]

    # Trial 2 reports far worse than the median: pruned, its job cancelled, its next report says stop.
    cluster.start(third)
    as_trial(third)
    assert trial.report(0, 50.0) is False
    result = controller.run_once()[sweep_id]
    assert result.pruned == [2] and result.cancelled_jobs == [third]
    assert api.store.get(third).cancel_requested
    assert trial.report(1, 49.0) is True
    assert trial.finish(48.0) is False          # too late: a pruned trial's value is not recorded
    cluster.exit(third)

    # Trial 1 resumes from its checkpoint, repeats step 0, and finishes as the same Optuna trial.
    cluster.start(second)
    as_trial(second)
    trial.report(0, 1.4)
    trial.report(1, 0.8)
    trial.finish(0.7)
    cluster.exit(second)
    result = controller.run_once()[sweep_id]
    fourth = jobs_of(api, sweep_id)[3]
    cluster.start(fourth)
    as_trial(fourth)
    trial.report(0, 0.9)
    trial.finish(0.5)
    cluster.exit(fourth)
    assert controller.run_once()[sweep_id].closed is SweepState.SUCCEEDED

    study = optuna.load_study(study_name=study_name(sweep_id), storage=controller.storage)
    assert [t.state for t in study.trials] == [OptunaState.COMPLETE, OptunaState.COMPLETE, OptunaState.PRUNED,
                                               OptunaState.COMPLETE]
    assert study.trials[1].intermediate_values == {0: 1.5, 1: 0.8} and study.trials[1].value == 0.7
    assert study.best_value == 0.5
    final = api.client("bob").sweep(sweep_id)
    assert final.state == "SUCCEEDED" and final.best is not None and final.best.number == 3
    assert (final.counts.complete, final.counts.pruned, final.counts.failed) == (3, 1, 0)
    assert api.store.get(second).preemptions == 1


def test_a_failed_trial_carries_the_jobs_reason(api: Harness, controller: SweepController) -> None:
    sweep_id = api.client("bob").create_sweep(make_sweep("f").trials(2).parallel(1).build()).sweep_id
    controller.run_once()
    [job_id] = jobs_of(api, sweep_id)
    cluster = Scheduler(api)
    cluster.start(job_id)
    cluster.exit(job_id, 1, "ModuleNotFoundError: No module named 'objective'")
    assert controller.run_once()[sweep_id].failed == [0]
    [failed, _] = api.client("bob").trials(sweep_id).trials
    assert failed.state == "FAILED"
    assert failed.message == "the job failed: ModuleNotFoundError: No module named 'objective'"
    assert api.store.events()[-1].reason == "TrialFailed"


def test_cancelling_a_sweep_closes_it(api: Harness, controller: SweepController) -> None:
    sweep_id = api.client("bob").create_sweep(make_sweep("c").trials(4).parallel(2).build()).sweep_id
    controller.run_once()
    running, pending = jobs_of(api, sweep_id)
    Scheduler(api).start(running)
    api.client("bob").cancel_sweep(sweep_id)
    assert controller.run_once()[sweep_id].closed is SweepState.CANCELLED
    assert api.store.get_sweep(sweep_id).state is SweepState.CANCELLED
    assert api.store.get(running).cancel_requested and api.store.get(pending).state is JobState.CANCELLED
    assert {t.state for t, _ in api.store.list_trials(sweep_id)} == {TrialState.FAILED}
    assert controller.launcher.active_sweeps() == []
