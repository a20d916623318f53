"""One error root for the whole core, so callers can catch ``ShoalError`` and nothing else.

Messages name the offending values: an error a user sees must say what to change.
"""

from __future__ import annotations


class ShoalError(Exception):
    """Root of every error Shoal raises on purpose."""

    code = "shoal_error"


class ConfigError(ShoalError):
    """A cluster or team file is wrong. ``str()`` names the file, line and field."""

    code = "invalid_config"

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = ""
        if path is not None:
            where = path if line is None else f"{path}:{line}"
        prefix = f"{where}: " if where else ""
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + message)
        self.message = message


class ValidationFailed(ShoalError):
    """A request is invalid; ``fields`` maps a dotted field path to what is wrong with it."""

    code = "invalid_request"

    def __init__(self, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = dict(fields or {})


class NotFound(ShoalError):
    code = "not_found"


class Conflict(ShoalError):
    code = "conflict"


class Forbidden(ShoalError):
    code = "forbidden"


class Unauthorized(ShoalError):
    code = "unauthorized"


class StaleLeader(ShoalError):
    """A write carried a fencing token older than the store's current lease epoch."""

    code = "stale_leader"


class StoreUnavailable(ShoalError):
    """The store cannot take writes (or answer at all) right now: its disk is full, its file is not writable, the
    database server is down. Nothing was changed; the same request may be sent again later (HTTP 503)."""

    code = "store_unavailable"


class SpecNotLaunchable(ShoalError):
    """The executor cannot start this job's pods because of the spec itself (an argv the OS refuses, a NUL byte):
    every retry would fail the same way, so the job fails now, on its own budget, not the infrastructure's."""

    code = "not_launchable"
