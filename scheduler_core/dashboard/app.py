"""The dashboard's part of the API's tornado application: its routes and settings (``dashboard_app_arguments``).

Imports JupyterHub (the login): ``shoal up`` imports this module only when it runs beside a hub.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..api.logs import LogReader
from ..api.service import ApiService
from .login import HubCookies, OAuthCallbackHandler
from .pages import DashboardContext, dashboard_routes

TEMPLATES = Path(__file__).resolve().parent / "templates"


def dashboard_app_arguments(service: ApiService, oauth: Any, cookies: HubCookies, *, cookie_secret: bytes,
                            admin_services: Collection[str] = (), logs: LogReader | None = None,
                            service_name: str = "shoal") -> dict[str, Any]:
    """What ``api.make_app`` takes to serve the dashboard beside the API, at ``/services/SERVICE_NAME/``: its
    routes, the hub cookie for the API's reads, and the tornado settings the pages need (templates, the cookie
    signing secret)."""
    prefix = f"/services/{service_name}/"
    ctx = DashboardContext(service=service, oauth=oauth, prefix=prefix, admin_services=frozenset(admin_services),
                           logs=logs, service_name=service_name)
    routes: list[tuple[str, Any, dict[str, Any]]] = [
        (prefix + "oauth_callback", OAuthCallbackHandler, {"oauth": oauth}),
        *dashboard_routes(ctx),
    ]
    return {"cookies": cookies, "extra_routes": routes, "cookie_secret": cookie_secret,
            "template_path": str(TEMPLATES)}
