"""A browser logged in through JupyterHub's OAuth, as every hub service does it (no second login).

``jupyterhub.services.auth.HubOAuth`` runs the OAuth dance: a page that needs a user redirects to the hub's
``/hub/api/oauth2/authorize``; the hub, its own login cookie already set, sends the browser back to
``/services/shoal/oauth_callback`` with a code; the callback trades it for an OAuth token of that user and keeps the
token in a signed cookie (``service-shoal``) on the service's path. Each request's cookie is then checked with the
hub (cached for ``ttl_s``). JupyterHub's own XSRF rules come with it: a cookie-authenticated POST needs the ``_xsrf``
form field of a page the service rendered.

The token in the cookie is an ordinary hub token of the user, scoped ``access:services!service=shoal``, so the API
reads it with the same ``HubAuthenticator`` that reads a notebook's ``JUPYTERHUB_API_TOKEN`` (``HubCookies``).

Imported only when ``shoal up`` runs beside a hub: JupyterHub is an optional dependency of the core.
"""

from __future__ import annotations

from typing import Any

import tornado.web
from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler

from ..api.auth import Authenticator
from ..auth.tokens import Identity


def hub_oauth(*, hub_api_url: str, service_name: str, service_token: str, ttl_s: int = 30) -> HubOAuth:
    """The hub's OAuth client for service ``service_name``, whose client secret is its ``service_token``.

    Configured explicitly, not from ``JUPYTERHUB_*`` variables: the hub does not start this process
    (``shoal up`` starts the hub), so nothing sets them."""
    return HubOAuth(api_token=service_token, api_url=hub_api_url.rstrip("/"), hub_prefix="/hub/",
                    base_url=f"/services/{service_name}/", oauth_client_id=f"service-{service_name}",
                    access_scopes={f"access:services!service={service_name}"}, cache_max_age=ttl_s)


class HubCookies:
    """The API's ``CookieAuthenticator``: the OAuth token in the dashboard's cookie, judged as any hub token."""

    def __init__(self, oauth: HubOAuth, tokens: Authenticator) -> None:
        self._cookie_name = str(oauth.cookie_name)
        self._tokens = tokens

    async def from_cookie(self, handler: tornado.web.RequestHandler) -> Identity | None:
        raw = handler.get_signed_cookie(self._cookie_name)
        if not raw:
            return None
        return await self._tokens.authenticate(raw.decode("ascii", "replace"))


class OAuthCallbackHandler(HubOAuthCallbackHandler):  # type: ignore[misc]
    """``/services/shoal/oauth_callback``: JupyterHub's own, given this process's ``HubOAuth``."""

    def initialize(self, oauth: HubOAuth, **_: Any) -> None:
        self.hub_auth = oauth
