"""Plain-text tables in the habits of ``squeue`` and ``sinfo``: a header, aligned columns, nothing fancy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone


def render(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def when(moment: datetime | None, *, seconds: bool = False) -> str:
    """``2026-10-27 14:20Z``: UTC, to the minute (or second), the same on every machine."""
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ" if seconds else "%Y-%m-%d %H:%MZ")


def hours(gpu_seconds: float) -> str:
    return f"{gpu_seconds / 3600:.2f}"
