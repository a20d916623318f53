"""The dashboard at ``/services/shoal/``: my team's queue with reasons and estimates, a job's events and live logs,
the cluster's free GPUs beside its largest free shape, and sweeps (DESIGN §3.4).

Served by the API's own tornado process, from server-side templates (tornado's, autoescaped) with plots drawn as
SVG on the server: no CDN, no JavaScript build, a few lines of inline script for the live log. Every figure comes
from the ``ApiService`` the API answers with, as the same identity, so a page shows exactly what the API would
(another team's job is a 404 here as it is a 403 there). Logged in through the hub (``login``).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..api.service import ApiService
from .login import HubCookies, OAuthCallbackHandler
from .pages import DashboardContext, dashboard_routes

TEMPLATES = Path(__file__).resolve().parent / "templates"


def dashboard_app_arguments(service: ApiService, oauth: Any, cookies: HubCookies, *, cookie_secret: bytes,
                            admin_services: Collection[str] = (), prefix: str = "/services/shoal/"
                            ) -> dict[str, Any]:
    """What ``api.make_app`` takes to serve the dashboard beside the API: its routes, the hub cookie for the API's
    reads, and the tornado settings the pages need (templates, the cookie signing secret)."""
    ctx = DashboardContext(service=service, oauth=oauth, prefix=prefix, admin_services=frozenset(admin_services))
    routes: list[tuple[str, Any, dict[str, Any]]] = [
        (prefix + "oauth_callback", OAuthCallbackHandler, {"oauth": oauth}),
        *dashboard_routes(ctx),
    ]
    return {"cookies": cookies, "extra_routes": routes, "cookie_secret": cookie_secret,
            "template_path": str(TEMPLATES)}
