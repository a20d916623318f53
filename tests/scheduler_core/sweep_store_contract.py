"""The sweep clauses of the ``Store`` contract (``store/base.py``, section "sweeps"), mixed into ``StoreContract``
so every backend runs them. Through the ABC only, on the ``store`` fixture ``StoreContract`` provides."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_core.errors import Conflict, NotFound, ValidationFailed
from scheduler_core.model import SweepSpec
from scheduler_core.model.sweep import SweepState, TrialState
from scheduler_core.policy.snapshot import AdmittedAs, Placement, PodPlacement
from scheduler_core.store.base import Store
from scheduler_core.store.records import JobState, SweepRecord

from .runtime_builders import make_spec

MIG = "mig-a-n00"


def sweep_spec(name: str = "mlp", *, n_trials: int = 4, **changes: Any) -> SweepSpec:
    data: dict[str, Any] = {
        "name": name, "team": "search", "n_trials": n_trials, "parallelism": 2,
        "search_space": {"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
                         "act": {"type": "categorical", "choices": ["relu", "tanh", True, 3]}},
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "sampler": {"name": "tpe", "seed": 3}, "pruner": {"name": "median", "n_startup_trials": 2},
        "trial": {"flavour": "h100-mig-1g", "command": ["python", "t.py"], "time_limit": "1h30m",
                  "checkpoint": {"interval": "10m", "grace_period": "45s"}},
    }
    data.update(changes)
    return SweepSpec.model_validate(data)


class SweepStoreContract:
    @staticmethod
    def _trial(store: Store, sweep: SweepRecord, number: int, **params: Any) -> str:
        params = params or {"lr": 0.01, "act": "relu"}
        job = sweep.spec.trial_job(sweep_id=sweep.id, number=number, params=params)
        trial, record = store.add_trial(sweep.id, number, params, job, now=10.0 + number)
        return record.id

    def test_create_get_list_sweeps(self, store: Store) -> None:
        first = store.create_sweep(sweep_spec("a"), user="ana", now=1.0)
        second = store.create_sweep(sweep_spec("b").model_copy(update={"team": "fraud-ml"}), user="bo", now=2.0)
        assert first.state is SweepState.RUNNING and first.id != second.id and first.id.startswith("sweep_")
        assert store.get_sweep(first.id) == first
        assert first.spec == sweep_spec("a") and first.user == "ana" and first.created_at == 1.0
        assert [s.id for s in store.list_sweeps()] == [first.id, second.id]
        assert [s.id for s in store.list_sweeps(team="fraud-ml")] == [second.id]
        assert [s.id for s in store.list_sweeps(states=[SweepState.RUNNING], limit=1)] == [first.id]
        assert store.list_sweeps(states=[SweepState.SUCCEEDED]) == []
        with pytest.raises(NotFound):
            store.get_sweep("sweep_nope")

    def test_sweep_spec_round_trips_exactly(self, store: Store) -> None:
        spec = sweep_spec(trial={"flavour": "h100-mig-1g", "command": ["x"], "time_limit": 5401.5,
                                 "env": {"A": "1"}, "labels": {"k": "v"}})
        created = store.create_sweep(spec, user="ana", now=1.0)
        assert store.get_sweep(created.id).spec == spec
        assert store.get_sweep(created.id).spec.trial.time_limit == 5401.5

    def test_sweep_idempotency_key(self, store: Store) -> None:
        first = store.create_sweep(sweep_spec(), user="ana", now=1.0, idempotency_key="k")
        assert store.create_sweep(sweep_spec(), user="ana", now=2.0, idempotency_key="k") == first
        with pytest.raises(Conflict, match="different spec"):
            store.create_sweep(sweep_spec(n_trials=9), user="ana", now=3.0, idempotency_key="k")
        assert len(store.list_sweeps()) == 1

    def test_add_trial_submits_its_job_and_is_idempotent(self, store: Store) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        params = {"lr": 0.01, "act": True}
        job = sweep.spec.trial_job(sweep_id=sweep.id, number=0, params=params)
        trial, record = store.add_trial(sweep.id, 0, params, job, now=5.0)
        assert (trial.number, trial.state, trial.params, trial.job_id) == (0, TrialState.ACTIVE, params, record.id)
        assert record.state is JobState.PENDING and record.user == "ana" and record.spec == job
        assert store.get(record.id) == record
        again, same = store.add_trial(sweep.id, 0, params, job, now=6.0)
        assert again == trial and same.id == record.id
        assert len(store.list_jobs(team="search")) == 1
        with pytest.raises(Conflict, match="other parameters"):
            store.add_trial(sweep.id, 0, {"lr": 0.5, "act": True}, job, now=7.0)
        with pytest.raises(Conflict, match="no trial 4"):
            store.add_trial(sweep.id, 4, params, job, now=7.0)
        with pytest.raises(NotFound):
            store.add_trial("sweep_nope", 0, params, job, now=7.0)
        assert len(store.list_jobs(team="search")) == 1

    def test_list_trials_pairs_each_with_its_job_now(self, store: Store) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        ids = [self._trial(store, sweep, n, lr=0.1 * (n + 1), act="relu") for n in (1, 0)]
        store.bind(ids[1], Placement("h100-mig-1g", (PodPlacement(MIG, (0,)),)), AdmittedAs.NOMINAL, epoch=0,
                   now=20.0)
        listed = store.list_trials(sweep.id)
        assert [(t.number, j.id, j.state) for t, j in listed] == [
            (0, ids[1], JobState.ADMITTED), (1, ids[0], JobState.PENDING)]
        assert listed[1][0].params == {"lr": 0.2, "act": "relu"}
        assert store.list_trials(store.create_sweep(sweep_spec("other"), user="bo", now=2.0).id) == []

    def test_reports_keep_the_first_value_of_each_step(self, store: Store) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        job_id = self._trial(store, sweep, 0)
        for step, value in [(1, 5.0), (0, 9.0), (1, 4.0), (2, 3.0)]:
            trial, job = store.report_trial(job_id, step=step, value=value, final=False, now=30.0)
        assert trial.intermediate == ((0, 9.0), (1, 5.0), (2, 3.0)) and trial.state is TrialState.ACTIVE
        assert job.id == job_id
        trial, _ = store.report_trial(job_id, step=None, value=2.5, final=True, now=40.0)
        assert (trial.state, trial.value, trial.finished_at) == (TrialState.COMPLETE, 2.5, 40.0)
        [(listed, _)] = store.list_trials(sweep.id)
        assert listed == trial
        with pytest.raises(Conflict, match="already ended as COMPLETE"):
            store.report_trial(job_id, step=None, value=1.0, final=True, now=41.0)
        after, _ = store.report_trial(job_id, step=3, value=1.0, final=False, now=42.0)
        assert after == trial                               # an ended trial's reports change nothing

    def test_reports_from_a_job_that_is_no_trial_are_refused(self, store: Store) -> None:
        plain = store.submit(make_spec("plain").build(), user="ana", now=0.0)
        with pytest.raises(NotFound, match="not a sweep trial"):
            store.report_trial(plain.id, step=0, value=1.0, final=False, now=1.0)
        with pytest.raises(NotFound):
            store.report_trial("job_nope", step=0, value=1.0, final=False, now=1.0)

    @pytest.mark.parametrize("state", [TrialState.PRUNED, TrialState.FAILED, TrialState.COMPLETE])
    def test_finish_trial_once(self, store: Store, state: TrialState) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        job_id = self._trial(store, sweep, 0)
        store.report_trial(job_id, step=0, value=7.0, final=False, now=2.0)
        value = 1.5 if state is TrialState.COMPLETE else None
        trial = store.finish_trial(sweep.id, 0, state, value=value, message="why", now=3.0)
        assert (trial.state, trial.value, trial.message, trial.finished_at) == (state, value, "why", 3.0)
        assert trial.intermediate == ((0, 7.0),)
        with pytest.raises(Conflict, match=f"already ended as {state}"):
            store.finish_trial(sweep.id, 0, TrialState.FAILED, message="again", now=4.0)
        assert store.list_trials(sweep.id)[0][0] == trial

    def test_finish_trial_refuses_nonsense(self, store: Store) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        self._trial(store, sweep, 0)
        with pytest.raises(ValidationFailed, match="needs a finite value"):
            store.finish_trial(sweep.id, 0, TrialState.COMPLETE, now=2.0)
        with pytest.raises(ValidationFailed, match="not ACTIVE"):
            store.finish_trial(sweep.id, 0, TrialState.ACTIVE, now=2.0)
        with pytest.raises(NotFound, match="no trial 3"):
            store.finish_trial(sweep.id, 3, TrialState.FAILED, now=2.0)
        assert store.list_trials(sweep.id)[0][0].state is TrialState.ACTIVE

    def test_cancel_sweep_fails_active_trials_and_cancels_their_jobs(self, store: Store) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        pending, running, done = (self._trial(store, sweep, n, lr=0.1 * (n + 1), act="tanh") for n in range(3))
        store.bind(running, Placement("h100-mig-1g", (PodPlacement(MIG, (0,)),)), AdmittedAs.NOMINAL, epoch=0,
                   now=20.0)
        store.report_trial(done, step=None, value=0.5, final=True, now=21.0)
        cancelled = store.cancel_sweep(sweep.id, now=30.0)
        assert cancelled.state is SweepState.CANCELLING
        trials = {t.number: (t, j) for t, j in store.list_trials(sweep.id)}
        assert trials[0][0].state is TrialState.FAILED and trials[0][0].message == "the sweep was cancelled"
        assert trials[0][1].state is JobState.CANCELLED
        assert trials[1][0].state is TrialState.FAILED
        assert trials[1][1].state is JobState.ADMITTED and trials[1][1].cancel_requested
        assert trials[2][0].state is TrialState.COMPLETE and not trials[2][1].cancel_requested
        assert store.cancel_sweep(sweep.id, now=31.0) == cancelled
        with pytest.raises(Conflict, match="takes no new trials"):
            self._trial(store, sweep, 3)
        with pytest.raises(Conflict, match="is CANCELLING: only a RUNNING sweep can become FAILED"):
            store.finish_sweep(sweep.id, SweepState.FAILED, "x", now=32.0)
        closed = store.finish_sweep(sweep.id, SweepState.CANCELLED, "cancelled by ana", now=33.0)
        assert (closed.state, closed.message, closed.finished_at) == (SweepState.CANCELLED, "cancelled by ana", 33.0)
        assert store.cancel_sweep(sweep.id, now=34.0) == closed

    def test_finish_sweep_transitions(self, store: Store) -> None:
        sweep = store.create_sweep(sweep_spec(), user="ana", now=1.0)
        with pytest.raises(Conflict, match="only a CANCELLING sweep can become CANCELLED"):
            store.finish_sweep(sweep.id, SweepState.CANCELLED, "x", now=2.0)
        with pytest.raises(ValidationFailed):
            store.finish_sweep(sweep.id, SweepState.CANCELLING, "x", now=2.0)
        done = store.finish_sweep(sweep.id, SweepState.SUCCEEDED, "best trial 0", now=3.0)
        assert done.state is SweepState.SUCCEEDED and store.get_sweep(sweep.id) == done
        with pytest.raises(Conflict):
            store.finish_sweep(sweep.id, SweepState.FAILED, "x", now=4.0)
        with pytest.raises(Conflict, match="already ended as SUCCEEDED"):
            store.cancel_sweep(sweep.id, now=5.0)
