"""Who is calling: a bearer token in, an ``Identity`` (user, team, admin) out.

Authentication is a chain of ``Authenticator``s so that, running as a JupyterHub service, a hub token can be
accepted beside Shoal's own: the hub's authenticator joins the chain, nothing else changes.

Shoal's tokens are resolved by the ``TokenStore`` and kept in a small cache for ``ttl_s``: a token is checked on
every request, and a database round trip each time would cost more than the request itself. The price is that a
revoked token may keep working for up to ``ttl_s`` (default 30 s) in a running server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from ..auth.tokens import Identity, TokenStore, hash_token

if TYPE_CHECKING:
    import tornado.web


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> Identity | None:
        """The identity ``token`` stands for, or ``None`` if this authenticator does not know it."""
        ...


class CookieAuthenticator(Protocol):
    async def from_cookie(self, handler: tornado.web.RequestHandler) -> Identity | None:
        """The identity of the browser behind ``handler``'s request, by a login cookie, or ``None``. Asked only on
        reads (GET, HEAD): a write authenticated by a cookie alone could be forged by another site."""
        ...


class TokenAuthenticator:
    """Shoal's own API tokens, resolved by a ``TokenStore`` (in a worker thread: it may be a database)."""

    def __init__(self, tokens: TokenStore, *, ttl_s: float = 30.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._tokens = tokens
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._cache: OrderedDict[str, tuple[Identity, float]] = OrderedDict()
        self._lock = threading.Lock()

    async def authenticate(self, token: str) -> Identity | None:
        key = hash_token(token)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[1] > now:
                self._cache.move_to_end(key)
                return hit[0]
        identity = await asyncio.to_thread(self._tokens.resolve_token, token)
        if identity is not None:
            with self._lock:
                self._cache[key] = (identity, now + self._ttl_s)
                self._cache.move_to_end(key)
                while len(self._cache) > self._max_entries:
                    self._cache.popitem(last=False)
        return identity

    def forget(self, token: str) -> None:
        """Drop a token from the cache (after revoking it in this process)."""
        with self._lock:
            self._cache.pop(hash_token(token), None)


class ChainAuthenticator:
    """Ask each authenticator in turn; the first that knows the token wins."""

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self._chain = list(authenticators)

    async def authenticate(self, token: str) -> Identity | None:
        for authenticator in self._chain:
            identity = await authenticator.authenticate(token)
            if identity is not None:
                return identity
        return None


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header (also ``token …``, as JupyterHub clients send)."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() not in ("bearer", "token") or not value.strip():
        return None
    return value.strip()
