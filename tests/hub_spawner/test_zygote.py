"""Warm starts: a server forked by the zygote is the server a cold start would have run — its environment (the
grant's devices, the hub's token), directory, argv and log — and the launcher stays the pod's process: signals are
relayed, exit codes and signal deaths come back, a killed launcher takes the server with it. No zygote, a dead one,
or a refusal: the server starts cold. The stand-in server (``zygote_probe``) prints what it sees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from traitlets.config import Config

from hub_spawner.zygote import ENTRY, refusal
from hub_spawner.zygote_protocol import Request
from hub_spawner.spawner import ShoalSpawner
from hub_spawner.zygote_supervisor import WarmProcess, socket_path, warm_process, zygote_environment
from scheduler_core.executor.base import LaunchRequest, PodEventKind
from scheduler_core.executor.local import LocalExecutor
from scheduler_core.job_env import gang_env, mig_uuid, nodes_of
from tests.scheduler_core.runtime_builders import cluster_nodes, make_spec, place

from .builders import SpawnerBuilder
from .fakes import FakeScheduler
from .stack import wait_for

ROOT = Path(__file__).resolve().parents[2]
PROBE = "tests.hub_spawner.zygote_probe"


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@dataclass
class Zygote:
    proc: subprocess.Popen[bytes]
    socket: str
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def start_zygote(tmp_path: Path, **extra_env: str) -> Zygote:
    directory = tmp_path / "z"
    directory.mkdir(mode=0o700, exist_ok=True)
    sock, log = str(directory / "zygote.sock"), tmp_path / "zygote.log"
    proc = subprocess.Popen([sys.executable, "-m", "hub_spawner.zygote", "--socket", sock, "--entry", PROBE],
                            env=_env(ZYGOTE_ONLY="1", **extra_env), stderr=log.open("wb"), start_new_session=True)
    zygote = Zygote(proc, sock, log)
    wait_for(lambda: "ready at" in log.read_text() or proc.poll() is not None, timeout=60, what="the zygote")
    assert proc.poll() is None, log.read_text()
    return zygote


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    running = start_zygote(tmp_path)
    yield running
    running.stop()


@dataclass
class Launched:
    proc: subprocess.Popen[str]
    seen: dict[str, Any]      # what the server printed first
    stdout: IO[str]

    def rest(self) -> str:
        self.proc.wait(30)
        return self.stdout.read()


def launch(tmp_path: Path, sock: str | None, mode: str, **extra_env: str) -> Launched:
    """The notebook job's command as the executor runs it: its own session, the grant in its environment."""
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"env": {"JUPYTERHUB_API_TOKEN": "tok", "CUDA_VISIBLE_DEVICES": "0"},
                                    "cwd": str(tmp_path / "work" / "alice"), "zygote": sock, "zygote_timeout": 30}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hub_spawner.launch", str(env_file), "--", sys.executable, "-m", PROBE, mode],
        env=_env(CUDA_VISIBLE_DEVICES="MIG-granted", **extra_env), stdout=subprocess.PIPE,
        stderr=(tmp_path / "launch.err").open("w"), text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, (tmp_path / "launch.err").read_text()
    return Launched(proc, json.loads(line), proc.stdout)


def test_a_warm_server_gets_the_launchers_environment_directory_argv_and_log(tmp_path: Path,
                                                                             zygote: Zygote) -> None:
    run = launch(tmp_path, zygote.socket, "serve")
    seen, work = run.seen, str(tmp_path / "work" / "alice")
    assert seen["pid"] != run.proc.pid and seen["pgid"] != run.proc.pid   # forked, in a session of its own
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "MIG-granted"          # the grant wins over the hub's "0"
    assert seen["env"]["JUPYTERHUB_API_TOKEN"] == "tok"
    assert "ZYGOTE_ONLY" not in seen["env"]                              # nothing of the zygote's own environment
    assert (seen["cwd"], seen["path0"]) == (work, work)
    assert seen["argv"][0].endswith("zygote_probe.py") and seen["argv"][1:] == ["serve"]
    os.killpg(run.proc.pid, signal.SIGTERM)                              # as the executor stops a pod
    assert run.rest() == "stopping\n" and run.proc.returncode == 0
    wait_for(lambda: not _alive(seen["pid"]), timeout=10, what="the server's end")


@pytest.mark.parametrize("mode, returncode", [("deaf", -signal.SIGTERM), ("exit-3", 3), ("exit-0", 0)])
def test_the_launcher_ends_as_the_server_ends(tmp_path: Path, zygote: Zygote, mode: str, returncode: int) -> None:
    run = launch(tmp_path, zygote.socket, mode)
    if mode == "deaf":
        os.killpg(run.proc.pid, signal.SIGTERM)
    run.rest()
    assert run.proc.returncode == returncode


def test_killing_the_launcher_kills_the_server(tmp_path: Path, zygote: Zygote) -> None:
    run = launch(tmp_path, zygote.socket, "serve")
    os.killpg(run.proc.pid, signal.SIGKILL)                              # the grace period ended
    run.proc.wait(10)
    wait_for(lambda: not _alive(run.seen["pid"]), timeout=10, what="the server killed with its launcher")
    assert zygote.proc.poll() is None                                    # the zygote serves on


def test_servers_outlive_the_zygote(tmp_path: Path, zygote: Zygote) -> None:
    run = launch(tmp_path, zygote.socket, "serve")
    zygote.proc.kill()
    zygote.proc.wait(10)
    assert _alive(run.seen["pid"])
    os.killpg(run.proc.pid, signal.SIGTERM)
    assert run.rest() == "stopping\n" and run.proc.returncode == 0


def test_without_a_zygote_the_server_starts_cold(tmp_path: Path) -> None:
    run = launch(tmp_path, str(tmp_path / "none.sock"), "exit-0")
    assert run.seen["pid"] == run.proc.pid                              # exec'd, as before warm starts
    assert run.seen["env"]["CUDA_VISIBLE_DEVICES"] == "MIG-granted"
    run.rest()
    assert "starting the server cold: no warm process answers" in (tmp_path / "launch.err").read_text()


def test_a_dead_zygote_means_a_cold_start(tmp_path: Path, zygote: Zygote) -> None:
    zygote.proc.kill()
    zygote.proc.wait(10)
    assert Path(zygote.socket).exists()                                  # a stale socket file stays behind
    run = launch(tmp_path, zygote.socket, "exit-0")
    assert run.seen["pid"] == run.proc.pid
    assert run.rest() == "" and run.proc.returncode == 0


def test_a_refused_request_starts_cold_and_says_why(tmp_path: Path, zygote: Zygote) -> None:
    run = launch(tmp_path, zygote.socket, "exit-0", PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    assert run.seen["pid"] == run.proc.pid
    run.rest()
    assert "the warm process refused: its PYTHONPATH differ" in (tmp_path / "launch.err").read_text()


EXE = sys.executable


@pytest.mark.parametrize("argv, cwd, env, own, why", [
    ([EXE, "-m", ENTRY, "--port=1"], "/w", {"PYTHONPATH": "/r"}, {"PYTHONPATH": "/r"}, None),
    ([EXE, "-m", ENTRY], "/w", {"PYTHONUNBUFFERED": "1"}, {}, None),          # emulated in the fork
    ([EXE, "-m", "other.module"], "/w", {}, {}, "not"),
    (["python", "-m", ENTRY], "/w", {}, {}, "not"),                          # another interpreter, maybe
    ([EXE, "-c", "print(1)"], "/w", {}, {}, "not"),
    ([EXE, "-m", ENTRY], "work", {}, {}, "not absolute"),
    ([EXE, "-m", ENTRY], "/w", {"PYTHONPATH": "/other"}, {"PYTHONPATH": "/r"}, "PYTHONPATH differ"),
    ([EXE, "-m", ENTRY], "/w", {}, {"PYTHONHASHSEED": "0"}, "PYTHONHASHSEED differ"),
])
def test_what_the_zygote_forks(argv: list[str], cwd: str, env: dict[str, str], own: dict[str, str],
                               why: str | None) -> None:
    reason = refusal(Request(argv=argv, env=env, cwd=cwd), executable=EXE, own_env=own)
    assert (reason is None) if why is None else (reason is not None and why in reason)


def test_a_warm_server_is_tracked_signalled_and_reaped_by_the_local_executor(tmp_path: Path,
                                                                           zygote: Zygote) -> None:
    nodes = {node.name: node for node in cluster_nodes()}
    mig = next(name for name, node in nodes.items() if "h100-mig-1g" in node.devices)
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"env": {"JUPYTERHUB_API_TOKEN": "tok"}, "cwd": str(tmp_path / "work"),
                                    "zygote": zygote.socket}))
    spec = make_spec("nb").mig(1).command(EXE, "-m", "hub_spawner.launch", str(env_file), "--",
                                          EXE, "-m", PROBE, "serve").build()
    placement = place("h100-mig-1g", (mig, (3,)))
    request = LaunchRequest(job_id="nb", spec=spec, placement=placement, nodes=nodes_of(placement, nodes),
                            env=gang_env("nb", spec, placement, checkpoint_uri="file:///tmp/c/",
                                         checkpoint_interval_s=3600), attempt=0)
    executor = LocalExecutor(tmp_path / "executor", nodes, env=_env())
    events: list[Any] = []
    log = executor.log_path("nb", 0, 0)

    def seen() -> dict[str, Any] | None:
        events.extend(executor.poll(time.time()))
        lines = log.read_text().splitlines() if log.exists() else []
        return next((json.loads(line) for line in lines if line.startswith("{")), None)

    executor.launch(request)
    try:
        server = wait_for(seen, timeout=60, what="the warm server's first line in the pod's log")
        device = nodes[mig].devices["h100-mig-1g"][3]
        assert server["env"]["CUDA_VISIBLE_DEVICES"] == mig_uuid(mig, device.gpu, device.slice or 0)
        assert server["env"]["SHOAL_JOB_ID"] == "nb" and server["pid"] != executor.pids("nb")[0]
        assert [e.kind for e in events] == [PodEventKind.STARTED]
        executor.terminate("nb", grace_s=20)
        wait_for(lambda: seen() and any(e.kind is PodEventKind.EXITED for e in events), timeout=30,
                 what="the pod's end")
        ended = [e for e in events if e.kind is PodEventKind.EXITED]
        assert [e.exit_code for e in ended] == [0] and "stopping" in log.read_text()
        assert not _alive(server["pid"])
    finally:
        executor.terminate("nb", grace_s=0)
        executor.close()


def test_the_hubs_end_stops_the_zygote(tmp_path: Path) -> None:
    sock = str(tmp_path / "secrets" / "zygote.sock")
    hub = subprocess.run(   # a "hub" that starts the warm process, then dies without a word
        [sys.executable, "-c", "import sys, os; from hub_spawner.zygote_supervisor import WarmProcess; "
         f"w = WarmProcess({sock!r}, entry={PROBE!r}); w.ensure(); print(w.pid, flush=True); os._exit(0)"],
        env=_env(), capture_output=True, text=True, timeout=60)
    pid = int(hub.stdout)   # it was started; it may be gone already
    wait_for(lambda: not _alive(pid), timeout=60, what="the orphaned zygote's exit")
    assert not Path(sock).exists()


def test_the_spawner_points_its_servers_at_the_warm_process_only_for_the_default_command(tmp_path: Path) -> None:
    scheduler = FakeScheduler(pool={"h100-mig-1g": 2})
    warm = SpawnerBuilder(scheduler, tmp_path).config(warm_start=True).build()
    custom = SpawnerBuilder(scheduler, tmp_path).user("bob", "fraud-ml").config(
        warm_start=True, cmd=["jupyterhub-singleuser"]).build()
    path = socket_path(warm.secrets_dir)
    try:
        assert json.loads(warm._write_env_file().read_text())["zygote"] == path
        assert json.loads(custom._write_env_file().read_text())["zygote"] is None
        warm._render_options_form(warm)                                   # the spawn page warms it up
        assert warm_process(path).running
    finally:
        warm_process(path).stop()


def test_long_secrets_dirs_get_a_short_socket_and_the_zygote_no_secrets(tmp_path: Path) -> None:
    long_dir = tmp_path / ("d" * 120)
    assert len(socket_path(long_dir)) <= 100 and socket_path(long_dir) == socket_path(long_dir)
    assert socket_path(tmp_path) == str(tmp_path / f"zygote-{os.getpid()}.sock")   # one per hub
    env = zygote_environment({"PATH": "/bin", "CONFIGPROXY_AUTH_TOKEN": "x", "JPY_COOKIE_SECRET": "y",
                              "SHOAL_HUB_PASSWORD": "z", "PYTHONPATH": "/r"})
    assert env == {"PATH": "/bin", "PYTHONPATH": "/r"}


@pytest.mark.parametrize("settings, starts", [
    ({}, True),                                              # the embedded default: local launcher, warm starts
    ({"launcher": "kubernetes"}, False),                     # pods keep the image's jupyterhub-singleuser
    ({"warm_start": False}, False),
    ({"cmd": ["jupyterhub-singleuser"]}, False),             # the zygote forks only the default command
])
def test_the_hub_starts_the_zygote_as_it_starts_when_warm_starts_apply(tmp_path: Path, settings: dict[str, Any],
                                                                         starts: bool) -> None:
    config = Config()
    config.ShoalSpawner.secrets_dir = str(tmp_path / "secrets")
    for name, value in settings.items():
        setattr(config.ShoalSpawner, name, value)
    path = socket_path(tmp_path / "secrets")
    try:
        assert ShoalSpawner.warm_at_hub_start(config) is starts
        assert warm_process(path).running is starts
    finally:
        warm_process(path).stop()
