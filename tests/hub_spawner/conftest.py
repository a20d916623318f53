"""One real Shoal (``shoal up``: scheduler, API, JupyterHub with configurable-http-proxy, the reaper service) for the
``hub`` and ``browser`` tests of this session, on free ports in a temp dir, with a two-slice MIG pool."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

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
    proc: subprocess.Popen[bytes]
    log: Path

    def shoal(self, *args: str) -> str:
        """Run the ``shoal`` CLI against this installation."""
        done = subprocess.run([sys.executable, "-m", "scheduler_core.cli.main", *args], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                          "SHOAL_STATE_DIR": str(self.state_dir),
                                                          "SHOAL_URL": self.shoal_url,
                                                          "SHOAL_TOKEN": self.shoal_admin_token})
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if shutil.which("configurable-http-proxy", path=_chp_path()) is None:
        pytest.fail("configurable-http-proxy is not installed: run `make test` (it runs `npm install`)")
    tmp = tmp_path_factory.mktemp("shoal-up")
    (tmp / "cluster.yaml").write_text(CLUSTER)
    (tmp / "teams.yaml").write_text(TEAMS)
    (tmp / "users.yaml").write_text(USERS)
    token = os.urandom(24).hex()
    (tmp / "hub_extra.py").write_text(
        f"c.ShoalSpawner.profile_list = {PROFILES!r}\n"
        "c.ShoalSpawner.status_interval = 0.3\n"
        f"c.JupyterHub.services.append({{'name': 'test-admin', 'api_token': {token!r}}})\n"
        "c.JupyterHub.load_roles.append({'name': 'test-admin', 'services': ['test-admin'], 'scopes': ["
        "'admin:users', 'admin:servers', 'access:servers', 'admin:server_state', 'list:users', 'read:servers', "
        "'read:users', 'read:users:activity', 'delete:servers', 'tokens']})\n")
    port, hub_port, proxy_port, api_port = free_port(), free_port(), free_port(), free_port()
    state = tmp / "state"
    log = tmp / "shoal-up.log"
    env = {**os.environ, "PATH": _chp_path(), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler_core.cli.main", "up", "--cluster", str(tmp / "cluster.yaml"),
         "--teams", str(tmp / "teams.yaml"), "--state-dir", str(state), "--port", str(api_port),
         "--hub-url", f"http://127.0.0.1:{port}", "--hub-api-port", str(hub_port),
         "--hub-proxy-api-port", str(proxy_port), "--hub-users", str(tmp / "users.yaml"),
         "--hub-password", PASSWORD, "--hub-extra-config", str(tmp / "hub_extra.py")],
        cwd=tmp, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(url=f"http://127.0.0.1:{port}", api=f"http://127.0.0.1:{port}/hub/api", token=token,
              state=state / "hub", proc=proc, log=log)

    def up() -> bool:
        if proc.poll() is not None:
            raise GaveUp(f"shoal up exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        return hub.http.get(f"{hub.api}/users").status_code == 200

    output = ROOT / "test-output" / "hub"
    output.mkdir(parents=True, exist_ok=True)
    try:
        wait_for(up, timeout=120, what="shoal up's JupyterHub", interval=0.3)
        shoal_url = f"http://127.0.0.1:{api_port}"
        admin = subprocess.run(
            [sys.executable, "-m", "scheduler_core.cli.main", "token", "create", "--user", "test-reaper",
             "--team", "fraud-ml", "--admin", "--state-dir", str(state)],
            capture_output=True, text=True, timeout=60, env=env)
        assert admin.returncode == 0, admin.stderr
        yield Stack(hub=hub, shoal_url=shoal_url, shoal_admin_token=admin.stdout.strip(), state_dir=state,
                    output=output, proc=proc, log=log)
    finally:
        hub.http.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        shutil.copy(log, output / "shoal-up.log")
        hub_log = state / "hub" / "jupyterhub.log"
        if hub_log.exists():
            shutil.copy(hub_log, output / "jupyterhub.log")
        print(f"\nshoal up's logs: {output}/shoal-up.log, {output}/jupyterhub.log")
