"""What the pages show, from the API's own bodies: times in words, the quota rows, the nodes grouped by block, the
MIG pool's slices and the plots' series. Pure functions of the views and an instant, tested without a browser."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from ..model.flavours import FLAVOURS
from ..schemas import NodeView, TrialView
from . import svg

HOUR = 3600.0
DAY = 24 * HOUR


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 4 h``: how far off a time is, to the precision that matters."""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < HOUR:
        return f"{seconds / 60:.0f} min"
    if seconds < DAY:
        hours, minutes = divmod(int(seconds // 60), 60)
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(int(seconds // HOUR), 24)
    return f"{days} d {hours} h"


def when(moment: datetime | None, now: float) -> str:
    """``14:20 UTC (in 12 min)`` or ``09:02 UTC (3 h 05 min ago)``; ``—`` for no time."""
    if moment is None:
        return "—"
    delta = moment.timestamp() - now
    clock = moment.astimezone(timezone.utc).strftime("%H:%M UTC" if abs(delta) < DAY else "%Y-%m-%d %H:%M UTC")
    if abs(delta) < 1:
        return f"{clock} (now)"
    return f"{clock} (in {duration(delta)})" if delta > 0 else f"{clock} ({duration(delta)} ago)"


def hour_labels(since: float, count: int, step: float = HOUR) -> list[str]:
    return [datetime.fromtimestamp(since + i * step, tz=timezone.utc).strftime("%H:%M") for i in range(count)]


def window(now: float, hours: int = 24) -> tuple[float, float]:
    """The last ``hours`` whole hours up to the end of the current one: the plots' x axis."""
    until = (now // HOUR + 1) * HOUR
    return until - hours * HOUR, until


def usage_plot(series: Mapping[str, Sequence[float]], since: float, count: int, *, title: str) -> str:
    """GPU-hours per hour, one colour per flavour."""
    hours = {flavour: [s / HOUR for s in row] for flavour, row in sorted(series.items()) if any(row)}
    return svg.bar_chart(hours, hour_labels(since, count), y_label="GPU-hours", title=title)


def utilisation_plot(series: Mapping[str, Sequence[float]], since: float, count: int) -> str:
    return svg.line_chart(dict(sorted(series.items())), hour_labels(since, count), y_label="held",
                          title="Utilisation, last 24 h", percent=True, top=1.0)


@dataclass(frozen=True)
class Block:
    name: str
    nodes: list[NodeView]

    @property
    def by_health(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.health] = counts.get(node.health, 0) + 1
        return counts


def blocks(nodes: Iterable[NodeView]) -> list[Block]:
    """Nodes grouped by block, blocks and nodes in name order."""
    grouped: dict[str, list[NodeView]] = {}
    for node in nodes:
        grouped.setdefault(node.block, []).append(node)
    return [Block(name, sorted(members, key=lambda n: n.name)) for name, members in sorted(grouped.items())]


def is_mig(flavour: str) -> bool:
    known = FLAVOURS.get(flavour)
    return known.is_mig if known is not None else "-mig-" in flavour


@dataclass(frozen=True)
class MigNode:
    """One node of the MIG pool: per slice flavour, each slice held (True) or free (False)."""

    name: str
    block: str
    health: str
    slices: dict[str, list[bool]]


def mig_pool(nodes: Iterable[NodeView]) -> list[MigNode]:
    pool = []
    for node in nodes:
        slices = {flavour: [i < node.allocated.get(flavour, 0) for i in range(units)]
                  for flavour, units in sorted(node.capacity.items()) if is_mig(flavour)}
        if slices:
            pool.append(MigNode(node.name, node.block, node.health, slices))
    return sorted(pool, key=lambda n: (n.block, n.name))


def objective_plot(trials: Sequence[TrialView], direction: str, objective: str) -> str:
    """Each finished trial's value by trial number, with the best so far."""
    done = sorted(((t.number, t.value) for t in trials if t.value is not None), key=lambda p: p[0])
    points = [(n, float(v)) for n, v in done]
    best: list[tuple[int, float]] = []
    for number, value in points:
        if not best or (value < best[-1][1] if direction == "minimize" else value > best[-1][1]):
            best.append((number, value))
    return svg.scatter_chart(points, best, y_label=objective, title=f"{objective} by trial")
