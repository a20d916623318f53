"""``ApiLauncher``: the sweep controller's ``Launcher`` over the client SDK, the only way it reaches the scheduler.

A trial's spec carries only where to report (``SHOAL_API_URL``), never a token: the scheduler's controller mints a
token of the trial's user and team at each launch, puts it in the pods' environment only (``SHOAL_API_TOKEN``) and
revokes it when the job's units are released (``scheduler_core.auth.job_tokens``). So no token sits in the database
in plaintext or comes back from ``GET /v1/jobs/{id}``.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler_core.client import ShoalClient, StateConflict
from scheduler_core.model.sweep import ENV_API_URL, Choice, SweepState, TrialState
from scheduler_core.schemas import TrialView

from .launcher import Launcher, SweepInfo, TrialInfo


def trial_info(view: TrialView) -> TrialInfo:
    return TrialInfo(number=view.number, job_id=view.job_id, state=TrialState(view.state), job_state=view.job_state,
                     params=dict(view.params), intermediate=dict(view.intermediate), value=view.value,
                     message=view.message, job_message=view.job_message, exit_code=view.exit_code,
                     preemptions=view.preemptions, cancel_requested=view.cancel_requested)


class ApiLauncher(Launcher):
    """``client`` holds an admin token (the controller adds trials and closes sweeps of every team)."""

    def __init__(self, client: ShoalClient, *, job_api_url: str) -> None:
        self.client = client
        self.job_api_url = job_api_url

    def active_sweeps(self) -> list[SweepInfo]:
        # The most GET /v1/sweeps answers in one call (it refuses more with a 400): far beyond the sweeps
        # running at once on any cluster.
        listed = self.client.sweeps(states=[SweepState.RUNNING.value, SweepState.CANCELLING.value],
                                    limit=10_000)
        return [SweepInfo(v.sweep_id, v.spec, SweepState(v.state), v.user) for v in listed.sweeps]

    def trials(self, sweep_id: str) -> list[TrialInfo]:
        return [trial_info(v) for v in self.client.trials(sweep_id).trials]

    def launch(self, sweep: SweepInfo, number: int, params: Mapping[str, Choice]) -> TrialInfo:
        env = {ENV_API_URL: self.job_api_url}
        return trial_info(self.client.add_trial(sweep.id, number, params, env=env))

    def finish_trial(self, sweep_id: str, number: int, state: TrialState, *, value: float | None = None,
                     message: str = "") -> TrialInfo:
        return trial_info(self.client.finish_trial(sweep_id, number, state.value, value=value, message=message))

    def cancel_job(self, job_id: str) -> None:
        try:
            self.client.cancel(job_id)
        except StateConflict:
            pass                # it ended meanwhile: nothing left to stop

    def finish_sweep(self, sweep_id: str, state: SweepState, message: str) -> None:
        self.client.finish_sweep(sweep_id, state.value, message)
