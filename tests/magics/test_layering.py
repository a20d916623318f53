"""The magics reach the scheduler only through its client SDK and public types (DESIGN §2)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"scheduler_core.client", "scheduler_core.schemas", "scheduler_core.model"}


def test_magics_import_only_the_client_schemas_and_model() -> None:
    used: dict[str, set[str]] = {}
    for path in (ROOT / "magics").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            for name in names:
                if name.split(".")[0] == "scheduler_core":
                    used.setdefault(path.name, set()).add(name)
    offenders = {file: sorted(n for n in names if not any(n == a or n.startswith(a + ".") for a in ALLOWED))
                 for file, names in used.items()}
    assert {file: names for file, names in offenders.items() if names} == {}


def test_loading_the_extension_pulls_in_no_server_side() -> None:
    code = ("import sys, magics.magic, magics.runner\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tornado', 'sqlalchemy', 'alembic') "
            "or m.startswith(('scheduler_core.api', 'scheduler_core.store', 'scheduler_core.executor')))\n"
            "print(bad)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_pod_runner_needs_neither_ipython_nor_the_sdk() -> None:
    code = "import sys, magics.runner\nprint(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('IPython', 'ipywidgets', 'scheduler_core', 'httpx')))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
