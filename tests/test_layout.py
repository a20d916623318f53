"""The layering of DESIGN §2: the scheduler core never imports the packages built on top of it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UPPER = {"hub_spawner", "magics", "sweeps"}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_scheduler_core_imports_nothing_above_it() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & UPPER)
        for path in (ROOT / "scheduler_core").rglob("*.py")
        if _imported_roots(path) & UPPER
    }
    assert offenders == {}
