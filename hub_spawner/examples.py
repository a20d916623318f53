"""Copies of the example notebooks in a new server's working directory, never over a user's own work.

A user's first server opens on ``quickstart.ipynb`` and ``sweep.ipynb`` rather than an empty directory. Each
example is copied once: a file of that name already there (the user's edits) is left alone, and the names copied
before are remembered in ``.shoal-examples.json``, so an example the user deleted does not come back.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

#: Remembers which examples were copied into a directory once.
MARKER = ".shoal-examples.json"


def default_source() -> Path | None:
    """The repository's ``notebooks/`` beside the package (a source or editable install), if it is there."""
    candidate = Path(__file__).resolve().parent.parent / "notebooks"
    return candidate if candidate.is_dir() else None


def copy_examples(source: Path, work_dir: Path) -> list[str]:
    """Copy each ``source/*.ipynb`` into ``work_dir`` unless it is there or was copied before; the names copied."""
    if not source.is_dir():
        return []
    work_dir.mkdir(parents=True, exist_ok=True)
    marker = work_dir / MARKER
    try:
        seen = set(json.loads(marker.read_text()).get("copied", []))
    except (OSError, ValueError, AttributeError):
        seen = set()
    copied = []
    for notebook in sorted(source.glob("*.ipynb")):
        target = work_dir / notebook.name
        if notebook.name in seen or target.exists():
            seen.add(notebook.name)
            continue
        shutil.copyfile(notebook, target)
        copied.append(notebook.name)
        seen.add(notebook.name)
    marker.write_text(json.dumps({"copied": sorted(seen)}) + "\n")
    return copied
