"""Job ids people can read aloud (``job_8c41a2``) that stay unique, and repeat run for run under a seed.

The simulator replays one workload through several policies; with a seeded generator the same job gets the same id
in every run, so their event logs can be compared line by line.
"""

from __future__ import annotations

import random
from collections.abc import Container

PREFIX = "job_"
SWEEP_PREFIX = "sweep_"


class JobIdGenerator:
    """Random hex ids, widened by two digits whenever a draw collides, so the space never runs dry."""

    def __init__(self, seed: int | None = None, *, digits: int = 6, prefix: str = PREFIX) -> None:
        # A seed of None draws from os.urandom, never from the clock.
        self._random = random.Random(seed)
        self._digits = digits
        self._prefix = prefix

    def next(self, taken: Container[str]) -> str:
        digits = self._digits
        while True:
            for _ in range(8):
                candidate = f"{self._prefix}{self._random.getrandbits(4 * digits):0{digits}x}"
                if candidate not in taken:
                    return candidate
            digits += 2
