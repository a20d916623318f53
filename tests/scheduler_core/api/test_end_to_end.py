"""End to end, with real processes: ``shoal up`` (SQLite, the local executor, the real policy), the ``shoal`` CLI
and the client SDK, and each pod a real process running the example trainer that keeps the job contract.

One scenario on a small cluster (block b0: four 4-GPU H100 nodes, the last a hot spare; block a0: one 4-GPU A100
node), two teams in one cohort — ``lender`` (8 H100 nominal, 4 A100) and ``borrower`` (4 H100 nominal, may borrow 8):

* bad input of every kind is refused with a clear error, and nothing is stored or started;
* ``short`` (lender, 1×4 A100, time limit 1 min) is stopped at its limit;
* ``hog`` (borrower, 2×4 H100) runs on borrowed quota; ``gang`` (borrower, 2×4) waits, with no pod started, while
  only one node is free;
* ``owner`` (lender, 2×4) reclaims its nominal quota: ``hog`` gets SIGTERM, saves a checkpoint within its grace,
  exits, waits with a reason, and later resumes from that checkpoint's step;
* a node of ``owner`` fails (``shoal nodes fail``): the gang restarts from its last checkpoint on the hot spare;
* ``gang`` starts with both pods at once, each with the job contract's environment;
* the usage ledger holds every job's GPU-seconds, nominal and borrowed apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.schemas import JobView
from scheduler_core.store.sql import open_store
from tests.shoal_up import Up, started

pytestmark = pytest.mark.slow

CLUSTER = """
name: e2e
blocks:
  - name: b0
    nodes: [{count: 4, gpu: h100, gpus_per_node: 4}]
    nodes_per_leaf: 2
    spares: 1
  - name: a0
    nodes: [{count: 1, gpu: a100, gpus_per_node: 4}]
"""
TEAMS = """
teams:
  - name: lender
    cohort: c
    quotas:
      h100: {nominal: 8}
      a100: {nominal: 4}
  - name: borrower
    cohort: c
    quotas:
      h100: {nominal: 4, borrowing_limit: 8}
"""
SPARE = "b0-n03"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "teams.yaml").write_text(TEAMS)
    with started(tmp_path / "state", "--cluster", str(tmp_path / "cluster.yaml"), "--teams",
                 str(tmp_path / "teams.yaml"), "--tick", "0.5", "--min-run-time", "0s") as up:
        yield up


def trainer(steps: int, *, save_every: int = 5, step_seconds: float = 0.2) -> list[str]:
    return ["python", "-m", "scheduler_core.examples.train", "--steps", str(steps), "--step-seconds",
            str(step_seconds), "--save-every", str(save_every)]


def spec(name: str, team: str, pods: int, gpus: int, command: list[str], **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": team, "flavour": extra.pop("flavour", "h100"), "pods": pods, "gpus_per_pod": gpus,
            "command": command, "checkpoint": {"grace_period": "30s"}, **extra}


def test_bad_input_is_refused_and_nothing_is_stored_or_started(up: Up) -> None:
    ana = up.token("ana", "borrower")
    admin = up.token("root", "lender", admin=True)
    good = spec("ok", "borrower", 1, 4, trainer(3000))   # runs until the test cancels it, however slow the machine
    cases: list[tuple[dict[str, Any], Any, int, str]] = [
        ({"content": b"{not json"}, ana, 400, "invalid_json"),
        ({"json": good}, "shoal_wrong", 401, "unauthorized"),
        ({"json": {k: v for k, v in good.items() if k != "command"}}, ana, 422, "invalid_spec"),
        ({"json": {**good, "gpus_per_pod": 0}}, ana, 422, "invalid_spec"),
        ({"json": {**good, "pods": 1250, "gpus_per_pod": 8}}, ana, 422, "invalid_spec"),
        ({"json": {**good, "pods": 4}}, ana, 422, "invalid_spec"),           # 16 GPUs: the cluster has 12
        ({"json": {**good, "flavour": "a100"}}, ana, 422, "invalid_spec"),   # borrower has no A100 quota
        ({"json": {**good, "flavour": "h200"}}, ana, 422, "invalid_spec"),
        ({"json": {**good, "team": "nosuch"}}, ana, 422, "invalid_spec"),
        ({"json": {**good, "team": "lender"}}, ana, 403, "forbidden"),
    ]
    for request, token, status, code in cases:
        response = httpx.post(f"{up.url}/v1/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=10,
                              **request)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code), request
    first = httpx.post(f"{up.url}/v1/jobs", json=good, timeout=10,
                       headers={"Authorization": f"Bearer {ana}", "Idempotency-Key": "k"})
    again = httpx.post(f"{up.url}/v1/jobs", json={**good, "pods": 2}, timeout=10,
                       headers={"Authorization": f"Bearer {ana}", "Idempotency-Key": "k"})
    assert (first.status_code, again.status_code) == (202, 409)
    bob = up.token("bob", "lender")
    assert httpx.get(f"{up.url}/v1/jobs/{first.json()['job_id']}", timeout=10,
                     headers={"Authorization": f"Bearer {bob}"}).status_code == 403

    queues = ShoalClient(up.url, admin).queues(states="all").queues
    assert [j.job_id for q in queues for j in q.jobs] == [first.json()["job_id"]]
    ShoalClient(up.url, ana).cancel(first.json()["job_id"])
    started = sorted(p.name for p in (up.state / "executor" / "pods").glob("*"))
    assert started in ([], [first.json()["job_id"]])


def test_gangs_reclaim_failure_time_limit_and_usage(up: Up) -> None:
    lea_token = up.token("lea", "lender")
    lender = ShoalClient(up.url, lea_token)
    borrower = ShoalClient(up.url, up.token("ana", "borrower"))
    admin_token = up.token("root", "lender", admin=True)
    admin = ShoalClient(up.url, admin_token)

    def job(client: ShoalClient, job_id: str) -> JobView:
        return client.job(job_id)

    # A job past its time limit is stopped (preemptible: SIGTERM, it saves, and it ends as TIMED_OUT).
    short = lender.submit(spec("short", "lender", 1, 4, trainer(100_000), flavour="a100", time_limit="1m")).job_id

    # hog runs on borrowed quota, on every node but the hot spare, and checkpoints as it goes.
    hog = borrower.submit(spec("hog", "borrower", 3, 4, trainer(60))).job_id
    running = up.eventually(lambda: (v := job(borrower, hog)).state == "RUNNING" and v, "hog to run")
    assert running.admitted_as == "borrowed"
    up.eventually(lambda: job(borrower, hog).last_checkpoint, "hog's first checkpoint")

    # gang cannot start: its team is at its borrowing limit (and no node is free but the spare).
    gang = borrower.submit(spec("gang", "borrower", 2, 4, trainer(10, save_every=0))).job_id
    waiting = up.eventually(lambda: (v := job(borrower, gang)).reason and v, "gang to be given a reason")
    assert waiting.state == "PENDING" and not up.pods_started(gang)

    # owner reclaims lender's nominal quota, lent to hog, and needs hog's nodes (a lender whose job fits free units
    # starts there and stops nobody): hog is preempted to checkpoint and requeued with a reason.
    owner = lender.submit(spec("owner", "lender", 2, 4, trainer(100_000))).job_id
    # The requeue lands first; the next cycle gives the reason. Wait for both.
    preempted = up.eventually(lambda: (v := job(borrower, hog)).state == "PENDING" and v.preemptions == 1
                              and v.reason is not None and v, "hog to be preempted, requeued and given a reason")
    assert preempted.last_checkpoint is not None and preempted.reason is not None
    saved_step = preempted.last_checkpoint.step
    assert f"SIGTERM: saved step {saved_step}, exiting" in up.logs(hog)[0]
    assert preempted.exit_code == 0
    owned = up.eventually(lambda: (v := job(lender, owner)).state == "RUNNING" and v, "owner to run")
    assert owned.admitted_as == "nominal"
    assert job(borrower, gang).state == "PENDING" and not up.pods_started(gang)

    # A node of owner fails: the gang restarts from its last checkpoint on the block's hot spare, with no human.
    before = up.eventually(lambda: job(lender, owner).last_checkpoint, "owner's first checkpoint")
    assert owned.placement is not None
    failed_node = owned.placement.node_names[1]
    refused = up.shoal("nodes", "fail", failed_node, token=lea_token)   # a team's token may not fail nodes
    assert refused.returncode == 3 and "admin token" in refused.stderr
    result = up.shoal("nodes", "fail", failed_node, token=admin_token)   # through the API, from the repo's root
    assert result.returncode == 0, result.stderr
    failed_event = next(e for e in admin.events(limit=1000).events if e.reason == "NodeFailed")
    assert failed_event.node == failed_node and failed_event.data["by"] == "root"
    restarted = up.eventually(lambda: (v := job(lender, owner)).state == "RUNNING" and v.infra_restarts == 1 and v,
                              "owner to restart after the node failure")
    assert restarted.placement is not None
    assert failed_node not in restarted.placement.node_names and SPARE in restarted.placement.node_names
    assert restarted.restarts == 0 and restarted.preemptions == 0
    resumed = up.eventually(lambda: re.search(r"resuming from step (\d+)", up.logs(owner)[-1]), "owner to resume")
    assert len(up.logs(owner)) == 2 and int(resumed.group(1)) >= before.step

    # short reached its limit: stopped, not left running.
    stopped = up.eventually(lambda: (v := job(lender, short)).state == "TIMED_OUT" and v, "short to hit its limit",
                            timeout=150)
    assert stopped.started_at is not None and stopped.finished_at is not None
    assert 60 <= (stopped.finished_at - stopped.started_at).total_seconds() < 60 + 30 + 15

    # Capacity returns: hog resumes from the step it saved when preempted, then gang starts, both pods at once.
    lender.cancel(owner)
    up.eventually(lambda: len(up.logs(hog)) == 2 and "resuming from step" in up.logs(hog)[1], "hog to resume")
    assert f"resuming from step {saved_step}" in up.logs(hog)[1]
    assert up.eventually(lambda: (v := job(borrower, hog)).state in ("SUCCEEDED", "FAILED") and v,
                         "hog to finish").state == "SUCCEEDED"
    ran = up.eventually(lambda: (v := job(borrower, gang)).state == "SUCCEEDED" and v, "gang to run and finish")
    assert ran.placement is not None and len(set(ran.placement.node_names)) == 2
    for rank in (0, 1):
        line = up.logs(gang, rank)[0].splitlines()[0]
        assert f"rank {rank}/2 of job {gang} on {ran.placement.pods[rank].node}" in line
        assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in line
        assert f"master {ran.placement.node_names[0]}:" in line

    # The usage ledger: every job's GPU-seconds, nominal and borrowed apart.
    up.eventually(lambda: job(lender, owner).state == "CANCELLED", "owner to end")
    store = open_store(f"sqlite:///{up.state / 'shoal.db'}")
    try:
        by_job: dict[str, dict[str, float]] = {}
        for record in store.usage():
            held = by_job.setdefault(record.job_id, {})
            held[record.admitted_as.value] = held.get(record.admitted_as.value, 0.0) + record.gpu_seconds
    finally:
        store.dispose()
    assert set(by_job) == {short, hog, owner, gang}
    assert by_job[hog].keys() == {"borrowed"} and by_job[hog]["borrowed"] > 0
    assert by_job[owner].keys() == {"nominal"} and by_job[short].keys() == {"nominal"}
    assert by_job[short]["nominal"] >= 4 * 60
    totals = {t.team: t for t in admin.usage().totals}
    assert totals["borrower"].borrowed_gpu_seconds == pytest.approx(
        by_job[hog]["borrowed"] + by_job[gang].get("borrowed", 0.0), rel=1e-3)
    assert totals["lender"].nominal_gpu_seconds == pytest.approx(
        by_job[owner]["nominal"] + by_job[short]["nominal"], rel=1e-3)
    for job_id in (short, hog, owner, gang):
        assert admin.job(job_id).gpu_hours_used > 0
