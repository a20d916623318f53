"""The policy's shape (issue 20): small functions, and outcomes as named records rather than tuples."""

from __future__ import annotations

import ast
import dataclasses
import gc
import importlib
from pathlib import Path

import pytest

import scheduler_core.policy as policy
from scheduler_core.policy.record import RECORD_MARK

POLICY = Path(policy.__file__).parent
MAX_LINES = 60
#: mypy's cache for these tests, beside the repository's own.
CACHE = POLICY.parents[1] / ".mypy_cache"
#: Every module of the policy but the snapshot's input types (frozen dataclasses): their outcomes are read-only
#: records with slots (``policy.record``: read-only to mypy, plain at run time).
MODULES = sorted(path.stem for path in POLICY.glob("*.py") if path.stem not in {"__init__", "record", "snapshot"})
#: Records the cycle fills in as it goes, on purpose mutable.
MUTABLE = {"Waiting", "_Alloc", "_ExtraPool", "Hold"}


def _functions() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(POLICY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                found.append((path.name, node.name, node.end_lineno - node.lineno + 1))
    return found


def test_no_function_in_the_policy_is_longer_than_60_lines() -> None:
    long = [f"{file}:{name} ({lines} lines)" for file, name, lines in _functions() if lines > MAX_LINES]
    assert not long, f"split these into named steps: {', '.join(long)}"


@pytest.mark.parametrize("module", MODULES)
def test_policy_outcomes_are_read_only_records_with_slots(module: str) -> None:
    loaded = importlib.import_module(f"scheduler_core.policy.{module}")
    for name, value in vars(loaded).items():
        if not (isinstance(value, type) and dataclasses.is_dataclass(value)) or value.__module__ != loaded.__name__:
            continue
        assert hasattr(value, "__slots__"), f"{module}.{name} has no slots"
        if name not in MUTABLE:
            assert getattr(value, RECORD_MARK, False), f"{module}.{name} is not a @record"


def _mypy(*args: str) -> tuple[str, int]:
    from mypy import api   # a test dependency (pyproject's [test] extra)

    stdout, stderr, status = api.run(["--no-error-summary", "--cache-dir", str(CACHE), *args])
    return stdout + stderr, status


def test_the_policy_type_checks() -> None:
    """What makes a ``record`` read-only is the type checker: the policy must pass it."""
    out, status = _mypy(str(POLICY))
    assert status == 0, out


def test_the_type_checker_rejects_changing_a_record(tmp_path: Path) -> None:
    """Assigning a field of a record fails the type check (at run time it would go through)."""
    changes = tmp_path / "changes_a_record.py"
    changes.write_text(
        "from scheduler_core.policy.decisions import Reason, Wait\n"
        "wait = Wait('j1', Reason.WAITING_FOR_CAPACITY, 'no room', 1, None, '')\n"
        "wait.position = 2\n")
    out, status = _mypy(str(changes))
    assert status == 1 and 'Property "position" defined in "Wait" is read-only' in out, out


def test_a_pass_leaves_no_reference_cycle() -> None:
    """Everything a pass builds is freed by reference counting when it returns. A cycle (a stage's callback kept
    by the working copy it reads, as once) leaves every pass's whole working copy to the cyclic collector: on a
    busy Tuesday's replay that was a sixth of the run time (docs/BENCHMARKS.md)."""
    from scheduler_core.policy.cycle import run_cycle
    from scheduler_core.policy.working_copy import WorkingCopy

    from .test_preemption_and_backfill import one_job_in_the_way

    snapshot = one_job_in_the_way(free_in_b1=1)
    gc.collect()
    gc.disable()
    try:
        alive = {id(obj) for obj in gc.get_objects() if isinstance(obj, WorkingCopy)}   # other tests' own
        result = run_cycle(snapshot, 0.0)
        left = [obj for obj in gc.get_objects() if isinstance(obj, WorkingCopy) and id(obj) not in alive]
    finally:
        gc.enable()
    assert result.preempts, "the pass went through the preemption stage, whose lists follow released jobs"
    assert left == []
