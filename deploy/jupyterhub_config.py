"""JupyterHub for Shoal's embedded default (``shoal up``): notebooks on scheduler-granted MIG slices.

``shoal up`` starts JupyterHub with this file and these variables (each has a default, so it also runs alone):

  SHOAL_URL              the Shoal API, reached directly (default http://127.0.0.1:8080)
  SHOAL_HUB_URL          where users open the hub (default http://127.0.0.1:8000)
  SHOAL_HUB_API_PORT     the hub's own API port (default 8081); SHOAL_HUB_PROXY_API_PORT, CHP's (default 8001)
  SHOAL_HUB_STATE        the hub's database, cookie secret and token files (default ~/.shoal/hub)
  SHOAL_HUB_USERS        users and their teams (default deploy/hub/users.yaml beside this file)
  SHOAL_HUB_PASSWORD     the demo password every listed user logs in with
  SHOAL_REAPER_TIMEOUT   idle limit of the reaper (default 1h); SHOAL_REAPER_EVERY, time between sweeps (5m)
  SHOAL_REAPER_BORROWED_TIMEOUT  idle limit of a notebook on slices its team borrowed (default 10m)
  SHOAL_HUB_SERVICE_TOKEN  the ``shoal`` service's hub token, also its OAuth client secret (the dashboard's login)

The scheduler is the hub service ``shoal`` with its URL, so the proxy forwards ``/services/shoal/`` to it: the same
API as the direct port under ``/services/shoal/v1/``, and the dashboard at ``/services/shoal/``, logged in through
the hub's OAuth. ``public_url`` makes the hub give each server ``JUPYTERHUB_PUBLIC_HUB_URL``, from which a notebook
finds the API with no ``SHOAL_URL``.

Production uses the same spawner and reaper with any JupyterHub authenticator that sets groups (see
docs/notebooks.md for the Kubernetes config).
"""

import os
import sys
from pathlib import Path

from hub_spawner.reaper import REAPER_SCOPES
from hub_spawner.spawner import ShoalSpawner

c = get_config()  # noqa: F821  (JupyterHub's config loader provides it)

here = Path(__file__).resolve().parent
shoal_url = os.environ.get("SHOAL_URL", "http://127.0.0.1:8080")
public_url = os.environ.get("SHOAL_HUB_URL", "http://127.0.0.1:8000")
state = Path(os.environ.get("SHOAL_HUB_STATE", "~/.shoal/hub")).expanduser()
state.mkdir(parents=True, exist_ok=True)

# -- the hub, its proxy and its state -------------------------------------------------------------------------------
c.JupyterHub.bind_url = public_url
c.JupyterHub.public_url = public_url.rstrip("/") + "/"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{os.environ.get('SHOAL_HUB_API_PORT', '8081')}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('SHOAL_HUB_PROXY_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True   # stopping the hub stops the notebooks and releases their slices

# -- who logs in: users and their teams from a small file (any authenticator that sets groups works) ----------------
c.JupyterHub.authenticator_class = "hub_spawner.auth.ShoalLocalAuthenticator"
c.ShoalLocalAuthenticator.users_file = os.environ.get("SHOAL_HUB_USERS", str(here / "hub" / "users.yaml"))
c.ShoalLocalAuthenticator.password = os.environ.get("SHOAL_HUB_PASSWORD", "")

# -- notebooks on MIG slices -----------------------------------------------------------------------------------------
c.JupyterHub.spawner_class = "shoal"
c.ShoalSpawner.shoal_url = shoal_url
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 60
# No SHOAL_URL for servers: %%gpujob, the SDK and the sweeps find the API under the hub (/services/shoal/, from
# JUPYTERHUB_PUBLIC_HUB_URL) and call it with the server's own hub token.
if os.getuid() == 0:
    c.Spawner.args = ["--allow-root"]
# The server's token may call Shoal (as its user, for their team) besides the usual activity and access scopes.
c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", "access:services!service=shoal"]

# -- the scheduler API and the idle reaper, as hub services -----------------------------------------------------------
shoal_service = {"name": "shoal", "url": shoal_url, "display": True, "info": {"description": "Shoal dashboard"},
                 "oauth_no_confirm": True}  # part of the platform: no "authorize access?" page on the way in
if os.environ.get("SHOAL_HUB_SERVICE_TOKEN"):
    shoal_service["api_token"] = os.environ["SHOAL_HUB_SERVICE_TOKEN"]
c.JupyterHub.services = [
    shoal_service,
    {
        "name": "shoal-reaper",
        "command": [sys.executable, "-m", "hub_spawner.reaper",
                    "--timeout", os.environ.get("SHOAL_REAPER_TIMEOUT", "1h"),
                    "--borrowed-timeout", os.environ.get("SHOAL_REAPER_BORROWED_TIMEOUT", "10m"),
                    "--cull-every", os.environ.get("SHOAL_REAPER_EVERY", "5m"),
                    "--proxy-url", public_url, "--shoal-url", shoal_url],
    },
]
c.JupyterHub.load_roles = [
    {"name": "user", "scopes": ["self", "access:services!service=shoal"]},
    {"name": "shoal-reaper", "services": ["shoal-reaper"], "scopes": REAPER_SCOPES},
]

# -- an operator's (or a test's) additions, loaded last ----------------------------------------------------------------
if os.environ.get("SHOAL_HUB_EXTRA_CONFIG"):
    load_subconfig(os.environ["SHOAL_HUB_EXTRA_CONFIG"])  # noqa: F821

# -- warm starts: the single-user server's imports are done before the first user presses Start (local launcher) ----
ShoalSpawner.warm_at_hub_start(c)  # noqa: F821
