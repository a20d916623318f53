"""Errors on the wire: every failure is ``{"error": {"code", "message", "fields"}}`` with the status HTTP means.

400 the request itself is malformed (not JSON, a bad query parameter or header); 401 no valid token; 403 a valid
token that may not do this; 404 no such thing; 409 a conflict with the current state (a repeated
``Idempotency-Key`` with another body, cancelling a finished job); 422 a well-formed body that is invalid;
503 this server is not the scheduler's leader any more, or the store cannot take writes now (with ``Retry-After``;
nothing was stored). Anything unexpected is 500 with no internals shown.
"""

from __future__ import annotations

from ..errors import (ConfigError, Conflict, Forbidden, NotFound, ShoalError, StaleLeader, StoreUnavailable,
                      Unauthorized, ValidationFailed)
from ..schemas import ErrorDetail, ErrorResponse


class BadRequest(ShoalError):
    """The request cannot be read at all (HTTP 400): a body that is not JSON, a query parameter of the wrong form."""

    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.fields = dict(fields or {})


_STATUS: tuple[tuple[type[ShoalError], int], ...] = (
    (BadRequest, 400),
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (ValidationFailed, 422),
    (StaleLeader, 503),
    (StoreUnavailable, 503),
    (ConfigError, 500),
)


#: What a 503 for a store outage tells the client to wait before trying again.
RETRY_AFTER_S = 5


def status_of(error: ShoalError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400


def error_body(error: ShoalError) -> ErrorResponse:
    fields = getattr(error, "fields", None) or {}
    message = getattr(error, "message", None) or str(error) or error.code
    return ErrorResponse(error=ErrorDetail(code=error.code, message=message, fields=dict(fields)))


def plain_error(code: str, message: str, fields: dict[str, str] | None = None) -> ErrorResponse:
    return ErrorResponse(error=ErrorDetail(code=code, message=message, fields=dict(fields or {})))
