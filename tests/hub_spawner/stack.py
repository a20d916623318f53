"""A real JupyterHub (with configurable-http-proxy) for the hub tests, on free ports in a temp dir.

The hub runs ``deploy/jupyterhub_config.py`` itself, through a small test config that adds one admin service
whose token the test drives the hub's REST API with. Everything waits on conditions with deadlines.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
HUB_CONFIG = ROOT / "deploy" / "jupyterhub_config.py"




class GaveUp(Exception):
    """Raised by a condition to stop waiting at once (the process it waits on has died)."""


def wait_for(condition: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except GaveUp:
            raise
        except Exception as exc:  # a server still starting refuses connections
            last_error = exc
        time.sleep(interval)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f} s (last error: {last_error!r})")


def chp_available() -> bool:
    return shutil.which("configurable-http-proxy") is not None or (ROOT / "node_modules/.bin").exists()


def _path_with_chp() -> str:
    parts = [str(ROOT / "node_modules" / ".bin"), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    main_bin = Path("/work/main/node_modules/.bin")
    if not (ROOT / "node_modules" / ".bin" / "configurable-http-proxy").exists() and main_bin.exists():
        parts.insert(1, str(main_bin))  # a worktree without its own npm install
    return os.pathsep.join(parts)


@dataclass
class Hub:
    url: str
    api: str
    token: str
    state: Path
    proc: subprocess.Popen[Any]   # its own process, or the ``shoal up`` that started it
    log: Path
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(headers={"Authorization": f"token {self.token}"}, timeout=30)

    def login(self, name: str, password: str = "test-password") -> httpx.Client:
        """Log ``name`` in through the login form, as a browser does; the hub creates the user and their groups."""
        browser = httpx.Client(base_url=self.url, timeout=30, follow_redirects=False)
        browser.get("/hub/login")
        reply = browser.post("/hub/login", data={"username": name, "password": password,
                                                 "_xsrf": browser.cookies.get("_xsrf", "")})
        if reply.status_code != 302:
            raise AssertionError(f"login of {name} failed: {reply.status_code} {reply.text[:300]}")
        return browser

    def user(self, name: str) -> dict[str, Any]:
        reply = self.http.get(f"{self.api}/users/{name}")
        reply.raise_for_status()
        return dict(reply.json())

    def server(self, name: str) -> dict[str, Any] | None:
        return (self.user(name).get("servers") or {}).get("")

    def spawn(self, name: str, **options: Any) -> httpx.Response:
        return self.http.post(f"{self.api}/users/{name}/server", json=options)

    def stop_server(self, name: str) -> httpx.Response:
        return self.http.delete(f"{self.api}/users/{name}/server")

    def progress(self, name: str, *, until: Callable[[dict[str, Any]], bool], timeout: float) -> list[dict[str, Any]]:
        """The spawn's progress events (the spawn page's event stream) until ``until`` says stop."""
        events: list[dict[str, Any]] = []
        with self.http.stream("GET", f"{self.api}/users/{name}/server/progress", timeout=timeout) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    events.append(event)
                    if until(event) or event.get("ready") or event.get("failed"):
                        break
        return events

    def wait_ready(self, name: str, timeout: float) -> dict[str, Any]:
        return dict(wait_for(lambda: (s := self.server(name)) and s.get("ready") and s, timeout=timeout,
                             what=f"{name}'s server ready"))

    def close(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_hub(tmp: Path, *, shoal_url: str, users_yaml: str, password: str = "test-password",
              reaper_timeout: str = "1h", reaper_every: str = "1h", extra_env: dict[str, str] | None = None,
              ports: tuple[int, int, int] | None = None) -> Hub:
    """Start JupyterHub on free ports under ``tmp``; returns when its API answers."""
    tmp.mkdir(parents=True, exist_ok=True)
    users = tmp / "users.yaml"
    users.write_text(users_yaml)
    token = secrets.token_hex(24)
    config = tmp / "test_config.py"
    config.write_text(
        f"load_subconfig({str(HUB_CONFIG)!r})\n"
        f"c.JupyterHub.services.append({{'name': 'test-admin', 'api_token': {token!r}}})\n"
        "c.JupyterHub.load_roles.append({'name': 'test-admin', 'services': ['test-admin'], "
        "'scopes': ['admin:users', 'admin:servers', 'access:servers', 'read:users', 'admin:server_state', "
        "'admin-ui', 'list:users', 'read:servers']})\n"
        "c.JupyterHub.log_level = 'DEBUG'\n")
    port, hub_port, proxy_port = ports or (free_port(), free_port(), free_port())
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PATH": _path_with_chp(), "PYTHONPATH": str(ROOT), "SHOAL_URL": shoal_url,
           "SHOAL_HUB_URL": url, "SHOAL_HUB_API_PORT": str(hub_port), "SHOAL_HUB_PROXY_API_PORT": str(proxy_port),
           "SHOAL_HUB_STATE": str(tmp / "state"), "SHOAL_HUB_USERS": str(users), "SHOAL_HUB_PASSWORD": password,
           "SHOAL_REAPER_TIMEOUT": reaper_timeout, "SHOAL_REAPER_EVERY": reaper_every, **(extra_env or {})}
    log = tmp / "jupyterhub.log"
    proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=tmp, env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(url=url, api=f"{url}/hub/api", token=token, state=tmp / "state", proc=proc, log=log)

    def up() -> bool:
        if proc.poll() is not None:
            raise GaveUp(f"JupyterHub exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        return hub.http.get(f"{hub.api}/").status_code == 200

    try:
        wait_for(up, timeout=60, what="JupyterHub's API")
    except Exception:
        hub.close()
        raise
    return hub


def tail(path: Path, lines: int = 60) -> Iterator[str]:
    yield from path.read_text(errors="replace").splitlines()[-lines:]
