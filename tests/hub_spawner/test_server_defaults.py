"""Shoal's defaults for local servers: a config directory Jupyter reads, which the spawner can leave out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hub_spawner import server_defaults
from hub_spawner.server_defaults import PAGE_CONFIG, SERVER_CONFIG, apply, config_dir

from .builders import SpawnerBuilder
from .fakes import FakeScheduler

ROOT = Path(__file__).resolve().parents[2]


def test_the_directory_holds_the_server_and_page_config_and_is_written_once() -> None:
    directory = config_dir()
    assert json.loads((directory / "jupyter_server_config.json").read_text()) == SERVER_CONFIG
    assert json.loads((directory / "labconfig" / "page_config.json").read_text()) == PAGE_CONFIG
    assert config_dir() == directory


def test_apply_adds_the_directory_after_the_paths_already_set_and_only_once() -> None:
    env = {"JUPYTER_CONFIG_PATH": "/site/jupyter"}
    apply(env)
    apply(env)
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == ["/site/jupyter", str(config_dir())]
    off = {server_defaults.SWITCH: "0"}
    apply(off)
    assert "JUPYTER_CONFIG_PATH" not in off


def test_jupyter_reads_the_defaults_in_a_server_started_like_the_launchers() -> None:
    """What the server's own config loading makes of them (its config files, its page config)."""
    probe = ("import os, json; from hub_spawner.server_defaults import apply; apply(os.environ); "
             "from jupyter_server.serverapp import ServerApp; from jupyterlab_server.config import "
             "get_static_page_config; app = ServerApp(); app.load_config_file(); "
             "print(json.dumps([app.config.LabApp.extension_manager, app.config.LabApp.news_url, "
             "app.config.ServerApp.jpserver_extensions, get_static_page_config(level='all').get('buildCheck')]))")
    child = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == ["readonly", None, {"jupyter_lsp": False}, False]


def test_the_spawner_can_leave_the_defaults_out(tmp_path: Path) -> None:
    scheduler = FakeScheduler()
    on = SpawnerBuilder(scheduler, tmp_path).build()
    off = SpawnerBuilder(scheduler, tmp_path).user("bob", "fraud-ml").config(server_defaults=False).build()
    assert server_defaults.SWITCH not in json.loads(on._write_env_file().read_text())["env"]
    assert json.loads(off._write_env_file().read_text())["env"][server_defaults.SWITCH] == "0"
