"""Several policies on one workload: a side-by-side table against DESIGN §1 and plots that overlay them.

``shoal sim --policy all --report DIR`` writes ``DIR/comparison.md`` with ``compare_*.png``, and each policy's own
report in ``DIR/<policy>/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .metrics import SMALL_JOB_GPUS, summarise
from .records import RunRecord
from .report import TARGETS, binned, verdict

ROWS = ("jobs", "utilization_while_waiting", "utilization_while_waiting_in_window",
        "utilization_while_admissible_waiting", "idle_gpu_hours_while_waiting", "utilization", "wait_p50_s",
        "wait_p99_s", "small_job_wait_p50_s", "in_quota_wait_p99_s", "big_job_start_s", "placement_violations",
        "preemptions", "failure_restarts", "gpu_hours_lost", "mean_jct_s", "fairness_jain", "jobs_never_started",
        "wall_s")


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "null"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    mark = verdict(name, value)
    if mark == "missed":
        return f"**{shown}** ✗"
    if mark == "required met, target missed":
        return f"{shown} (req. ✓)"
    if mark == "target met":
        return f"{shown} ✓"
    return shown


def comparison_markdown(summaries: list[dict[str, Any]]) -> str:
    """One row per figure, one column per policy; ✓ meets Shoal's target, (req. ✓) only the requirement."""
    head = "| figure | target | " + " | ".join(f"`{s['policy']}`" for s in summaries) + " |"
    lines = [head, "|---|---|" + "---:|" * len(summaries)]
    for name in ROWS:
        target = ""
        if name in TARGETS:
            required, goal, higher = TARGETS[name]
            sign = "≥" if higher else "≤"
            target = f"{sign} {goal:g} (req. {required:g})"
        lines.append(f"| {name} | {target} | " + " | ".join(_cell(name, s.get(name)) for s in summaries) + " |")
    return "\n".join(lines)


def write_comparison(records: list[RunRecord], directory: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    summaries = [summarise(r) for r in records]
    name = records[0].workload
    span = records[0].end - records[0].window[0]
    bin_s = 600.0 if span <= 4 * 86400 else 3600.0 if span <= 20 * 86400 else 6 * 3600.0

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for record in records:
        starts, util, depth = binned(record, bin_s)
        hours = (starts - record.window[0]) / 3600.0
        top.plot(hours, util["all"], label=record.policy, linewidth=1.2)
        bottom.plot(hours, depth, label=record.policy, linewidth=1.2)
    top.set_ylabel("allocated / healthy (all GPUs)")
    top.set_ylim(0, 1.05)
    top.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    top.legend(fontsize=8, loc="lower right")
    top.set_title(f"Utilisation and queue depth — {name}")
    bottom.set_ylabel("pending jobs")
    bottom.set_yscale("symlog", linthresh=10)
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel(f"hours since the window's start ({bin_s / 60:.0f}-minute means)")
    fig.tight_layout()
    fig.savefig(out / "compare_utilization.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, (title, limit) in zip(axes, (("all jobs", float("inf")), (f"jobs of ≤ {SMALL_JOB_GPUS} GPUs",
                                                                       float(SMALL_JOB_GPUS)))):
        for record in records:
            waits = np.sort([max(j.wait_s(record.end), 1.0) for j in record.jobs if j.measured and j.gpus <= limit])
            if len(waits):
                ax.step(waits, np.arange(1, len(waits) + 1) / len(waits), where="post", label=record.policy)
        ax.set_xscale("log")
        ax.set_xlabel("wait, submission to admission (s)")
        ax.axvline(300, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"Wait CDF, {title} — {name}")
        ax.legend(fontsize=8, loc="lower right")
    axes[0].set_ylabel("fraction of jobs")
    fig.tight_layout()
    fig.savefig(out / "compare_wait_cdf.png", dpi=110)
    plt.close(fig)

    text = [f"# `shoal sim`: {name}, every policy (seed {records[0].seed})", "",
            comparison_markdown(summaries), "",
            "✓: Shoal's target met; (req. ✓): only the requirement; ✗: missed. Definitions: "
            "`scheduler_core/sim/metrics.py`.", "",
            "![utilisation](compare_utilization.png)", "", "![waits](compare_wait_cdf.png)", ""]
    if records[0].notes:
        text += ["## Assumptions", ""] + [f"- {note}" for note in records[0].notes] + [""]
    path = out / "comparison.md"
    path.write_text("\n".join(text))
    return path
