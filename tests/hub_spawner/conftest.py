"""One real Shoal (``shoal up``: scheduler, API, JupyterHub with configurable-http-proxy, the reaper service) for the
``hub`` and ``browser`` tests of this session, on free ports in a temp dir, with a two-slice MIG pool."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.shoal_up import Up, child_env, started

from .stack import ROOT, GaveUp, Hub, free_port, wait_for

PASSWORD = "test-password"

#: One MIG node: a single H100 sliced 3g.40gb twice, so two notebooks fill the pool.
CLUSTER = """\
name: hubtest
blocks:
  - name: mig-a
    small_jobs: true
    nodes:
      - {count: 1, gpu: h100, gpus_per_node: 1, mig: 3g.40gb, cpus_per_node: 16, memory_gb_per_node: 64}
"""
TEAMS = """\
teams:
  - name: fraud-ml
    cohort: shared
    quotas: {h100-mig-3g: {nominal: 2}}
  - name: search
    cohort: shared
    quotas: {h100-mig-3g: {nominal: 2}}
"""
USERS = """\
users:
  alice: {teams: [fraud-ml]}
  bob: {teams: [fraud-ml]}
  carol: {teams: [search]}
  dave: {teams: [search]}
  erin: {teams: [fraud-ml]}
  frank: {teams: [search], admin: true}
"""
PROFILES = [{"slug": "mig-3g", "display_name": "3g.40gb MIG slice", "flavour": "h100-mig-3g", "default": True,
             "description": "3/7 of an H100"},
            {"slug": "h100", "display_name": "Whole H100", "flavour": "h100"}]


def _chp_path() -> str:
    candidates = [ROOT / "node_modules" / ".bin", Path("/work/main/node_modules/.bin")]
    found = [str(p) for p in candidates if (p / "configurable-http-proxy").exists()]
    return os.pathsep.join([*found, str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@dataclass
class Stack:
    hub: Hub
    shoal_url: str
    shoal_admin_token: str
    state_dir: Path
    output: Path
    up: Up


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with shoal_stack(tmp_path_factory.mktemp("shoal-up"), ROOT / "test-output" / "hub") as running:
        yield running


@contextmanager
def shoal_stack(tmp: Path, output: Path, *, cluster: str = CLUSTER, teams: str = TEAMS,
                users: str = USERS) -> Iterator[Stack]:
    """``shoal up`` with its hub on free ports under ``tmp``, on ``cluster`` and ``teams`` with hub ``users``; its
    output and the hub's log are kept in ``output`` when it stops."""
    if shutil.which("configurable-http-proxy", path=_chp_path()) is None:
        pytest.fail("configurable-http-proxy is not installed: run `make test` (it runs `npm install`)")
    (tmp / "cluster.yaml").write_text(cluster)
    (tmp / "teams.yaml").write_text(teams)
    (tmp / "users.yaml").write_text(users)
    token = os.urandom(24).hex()
    (tmp / "hub_extra.py").write_text(
        f"c.ShoalSpawner.profile_list = {PROFILES!r}\n"
        "c.ShoalSpawner.status_interval = 0.3\n"
        f"c.JupyterHub.services.append({{'name': 'test-admin', 'api_token': {token!r}}})\n"
        "c.JupyterHub.load_roles.append({'name': 'test-admin', 'services': ['test-admin'], 'scopes': ["
        "'admin:users', 'admin:servers', 'access:servers', 'admin:server_state', 'list:users', 'read:servers', "
        "'read:users', 'read:users:activity', 'delete:servers', 'tokens']})\n")
    port, hub_port, proxy_port = free_port(), free_port(), free_port()
    state = tmp / "state"
    output.mkdir(parents=True, exist_ok=True)
    printed: list[str] = []
    try:
        with started(state, "--cluster", str(tmp / "cluster.yaml"), "--teams", str(tmp / "teams.yaml"),
                     "--hub-url", f"http://127.0.0.1:{port}", "--hub-api-port", str(hub_port),
                     "--hub-proxy-api-port", str(proxy_port), "--hub-users", str(tmp / "users.yaml"),
                     "--hub-password", PASSWORD, "--hub-extra-config", str(tmp / "hub_extra.py"),
                     env=child_env(PATH=_chp_path()), cwd=tmp, hub=True) as up:
            printed = up.output
            hub = Hub(url=f"http://127.0.0.1:{port}", api=f"http://127.0.0.1:{port}/hub/api", token=token,
                      state=state / "hub", proc=up.proc, log=state / "hub" / "jupyterhub.log")

            def ready() -> bool:
                if up.proc.poll() is not None:
                    raise GaveUp(f"shoal up exited ({up.proc.returncode}):\n{up.tail(100)}")
                return hub.http.get(f"{hub.api}/users").status_code == 200

            try:
                wait_for(ready, timeout=120, what="shoal up's JupyterHub", interval=0.3)
                admin = up.token("test-reaper", "fraud-ml", admin=True)
                yield Stack(hub=hub, shoal_url=up.url, shoal_admin_token=admin, state_dir=state, output=output, up=up)
            finally:
                hub.http.close()
    finally:
        (output / "shoal-up.log").write_text("".join(printed))
        hub_log = state / "hub" / "jupyterhub.log"
        if hub_log.exists():
            shutil.copy(hub_log, output / "jupyterhub.log")
        print(f"\nshoal up's logs: {output}/shoal-up.log, {output}/jupyterhub.log")
