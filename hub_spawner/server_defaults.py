"""Shoal's defaults for the local single-user servers: work a shared, offline cluster's notebook never needs.

Profiled on a server's start and JupyterLab's first load (docs/BENCHMARKS.md), each of these costs CPU on the
notebook's machine while the user waits, or tries the network, for a feature this platform does not offer:

* ``LabApp.extension_manager = "readonly"``: the PyPI manager builds an HTTPS client (CA bundle and all) at start,
  to install extensions from pypi.org with pip into the shared environment; extensions come with the environment;
* ``LabApp.news_url = None`` and ``NeverCheckForUpdate``: no announcements feed or release check from the internet;
* ``buildCheck``/``buildAvailable`` off (page config): JupyterLab otherwise runs ``node yarn config`` on every
  first load to see whether a *source* extension needs a rebuild, which a prebuilt environment never does;
* the ``jupyter_lsp`` server extension off: at every start it scans all entry points and runs ``npm prefix -g``
  looking for language servers, for JupyterLab's LSP features, which are off unless a user turns them on and
  installs a language server (docs/notebooks.md says how to turn it back on).

They are a configuration directory added to ``JUPYTER_CONFIG_PATH``, which Jupyter ranks above the environment's
``etc/jupyter`` and the user's ``~/.jupyter``: platform settings, like the rest of the environment. Command-line
options (``Spawner.args``) still override them, and ``ShoalSpawner.server_defaults = False`` leaves the layer out
(the spawner then sets ``SHOAL_SERVER_DEFAULTS=0`` for the server). Kubernetes pods run the image's own server and
config.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

SERVER_CONFIG: dict[str, Any] = {
    "LabApp": {"extension_manager": "readonly", "news_url": None,
               "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"},
    "ServerApp": {"jpserver_extensions": {"jupyter_lsp": False}},
}
PAGE_CONFIG: dict[str, Any] = {"buildCheck": False, "buildAvailable": False}


def _files() -> dict[str, str]:
    return {"jupyter_server_config.json": json.dumps(SERVER_CONFIG, indent=1, sort_keys=True),
            os.path.join("labconfig", "page_config.json"): json.dumps(PAGE_CONFIG, indent=1, sort_keys=True)}


def config_dir() -> Path:
    """The directory holding these defaults, written once per content (its name is their hash) and atomically, so
    concurrent servers never read a half-written file."""
    files = _files()
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"shoal-server-config-{os.getuid()}-{digest}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    for name, text in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_text(text)
    try:
        os.rename(staging, target)
    except OSError:   # another server got there first
        for name in files:
            (staging / name).unlink(missing_ok=True)
        (staging / "labconfig").rmdir()
        staging.rmdir()
    return target


#: Set to "0" in a server's environment to leave these defaults out.
SWITCH = "SHOAL_SERVER_DEFAULTS"


def apply(environ: MutableMapping[str, str]) -> None:
    """Add the defaults' directory to ``JUPYTER_CONFIG_PATH``, unless ``SHOAL_SERVER_DEFAULTS=0``."""
    if environ.get(SWITCH, "1") == "0":
        return
    directory = str(config_dir())
    paths = [p for p in environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    if directory not in paths:
        environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([*paths, directory])
