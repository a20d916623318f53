"""``MemoryTokenStore``: API tokens in process memory, for tests and for an API over a ``MemoryStore``.

Kept as hashes like the SQL store does, so the plaintext is never held after ``create_token`` returns it.
"""

from __future__ import annotations

import threading

from .tokens import Identity, TokenStore, hash_token, new_token


class MemoryTokenStore(TokenStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_hash: dict[str, Identity] = {}

    def create_token(self, identity: Identity, *, now: float, note: str = "") -> str:
        token = new_token()
        with self._lock:
            self._by_hash[hash_token(token)] = identity
        return token

    def resolve_token(self, token: str) -> Identity | None:
        with self._lock:
            return self._by_hash.get(hash_token(token))

    def revoke_token(self, token: str) -> None:
        with self._lock:
            self._by_hash.pop(hash_token(token), None)
