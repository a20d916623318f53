"""``--report DIR``: the run's figures as a Markdown table, and PNG plots (matplotlib, Agg: no display needed).

Files: ``report.md`` (the table, the targets of DESIGN §1 beside it, the workload's documented assumptions),
``summary.json`` (what ``--json`` prints), ``utilization.png`` (utilisation and queue depth over time),
``wait_cdf.png`` (wait CDF by job size) and ``teams.png`` (GPU-hours used vs entitled, per team).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .metrics import fairness, summarise
from .records import RunRecord

#: (metric, DESIGN §1 requirement, Shoal's target, True if higher is better)
TARGETS: dict[str, tuple[float, float, bool]] = {
    "utilization_while_waiting": (0.90, 0.97, True),
    "in_quota_wait_p99_s": (900.0, 600.0, False),
    "small_job_wait_p50_s": (300.0, 60.0, False),
    "big_job_start_s": (86400.0, 21600.0, False),
    "placement_violations": (0.0, 0.0, False),
}

SIZE_BUCKETS = ((0.0, 1.0, "≤ 1 GPU"), (1.0, 8.0, "2–8 GPUs"), (8.0, 64.0, "9–64 GPUs"),
                (64.0, 256.0, "65–256 GPUs"), (256.0, float("inf"), "> 256 GPUs"))


def verdict(name: str, value: Any) -> str:
    """"met", "required only" or "missed" against DESIGN §1, or "" for a figure without a target."""
    if name not in TARGETS:
        return ""
    if value is None:
        return "no such job in the workload"
    required, target, higher = TARGETS[name]

    def ok(bound: float) -> bool:
        return bool(value >= bound) if higher else bool(value <= bound)

    if ok(target):
        return "target met"
    if ok(required):
        return "required met, target missed"
    return "missed"


def markdown(summary: dict[str, Any], notes: tuple[str, ...] = ()) -> str:
    lines = [f"# `shoal sim`: {summary['workload']} under `{summary['policy']}` (seed {summary['seed']})", "",
             "| metric | value | required | Shoal target | verdict |", "|---|---:|---:|---:|---|"]
    for name, value in summary.items():
        if name in ("workload", "policy", "seed"):
            continue
        required, target = ("", "")
        if name in TARGETS:
            req, tgt, higher = TARGETS[name]
            sign = "≥" if higher else "≤"
            required, target = f"{sign} {req:g}", f"{sign} {tgt:g}"
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v:g}" for k, v in value.items()) or "none"
        shown = "null" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
        lines.append(f"| {name} | {shown} | {required} | {target} | {verdict(name, value)} |")
    if notes:
        lines += ["", "## Assumptions", ""] + [f"- {note}" for note in notes]
    lines += ["", "![utilisation and queue depth](utilization.png)", "", "![wait CDF by job size](wait_cdf.png)", "",
              "![per-team usage vs quota](teams.png)", ""]
    return "\n".join(lines)


def binned(record: RunRecord, bin_s: float) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Time-weighted means per bin: bin starts, utilisation per flavour (and ``all``), pending jobs."""
    series = record.series
    start, end = record.window[0], record.end
    edges = np.arange(start, max(end, start + bin_s) + bin_s, bin_s)
    # Sample the step functions on a fine grid (a sixtieth of a bin), then average per bin.
    step = bin_s / 60.0
    grid = np.arange(start, edges[-1], step)
    at = np.asarray(series.at, dtype=float)
    index = np.searchsorted(at, grid, side="right") - 1
    valid = index >= 0
    index = np.clip(index, 0, max(len(at) - 1, 0))
    per_bin = len(grid) // (len(edges) - 1)

    def mean(values: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # a bin with no sample is NaN, on purpose
            out: np.ndarray = np.nanmean(values[: per_bin * (len(edges) - 1)].reshape(-1, per_bin), axis=1)
        return out

    util: dict[str, np.ndarray] = {}
    total_alloc = np.zeros(len(grid))
    total_health = np.zeros(len(grid))
    used = [f for f in series.flavours if any(series.allocated[f])]
    for flavour in used:
        alloc = np.where(valid, np.asarray(series.allocated[flavour], dtype=float)[index], np.nan) if len(at) else \
            np.full(len(grid), np.nan)
        health = np.where(valid, np.asarray(series.healthy[flavour], dtype=float)[index], np.nan) if len(at) else \
            np.full(len(grid), np.nan)
        g = 1.0 / record.units_per_gpu.get(flavour, 1)
        total_alloc += np.nan_to_num(alloc) * g
        total_health += np.nan_to_num(health) * g
        with np.errstate(invalid="ignore", divide="ignore"):
            util[flavour] = mean(np.where(health > 0, alloc / health, np.nan))
    with np.errstate(invalid="ignore", divide="ignore"):
        util["all"] = mean(np.where(total_health > 0, total_alloc / total_health, np.nan))
    pending = np.where(valid, np.asarray(series.pending, dtype=float)[index], np.nan) if len(at) else \
        np.full(len(grid), np.nan)
    return edges[:-1], util, mean(pending)


def write_report(record: RunRecord, directory: str | Path) -> Path:
    """Write every file of the report into ``directory`` (created if needed); returns the Markdown file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(record)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    title = f"{record.workload} · {record.policy} · seed {record.seed}"

    span = record.end - record.window[0]
    bin_s = 600.0 if span <= 4 * 86400 else 3600.0 if span <= 20 * 86400 else 6 * 3600.0
    starts, util, depth = binned(record, bin_s)
    hours = (starts - record.window[0]) / 3600.0
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for flavour, series in util.items():
        top.plot(hours, series, label=flavour, linewidth=2.0 if flavour == "all" else 1.0)
    top.set_ylabel("allocated / healthy")
    top.set_ylim(0, 1.05)
    top.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    top.legend(loc="lower right", fontsize=8)
    top.set_title(f"Utilisation and queue depth — {title}")
    bottom.plot(hours, depth, color="tab:red")
    bottom.set_ylabel("pending jobs")
    bottom.set_xlabel(f"hours since the window's start ({bin_s / 60:.0f}-minute means)")
    fig.tight_layout()
    fig.savefig(out / "utilization.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5))
    measured = [job for job in record.jobs if job.measured]
    for low, high, label in SIZE_BUCKETS:
        waits = np.sort([max(job.wait_s(record.end), 1.0) for job in measured if low < job.gpus <= high or
                         (low == 0.0 and job.gpus <= high)])
        if len(waits) == 0:
            continue
        ax.step(waits, np.arange(1, len(waits) + 1) / len(waits), where="post", label=f"{label} ({len(waits)})")
    ax.set_xscale("log")
    ax.set_xlabel("wait, submission to admission (s; < 1 s shown at 1 s)")
    ax.set_ylabel("fraction of jobs")
    ax.axvline(300, color="grey", linestyle=":", linewidth=1)
    ax.axvline(900, color="grey", linestyle="--", linewidth=1)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"Wait CDF by job size — {title}")
    fig.tight_layout()
    fig.savefig(out / "wait_cdf.png", dpi=110)
    plt.close(fig)

    _, per_team = fairness(record)
    teams = sorted(per_team, key=lambda t: -per_team[t][1])
    fig, ax = plt.subplots(figsize=(12, 5))
    x = np.arange(len(teams))
    span_h = (record.window[1] - record.window[0]) / 3600.0
    quota = [sum(units / record.units_per_gpu.get(f, 1) for f, units in record.quotas.get(t, {}).items()) * span_h
             for t in teams]
    ax.bar(x - 0.2, [per_team[t][0] for t in teams], width=0.4, label="used (measured jobs)")
    ax.bar(x + 0.2, [per_team[t][1] for t in teams], width=0.4, label="entitled (min of quota, asked)")
    ax.scatter(x, quota, marker="_", s=120, color="black", label="nominal quota over the window", zorder=3)
    ax.set_xticks(x, teams, rotation=75, fontsize=7)
    ax.set_ylabel("GPU-hours in the window")
    ax.set_yscale("symlog", linthresh=10)
    ax.legend(fontsize=8)
    ax.set_title(f"Per-team usage vs quota — {title}")
    fig.tight_layout()
    fig.savefig(out / "teams.png", dpi=110)
    plt.close(fig)

    path = out / "report.md"
    path.write_text(markdown(summary, record.notes))
    return path
