"""The sweep controller's only window on the scheduler: the ``Launcher`` plug point.

Contract (the controller relies on it; ``ApiLauncher`` meets it over the client SDK, ``tests/sweeps/fakes.py`` in
memory):

* ``launch`` is idempotent per ``(sweep, number)``: launching a trial that exists returns its job and submits
  nothing, so a controller that crashed between asking Optuna and recording the trial can simply launch again.
* ``trials`` returns every trial the scheduler knows of that sweep, each with its job's current state.
* ``finish_trial`` moves an ``ACTIVE`` trial to a finished state; finishing a finished trial is refused
  (``Conflict``) and changes nothing. ``cancel_job`` is harmless on a job already stopping or stopped.
* Errors are ``ShoalError`` subclasses: ``ValidationFailed`` when the scheduler refuses a trial's job (the sweep
  cannot run), anything else is transient and retried on the next pass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler_core.model.sweep import Choice, SweepSpec, SweepState, TrialState


@dataclass(frozen=True, slots=True)
class SweepInfo:
    id: str
    spec: SweepSpec
    state: SweepState
    user: str


@dataclass(frozen=True, slots=True)
class TrialInfo:
    """One trial as the scheduler sees it: the trial's own state and its job's."""

    number: int
    job_id: str
    state: TrialState
    job_state: str                      # a ``JobState`` value
    params: Mapping[str, Choice] = field(default_factory=dict)
    intermediate: Mapping[int, float] = field(default_factory=dict)
    value: float | None = None          # the final objective, once reported
    message: str = ""                   # the trial's (for a finished trial, why it ended that way)
    job_message: str = ""
    exit_code: int | None = None
    preemptions: int = 0
    cancel_requested: bool = False

    @property
    def job_finished(self) -> bool:
        return self.job_state in _JOB_FINISHED


_JOB_FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"})


class Launcher(ABC):
    @abstractmethod
    def active_sweeps(self) -> list[SweepInfo]:
        """Sweeps in state RUNNING or CANCELLING: those the controller still has work for."""

    @abstractmethod
    def trials(self, sweep_id: str) -> list[TrialInfo]: ...

    @abstractmethod
    def launch(self, sweep: SweepInfo, number: int, params: Mapping[str, Choice]) -> TrialInfo:
        """Submit trial ``number``'s job with ``params`` and record the trial ``ACTIVE``."""

    @abstractmethod
    def finish_trial(self, sweep_id: str, number: int, state: TrialState, *, value: float | None = None,
                     message: str = "") -> TrialInfo: ...

    @abstractmethod
    def cancel_job(self, job_id: str) -> None: ...

    @abstractmethod
    def finish_sweep(self, sweep_id: str, state: SweepState, message: str) -> None: ...
