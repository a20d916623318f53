"""DESIGN §2: the spawner and the reaper reach the scheduler only through its client SDK and public types."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The Kubernetes names and pod builders are shared with the executor (issue 8: one set of pod builders), so a
#: notebook pod is built exactly as the executor builds it; they are pure functions, not the server side.
ALLOWED = ("scheduler_core.client", "scheduler_core.schemas", "scheduler_core.model", "scheduler_core.kube.names",
           "scheduler_core.kube.manifests")


def _scheduler_imports(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return {m for m in modules if m.split(".")[0] == "scheduler_core"}


def test_hub_spawner_imports_only_the_client_the_schemas_and_the_model() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in _scheduler_imports(path)
                                            if not any(m == a or m.startswith(a + ".") for a in ALLOWED))
        for path in (ROOT / "hub_spawner").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
