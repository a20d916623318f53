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
        self._notes: dict[str, str] = {}

    def create_token(self, identity: Identity, *, now: float, note: str = "") -> str:
        token = new_token()
        with self._lock:
            self._by_hash[hash_token(token)] = identity
            self._notes[hash_token(token)] = note
        return token

    def resolve_token(self, token: str) -> Identity | None:
        with self._lock:
            return self._by_hash.get(hash_token(token))

    def revoke_token(self, token: str) -> None:
        with self._lock:
            self._by_hash.pop(hash_token(token), None)

    def revoke_noted(self, note: str) -> int:
        with self._lock:
            hashes = [h for h, n in self._notes.items() if n == note and h in self._by_hash]
            for h in hashes:
                del self._by_hash[h]
            return len(hashes)
