"""Hostile input, tried as an attacker or an unlucky script would: NUL bytes, argv the OS cannot take, numbers that
are not numbers, counts that are strings, JSON nested a thousand deep, cursors beyond int64.

Each is a 4xx naming the field, and nothing is stored: no job, no sweep, no event, the controller never woken.
Run over SQLite as well as memory, since some of these only ever broke a real database (an int64 overflow).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler_core.model.text import ARG_MAX, MAX_ARG_STRLEN, SPEC_EXEC_BUDGET

from ..runtime_builders import make_spec
from .harness import Harness

BACKENDS = pytest.mark.parametrize("api", ["memory", "sqlite"], indirect=True)

JOB: dict[str, Any] = {"name": "train", "team": "fraud-ml", "flavour": "h100", "pods": 1, "gpus_per_pod": 1,
                       "command": ["python", "train.py"]}
SWEEP: dict[str, Any] = {
    "name": "mlp", "team": "fraud-ml", "n_trials": 4, "parallelism": 2,
    "search_space": {"lr": {"type": "float", "low": 0.001, "high": 0.1, "log": True}},
    "trial": {"flavour": "h100", "command": ["python", "train.py"], "time_limit": "10m"},
}


#: Stands for the JSON number 1e400 (no Python float is; the body is written by ``encode``).
HUGE = "__1e400__"


def encode(body: Any) -> bytes:
    return json.dumps(body).replace(f'"{HUGE}"', "1e400").encode()


def job(**changes: Any) -> dict[str, Any]:
    return {**JOB, **changes}


def sweep(**trial: Any) -> dict[str, Any]:
    return {**SWEEP, "trial": {**SWEEP["trial"], **trial}}


def assert_nothing_stored(api: Harness) -> None:
    assert api.store.list_jobs() == []
    assert api.store.list_sweeps() == []
    assert api.store.events() == []
    assert api.wakes == []


#: (body, status, field, words in that field's message)
JOB_CASES = {
    "NUL in an argument": (job(command=["sleep\u00001"]), 422, "command.0", "NUL"),
    "NUL in an env value": (job(env={"A": "x\u0000y"}), 422, "env.A", "NUL"),
    "NUL in a label key": (job(labels={"a\u0000": "b"}), 422, "labels.a\\u0000", "NUL"),
    "an argument over MAX_ARG_STRLEN": (job(command=["echo", "a" * 200_000]), 422, "command.1",
                                        f"at most {MAX_ARG_STRLEN - 1}"),
    "200,000 arguments": (job(command=["x"] * 200_000), 422, "command", "at most 32768"),
    "a 1 MB env value": (job(env={"A": "x" * 1_000_000}), 422, "env.A", f"at most {MAX_ARG_STRLEN - 1}"),
    "argv and env beyond ARG_MAX": (job(env={f"A{i}": "x" * 100_000 for i in range(20)}), 422, "env",
                                    f"{ARG_MAX:,} (ARG_MAX)"),
    "multi-byte text counted in bytes": (job(command=["echo", "é" * 70_000]), 422, "command",
                                         "140,000 bytes"),
    "a 2.4 MB label": (job(labels={"a": "b" * 2_400_000}), 422, "labels.a", "at most 1024"),
    "too many labels": (job(labels={f"k{i}": "v" for i in range(65)}), 422, "labels", "at most 64"),
    "time_limit Inf": (job(time_limit="Inf"), 422, "time_limit", "expected a duration"),
    "time_limit 1e400 as text": (job(time_limit="1e400"), 422, "time_limit", "finite"),
    "time_limit 1e400 as a number": (job(time_limit=HUGE), 422, "time_limit", "finite"),
    "a grace period of a century": (job(checkpoint={"grace_period": 3e9}), 422, "checkpoint.grace_period",
                                    "at most"),
    "gpus_per_pod as a string": (job(gpus_per_pod="4"), 422, "gpus_per_pod", "valid integer"),
    "pods as a boolean": (job(pods=True), 422, "pods", "valid integer"),
    "pods as a float": (job(pods=2.0), 422, "pods", "valid integer"),
    "preemptible as a string": (job(preemptible="true"), 422, "preemptible", "valid boolean"),
    "max_restarts as a float": (job(max_restarts=1.0), 422, "max_restarts", "valid integer"),
}


@pytest.mark.parametrize("case", list(JOB_CASES))
@BACKENDS
def test_a_hostile_job_is_refused_with_the_field_named(api: Harness, case: str) -> None:
    body, status, field, words = JOB_CASES[case]
    response = api.http("POST", "/v1/jobs", content=encode(body))
    assert response.status_code == status, response.text[:500]
    fields = response.json()["error"]["fields"]
    assert words in fields[field], fields
    assert_nothing_stored(api)


def test_the_exec_budget_is_what_the_os_accepts_less_headroom() -> None:
    assert 0 < SPEC_EXEC_BUDGET < ARG_MAX
    assert ARG_MAX - SPEC_EXEC_BUDGET >= 64 * 1024


SWEEP_CASES = {
    "NUL in a trial's command": (sweep(command=["python", "t\u0000.py"]), 422, "trial.command.1", "NUL"),
    "a trial's argv beyond MAX_ARG_STRLEN": (sweep(command=["x" * 140_000]), 422, "trial.command.0", "at most"),
    "a trial's time_limit Inf": (sweep(time_limit="Inf"), 422, "trial.time_limit", "expected a duration"),
    "a trial's time_limit 1e400": (sweep(time_limit=HUGE), 422, "trial.time_limit", "finite"),
    "a trial's pods as a string": (sweep(pods="2"), 422, "trial.pods", "valid integer"),
    "a float parameter whose steps overflow": (
        {**SWEEP, "search_space": {"x": {"type": "float", "low": 0, "high": 1e300, "step": 1e-300}}}, 422,
        "search_space.x.float", "too many steps"),
    "a float parameter of 1e400": (
        {**SWEEP, "search_space": {"x": {"type": "float", "low": 0, "high": HUGE}}}, 422,
        "search_space.x.high", "finite"),
    "an integer parameter beyond int64": (
        {**SWEEP, "search_space": {"x": {"type": "int", "low": 0, "high": 2 ** 64}}}, 422,
        "search_space.x.int.high", "less than or equal to"),
    "n_trials as a string": ({**SWEEP, "n_trials": "4"}, 422, "n_trials", "valid integer"),
    "a sampler seed beyond 32 bits": ({**SWEEP, "sampler": {"name": "random", "seed": 2 ** 40}}, 422,
                                      "sampler.random.seed", "less than or equal to"),
}


@pytest.mark.parametrize("case", list(SWEEP_CASES))
@BACKENDS
def test_a_hostile_sweep_is_refused_with_the_field_named(api: Harness, case: str) -> None:
    body, status, field, words = SWEEP_CASES[case]
    response = api.http("POST", "/v1/sweeps", content=encode(body))
    assert response.status_code == status, response.text[:500]
    fields = response.json()["error"]["fields"]
    assert any(key.startswith(field) and words in message for key, message in fields.items()), fields
    assert_nothing_stored(api)


@BACKENDS
def test_json_nested_a_thousand_deep_is_a_400_not_a_crash(api: Harness) -> None:
    for depth in (40, 100_000):
        body = "[" * depth + "]" * depth
        response = api.http("POST", "/v1/jobs", content=body.encode())
        assert response.status_code == 400, response.text[:300]
        assert response.json()["error"]["code"] == "invalid_json"
        assert "nested more than 32 levels" in response.json()["error"]["message"]
    assert_nothing_stored(api)


@pytest.mark.parametrize("raw", [b'{"value": NaN, "step": 1}', b'{"value": Infinity, "step": 1}',
                                 b'{"value": 1e400, "step": 1}'])
@BACKENDS
def test_numbers_that_are_not_finite_are_refused_at_the_body(api: Harness, raw: bytes) -> None:
    response = api.http("POST", "/v1/jobs", content=raw)
    assert response.status_code == 422, response.text
    assert "finite" in response.json()["error"]["fields"]["value"]


@pytest.mark.parametrize(("query", "status"), [
    ("after=9223372036854775807", 200), ("after=9223372036854775808", 400), ("after=-1", 400),
    ("after=1e3", 400), ("limit=1001", 400), ("limit=0", 400), ("after=" + "9" * 5000, 400),
])
@BACKENDS
def test_the_events_cursor_is_bounded_to_int64(api: Harness, query: str, status: int) -> None:
    response = api.http("GET", f"/v1/events?{query}")
    assert response.status_code == status, response.text[:300]
    if status == 400:
        assert response.json()["error"]["fields"]


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("DELETE", "/v1/jobs", "POST"), ("PUT", "/v1/sweeps", "GET, POST"), ("PATCH", "/v1/whoami", "GET"),
    ("POST", "/v1/nodes", "GET"),
])
@BACKENDS
def test_a_method_not_allowed_says_which_are(api: Harness, method: str, path: str, allow: str) -> None:
    response = api.http(method, path, json={})
    assert response.status_code == 405
    assert response.headers["Allow"] == allow
    assert response.json()["error"]["code"] == "method_not_allowed"


@BACKENDS
def test_a_cancel_reason_with_nul_is_refused_and_the_job_keeps_running(api: Harness) -> None:
    record = api.submit(make_spec("a").team("fraud-ml").build())
    response = api.http("POST", f"/v1/jobs/{record.id}:cancel", json={"reason": "x\u0000"})
    assert response.status_code == 422 and "NUL" in response.json()["error"]["fields"]["reason"]
    assert not api.store.get(record.id).cancel_requested
