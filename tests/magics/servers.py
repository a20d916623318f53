"""Schedulers the notebook tests run against: where the API is and a token of team fraud-ml."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShoalServer:
    url: str
    token: str
