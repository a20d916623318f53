"""Traces as they are: a job that ran longer than any limit a user may ask for is replayed whole, really bad rows
keep their line-numbered errors, and ``--load`` builds a cluster the trace's size — down to a few nodes — that it
names in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler_core.cli.main import main
from scheduler_core.config import load_cluster, load_teams
from scheduler_core.model import capacity_by_flavour
from scheduler_core.model.cluster import ClusterConfig
from scheduler_core.model.team import TeamsConfig
from scheduler_core.sim.engine import SimConfig, simulate
from scheduler_core.sim.workloads import overlay
from scheduler_core.sim.workloads.csvtrace import TraceError, load_csv
from scheduler_core.sim.workloads.scaling import offered_load, scale_to_load

from . import tiny

DAY = 86400.0
HEADER = "job_id,submit_time_s,duration_s,num_gpus,user,vc_or_team,status\n"


@pytest.fixture(scope="module")
def reference() -> tuple[ClusterConfig, TeamsConfig]:
    cluster, nodes = load_cluster("reference")
    return cluster, load_teams("reference", nodes)


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("run_days, within_max", [
    (1.0, True), (30.0, True), (45.0, True), (47.9, True),     # × 1.25 + 600 s fits in 60 d: capped there at most
    (48.0, False), (145.0, False), (400.0, False),            # longer: exactly what covers the run, past 60 d
])
def test_the_overlay_limit_covers_every_run(run_days: float, within_max: bool) -> None:
    for job_id in ("a", "b", "c", "d"):
        limit = overlay.overlay_time_limit(job_id, run_days * DAY)
        assert limit >= run_days * DAY * 1.25 + 600
        assert (limit <= overlay.MAX_TIME_LIMIT_S) is within_max
        assert limit % 3600 == 0


def test_a_job_longer_than_any_limit_is_replayed_whole(tmp_path: Path) -> None:
    """The 145-day pod of the issue: loaded (not a bad row), preemptible as drawn, and it finishes its run."""
    path = write(tmp_path, "job_id,submit_time_s,duration_s,num_gpus,team,time_limit_s\n"
                           f"forever,0,{145 * DAY:.0f},8,a,\nshort,60,3600,8,b,\n"
                           f"given,120,{70 * DAY:.0f},1,b,{90 * DAY:.0f}\n")
    workload = load_csv(path, tiny.cluster(), tiny.teams()).workload
    jobs = {job.id: job for job in workload.jobs}
    assert jobs["forever"].spec.time_limit >= 145 * DAY and "time_limit" in jobs["forever"].overlaid
    assert jobs["given"].spec.time_limit == 90 * DAY                         # the trace's own column, kept
    assert jobs["short"].spec.time_limit <= overlay.MAX_TIME_LIMIT_S
    record = simulate(workload, "fifo", SimConfig(seed=1, gpu_hours_per_failure=None, horizon_s=200 * DAY,
                                                  tick_s=600.0))
    logs = {log.id: log for log in record.jobs}
    assert {log.final_state for log in logs.values()} == {"SUCCEEDED"}
    assert logs["forever"].finished_at is not None and logs["forever"].finished_at >= 145 * DAY
    assert not any(i.cause == "time_limit" for log in logs.values() for i in log.interruptions)


@pytest.mark.parametrize("row, message", [
    ("x,10,-100,1,,c,", "line 3: duration_s is -100, must be greater than 0"),
    ("x,10,0,1,,c,", "line 3: duration_s is 0, must be greater than 0"),
    ("x,10,100,0,,c,", "line 3: num_gpus is '0', must be a whole number of at least 1"),
    ("x,10,100,,,c,", "line 3: num_gpus is '', must be a whole number of at least 1"),
    ("x,soon,100,1,,c,", "line 3: submit_time_s is 'soon', not a number"),
    ("x,10,1e400,1,,c,", "line 3: duration_s is 1e400, must be greater than 0"),
])
def test_really_bad_rows_still_fail_with_their_line(tmp_path: Path, reference: tuple[ClusterConfig, TeamsConfig],
                                                    row: str, message: str) -> None:
    path = write(tmp_path, HEADER + f"long,0,{145 * DAY:.0f},8,,c,\n" + row + "\n")
    with pytest.raises(TraceError, match=message):
        load_csv(path, *reference)
    assert [j.id for j in load_csv(path, *reference, skip_bad_rows=True).workload.jobs] == ["long"]


def small_trace(jobs: int, gap_s: float, sizes: tuple[int, ...], seed: int) -> str:
    """A trace of ``jobs`` jobs, one every ``gap_s`` on average, sizes drawn from ``sizes``, 40 min–4 h runs
    (a deterministic draw: the test writes the same file every time)."""
    import random

    rng = random.Random(seed)
    rows, at = [], 0.0
    for i in range(jobs):
        at += rng.expovariate(1.0 / gap_s)
        rows.append(f"g{i},{at:.0f},{rng.uniform(2400, 14400):.0f},{rng.choice(sizes)},,cluster01,\n")
    return HEADER + "".join(rows)


def test_a_small_trace_gets_a_cluster_its_size(tmp_path: Path, reference: tuple[ClusterConfig, TeamsConfig]) -> None:
    """Ten GPUs of demand on average: a few nodes per flavour, no MIG pool, quotas that add up, every job able
    to run, and the note says what was built."""
    path = write(tmp_path, small_trace(80, 900, (1, 1, 1, 2, 4, 8), seed=4))
    workload = load_csv(path, *reference).workload
    scaled = scale_to_load(workload, 0.9)
    capacity = capacity_by_flavour(scaled.cluster.expand())
    assert "h100-mig-1g" not in capacity                                       # no slice-sized work
    assert sum(capacity.values()) <= 64
    assert scaled.teams.nominal_by_flavour() == capacity
    for flavour, load in offered_load(scaled, capacity).items():
        assert 0.5 <= load <= 1.3, (flavour, load)
    for job in scaled.jobs:
        quota = next(t for t in scaled.teams.teams if t.name == job.spec.team).quotas[job.spec.flavour[0]]
        assert quota.borrowing_limit is None or quota.nominal + quota.borrowing_limit >= job.units
    assert "dropped (no job asks for them): a100, h100-mig-1g" in scaled.notes[-1]
    assert "merged into h100" in scaled.notes[-1] and "6 nodes in 1 blocks" in scaled.notes[-1]


def test_slice_sized_work_keeps_a_mig_node(tmp_path: Path, reference: tuple[ClusterConfig, TeamsConfig]) -> None:
    rows = "job_id,submit_time_s,duration_s,num_gpus,flavour\n" + "".join(
        f"j{i},{i * 600},7200,{1 if i % 3 else 8},{'h100-mig-1g' if i % 3 else 'h100'}\n" for i in range(60))
    scaled = scale_to_load(load_csv(write(tmp_path, rows), *reference).workload, 0.9)
    capacity = capacity_by_flavour(scaled.cluster.expand())
    assert 0 < capacity["h100-mig-1g"] <= 56 and "a100" not in capacity


def test_the_report_names_the_cluster_it_built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, small_trace(60, 900, (1, 2, 8), seed=2))
    assert main(["sim", "--workload", str(path), "--load", "0.9", "--policy", "fifo", "--json"]) == 0
    cluster = json.loads(capsys.readouterr().out)["cluster"]
    assert cluster["name"] == "reference-scaled" and cluster["nodes"] < 16
    assert set(cluster["offered_load"]) <= {"h100", "a100"} and "h100-mig-1g" not in cluster["units"]
    assert main(["sim", "--workload", str(path), "--load", "0.9", "--policy", "fifo"]) == 0
    assert capsys.readouterr().out.startswith(f"cluster: reference-scaled — {cluster['nodes']} nodes in")


ITP_SIZES = (1,) * 83 + (2,) * 2 + (4,) * 4 + (8,) * 10 + (16,)


def fifo_check(workload_path: Path, load: float) -> tuple[float, float]:
    """(offered load of the cluster ``--load`` built, FIFO's measured utilisation over the trace's window)."""
    cluster, nodes = load_cluster("reference")
    scaled = scale_to_load(load_csv(workload_path, cluster, load_teams("reference", nodes)).workload, load)
    capacity = capacity_by_flavour(scaled.cluster.expand())
    offered = offered_load(scaled, capacity)
    total = sum(offered[f] * capacity[f] for f in offered) / sum(capacity[f] for f in offered)
    from scheduler_core.sim.metrics import summarise
    summary = summarise(simulate(scaled, "fifo", SimConfig(seed=0)))
    return total, summary["utilization_in_window"]


@pytest.mark.parametrize("jobs, gap_s, seed", [(60, 600, 1), (150, 300, 2), (400, 120, 3)])
def test_fifo_uses_about_the_offered_load_of_a_small_trace(tmp_path: Path, jobs: int, gap_s: float,
                                                           seed: int) -> None:
    """The cluster ``--load`` builds for a small trace is the trace's size: a FIFO replay's utilisation over the
    window is within ±0.1 of the offered load (at 0.6, where strict FIFO keeps up; see docs/BENCHMARKS.md for
    0.9, where its head-of-line blocking leaves more idle)."""
    path = write(tmp_path, small_trace(jobs, gap_s, ITP_SIZES, seed))
    offered, measured = fifo_check(path, 0.6)
    assert 0.45 <= offered <= 0.75
    assert measured == pytest.approx(offered, abs=0.1)


SHIPPED = [name for name in ("itp_microsoft_2021_cluster04_day.csv", "itp_microsoft_2021_day.csv")]


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_fifo_uses_about_the_offered_load_of_a_shipped_trace(name: str) -> None:
    """The same on the ITP traces (the full one is too long for a test; docs/BENCHMARKS.md has it)."""
    from .test_replay_slow import TRACE

    path = TRACE.parent / name
    if not path.exists():
        pytest.skip("the ITP traces are not in this checkout")
    offered, measured = fifo_check(path, 0.6)
    assert offered == pytest.approx(0.6, abs=0.03)
    assert measured == pytest.approx(offered, abs=0.1)
