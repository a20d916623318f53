"""Estimates as a measured quantity: the readings a waiting job gets, and the error figures over them."""

from __future__ import annotations

import pytest

from scheduler_core.sim.engine import SimConfig, simulate
from scheduler_core.policy.decisions import Reason
from scheduler_core.sim.eta import EtaReadings, EtaRecorder, eta_figures
from scheduler_core.sim.metrics import summarise
from scheduler_core.sim.workloads.types import Workload

from .tiny import cluster, job, teams


def read(submitted: float, observations: list[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    readings = EtaReadings(submitted_at=submitted)
    for now, estimate in observations:
        readings.observe(now, estimate, "WaitingForCapacity")
    return [(at, estimate) for at, estimate, _ in readings.readings]


@pytest.mark.parametrize(("observations", "want"), [
    # The first estimate is read at once, then one per whole hour of the wait, whatever the cadence of cycles.
    ([(10, 5000), (70, 4000), (3590, 4100), (3610, 4200), (4000, 4300), (7300, 7400)],
     [(10, 5000), (3610, 4200), (7300, 7400)]),
    # No estimate yet (a plan made on a cadence names a new job within seconds): the first real one is read.
    ([(10, None), (40, 900), (3700, 950)], [(40, 900), (3700, 950)]),
    # Still none after an hour: that reading is "unknown".
    ([(10, None), (3600, None), (7200, 8000)], [(3600, None), (7200, 8000)]),
    # Cycles sparser than an hour: one reading per observation, never two for one instant.
    ([(0, 100), (10_900, 11_000)], [(0, 100), (10_900, 11_000)]),
])
def test_readings_at_submission_and_each_hour(observations: list[tuple[float, float | None]],
                                              want: list[tuple[float, float | None]]) -> None:
    assert read(0.0, observations) == want


@pytest.mark.parametrize(("jobs", "want"), [
    # A job that waited under five minutes is not measured; nor is one never started.
    ([(0.0, 200.0, [(0.0, 900.0, "")]), (0.0, None, [(0.0, 900.0, "")])], dict(jobs=0, readings=0, p50=None)),
    # Errors |estimate - start| over every reading: 600 and 0 and 1,200 s.
    ([(0.0, 1800.0, [(0.0, 1200.0, "")]), (0.0, 7200.0, [(0.0, 7200.0, ""), (3600.0, 8400.0, "")])],
     dict(jobs=2, readings=3, p50=600.0, early=1 / 3)),
    # Readings after the start (a plan lagging the admission) are not a user's reading; unknown ones are counted.
    ([(0.0, 3600.0, [(0.0, None, ""), (3600.0, 100.0, "")])], dict(jobs=1, readings=1, unknown=1, p50=None)),
])
def test_error_figures(jobs: list[tuple[float, float | None, list[tuple[float, float | None, str]]]],
                       want: dict[str, float | None]) -> None:
    figures = eta_figures(jobs)
    assert figures.jobs == want["jobs"]
    assert figures.readings == want["readings"]
    assert figures.p50_s == want["p50"]
    if "unknown" in want:
        assert figures.unknown == want["unknown"]
    if "early" in want:
        assert figures.early_share == pytest.approx(want["early"], abs=1e-4)


def test_a_run_reports_the_error_of_the_estimates_users_saw() -> None:
    """On the tiny cluster (two blocks of 4 nodes, one a spare each: 6 working nodes, 48 GPUs), a 48-GPU job
    holds it all for an hour with a 2-hour limit; a 16-GPU job submitted behind it waits for it. Its estimate
    comes from the limit (two hours) and it starts after one: one reading, error about an hour. The figures
    appear in the run's summary beside the others."""
    jobs = (job("big", at=0.0, gpus=48, work=3600.0, limit=7200.0),
            job("small", at=60.0, gpus=16, work=600.0, limit=3600.0))
    workload = Workload(name="tiny", jobs=jobs, cluster=cluster(), teams=teams(), window=(0.0, 86400.0))
    record = simulate(workload, "shoal", SimConfig(gpu_hours_per_failure=None))
    summary = summarise(record)
    small = next(log for log in record.jobs if log.id == "small")
    assert small.first_admitted_at is not None and small.first_admitted_at - 60.0 >= 300.0
    assert small.eta_readings and small.eta_readings[0][1] is not None
    assert summary["eta_jobs"] == 1
    assert summary["eta_error_p90_s"] == pytest.approx(abs(small.eta_readings[0][1] - small.first_admitted_at), abs=0.1)
    assert 3000 < summary["eta_error_p90_s"] < 3700


def test_the_recorder_reads_a_pass_as_observing_each_of_its_waits_would() -> None:
    """``EtaRecorder.waits`` passes over jobs not due a reading before looking further; what it reads is what
    observing every wait of every pass reads (a job admitted stops being read; one never submitted is ignored)."""
    observations = [(10, None), (40, 900.0), (70, 4000.0), (3590, 4100.0), (3610, 4200.0), (7300, None),
                    (9000, 9500.0), (11_000, 12_000.0)]
    recorder = EtaRecorder()
    into: list[tuple[float, float | None, str]] = []
    recorder.submitted("j", 0.0, into)
    for now, estimate in observations:
        recorder.waits([("j", Reason.BEHIND_RESERVATION, "m", 1, estimate),
                        ("stranger", Reason.QUOTA_FULL, "m", 1, 5.0)], now)
        if now == 9000:
            recorder.admitted("j")
    assert [(at, estimate) for at, estimate, _ in into] == read(0.0, observations[:6] + [(9000, 9500.0)])
    assert {reason for _, _, reason in into} == {"BehindReservation"}
