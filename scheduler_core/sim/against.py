"""A many-seed run against an earlier one: for each policy, which way each headline figure moved, seed by seed.

A policy change is judged on the mean over seeds and on how many seeds it makes better or worse, never on one
seed (DESIGN §7): ``shoal sim --seeds 0-19 --json > before.json`` on the old tree, then ``shoal sim --seeds 0-19
--against before.json`` on the new prints, per policy, each headline figure's mean before and after over the
(seed, policy) pairs both runs have, how many of those seeds it made better, worse or left equal, and the worst
seed each time. Which way is better is ``seeds.higher_is_better``'s. With each count goes a two-sided sign test:
the chance of a split at least that lopsided if the change moved each seed's figure either way with even odds
(ties left out), so "12 better, 8 worse" (p 0.50) is not mistaken for a result and "16 / 4" (p 0.012) is not
dismissed. Nothing here runs a replay: it reads what ``seeds_document`` wrote and the rows of the run just made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compare import ROWS
from .seeds import figures, higher_is_better, shown

#: The figures compared: the comparison table's, and how far estimated starts erred; input counts left out.
HEADLINE = tuple(name for name in ROWS if higher_is_better(name) is not None) + ("eta_error_p90_s",)
#: A ``--json`` document of 1,000 seeds × 4 policies is a few MiB; anything far larger is not one.
MAX_BYTES = 256 * 1024 * 1024


class AgainstError(ValueError):
    """A ``--against`` file that is not an earlier ``--seeds --json`` run of this workload; one readable line."""


@dataclass(frozen=True, slots=True)
class Moved:
    """One figure of one policy over the seeds both runs have. ``worst_*``: (seed, value) of the worst seed."""

    figure: str
    before: float
    after: float
    better: int
    worse: int
    equal: int
    worst_before: tuple[int, float]
    worst_after: tuple[int, float]

    @property
    def sign_p(self) -> float:
        """Two-sided sign test of better against worse (ties left out): 1.0 when nothing moved."""
        return sign_test(self.better, self.worse)

    def as_json(self) -> dict[str, Any]:
        return {"before": round(self.before, 4), "after": round(self.after, 4), "better": self.better,
                "worse": self.worse, "equal": self.equal, "sign_p": round(self.sign_p, 4),
                "worst_before": list(self.worst_before), "worst_after": list(self.worst_after)}


@dataclass(frozen=True, slots=True)
class Against:
    """The comparison: per policy, the figures that both runs report on at least one common seed."""

    name: str
    pairs: int
    moved: dict[str, list[Moved]]
    #: (seed, policy) pairs only one of the runs has, per policy and side: "seeds 2-39 `kueue` (only before)".
    unmatched: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"file": self.name, "pairs": self.pairs, "unmatched": self.unmatched,
                "policies": {policy: {m.figure: m.as_json() for m in moved} for policy, moved in self.moved.items()}}


def load_before(path: str | Path, workload: object) -> list[dict[str, Any]]:
    """The per-seed rows of an earlier ``--seeds --json`` run of ``workload``."""
    where = Path(path)
    try:
        too_large = where.stat().st_size > MAX_BYTES
        document: Any = {} if too_large else json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:      # UnicodeDecodeError and JSON errors are ValueErrors
        raise AgainstError(f"--against {where.name}: not the JSON of a --seeds --json run ({type(exc).__name__})") \
            from None
    if too_large:
        raise AgainstError(f"--against {where.name}: larger than {MAX_BYTES // 2**20} MiB, not a --seeds --json run")
    rows = document.get("per_seed") if isinstance(document, dict) else None
    if not isinstance(rows, list) or not rows or not all(_row(r) for r in rows):
        raise AgainstError(f"--against {where.name}: no per_seed rows with a seed and a policy "
                           "(write it with shoal sim --seeds … --json)")
    if document.get("workload") != workload:
        raise AgainstError(f"--against {where.name}: a run of workload {document.get('workload')!r}, "
                           f"this one is {workload!r}")
    return rows


def _row(row: object) -> bool:
    return (isinstance(row, dict) and isinstance(row.get("seed"), int) and not isinstance(row.get("seed"), bool)
            and isinstance(row.get("policy"), str))


def compare(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], name: str) -> Against:
    """Each policy's headline figures over the (seed, policy) pairs both runs have, in ``after``'s order."""
    old = {(int(r["seed"]), str(r["policy"])): figures(r) for r in before}
    new = {(int(r["seed"]), str(r["policy"])): figures(r) for r in after}
    common = [pair for pair in new if pair in old]
    unmatched = (_only("before", [pair for pair in old if pair not in new])
                 + _only("after", [pair for pair in new if pair not in old]))
    moved: dict[str, list[Moved]] = {}
    for policy in dict.fromkeys(p for _, p in common):
        pairs = [(seed, old[(seed, p)], new[(seed, p)]) for seed, p in common if p == policy]
        moved[policy] = [m for figure in HEADLINE if (m := _moved(figure, pairs)) is not None]
    return Against(name, len(common), moved, unmatched)


def sign_test(better: int, worse: int) -> float:
    """P(a split at least as uneven as ``better``/``worse``) when each seed goes either way with even odds."""
    n, k = better + worse, min(better, worse)
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n)


def _only(side: str, pairs: list[tuple[int, str]]) -> list[str]:
    """``seeds 2-39, 41 `shoal` (only before)``: one entry per policy, its seeds as ranges."""
    out = []
    for policy in dict.fromkeys(p for _, p in pairs):
        seeds = sorted(s for s, p in pairs if p == policy)
        runs: list[list[int]] = []
        for seed in seeds:
            if runs and seed == runs[-1][-1] + 1:
                runs[-1].append(seed)
            else:
                runs.append([seed])
        named = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
        out.append(f"{'seed' if len(seeds) == 1 else 'seeds'} {named} `{policy}` (only {side})")
    return out


def _moved(figure: str, pairs: list[tuple[int, dict[str, float | None], dict[str, float | None]]]) -> Moved | None:
    points = [(seed, a, b) for seed, was, now in pairs
              if (a := was.get(figure)) is not None and (b := now.get(figure)) is not None]
    if not points:
        return None
    higher = bool(higher_is_better(figure))
    better = sum(1 for _, a, b in points if (b > a if higher else b < a) and not math.isclose(a, b))
    equal = sum(1 for _, a, b in points if math.isclose(a, b))
    pick = min if higher else max
    worst_before = pick(((s, a) for s, a, _ in points), key=lambda p: p[1])
    worst_after = pick(((s, b) for s, _, b in points), key=lambda p: p[1])
    return Moved(figure, sum(a for _, a, _ in points) / len(points), sum(b for _, _, b in points) / len(points),
                 better, len(points) - better - equal, equal, worst_before, worst_after)


def against_markdown(result: Against) -> str:
    """Per policy, one row per figure: mean before → after, seeds better / worse / equal, worst seed."""
    lines = [f"## Against {result.name} ({result.pairs} (seed, policy) pairs both runs have)"]
    if result.unmatched:
        lines.append("\nNot compared: " + ", ".join(result.unmatched))
    for policy, moved in result.moved.items():
        lines += [f"\n### `{policy}`\n", "| figure | before (mean) | after (mean) | better / worse / equal seeds "
                  "| sign test p | worst seed before → after |", "|---|---:|---:|---|---:|---|"]
        for m in moved:
            lines.append(f"| {m.figure} | {shown(m.before)} | {shown(m.after)} | {m.better} / {m.worse} / "
                         f"{m.equal} | {m.sign_p:.2g} | {_worst(m.worst_before)} → {_worst(m.worst_after)} |")
    return "\n".join(lines)


def _worst(point: tuple[int, float]) -> str:
    return f"{shown(point[1])} (s{point[0]})"
