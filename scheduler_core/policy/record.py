"""``record``: the decorator of the policy's outcome records — read-only to the type checker, plain at run time.

A stage's outcome (a verdict, a victim, a wait) is never changed once made. ``@dataclass(frozen=True)`` says so
and enforces it at run time by passing every field of every ``__init__`` through ``object.__setattr__``: four
times the cost of a plain slots dataclass (1.0 µs against 0.25 µs for six fields). A pass over 2,000 waiting jobs
builds tens of thousands of them, a tenth of the pass (docs/BENCHMARKS.md, session 22). ``record`` keeps the
promise where checking it costs nothing: mypy rejects any assignment to a record's field
(``dataclass_transform(frozen_default=True)``; ``tests/scheduler_core/policy/test_structure.py`` runs mypy on the
policy and on an assignment it must reject), and the class is a plain slots dataclass, equal and hashable by
value as a frozen one is.

The snapshot's types (``snapshot.py``) stay frozen dataclasses: they are the input, built once per change by
the snapshot builder, and the carried index relies on a ``RunningJob`` never changing under it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from typing_extensions import dataclass_transform

T = TypeVar("T")

#: Set on every class ``record`` makes (the structure test tells records from plain dataclasses by it).
RECORD_MARK = "__shoal_record__"


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, order: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[Any] | None = None, /, *, order: bool = False) -> Any:
    """``@record`` or ``@record(order=True)`` on a class: a slots dataclass, compared and hashed by value,
    whose fields the type checker treats as read-only."""

    def make(target: type[T]) -> type[T]:
        made = dataclass(slots=True, unsafe_hash=True, order=order)(target)
        setattr(made, RECORD_MARK, True)
        return made

    return make if cls is None else make(cls)
