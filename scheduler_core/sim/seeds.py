"""Many seeds in one command: every (seed, policy) pair in its own process, and the figures across seeds.

A figure on one seed is an anecdote (DESIGN §7); the mean and the worst seed are the result. ``run_all`` replays
each pair (``--jobs`` processes, one progress bar over the pairs), ``aggregate`` gives per policy the mean, min,
max and worst seed of every figure the runs report — whatever figures ``summarise`` grows, with no list to keep
in step — and ``per_seed_markdown`` / ``aggregate_markdown`` / ``write_seeds_report`` show them.

Which way is worse is read from the figure's name: utilisations, fairness and finished jobs are better high,
figures that describe the input rather than the outcome (job counts, simulated span) have no worst seed, and
everything else — waits, preemptions, GPU-hours lost, errors — is better low.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from .compare import ROWS
from .engine import SimConfig, simulate
from .inputs import WorkloadArgs, load_workload
from .metrics import summarise
from .workloads.scaling import describe_cluster
from .workloads.types import Workload

#: At most this many seeds in one command (20 seeds × 4 policies is the usual judgement; 1,000 is a night).
MAX_SEEDS = 1000
#: Keys of a summary that say which run it is, not how it went.
IDENTITY = ("workload", "policy", "seed", "cluster")
#: Figures that describe the input, not the outcome: aggregated, but no seed is "worst".
NEUTRAL = frozenset({"jobs", "in_quota_jobs", "big_jobs", "simulated_s", "node_failures", "cycles"})
_HIGHER = re.compile(r"^(utilization|fairness|jobs_finished)")
_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")


class SeedsError(ValueError):
    """A ``--seeds`` value that names no usable set of seeds; the message is one readable line."""


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0-19"``, ``"0,3,7"`` or a mix (``"0-4,9"``) → the seeds in the order given, each once."""
    if not text.strip():
        raise SeedsError("--seeds is empty: give a range such as 0-19 or a list such as 0,3,7")
    seeds: list[int] = []
    count = 0
    for part in (p.strip() for p in text.split(",")):
        if part.isdigit():
            low, high = int(part), int(part)
        elif (match := _RANGE.match(part)) is not None:
            low, high = int(match.group(1)), int(match.group(2))
            if high < low:
                raise SeedsError(f"--seeds range {part} runs backwards: write {high}-{low}")
        else:
            raise SeedsError(f"--seeds part {part!r} is not a seed (a whole number ≥ 0) or a range such as 0-19")
        count += high - low + 1
        if count > MAX_SEEDS:
            raise SeedsError(f"--seeds {text.strip()} names more than {MAX_SEEDS:,} seeds; give at most "
                             f"{MAX_SEEDS:,} in one command")
        seeds.extend(range(low, high + 1))
    return tuple(dict.fromkeys(seeds))


@dataclass(frozen=True, slots=True)
class Pair:
    """One replay of a many-seed run."""

    seed: int
    policy: str


@lru_cache(maxsize=2)
def _workload(args: WorkloadArgs, seed: int, shelf: Path | None = None) -> Workload:
    """A process builds each workload once (a trace's is the same for every seed), or reads it from ``shelf``,
    the run's directory of workloads already built by a sibling process."""
    if shelf is None:
        return load_workload(args, seed)[0]
    path = shelf / f"{seed}.pickle"
    if path.exists():
        with path.open("rb") as f:
            loaded: Workload = pickle.load(f)   # written by this run's own processes, in its own directory
        return loaded
    workload = load_workload(args, seed)[0]
    # Written whole, then renamed: a sibling reads a finished file or none (and then builds its own).
    with tempfile.NamedTemporaryFile(dir=shelf, suffix=".part", delete=False) as part:
        pickle.dump(workload, part, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(part.name, path)
    return workload


def run_pair(args: WorkloadArgs, config: SimConfig, pair: Pair, shelf: Path | None = None) -> dict[str, Any]:
    """One pair's summary, with the cluster it ran on (what a worker process returns: no records cross)."""
    workload = _workload(args, pair.seed if args.seeded else 0, shelf)
    record = simulate(workload, pair.policy, replace(config, seed=pair.seed, progress=False))
    summary = summarise(record)
    summary["cluster"] = describe_cluster(workload)
    return summary


def run_all(args: WorkloadArgs, config: SimConfig, seeds: Sequence[int], policies: Sequence[str], *,
            jobs: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Every (seed, policy) pair, in ``jobs`` processes (default: the machine's cores; 1 runs them here), rows
    in seed then policy order whatever order they finish in. The processes share each seed's workload through
    a temporary directory: building one (about a second for a Tuesday) takes longer than reading it back."""
    pairs = [Pair(seed, policy) for seed in seeds for policy in policies]
    workers = max(1, min(jobs or os.cpu_count() or 1, len(pairs)))
    results: dict[Pair, dict[str, Any]] = {}
    if workers == 1:
        with _Bar(len(pairs), progress) as bar:
            for pair in pairs:
                results[pair] = run_pair(args, config, pair)
                bar.done(pair)
        return [results[pair] for pair in pairs]
    # Forked workers inherit the imported modules; every task is submitted (and so every process forked) before
    # the progress bar exists, so no thread of it is copied into them.
    with tempfile.TemporaryDirectory(prefix="shoal-seeds-") as shelf, \
            ProcessPoolExecutor(max_workers=workers, mp_context=_fork_context()) as pool:
        futures: dict[Future[dict[str, Any]], Pair] = {
            pool.submit(run_pair, args, config, pair, Path(shelf)): pair for pair in pairs}
        with _Bar(len(pairs), progress) as bar:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.done(futures[future])
    return [results[pair] for pair in pairs]


def _fork_context() -> Any:
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


class _Bar:
    """One progress bar over the pairs on stderr (none when ``enabled`` is false)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            from tqdm import tqdm
            self._bar = tqdm(total=total, unit="run", desc="seeds × policies", file=sys.stderr,
                             dynamic_ncols=True, leave=False)

    def done(self, pair: Pair) -> None:
        if self._bar is not None:
            self._bar.set_postfix(done=f"seed {pair.seed} {pair.policy}", refresh=False)
            self._bar.update(1)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()


# --- across seeds ------------------------------------------------------------------------------------------


def higher_is_better(figure: str) -> bool | None:
    """True/False for the direction in which a figure improves; ``None`` for one that describes the input."""
    base = figure.split(".")[0]
    if base in NEUTRAL:
        return None
    return bool(_HIGHER.match(base))


def figures(row: dict[str, Any]) -> dict[str, float | None]:
    """A summary's figures, flat: numbers as they are, a dict of numbers as ``name.key`` (``signals_by_reason``),
    anything else (names, lists) left out."""
    out: dict[str, float | None] = {}
    for name, value in row.items():
        if name in IDENTITY:
            continue
        if value is None or _number(value):
            out[name] = None if value is None else float(value)
        elif isinstance(value, dict) and all(_number(v) for v in value.values()):
            out.update({f"{name}.{key}": float(v) for key, v in value.items()})
    return out


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


@dataclass(frozen=True, slots=True)
class Spread:
    """One figure of one policy across seeds (seeds where it is undefined — no such job — left out)."""

    mean: float
    min: float
    max: float
    worst: float | None
    worst_seed: int | None
    seeds: int

    def as_json(self) -> dict[str, Any]:
        return {"mean": round(self.mean, 4), "min": self.min, "max": self.max, "worst": self.worst,
                "worst_seed": self.worst_seed, "seeds": self.seeds}


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Spread | None]]:
    """Per policy (in the rows' order), per figure (in order of first appearance): the spread across seeds, or
    ``None`` when no seed defines it. A ``name.key`` figure missing from a run that reports ``name`` counts 0
    there (no preemption for that reason)."""
    flat = [(row, figures(row)) for row in rows]
    order = list(dict.fromkeys(name for _, values in flat for name in values))
    prefixes = {name.split(".")[0] for name in order if "." in name}
    out: dict[str, dict[str, Spread | None]] = {}
    for policy in dict.fromkeys(str(row["policy"]) for row in rows):
        mine = [(int(row["seed"]), values, row) for row, values in flat if row["policy"] == policy]
        out[policy] = {}
        for name in order:
            points: list[tuple[int, float]] = []
            for seed, values, row in mine:
                value = values.get(name)
                if value is None and "." in name and name.split(".")[0] in prefixes and \
                        isinstance(row.get(name.split(".")[0]), dict):
                    value = 0.0
                if value is not None:
                    points.append((seed, value))
            out[policy][name] = _spread(name, points)
    return out


def _spread(name: str, points: list[tuple[int, float]]) -> Spread | None:
    if not points:
        return None
    values = [v for _, v in points]
    direction = higher_is_better(name)
    worst: tuple[int, float] | None = None
    if direction is not None:
        worst = (min if direction else max)(points, key=lambda p: p[1])
    return Spread(mean=sum(values) / len(values), min=min(values), max=max(values),
                  worst=None if worst is None else worst[1], worst_seed=None if worst is None else worst[0],
                  seeds=len(points))


def seeds_document(rows: Sequence[dict[str, Any]], seeds: Sequence[int]) -> dict[str, Any]:
    """What ``shoal sim --seeds … --json`` prints: one object."""
    spreads = aggregate(rows)
    return {
        "workload": rows[0]["workload"] if rows else None,
        "cluster": rows[0].get("cluster") if rows else None,
        "seeds": list(seeds),
        "policies": list(spreads),
        "per_seed": list(rows),
        "aggregate": {policy: {name: None if s is None else s.as_json() for name, s in by_figure.items()}
                      for policy, by_figure in spreads.items()},
    }


def shown(value: float | None) -> str:
    """A figure as the tables print it (4 significant digits; thousands separated when large)."""
    if value is None:
        return "null"
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"


def per_seed_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """One row per (seed, policy), the headline figures as columns (``--json`` has them all)."""
    present = list(dict.fromkeys(name for row in rows for name in figures(row)))
    columns = [name for name in ROWS if name in present and name != "jobs"]
    lines = ["| seed | policy | " + " | ".join(columns) + " |", "|---:|---|" + "---:|" * len(columns)]
    for row in rows:
        values = figures(row)
        lines.append(f"| {row['seed']} | `{row['policy']}` | "
                     + " | ".join(shown(values.get(name)) for name in columns) + " |")
    return "\n".join(lines)


def aggregate_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """One row per figure, one column per policy: mean, range and the worst seed."""
    spreads = aggregate(rows)
    policies = list(spreads)
    names = list(dict.fromkeys(name for by_figure in spreads.values() for name in by_figure))
    lines = ["| figure | " + " | ".join(f"`{p}` mean (min–max; worst seed)" for p in policies) + " |",
             "|---|" + "---:|" * len(policies)]
    for name in names:
        cells = []
        for policy in policies:
            s = spreads[policy].get(name)
            if s is None:
                cells.append("null")
                continue
            worst = "" if s.worst_seed is None else f"; worst s{s.worst_seed}"
            cells.append(f"{shown(s.mean)} ({shown(s.min)}–{shown(s.max)}{worst})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cluster_line(cluster: dict[str, Any] | None) -> str:
    """``cluster: reference-scaled — 40 nodes in 3 blocks; h100 96 GPUs, …`` (the cluster the runs used)."""
    if not cluster:
        return ""
    units = ", ".join(f"{flavour} {count:,}" for flavour, count in cluster["units"].items())
    load = ", ".join(f"{flavour} {value:.2f}" for flavour, value in cluster.get("offered_load", {}).items())
    return (f"cluster: {cluster['name']} — {cluster['nodes']:,} nodes in {cluster['blocks']} blocks; units {units}"
            + (f"; offered load {load}" if load else ""))


def write_seeds_report(rows: Sequence[dict[str, Any]], seeds: Sequence[int], directory: str | Path) -> Path:
    """``report.md`` (both tables), ``summary.json`` (what ``--json`` prints) and ``boxplots.png``: one panel per
    figure, one box per policy, each seed a dot."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    document = seeds_document(rows, seeds)
    (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n")
    policies = document["policies"]
    names = [name for name in dict.fromkeys(n for row in rows for n in figures(row))
             if any(figures(row).get(name) is not None for row in rows)]
    cols = 5
    grid_rows = max(1, math.ceil(len(names) / cols))
    fig, axes = plt.subplots(grid_rows, cols, figsize=(4.0 * cols, 3.0 * grid_rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        data = [[v for row in rows if row["policy"] == p and (v := figures(row).get(name)) is not None]
                for p in policies]
        shown = [(p, d) for p, d in zip(policies, data) if d]
        ax.boxplot([d for _, d in shown], showmeans=True)
        for i, (_, d) in enumerate(shown, start=1):
            ax.scatter([i] * len(d), d, s=8, color="tab:grey", alpha=0.6, zorder=3)
        ax.set_xticks(range(1, len(shown) + 1), [p for p, _ in shown], fontsize=8)
        ax.set_title(name, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle(f"{document['workload']}: {len(seeds)} seeds × {len(policies)} policies (box: quartiles, "
                 "triangle: mean, dots: seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "boxplots.png", dpi=90)
    plt.close(fig)
    text = [f"# `shoal sim`: {document['workload']}, seeds {', '.join(map(str, seeds))}", "",
            cluster_line(document["cluster"]), "", "## Across seeds", "", aggregate_markdown(rows), "",
            "## Per seed", "", per_seed_markdown(rows), "", "![figures across seeds](boxplots.png)", ""]
    path = out / "report.md"
    path.write_text("\n".join(text))
    return path
