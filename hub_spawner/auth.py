"""``ShoalLocalAuthenticator``: the embedded default's users and their teams, from one small YAML file.

For a laptop or a demo only: one shared password from config (like JupyterHub's DummyAuthenticator), users and
the teams they belong to from ``users.yaml``. The teams become hub groups (``manage_groups``), which is where the
spawner and the scheduler API read a user's team, so any production authenticator that sets groups (OAuth, LDAP)
works the same way. ::

    users:
      alice: {teams: [fraud-ml], admin: true}
      bob: {teams: [search]}
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

import yaml
from jupyterhub.auth import Authenticator
from traitlets import Unicode, default


class UsersFileError(ValueError):
    """The users file is wrong; the message names the file and the entry."""


def load_users(path: Path) -> dict[str, dict[str, Any]]:
    """``{name: {"teams": [...], "admin": bool}}`` from the file, every entry checked."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsersFileError(f"{path}: cannot read users: {exc}") from None
    users = raw.get("users") if isinstance(raw, dict) else None
    if not isinstance(users, dict) or not users:
        raise UsersFileError(f"{path}: expected a mapping 'users:' of user name → {{teams: [...], admin: bool}}")
    result: dict[str, dict[str, Any]] = {}
    for name, entry in users.items():
        entry = entry or {}
        if not isinstance(entry, dict) or set(entry) - {"teams", "admin"}:
            raise UsersFileError(f"{path}: users.{name}: give only 'teams' (a list) and 'admin' (true/false)")
        teams = entry.get("teams", [])
        if not isinstance(teams, list) or not all(isinstance(t, str) for t in teams):
            raise UsersFileError(f"{path}: users.{name}.teams must be a list of team names")
        result[str(name)] = {"teams": list(teams), "admin": bool(entry.get("admin", False))}
    return result


class ShoalLocalAuthenticator(Authenticator):  # type: ignore[misc]  # jupyterhub ships no type hints
    users_file = Unicode(help="YAML file of users and their teams (see the module docstring).").tag(config=True)
    password = Unicode(help="The one password every listed user logs in with (demo only).").tag(config=True)
    team_group_prefix = Unicode("", help="Prefix of the hub groups that name teams.").tag(config=True)

    @default("manage_groups")
    def _default_manage_groups(self) -> bool:
        return True

    @default("allow_all")
    def _default_allow_all(self) -> bool:
        return True  # the users file is the allow list; authenticate() refuses anyone else

    def users(self) -> dict[str, dict[str, Any]]:
        return load_users(Path(self.users_file))

    async def authenticate(self, handler: Any, data: dict[str, str]) -> dict[str, Any] | None:
        name = (data.get("username") or "").strip()
        entry = self.users().get(name)
        if entry is None or not self.password:
            self.log.warning("refused login for %r: %s", name, "not in the users file" if entry is None
                             else "no password is configured")
            return None
        if not hmac.compare_digest(data.get("password", "").encode(), self.password.encode()):
            return None
        return {"name": name, "admin": entry["admin"],
                "groups": [self.team_group_prefix + team for team in entry["teams"]]}
