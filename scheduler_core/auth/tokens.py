"""API tokens: opaque secrets shown once, kept only as a hash, each naming a user, a team and whether admin.

Contract of ``TokenStore`` (checked by ``tests/scheduler_core/token_store_contract.py`` on every implementation):
``create`` returns the plaintext token exactly once; ``resolve`` of that token returns its identity; any other
string (including the hash itself) resolves to ``None``; ``revoke`` makes a token resolve to ``None`` from then on;
``revoke_noted`` does that to every token created with that exact note (how a holder that no longer has the plaintext,
e.g. after a restart, still revokes what it minted: the note names the holder or the job).
"""

from __future__ import annotations

import hashlib
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass

TOKEN_PREFIX = "shoal_"


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    team: str
    admin: bool = False
    #: Further teams the user belongs to (a hub user in several team groups); ``team`` is their first.
    other_teams: frozenset[str] = frozenset()

    def may_act_on(self, team: str) -> bool:
        """A user reads and acts only on their own teams' jobs, unless an admin."""
        return self.admin or self.team == team or team in self.other_teams


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore(ABC):
    @abstractmethod
    def create_token(self, identity: Identity, *, now: float, note: str = "") -> str:
        """Store a new token for ``identity`` and return its plaintext (never stored)."""

    @abstractmethod
    def resolve_token(self, token: str) -> Identity | None: ...

    @abstractmethod
    def revoke_token(self, token: str) -> None: ...

    @abstractmethod
    def revoke_noted(self, note: str) -> int:
        """Revoke every live token created with exactly ``note``; how many were revoked."""
