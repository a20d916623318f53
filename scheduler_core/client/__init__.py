"""The client SDK: ``ShoalClient`` / ``AsyncShoalClient`` over the REST API, typed with ``scheduler_core.schemas``.

Used by the CLI, the JupyterHub spawner, the magics and the sweeps. Importing it pulls in none of the server side
(no tornado, no SQLAlchemy, no executor): a test checks that in a fresh interpreter.
"""

from .client import AsyncShoalClient, ShoalClient
from .config import DEFAULT_URL, ClientConfig, Source, config_path, discover, hub_api_url
from .errors import (ApiError, ApiUnavailable, AuthenticationFailed, InvalidRequest, JobNotFound, PermissionDenied,
                     ServerError, StateConflict)

__all__ = [
    "ApiError", "ApiUnavailable", "AsyncShoalClient", "AuthenticationFailed", "ClientConfig", "DEFAULT_URL",
    "InvalidRequest", "JobNotFound", "PermissionDenied", "ServerError", "ShoalClient", "Source", "StateConflict",
    "config_path", "discover", "hub_api_url",
]
