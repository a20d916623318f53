"""``JobTokens``: an API token injected into a job's pods at launch, never stored in its spec.

Why: a trial job reports its values through the API, so it needs a token; carried in the spec's ``env`` it would sit
in plaintext in the database and be returned by ``GET /v1/jobs/{id}``. Instead the controller mints a token of the
job's own user and team (never an admin) for each launch, adds it to the launch's environment only, and revokes it
when the job's units are released (it ended, was requeued, or its launch failed). The token store keeps only its
hash. Tokens are noted ``job <id>``, so a controller that restarted (and no longer holds the plaintext) still
revokes the token of a job it adopted when that job ends.

Which jobs get one: sweep trials (``kind: trial``), the jobs that report through the API. The token grants
nothing beyond what the job's user already has.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model.job import JobKind, JobSpec
from .tokens import Identity, TokenStore

ENV_API_TOKEN = "SHOAL_API_TOKEN"


def job_note(job_id: str) -> str:
    return f"job {job_id}"


class JobTokens:
    def __init__(self, tokens: TokenStore, clock: Callable[[], float]) -> None:
        self._tokens = tokens
        self._clock = clock

    @staticmethod
    def wants(spec: JobSpec) -> bool:
        return spec.kind is JobKind.TRIAL

    def env_for(self, job_id: str, user: str, spec: JobSpec) -> dict[str, str]:
        """The variables to add to this launch's environment (none for a job that asked for no token). A relaunch
        revokes the previous launch's token first, so at most one is live per job."""
        if not self.wants(spec):
            return {}
        self._tokens.revoke_noted(job_note(job_id))
        token = self._tokens.create_token(Identity(user, spec.team), now=self._clock(), note=job_note(job_id))
        return {ENV_API_TOKEN: token}

    def released(self, job_id: str, spec: JobSpec) -> None:
        """The job's units are free: its pods are gone, so is their token."""
        if self.wants(spec):
            self._tokens.revoke_noted(job_note(job_id))
