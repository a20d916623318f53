"""Decoding a request body: JSON that every later step (pydantic, the store, a process) can take, or a 4xx.

Checked here, once for every endpoint, before any model sees the data:

* nesting at most ``MAX_DEPTH`` levels (Python's decoder would otherwise raise ``RecursionError`` on a deep array);
* only finite numbers: no ``NaN`` or ``Infinity`` (not JSON, but Python's decoder takes them) and no number too
  large for a double (``1e400``, which decodes to infinity);
* no NUL in any string or key: no process argument, environment variable or PostgreSQL text can hold one.

Each is refused with the dotted path of the offending value, so the caller knows what to change.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import ValidationFailed
from .errors import BadRequest

#: The deepest JSON any request needs is a sweep's search space (4 levels); 32 leaves room and bounds the work.
MAX_DEPTH = 32


class InvalidBody(ValidationFailed):
    """Well-formed JSON holding a value nothing downstream can take (HTTP 422)."""

    code = "invalid_request"


def decode(raw: bytes) -> Any:
    """The decoded body; ``BadRequest`` (400) when it is not JSON or nested too deep, ``InvalidBody`` (422) when a
    value is one no field can hold."""
    if not raw.strip():
        raise BadRequest("the request body is empty; send a JSON object", code="invalid_json")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    _check(value)
    return value


def _too_deep() -> BadRequest:
    return BadRequest(f"the request body is nested more than {MAX_DEPTH} levels deep", code="invalid_json",
                      fields={"body": f"at most {MAX_DEPTH} levels of arrays and objects"})


def _check(root: Any) -> None:
    """Walk the decoded value without recursion: depth, non-finite numbers, NUL bytes."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(root, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            if len(path) >= MAX_DEPTH:
                raise _too_deep()
            for key, item in value.items():
                if "\x00" in key:
                    _refuse(path + (key.replace("\x00", "\\u0000"),), "a key contains a NUL byte (\\u0000)")
                stack.append((item, path + (key,)))
        elif isinstance(value, list):
            if len(path) >= MAX_DEPTH:
                raise _too_deep()
            stack.extend((item, path + (str(index),)) for index, item in enumerate(value))
        elif isinstance(value, str):
            if "\x00" in value:
                _refuse(path, "contains a NUL byte (\\u0000), which no process argument, environment variable or "
                              "stored text can hold")
        elif isinstance(value, float) and not math.isfinite(value):
            _refuse(path, "must be a finite number: NaN, Infinity and numbers beyond ±1.7976931348623157e308 are not")


def _refuse(path: tuple[str, ...], message: str) -> None:
    field = ".".join(path) or "body"
    raise InvalidBody(f"invalid request: {field}: {message}", {field: message})
