"""The transitions of sweeps and trials, checked the same way by every store before it writes anything."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import Conflict, ValidationFailed
from ..model.sweep import Choice, SweepState, TrialState
from .records import SweepRecord, TrialRecord

#: What ``finish_sweep`` may do: from RUNNING to an outcome, from CANCELLING to CANCELLED.
_FINISH_FROM = {
    SweepState.SUCCEEDED: SweepState.RUNNING,
    SweepState.FAILED: SweepState.RUNNING,
    SweepState.CANCELLED: SweepState.CANCELLING,
}


def check_sweep_finish(sweep: SweepRecord, state: SweepState) -> None:
    origin = _FINISH_FROM.get(state)
    if origin is None:
        raise ValidationFailed(f"a sweep is finished as SUCCEEDED, FAILED or CANCELLED, not {state}",
                               {"state": "SUCCEEDED, FAILED or CANCELLED"})
    if sweep.state is not origin:
        raise Conflict(f"sweep {sweep.id} is {sweep.state}: only a {origin} sweep can become {state}")


def check_new_trial(sweep: SweepRecord, number: int) -> None:
    if sweep.state is not SweepState.RUNNING:
        raise Conflict(f"sweep {sweep.id} is {sweep.state}: it takes no new trials")
    if not 0 <= number < sweep.spec.n_trials:
        raise Conflict(f"sweep {sweep.id} has {sweep.spec.n_trials} trials; there is no trial {number}")


def check_same_params(sweep_id: str, trial: TrialRecord, params: Mapping[str, Choice]) -> None:
    if dict(params) != trial.params:
        raise Conflict(f"trial {trial.number} of sweep {sweep_id} was recorded with other parameters")


def check_trial_finish(trial: TrialRecord, state: TrialState, value: float | None) -> None:
    if not state.finished:
        raise ValidationFailed(f"a trial is finished as COMPLETE, PRUNED or FAILED, not {state}",
                               {"state": "COMPLETE, PRUNED or FAILED"})
    if trial.state is not TrialState.ACTIVE:
        raise Conflict(f"trial {trial.number} of sweep {trial.sweep_id} already ended as {trial.state}")
    if state is TrialState.COMPLETE and (value is None or not math.isfinite(value)):
        raise ValidationFailed(f"a COMPLETE trial needs a finite value, got {value}",
                               {"value": "a finite number is required"})
