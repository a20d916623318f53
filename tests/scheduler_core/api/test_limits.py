"""What a cluster and its teams could ever give a job: the checks the API makes before storing a spec."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler_core.api.auth import TokenAuthenticator, bearer_token
from scheduler_core.api.limits import ClusterLimits, check_spec
from scheduler_core.auth.memory import MemoryTokenStore
from scheduler_core.auth.tokens import Identity
from scheduler_core.model import TeamConfig

from ..runtime_builders import cluster_nodes, make_spec


def teams(**quotas: dict[str, Any]) -> list[TeamConfig]:
    """``teams(a={"h100": {...}}, b=...)``: one cohort, one team per keyword."""
    return [TeamConfig.model_validate({"name": name.replace("_", "-"), "cohort": "c", "quotas": q})
            for name, q in quotas.items()]


@pytest.mark.parametrize(("team_quotas", "pods", "units", "ok"), [
    # nominal 8, may borrow up to 8 of the other's 40 lendable: at most 16
    ({"a": {"h100": {"nominal": 8, "borrowing_limit": 8}}, "b": {"h100": {"nominal": 40}}}, 2, 8, True),
    ({"a": {"h100": {"nominal": 8, "borrowing_limit": 8}}, "b": {"h100": {"nominal": 40}}}, 3, 8, False),
    # no borrowing limit, but the other lends only 8
    ({"a": {"h100": {"nominal": 8}}, "b": {"h100": {"nominal": 40, "lending_limit": 8}}}, 2, 8, True),
    ({"a": {"h100": {"nominal": 8}}, "b": {"h100": {"nominal": 40, "lending_limit": 8}}}, 17, 1, False),
    # no nominal, may borrow: fine
    ({"a": {"h100": {"nominal": 0, "borrowing_limit": 16}}, "b": {"h100": {"nominal": 40}}}, 2, 8, True),
])
def test_a_job_bigger_than_the_team_could_ever_hold_is_refused(team_quotas: dict[str, Any], pods: int, units: int,
                                                               ok: bool) -> None:
    limits = ClusterLimits.build(cluster_nodes(), teams(**team_quotas))

    problems = check_spec(make_spec("j").team("a").pods(pods, units).build(), limits)

    assert (problems == {}) is ok
    if not ok:
        assert "more than team 'a' may ever hold" in problems["pods"]


@pytest.mark.parametrize(("quota", "words"), [
    (None, "team 'a' has no quota for 'h100'"),
    ({"nominal": 0, "borrowing_limit": 0}, "team 'a' has no quota for 'h100' and may not borrow it"),
])
def test_a_team_without_quota_for_a_flavour_cannot_use_it(quota: dict[str, int] | None, words: str) -> None:
    a_quotas = {"h100-mig-1g": {"nominal": 7}} | ({"h100": quota} if quota else {})
    limits = ClusterLimits.build(cluster_nodes(), teams(a=a_quotas, b={"h100": {"nominal": 48}}))

    problems = check_spec(make_spec("j").team("a").pods(1, 8).build(), limits)

    assert words in problems["flavour"]


def test_any_one_listed_flavour_that_could_hold_it_is_enough() -> None:
    limits = ClusterLimits.build(cluster_nodes(), teams(a={"h100": {"nominal": 48}}))

    assert check_spec(make_spec("j").team("a").flavour("a100", "h100").pods(1, 8).build(), limits) == {}
    assert "no 'a100'" in check_spec(make_spec("j").team("a").flavour("a100").pods(1, 8).build(), limits)["flavour"]


def test_hot_spares_do_not_count_as_capacity() -> None:
    limits = ClusterLimits.build(cluster_nodes(), teams(a={"h100": {"nominal": 64}}))

    assert limits.capacity("h100") == 48
    assert "this cluster has 48" in check_spec(make_spec("j").team("a").pods(7, 8).build(), limits)["pods"]


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("token abc", "abc"), ("Basic abc", None), ("Bearer ", None),
    (None, None),
])
def test_bearer_token_parsing(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_the_token_cache_forgets_a_revoked_token_after_its_ttl() -> None:
    now = [0.0]
    store = MemoryTokenStore()
    token = store.create_token(Identity("ana", "a"), now=0)
    auth = TokenAuthenticator(store, ttl_s=30, clock=lambda: now[0])

    assert asyncio.run(auth.authenticate(token)) == Identity("ana", "a")
    store.revoke_token(token)
    now[0] = 29.0
    assert asyncio.run(auth.authenticate(token)) == Identity("ana", "a")
    now[0] = 31.0
    assert asyncio.run(auth.authenticate(token)) is None
