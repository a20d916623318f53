"""The part of the Shoal client SDK the magics use, and what a notebook is told when it cannot reach the API.

The server and token are found by ``scheduler_core.client.discover``, the one discovery the CLI, the SDK and the
sweeps use too: ``SHOAL_URL``/``SHOAL_TOKEN``, then (in a server spawned by JupyterHub) the hub's
``JUPYTERHUB_API_TOKEN`` and the hub's ``services/shoal``, then ``~/.config/shoal/config``. Each failure is a
``UsageError`` that says what to set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from IPython.core.error import UsageError

from scheduler_core.client import ApiUnavailable, AuthenticationFailed, ClientConfig, ShoalClient, config_path
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


def resolve(path: Path | None = None) -> ClientConfig:
    """The server and token this notebook acts with (the order is in ``scheduler_core.client.config``)."""
    where = path or config_path()
    try:
        config = ClientConfig.resolve(path=where)
    except Exception as exc:  # a malformed config file (ConfigError names file and field): say so, don't crash
        raise UsageError(f"cannot read the Shoal client config: {exc}") from None
    if not config.token:
        raise UsageError(
            f"no Shoal token: set SHOAL_TOKEN (and SHOAL_URL), or write url and token to {where} "
            f"(TOML: url = \"...\", token = \"...\"); an admin creates tokens with 'shoal token create'. "
            f"In a server spawned by JupyterHub the hub's token is used without any of this.")
    return config


def connect(path: Path | None = None) -> JobsClient:
    """A client for this notebook's server and identity, checked with one call so a wrong URL or token is a
    ``UsageError`` now rather than a traceback later."""
    config = resolve(path)
    client = ShoalClient(config.url, config.token)
    try:
        client.whoami()
    except ApiUnavailable:
        client.close()
        raise UsageError(f"no Shoal server answers at {config.describe()}: start one with 'shoal up', or set "
                         f"SHOAL_URL to the right address") from None
    except AuthenticationFailed as exc:
        client.close()
        raise UsageError(f"the Shoal server at {config.url} refused the token from {config.token_source.value} "
                         f"({exc.message}); check SHOAL_TOKEN or {path or config_path()}") from None
    return client
