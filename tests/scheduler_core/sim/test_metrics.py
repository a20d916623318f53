"""The figures, on hand-built records: each definition of ``metrics`` checked against arithmetic done by hand."""

from __future__ import annotations

import pytest

from scheduler_core.sim.metrics import (fairness, idle_gpu_hours_while_waiting, jain, percentile,
                                        placement_violations, summarise, utilization_while_admissible_waiting,
                                        utilization_while_waiting)
from scheduler_core.sim.records import Admission, Interruption, JobLog, RunRecord, Series


def log(job_id: str, *, team: str = "a", gpus: float = 8, submitted: float = 0.0, admitted: float | None = None,
        finished: float | None = None, blocks: int = 1, in_quota: bool = True, measured: bool = True,
        work: float = 100.0) -> JobLog:
    entry = JobLog(id=job_id, team=team, kind="batch", flavours=("h100",), units=int(gpus), gpus=gpus,
                   submitted_at=submitted, work_s=work, measured=measured, in_quota=in_quota)
    if admitted is not None:
        entry.admissions.append(Admission(admitted, "h100", tuple(f"n{i}" for i in range(blocks)), blocks, "nominal"))
    if finished is not None:
        entry.finished_at, entry.final_state = finished, "SUCCEEDED"
    return entry


def series(rows: list[tuple[float, int, int, bool]]) -> Series:
    s = Series(("h100",))
    for at, allocated, healthy, fitting in rows:
        s.add(at, 0, 0, {"h100": (allocated, healthy, fitting, fitting)})
    return s


def test_utilization_counts_only_the_time_fitting_work_waits() -> None:
    s = series([(0, 10, 100, False), (100, 50, 100, True), (200, 90, 100, True), (300, 0, 100, False)])
    # 100 s at 50 % and 100 s at 90 % while work waited: 0.7. The idle spans do not count.
    assert utilization_while_waiting(s, {"h100": 1}, 0, 400) == pytest.approx(0.7)
    assert utilization_while_waiting(s, {"h100": 1}, 150, 400) == pytest.approx((50 * 50 + 90 * 100) / 15000)
    assert utilization_while_waiting(series([(0, 1, 2, False)]), {"h100": 1}, 0, 10) is None


def test_idle_gpu_hours_while_waiting_is_the_waste_itself() -> None:
    s = series([(0, 10, 100, False), (100, 50, 100, True), (200, 90, 100, True), (300, 0, 100, False)])
    # 100 s with 50 idle and 100 s with 10 idle while work waited: 6,000 GPU-seconds.
    assert idle_gpu_hours_while_waiting(s, {"h100": 1}, 0, 400) == pytest.approx(6000 / 3600)
    assert idle_gpu_hours_while_waiting(s, {"h100": 7}, 0, 400) == pytest.approx(6000 / 7 / 3600)


def test_admissible_waits_leave_out_quota_bound_ones() -> None:
    s = Series(("h100",))
    s.add(0, 1, 0, {"h100": (50, 100, True, False)})      # only a quota-bound job fits: not admissible
    s.add(100, 1, 0, {"h100": (90, 100, True, True)})
    assert utilization_while_admissible_waiting(s, {"h100": 1}, 0, 200) == pytest.approx(0.9)
    assert utilization_while_waiting(s, {"h100": 1}, 0, 200) == pytest.approx(0.7)


def test_a_series_keeps_only_changes() -> None:
    s = series([(0, 1, 2, False), (10, 1, 2, False), (20, 2, 2, False), (20, 3, 2, False)])
    assert s.at == [0, 20] and s.allocated["h100"] == [1, 3]


def test_placement_rule_scales_with_the_block() -> None:
    jobs = [log("256-one", gpus=256, admitted=0, blocks=1), log("256-two", gpus=256, admitted=0, blocks=2),
            log("1024-four", gpus=1024, admitted=0, blocks=4), log("1024-five", gpus=1024, admitted=0, blocks=5),
            log("128-two", gpus=128, admitted=0, blocks=2), log("early", gpus=256, admitted=-5, blocks=3)]
    assert placement_violations(jobs, 256, since=0) == 2


def test_jain_index() -> None:
    assert jain([1, 1, 1]) == 1.0
    assert jain([1, 0]) == 0.5
    assert jain([]) is None


def test_percentile_interpolates_and_is_none_for_nothing() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([], 99) is None


def record(jobs: list[JobLog], end: float = 1000.0) -> RunRecord:
    return RunRecord(workload="w", policy="p", seed=0, window=(0.0, 1000.0), end=end,
                     quotas={"a": {"h100": 8}, "b": {"h100": 8}}, units_per_gpu={"h100": 1}, block_gpus=256,
                     jobs=jobs, series=series([(0, 8, 16, True)]))


def test_summary_waits_small_jobs_in_quota_and_big_jobs() -> None:
    jobs = [log("small", gpus=1, admitted=30, finished=130), log("mid", gpus=16, submitted=10, admitted=110,
                                                                   finished=300, in_quota=False),
            log("big", gpus=1024, submitted=100, admitted=None), log("warm", gpus=1, admitted=0, measured=False)]
    summary = summarise(record(jobs, end=2000.0))
    assert summary["jobs"] == 3
    assert summary["small_job_wait_p50_s"] == 30
    assert summary["in_quota_jobs"] == 2
    assert summary["big_job_start_s"] == 1900                     # never admitted: waited until the end
    assert summary["jobs_never_started"] == 1
    assert summary["mean_jct_s"] == pytest.approx((130 + 290) / 2)
    assert summary["utilization_while_waiting"] == 0.5


def test_losses_count_failures_and_preemptions_but_not_time_limits() -> None:
    job = log("j", admitted=0, finished=900)
    job.interruptions += [Interruption(100, "failure", 3600.0), Interruption(200, "preemption", 7200.0),
                          Interruption(300, "time_limit", 36000.0)]
    summary = summarise(record([job]))
    assert summary["gpu_hours_lost"] == 3.0
    assert summary["preemptions"] == 1 and summary["failure_restarts"] == 1


def test_fairness_owes_each_team_the_smaller_of_its_quota_and_its_demand() -> None:
    # Team a asked for 8 GPUs × 1000 s and got them; team b asked for the same and got half.
    a = log("a", team="a", gpus=8, admitted=0, finished=1000, work=1000)
    b = log("b", team="b", gpus=8, admitted=500, finished=1500, work=1000)
    index, per_team = fairness(record([a, b], end=1500))
    assert per_team["a"] == pytest.approx((8000 / 3600, 8000 / 3600))
    assert per_team["b"] == pytest.approx((4000 / 3600, 8000 / 3600))
    assert index == pytest.approx(jain([1.0, 0.5]))
