"""The dashboard's pages: tornado handlers that ask ``ApiService`` as the logged-in user and render a template.

Each handler is thin, as the API's are: who the user is comes from the hub (``DashboardHandler.prepare``), what
they may see is decided by ``ApiService`` exactly as for the API, and what a page shows is assembled by the pure
functions of ``figures``. A job or team the user may not read is a 404 (the API's 403 names the owner; a page does
not even say that it exists).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tornado.web
from jupyterhub.services.auth import HubOAuth, HubOAuthenticated

from ..api.hub_auth import identity_from_hub_model
from ..api.service import ApiService
from ..auth.tokens import Identity

T = TypeVar("T")


@dataclass(frozen=True)
class DashboardContext:
    service: ApiService
    oauth: HubOAuth
    prefix: str
    admin_services: frozenset[str] = frozenset()


class DashboardHandler(HubOAuthenticated, tornado.web.RequestHandler):  # type: ignore[misc]
    """A page for a user logged in through the hub; one who is not is sent to the hub's OAuth first."""

    dash: DashboardContext
    identity: Identity

    def initialize(self, dash: DashboardContext) -> None:
        self.dash = dash
        self.hub_auth = dash.oauth
        self._model: dict[str, Any] | None = None

    def get_current_user(self) -> dict[str, Any] | None:
        return self._model

    async def prepare(self) -> None:
        model = await self.hub_auth.get_user(self, sync=False)
        if model is not None:
            model = self.check_hub_user(model)  # raises 403 for a hub user without this service's scope
        self._model = model
        if model is None:
            if self.request.method in ("GET", "HEAD"):
                self.redirect(self.get_login_url())
                return
            raise tornado.web.HTTPError(403, "log in through the hub first")
        identity = identity_from_hub_model(model, service_name="shoal", teams=self.dash.service.teams,
                                           admin_services=self.dash.admin_services)
        if identity is None:
            raise tornado.web.HTTPError(403, f"hub user {model.get('name')!r} is in no team of this cluster")
        self.identity = identity

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking ``ApiService`` call in a worker thread, so the event loop keeps serving."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def get_template_namespace(self) -> dict[str, Any]:
        namespace = super().get_template_namespace()
        namespace.update(prefix=self.dash.prefix, me=self.identity)
        return namespace


class TeamPage(DashboardHandler):
    async def get(self) -> None:
        self.render("team.html")


def dashboard_routes(dash: DashboardContext) -> list[tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]]:
    args = {"dash": dash}
    return [
        (dash.prefix, TeamPage, args),
    ]
