"""Hub tokens on the Shoal API: running as a JupyterHub service, a notebook's own token is enough to submit.

The hub says whose a token is (``GET /hub/api/user`` with that token: every hub token may identify itself, and the
answer carries the user's groups and the token's scopes). A user's team is a hub group: ``PREFIX + TEAM`` for a
team this cluster knows. The token must carry ``access:services!service=NAME`` (or ``access:services``), which the
hub grants to the tokens it issues for this service, so a token scoped for something else does not open Shoal.
A hub service listed in ``admin_services`` (the idle reaper) acts as an admin. Answers are cached for ``ttl_s``
(default 30 s), as Shoal's own tokens are: removing a user from a team group takes effect within that time.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any

import httpx

from ..auth.tokens import TOKEN_PREFIX, Identity, hash_token

log = logging.getLogger("shoal.api.hub_auth")


def identity_from_hub_model(model: dict[str, Any], *, service_name: str, teams: Collection[str],
                            group_prefix: str = "", admin_services: Collection[str] = ()) -> Identity | None:
    """The Shoal identity of a hub ``/user`` answer, or ``None`` if it may not use Shoal. Pure: the rule itself."""
    scopes = set(model.get("scopes") or [])
    if model.get("kind") == "service":
        name = str(model.get("name", ""))
        return Identity(user=f"service:{name}", team="", admin=True) if name in admin_services else None
    if not ({"access:services", f"access:services!service={service_name}"} & scopes):
        return None
    groups = [str(g) for g in model.get("groups") or []]
    mine = sorted({g[len(group_prefix):] for g in groups if g.startswith(group_prefix)} & set(teams))
    if not mine:
        return None
    return Identity(user=str(model["name"]), team=mine[0], admin=bool(model.get("admin", False)),
                    other_teams=frozenset(mine[1:]))


class HubAuthenticator:
    """Joins ``api.auth.ChainAuthenticator`` after Shoal's own tokens (which it never sends to the hub)."""

    def __init__(self, hub_api_url: str, *, service_name: str, teams: Callable[[], Collection[str]],
                 group_prefix: str = "", admin_services: Collection[str] = (), ttl_s: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic, max_entries: int = 10_000) -> None:
        self._url = hub_api_url.rstrip("/") + "/user"
        self._service_name = service_name
        self._teams = teams
        self._prefix = group_prefix
        self._admin_services = frozenset(admin_services)
        self._ttl_s = ttl_s
        self._clock = clock
        self._max_entries = max_entries
        self._cache: OrderedDict[str, tuple[Identity | None, float]] = OrderedDict()
        self._http = httpx.AsyncClient(timeout=10.0, transport=transport)

    async def authenticate(self, token: str) -> Identity | None:
        if token.startswith(TOKEN_PREFIX):
            return None  # one of Shoal's own: not the hub's to judge
        key = hash_token(token)
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        identity, definitive = await self._ask_hub(token)
        if not definitive:
            return identity
        self._cache[key] = (identity, now + self._ttl_s)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)
        return identity

    async def _ask_hub(self, token: str) -> tuple[Identity | None, bool]:
        """The identity, and whether the hub's answer was definitive (worth caching)."""
        try:
            reply = await self._http.get(self._url, headers={"Authorization": f"token {token}"})
        except httpx.HTTPError as exc:
            log.warning("cannot reach the hub at %s to check a token: %s", self._url, exc)
            return None, False
        if reply.status_code >= 500:
            return None, False
        if reply.status_code != 200:
            return None, True
        return identity_from_hub_model(reply.json(), service_name=self._service_name, teams=self._teams(),
                                       group_prefix=self._prefix, admin_services=self._admin_services), True

    async def aclose(self) -> None:
        await self._http.aclose()
