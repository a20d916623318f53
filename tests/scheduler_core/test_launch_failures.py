"""Launches that can never succeed, with real processes: the controller over a SQLite store and a LocalExecutor.

A spec the OS cannot exec (a NUL byte, an argv beyond ARG_MAX: specs stored before the API refused them, or one
the executor's own environment pushes over) and a command that does not exist end FAILED after one try, with the
reason, their units free; a launch the infrastructure fails is retried within its own budget, then FAILED; a
cancel answered while launches fail ends the job, also across a scheduler restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_core.controller import Controller, ControllerConfig
from scheduler_core.errors import Conflict
from scheduler_core.executor.base import LaunchRequest
from scheduler_core.executor.local import LocalExecutor
from scheduler_core.model import JobSpec
from scheduler_core.store.records import JobState
from scheduler_core.store.sql import SqlStore

from .greedy_policy import GreedyPolicy
from .runtime_builders import cluster_nodes, make_spec, sqlite_store
from .test_executor_local import base_env


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    with sqlite_store(tmp_path) as s:
        yield s


def controller(store: SqlStore, executor: LocalExecutor, **config: Any) -> Controller:
    return Controller(store, executor, GreedyPolicy(), nodes=cluster_nodes(),
                      config=ControllerConfig(checkpoint_root="/tmp/shoal-test-ckpt", **config))


def executor(tmp_path: Path, env: dict[str, str] | None = None) -> LocalExecutor:
    return LocalExecutor(tmp_path / "exec", cluster_nodes(), env=env if env is not None else base_env())


def unchecked(**changes: Any) -> JobSpec:
    """A spec as an older server stored it, before the API refused such fields (``model_copy`` skips validation)."""
    return make_spec("bad").command("true").build().model_copy(update=changes)


def step_until(ctl: Controller, store: SqlStore, job_id: str, *states: JobState, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while store.get(job_id).state not in states:
        if time.monotonic() > deadline:
            pytest.fail(f"{job_id} stayed {store.get(job_id).state}, not {states}: {store.get(job_id).message}")
        ctl.step(time.time())
        time.sleep(0.05)


def held_units(store: SqlStore) -> int:
    return store.bound_unit_count()


@pytest.mark.parametrize(("spec", "words"), [
    (unchecked(command=("sleep\x001",)), "embedded null byte"),
    (unchecked(env={"A": "x\x00y"}), "embedded null byte"),
    (unchecked(command=("echo", "a" * 200_000)), "Argument list too long"),
    (unchecked(command=("echo",) + ("x",) * 300_000), "Argument list too long"),
])
def test_a_spec_the_os_cannot_exec_fails_after_one_try_and_frees_its_units(
        store: SqlStore, tmp_path: Path, spec: JobSpec, words: str) -> None:
    ctl = controller(store, executor(tmp_path))
    job_id = store.submit(spec, user="alice", now=time.time()).id
    step_until(ctl, store, job_id, JobState.FAILED)
    record = store.get(job_id)
    assert words in record.message and record.message.startswith("cannot launch")
    assert (record.restarts, record.infra_restarts) == (0, 0)
    assert held_units(store) == 0
    reasons = [e.reason for e in store.events(job_id=job_id)]
    assert reasons.count("LaunchFailed") == 1 and "Requeued" not in reasons


def test_an_executor_environment_over_arg_max_fails_the_job_not_the_loop(store: SqlStore, tmp_path: Path) -> None:
    """Within the API's budget alone, but not with what this executor adds: still no retry can help."""
    env = {**base_env(), **{f"BIG{i}": "x" * 100_000 for i in range(25)}}
    ctl = controller(store, executor(tmp_path, env))
    job_id = store.submit(make_spec("ok").command("true").build(), user="alice", now=time.time()).id
    step_until(ctl, store, job_id, JobState.FAILED)
    assert "Argument list too long" in store.get(job_id).message
    assert held_units(store) == 0


def test_a_command_that_does_not_exist_fails_once_not_max_restarts_times(store: SqlStore, tmp_path: Path) -> None:
    ctl = controller(store, executor(tmp_path))
    spec = make_spec("typo").command("/nonexistent/python3", "train.py").max_restarts(5).build()
    job_id = store.submit(spec, user="alice", now=time.time()).id
    step_until(ctl, store, job_id, JobState.FAILED)
    record = store.get(job_id)
    assert record.exit_code == 127 and record.restarts == 0
    assert "cannot start '/nonexistent/python3'" in record.message and "not retried" in record.message
    assert held_units(store) == 0
    assert sorted(p.name for p in (tmp_path / "exec" / "pods" / job_id).iterdir()) == ["0", "current"]


class RefusingExecutor(LocalExecutor):
    """The infrastructure's fault: every launch refused (a node the backend cannot reach)."""

    def launch(self, request: LaunchRequest) -> None:
        raise Conflict(f"node {request.placement.pods[0].node} is unreachable")


def test_infrastructure_launch_failures_have_a_budget_of_their_own(store: SqlStore, tmp_path: Path) -> None:
    ctl = controller(store, RefusingExecutor(tmp_path / "exec", cluster_nodes(), env=base_env()),
                     max_infra_restarts=3)
    job_id = store.submit(make_spec("x").command("true").max_restarts(0).build(), user="alice", now=time.time()).id
    step_until(ctl, store, job_id, JobState.FAILED)
    record = store.get(job_id)
    assert record.infra_restarts == 3 and record.restarts == 0
    assert "unreachable" in record.message and "infrastructure restart budget of 3 spent" in record.message
    assert held_units(store) == 0


class CancelledWhileLaunching(RefusingExecutor):
    """The user's cancel is answered (by the API, on the same store) while the launch is failing."""

    store: SqlStore

    def launch(self, request: LaunchRequest) -> None:
        self.store.request_cancel(request.job_id, time.time())
        super().launch(request)


def test_a_cancel_during_a_failing_launch_ends_the_job_and_survives_a_restart(store: SqlStore,
                                                                             tmp_path: Path) -> None:
    refusing = CancelledWhileLaunching(tmp_path / "exec", cluster_nodes(), env=base_env())
    refusing.store = store
    job_id = store.submit(make_spec("x").command("true").build(), user="alice", now=time.time()).id
    controller(store, refusing).step(time.time())
    assert store.get(job_id).state is JobState.CANCELLED
    assert held_units(store) == 0
    restarted = controller(store, executor(tmp_path))
    restarted.recover(time.time())
    restarted.step(time.time())
    assert store.get(job_id).state is JobState.CANCELLED and not (tmp_path / "exec" / "pods" / job_id).exists()


def test_a_cancel_answered_before_a_crash_ends_the_job_at_the_next_start(store: SqlStore, tmp_path: Path) -> None:
    """Bound, cancel answered, scheduler gone before it launched or signalled anything: the restarted one ends
    the job CANCELLED, never requeues it as lost."""
    job_id = store.submit(make_spec("z").command("true").build(), user="alice", now=1.0).id
    store.bind(job_id, _one_gpu(), _nominal(), epoch=0, now=2.0)
    store.request_cancel(job_id, 3.0)
    restarted = controller(store, executor(tmp_path))
    restarted.recover(time.time())
    assert store.get(job_id).state is JobState.CANCELLED
    assert held_units(store) == 0


def test_a_launch_that_fails_with_a_cancel_answered_ends_cancelled(store: SqlStore, tmp_path: Path) -> None:
    """The store's rule: a release to PENDING of a job whose cancel was answered is a CANCELLED."""
    store.submit(make_spec("y").command("true").build(), user="alice", now=1.0)
    job_id = store.list_jobs()[0].id
    store.bind(job_id, _one_gpu(), _nominal(), epoch=0, now=2.0)
    store.request_cancel(job_id, 3.0)
    released = store.release(job_id, state=JobState.PENDING, now=4.0, epoch=0, infra_fault=True,
                             message="launch failed: node unreachable")
    assert released.state is JobState.CANCELLED and "node unreachable" in released.message
    assert held_units(store) == 0


def _one_gpu() -> Any:
    from .runtime_builders import place
    return place("h100", (cluster_nodes()[0].name, (0,)))


def _nominal() -> Any:
    from scheduler_core.policy.snapshot import AdmittedAs
    return AdmittedAs.NOMINAL
