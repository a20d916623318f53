"""``%%gpujob`` in a real IPython shell against a real ``shoal up``: the real policy places the gang on the demo
cluster, the local executor runs the pods, and cancel goes through the controller's SIGTERM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import magics
from magics.job import GpuJob
from magics.magic import GpuJobMagics

from .servers import ShoalServer

pytestmark = pytest.mark.slow


@pytest.fixture
def ip(shoal_server: ShoalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    workdir = tmp_path / "notebook"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("SHOAL_URL", shoal_server.url)
    monkeypatch.setenv("SHOAL_TOKEN", shoal_server.token)
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    shell = InteractiveShell.instance()
    shell.run_line_magic("reload_ext", "magics")
    assert isinstance(magics._loaded, GpuJobMagics)
    magics._loaded.poll_interval = 0.2
    yield shell
    magics._loaded.close()


def test_gang_pull_cancel_and_bad_flags_on_shoal_up(ip: InteractiveShell, shoal_server: ShoalServer,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("gpujob", "--pods 2 --gpus-per-pod 8 --ranks all --wait --pull world",
                      "import os\nprint(f\"RANK={os.environ['RANK']} WORLD_SIZE={os.environ['WORLD_SIZE']}\")\n"
                      "world = int(os.environ['WORLD_SIZE'])\n")
    out = capsys.readouterr().out
    assert "[rank 0] RANK=0 WORLD_SIZE=2" in out and "[rank 1] RANK=1 WORLD_SIZE=2" in out, shoal_server.tail()
    assert ip.user_ns["world"] == 2
    job = ip.user_ns["_gpujob"]
    assert isinstance(job, GpuJob) and job.view is not None and job.view.placement is not None
    assert job.view.placement.flavour == "h100" and len(set(job.view.placement.node_names)) == 2

    magics._loaded.display_mode = "widget"  # type: ignore[union-attr]
    ip.run_cell_magic("gpujob", "--name sleeper", "import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    sleeper = ip.user_ns["_gpujob"]
    sleeper.wait_for_output("up", timeout=120)
    ip.run_line_magic("gpujob", f"cancel {sleeper.id}")
    assert sleeper.wait(timeout=120).state == "CANCELLED"
    assert sleeper.ui.state.value == "CANCELLED"

    with pytest.raises(UsageError, match="--flavour 'tpu': unknown flavour"):
        ip.run_cell_magic("gpujob", "--flavour tpu", "pass\n")
    with pytest.raises(UsageError, match="the scheduler rejected the job: this job can never run here"):
        ip.run_cell_magic("gpujob", "--pods 32 --gpus-per-pod 8", "pass\n")
