"""Where the API is and who is calling, found the same way by the CLI, the SDK, the magics and the sweeps.

Each of the URL and the token is taken from the first place that has it:

1. the arguments (``ShoalClient(url, token)``);
2. ``SHOAL_URL`` / ``SHOAL_TOKEN`` in the environment (an explicit choice always wins over a guess);
3. inside a server spawned by JupyterHub, the hub's own environment: the token is the server's
   ``JUPYTERHUB_API_TOKEN`` (the scheduler runs as hub service ``shoal`` and accepts hub tokens), and the API is the
   hub's public address + ``services/shoal`` (from ``JUPYTERHUB_PUBLIC_HUB_URL``, else ``JUPYTERHUB_PUBLIC_URL``,
   which the hub sets when ``c.JupyterHub.public_url`` is configured, as ``shoal up`` does);
4. the config file ``$XDG_CONFIG_HOME/shoal/config`` (``~/.config/shoal/config``), TOML::

       url = "http://127.0.0.1:8080"
       token = "shoal_..."

5. the URL alone defaults to ``DEFAULT_URL``; a missing token stays ``None`` (the server answers 401).

``ClientConfig.source`` says where each value came from, so an error can name what to fix.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:8080"

#: The hub service name the scheduler is registered under (``shoal up`` and deploy/jupyterhub_config.py).
HUB_SERVICE = "shoal"


class Source(str, Enum):
    """Where a URL or token was found (the order is the order of precedence)."""

    ARGUMENT = "argument"
    ENVIRONMENT = "SHOAL_URL/SHOAL_TOKEN"
    HUB = "JupyterHub environment"
    FILE = "config file"
    DEFAULT = "default"
    NONE = "nowhere"


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "shoal" / "config"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    url: str
    token: str | None
    url_source: Source = Source.ARGUMENT
    token_source: Source = Source.ARGUMENT

    @classmethod
    def resolve(cls, url: str | None = None, token: str | None = None, *, path: Path | None = None,
                environ: Mapping[str, str] | None = None) -> ClientConfig:
        """The one discovery every client uses (the order is in the module docs)."""
        return discover(url, token, path=path, environ=environ)

    def describe(self) -> str:
        """``http://... (URL from the config file, token from the JupyterHub environment)``, for error messages."""
        return f"{self.url} (URL from {self.url_source.value}, token from {self.token_source.value})"


def hub_api_url(environ: Mapping[str, str]) -> str | None:
    """The scheduler's address under the hub this server was spawned by, or ``None`` outside a hub.

    ``JUPYTERHUB_PUBLIC_HUB_URL`` is the hub's own page (``http://host:8000/prefix/hub/``) and
    ``JUPYTERHUB_PUBLIC_URL`` this server's (``http://host:8000/prefix/user/ana/``); the services live beside them,
    under the hub's base URL (``JUPYTERHUB_BASE_URL``, ``/prefix/``)."""
    hub_page, server_page = environ.get("JUPYTERHUB_PUBLIC_HUB_URL"), environ.get("JUPYTERHUB_PUBLIC_URL")
    public = hub_page or server_page
    if not public:
        return None
    parts = urlsplit(public)
    if not parts.scheme or not parts.netloc:
        return None
    base = environ.get("JUPYTERHUB_BASE_URL")
    if base is None:  # derive it: cut the hub's "hub/", or the server's "user/NAME/", off the page's path
        marker = "/hub/" if hub_page else "/user/"
        path = "/" + parts.path.strip("/") + "/"
        cut = (path.rindex if hub_page else path.index)(marker) if marker in path else 0
        base = path[:cut + 1]
    base = "/" + base.strip("/") + "/" if base.strip("/") else "/"
    return f"{parts.scheme}://{parts.netloc}{base}services/{HUB_SERVICE}"


def discover(url: str | None = None, token: str | None = None, *, path: Path | None = None,
             environ: Mapping[str, str] | None = None) -> ClientConfig:
    env = os.environ if environ is None else environ
    file_values = _read(path or config_path(env))
    hub_url = hub_api_url(env)
    hub_token = env.get("JUPYTERHUB_API_TOKEN") or None
    urls = ((url, Source.ARGUMENT), (env.get("SHOAL_URL"), Source.ENVIRONMENT), (hub_url, Source.HUB),
            (file_values.get("url"), Source.FILE), (DEFAULT_URL, Source.DEFAULT))
    tokens = ((token, Source.ARGUMENT), (env.get("SHOAL_TOKEN"), Source.ENVIRONMENT), (hub_token, Source.HUB),
              (file_values.get("token"), Source.FILE))
    found_url, url_source = next((v, s) for v, s in urls if v)
    found_token, token_source = next(((v, s) for v, s in tokens if v), (None, Source.NONE))
    return ClientConfig(url=found_url.rstrip("/"), token=found_token, url_source=url_source,
                        token_source=token_source)


def _read(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=str(path)) from None
    out: dict[str, str] = {}
    for key in ("url", "token"):
        value = data.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise ConfigError(f"{key} must be a string", path=str(path), field=key)
            out[key] = value
    return out
