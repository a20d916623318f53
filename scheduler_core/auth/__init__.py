"""Who is calling: bearer tokens mapped to a user and a team (and hub tokens when running as a hub service)."""

from .tokens import Identity, TokenStore, hash_token, new_token

__all__ = ["Identity", "TokenStore", "hash_token", "new_token"]
