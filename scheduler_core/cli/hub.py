"""JupyterHub as a child of ``shoal up``: the embedded default's notebooks (DESIGN §4, §8).

``shoal up`` composes the scheduler and then starts JupyterHub (which starts configurable-http-proxy) with
``deploy/jupyterhub_config.py``; the scheduler's API is registered there as the hub service ``shoal`` with its
URL, so the hub's proxy forwards ``/services/shoal/`` to it (the API under ``/services/shoal/v1/``, the dashboard at
``/services/shoal/``), and it accepts hub tokens (``api.hub_auth``) and the hub's OAuth cookie (``dashboard.login``). Everything the hub needs comes through environment variables, so this module knows
nothing of the spawner: the core never imports the packages built on it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_HUB_CONFIG = ROOT / "deploy" / "jupyterhub_config.py"
DEFAULT_USERS = ROOT / "deploy" / "hub" / "users.yaml"
#: The hub service name the API answers to; the spawner's tokens carry ``access:services!service=shoal``.
SERVICE_NAME = "shoal"
#: Where the hub's proxy mounts the service: the API and the dashboard answer under it too.
SERVICE_PREFIX = f"/services/{SERVICE_NAME}/"
#: Hub services that act as admins on the API (the idle reaper cancels any team's idle notebook).
ADMIN_SERVICES = ("shoal-reaper",)


@dataclass(frozen=True, slots=True)
class HubSettings:
    shoal_url: str
    state_dir: Path
    public_url: str = "http://127.0.0.1:8000"
    hub_api_port: int = 8081
    proxy_api_port: int = 8001
    users_file: Path = DEFAULT_USERS
    password: str = field(default_factory=lambda: secrets.token_urlsafe(9))
    config_file: Path = DEFAULT_HUB_CONFIG
    extra_config: Path | None = None
    reaper_timeout: str = "1h"
    reaper_every: str = "5m"
    #: The ``shoal`` service's own hub token: its OAuth client secret, with which the dashboard logs users in.
    service_token: str = field(default_factory=lambda: secrets.token_hex(32), repr=False)

    @property
    def hub_api_url(self) -> str:
        return f"http://127.0.0.1:{self.hub_api_port}/hub/api"


def hub_environment(settings: HubSettings, base: dict[str, str] | None = None) -> dict[str, str]:
    """The variables ``deploy/jupyterhub_config.py`` reads (pure, so it is tested without a hub)."""
    env = dict(os.environ if base is None else base)
    node_bin = str(ROOT / "node_modules" / ".bin")
    env["PATH"] = os.pathsep.join([node_bin, str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update({
        "SHOAL_URL": settings.shoal_url,
        "SHOAL_HUB_URL": settings.public_url,
        "SHOAL_HUB_API_PORT": str(settings.hub_api_port),
        "SHOAL_HUB_PROXY_API_PORT": str(settings.proxy_api_port),
        "SHOAL_HUB_STATE": str(settings.state_dir),
        "SHOAL_HUB_USERS": str(settings.users_file),
        "SHOAL_HUB_PASSWORD": settings.password,
        "SHOAL_REAPER_TIMEOUT": settings.reaper_timeout,
        "SHOAL_REAPER_EVERY": settings.reaper_every,
        "SHOAL_HUB_SERVICE_TOKEN": settings.service_token,
    })
    if settings.extra_config is not None:
        env["SHOAL_HUB_EXTRA_CONFIG"] = str(settings.extra_config)
    return env


def check_prerequisites(settings: HubSettings, env: dict[str, str]) -> None:
    """Refuse early, with the fix, when something the hub needs is missing."""
    if shutil.which("configurable-http-proxy", path=env["PATH"]) is None:
        raise ConfigError("configurable-http-proxy is not installed; run `make up` (it runs `npm install`), "
                          "or start without notebooks: `shoal up --no-hub`")
    if not settings.config_file.exists():
        raise ConfigError(f"the JupyterHub config {settings.config_file} does not exist")
    if not settings.users_file.exists():
        raise ConfigError(f"the hub's users file {settings.users_file} does not exist")
    import importlib.util
    if importlib.util.find_spec("jupyterhub") is None:
        raise ConfigError("JupyterHub is not installed; `pip install 'shoal[jupyter]'` or `make up`") from None


class HubProcess:
    """JupyterHub running as a child process; its output goes to ``<state_dir>/jupyterhub.log``."""

    def __init__(self, settings: HubSettings) -> None:
        self.settings = settings
        self.log_path = settings.state_dir / "jupyterhub.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout: float = 60.0) -> HubProcess:
        env = hub_environment(self.settings)
        check_prerequisites(self.settings, env)
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(self.settings.config_file)],
                cwd=self.settings.state_dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_up(timeout)
        return self

    def _wait_until_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace").splitlines()[-20:]
                raise ConfigError("JupyterHub exited at start:\n" + "\n".join(tail))
            try:
                if httpx.get(f"{self.settings.public_url}/hub/api/", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ConfigError(f"JupyterHub did not answer at {self.settings.public_url} within {timeout:.0f} s; "
                          f"see {self.log_path}")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: the hub stops its notebooks (releasing their slices) and its proxy, then exits."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
