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


def _imported_modules(path: Path, package: str) -> set[str]:
    """Absolute dotted names of what ``path`` (a module of ``package``) imports, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = [package, *path.relative_to(ROOT / package).with_suffix("").parts]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            base = here[:-node.level] if node.level else []
            out.add(".".join([*base, node.module]))
    return out


def test_the_store_and_the_model_do_not_import_the_policy() -> None:
    """The store keeps what the policy decides (placements, how a job is admitted, reasons) in the model's
    words, so that a store, or the API reading one, never loads the decision code."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in _imported_modules(path, "scheduler_core")
                                            if m.startswith("scheduler_core.policy"))
        for sub in ("store", "model")
        for path in (ROOT / "scheduler_core" / sub).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
