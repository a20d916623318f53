"""Usage decay for fair sharing: yesterday's heavy user pays a little, last month's barely at all."""

from __future__ import annotations

import math


def decay(value: float, elapsed_s: float, half_life_s: float) -> float:
    """``value`` after ``elapsed_s`` of exponential decay with ``half_life_s`` (``<= 0``: no memory at all)."""
    if half_life_s <= 0:
        return 0.0
    if elapsed_s <= 0:
        return value
    return value * math.exp(-math.log(2) * elapsed_s / half_life_s)
