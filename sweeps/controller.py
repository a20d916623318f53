"""The sweep controller: one reconciliation pass at a time, between the scheduler's record of a sweep's trials
and its Optuna study (ask/tell).

Each pass, per active sweep, in order:

1. Optuna trials asked but never recorded by the scheduler (a crash between ask and launch) are launched again
   (``Launcher.launch`` is idempotent per trial number).
2. Active trials: new intermediate values go to Optuna; a trial whose job ended without completing is recorded
   FAILED with the reason. A trial whose job was preempted and requeued is left alone: the job resumes from its
   checkpoint as the same Optuna trial, and its repeated steps are dropped (Optuna keeps a step's first value).
3. Optuna is brought up to the scheduler's record: every trial the scheduler holds finished is told to the study
   with the same outcome, and jobs of pruned or failed trials still running are stopped.
4. The pruner is asked about each trial that reported something new; a pruned trial is recorded PRUNED, its job
   cancelled at once, and Optuna told, in the same pass.
5. The failure budget (``max_failed_trials``) is checked.
6. New trials are asked and launched while fewer than ``parallelism`` trial jobs are unfinished (a pruned trial's
   job counts until it has exited, so parallelism is never exceeded, not even for a moment).
7. A sweep whose every trial has finished is closed.

The scheduler's record is written first and Optuna told second, so a crash between the two is repaired by step 3
of the next pass. The controller keeps nothing that matters in memory: a restarted one picks up where the last
stopped. It talks to the scheduler only through a ``Launcher``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import optuna
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from scheduler_core.errors import Conflict, ValidationFailed
from scheduler_core.model.sweep import SweepState, TrialState

from .launcher import Launcher, SweepInfo, TrialInfo
from .storage import WriterStorage
from .study import distributions, open_study

log = logging.getLogger(__name__)

FAIL_REASON_ATTR = "fail_reason"
_FINISHED_TO_OPTUNA = {TrialState.COMPLETE: OptunaState.COMPLETE, TrialState.PRUNED: OptunaState.PRUNED,
                       TrialState.FAILED: OptunaState.FAIL}


@dataclass
class StepResult:
    """What one pass did to one sweep: for logs, and for tests to compare against."""

    launched: list[int] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    told: list[int] = field(default_factory=list)
    cancelled_jobs: list[str] = field(default_factory=list)
    closed: SweepState | None = None


def job_failure_reason(trial: TrialInfo) -> str:
    """Why a trial whose job ended without a final value failed, in words a user can act on."""
    detail = trial.job_message or (f"exit code {trial.exit_code}" if trial.exit_code is not None else "")
    suffix = f": {detail}" if detail else ""
    if trial.job_state == "SUCCEEDED":
        return "the job exited without reporting its final value (call sweeps.trial.finish(value))"
    if trial.job_state == "TIMED_OUT":
        return f"the job reached its time limit{suffix}"
    if trial.job_state == "CANCELLED":
        return f"the job was cancelled{suffix}"
    return f"the job failed{suffix}"


class SweepController:
    """Drives every active sweep's Optuna study; ``run_once`` is one pass, ``step`` one sweep's share of it."""

    def __init__(self, launcher: Launcher, storage: str | optuna.storages.BaseStorage, *,
                 max_launch_per_pass: int = 64) -> None:
        self.launcher = launcher
        self.storage = storage
        self.max_launch_per_pass = max_launch_per_pass
        self._studies: dict[str, optuna.Study] = {}
        self._live: dict[tuple[str, int], optuna.Trial] = {}

    # -- the loop ------------------------------------------------------------------------------------------------
    def run_once(self) -> dict[str, StepResult]:
        """One pass over every active sweep. An error in one sweep is logged and the others still get their turn."""
        results: dict[str, StepResult] = {}
        sweeps = self.launcher.active_sweeps()
        for sweep in sweeps:
            try:
                results[sweep.id] = self.step(sweep)
            except Exception:  # noqa: BLE001 - one bad sweep must not stop the others; retried next pass
                log.exception("sweep %s: pass failed; retrying on the next one", sweep.id)
        active = {s.id for s in sweeps}
        for sweep_id in [s for s in self._studies if s not in active]:
            self._forget(sweep_id)
        return results

    def step(self, sweep: SweepInfo) -> StepResult:
        result = StepResult()
        study = self._study(sweep)
        trials = {t.number: t for t in self.launcher.trials(sweep.id)}
        frozen = {t.number: t for t in study.get_trials(deepcopy=False)}
        running = sweep.state is SweepState.RUNNING

        # 1. Asked but never recorded: launch again (idempotent), or close if the sweep is being cancelled.
        for number, ft in sorted(frozen.items()):
            if ft.state is OptunaState.RUNNING and number not in trials:
                if not running:
                    self._tell(study, sweep.id, ft, TrialState.FAILED, None, "the sweep was cancelled")
                    result.told.append(number)
                    continue
                try:
                    trials[number] = self.launcher.launch(sweep, number, ft.params)
                except ValidationFailed as exc:
                    self._refused(study, sweep, ft, exc, trials, result)
                    return result
                self._live_trial(study, sweep.id, ft).set_user_attr("job_id", trials[number].job_id)

        # 2. Active trials: reports to Optuna, ended jobs recorded.
        fresh: list[int] = []
        for number, trial in sorted(trials.items()):
            if trial.state is not TrialState.ACTIVE:
                continue
            if number not in frozen:
                log.warning("sweep %s: trial %d is not in study %s; leaving it", sweep.id, number, study.study_name)
                continue
            if self._forward_reports(study, sweep.id, frozen[number], trial):
                fresh.append(number)
            if trial.job_finished and self._record(sweep.id, number, TrialState.FAILED, None,
                                                   job_failure_reason(trial), trials):
                result.failed.append(number)

        # 3. Optuna catches up with the scheduler's record (so the pruner compares against every finished trial).
        self._sync(study, sweep, trials, result)

        # 4. The pruner, for each trial that reported something new; a pruned trial's job is cancelled at once.
        if running:
            for number in fresh:
                trial = trials[number]
                if trial.state is not TrialState.ACTIVE or trial.job_finished:
                    continue
                live = self._live_trial(study, sweep.id, frozen[number])
                if not live.should_prune():
                    continue
                last = max(trial.intermediate)
                reason = f"pruned at step {last} ({sweep.spec.objective.metric} = {trial.intermediate[last]:g})"
                if self._record(sweep.id, number, TrialState.PRUNED, None, reason, trials):
                    result.pruned.append(number)
                    self._stop_job(trials, number, result)      # at once, before Optuna is told
            if result.pruned:
                self._sync(study, sweep, trials, result)

        if not running:
            self.launcher.finish_sweep(sweep.id, SweepState.CANCELLED, "cancelled; " + self._summary(sweep, trials))
            result.closed = SweepState.CANCELLED
            return result

        # 5. The failure budget.
        failed = sum(1 for t in trials.values() if t.state is TrialState.FAILED)
        budget = sweep.spec.max_failed_trials
        if budget is not None and failed >= budget:
            self._stop(study, sweep, trials, f"{failed} trials failed (max_failed_trials is {budget})", result)
            return result

        # 6. Ask and launch within parallelism.
        unfinished_jobs = sum(1 for t in trials.values() if not t.job_finished)
        asked = len(study.get_trials(deepcopy=False))
        room = min(sweep.spec.parallelism - unfinished_jobs, sweep.spec.n_trials - asked, self.max_launch_per_pass)
        dists = distributions(sweep.spec)
        for _ in range(max(room, 0)):
            live = study.ask(dists)
            self._live[(sweep.id, live.number)] = live
            try:
                info = self.launcher.launch(sweep, live.number, live.params)
            except ValidationFailed as exc:
                asked_trial = {t.number: t for t in study.get_trials(deepcopy=False)}[live.number]
                self._refused(study, sweep, asked_trial, exc, trials, result)
                return result
            live.set_user_attr("job_id", info.job_id)
            trials[live.number] = info
            result.launched.append(live.number)

        # 7. Close a sweep whose every trial and job has finished.
        frozen_all = study.get_trials(deepcopy=False)
        if (len(frozen_all) >= sweep.spec.n_trials and all(t.state.is_finished() for t in frozen_all)
                and all(t.job_finished for t in trials.values())):
            complete = [t for t in trials.values() if t.state is TrialState.COMPLETE]
            state = SweepState.SUCCEEDED if complete else SweepState.FAILED
            message = self._summary(sweep, trials) if complete else "no trial completed; " + self._summary(
                sweep, trials)
            self.launcher.finish_sweep(sweep.id, state, message)
            result.closed = state
        return result

    # -- helpers -------------------------------------------------------------------------------------------------
    def _study(self, sweep: SweepInfo) -> optuna.Study:
        study = self._studies.get(sweep.id)
        if study is None:
            study = open_study(self.storage, sweep.id, sweep.spec)
            self._studies[sweep.id] = study
        return study

    def _forget(self, sweep_id: str) -> None:
        """A sweep no longer active: drop its study and, from a ``WriterStorage``, the study's copy."""
        study = self._studies.pop(sweep_id, None)
        if study is not None and isinstance(self.storage, WriterStorage):
            self.storage.forget_study(study._study_id)
        for key in [k for k in self._live if k[0] == sweep_id]:
            del self._live[key]

    def _live_trial(self, study: optuna.Study, sweep_id: str, frozen: FrozenTrial) -> optuna.Trial:
        """The ``optuna.Trial`` for a running trial: the one ``ask`` gave, or rebuilt after a restart."""
        live = self._live.get((sweep_id, frozen.number))
        if live is None:
            live = optuna.Trial(study, frozen._trial_id)
            self._live[(sweep_id, frozen.number)] = live
        return live

    def _forward_reports(self, study: optuna.Study, sweep_id: str, frozen: FrozenTrial, trial: TrialInfo) -> bool:
        """Send Optuna the intermediate values it has not seen (a resumed trial's repeats are dropped, as Optuna
        keeps the first value of a step); whether there were any."""
        if frozen.state is not OptunaState.RUNNING:
            return False
        new = {s: v for s, v in trial.intermediate.items() if s not in frozen.intermediate_values}
        if new:
            live = self._live_trial(study, sweep_id, frozen)
            for step_no in sorted(new):
                live.report(new[step_no], step_no)
        return bool(new)

    def _sync(self, study: optuna.Study, sweep: SweepInfo, trials: dict[int, TrialInfo],
              result: StepResult) -> None:
        """Tell Optuna every outcome the scheduler has recorded and it has not heard; stop the jobs of pruned and
        failed trials that still run (a completed trial's job is left to exit on its own)."""
        frozen = {t.number: t for t in study.get_trials(deepcopy=False)}
        for number, trial in sorted(trials.items()):
            if not trial.state.finished:
                continue
            ft = frozen.get(number)
            if ft is not None and ft.state is OptunaState.RUNNING:
                self._forward_reports(study, sweep.id, ft, trial)
                self._tell(study, sweep.id, ft, trial.state, trial.value, trial.message)
                result.told.append(number)
            if trial.state is not TrialState.COMPLETE:
                self._stop_job(trials, number, result)

    def _stop_job(self, trials: dict[int, TrialInfo], number: int, result: StepResult) -> None:
        """Cancel a pruned or failed trial's job unless it has ended or is being stopped already."""
        trial = trials[number]
        if not trial.job_finished and not trial.cancel_requested:
            self.launcher.cancel_job(trial.job_id)
            result.cancelled_jobs.append(trial.job_id)
            trials[number] = replace(trial, cancel_requested=True)

    def _record(self, sweep_id: str, number: int, state: TrialState, value: float | None, message: str,
                trials: dict[int, TrialInfo]) -> bool:
        """Write a trial's outcome to the scheduler; ``False`` if it had meanwhile finished another way (the
        scheduler's record wins, and step 3 tells Optuna what it says)."""
        try:
            trials[number] = self.launcher.finish_trial(sweep_id, number, state, value=value, message=message)
        except Conflict:
            log.info("sweep %s trial %d: finished meanwhile; keeping the scheduler's record", sweep_id, number)
            return False
        return True

    def _tell(self, study: optuna.Study, sweep_id: str, frozen: FrozenTrial, state: TrialState,
              value: float | None, message: str) -> None:
        live = self._live_trial(study, sweep_id, frozen)
        if message:
            live.set_user_attr(FAIL_REASON_ATTR if state is TrialState.FAILED else "message", message)
        if state is TrialState.COMPLETE:
            study.tell(frozen.number, value, skip_if_finished=True)
        else:
            study.tell(frozen.number, state=_FINISHED_TO_OPTUNA[state], skip_if_finished=True)
        self._live.pop((sweep_id, frozen.number), None)

    def _stop(self, study: optuna.Study, sweep: SweepInfo, trials: dict[int, TrialInfo], why: str,
              result: StepResult) -> None:
        """Fail every active trial, stop its job, tell Optuna, and close the sweep FAILED."""
        for number in sorted(trials):
            if trials[number].state is TrialState.ACTIVE:
                self._record(sweep.id, number, TrialState.FAILED, None, f"the sweep was stopped: {why}", trials)
        for trial in trials.values():
            if not trial.job_finished and trial.state is not TrialState.COMPLETE and not trial.cancel_requested:
                self.launcher.cancel_job(trial.job_id)
                result.cancelled_jobs.append(trial.job_id)
        for ft in study.get_trials(deepcopy=False):
            if ft.state is not OptunaState.RUNNING:
                continue
            known = trials.get(ft.number)
            if known is not None and known.state.finished:
                self._tell(study, sweep.id, ft, known.state, known.value, known.message)
            else:
                self._tell(study, sweep.id, ft, TrialState.FAILED, None, f"the sweep was stopped: {why}")
            result.told.append(ft.number)
        self.launcher.finish_sweep(sweep.id, SweepState.FAILED, why)
        result.closed = SweepState.FAILED

    def _refused(self, study: optuna.Study, sweep: SweepInfo, frozen: FrozenTrial, exc: ValidationFailed,
                 trials: dict[int, TrialInfo], result: StepResult) -> None:
        """The scheduler refuses a trial's job: no trial of this sweep can run, so the sweep fails with why."""
        why = f"the scheduler refused trial {frozen.number}'s job: {exc}"
        self._tell(study, sweep.id, frozen, TrialState.FAILED, None, why)
        result.told.append(frozen.number)
        self._stop(study, sweep, trials, why, result)

    @staticmethod
    def _summary(sweep: SweepInfo, trials: Mapping[int, TrialInfo]) -> str:
        counts = {s: sum(1 for t in trials.values() if t.state is s) for s in TrialState}
        text = (f"{counts[TrialState.COMPLETE]} complete, {counts[TrialState.PRUNED]} pruned, "
                f"{counts[TrialState.FAILED]} failed")
        best = best_trial(sweep, trials.values())
        if best is not None:
            text += f"; best trial {best.number}: {sweep.spec.objective.metric} = {best.value:g}"
        return text


def best_trial(sweep: SweepInfo, trials: Iterable[TrialInfo]) -> TrialInfo | None:
    """The completed trial with the best value (the earliest on a tie), or ``None``."""
    best: TrialInfo | None = None
    best_value = 0.0
    for trial in sorted(trials, key=lambda t: t.number):
        if trial.state is not TrialState.COMPLETE or trial.value is None:
            continue
        if best is None or sweep.spec.objective.better(trial.value, best_value):
            best, best_value = trial, trial.value
    return best
