"""Hub tokens on the Shoal API: who a hub token is, which team, and that a wrong or foreign token opens nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from scheduler_core.api.hub_auth import HubAuthenticator, identity_from_hub_model
from scheduler_core.auth.tokens import Identity

TEAMS = ("fraud-ml", "search", "genai-core")
ACCESS = ["access:services!service=shoal", "users:activity!user"]


def hub_user(name: str = "alice", groups: tuple[str, ...] = ("fraud-ml",), scopes: list[str] = ACCESS,
             **extra: Any) -> dict[str, Any]:
    return {"kind": "user", "name": name, "groups": list(groups), "scopes": scopes, **extra}


@pytest.mark.parametrize("model, prefix, identity", [
    (hub_user(), "", Identity("alice", "fraud-ml")),
    (hub_user(groups=("search", "fraud-ml", "admins")), "", Identity("alice", "fraud-ml",
                                                                     other_teams=frozenset({"search"}))),
    (hub_user(groups=("team-search", "search-readers")), "team-", Identity("alice", "search")),
    (hub_user(scopes=["access:services"]), "", Identity("alice", "fraud-ml")),
    (hub_user(admin=True), "", Identity("alice", "fraud-ml", admin=True)),
    (hub_user(groups=("admins",)), "", None),                                     # in no known team
    (hub_user(scopes=["access:services!service=other", "read:users"]), "", None),  # not a token for Shoal
    ({"kind": "service", "name": "shoal-reaper", "scopes": []}, "", Identity("service:shoal-reaper", "",
                                                                            admin=True)),
    ({"kind": "service", "name": "someone-else", "scopes": ["access:services"]}, "", None),
])
def test_identity_from_hub_model(model: dict[str, Any], prefix: str, identity: Identity | None) -> None:
    assert identity_from_hub_model(model, service_name="shoal", teams=TEAMS, group_prefix=prefix,
                                   admin_services=["shoal-reaper"]) == identity


def test_a_user_in_two_teams_may_act_on_both_and_no_other() -> None:
    identity = identity_from_hub_model(hub_user(groups=("search", "fraud-ml")), service_name="shoal", teams=TEAMS)
    assert identity is not None
    assert [identity.may_act_on(t) for t in TEAMS] == [True, True, False]


class Hub:
    """Answers ``GET /hub/api/user`` the way JupyterHub does, and counts the questions."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {"tok-alice": hub_user()}
        self.calls = 0
        self.down = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        assert request.url.path == "/hub/api/user"
        if self.down:
            return httpx.Response(503)
        token = request.headers["Authorization"].removeprefix("token ")
        model = self.users.get(token)
        return httpx.Response(200, json=model) if model else httpx.Response(403, json={"status": 403})


def _authenticator(hub: Hub, clock: list[float]) -> HubAuthenticator:
    return HubAuthenticator("http://hub.test/hub/api", service_name="shoal", teams=lambda: TEAMS,
                            transport=httpx.MockTransport(hub.handle), clock=lambda: clock[0], ttl_s=30)


def test_answers_are_cached_for_the_ttl_and_asked_again_after() -> None:
    hub, clock = Hub(), [0.0]
    auth = _authenticator(hub, clock)

    async def scenario() -> list[Identity | None]:
        seen = [await auth.authenticate("tok-alice"), await auth.authenticate("tok-alice")]
        hub.users["tok-alice"] = hub_user(groups=("search",))
        clock[0] = 31.0
        seen.append(await auth.authenticate("tok-alice"))
        await auth.aclose()
        return seen

    first, cached, later = asyncio.run(scenario())
    assert first == cached == Identity("alice", "fraud-ml") and later == Identity("alice", "search")
    assert hub.calls == 2


def test_unknown_tokens_are_refused_shoal_tokens_never_reach_the_hub_and_a_hub_outage_is_not_cached() -> None:
    hub, clock = Hub(), [0.0]
    auth = _authenticator(hub, clock)

    async def scenario() -> list[Identity | None]:
        seen = [await auth.authenticate("tok-mallory"), await auth.authenticate("shoal_abc")]
        hub.down = True
        seen.append(await auth.authenticate("tok-alice"))
        hub.down = False
        seen.append(await auth.authenticate("tok-alice"))
        await auth.aclose()
        return seen

    assert asyncio.run(scenario()) == [None, None, None, Identity("alice", "fraud-ml")]
    assert hub.calls == 3  # mallory, alice during the outage, alice after: shoal_abc never asked
