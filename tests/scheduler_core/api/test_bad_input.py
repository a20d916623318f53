"""Bad input, tried as a new user would: each gets a clear error naming the field, and nothing is stored or started.

"Nothing started" is checked as: no job in the store, no event appended, and the controller never woken.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler_core.store.records import JobState

from ..runtime_builders import make_spec, whole_nodes
from .harness import Harness

VALID: dict[str, Any] = {"name": "train", "team": "fraud-ml", "flavour": "h100", "pods": 2, "gpus_per_pod": 4,
                         "command": ["python", "train.py"]}


def without(*keys: str) -> dict[str, Any]:
    return {k: v for k, v in VALID.items() if k not in keys}


def assert_nothing_happened(api: Harness) -> None:
    assert api.store.list_jobs() == []
    assert api.store.events() == []
    assert api.wakes == []


@pytest.mark.parametrize(("body", "status", "code", "field", "words"), [
    (without("command"), 422, "invalid_spec", "command", "Field required"),
    (without("name", "team"), 422, "invalid_spec", "name", "Field required"),
    ({**VALID, "gpus_per_pod": 0}, 422, "invalid_spec", "gpus_per_pod", "greater than or equal to 1"),
    ({**VALID, "gpus_per_pod": 10_000}, 422, "invalid_spec", "gpus_per_pod", "less than or equal to 56"),
    ({**VALID, "pods": 1250, "gpus_per_pod": 8}, 422, "invalid_spec", "pods", "less than or equal to 1024"),
    ({**VALID, "pods": 1000, "gpus_per_pod": 8}, 422, "invalid_spec", "pods", "this cluster has 48"),
    ({**VALID, "pods": 4, "gpus_per_pod": 8, "topology": {"required": "block"}}, 422, "invalid_spec", "pods",
     "cannot fit in one block: at most 3"),
    ({**VALID, "flavour": "h200"}, 422, "invalid_spec", "flavour", "unknown flavour 'h200'"),
    ({**VALID, "flavour": "a100"}, 422, "invalid_spec", "flavour", "this cluster has no 'a100'"),
    ({**VALID, "team": "nosuch"}, 422, "invalid_spec", "team", "unknown team 'nosuch'; teams here: fraud-ml, search"),
    ({**VALID, "time_limit": "soon"}, 422, "invalid_spec", "time_limit", "expected a duration"),
    ({**VALID, "gpus": 8}, 422, "invalid_spec", "gpus", "Extra inputs are not permitted"),
    ([VALID], 422, "invalid_spec", "spec", "valid dictionary"),
    ({**VALID, "team": "search"}, 403, "forbidden", None, "may not submit jobs for team 'search'"),
])
def test_a_bad_spec_is_refused_and_nothing_is_stored(api: Harness, body: Any, status: int, code: str,
                                                     field: str | None, words: str) -> None:
    response = api.http("POST", "/v1/jobs", json=body)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    if field is not None:
        assert words in error["fields"][field]
        assert field in error["message"] or field == "spec"
    else:
        assert words in error["message"]
    assert_nothing_happened(api)


@pytest.mark.parametrize(("raw", "words"), [
    (b"{not json", "not valid JSON"),
    (b"", "body is empty"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_a_body_that_is_not_json_is_400(api: Harness, raw: bytes, words: str) -> None:
    response = api.http("POST", "/v1/jobs", content=raw, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert words in response.json()["error"]["message"]
    assert_nothing_happened(api)


@pytest.mark.parametrize(("token", "words"), [
    ("shoal_not-a-real-token", "not valid"),
    (None, "missing bearer token"),
])
def test_a_wrong_or_missing_token_is_401(api: Harness, token: str | None, words: str) -> None:
    response = api.http("POST", "/v1/jobs", who=None, token=token, json=VALID)

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthorized"
    assert words in response.json()["error"]["message"]
    assert_nothing_happened(api)


def test_a_revoked_token_stops_working(api: Harness) -> None:
    api.tokens.revoke_token(api.users["bob"])

    response = api.http("GET", "/v1/whoami", who="bob")

    assert response.status_code == 401


def test_another_teams_job_can_be_neither_read_nor_changed(api: Harness) -> None:
    job = api.run(make_spec("theirs").team("search").pods(1, 8).build(), whole_nodes("h100-b0-n00"), user="bob")
    before = api.store.get(job.id)

    for method, path in [("GET", f"/v1/jobs/{job.id}"), ("POST", f"/v1/jobs/{job.id}:cancel"),
                         ("POST", f"/v1/jobs/{job.id}:checkpoint"), ("GET", f"/v1/events?job_id={job.id}")]:
        response = api.http(method, path, who="alice")
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "forbidden"
        assert "belongs to team 'search'" in response.json()["error"]["message"]

    assert api.store.get(job.id) == before
    assert api.store.events() == []
    assert api.wakes == []


def test_an_admin_may_act_on_any_team(api: Harness) -> None:
    job = api.run(make_spec("theirs").team("search").pods(1, 8).build(), whole_nodes("h100-b0-n00"), user="bob")

    response = api.http("POST", f"/v1/jobs/{job.id}:cancel", who="root")

    assert response.status_code == 202
    assert api.store.get(job.id).cancel_requested


def test_a_repeated_idempotency_key_with_another_body_is_409_and_stores_nothing_new(api: Harness) -> None:
    first = api.http("POST", "/v1/jobs", json=VALID, headers={"Idempotency-Key": "k-1"})
    again = api.http("POST", "/v1/jobs", json=VALID, headers={"Idempotency-Key": "k-1"})
    other = api.http("POST", "/v1/jobs", json={**VALID, "pods": 3}, headers={"Idempotency-Key": "k-1"})

    assert first.status_code == 202 and again.status_code == 202
    assert first.headers["Location"] == f"/v1/jobs/{first.json()['job_id']}"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "conflict"
    assert "different spec" in other.json()["error"]["message"]
    assert [job.id for job in api.store.list_jobs()] == [first.json()["job_id"]]
    assert api.store.get(first.json()["job_id"]).spec.pods == 2


def test_idempotency_keys_are_per_user(api: Harness) -> None:
    mine = api.http("POST", "/v1/jobs", who="alice", json=VALID, headers={"Idempotency-Key": "same"})
    theirs = api.http("POST", "/v1/jobs", who="bob", json={**VALID, "team": "search"},
                      headers={"Idempotency-Key": "same"})

    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["job_id"] != theirs.json()["job_id"]


def test_a_malformed_idempotency_key_is_400(api: Harness) -> None:
    response = api.http("POST", "/v1/jobs", json=VALID, headers={"Idempotency-Key": "x" * 300})

    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["fields"]
    assert_nothing_happened(api)


@pytest.mark.parametrize(("method", "path", "status", "code"), [
    ("GET", "/v1/jobs/job_nosuch", 404, "not_found"),
    ("POST", "/v1/jobs/job_nosuch:cancel", 404, "not_found"),
    ("GET", "/v1/queues/nosuch", 404, "not_found"),
    ("GET", "/v1/teams/nosuch/quota", 404, "not_found"),
    ("GET", "/v1/queues/search", 403, "forbidden"),
    ("GET", "/v1/teams/search/quota", 403, "forbidden"),
    ("GET", "/v1/usage?team=search", 403, "forbidden"),
    ("GET", "/v1/queues/fraud-ml?state=SLEEPING", 400, "bad_request"),
    ("GET", "/v1/usage?since=yesterday", 400, "bad_request"),
    ("GET", "/v1/usage?since=2026-10-27&until=2026-10-26", 400, "bad_request"),
    ("GET", "/v1/events?limit=lots", 400, "bad_request"),
    ("GET", "/v1/nope", 404, "not_found"),
    ("DELETE", "/v1/jobs", 405, "method_not_allowed"),
])
def test_reads_of_what_is_not_there_or_not_yours(api: Harness, method: str, path: str, status: int,
                                                 code: str) -> None:
    response = api.http(method, path)

    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]


def test_cancelling_a_finished_job_is_409(api: Harness) -> None:
    job = api.run(make_spec("done").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.store.release(job.id, state=JobState.SUCCEEDED, now=api.clock(), epoch=0, exit_code=0)

    response = api.http("POST", f"/v1/jobs/{job.id}:cancel")

    assert response.status_code == 409
    assert "already ended as SUCCEEDED" in response.json()["error"]["message"]
    assert api.store.get(job.id).state is JobState.SUCCEEDED


def test_errors_are_json_even_for_unexpected_failures(api: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("database on fire")

    monkeypatch.setattr(api.store, "list_nodes", broken)
    response = api.http("GET", "/v1/nodes")

    assert response.status_code == 500
    body = json.loads(response.text)
    assert body["error"]["code"] == "internal"
    assert "on fire" not in response.text
