"""The controller's small parts on their own: the usage ledger, the straggler detector, the snapshot builder."""

from __future__ import annotations

import pytest

from scheduler_core.policy.decisions import Reason
from scheduler_core.policy.fairshare import decay
from scheduler_core.policy.snapshot import PendingJob, PolicyConfig
from scheduler_core.runtime.ledger import UsageLedger, usage_amounts
from scheduler_core.runtime.snapshot_builder import SnapshotBuilder
from scheduler_core.runtime.stragglers import StragglerDetector
from scheduler_core.store.records import JobRecord, JobState

from .runtime_builders import make_spec


def test_the_ledger_decays_every_record_from_its_own_end() -> None:
    ledger = UsageLedger(half_life_s=100.0)
    ledger.add("a", {"gpu": 800.0}, at=0.0)
    ledger.add("b", {"gpu": 50.0, "cpu": 10.0}, at=150.0)
    ledger.add("a", {"gpu": 400.0}, at=100.0)        # reported late: still decayed from its own end
    ledger.add("a", {"gpu": 40.0}, at=300.0)
    decayed = ledger.decayed(400.0)
    assert decayed["a"]["gpu"] == pytest.approx(800 / 16 + 400 / 8 + 40 / 2)
    assert decayed["b"] == pytest.approx({"gpu": decay(50.0, 250.0, 100.0), "cpu": decay(10.0, 250.0, 100.0),
                                          "memory": 0.0})
    assert ledger.decayed(500.0)["a"]["gpu"] == pytest.approx((800 / 16 + 400 / 8 + 40 / 2) / 2)


def test_usage_handed_out_never_changes_afterwards() -> None:
    """``decayed`` hands out the ledger's own dicts (a snapshot keeps them): a record added later at the same
    instant, or one reported late, goes into a new dict, never into one a snapshot already holds."""
    ledger = UsageLedger(half_life_s=100.0)
    ledger.add("a", {"gpu": 800.0}, at=100.0)
    held = ledger.decayed(100.0)["a"]
    ledger.add("a", {"gpu": 400.0}, at=100.0)
    ledger.add("a", {"gpu": 50.0}, at=50.0)
    assert held == {"gpu": 800.0, "cpu": 0.0, "memory": 0.0}
    assert ledger.decayed(100.0)["a"]["gpu"] == pytest.approx(1200.0 + decay(50.0, 50.0, 100.0))


def test_usage_is_normalised_by_flavour_speed() -> None:
    assert usage_amounts("a100", 8, 1, 96, 1024, 100.0) == pytest.approx({"gpu": 320.0, "cpu": 9600.0,
                                                                          "memory": 102400.0})
    assert usage_amounts("h100", 8, 1, 96, 1024, 100.0)["gpu"] == 800.0


@pytest.mark.parametrize(("reports", "expected"), [
    ({0: [1.0] * 5, 1: [1.0] * 5, 2: [1.3] * 5}, [2]),                    # consistently 30 % slower
    ({0: [1.0] * 5, 1: [1.0] * 5, 2: [1.3] * 4 + [1.1]}, []),             # one normal step clears it
    ({0: [1.0] * 5, 1: [1.0] * 5, 2: [1.3] * 4}, []),                     # not enough evidence yet
    ({0: [1.0] * 5, 1: [1.25] * 5}, [1]),                                 # two ranks: compared with the other
    ({0: [1.0] * 5, 1: [1.1] * 5, 2: [1.19] * 5}, []),                    # below the 20 % threshold
    ({0: [1.0] * 5, 1: [1.5] * 5, 2: [1.3] * 5, 3: [1.0] * 5}, [1, 2]),   # slowest first
    ({0: [1.0] * 5}, []),                                                 # no peers
])
def test_stragglers(reports: dict[int, list[float]], expected: list[int]) -> None:
    detector = StragglerDetector(threshold=1.2, window=5)
    for rank, times in reports.items():
        for step_time in times:
            detector.report(rank, step_time)
    assert detector.stragglers() == expected


def test_the_detector_keeps_only_its_window() -> None:
    detector = StragglerDetector(threshold=1.2, window=3)
    for step_time in (5.0, 5.0, 1.0, 1.0, 1.0):
        detector.report(0, step_time)
        detector.report(1, 1.0)
    assert detector.stragglers() == []


@pytest.mark.parametrize(("reason", "since", "waited", "clock"), [
    (None, None, 0.0, 100.0),                              # not yet waited: from its queueing
    (Reason.QUOTA_FULL, None, 0.0, 5000.0),                # held by quota only: its window has not started
    (Reason.COHORT_FULL, None, 600.0, 4400.0),             # 600 s for room earlier, now held by quota
    (Reason.WAITING_FOR_TOPOLOGY, 4000.0, 0.0, 4000.0),    # waiting for room since 4000
    (Reason.WAITING_FOR_TOPOLOGY, 4000.0, 600.0, 3400.0),  # ... after 600 s of it before a quota wait
])
def test_a_pending_jobs_block_cap_window_counts_only_its_waits_for_room(reason: Reason | None, since: float | None,
                                                                       waited: float, clock: float) -> None:
    record = JobRecord(id="job_a", spec=make_spec("a").build(), user="ana", state=JobState.PENDING,
                       submitted_at=100.0, queued_at=100.0, wait_reason=reason, room_wait_since=since,
                       room_waited_s=waited)
    snapshot = SnapshotBuilder([], PolicyConfig()).build(nodes=[], teams=[], pending=[record], running=[],
                                                         decayed_usage={})
    assert snapshot.pending[0].block_cap_since(5000.0) == clock


def test_a_job_held_by_quota_is_the_same_pending_job_pass_after_pass() -> None:
    """Its window moves with the clock, yet the builder hands back the very same ``PendingJob`` while only its
    wait's words move (a long queue held by quota is most of a replay's waiting jobs, every pass), and the window
    still comes out at each pass's clock."""
    builder = SnapshotBuilder([], PolicyConfig())
    record = JobRecord(id="job_a", spec=make_spec("a").build(), user="ana", state=JobState.PENDING,
                       submitted_at=100.0, queued_at=100.0, wait_reason=Reason.COHORT_FULL, room_waited_s=600.0)

    def pending(of: JobRecord) -> PendingJob:
        return builder.build(nodes=[], teams=[], pending=[of], running=[], decayed_usage={}).pending[0]

    first = pending(record)
    moved = record.with_wait(Reason.COHORT_FULL, "the cohort lends 8 now", 2, None, None, 600.0)
    assert pending(moved) is first
    assert (first.block_cap_since(5000.0), first.block_cap_since(9000.0)) == (4400.0, 8400.0)
    assert pending(record.with_wait(Reason.WAITING_FOR_CAPACITY, "", 1, None, 8000.0, 600.0)) is not first
