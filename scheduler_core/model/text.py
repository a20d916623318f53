"""Bounds on what a spec hands to a process or a database: text without NUL, argv and env that ``execve`` takes.

Why at the edge: a NUL byte cannot be an argument, an environment variable or a PostgreSQL text value, and an argv
larger than the kernel takes fails every launch with ``E2BIG``. Such a spec must be refused when it is submitted,
with the limit named, not accepted and then launched (and failed, or retried) for ever.

The kernel's limits, as Linux has them: one argument or ``NAME=value`` string at most ``MAX_ARG_STRLEN`` bytes with
its terminating NUL; all of argv and envp together (strings, their NULs and one pointer each) at most ``ARG_MAX``
(``sysconf(_SC_ARG_MAX)``, a quarter of the stack limit). A spec may use ``SPEC_EXEC_BUDGET`` of that: the rest is
kept for what the executor adds (its own environment, the job contract's variables, the pod wrapper's argv).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field

#: Linux's ``MAX_ARG_STRLEN`` (32 pages): one argv or environment string, its terminating NUL included.
MAX_ARG_STRLEN = 131072
_POINTER = 8
_DEFAULT_ARG_MAX = 2 * 1024 * 1024


def _arg_max() -> int:
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (AttributeError, OSError, ValueError):
        return _DEFAULT_ARG_MAX
    return value if value > 0 else _DEFAULT_ARG_MAX


#: ``sysconf(_SC_ARG_MAX)`` where the API runs (the executors run on the same kind of host).
ARG_MAX = _arg_max()
#: What a spec's command and env may take of ``ARG_MAX``: a quarter (at least 64 KiB) is kept for the executor.
SPEC_EXEC_BUDGET = ARG_MAX - max(ARG_MAX // 4, 64 * 1024)
#: The most characters one argument or env value may have (each is at most ``MAX_ARG_STRLEN - 1`` bytes in UTF-8).
MAX_ARG_CHARS = MAX_ARG_STRLEN - 1
MAX_ARGS = 32768
MAX_ENV = 4096
MAX_LABELS = 64
MAX_LABEL_KEY = 253
MAX_LABEL_VALUE = 1024

_NUL_MESSAGE = "contains a NUL byte (\\u0000), which no process argument, environment variable or stored text can hold"
#: JSON Schema for "any text but NUL" (the OpenAPI document states it; ``no_nul`` enforces it).
NO_NUL_PATTERN = "^[^\\u0000]*$"


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(_NUL_MESSAGE)
    return value


def _bounded(max_length: int, min_length: int = 0) -> Any:
    return Field(min_length=min_length, max_length=max_length, json_schema_extra={"pattern": NO_NUL_PATTERN})


#: Strings without NUL of bounded length, for the fields a process or the database will see.
Text500 = Annotated[str, _bounded(500), AfterValidator(no_nul)]
Text512 = Annotated[str, _bounded(512), AfterValidator(no_nul)]
Text1024 = Annotated[str, _bounded(1024), AfterValidator(no_nul)]
Text4000 = Annotated[str, _bounded(4000), AfterValidator(no_nul)]
Text4096 = Annotated[str, _bounded(4096), AfterValidator(no_nul)]
LabelKey = Annotated[str, _bounded(MAX_LABEL_KEY, min_length=1), AfterValidator(no_nul)]


def arg_problem(value: str) -> str | None:
    """What is wrong with ``value`` as one argv or environment string (``NAME=value``), or ``None``."""
    if "\x00" in value:
        return _NUL_MESSAGE
    size = len(value.encode("utf-8", "surrogatepass"))
    if size >= MAX_ARG_STRLEN:
        return (f"is {size:,} bytes; one argument or NAME=value string may have at most {MAX_ARG_STRLEN - 1:,} "
                f"(the kernel's MAX_ARG_STRLEN, {MAX_ARG_STRLEN:,} with its NUL)")
    return None


def exec_size(command: Iterable[str], env: Mapping[str, str]) -> int:
    """Bytes ``execve`` counts for this argv and environment: each string, its NUL and its pointer."""
    total = 0
    for arg in command:
        total += len(arg.encode("utf-8", "surrogatepass")) + 1 + _POINTER
    for name, value in env.items():
        total += len(name.encode("utf-8", "surrogatepass")) + len(value.encode("utf-8", "surrogatepass")) + 2 + _POINTER
    return total


def exec_budget_problem(command: Iterable[str], env: Mapping[str, str]) -> str | None:
    size = exec_size(command, env)
    if size <= SPEC_EXEC_BUDGET:
        return None
    return (f"command and env take {size:,} bytes as the pod's argv and environment, more than the "
            f"{SPEC_EXEC_BUDGET:,} a spec may use: the executor's OS accepts {ARG_MAX:,} (ARG_MAX) in all, and "
            f"{ARG_MAX - SPEC_EXEC_BUDGET:,} are kept for the variables the executor adds")
