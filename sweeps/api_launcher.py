"""``ApiLauncher``: the sweep controller's ``Launcher`` over the client SDK, the only way it reaches the scheduler.

Trial jobs authenticate with a token of their sweep's team (never the controller's admin token): ``TrialTokens``
mints one per sweep, the first time a trial of that sweep is launched by this process, and revokes it when the
controller closes the sweep. The token travels in the job's env (``SHOAL_API_TOKEN``, beside ``SHOAL_API_URL``), so
the sweep's team can read it in its own job specs — it grants nothing that team does not already have. A controller
that restarts mid-sweep mints a fresh token for the trials it launches next; tokens minted before the restart are
not revoked by it (they are the team's, and an operator can revoke them with the store's token commands).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from scheduler_core.auth.tokens import Identity, TokenStore
from scheduler_core.client import ShoalClient, StateConflict
from scheduler_core.model.sweep import ENV_API_TOKEN, ENV_API_URL, Choice, SweepState, TrialState
from scheduler_core.schemas import TrialView

from .launcher import Launcher, SweepInfo, TrialInfo


class TrialTokens:
    """One API token per sweep, for its trial jobs: the sweep owner's user and team, not an admin."""

    def __init__(self, tokens: TokenStore, clock: Callable[[], float]) -> None:
        self._tokens = tokens
        self._clock = clock
        self._by_sweep: dict[str, str] = {}
        self._lock = threading.Lock()

    def for_sweep(self, sweep: SweepInfo) -> str:
        with self._lock:
            token = self._by_sweep.get(sweep.id)
            if token is None:
                token = self._tokens.create_token(Identity(sweep.user, sweep.spec.team), now=self._clock(),
                                                  note=f"trials of sweep {sweep.id}")
                self._by_sweep[sweep.id] = token
            return token

    def revoke(self, sweep_id: str) -> None:
        with self._lock:
            token = self._by_sweep.pop(sweep_id, None)
        if token is not None:
            self._tokens.revoke_token(token)

    def revoke_all(self) -> None:
        for sweep_id in list(self._by_sweep):
            self.revoke(sweep_id)


def trial_info(view: TrialView) -> TrialInfo:
    return TrialInfo(number=view.number, job_id=view.job_id, state=TrialState(view.state), job_state=view.job_state,
                     params=dict(view.params), intermediate=dict(view.intermediate), value=view.value,
                     message=view.message, job_message=view.job_message, exit_code=view.exit_code,
                     preemptions=view.preemptions, cancel_requested=view.cancel_requested)


class ApiLauncher(Launcher):
    """``client`` holds an admin token (the controller adds trials and closes sweeps of every team)."""

    def __init__(self, client: ShoalClient, *, job_api_url: str, tokens: TrialTokens) -> None:
        self.client = client
        self.job_api_url = job_api_url
        self.tokens = tokens

    def active_sweeps(self) -> list[SweepInfo]:
        # The most GET /v1/sweeps answers in one call (it refuses more with a 400): far beyond the sweeps
        # running at once on any cluster.
        listed = self.client.sweeps(states=[SweepState.RUNNING.value, SweepState.CANCELLING.value],
                                    limit=10_000)
        return [SweepInfo(v.sweep_id, v.spec, SweepState(v.state), v.user) for v in listed.sweeps]

    def trials(self, sweep_id: str) -> list[TrialInfo]:
        return [trial_info(v) for v in self.client.trials(sweep_id).trials]

    def launch(self, sweep: SweepInfo, number: int, params: Mapping[str, Choice]) -> TrialInfo:
        env = {ENV_API_URL: self.job_api_url, ENV_API_TOKEN: self.tokens.for_sweep(sweep)}
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
        self.tokens.revoke(sweep_id)
