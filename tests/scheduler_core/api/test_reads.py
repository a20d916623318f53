"""Reading the cluster through the API: queues, quotas, nodes, events, usage and the Prometheus metrics."""

from __future__ import annotations

import math
from datetime import date

import pytest

from scheduler_core.model import Health
from scheduler_core.policy.decisions import Reason
from scheduler_core.policy.snapshot import AdmittedAs
from scheduler_core.store.records import Event, JobState

from ..runtime_builders import make_spec, place, whole_nodes
from .harness import T0, Harness

#: Every store: the views must read the records each one really returns.
pytestmark = pytest.mark.parametrize(
    "api", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)


def test_queue_lists_pending_jobs_in_queue_order_then_running_ones(api: Harness) -> None:
    running = api.run(make_spec("running").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    later = api.submit(make_spec("second").build())
    first = api.submit(make_spec("first").build())
    unplaced = api.submit(make_spec("new").build())
    api.submit(make_spec("theirs").team("search").build(), user="bob")
    api.store.set_waits([(first.id, Reason.QUOTA_FULL, "team at quota", 1, None),
                         (later.id, Reason.BEHIND_RESERVATION, "behind job_x", 2, T0 + 600)], T0)

    queue = api.client("alice").queue("fraud-ml")

    assert [(j.job_id, j.state, j.position, j.reason) for j in queue.jobs] == [
        (first.id, "PENDING", 1, "QuotaFull"), (later.id, "PENDING", 2, "BehindReservation"),
        (unplaced.id, "PENDING", None, None), (running.id, "RUNNING", None, None)]
    assert queue.jobs[1].estimated_start is not None and queue.jobs[1].estimated_start.timestamp() == T0 + 600


def test_queue_filters_by_state(api: Harness) -> None:
    api.run(make_spec("running").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    pending = api.submit(make_spec("pending").build())
    done = api.submit(make_spec("cancelled").build())
    api.store.request_cancel(done.id, api.clock())

    client = api.client("alice")

    assert [j.job_id for j in client.queue("fraud-ml", states="PENDING").jobs] == [pending.id]
    assert {j.state for j in client.queue("fraud-ml").jobs} == {"PENDING", "RUNNING"}
    assert {j.state for j in client.queue("fraud-ml", states="all").jobs} == {"PENDING", "RUNNING", "CANCELLED"}


def test_queues_shows_a_user_their_team_and_an_admin_every_team(api: Harness) -> None:
    api.submit(make_spec("mine").build())
    api.submit(make_spec("theirs").team("search").build(), user="bob")

    assert [q.team for q in api.client("alice").queues().queues] == ["fraud-ml"]
    assert [(q.team, len(q.jobs)) for q in api.client("root").queues().queues] == [("fraud-ml", 1), ("search", 1)]


def test_quota_shows_nominal_borrowed_lent_pending_and_fair_share(api: Harness) -> None:
    api.run(make_spec("own").pods(2, 8).build(), whole_nodes("h100-b0-n00", "h100-b0-n01"))
    api.run(make_spec("extra").pods(1, 8).build(), whole_nodes("h100-b0-n02"), admitted_as=AdmittedAs.BORROWED)
    api.run(make_spec("theirs").team("search").pods(1, 8).build(), whole_nodes("h100-b1-n00"), user="bob")
    api.submit(make_spec("waiting").pods(2, 8).build())

    fraud = api.client("alice").quota("fraud-ml")
    search = api.client("bob").quota("search")

    fraud_h100 = next(f for f in fraud.flavours if f.flavour == "h100")
    search_h100 = next(f for f in search.flavours if f.flavour == "h100")
    assert (fraud_h100.nominal, fraud_h100.used, fraud_h100.borrowed, fraud_h100.lent, fraud_h100.pending) == (
        16, 24, 8, 0, 16)
    assert (search_h100.nominal, search_h100.used, search_h100.borrowed, search_h100.lent, search_h100.pending) == (
        32, 8, 0, 8, 0)
    # 64 H100s plus 56 one-seventh slices = 72 H100-equivalents (as the policy counts); search's weight is 2.
    assert fraud.fair_share == pytest.approx(24 / 72, abs=1e-6)
    assert search.fair_share == pytest.approx(8 / 72 / 2, abs=1e-6)
    assert fraud.dominant_resource == "gpu"


def test_fair_share_remembers_past_use_as_the_policy_does(api: Harness) -> None:
    done = api.run(make_spec("yesterday").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.clock.advance(7 * 86400)
    api.store.release(done.id, state=JobState.SUCCEEDED, now=api.clock(), epoch=0, exit_code=0)
    api.clock.advance(7 * 86400)   # one half-life (the default) after the job ended

    share = api.client("alice").quota("fraud-ml").fair_share

    # 8 GPUs for a week (h) count when the job ends, then halve over one more h: 4·h GPU-seconds, which as a
    # steady rate (× ln2 / h) is 4·ln2 GPUs held, of 72.
    assert share == pytest.approx(4 * math.log(2) / 72, abs=1e-6)


def test_nodes_show_allocation_and_only_your_teams_jobs(api: Harness) -> None:
    mine = api.run(make_spec("mine").pods(1, 4).build(), place("h100", ("h100-b0-n00", (0, 1, 2, 3))))
    api.run(make_spec("theirs").team("search").pods(1, 2).build(), place("h100", ("h100-b0-n00", (4, 5))),
            user="bob")
    api.store.set_node_health("h100-b1-n02", Health.REPAIR, "ECC errors", api.clock())

    alice = {n.name: n for n in api.client("alice").nodes().nodes}
    root = {n.name: n for n in api.client("root").nodes().nodes}

    n00 = alice["h100-b0-n00"]
    assert (n00.capacity, n00.allocated, n00.free) == ({"h100": 8}, {"h100": 6}, {"h100": 2})
    assert n00.jobs == [mine.id]
    assert len(root["h100-b0-n00"].jobs) == 2
    assert (alice["h100-b1-n02"].health, alice["h100-b1-n02"].health_reason) == ("repair", "ECC errors")
    assert alice["h100-b0-n03"].spare and alice["mig-a-n00"].capacity == {"h100-mig-1g": 56}


def test_events_show_your_team_and_the_cluster_and_page_forward(api: Harness) -> None:
    for i, team in enumerate(["fraud-ml", "search", None, "fraud-ml", "search", "fraud-ml"]):
        api.store.append_event(Event(at=T0 + i, kind="job" if team else "node", reason=f"R{i}", team=team))

    client = api.client("alice")
    first = client.events(limit=2)
    rest = client.events(after=first.next_after, limit=100)

    assert [e.reason for e in first.events] == ["R0", "R2"]
    assert [e.reason for e in rest.events] == ["R3", "R5"]
    assert client.events(after=rest.next_after).events == []
    assert [e.reason for e in api.client("root").events().events] == [f"R{i}" for i in range(6)]


def test_events_of_one_job(api: Harness) -> None:
    job = api.submit(make_spec("mine").build())
    api.store.append_event(Event(at=T0, kind="job", reason="Admitted", job_id=job.id, team="fraud-ml"))
    api.store.append_event(Event(at=T0, kind="job", reason="Admitted", job_id="job_other", team="fraud-ml"))

    events = api.client("alice").events(job.id).events

    assert [(e.reason, e.job_id) for e in events] == [("Admitted", job.id)]


def test_usage_splits_by_day_team_flavour_and_nominal_vs_borrowed(api: Harness) -> None:
    api.clock.now = T0 - 1800   # 23:30 the day before
    done = api.run(make_spec("across-midnight").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.clock.advance(3600)
    api.store.release(done.id, state=JobState.SUCCEEDED, now=api.clock(), epoch=0, exit_code=0)
    api.run(make_spec("borrowing").pods(1, 8).build(), whole_nodes("h100-b0-n01"), admitted_as=AdmittedAs.BORROWED)
    api.run(make_spec("notebook").mig(7).build(), place("h100-mig-1g", ("mig-a-n00", tuple(range(7)))))
    api.run(make_spec("theirs").team("search").pods(1, 8).build(), whole_nodes("h100-b1-n00"), user="bob")
    api.clock.advance(700)

    report = api.client("alice").usage()

    rows = [(r.day, r.team, r.flavour, r.admitted_as, r.gpu_seconds, r.normalised_gpu_seconds) for r in report.rows]
    assert rows == [
        (date(2026, 10, 26), "fraud-ml", "h100", "nominal", 8 * 1800, 8 * 1800),
        (date(2026, 10, 27), "fraud-ml", "h100", "borrowed", 8 * 700, 8 * 700),
        (date(2026, 10, 27), "fraud-ml", "h100", "nominal", 8 * 1800, 8 * 1800),
        (date(2026, 10, 27), "fraud-ml", "h100-mig-1g", "nominal", 7 * 700, 700),
    ]
    [total] = report.totals
    assert (total.team, total.nominal_gpu_seconds, total.borrowed_gpu_seconds) == (
        "fraud-ml", 8 * 3600 + 7 * 700, 8 * 700)
    assert total.normalised_gpu_seconds == 8 * 3600 + 700 + 8 * 700
    assert {t.team for t in api.client("root").usage().totals} == {"fraud-ml", "search"}
    since = api.client("alice").usage(since=date(2026, 10, 27))
    assert {r.day for r in since.rows} == {date(2026, 10, 27)}


def _metric(text: str, name: str, **labels: str) -> float:
    label = ",".join(f'{k}="{v}"' for k, v in labels.items())
    prefix = f"{name}{{{label}}} " if label else f"{name} "
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, text)
    return float(lines[0].split()[-1])


def test_metrics_show_free_gpus_next_to_the_largest_free_shape(api: Harness) -> None:
    api.run(make_spec("gang").pods(2, 8).build(), whole_nodes("h100-b0-n00", "h100-b0-n01"))
    api.run(make_spec("one").pods(1, 1).build(), place("h100", ("h100-b1-n00", (0,))))
    api.submit(make_spec("waiting").pods(3, 8).build())
    api.store.set_node_health("h100-b1-n02", Health.REPAIR, "ECC errors", api.clock())

    response = api.http("GET", "/metrics", who=None)

    assert response.status_code == 200
    text = response.text
    assert _metric(text, "shoal_units_capacity", flavour="h100") == 64
    assert _metric(text, "shoal_units_healthy", flavour="h100") == 56
    assert _metric(text, "shoal_units_allocated", flavour="h100") == 17
    # Free: b0-n02 (8) + b1-n00 (7) + b1-n01 (8); n02 of b1 is in repair; spares take no new work.
    assert _metric(text, "shoal_units_free", flavour="h100") == 23
    assert _metric(text, "shoal_largest_free_shape_units", flavour="h100") == 8
    assert _metric(text, "shoal_largest_free_whole_nodes", flavour="h100") == 1
    assert _metric(text, "shoal_queue_pending_jobs", team="fraud-ml") == 1
    assert _metric(text, "shoal_queue_pending_units", team="fraud-ml") == 24
    assert _metric(text, "shoal_nodes", health="repair") == 1


def test_metrics_count_preemptions_restarts_and_admissions_from_the_event_log(api: Harness) -> None:
    def log(kind: str, reason: str) -> None:
        api.store.append_event(Event(at=api.clock(), kind=kind, reason=reason, job_id="job_x", team="fraud-ml"))

    for kind, reason in [("preempt", "Reclaim"), ("preempt", "Reclaim"), ("requeue", "Preempted"),
                         ("requeue", "NodeLost"), ("admit", "borrowed"), ("admit", "BindRejected")]:
        log(kind, reason)
    first = api.http("GET", "/metrics", who=None).text
    log("preempt", "TimeLimit")
    log("requeue", "NodeLost")
    second = api.http("GET", "/metrics", who=None).text

    assert _metric(first, "shoal_preemptions_total", reason="Reclaim") == 2
    assert _metric(first, "shoal_restarts_total", reason="NodeLost") == 1
    assert "Preempted" not in "".join(line for line in first.splitlines() if line.startswith("shoal_restarts"))
    assert _metric(first, "shoal_admissions_total", admitted_as="borrowed") == 1
    assert _metric(second, "shoal_preemptions_total", reason="TimeLimit") == 1
    assert _metric(second, "shoal_restarts_total", reason="NodeLost") == 2
    assert _metric(second, "shoal_events_total", kind="preempt", reason="Reclaim") == 2
