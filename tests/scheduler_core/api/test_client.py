"""The client SDK: sync and async against the real server, errors as typed exceptions, config resolution, and an
import that pulls in none of the server side."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from scheduler_core.client import (ApiUnavailable, AsyncShoalClient, AuthenticationFailed,
                                   InvalidRequest, JobNotFound, PermissionDenied, ServerError, ShoalClient,
                                   StateConflict)
from scheduler_core.errors import Conflict, NotFound, ValidationFailed
from scheduler_core.schemas import JobStateName
from scheduler_core.store.records import JobState

from ..runtime_builders import make_spec, whole_nodes
from .harness import Harness


def test_async_client_does_what_the_sync_one_does(api: Harness) -> None:
    async def scenario() -> tuple[str, str, str, int]:
        async with AsyncShoalClient(api.url, api.users["alice"]) as client:
            reply = await client.submit(make_spec("async").build())
            view = await client.job(reply.job_id)
            cancelled = await client.cancel(reply.job_id)
            queue = await client.queue("fraud-ml", states="all")
            return reply.job_id, view.state, cancelled.state, len(queue.jobs)

    job_id, state, after, queued = asyncio.run(scenario())

    assert (state, after, queued) == ("PENDING", "CANCELLED", 1)
    assert api.store.get(job_id).state is JobState.CANCELLED


def test_submit_accepts_a_plain_mapping_and_the_server_validates_it(api: Harness) -> None:
    client = api.client("alice")

    with pytest.raises(InvalidRequest) as info:
        client.submit({"name": "x", "team": "fraud-ml", "flavour": "h100", "gpus_per_pod": 0, "command": ["true"]})

    assert info.value.status == 422
    assert "gpus_per_pod" in info.value.fields
    assert isinstance(info.value, ValidationFailed)
    assert api.store.list_jobs() == []


@pytest.mark.parametrize(("who", "call", "error", "also"), [
    ("alice", lambda c: c.job("job_nosuch"), JobNotFound, NotFound),
    ("alice", lambda c: c.queue("search"), PermissionDenied, PermissionDenied),
    ("nobody", lambda c: c.whoami(), AuthenticationFailed, AuthenticationFailed),
])
def test_error_answers_become_typed_errors(api: Harness, who: str, call: object, error: type[Exception],
                                           also: type[Exception]) -> None:
    client = ShoalClient(api.url, api.users.get(who, "shoal_wrong"))

    with pytest.raises(error) as info:
        call(client)  # type: ignore[operator]

    assert isinstance(info.value, also)
    assert str(info.value)


def test_a_conflict_is_both_the_clients_and_the_cores_conflict(api: Harness) -> None:
    job = api.run(make_spec("done").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.store.release(job.id, state=JobState.FAILED, now=api.clock(), epoch=0, exit_code=1)

    with pytest.raises(StateConflict) as info:
        api.client("alice").cancel(job.id)

    assert isinstance(info.value, Conflict) and info.value.code == "conflict"


def test_the_transport_seam_runs_a_client_without_a_network() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, json={"error": {"code": "stale_leader", "message": "not the leader",
                                                   "fields": {}}})

    client = ShoalClient("http://shoal.invalid", "tok", transport=httpx.MockTransport(handler))

    with pytest.raises(ServerError) as info:
        client.nodes()

    assert (info.value.status, info.value.code, str(info.value)) == (503, "stale_leader", "not the leader")
    assert seen[0].headers["Authorization"] == "Bearer tok"
    assert seen[0].url.path == "/v1/nodes"


def test_an_answer_that_is_not_an_error_body_still_reads_well() -> None:
    client = ShoalClient("http://shoal.invalid", "tok",
                         transport=httpx.MockTransport(lambda r: httpx.Response(502, text="<html>bad gateway")))

    with pytest.raises(ServerError) as info:
        client.whoami()

    assert "HTTP 502 from GET /v1/whoami" in str(info.value)


def test_an_unreachable_server_says_where_it_looked() -> None:
    client = ShoalClient("http://127.0.0.1:9", "tok", timeout=2)

    with pytest.raises(ApiUnavailable) as info:
        client.whoami()

    assert "http://127.0.0.1:9" in str(info.value) and "shoal up" in str(info.value)


def test_importing_the_client_pulls_in_no_server_side() -> None:
    code = ("import json, sys, scheduler_core.client; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3]).stdout
    modules = json.loads(out)
    server_side = [m for m in modules
                   if m.split(".")[0] in ("tornado", "sqlalchemy", "psycopg", "alembic", "prometheus_client")
                   or m.startswith(("scheduler_core.api", "scheduler_core.store", "scheduler_core.executor",
                                    "scheduler_core.service", "scheduler_core.controller"))]
    assert "scheduler_core.client" in modules and "httpx" in modules
    assert server_side == []


def test_the_schemas_know_every_job_state() -> None:
    assert set(JobStateName.__args__) == {state.value for state in JobState}  # type: ignore[attr-defined]
