"""A cell's bundle run by the real runner in a real subprocess, as each pod runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from magics.bundle import (BundleError, load_pulled, new_key, read_pull_result, runner_command, runner_env,
                           write_bundle)
from magics.magic import check_source


def run_pod(bundle: Path, rank: int, world: int = 2) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **runner_env(), "RANK": str(rank), "WORLD_SIZE": str(world)}
    return subprocess.run(runner_command(bundle), env=env, capture_output=True, text=True, timeout=60,
                          cwd="/")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A notebook's working directory, with a module of its own and a data file."""
    (tmp_path / "helper.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "data.txt").write_text("21\n")
    return tmp_path


def bundle_for(workdir: Path, source: str, *, push: dict[str, object] | None = None,
               pull: tuple[str, ...] = ()) -> Path:
    return write_bundle(workdir / ".shoal" / "jobs", new_key(), source=source, push=push or {}, pull=pull,
                        cwd=str(workdir), sys_path=["", str(workdir), *sys.path])


def test_pod_sees_pushed_values_notebook_cwd_and_modules_and_rank0_pulls(workdir: Path) -> None:
    source = (
        "import os, helper\n"
        "n = int(open('data.txt').read())\n"
        "result = {'rank': int(os.environ['RANK']), 'value': helper.double(n) + offset, 'main': __name__}\n"
        "print(f\"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}: {result['value']}\")\n"
    )
    bundle = bundle_for(workdir, source, push={"offset": 100}, pull=("result",))
    for rank in (1, 0):
        done = run_pod(bundle, rank)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"rank {rank} of 2: 142\n"
    assert load_pulled(bundle, ("result",)) == {"result": {"rank": 0, "value": 142, "main": "__main__"}}


def test_only_rank0_writes_pulls(workdir: Path) -> None:
    bundle = bundle_for(workdir, "x = 1\n", pull=("x",))
    assert run_pod(bundle, 1).returncode == 0
    assert read_pull_result(bundle) is None
    with pytest.raises(BundleError, match="rank 0 did not finish the cell"):
        load_pulled(bundle, ("x",))


def test_cell_exception_exits_1_with_the_cells_own_traceback(workdir: Path) -> None:
    bundle = bundle_for(workdir, "a = 1\nraise ValueError('bad batch')\n")
    done = run_pod(bundle, 0)
    assert done.returncode == 1
    assert "ValueError: bad batch" in done.stderr
    assert 'cell.py", line 2' in done.stderr
    assert "runner.py" not in done.stderr


@pytest.mark.parametrize(("source", "code"), [
    ("import sys\nsys.exit(4)\n", 4),
    ("import sys\nsys.exit()\n", 0),
    ("import sys\nsys.exit('giving up')\n", 1),
])
def test_sys_exit_sets_the_pods_exit_code(workdir: Path, source: str, code: int) -> None:
    assert run_pod(bundle_for(workdir, source), 0).returncode == code


def test_missing_and_unpicklable_pulls_are_reported_by_name(workdir: Path) -> None:
    bundle = bundle_for(workdir, "import threading\nok = 5\nlock = threading.Lock()\n",
                        pull=("ok", "lock", "nothere"))
    done = run_pod(bundle, 0)
    assert done.returncode == 3
    assert "--pull nothere: the cell did not define 'nothere'" in done.stderr
    assert "--pull lock: cannot be pickled" in done.stderr
    result = read_pull_result(bundle)
    assert result is not None and result.written == ["ok"] and set(result.errors) == {"lock", "nothere"}
    assert load_pulled(bundle, ("ok",)) == {"ok": 5}
    with pytest.raises(BundleError, match="nothere: the cell did not define"):
        load_pulled(bundle, ("ok", "nothere"))


def test_class_defined_in_the_cell_does_not_unpickle_in_the_notebook(workdir: Path) -> None:
    bundle = bundle_for(workdir, "class Point:\n    pass\np = Point()\n", pull=("p",))
    assert run_pod(bundle, 0).returncode == 0
    with pytest.raises(BundleError, match="--pull p: cannot be unpickled here"):
        load_pulled(bundle, ("p",))


def test_unpicklable_push_names_the_variable_and_leaves_no_directory(workdir: Path) -> None:
    root = workdir / ".shoal" / "jobs"
    with pytest.raises(BundleError, match="--push lock: cannot be pickled"):
        write_bundle(root, new_key(), source="pass\n", push={"n": 1, "lock": threading.Lock()}, pull=())
    assert not root.exists() or list(root.iterdir()) == []


def test_runner_refuses_a_directory_that_is_not_a_bundle(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "magics.runner", str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, **runner_env()}, timeout=60)
    assert done.returncode == 2 and "is not a job bundle" in done.stderr


@pytest.mark.parametrize(("cell", "words"), [
    ("", "the cell is empty"),
    ("   \n\n", "the cell is empty"),
    ("x = 1\n!nvidia-smi\n", "line 2 ('!nvidia-smi') uses IPython syntax"),
    ("%time x = 1\n", "line 1 ('%time x = 1') uses IPython syntax"),
    ("files = !ls\n", "line 1 ('files = !ls') uses IPython syntax"),
    ("x = (1,\n", "syntax error in the cell, line 1"),
    ("def f(:\n  pass\n", "syntax error in the cell, line 1"),
])
def test_check_source_refuses_what_a_pod_cannot_run(cell: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        check_source(cell)
    assert words in str(info.value)


def test_check_source_accepts_plain_python_with_bangs_in_strings() -> None:
    check_source("print('hello!')\nx = 3 != 4\n")
