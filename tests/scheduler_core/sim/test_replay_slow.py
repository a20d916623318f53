"""Long replays (``-m slow``): a real trace through Shoal twice gives the same decisions, and every job finishes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduler_core.config import load_cluster, load_teams
from scheduler_core.sim.engine import SimConfig, simulate
from scheduler_core.sim.workloads.csvtrace import load_csv
from scheduler_core.sim.workloads.scaling import scale_to_load

NAME = "itp_microsoft_2021_cluster04_day.csv"
_ROOT = Path(__file__).resolve().parents[3]
#: The traces live beside the checkout (``shared/traces``) or where ``SHOAL_TRACES_DIR`` says.
TRACE = next((d / NAME for d in (Path(os.environ.get("SHOAL_TRACES_DIR", "/nonexistent")), _ROOT / "shared" / "traces",
                                 _ROOT.parent / "shared" / "traces") if (d / NAME).exists()), _ROOT / NAME)


@pytest.mark.slow
@pytest.mark.skipif(not TRACE.exists(), reason="the ITP traces are not in this checkout")
def test_a_real_trace_replays_identically_and_completely() -> None:
    cluster, nodes = load_cluster("reference")
    workload = scale_to_load(load_csv(TRACE, cluster, load_teams("reference", nodes)).workload, 0.9)
    runs = [simulate(workload, "shoal", SimConfig(seed=11)) for _ in range(2)]
    first, second = ([(j.id, j.admissions, j.interruptions, j.finished_at, j.final_state) for j in r.jobs]
                     for r in runs)
    assert first == second
    assert all(state == "SUCCEEDED" for *_, state in first)
    assert runs[0].series == runs[1].series
