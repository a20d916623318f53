"""``notebooks/quickstart.ipynb`` executed by nbclient in a real kernel against a running scheduler."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from .servers import ShoalServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


def cell_starting(nb: Any, prefix: str) -> Any:
    matches = [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.startswith(prefix)]
    assert len(matches) == 1, f"expected one cell starting with {prefix!r}"
    return matches[0]


def stream(cell: Any, name: str) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


def stdout(cell: Any) -> str:
    return stream(cell, "stdout")


def test_quickstart_runs_end_to_end(shoal_server: ShoalServer, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.setenv("SHOAL_URL", shoal_server.url)
    monkeypatch.setenv("SHOAL_TOKEN", shoal_server.token)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}).execute()

    ranks = stdout(cell_starting(nb, "%%gpujob --pods 2"))
    assert "[rank 0] RANK=0 WORLD_SIZE=2" in ranks
    assert "[rank 1] RANK=1 WORLD_SIZE=2" in ranks

    assert "final loss 7.375" in stdout(cell_starting(nb, "%%gpujob --push lr,batches"))
    assert stdout(cell_starting(nb, 'print("loss pulled back')) == (
        "loss pulled back into the notebook: 7.375 [8.5, 7.75, 7.375]\n")

    assert stdout(cell_starting(nb, "job.wait(timeout=120)")) == "widget shows: CANCELLED\n"
    assert "cancel requested for job" in stdout(cell_starting(nb, "%gpujob cancel"))
    assert "step 0\n" in stdout(cell_starting(nb, "%gpujob logs"))
    assert "CANCELLED" in stdout(cell_starting(nb, "%gpujob status"))
    assert "quickstart-sleeper" in stdout(cell_starting(nb, "%gpujob queue"))

    # The saved widget state is what a browser would render: the sleeper's widget says CANCELLED.
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    labels = [s["state"].get("value") for s in states.values() if s.get("model_name") == "LabelModel"]
    assert "CANCELLED" in labels
    titles = [s["state"].get("value", "") for s in states.values() if s.get("model_name") == "HTMLModel"]
    assert any("quickstart-sleeper" in t and "CANCELLED" in t for t in titles)

    bad = cell_starting(nb, "%%gpujob --pods 0")
    # IPython reports a UsageError on stderr without a traceback; every bad flag is named at once.
    assert stream(bad, "stderr").startswith("UsageError: 2 problems with the flags:\n  --pods 0: give at least 1 "
                                            "pod\n  --flavour 'tpu': unknown flavour 'tpu'")
    assert not list((workdir / ".shoal" / "jobs").glob("*/cell.py")) or all(
        "never submitted" not in p.read_text() for p in (workdir / ".shoal" / "jobs").glob("*/cell.py"))
    json.dumps(nb)  # the executed notebook is still valid JSON
