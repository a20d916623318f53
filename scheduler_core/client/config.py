"""Where the API is and who is calling: arguments, then ``SHOAL_URL``/``SHOAL_TOKEN``, then the config file.

The file is ``$XDG_CONFIG_HOME/shoal/config`` (``~/.config/shoal/config``), TOML::

    url = "http://127.0.0.1:8080"
    token = "shoal_..."
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:8080"


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "shoal" / "config"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    url: str
    token: str | None

    @classmethod
    def resolve(cls, url: str | None = None, token: str | None = None, *,
                path: Path | None = None) -> ClientConfig:
        """The first of: the arguments, the environment, the config file; the URL defaults to ``DEFAULT_URL``."""
        file_values = _read(path or config_path())
        resolved_url = url or os.environ.get("SHOAL_URL") or file_values.get("url") or DEFAULT_URL
        resolved_token = token or os.environ.get("SHOAL_TOKEN") or file_values.get("token") or None
        return cls(url=resolved_url.rstrip("/"), token=resolved_token)


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
