"""``shoal bench cycle`` builds a busy-hour snapshot and prints its figures (timings are not asserted)."""

from __future__ import annotations

import json

import pytest

from scheduler_core.bench.workload import busy_snapshot, cluster_nodes
from scheduler_core.cli.main import main
from scheduler_core.policy.cycle import run_cycle


def test_json_report_names_the_sizes_and_the_timings(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "cycle", "--pending", "60", "--nodes", "64", "--running", "80", "--repeat", "2",
                 "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["pending"], report["nodes"], report["repeat"]) == (60, 64, 2)
    assert abs(report["running"] - 80) <= 20
    for key in ("median_ms", "p95_ms", "plan_median_ms", "cpu_median_ms", "rebuild_median_ms"):
        assert report[key] > 0
    assert report["same_decisions_as_rebuild"] is True
    assert report["waits"] + report["admits"] == report["pending"]


def test_bad_sizes_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "cycle", "--nodes", "10"]) == 2
    assert "--nodes" in capsys.readouterr().err


def test_the_scaled_cluster_keeps_the_reference_design() -> None:
    nodes = cluster_nodes(1024)
    blocks = {n.block for n in nodes}
    assert len(nodes) == 1024 and len(blocks) == 32
    assert sum(n.spare for n in nodes) == 32 and any(n.small_jobs for n in nodes)
    assert sum(n.capacity.get("h100-mig-1g", 0) for n in nodes) == 448


def test_the_snapshot_is_a_steady_busy_hour() -> None:
    snapshot = busy_snapshot(80, 64, 80, seed=3)
    assert len(snapshot.pending) == 80
    held = [(p.node, r.placement.flavour, u) for r in snapshot.running for p in r.placement.pods for u in p.units]
    assert len(held) == len(set(held))
    result = run_cycle(snapshot, 30 * 86400.0)
    assert len(result.admits) + len(result.waits) == len(snapshot.pending)
