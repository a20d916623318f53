"""The in-job launcher (the grant wins over the hub's env) and the embedded default's authenticator."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub_spawner.auth import ShoalLocalAuthenticator, UsersFileError, load_users
from hub_spawner.launch import merged_environment


def test_the_grant_and_the_platforms_variables_win_over_the_hubs() -> None:
    granted = {"CUDA_VISIBLE_DEVICES": "MIG-aaa", "SHOAL_JOB_ID": "j1", "PATH": "/usr/bin"}
    hub = {"CUDA_VISIBLE_DEVICES": "0", "SHOAL_JOB_ID": "forged", "JUPYTERHUB_API_TOKEN": "t",
           "PATH": "/venv/bin:/usr/bin", "SHOAL_URL": "http://api"}
    env = merged_environment(granted, hub)
    assert env == {"CUDA_VISIBLE_DEVICES": "MIG-aaa", "SHOAL_JOB_ID": "j1", "JUPYTERHUB_API_TOKEN": "t",
                   "PATH": "/venv/bin:/usr/bin", "SHOAL_URL": "http://api"}


def test_the_launcher_becomes_the_command_in_the_work_dir_with_the_merged_environment(tmp_path: Path) -> None:
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"env": {"JUPYTERHUB_API_TOKEN": "tok", "CUDA_VISIBLE_DEVICES": "0"},
                                    "cwd": str(tmp_path / "work" / "alice")}))
    probe = "import os, json; print(json.dumps([os.getcwd(), os.environ['JUPYTERHUB_API_TOKEN'], " \
            "os.environ['CUDA_VISIBLE_DEVICES'], os.getpid()]))"
    child = subprocess.run(
        [sys.executable, "-m", "hub_spawner.launch", str(env_file), "--", sys.executable, "-c", probe],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "MIG-granted"}, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    cwd, token, devices, _pid = json.loads(child.stdout)
    assert (cwd, token, devices) == (str(tmp_path / "work" / "alice"), "tok", "MIG-granted")


def test_the_launcher_says_what_is_wrong_with_a_missing_file(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-m", "hub_spawner.launch", str(tmp_path / "nope"), "--", "true"],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 2 and "cannot read the hub's environment" in child.stderr


USERS = "users:\n  alice: {teams: [fraud-ml], admin: true}\n  bob: {teams: [search, genai-core]}\n  carol:\n"


@pytest.fixture
def authenticator(tmp_path: Path) -> ShoalLocalAuthenticator:
    path = tmp_path / "users.yaml"
    path.write_text(USERS)
    return ShoalLocalAuthenticator(users_file=str(path), password="demo", team_group_prefix="")


@pytest.mark.parametrize("name, password, model", [
    ("alice", "demo", {"name": "alice", "admin": True, "groups": ["fraud-ml"]}),
    ("bob", "demo", {"name": "bob", "admin": False, "groups": ["search", "genai-core"]}),
    ("carol", "demo", {"name": "carol", "admin": False, "groups": []}),
    ("alice", "wrong", None),
    ("mallory", "demo", None),
])
def test_users_log_in_with_their_teams_as_groups(authenticator: ShoalLocalAuthenticator, name: str, password: str,
                                                 model: dict[str, object] | None) -> None:
    assert asyncio.run(authenticator.authenticate(None, {"username": name, "password": password})) == model
    assert authenticator.manage_groups


@pytest.mark.parametrize("text, message", [
    ("users: []", "expected a mapping 'users:'"),
    ("users:\n  alice: {teams: fraud-ml}\n", "users.alice.teams must be a list"),
    ("users:\n  alice: {team: [x]}\n", "give only 'teams'"),
    ("users: [", "cannot read users"),
])
def test_a_bad_users_file_names_the_mistake(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "users.yaml"
    path.write_text(text)
    with pytest.raises(UsersFileError, match=message):
        load_users(path)


def test_the_launcher_imports_neither_jupyterhub_nor_the_server_side() -> None:
    """It runs before the notebook server starts: every import here is time the user waits on the spawn page."""
    probe = ("import sys, hub_spawner.launch; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jupyterhub', 'tornado', 'sqlalchemy')))")
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[]"
