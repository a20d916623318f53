"""The run-time history behind estimated starts: medians per team and kind, and the ratios of the jobs that ran
longer than a running job has so far (``RunTimes.ratio_after``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler_core.runtime.runtimes import KIND_SAMPLES, MIN_SAMPLES, TEAM_SAMPLES, RunTimeHistory


def history(team_ratios: Sequence[float], other_ratios: Sequence[float] = ()) -> RunTimeHistory:
    h = RunTimeHistory()
    for ratio in team_ratios:
        h.observe("fraud", "batch", ratio * 3600.0, 3600.0)
    for ratio in other_ratios:
        h.observe("vision", "batch", ratio * 3600.0, 3600.0)
    return h


def test_the_team_median_needs_enough_samples_and_the_kind_speaks_for_the_rest() -> None:
    runtimes = history([0.2] * MIN_SAMPLES, [0.8] * (MIN_SAMPLES - 1)).runtimes()
    assert runtimes.ratio("fraud", "batch") == pytest.approx(0.2)
    assert runtimes.ratio("vision", "batch") == pytest.approx(0.2)      # the kind's: 4 × 0.2 and 3 × 0.8
    assert runtimes.ratio("search", "notebook") == 1.0                  # no history: the time limit


@pytest.mark.parametrize(("used", "expected"), [
    (0.0, 0.35),            # nothing run yet: every sample speaks (the median)
    (0.25, 0.5),            # past the short ones: only the five that ran longer
    (0.55, None),           # fewer than MIN_SAMPLES ran longer than this, of the team's and of the kind's
])
def test_a_running_job_is_judged_by_the_jobs_that_ran_longer(used: float, expected: float | None) -> None:
    runtimes = history([0.1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.6]).runtimes()
    after = runtimes.ratio_after("fraud", "batch", used)
    assert after == (None if expected is None else pytest.approx(expected))


def test_the_kind_answers_when_too_few_of_the_team_ran_that_long() -> None:
    runtimes = history([0.1] * 6 + [0.9], [0.5, 0.6, 0.7, 0.8]).runtimes()
    assert runtimes.ratio_after("fraud", "batch", 0.3) == pytest.approx(0.7)   # the kind's 0.5, 0.6, 0.7, 0.8, 0.9


def test_history_is_bounded_and_ratios_are_capped_at_the_limit() -> None:
    h = RunTimeHistory()
    for _ in range(KIND_SAMPLES + 10):
        h.observe("fraud", "batch", 7200.0, 3600.0)      # ran past its limit (a grace): counts as the limit
    runtimes = h.runtimes()
    assert runtimes.by_team[("fraud", "batch")] == (1.0,) * TEAM_SAMPLES
    assert len(runtimes.by_kind["batch"]) == KIND_SAMPLES
