"""The part of the Shoal client SDK the magics use, and how a notebook finds its server and token.

Identity, in order:

1. ``SHOAL_TOKEN`` in the environment (an explicit choice always wins);
2. inside a notebook spawned by JupyterHub, the hub's own ``JUPYTERHUB_API_TOKEN`` (the scheduler, running as a
   hub service, accepts hub tokens), with ``SHOAL_URL`` set by the Shoal spawner;
3. ``~/.config/shoal/config`` (what ``shoal`` on the command line uses too).

Each failure is a ``UsageError`` that says what to set.
"""

from __future__ import annotations

from typing import Protocol

from scheduler_core.model import JobSpec
from scheduler_core.schemas import JobView, LogChunk, QueueView, SubmitResponse, WhoAmI


class JobsClient(Protocol):
    """What ``%%gpujob`` needs from ``scheduler_core.client.ShoalClient``."""

    def whoami(self) -> WhoAmI: ...

    def submit(self, spec: JobSpec, *, idempotency_key: str | None = None) -> SubmitResponse: ...

    def job(self, job_id: str) -> JobView: ...

    def cancel(self, job_id: str) -> JobView: ...

    def queue(self, team: str) -> QueueView: ...

    def logs(self, job_id: str, *, rank: int = 0, offset: int = 0) -> LogChunk: ...


def connect() -> JobsClient:
    """A client for this notebook's Shoal server and identity; ``UsageError`` says what is missing."""
    from IPython.core.error import UsageError

    from scheduler_core.client import ShoalClient  # the SDK; imported here so the runner never needs it

    try:
        return ShoalClient.from_env()  # type: ignore[no-any-return]
    except Exception as exc:
        raise UsageError(str(exc)) from None
