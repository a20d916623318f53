"""Plain-text tables in the habits of ``squeue`` and ``sinfo``: a header, aligned columns, nothing fancy; instants
as ISO-8601 UTC to the second, durations as Slurm writes them (``1-02:03:04``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone


def render(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def when(moment: datetime | None, *, seconds: bool = True) -> str:
    """``2026-10-27T14:20:05Z``: UTC, to the second, the same on every machine (one word, for ``awk``).
    ``seconds`` is kept for old callers; instants are always shown to the second."""
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock(seconds: float | None) -> str:
    """A duration as ``squeue``'s TIME column: ``0:05``, ``1:02:03``, ``3-01:02:03``; ``-`` for none."""
    if seconds is None:
        return "-"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def hours(gpu_seconds: float) -> str:
    return f"{gpu_seconds / 3600:.2f}"
