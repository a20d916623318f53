"""The profile list and the team rule: what a user may ask for, checked on the server whatever the form sent."""

from __future__ import annotations

from typing import Any

import pytest

from hub_spawner.notebook_job import LABEL_HUB_USER, job_name, notebook_spec
from hub_spawner.profiles import (DEFAULT_PROFILES, ProfileError, choose_profile, load_profiles, options_from_form,
                                  render_form)
from hub_spawner.teams import NoTeam, choose_team, teams_from_groups

PROFILES = load_profiles(DEFAULT_PROFILES)


def test_default_profiles_offer_the_three_slices_and_a_whole_h100_with_1g_by_default() -> None:
    assert [(p.slug, p.flavour) for p in PROFILES] == [
        ("mig-1g", "h100-mig-1g"), ("mig-2g", "h100-mig-2g"), ("mig-3g", "h100-mig-3g"), ("h100", "h100")]
    assert choose_profile(PROFILES, {}).slug == "mig-1g"


@pytest.mark.parametrize("options, slug", [
    ({"profile": "mig-3g"}, "mig-3g"),
    ({"profile": ["h100"]}, "h100"),          # raw form data that bypassed options_from_form
    ({"profile": ""}, "mig-1g"),
    ({"team": "search"}, "mig-1g"),
])
def test_choose_profile(options: dict[str, Any], slug: str) -> None:
    assert choose_profile(PROFILES, options).slug == slug


@pytest.mark.parametrize("options", [{"profile": "a100-x8"}, {"profile": "<script>"}, {"profile": ["a", "b"]}])
def test_choose_profile_refuses_what_the_list_does_not_offer(options: dict[str, Any]) -> None:
    with pytest.raises(ProfileError, match="choose one of: mig-1g, mig-2g, mig-3g, h100"):
        choose_profile(PROFILES, options)


@pytest.mark.parametrize("raw, message", [
    ([], "empty"),
    ([{"slug": "x", "flavour": "tpu"}], "unknown flavour 'tpu'"),
    ([{"slug": "x"}], "lacks 'flavour'"),
    ([{"slug": "x", "flavour": "h100", "gpus": 2}], "unknown keys \\['gpus'\\]"),
    ([{"slug": "x", "flavour": "h100"}, {"slug": "x", "flavour": "a100"}], "repeated: \\['x'\\]"),
    ([{"slug": "x", "flavour": "h100", "default": True}, {"slug": "y", "flavour": "a100", "default": True}],
     "only one profile may be the default"),
    ([{"slug": "x", "flavour": "h100", "units": 0}], "units must be at least 1"),
])
def test_load_profiles_names_the_mistake(raw: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        load_profiles(raw)


def test_form_offers_every_profile_with_the_default_checked_and_escapes_text() -> None:
    profiles = load_profiles([{"slug": "a", "flavour": "h100", "display_name": "<b>A</b>"},
                              {"slug": "b", "flavour": "h100-mig-1g", "default": True}])
    form = render_form(profiles, teams=["fraud-ml", "search"], notice="stopped <idle>")
    assert 'value="b" checked' in form and 'value="a">' in form
    assert "&lt;b&gt;A&lt;/b&gt;" in form and "stopped &lt;idle&gt;" in form
    assert '<option value="search">' in form
    assert "<select" not in render_form(profiles, teams=["fraud-ml"])


def test_options_from_form_keeps_only_the_offered_fields() -> None:
    assert options_from_form({"profile": ["mig-2g"], "team": ["search"], "image": ["evil"]}) == {
        "profile": "mig-2g", "team": "search"}


@pytest.mark.parametrize("groups, prefix, teams", [
    (["fraud-ml", "admins"], "", ["admins", "fraud-ml"]),
    (["team-fraud-ml", "admins", "team-search"], "team-", ["fraud-ml", "search"]),
    (["team-Bad_Name", "team-"], "team-", []),
])
def test_teams_from_groups(groups: list[str], prefix: str, teams: list[str]) -> None:
    assert teams_from_groups(groups, prefix) == teams


@pytest.mark.parametrize("teams, requested, result", [
    (["fraud-ml"], None, "fraud-ml"),
    (["fraud-ml", "search"], "search", "search"),
    ([], None, NoTeam("is in no team")),
    (["fraud-ml", "search"], None, NoTeam("several teams")),
    (["fraud-ml"], "search", NoTeam("not in team 'search'")),
])
def test_choose_team(teams: list[str], requested: str | None, result: str | NoTeam) -> None:
    if isinstance(result, NoTeam):
        with pytest.raises(NoTeam, match=str(result)):
            choose_team("alice", teams, requested)
    else:
        assert choose_team("alice", teams, requested) == result


def test_notebook_spec_is_a_non_preemptible_single_pod_notebook_with_a_safe_name() -> None:
    spec = notebook_spec(user="ann@corp.example", server_name="", team="search", profile=PROFILES[1],
                         command=["python", "-m", "hub_spawner.launch", "f", "--", "jupyterhub-singleuser"])
    assert spec.kind == "notebook" and spec.pods == 1 and spec.gpus_per_pod == 1
    assert spec.flavour == ("h100-mig-2g",) and spec.team == "search"
    assert not spec.preemptible and spec.max_restarts == 0
    assert spec.name == "notebook-ann-corp.example" == job_name("ann@corp.example", "")
    assert spec.labels[LABEL_HUB_USER] == "ann-corp.example"
