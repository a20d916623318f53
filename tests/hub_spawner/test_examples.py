"""A new server's work directory gets the example notebooks, once, and never over the user's own files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hub_spawner.examples import MARKER, copy_examples, default_source

ROOT = Path(__file__).resolve().parents[2]


def _examples(tmp_path: Path) -> Path:
    source = tmp_path / "examples"
    source.mkdir()
    (source / "quickstart.ipynb").write_text('{"v": "quickstart"}')
    (source / "sweep.ipynb").write_text('{"v": "sweep"}')
    (source / "notes.txt").write_text("not a notebook")
    return source


def test_the_first_start_copies_every_example(tmp_path: Path) -> None:
    work = tmp_path / "work" / "ana"
    assert copy_examples(_examples(tmp_path), work) == ["quickstart.ipynb", "sweep.ipynb"]
    assert (work / "sweep.ipynb").read_text() == '{"v": "sweep"}' and not (work / "notes.txt").exists()


def test_a_users_edit_is_never_overwritten_and_a_deleted_example_stays_deleted(tmp_path: Path) -> None:
    source, work = _examples(tmp_path), tmp_path / "work"
    copy_examples(source, work)
    (work / "quickstart.ipynb").write_text("my edits")
    (work / "sweep.ipynb").unlink()
    (source / "quickstart.ipynb").write_text('{"v": "newer example"}')
    assert copy_examples(source, work) == []
    assert (work / "quickstart.ipynb").read_text() == "my edits" and not (work / "sweep.ipynb").exists()
    (source / "new.ipynb").write_text("{}")
    assert copy_examples(source, work) == ["new.ipynb"]
    assert json.loads((work / MARKER).read_text())["copied"] == ["new.ipynb", "quickstart.ipynb", "sweep.ipynb"]


def test_a_file_the_user_made_before_the_first_start_is_kept(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "sweep.ipynb").write_text("mine")
    assert copy_examples(_examples(tmp_path), work) == ["quickstart.ipynb"]
    assert (work / "sweep.ipynb").read_text() == "mine"


def test_the_default_source_is_the_repositorys_notebooks() -> None:
    source = default_source()
    assert source == ROOT / "notebooks"
    assert {p.name for p in source.glob("*.ipynb")} >= {"quickstart.ipynb", "sweep.ipynb"}


def test_the_launcher_copies_the_examples_into_the_work_dir_before_the_server_starts(tmp_path: Path) -> None:
    env_file = tmp_path / "env.json"
    work = tmp_path / "work" / "alice"
    env_file.write_text(json.dumps({"env": {}, "cwd": str(work), "examples": str(_examples(tmp_path))}))
    probe = "import os, json; print(json.dumps(sorted(os.listdir('.'))))"
    child = subprocess.run(
        [sys.executable, "-m", "hub_spawner.launch", str(env_file), "--", sys.executable, "-c", probe],
        env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == [MARKER, "quickstart.ipynb", "sweep.ipynb"]
