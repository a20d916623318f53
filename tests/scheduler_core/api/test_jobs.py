"""Jobs through the API: submit, follow, cancel, checkpoint — what a user sees at each step of a job's life."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.policy.decisions import Reason
from scheduler_core.policy.snapshot import AdmittedAs
from scheduler_core.store.records import CheckpointRecord, JobState

from ..runtime_builders import make_spec, whole_nodes
from .harness import T0, Harness

#: Every store: the views must read the records each one really returns.
pytestmark = pytest.mark.parametrize(
    "api", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)


def test_submit_stores_the_job_wakes_the_controller_and_answers_at_once(api: Harness) -> None:
    spec = make_spec("train").pods(2, 4).build()

    reply = api.client("alice").submit(spec, idempotency_key="first-try")

    stored = api.store.get(reply.job_id)
    assert (reply.state, reply.queue) == ("PENDING", "fraud-ml")
    assert (stored.spec, stored.user, stored.state) == (spec, "alice", JobState.PENDING)
    assert api.wakes == [T0]


def test_a_waiting_job_shows_position_reason_and_estimated_start(api: Harness) -> None:
    job = api.submit(make_spec("big").pods(4, 8).build())
    api.store.set_waits([(job.id, Reason.WAITING_FOR_CAPACITY, "needs 4 free nodes", 3, T0 + 3600)], T0)

    view = api.client("alice").job(job.id)

    assert (view.position, view.reason, view.reason_message) == (3, "WaitingForCapacity", "needs 4 free nodes")
    assert view.estimated_start == datetime(2026, 10, 27, 1, 0, tzinfo=timezone.utc)


def test_a_running_job_shows_where_it_runs_how_it_holds_them_and_its_gpu_hours(api: Harness) -> None:
    spec = make_spec("gang").pods(2, 8).build()
    job = api.run(spec, whole_nodes("h100-b0-n00", "h100-b0-n01"), admitted_as=AdmittedAs.BORROWED)
    api.store.record_checkpoint(CheckpointRecord(job.id, step=18400, uri="file:///ck/18400", bytes=98_000,
                                                 written_at=T0 + 600, verified=True))
    api.clock.advance(1800)

    view = api.client("alice").job(job.id)

    assert view.state == "RUNNING" and view.admitted_as == "borrowed"
    assert view.placement is not None
    assert (view.placement.blocks, view.placement.nodes) == (["h100-b0"], 2)
    assert view.placement.node_names == ["h100-b0-n00", "h100-b0-n01"]
    assert [(p.rank, p.node, p.units) for p in view.placement.pods] == [
        (0, "h100-b0-n00", list(range(8))), (1, "h100-b0-n01", list(range(8)))]
    assert view.last_checkpoint is not None
    assert (view.last_checkpoint.step, view.last_checkpoint.bytes) == (18400, 98_000)
    assert view.last_checkpoint.at == datetime(2026, 10, 27, 0, 10, tzinfo=timezone.utc)
    assert view.gpu_hours_used == 16 * 0.5


def test_gpu_hours_add_up_over_attempts(api: Harness) -> None:
    job = api.run(make_spec("restarts").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.clock.advance(3600)
    api.store.release(job.id, state=JobState.PENDING, now=api.clock(), epoch=0, infra_fault=True)
    api.store.bind(job.id, whole_nodes("h100-b1-n00"), AdmittedAs.NOMINAL, epoch=0, now=api.clock())
    api.clock.advance(1800)

    view = api.client("alice").job(job.id)

    assert view.infra_restarts == 1 and view.restarts == 0
    assert view.gpu_hours_used == 8 * 1.5


def test_cancel_a_pending_job_ends_it_at_once(api: Harness) -> None:
    job = api.submit(make_spec("oops").build())

    view = api.client("alice").cancel(job.id)

    assert view.state == "CANCELLED"
    assert api.store.get(job.id).state is JobState.CANCELLED
    assert [(e.reason, e.job_id) for e in api.store.events()] == [("CancelRequested", job.id)]
    assert api.wakes == [T0]


def test_cancel_a_running_job_asks_the_controller_to_stop_it(api: Harness) -> None:
    job = api.run(make_spec("long").pods(1, 8).build(), whole_nodes("h100-b0-n00"))

    view = api.client("alice").cancel(job.id)

    assert view.state == "RUNNING" and view.cancel_requested
    assert api.store.get(job.id).cancel_requested
    assert api.wakes == [T0]


def test_checkpoint_now_flags_a_running_job_and_records_who_asked(api: Harness) -> None:
    job = api.run(make_spec("save").pods(1, 8).build(), whole_nodes("h100-b0-n00"))

    view = api.client("alice").checkpoint(job.id)

    assert view.checkpoint_requested
    assert api.store.get(job.id).checkpoint_requested
    events = api.store.events(job_id=job.id)
    assert [(e.reason, e.message) for e in events] == [("CheckpointRequested", "checkpoint requested by alice")]


def test_checkpoint_of_a_pending_job_is_a_conflict(api: Harness) -> None:
    job = api.submit(make_spec("waiting").build())

    response = api.http("POST", f"/v1/jobs/{job.id}:checkpoint")

    assert response.status_code == 409
    assert not api.store.get(job.id).checkpoint_requested


def test_whoami(api: Harness) -> None:
    me = ShoalClient(api.url, api.users["root"]).whoami()

    assert (me.user, me.team, me.admin) == ("root", "platform", True)


def test_the_idle_reaper_reports_a_notebooks_idle_clock(api: Harness) -> None:
    """The reaper (an admin) tells the scheduler when a running notebook went quiet and after how long it frees
    the slice; a busy kernel clears it. Another team may not; a job not holding a slice has no clock; a half
    body is a field-level 400/422 and nothing is stored."""
    job = api.run(make_spec("nb").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    quiet = T0 - 3000

    api.client("root").idle_clock(job.id, quiet, 3600.0)
    assert (api.store.get(job.id).idle_since, api.store.get(job.id).idle_limit_s) == (quiet, 3600.0)
    api.client("alice").idle_clock(job.id, None, None)
    assert (api.store.get(job.id).idle_since, api.store.get(job.id).idle_limit_s) == (None, None)

    denied = api.http("POST", f"/v1/jobs/{job.id}:idle", who="bob",
                      json={"last_activity": "2026-10-27T00:00:00Z", "idle_limit_s": 3600})
    assert denied.status_code == 403
    half = api.http("POST", f"/v1/jobs/{job.id}:idle", who="root", json={"last_activity": "2026-10-27T00:00:00Z"})
    assert half.status_code == 422 and "idle_limit_s" in half.json()["error"]["message"]
    assert api.store.get(job.id).idle_since is None
    pending = api.submit(make_spec("later").build())
    conflict = api.http("POST", f"/v1/jobs/{pending.id}:idle", who="root",
                        json={"last_activity": "2026-10-27T00:00:00Z", "idle_limit_s": 3600})
    assert conflict.status_code == 409
