"""The policy's shape (issue 20): small functions, and outcomes as named records rather than tuples."""

from __future__ import annotations

import ast
import dataclasses
import gc
import importlib
from pathlib import Path

import pytest

import scheduler_core.policy as policy

POLICY = Path(policy.__file__).parent
MAX_LINES = 60
#: The stages of the cycle, whose outcomes other stages read: each returns frozen records with slots.
STAGES = ["working_copy", "contexts", "stage_nominate", "stage_preempt", "stage_reserve", "stage_explain"]
#: Records a stage fills in as the cycle goes, on purpose mutable.
MUTABLE = {"Waiting", "_Alloc"}


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


@pytest.mark.parametrize("module", STAGES)
def test_stage_outcomes_are_frozen_records_with_slots(module: str) -> None:
    loaded = importlib.import_module(f"scheduler_core.policy.{module}")
    for name, value in vars(loaded).items():
        if not (isinstance(value, type) and dataclasses.is_dataclass(value)) or value.__module__ != loaded.__name__:
            continue
        assert hasattr(value, "__slots__"), f"{module}.{name} has no slots"
        if name not in MUTABLE:
            assert value.__dataclass_params__.frozen, f"{module}.{name} is not frozen"  # type: ignore[attr-defined]


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
