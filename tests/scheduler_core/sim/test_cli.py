"""``shoal sim`` end to end on a small cluster and a short CSV: JSON with every figure, a report with its plots,
and one clear line for a bad file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler_core.cli.main import main

from . import tiny

KEYS = {"jobs", "utilization_while_waiting", "wait_p50_s", "wait_p99_s", "small_job_wait_p50_s",
        "in_quota_wait_p99_s", "big_job_start_s", "placement_violations", "preemptions", "gpu_hours_lost",
        "mean_jct_s", "fairness_jain"}


def trace(tmp_path: Path) -> Path:
    rows = ["job_id,submit_time_s,duration_s,num_gpus,user,vc_or_team,status,team"]
    rows += [f"j{i},{i * 120},{1200 + (i * 377) % 3000},{[1, 2, 4, 8, 16][i % 5]},,cluster01,,{'ab'[i % 2]}"
             for i in range(30)]
    path = tmp_path / "short.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("policy", ["shoal", "fifo", "kueue", "easy"])
def test_sim_prints_one_json_object_with_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      policy: str) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    code = main(["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
                 "--policy", policy, "--seed", "3", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads(out)
    assert KEYS <= set(summary)
    assert summary["jobs"] == 30 and summary["jobs_finished"] == 30
    assert summary["policy"] == policy and summary["big_job_start_s"] is None
    assert 0 < summary["utilization_while_waiting"] <= 1 or summary["utilization_while_waiting"] is None


def test_explain_waste_names_the_jobs_idle_gpus_waited_on(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    args = ["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
            "--policy", "fifo", "--seed", "3", "--explain-waste"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = summary["idle_gpu_hours_by_job"]
    assert len(rows) <= 20 and all(row["idle_gpu_hours"] >= 0 and row["reason"] for row in rows)
    assert sum(row["idle_gpu_hours"] for row in rows) <= summary["idle_gpu_hours_while_waiting"] + 0.1 * len(rows)
    held = summary["idle_gpu_hours_by_holder"]
    assert set(held) == {"by_holder", "reservations"} and len(held["by_holder"]) == 3
    assert sum(held["by_holder"].values()) <= summary["idle_gpu_hours_while_waiting"] + 0.3
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| job | team | kind | GPUs |" in printed and "| held by | idle GPU-h |" in printed


def test_sim_writes_a_report_with_table_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    out_dir = tmp_path / "report"
    code = main(["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
                 "--policy", "easy", "--report", str(out_dir)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| utilization_while_waiting |" in printed
    for name in ("report.md", "summary.json", "utilization.png", "wait_cdf.png", "teams.png"):
        assert (out_dir / name).stat().st_size > 0
    assert (out_dir / "utilization.png").read_bytes()[:4] == b"\x89PNG"
    report = (out_dir / "report.md").read_text()
    assert "| in_quota_wait_p99_s |" in report and "## Assumptions" in report and "blake2b" in report


def test_a_bad_trace_fails_with_its_line_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    path = tmp_path / "bad.csv"
    path.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,100,1\nb,0,100,many\n")
    code = main(["sim", "--workload", str(path), "--cluster", str(cluster), "--teams", str(teams)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("shoal: error: ") and "line 3: num_gpus is 'many'" in err and err.count("\n") == 1
    code = main(["sim", "--workload", str(path), "--cluster", str(cluster), "--teams", str(teams),
                 "--policy", "fifo", "--skip-bad-rows", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and "skipped line 3" in captured.err and json.loads(captured.out)["jobs"] == 1


@pytest.mark.parametrize("args, message", [
    (["--workload", "monday"], "neither 'tuesday', 'festive' nor a .csv trace"),
    (["--workload", "festive", "--load", "0.9"], "--load scales a trace's cluster"),
    (["--workload", "tuesday", "--days", "2"], "--days sets the festive week's length"),
    (["--workload", "festive", "--days", "0"], "0 is not in the range 1<=x<=14"),
    (["--workload", "tuesday", "--load", "0.9"], "--load scales a trace's cluster"),
    (["--workload", "x.csv", "--cluster", "elsewhere.yaml"], "elsewhere.yaml: cannot read"),
    (["--workload", "tuesday", "--policy", "lottery"], "'lottery' is not one of"),
])
def test_user_mistakes_get_one_clear_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_cluster_file_needs_its_teams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, _ = tiny.write_config(tmp_path)
    assert main(["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster)]) == 2
    assert "give its teams with --teams" in capsys.readouterr().err


def test_sim_all_policies_on_the_same_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    out_dir = tmp_path / "all"
    code = main(["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
                 "--policy", "all", "--json", "--report", str(out_dir)])
    assert code == 0
    summaries = json.loads(capsys.readouterr().out)
    assert sorted(summaries) == ["easy", "fifo", "kueue", "shoal"]
    assert {s["jobs"] for s in summaries.values()} == {30}
    comparison = (out_dir / "comparison.md").read_text()
    assert "| utilization_while_waiting |" in comparison and "`kueue`" in comparison
    for name in ("compare_utilization.png", "compare_wait_cdf.png", "shoal/report.md", "fifo/wait_cdf.png"):
        assert (out_dir / name).stat().st_size > 0


def test_a_decision_log_is_the_same_for_the_same_run_and_names_every_decision(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    args = ["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
            "--policy", "shoal", "--json"]
    logs = []
    for run in ("a", "b"):
        path = tmp_path / f"{run}.log"
        assert main([*args, "--seed", "3", "--decision-log", str(path)]) == 0
        logs.append(path.read_text())
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    admits = [line for line in logs[0].splitlines() if " Admit(job_id=" in line]
    assert len(admits) >= summary["jobs"] and all(float(line.split()[0]) >= 0 for line in admits)
    assert logs[0] == logs[1]
    assert main([*args[:-1], "--policy", "all", "--decision-log", str(tmp_path / "x.log")]) == 2
    assert "--decision-log records one policy" in capsys.readouterr().err
