"""A hub user's team is one of their hub groups: the scheduler accounts every notebook to a team.

The same rule runs in the scheduler API (``scheduler_core.api.hub_auth``) when it accepts hub tokens; the spawner
applies it first only to show a team choice and to refuse early, with a message the user can act on.
"""

from __future__ import annotations

import re
from typing import Iterable

_TEAM_NAME = re.compile(r"^[a-z0-9]([a-z0-9\-]*[a-z0-9])?$")


class NoTeam(ValueError):
    """The user belongs to no team group, or chose a team they are not in."""


def teams_from_groups(groups: Iterable[str], prefix: str = "") -> list[str]:
    """Team names from group names: groups that start with ``prefix`` and whose rest is a valid team name."""
    teams = {g[len(prefix):] for g in groups if g.startswith(prefix) and _TEAM_NAME.match(g[len(prefix):])}
    return sorted(teams)


def choose_team(user: str, teams: list[str], requested: str | None) -> str:
    """The team a notebook is accounted to: the requested one if the user is in it, else their only team."""
    if not teams:
        raise NoTeam(f"{user} is in no team, so there is no quota to run a notebook on; "
                     f"ask a hub admin to add you to your team's group")
    if requested:
        if requested not in teams:
            raise NoTeam(f"{user} is not in team {requested!r}; your teams: {', '.join(teams)}")
        return requested
    if len(teams) > 1:
        raise NoTeam(f"{user} is in several teams ({', '.join(teams)}); choose one on the spawn form")
    return teams[0]
