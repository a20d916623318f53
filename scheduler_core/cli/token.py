"""``shoal token create | revoke``: API tokens, made on the store by whoever operates it.

``create`` prints the token alone on stdout, so ``export SHOAL_TOKEN=$(shoal token create --user ana --team
fraud-ml)`` works; it is shown once and kept only as a hash.
"""

from __future__ import annotations

import getpass
import time
from pathlib import Path

import click

from ..auth.tokens import Identity
from .state import open_state, state_options


def _login_name() -> str:
    """The caller's login name, also where ``$USER`` is unset (containers, CI, ``sudo -i``)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


@click.group()
def token() -> None:
    """Create or revoke API tokens (operators, on the store)."""


@token.command()
@click.option("--user", default=_login_name, show_default="your login name", help="Who the token acts as.")
@click.option("--team", required=True, help="Their team: whose jobs they may see and submit.")
@click.option("--admin", is_flag=True, help="May act on every team's jobs.")
@click.option("--note", default="", help="A reminder of what the token is for.")
@state_options
def create(user: str, team: str, admin: bool, note: str, state_dir: Path, db_url: str | None) -> None:
    """Create a token for USER of TEAM and print it (once)."""
    if not user.strip():
        raise click.BadParameter("must not be empty", param_hint="--user")
    store = open_state(state_dir, db_url)
    try:
        teams = sorted(t.name for t in store.list_teams())
        if not teams:
            raise click.UsageError(f"the store has no teams yet: start 'shoal up' once (it loads them) with the "
                                   f"same --state-dir/--db")
        if team not in teams and not admin:
            raise click.BadParameter(f"no team {team!r}; teams: {', '.join(teams)}", param_hint="--team")
        secret = store.create_token(Identity(user.strip(), team, admin), now=time.time(), note=note)
    finally:
        store.dispose()
    click.echo(secret)


@token.command()
@click.argument("secret", metavar="TOKEN")
@state_options
def revoke(secret: str, state_dir: Path, db_url: str | None) -> None:
    """Revoke TOKEN. A running API may honour it for up to 30 s more (its cache)."""
    store = open_state(state_dir, db_url)
    try:
        store.revoke_token(secret)
    finally:
        store.dispose()
    click.echo("Revoked.")
