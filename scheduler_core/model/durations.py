"""Durations as people write them ("90s", "30m", "12h", "1h30m", "3d") and as the core keeps them (seconds)."""

from __future__ import annotations

import math
import re
import time

#: No duration a spec names is longer than this (a year and a day); beyond it a number is a mistake, not a plan.
MAX_DURATION_S = 366 * 86400.0
#: The string forms, as a JSON Schema pattern (the OpenAPI document states it; ``parse_duration`` also takes
#: upper-case units and inner spaces).
DURATION_PATTERN = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d|w)?([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w))*$"
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(value: str | int | float) -> float:
    """Seconds from a number (already seconds) or a string like ``"1h30m"``.

    Raises ``ValueError`` with the accepted forms on anything else, so pydantic shows a useful message.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '90s', '30m', '12h' or '3d', not a boolean")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"duration must be a finite number of seconds, got {value}")
        if value < 0:
            raise ValueError(f"duration must not be negative, got {value}")
        if value > MAX_DURATION_S:
            raise ValueError(f"duration must be at most {MAX_DURATION_S:.0f}s (366d), got {value:g}s")
        return float(value)
    text = str(value).strip().replace(" ", "")
    if not text:
        raise ValueError("expected a duration such as '90s', '30m', '12h' or '3d', got an empty string")
    if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", text):
        return parse_duration(float(text))   # a number of seconds, as text (not "inf" or "nan")
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2).lower()]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"expected a duration such as '90s', '30m', '12h', '1h30m' or '3d', got {value!r}")
    return parse_duration(total)


def format_instant(epoch_s: float) -> str:
    """An instant for people and logs alike: ``2026-10-27 14:20:05Z`` (UTC, to the second), never a raw float."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(epoch_s))


def format_duration(seconds: float) -> str:
    """The shortest readable form: ``5400`` → ``"1h30m"``."""
    seconds = int(round(seconds))
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            count, seconds = divmod(seconds, size)
            parts.append(f"{count}{unit}")
    return "".join(parts)
