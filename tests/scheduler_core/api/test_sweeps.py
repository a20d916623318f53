"""The sweep endpoints and trial reports, over a real server and the typed client: who may do what, validation that
stores nothing, trial jobs submitted with their parameters, reports, counts and the best trial."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from scheduler_core.client import InvalidRequest, JobNotFound, PermissionDenied, StateConflict
from scheduler_core.model import JobKind
from scheduler_core.model.sweep import SweepState, TrialState
from scheduler_core.policy.snapshot import AdmittedAs, Placement, PodPlacement
from scheduler_core.store.records import JobState

from .harness import Harness


def body(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "mlp", "team": "search", "n_trials": 6, "parallelism": 2,
        "search_space": {"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
                         "act": {"type": "categorical", "choices": ["relu", "tanh"]}},
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "trial": {"flavour": "h100-mig-1g", "command": ["python", "train.py"], "time_limit": "20m"},
    }
    data.update(changes)
    return data


def add(api: Harness, sweep_id: str, number: int, lr: float = 0.01, act: str = "relu") -> str:
    view = api.client("root").add_trial(sweep_id, number, {"lr": lr, "act": act},
                                        env={"SHOAL_API_TOKEN": "t0ken"})
    return view.job_id


def test_create_answers_at_once_with_nothing_started(api: Harness) -> None:
    started = time.monotonic()
    view = api.client("bob").create_sweep(body(n_trials=500, parallelism=500))
    assert time.monotonic() - started < 5          # a generous bound; the benchmark records the real figure
    assert (view.state, view.team, view.user, view.n_trials) == ("RUNNING", "search", "bob", 500)
    assert view.counts.not_started == 500 and view.progress == 0.0 and view.best is None
    assert view.study_name == f"shoal-{view.sweep_id}"
    assert api.store.get_sweep(view.sweep_id).spec.n_trials == 500
    assert api.store.list_jobs() == []              # trials are the controller's to start
    assert api.wakes


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"n_trials": 0}, "n_trials", "greater than or equal to 1"),
    ({"search_space": {"lr": {"type": "float", "low": 1, "high": 0}}}, "search_space.lr.float", "must be below"),
    ({"trial": {"flavour": "h100-mig-1g", "command": []}}, "trial.command", "at least 1"),
    ({"trial": {"flavour": "a100", "command": ["x"]}}, "trial.flavour", "this cluster has no 'a100'"),
    ({"trial": {"flavour": "h100", "gpus_per_pod": 8, "pods": 7, "command": ["x"]}}, "trial.pods",
     "but this cluster has 48"),
    ({"team": "nobody"}, "team", "unknown team"),
])
def test_invalid_sweeps_are_refused_and_store_nothing(api: Harness, changes: dict[str, Any], field: str,
                                                      words: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        api.client("bob").create_sweep(body(**changes))
    assert info.value.status == 422
    assert field in info.value.fields and words in info.value.fields[field], info.value.fields
    assert api.store.list_sweeps() == []


def test_not_json_is_a_bad_request(api: Harness) -> None:
    response = api.http("POST", "/v1/sweeps", who="bob", content=b"{nope")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


def test_teams_are_kept_apart(api: Harness) -> None:
    with pytest.raises(PermissionDenied):
        api.client("alice").create_sweep(body())
    sweep = api.client("bob").create_sweep(body())
    for call in (lambda c: c.sweep(sweep.sweep_id), lambda c: c.cancel_sweep(sweep.sweep_id),
                 lambda c: c.trials(sweep.sweep_id)):
        with pytest.raises(PermissionDenied):
            call(api.client("alice"))
    assert api.client("alice").sweeps().sweeps == []
    assert [s.sweep_id for s in api.client("bob").sweeps().sweeps] == [sweep.sweep_id]
    assert [s.sweep_id for s in api.client("root").sweeps(team="search").sweeps] == [sweep.sweep_id]
    with pytest.raises(JobNotFound):
        api.client("bob").sweep("sweep_nope")


def test_idempotent_create(api: Harness) -> None:
    first = api.client("bob").create_sweep(body(), idempotency_key="k1")
    again = api.client("bob").create_sweep(body(), idempotency_key="k1")
    assert again.sweep_id == first.sweep_id
    with pytest.raises(StateConflict):
        api.client("bob").create_sweep(body(n_trials=7), idempotency_key="k1")
    assert len(api.store.list_sweeps()) == 1


def test_only_the_controller_adds_and_finishes_trials(api: Harness) -> None:
    sweep = api.client("bob").create_sweep(body())
    with pytest.raises(PermissionDenied, match="sweep controller"):
        api.client("bob").add_trial(sweep.sweep_id, 0, {"lr": 0.01, "act": "relu"})
    add(api, sweep.sweep_id, 0)
    with pytest.raises(PermissionDenied):
        api.client("bob").finish_trial(sweep.sweep_id, 0, "PRUNED")
    with pytest.raises(PermissionDenied):
        api.client("bob").finish_sweep(sweep.sweep_id, "SUCCEEDED")


def test_a_trial_job_carries_its_params_and_belongs_to_the_sweeps_user(api: Harness) -> None:
    sweep = api.client("bob").create_sweep(body())
    job_id = add(api, sweep.sweep_id, 3, lr=0.02, act="tanh")
    job = api.client("bob").job(job_id)
    assert (job.kind, job.team, job.user, job.name) == (JobKind.TRIAL.value, "search", "bob", "mlp-t3")
    assert json.loads(job.spec.env["SHOAL_TRIAL_PARAMS"]) == {"lr": 0.02, "act": "tanh"}
    assert job.spec.env["SHOAL_TRIAL_NUMBER"] == "3" and job.spec.env["SHOAL_API_TOKEN"] == "t0ken"
    assert job.spec.command == ("python", "train.py", "--lr", "0.02", "--act", "tanh")
    assert add(api, sweep.sweep_id, 3, lr=0.02, act="tanh") == job_id          # idempotent
    with pytest.raises(StateConflict):
        add(api, sweep.sweep_id, 3, lr=0.03, act="tanh")
    with pytest.raises(InvalidRequest, match="'act': 'gelu' is not one of"):
        add(api, sweep.sweep_id, 4, act="gelu")
    with pytest.raises(InvalidRequest, match="invalid environment variable name"):
        api.client("root").add_trial(sweep.sweep_id, 4, {"lr": 0.01, "act": "relu"}, env={"1X": "y"})
    assert len(api.store.list_jobs(team="search")) == 1


def test_reports_reach_the_trial_and_say_when_to_stop(api: Harness) -> None:
    sweep = api.client("bob").create_sweep(body())
    job_id = add(api, sweep.sweep_id, 0)
    bob = api.client("bob")
    first = bob.report(job_id, 0.9, step=0)
    assert not first.should_stop and first.trial.intermediate == [(0, 0.9)]
    assert bob.report(job_id, 0.5, step=0).trial.intermediate == [(0, 0.9)]       # first value kept
    with pytest.raises(PermissionDenied):
        api.client("alice").report(job_id, 0.1, step=1)
    other = add(api, sweep.sweep_id, 1, lr=0.05)
    api.client("root").finish_trial(sweep.sweep_id, 1, "PRUNED", message="pruned at step 0")
    assert not bob.report(other, 3.0, step=1).should_stop      # the answer follows the job: not stopped yet
    api.client("root").cancel(other)
    assert bob.report(other, 3.0, step=2).should_stop
    final = bob.report(job_id, 0.4, final=True)
    assert final.trial.state == "COMPLETE" and final.trial.value == 0.4
    with pytest.raises(StateConflict, match="already ended as COMPLETE"):
        bob.report(job_id, 0.3, final=True)


@pytest.mark.parametrize(("payload", "field"), [
    ({"value": 1.0}, "report"), ({"step": -1, "value": 1.0}, "step"), ({"step": 1, "value": "x"}, "value"),
    ({"step": 1, "value": 1.0, "extra": 1}, "extra"),
])
def test_bad_reports_are_refused(api: Harness, payload: dict[str, Any], field: str) -> None:
    sweep = api.client("bob").create_sweep(body())
    job_id = add(api, sweep.sweep_id, 0)
    response = api.http("POST", f"/v1/jobs/{job_id}:report", who="bob", json=payload)
    assert response.status_code == 422, response.text
    assert field in response.json()["error"]["fields"]
    nan = api.http("POST", f"/v1/jobs/{job_id}:report", who="bob", content=b'{"step": 1, "value": NaN}')
    assert nan.status_code == 422 and "finite" in nan.json()["error"]["fields"]["value"]
    assert api.store.list_trials(sweep.sweep_id)[0][0].intermediate == ()


def test_a_report_from_a_job_that_is_no_trial_is_not_found(api: Harness) -> None:
    from ..runtime_builders import make_spec
    job = api.submit(make_spec("plain").team("search").build(), user="bob")
    with pytest.raises(JobNotFound, match="not a sweep trial"):
        api.client("bob").report(job.id, 1.0, step=0)


def test_counts_progress_and_best(api: Harness) -> None:
    sweep = api.client("bob").create_sweep(body())
    ids = [add(api, sweep.sweep_id, n, lr=0.01 * (n + 1)) for n in range(4)]
    api.store.bind(ids[1], Placement("h100-mig-1g", (PodPlacement("mig-a-n00", (0,)),)), AdmittedAs.NOMINAL,
                   epoch=0, now=api.clock())
    bob = api.client("bob")
    bob.report(ids[2], 0.7, final=True)
    bob.report(ids[3], 0.3, final=True)
    api.client("root").finish_trial(sweep.sweep_id, 0, "FAILED", message="the job failed: exit code 1")
    view = bob.sweep(sweep.sweep_id)
    counts = view.counts
    assert (counts.not_started, counts.pending, counts.running, counts.complete, counts.pruned, counts.failed) == (
        2, 0, 1, 2, 0, 1)
    assert view.progress == pytest.approx(3 / 6)
    assert view.best is not None and (view.best.number, view.best.value) == (3, 0.3)
    assert view.best.params == {"lr": 0.04, "act": "relu"}
    trials = bob.trials(sweep.sweep_id).trials
    assert [(t.number, t.state, t.job_state) for t in trials] == [
        (0, "FAILED", "PENDING"), (1, "ACTIVE", "ADMITTED"), (2, "COMPLETE", "PENDING"), (3, "COMPLETE", "PENDING")]
    assert trials[0].message == "the job failed: exit code 1"


def test_cancel_stops_trials_and_the_controller_closes_it(api: Harness) -> None:
    sweep = api.client("bob").create_sweep(body())
    pending = add(api, sweep.sweep_id, 0)
    view = api.client("bob").cancel_sweep(sweep.sweep_id)
    assert view.state == "CANCELLING" and view.counts.failed == 1
    assert api.store.get(pending).state is JobState.CANCELLED
    assert api.store.list_trials(sweep.sweep_id)[0][0].state is TrialState.FAILED
    with pytest.raises(StateConflict, match="takes no new trials"):
        add(api, sweep.sweep_id, 1)
    closed = api.client("root").finish_sweep(sweep.sweep_id, "CANCELLED", "cancelled; 0 complete")
    assert closed.state == "CANCELLED" and closed.finished_at is not None
    assert api.store.get_sweep(sweep.sweep_id).state is SweepState.CANCELLED
    reasons = [e.reason for e in api.store.events()]
    assert reasons == ["SweepCreated", "SweepCancelRequested", "SweepFinished"]
    assert [s.state for s in api.client("bob").sweeps(states="RUNNING,CANCELLING").sweeps] == []
    with pytest.raises(InvalidRequest):
        api.client("bob").sweeps(states="SLEEPING")
