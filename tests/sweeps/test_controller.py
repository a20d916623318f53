"""The sweep controller's Optuna logic against ``MemoryLauncher``: parallelism, pruning, preemption, failures,
cancellation, restarts. Each test drives the cluster side by hand, pass by pass, and checks both records: the
scheduler's (the launcher's trials) and Optuna's (the study)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState as OptunaState

from scheduler_core.model.sweep import SweepState, TrialState
from sweeps.controller import FAIL_REASON_ATTR, SweepController, best_trial
from sweeps.launcher import SweepInfo
from sweeps.study import study_name

from .builders import make_sweep
from .fakes import FlakyLauncher, MemoryLauncher

optuna.logging.set_verbosity(optuna.logging.WARNING)

Objective = Callable[[dict[str, float], int], float]


def quadratic(params: dict[str, float], step: int) -> float:
    """Loss after ``step`` epochs: converges to (x - 3)^2 from above."""
    return (params["x"] - 3.0) ** 2 + 5.0 / (step + 1)


def drive(launcher: MemoryLauncher, controller: SweepController, sweep_id: str, *, steps: int = 4,
          objective: Objective = quadratic, max_passes: int = 500) -> None:
    """Run the sweep to the end as a cluster would: each pass, pending jobs start, running ones advance a step
    (the last step reports the final value and exits), stopped ones settle."""
    progress: dict[str, int] = {}
    for _ in range(max_passes):
        controller.run_once()
        if launcher.sweeps[sweep_id].state.finished:
            return
        launcher.settle()
        for trial in list(launcher.trials_by_sweep[sweep_id].values()):
            job = launcher.jobs[trial.job_id]
            if job.state == "PENDING" and not job.cancel_requested:
                launcher.start(job.id)
            elif job.state == "RUNNING":
                step = progress.get(job.id, 0)
                value = objective(trial.params, step)  # type: ignore[arg-type]
                if step + 1 < steps:
                    launcher.report(job.id, step, value)
                    progress[job.id] = step + 1
                else:
                    launcher.finish(job.id, value)
                    launcher.exit(job.id, 0)
    raise AssertionError(f"sweep {sweep_id} did not finish in {max_passes} passes")


@pytest.fixture
def launcher() -> MemoryLauncher:
    return MemoryLauncher()


@pytest.fixture
def storage() -> optuna.storages.BaseStorage:
    return optuna.storages.InMemoryStorage()


def study_of(storage: optuna.storages.BaseStorage | str, sweep_id: str) -> optuna.Study:
    return optuna.load_study(study_name=study_name(sweep_id), storage=storage)


def info(launcher: MemoryLauncher, sweep_id: str) -> SweepInfo:
    return next(s for s in launcher.active_sweeps() if s.id == sweep_id)


def test_first_pass_launches_parallelism_trials_with_their_params(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(10).parallel(3).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    result = controller.run_once()[sweep_id]
    assert result.launched == [0, 1, 2]
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    assert [t.state for t in study.trials] == [OptunaState.RUNNING] * 3
    for ft in study.trials:
        trial = launcher.trial(sweep_id, ft.number)
        assert trial.params == ft.params
        job = launcher.jobs[trial.job_id]
        assert job.spec.kind == "trial" and job.spec.env["SHOAL_TRIAL_NUMBER"] == str(ft.number)
        assert job.spec.command[-2:] == ("--x", repr(ft.params["x"]))
        assert ft.user_attrs["job_id"] == job.id
    assert controller.run_once()[sweep_id].launched == []


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_sweep_runs_every_trial_within_parallelism_and_finds_the_best(launcher: MemoryLauncher, storage: object,
                                                                      sampler: str) -> None:
    sweep_id = launcher.create(make_sweep().trials(20).parallel(4).sampler(sampler).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    drive(launcher, controller, sweep_id)
    assert launcher.max_unfinished == 4
    assert len(launcher.jobs) == 20
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    assert len(study.trials) == 20 and all(t.state is OptunaState.COMPLETE for t in study.trials)
    best = best_trial(info_or_closed(launcher, sweep_id), launcher.trials(sweep_id))
    assert best is not None and best.value == pytest.approx(study.best_value)
    assert best.number == study.best_trial.number
    sweep = launcher.sweeps[sweep_id]
    assert sweep.state is SweepState.SUCCEEDED
    assert f"best trial {best.number}: loss = {best.value:g}" in sweep.message


def info_or_closed(launcher: MemoryLauncher, sweep_id: str) -> SweepInfo:
    sweep = launcher.sweeps[sweep_id]
    return SweepInfo(sweep.id, sweep.spec, sweep.state, "alice")


@pytest.mark.parametrize("pruner", [{"name": "median", "n_startup_trials": 3, "n_warmup_steps": 1},
                                    {"name": "hyperband", "min_resource": 1, "max_resource": 6}])
def test_pruned_trials_are_recorded_cancelled_and_told(launcher: MemoryLauncher, storage: object,
                                                       pruner: dict[str, object]) -> None:
    spec = make_sweep().trials(20).parallel(4).pruner(pruner).build()
    sweep_id = launcher.create(spec)
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    drive(launcher, controller, sweep_id, steps=6)
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    pruned = [t for t in launcher.trials(sweep_id) if t.state is TrialState.PRUNED]
    assert pruned, "a median pruner over a quadratic prunes the worst trials"
    optuna_states = {t.number: t.state for t in study.trials}
    for trial in pruned:
        assert optuna_states[trial.number] is OptunaState.PRUNED
        assert trial.job_state == "CANCELLED" and trial.cancel_requested
        assert trial.message.startswith("pruned at step ")
        assert trial.value is None
    assert launcher.max_unfinished <= 4
    assert len(study.trials) == 20 and all(t.state.is_finished() for t in study.trials)
    assert launcher.sweeps[sweep_id].state is SweepState.SUCCEEDED


def test_a_pruned_job_holds_its_slot_until_it_has_exited(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(3).parallel(1).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    controller.run_once()
    job = launcher.job_of(sweep_id, 0)
    launcher.start(job.id)
    launcher.finish_trial(sweep_id, 0, TrialState.PRUNED, message="pruned by hand")
    result = controller.run_once()[sweep_id]
    assert result.cancelled_jobs == [job.id] and result.told == [0]
    assert job.state == "TERMINATING"
    assert controller.run_once()[sweep_id].launched == []          # still stopping: no room
    launcher.settle()
    assert controller.run_once()[sweep_id].launched == [1]


def test_a_preempted_trial_resumes_as_the_same_optuna_trial(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(2).parallel(1)
                               .pruner({"name": "median", "n_startup_trials": 0}).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    controller.run_once()
    job = launcher.job_of(sweep_id, 0)
    launcher.start(job.id)
    launcher.report(job.id, 0, 9.0)
    launcher.report(job.id, 1, 8.0)
    controller.run_once()
    launcher.preempt(job.id)                                   # checkpointed at step 1, requeued
    result = controller.run_once()[sweep_id]
    assert result.launched == [] and result.failed == [] and result.pruned == []
    launcher.start(job.id)                                     # resumes from the checkpoint: repeats step 1
    launcher.report(job.id, 1, 8.5)
    launcher.report(job.id, 2, 7.0)
    controller.run_once()
    launcher.finish(job.id, 6.0)
    launcher.exit(job.id)
    controller.run_once()
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    first = study.trials[0]
    assert first.state is OptunaState.COMPLETE and first.value == 6.0
    assert first.intermediate_values == {0: 9.0, 1: 8.0, 2: 7.0}
    assert [t.job_id for t in launcher.trials(sweep_id)] == [job.id, launcher.job_of(sweep_id, 1).id]
    assert len(launcher.jobs) == 2


@pytest.mark.parametrize(("code", "message", "reason"), [
    (1, "Traceback: ZeroDivisionError", "the job failed: Traceback: ZeroDivisionError"),
    (137, "", "the job failed: exit code 137"),
    (0, "", "the job exited without reporting its final value"),
])
def test_a_failed_trial_is_recorded_with_its_reason(launcher: MemoryLauncher, storage: object, code: int,
                                                    message: str, reason: str) -> None:
    sweep_id = launcher.create(make_sweep().trials(2).parallel(1).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    controller.run_once()
    job = launcher.job_of(sweep_id, 0)
    launcher.start(job.id)
    launcher.report(job.id, 0, 4.0)
    launcher.exit(job.id, code, message)
    result = controller.run_once()[sweep_id]
    assert result.failed == [0] and result.launched == [1]
    trial = launcher.trial(sweep_id, 0)
    assert trial.state is TrialState.FAILED and trial.message.startswith(reason)
    ft = study_of(storage, sweep_id).trials[0]  # type: ignore[arg-type]
    assert ft.state is OptunaState.FAIL and ft.user_attrs[FAIL_REASON_ATTR] == trial.message
    assert ft.intermediate_values == {0: 4.0}


def test_too_many_failures_stop_the_sweep(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(10).parallel(3).max_failed(2).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    controller.run_once()
    jobs = [launcher.job_of(sweep_id, n) for n in range(3)]
    for job in jobs:
        launcher.start(job.id)
    launcher.exit(jobs[0].id, 1, "boom")
    launcher.exit(jobs[1].id, 1, "boom")
    result = controller.run_once()[sweep_id]
    assert result.closed is SweepState.FAILED
    assert result.cancelled_jobs == [jobs[2].id] and jobs[2].state == "TERMINATING"
    assert launcher.sweeps[sweep_id].message == "2 trials failed (max_failed_trials is 2)"
    assert launcher.trial(sweep_id, 2).message == "the sweep was stopped: 2 trials failed (max_failed_trials is 2)"
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    assert [t.state for t in study.trials] == [OptunaState.FAIL] * 3
    assert launcher.active_sweeps() == []


def test_a_refused_trial_job_fails_the_sweep_with_the_reason(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(5).parallel(2).build())
    launcher.refuse = "flavour 'h100-mig-1g' has no nodes on this cluster"
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    result = controller.run_once()[sweep_id]
    assert result.closed is SweepState.FAILED
    sweep = launcher.sweeps[sweep_id]
    assert sweep.message == "the scheduler refused trial 0's job: flavour 'h100-mig-1g' has no nodes on this cluster"
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    assert [t.state for t in study.trials] == [OptunaState.FAIL]
    assert study.trials[0].user_attrs[FAIL_REASON_ATTR] == sweep.message


def test_a_cancelled_sweep_closes_its_study(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(10).parallel(3).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    controller.run_once()
    running = launcher.job_of(sweep_id, 0)
    launcher.start(running.id)
    done = launcher.job_of(sweep_id, 1)
    launcher.start(done.id)
    launcher.finish(done.id, 1.5)
    launcher.exit(done.id)
    launcher.cancel_sweep(sweep_id)
    result = controller.run_once()[sweep_id]
    assert result.closed is SweepState.CANCELLED and result.launched == []
    sweep = launcher.sweeps[sweep_id]
    assert sweep.state is SweepState.CANCELLED
    assert sweep.message.startswith("cancelled; 1 complete, 0 pruned, 2 failed; best trial 1: loss = 1.5")
    study = study_of(storage, sweep_id)  # type: ignore[arg-type]
    assert [t.state for t in study.trials] == [OptunaState.FAIL, OptunaState.COMPLETE, OptunaState.FAIL]
    assert running.state == "TERMINATING"
    assert launcher.active_sweeps() == []


def test_a_trial_asked_but_never_launched_is_launched_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sweeps.db'}"
    launcher = FlakyLauncher(fail_on={1})
    sweep_id = launcher.create(make_sweep().trials(4).parallel(2).build())
    SweepController(launcher, url).run_once()                  # trial 1's launch is lost
    assert sorted(launcher.trials_by_sweep[sweep_id]) == [0]
    asked = study_of(url, sweep_id).trials[1].params
    result = SweepController(launcher, url).run_once()[sweep_id]  # a new controller, as after a crash
    assert result.launched == []
    assert launcher.trial(sweep_id, 1).params == asked
    assert study_of(url, sweep_id).trials[1].user_attrs["job_id"] == launcher.trial(sweep_id, 1).job_id
    assert len(study_of(url, sweep_id).trials) == 2


def test_a_restarted_controller_prunes_and_tells_trials_it_did_not_ask(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sweeps.db'}"
    launcher = MemoryLauncher()
    sweep_id = launcher.create(make_sweep().trials(4).parallel(4)
                               .pruner({"name": "median", "n_startup_trials": 1}).build())
    SweepController(launcher, url).run_once()
    jobs = [launcher.job_of(sweep_id, n) for n in range(4)]
    for job in jobs:
        launcher.start(job.id)
    launcher.report(jobs[0].id, 0, 1.0)
    launcher.finish(jobs[0].id, 1.0)
    launcher.exit(jobs[0].id)
    launcher.report(jobs[1].id, 0, 50.0)                        # far worse than the median
    launcher.report(jobs[2].id, 0, 0.5)
    result = SweepController(launcher, url).run_once()[sweep_id]
    assert result.pruned == [1] and 0 in result.told
    assert jobs[1].state == "TERMINATING" and jobs[2].state == "RUNNING"
    states = [t.state for t in study_of(url, sweep_id).trials]
    assert states == [OptunaState.COMPLETE, OptunaState.PRUNED, OptunaState.RUNNING, OptunaState.RUNNING]


def test_grid_sampler_visits_each_point_once(launcher: MemoryLauncher, storage: object) -> None:
    spec = (make_sweep().trials(6).parallel(3).sampler("grid")
            .space(a={"type": "int", "low": 1, "high": 3}, b={"type": "categorical", "choices": ["p", "q"]})
            .build())
    sweep_id = launcher.create(spec)
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    drive(launcher, controller, sweep_id, objective=lambda p, s: float(p["a"]))
    points = sorted((t.params["a"], t.params["b"]) for t in launcher.trials(sweep_id))
    assert points == [(1, "p"), (1, "q"), (2, "p"), (2, "q"), (3, "p"), (3, "q")]


def test_maximize_picks_the_largest(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(6).parallel(6).maximize().build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    drive(launcher, controller, sweep_id, objective=lambda p, s: p["x"])
    trials = launcher.trials(sweep_id)
    best = best_trial(info_or_closed(launcher, sweep_id), trials)
    assert best is not None and best.value == max(t.value for t in trials if t.value is not None)
    assert study_of(storage, sweep_id).best_value == best.value  # type: ignore[arg-type]


def test_a_sweep_with_no_completed_trial_fails(launcher: MemoryLauncher, storage: object) -> None:
    sweep_id = launcher.create(make_sweep().trials(2).parallel(2).build())
    controller = SweepController(launcher, storage)  # type: ignore[arg-type]
    controller.run_once()
    for n in range(2):
        job = launcher.job_of(sweep_id, n)
        launcher.start(job.id)
        launcher.exit(job.id, 2, "bad flag")
    result = controller.run_once()[sweep_id]
    assert result.closed is SweepState.FAILED
    assert launcher.sweeps[sweep_id].message == "no trial completed; 0 complete, 0 pruned, 2 failed"


class BrokenLauncher(MemoryLauncher):
    """One sweep's trials cannot be read (a transient API error); the others must still progress."""

    def __init__(self, broken: str) -> None:
        super().__init__()
        self.broken = broken

    def trials(self, sweep_id: str) -> list:  # type: ignore[type-arg]
        if sweep_id == self.broken:
            raise ConnectionError("timed out")
        return super().trials(sweep_id)


def test_one_sweeps_error_does_not_stop_the_others(storage: object) -> None:
    launcher = BrokenLauncher(broken="sw-1")
    bad = launcher.create(make_sweep("bad").build())
    good = launcher.create(make_sweep("good").build())
    assert bad == "sw-1"
    results = SweepController(launcher, storage).run_once()  # type: ignore[arg-type]
    assert bad not in results and results[good].launched == [0, 1]


def test_a_closed_sweeps_study_copy_is_dropped(tmp_path: Path) -> None:
    from sweeps.study import make_storage
    from sweeps.storage import WriterStorage

    launcher = MemoryLauncher()
    storage = make_storage(f"sqlite:///{tmp_path / 'sweeps.db'}")
    assert isinstance(storage, WriterStorage)
    controller = SweepController(launcher, storage)
    sweep_id = launcher.create(make_sweep().trials(2).parallel(2).build())
    drive(launcher, controller, sweep_id, steps=2)
    assert storage._numbers                       # the copy of the study that just closed
    controller.run_once()                         # no active sweep any more
    assert storage._numbers == {} and storage._trials == {}
    assert len(study_of(f"sqlite:///{tmp_path / 'sweeps.db'}", sweep_id).trials) == 2
