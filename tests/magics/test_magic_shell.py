"""``%%gpujob`` in a real IPython shell against a real API server; pods are real processes (see ``harness``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import magics
from magics.job import GpuJob, JobFailed
from magics.magic import GpuJobMagics
from scheduler_core.policy.decisions import Reason

from .harness import Cluster, start_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = start_cluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def ip(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """A real shell with the extension loaded, identified as ana of fraud-ml, working in a fresh directory."""
    notebook_dir = tmp_path / "notebook"
    notebook_dir.mkdir()
    monkeypatch.chdir(notebook_dir)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("SHOAL_URL", cluster.url)
    monkeypatch.setenv("SHOAL_TOKEN", cluster.tokens["ana"])
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    shell = InteractiveShell.instance()
    shell.run_line_magic("reload_ext", "magics")
    gpujob_magics().poll_interval = 0.1
    yield shell
    gpujob_magics().close()
    shell.user_ns.pop("_gpujob", None)


def gpujob_magics() -> GpuJobMagics:
    assert isinstance(magics._loaded, GpuJobMagics)
    return magics._loaded


def last_job(ip: InteractiveShell) -> GpuJob:
    job = ip.user_ns["_gpujob"]
    assert isinstance(job, GpuJob)
    return job


def until(predicate: object, timeout: float = 60.0) -> None:
    """Wait for a condition with a deadline (never a bare sleep)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        pause.wait(0.05)


RANKS_CELL = "import os\nprint(f\"RANK={os.environ['RANK']} WORLD_SIZE={os.environ['WORLD_SIZE']}\")\n"


def test_two_pod_job_prints_every_ranks_rank_and_world_size_into_the_cell(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("gpujob", "--pods 2 --gpus-per-pod 8 --ranks all --wait --name ranks", RANKS_CELL)
    out = capsys.readouterr().out
    assert "[rank 0] RANK=0 WORLD_SIZE=2\n" in out
    assert "[rank 1] RANK=1 WORLD_SIZE=2\n" in out
    job = last_job(ip)
    assert job.state == "SUCCEEDED" and job.spec.name == "ranks" and job.spec.team == "fraud-ml"
    assert f"[shoal] job {job.id} SUCCEEDED" in out


def test_default_streams_rank_0_only_without_prefix(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("gpujob", "--pods 2 --wait", RANKS_CELL)
    out = capsys.readouterr().out
    assert "RANK=0 WORLD_SIZE=2\n" in out and "RANK=1" not in out and "[rank" not in out


def test_push_and_pull_round_trip(ip: InteractiveShell) -> None:
    ip.user_ns.update(lr=0.5, steps=[1, 2, 3])
    ip.run_cell_magic("gpujob", "--push lr,steps --pull loss,history --wait",
                      "history = [s * lr for s in steps]\nloss = sum(history)\n")
    assert ip.user_ns["loss"] == 3.0 and ip.user_ns["history"] == [0.5, 1.0, 1.5]


def test_the_job_sees_the_notebooks_directory_and_modules(ip: InteractiveShell) -> None:
    Path("mylib.py").write_text("ANSWER = 42\n")
    Path("input.txt").write_text("hello\n")
    ip.run_cell_magic("gpujob", "--pull found --wait",
                      "import mylib, os\nfound = (mylib.ANSWER, open('input.txt').read().strip(), os.getcwd())\n")
    assert ip.user_ns["found"] == (42, "hello", os.getcwd())


def test_kernel_variables_are_not_visible_without_push(ip: InteractiveShell) -> None:
    ip.user_ns["secret"] = 1
    with pytest.raises(JobFailed, match=r"ended FAILED, exit code 1"):
        ip.run_cell_magic("gpujob", "--wait", "print(secret)\n")
    assert "NameError: name 'secret' is not defined" in last_job(ip).logs(0)


def test_cancel_stops_a_running_job_and_the_widget_shows_it(
        ip: InteractiveShell, cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    gpujob_magics().display_mode = "widget"
    ip.run_cell_magic("gpujob", "--name sleeper",
                      "import time\nprint('started', flush=True)\ntime.sleep(120)\nprint('never')\n")
    job = last_job(ip)
    assert job.ui is not None
    until(lambda: "started\n" in [o["text"] for o in job.ui.logs.outputs])  # type: ignore[union-attr]
    assert job.ui.state.value == "RUNNING"
    ip.run_line_magic("gpujob", f"cancel {job.id}")
    assert f"cancel requested for job {job.id}" in capsys.readouterr().out
    view = job.wait(timeout=60)
    assert view.state == "CANCELLED"
    assert job.ui.state.value == "CANCELLED" and job.ui.cancel_button.disabled
    assert [proc.poll() for proc in cluster.gangs[job.id].procs] == [-15]
    assert "never" not in job.logs(0)


def test_cancel_button_stops_the_job(ip: InteractiveShell, cluster: Cluster) -> None:
    gpujob_magics().display_mode = "widget"
    ip.run_cell_magic("gpujob", "", "import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    job = last_job(ip)
    assert job.ui is not None
    until(lambda: job.state == "RUNNING")
    job.ui.cancel_button.click()
    assert job.wait(timeout=60).state == "CANCELLED"
    assert job.ui.state.value == "CANCELLED"
    assert all(proc.poll() is not None for proc in cluster.gangs[job.id].procs)


def test_widget_shows_queue_position_and_reason_while_pending(ip: InteractiveShell, cluster: Cluster) -> None:
    cluster.hold = True
    gpujob_magics().display_mode = "widget"
    ip.run_cell_magic("gpujob", "--pods 2 --gpus-per-pod 8", "print('hi')\n")
    job = last_job(ip)
    assert job.ui is not None
    cluster.set_wait(job.id, Reason.WAITING_FOR_CAPACITY, "needs 2 free h100 nodes", 3)
    until(lambda: job.ui.values["position"].value == "#3 in fraud-ml's queue")  # type: ignore[union-attr]
    assert job.ui.values["reason"].value == "WaitingForCapacity: needs 2 free h100 nodes"
    cluster.hold = False
    assert job.wait(timeout=60).state == "SUCCEEDED"
    assert job.ui.values["placement"].value.startswith("2 × h100 pods on h100-b0-n00, h100-b0-n01")
    assert [o["text"] for o in job.ui.logs.outputs] == ["hi\n"]


def test_background_pull_lands_in_the_namespace_and_is_noted(ip: InteractiveShell) -> None:
    gpujob_magics().display_mode = "widget"
    ip.run_cell_magic("gpujob", "--pull answer", "answer = 6 * 7\n")
    job = last_job(ip)
    job.wait(timeout=60)
    assert ip.user_ns["answer"] == 42
    assert job.ui is not None and "pulled into the notebook: answer" in job.ui.notes.value


def test_text_mode_without_wait_then_line_magics(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("gpujob", "--pods 2 --pull total", "import os\ntotal = 10\nprint('rank', os.environ['RANK'])\n")
    job = last_job(ip)
    out = capsys.readouterr().out
    assert f"[shoal] submitted job {job.id} (gpujob" in out and "to fraud-ml's queue: 2 × 1 h100" in out
    assert f"%gpujob pull {job.id} once it succeeds" in out
    job.wait(timeout=60)
    assert "total" not in ip.user_ns  # text mode follows nothing in the background: pull on request
    ip.run_line_magic("gpujob", f"pull {job.id}")
    assert ip.user_ns["total"] == 10
    ip.run_line_magic("gpujob", f"logs {job.id} --rank 1")
    ip.run_line_magic("gpujob", f"status {job.id}")
    out = capsys.readouterr().out
    assert "pulled into the notebook: total" in out
    assert "rank 1\n" in out
    assert f"job {job.id} " in out and "SUCCEEDED" in out and "2 × h100 pods on" in out


def test_queue_lists_the_teams_jobs(ip: InteractiveShell, cluster: Cluster, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    cluster.hold = True
    ip.run_cell_magic("gpujob", "--name waiting-one --pods 2 --gpus-per-pod 8", "pass\n")
    job = last_job(ip)
    cluster.set_wait(job.id, Reason.QUOTA_FULL, "fraud-ml holds all it may", 1)
    capsys.readouterr()
    ip.run_line_magic("gpujob", "queue")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "fraud-ml:"
    assert lines[2].split()[:6] == [job.id, "waiting-one", "ana", "PENDING", "2x8", "h100"]
    assert "QuotaFull" in lines[2]


def test_failed_wait_raises_job_failed_with_a_short_traceback(ip: InteractiveShell) -> None:
    with pytest.raises(JobFailed) as info:
        ip.run_cell_magic("gpujob", "--wait", "raise SystemExit(7)\n")
    assert "ended FAILED, exit code 7" in str(info.value)
    assert info.value._render_traceback_()[1] == f"(the pods' output: %gpujob logs {info.value.view.job_id} --rank R)"


@pytest.mark.parametrize(("line", "cell", "words"), [
    ("--pods x", "pass", "argument --pods: invalid int value: 'x'"),
    ("--flavour tpu", "pass", "--flavour 'tpu': unknown flavour 'tpu'"),
    ("--pods 0 --flavour tpu", "pass", "2 problems with the flags:\n  --pods 0: give at least 1 pod\n"
                                        "  --flavour 'tpu': unknown flavour 'tpu'"),
    ("--time forever", "pass", "--time 'forever': expected a duration"),
    ("--gpus 8", "pass", "unrecognized arguments: --gpus 8"),
    ("--push nothere", "pass", "--push nothere: no variable 'nothere' in the notebook"),
    ("", "!nvidia-smi", "line 1 ('!nvidia-smi') uses IPython syntax"),
    ("", "", "the cell body is empty"),
    ("", "  \n\n", "the cell is empty"),
    ("--pods 64 --gpus-per-pod 8", "pass", "the scheduler rejected the job: this job can never run here"),
])
def test_bad_cells_raise_usage_error_and_submit_nothing(ip: InteractiveShell, cluster: Cluster, line: str, cell: str,
                                                        words: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("gpujob", line, cell)
    assert words in str(info.value)
    assert cluster.store.list_jobs() == []
    assert not Path(".shoal/jobs").exists() or list(Path(".shoal/jobs").iterdir()) == []


@pytest.mark.parametrize(("line", "words"), [
    ("", "%gpujob needs a subcommand"),
    ("submit", "%gpujob 'submit': unknown subcommand"),
    ("status", "the following arguments are required: ID"),
    ("status job_nope", "job_nope"),
    ("logs job_nope --rank x", "argument --rank: invalid int value: 'x'"),
])
def test_bad_line_magics(ip: InteractiveShell, line: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("gpujob", line)
    assert words in str(info.value)


def test_logs_of_a_rank_the_job_does_not_have(ip: InteractiveShell) -> None:
    ip.run_cell_magic("gpujob", "--wait", "pass\n")
    with pytest.raises(UsageError, match="--rank 3: job .* has ranks 0 to 0"):
        ip.run_line_magic("gpujob", f"logs {last_job(ip).id} --rank 3")


def test_cancel_of_another_teams_job_is_refused(ip: InteractiveShell, cluster: Cluster,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ip.run_cell_magic("gpujob", "--wait", "pass\n")
    job_id = last_job(ip).id
    monkeypatch.setenv("SHOAL_TOKEN", cluster.tokens["bo"])
    ip.run_line_magic("reload_ext", "magics")
    with pytest.raises(UsageError, match="may not"):
        ip.run_line_magic("gpujob", f"cancel {job_id}")


def test_no_token_and_no_server_are_usage_errors(ip: InteractiveShell, cluster: Cluster, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHOAL_TOKEN")
    ip.run_line_magic("reload_ext", "magics")
    with pytest.raises(UsageError, match="no Shoal token: set SHOAL_TOKEN"):
        ip.run_cell_magic("gpujob", "", "pass\n")
    monkeypatch.setenv("SHOAL_TOKEN", "shoal_not-a-real-token")
    with pytest.raises(UsageError, match="refused the token"):
        ip.run_line_magic("gpujob", "queue")
    monkeypatch.setenv("SHOAL_TOKEN", cluster.tokens["ana"])
    monkeypatch.setenv("SHOAL_URL", "http://127.0.0.1:9")
    with pytest.raises(UsageError, match="no Shoal server answers at http://127.0.0.1:9"):
        ip.run_line_magic("gpujob", "queue")


def test_hub_token_and_config_file_identify_the_notebook(ip: InteractiveShell, cluster: Cluster, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Inside a hub-spawned server: the hub's token (here one the API knows), SHOAL_URL from the spawner.
    monkeypatch.delenv("SHOAL_TOKEN")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", cluster.tokens["bo"])
    ip.run_line_magic("reload_ext", "magics")
    ip.run_line_magic("gpujob", "queue")
    assert capsys.readouterr().out.startswith("search:")
    # Elsewhere: ~/.config/shoal/config.
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN")
    monkeypatch.delenv("SHOAL_URL")
    config = tmp_path / "config" / "shoal" / "config"
    config.parent.mkdir(parents=True)
    config.write_text(f'url = "{cluster.url}"\ntoken = "{cluster.tokens["ana"]}"\n')
    ip.run_line_magic("reload_ext", "magics")
    ip.run_line_magic("gpujob", "queue")
    assert capsys.readouterr().out.startswith("fraud-ml:")


def test_a_restart_after_a_node_failure_shows_in_the_widget_and_its_log(ip: InteractiveShell, cluster: Cluster
                                                                          ) -> None:
    gpujob_magics().display_mode = "widget"
    # The first attempt of each pod leaves a mark in the notebook's directory and waits; the second finishes.
    ip.run_cell_magic("gpujob", "--pods 2 --gpus-per-pod 8",
                      "import os, time\nprint('attempt up', flush=True)\nmark = f\"ran-{os.environ['RANK']}\"\n"
                      "if not os.path.exists(mark):\n    open(mark, 'w').close()\n    time.sleep(120)\n"
                      "print('done', flush=True)\n")
    job = last_job(ip)
    assert job.ui is not None
    ui = job.ui
    texts = lambda: "".join(o["text"] for o in ui.logs.outputs)  # noqa: E731
    until(lambda: "attempt up" in texts() and Path("ran-0").exists() and Path("ran-1").exists())
    cluster.node_failures.add(job.id)
    until(lambda: ui.values["restarts"].value == "0 (+1 after node failures, 0 preemptions)")
    assert job.wait(timeout=60).state == "SUCCEEDED"
    assert texts() == "attempt up\n--- the job restarted: attempt 1 ---\nattempt up\ndone\n"
