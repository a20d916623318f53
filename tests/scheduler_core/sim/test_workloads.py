"""Workloads: CSV traces (bad rows named by line, columns over the overlay), the overlay's determinism, scaling
to a target load, and the busy Tuesday's shape."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scheduler_core.config import load_cluster, load_teams
from scheduler_core.model import capacity_by_flavour
from scheduler_core.model.job import JobKind, PriorityClass, TopologyLevel
from scheduler_core.sim.workloads import overlay
from scheduler_core.sim.workloads.csvtrace import TraceError, load_csv
from scheduler_core.sim.workloads.scaling import offered_load, scale_to_load
from scheduler_core.sim.workloads.tuesday import DAY, busy_tuesday, office_hours_load

HEADER = "job_id,submit_time_s,duration_s,num_gpus,user,vc_or_team,status\n"


@pytest.fixture(scope="module")
def reference() -> tuple[object, object]:
    cluster, _ = load_cluster("reference")
    return cluster, load_teams("reference")


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_trace_row_becomes_a_job_with_its_size_and_times(tmp_path: Path, reference: tuple) -> None:
    path = write(tmp_path, HEADER + "a,100,3600,16,,cluster04,\nb,50,600,1,,cluster01,\n")
    workload = load_csv(path, *reference).workload
    assert [j.id for j in workload.jobs] == ["b", "a"]          # sorted by submission
    a = workload.jobs[1]
    assert (a.submit_at, a.work_s, a.spec.pods, a.spec.gpus_per_pod) == (100, 3600, 2, 8)
    assert a.spec.topology is not None and a.spec.topology.level is TopologyLevel.BLOCK
    assert not a.spec.topology.is_required
    assert a.spec.time_limit >= 3600 * 1.25 + 600
    assert a.source == f"{path}:2"
    assert workload.window == (50, 100)


@pytest.mark.parametrize("row, message", [
    ("x,10,100,abc,,c,", "num_gpus is 'abc'"),
    ("x,-5,100,1,,c,", "submit_time_s is -5"),
    ("x,10,0,1,,c,", "duration_s is 0, must be greater than 0"),
    ("x,10,oops,1,,c,", "duration_s is 'oops', not a number"),
    ("x,10,100,12,,c,", ""),                                       # 2 pods × 6: fine
    ("x,10,100,20,,c,", "num_gpus 20 does not split"),
    (",10,100,1,,c,", "job_id is empty"),
    ("x,10,100,1,,c,,extra", "8 fields, header has 7"),
])
def test_bad_rows_are_reported_with_their_line_numbers(tmp_path: Path, reference: tuple, row: str,
                                                       message: str) -> None:
    path = write(tmp_path, HEADER + "ok,1,100,1,,c,\n" + row + "\n")
    if not message:
        assert len(load_csv(path, *reference).workload.jobs) == 2
        return
    with pytest.raises(TraceError) as info:
        load_csv(path, *reference)
    assert f"line 3: {message}" in str(info.value)
    assert [r.line for r in info.value.rows] == [3]


def test_skipping_bad_rows_replays_the_rest_and_lists_them(tmp_path: Path, reference: tuple) -> None:
    path = write(tmp_path, HEADER + "a,1,100,1,,c,\na,2,100,1,,c,\nb,3,100,0,,c,\nc,4,100,2,,c,\n")
    loaded = load_csv(path, *reference, skip_bad_rows=True)
    assert [j.id for j in loaded.workload.jobs] == ["a", "c"]
    assert [(r.line, r.message.split(" ")[0]) for r in loaded.bad_rows] == [(3, "job_id"), (4, "num_gpus")]


def test_a_missing_column_or_an_empty_file_is_an_error(tmp_path: Path, reference: tuple) -> None:
    with pytest.raises(TraceError, match="missing column num_gpus"):
        load_csv(write(tmp_path, "job_id,submit_time_s,duration_s\na,1,2\n"), *reference)
    with pytest.raises(TraceError, match="no job to replay"):
        load_csv(write(tmp_path, HEADER), *reference)
    with pytest.raises(TraceError, match="cannot read"):
        load_csv(tmp_path / "absent.csv", *reference)


def test_optional_columns_win_over_the_overlay(tmp_path: Path, reference: tuple) -> None:
    header = "job_id,submit_time_s,duration_s,num_gpus,vc_or_team,team,flavour,time_limit_s,preemptible," \
             "priority_class,topology,kind,checkpoint_cost_s\n"
    rows = ("a,0,3600,32,cluster01,search,a100|h100,7200,false,high,required:leaf,batch,42\n"
            "b,0,600,1,fraud-ml,,h100-mig-1g,,,,,notebook,\n")
    workload = load_csv(write(tmp_path, header + rows), *reference).workload
    a, b = sorted(workload.jobs, key=lambda j: j.id)
    assert (a.spec.team, a.spec.flavour, a.spec.time_limit, a.spec.preemptible) == ("search", ("a100", "h100"),
                                                                                   7200, False)
    assert a.spec.priority_class is PriorityClass.HIGH and a.checkpoint_cost_s == 42
    assert a.spec.topology is not None and a.spec.topology.is_required and a.spec.topology.required == "leaf"
    assert (b.spec.team, b.spec.kind, b.spec.flavour) == ("fraud-ml", JobKind.NOTEBOOK, ("h100-mig-1g",))


@pytest.mark.parametrize("column, value, message", [
    ("team", "nobody", "team 'nobody' is not a configured team"),
    ("flavour", "h200", "flavour 'h200' is not in this cluster"),
    ("preemptible", "maybe", "preemptible is 'maybe'"),
    ("topology", "sideways", "topology is 'sideways'"),
    ("kind", "daemon", "kind is 'daemon'"),
    ("time_limit_s", "30", "time_limit_s is 30, must be at least 60"),
])
def test_bad_optional_values_name_the_column(tmp_path: Path, reference: tuple, column: str, value: str,
                                             message: str) -> None:
    path = write(tmp_path, f"job_id,submit_time_s,duration_s,num_gpus,{column}\na,0,100,1,{value}\n")
    with pytest.raises(TraceError, match=f"line 2: {message}"):
        load_csv(path, *reference)


def test_the_overlay_depends_only_on_the_job_id(tmp_path: Path, reference: tuple) -> None:
    rows = [f"job-{i},{i * 10},{600 + i * 37},{[1, 2, 4, 8, 16][i % 5]},,cluster0{i % 9 + 1},\n" for i in range(200)]
    first = load_csv(write(tmp_path, HEADER + "".join(rows), "a.csv"), *reference).workload
    second = load_csv(write(tmp_path, HEADER + "".join(reversed(rows)), "b.csv"), *reference).workload
    assert [j.spec for j in first.jobs] == [j.spec for j in second.jobs]
    assert overlay.unit("job-1", "team") == overlay.unit("job-1", "team") != overlay.unit("job-1", "flavour")
    teams = Counter(j.spec.team for j in first.jobs)
    assert len(teams) > 10 and teams.most_common(1)[0][0] == "genai-core"     # weighted by nominal quota
    assert 0.8 < sum(j.spec.preemptible for j in first.jobs) / 200 < 0.97


def test_itp_clusters_are_not_taken_for_teams(tmp_path: Path, reference: tuple) -> None:
    workload = load_csv(write(tmp_path, HEADER + "a,0,100,1,,cluster04,\n"), *reference).workload
    assert workload.jobs[0].spec.team in {t.name for t in reference[1].teams}


def test_scaling_reaches_the_target_load_and_keeps_quotas_whole(tmp_path: Path, reference: tuple) -> None:
    rows = [f"j{i},{i * 60},{36_000},8,,,\n" for i in range(1440)]       # a day of 8-GPU, 10-hour jobs
    workload = load_csv(write(tmp_path, HEADER + "".join(rows)), *reference).workload
    scaled = scale_to_load(workload, 0.8)
    capacity = capacity_by_flavour(scaled.cluster.expand())
    assert scaled.teams.nominal_by_flavour() == capacity
    for flavour, load in offered_load(scaled, capacity).items():
        if flavour == "h100":
            assert load == pytest.approx(0.8, rel=0.03)
    assert "h100-mig-1g" not in capacity                                   # no slice-sized work: no MIG pool
    assert "scaled to a target offered load of 0.80" in scaled.notes[-1]
    with pytest.raises(ValueError):
        scale_to_load(workload, 0)


def test_busy_tuesday_has_the_reference_days_shape(reference: tuple) -> None:
    workload = busy_tuesday(*reference, seed=3)
    measured = workload.measured_jobs
    assert len(measured) == 5600
    assert workload.window == (0.0, DAY)
    kinds = Counter(j.spec.kind for j in measured)
    assert kinds[JobKind.NOTEBOOK] == 300 and kinds[JobKind.TRIAL] == 500
    sweep = sorted(j.submit_at for j in measured if j.spec.kind is JobKind.TRIAL)
    assert sweep[-1] - sweep[0] <= 60
    big = [j for j in workload.jobs if j.gpus >= 1024]
    assert [(j.measured, j.submit_at < 0) for j in big] == [(False, True), (True, False)]
    assert 7 * 3600 <= big[1].submit_at <= 11 * 3600                         # submitted in the morning
    assert len({j.spec.team for j in measured}) >= 38
    fine_tunes = [j.gpus for j in measured if j.id.startswith("tue-ft")]
    assert min(fine_tunes) == 8 and max(fine_tunes) == 256
    capacity = capacity_by_flavour(workload.cluster.expand())
    for flavour in ("h100", "a100"):
        assert office_hours_load(workload.jobs, flavour) / capacity[flavour] == pytest.approx(0.93, abs=0.005)
    office = sum(1 for j in measured if 9 * 3600 <= j.submit_at < 18 * 3600)
    assert office > 0.6 * len(measured)


def test_busy_tuesday_is_the_same_day_for_the_same_seed(reference: tuple) -> None:
    assert busy_tuesday(*reference, seed=5) == busy_tuesday(*reference, seed=5)
    assert busy_tuesday(*reference, seed=5).jobs != busy_tuesday(*reference, seed=6).jobs
