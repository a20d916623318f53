"""The API's errors, raised in the caller as ``ShoalError``s.

Each class is also the matching core error (``NotFound``, ``Conflict``, …), so the spawner or a notebook can write
``except NotFound`` whether it talks to the store or to the API. ``fields`` carries the field-level messages.
"""

from __future__ import annotations

from ..errors import Conflict, Forbidden, NotFound, ShoalError, Unauthorized, ValidationFailed


class ApiError(ShoalError):
    """An error answer from the API: HTTP ``status``, machine-readable ``code``, ``message`` and ``fields``."""

    def __init__(self, status: int, code: str, message: str, fields: dict[str, str] | None = None) -> None:
        Exception.__init__(self, message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = dict(fields or {})


class InvalidRequest(ApiError, ValidationFailed):
    """400 or 422: the request or the spec is wrong; ``fields`` says where."""


class AuthenticationFailed(ApiError, Unauthorized):
    """401: no token, or one the server does not know."""


class PermissionDenied(ApiError, Forbidden):
    """403: the token's user may not act on that team or job."""


class JobNotFound(ApiError, NotFound):
    """404."""


class StateConflict(ApiError, Conflict):
    """409: an Idempotency-Key reused with another body, or a change the job's state does not allow."""


class ServerError(ApiError):
    """5xx: the server failed; the message says what it could."""


class ApiUnavailable(ShoalError):
    """The API could not be reached at all."""

    code = "unavailable"


def for_status(status: int) -> type[ApiError]:
    if status in (400, 422):
        return InvalidRequest
    return {401: AuthenticationFailed, 403: PermissionDenied, 404: JobNotFound, 409: StateConflict}.get(
        status, ServerError if status >= 500 else ApiError)
