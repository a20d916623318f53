"""The ``Executor`` contract suite: every clause of ``scheduler_core/executor/base.py``, for every backend.

A backend passes by providing an ``ExecutorHarness``: it knows how to make a launch request for each of a few
job behaviours (for a process backend, a small program; for the simulator, a ``SimBehaviour``), how time passes
(``now``/``advance``: the simulator jumps in virtual time, a real backend waits one short poll interval), and what
environment a pod got. The suite never sleeps: it polls until a condition holds or the harness's deadline passes.

    class TestLocalExecutor(ExecutorContract):
        def make_harness(self, tmp_path: Path) -> ExecutorHarness:
            return LocalHarness(tmp_path)

Optional clauses (a new executor instance adopting running gangs, node failure) are skipped when the harness
raises ``NotImplementedError`` for them.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from pathlib import Path

import pytest

from scheduler_core.errors import ShoalError
from scheduler_core.executor.base import Executor, LaunchRequest, PodEvent, PodEventKind
from scheduler_core.job_env import pod_env


class Behaviour(Enum):
    """The jobs the suite asks a harness for."""

    #: Runs until signalled; keeps the job contract: checkpoints when asked (and reports it), and on SIGTERM
    #: checkpoints and exits 0 well within ``ExecutorHarness.grace_s``.
    RUNS_UNTIL_SIGNALLED = "runs-until-signalled"
    #: Exits 0 on its own, soon after it starts.
    EXITS_0_QUICKLY = "exits-0-quickly"
    #: Exits 3 on its own, soon after it starts.
    EXITS_3 = "exits-3"
    #: Runs until killed; SIGTERM does nothing to it.
    IGNORES_SIGTERM = "ignores-sigterm"


class ExecutorHarness(ABC):
    #: A grace period long enough for an honest job to checkpoint and exit, in the harness's time.
    grace_s: float = 30.0
    #: The longest any wait in the suite may take, in the harness's time.
    timeout_s: float = 600.0

    @property
    @abstractmethod
    def executor(self) -> Executor:
        """The executor under test."""

    @abstractmethod
    def request(self, job_id: str, behaviour: Behaviour, *, pods: int = 2) -> LaunchRequest:
        """A launch request of ``pods`` pods, each on its own node, for a job that behaves as ``behaviour``.
        ``env`` carries the gang's job-contract variables (``scheduler_core.job_env.gang_env``)."""

    @abstractmethod
    def now(self) -> float:
        """The present, in the time the executor's events are stamped in."""

    @abstractmethod
    def advance(self) -> None:
        """Let a little time pass: the simulator jumps to its next event, a real backend waits one poll interval."""

    @abstractmethod
    def pod_env(self, job_id: str, rank: int) -> Mapping[str, str]:
        """The environment pod ``rank`` of a running job was started with."""

    def reopen(self) -> Executor:
        """A new executor instance over the same backend, as a restarted scheduler would make."""
        raise NotImplementedError

    def fail_node(self, node: str) -> None:
        """Lose ``node`` as the infrastructure would (its pods must be reported FAILED)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop whatever the harness started."""


class Watch:
    """Collects one executor's events and waits, with a deadline, for a condition on them."""

    def __init__(self, harness: ExecutorHarness, executor: Executor | None = None) -> None:
        self.harness = harness
        self.executor = executor or harness.executor
        self.events: list[PodEvent] = []

    def poll(self) -> None:
        self.events.extend(self.executor.poll(self.harness.now()))

    def until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = self.harness.now() + self.harness.timeout_s
        while True:
            self.poll()
            if condition():
                return
            if self.harness.now() >= deadline:
                pytest.fail(f"timed out waiting for {what}; events so far: {self.events}")
            self.harness.advance()

    def through(self, until: float) -> None:
        """Poll until the harness's present reaches ``until``."""
        self.poll()
        while self.harness.now() < until:
            self.harness.advance()
            self.poll()

    def of(self, job_id: str, kind: PodEventKind | None = None) -> list[PodEvent]:
        return [e for e in self.events if e.job_id == job_id and (kind is None or e.kind is kind)]

    def ranks(self, job_id: str, kind: PodEventKind) -> list[int]:
        return sorted(e.rank for e in self.of(job_id, kind))

    def all_ranks(self, job_id: str, kind: PodEventKind, pods: int) -> Callable[[], bool]:
        return lambda: self.ranks(job_id, kind) == list(range(pods))

    def ended(self, job_id: str, pods: int) -> Callable[[], bool]:
        return lambda: sorted(e.rank for e in self.of(job_id) if e.kind in _ENDS) == list(range(pods))


_ENDS = (PodEventKind.EXITED, PodEventKind.FAILED)


class ExecutorContract(ABC):
    @abstractmethod
    def make_harness(self, tmp_path: Path) -> ExecutorHarness:
        """A harness over a fresh backend."""

    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[ExecutorHarness]:
        harness = self.make_harness(tmp_path)
        try:
            yield harness
        finally:
            harness.close()

    @staticmethod
    def _started(harness: ExecutorHarness, job_id: str, behaviour: Behaviour, pods: int = 2
                 ) -> tuple[LaunchRequest, Watch]:
        request = harness.request(job_id, behaviour, pods=pods)
        harness.executor.launch(request)
        watch = Watch(harness)
        watch.until(watch.all_ranks(job_id, PodEventKind.STARTED, pods), f"every pod of {job_id} to start")
        return request, watch

    # -- launch ----------------------------------------------------------------------------------------------------
    def test_launch_starts_every_pod_once_on_its_node(self, harness: ExecutorHarness) -> None:
        request, watch = self._started(harness, "job_start1", Behaviour.RUNS_UNTIL_SIGNALLED, pods=3)
        started = watch.of("job_start1", PodEventKind.STARTED)
        assert sorted(e.rank for e in started) == [0, 1, 2]
        assert {e.rank: e.node for e in started} == {r: p.node for r, p in enumerate(request.placement.pods)}
        assert "job_start1" in harness.executor.running_jobs()
        assert watch.of("job_start1", PodEventKind.EXITED) == []
        harness.executor.terminate("job_start1", 0)
        watch.until(watch.ended("job_start1", 3), "the pods to be killed")

    def test_each_pod_gets_the_job_contract_env(self, harness: ExecutorHarness) -> None:
        request, watch = self._started(harness, "job_env1", Behaviour.RUNS_UNTIL_SIGNALLED, pods=2)
        for rank in range(2):
            env = harness.pod_env("job_env1", rank)
            expected = pod_env(request, rank)
            assert {k: env.get(k) for k in expected} == expected
            assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == "2" and env["SHOAL_JOB_ID"] == "job_env1"
        harness.executor.terminate("job_env1", 0)
        watch.until(watch.ended("job_env1", 2), "the pods to be killed")

    def test_launching_a_job_that_runs_raises_and_leaves_it_alone(self, harness: ExecutorHarness) -> None:
        request, watch = self._started(harness, "job_twice", Behaviour.RUNS_UNTIL_SIGNALLED)
        with pytest.raises(ShoalError):
            harness.executor.launch(dataclasses.replace(request, attempt=1))
        watch.poll()
        assert watch.ranks("job_twice", PodEventKind.STARTED) == [0, 1]
        assert "job_twice" in harness.executor.running_jobs()
        harness.executor.terminate("job_twice", 0)
        watch.until(watch.ended("job_twice", 2), "the pods to be killed")

    def test_a_launch_that_cannot_start_raises_and_starts_nothing(self, harness: ExecutorHarness) -> None:
        request = harness.request("job_bad", Behaviour.RUNS_UNTIL_SIGNALLED)
        with pytest.raises(ShoalError):
            harness.executor.launch(dataclasses.replace(request, nodes={}))
        assert "job_bad" not in harness.executor.running_jobs()
        watch = Watch(harness)
        watch.poll()
        assert watch.of("job_bad") == []

    # -- exits -----------------------------------------------------------------------------------------------------
    @pytest.mark.parametrize(("behaviour", "code"), [(Behaviour.EXITS_0_QUICKLY, 0), (Behaviour.EXITS_3, 3)],
                             ids=["exit-0", "exit-3"])
    def test_exit_codes_are_reported_once_per_pod_after_it_started(self, harness: ExecutorHarness,
                                                                   behaviour: Behaviour, code: int) -> None:
        harness.executor.launch(harness.request("job_exit", behaviour))
        watch = Watch(harness)
        watch.until(watch.all_ranks("job_exit", PodEventKind.EXITED, 2), "both pods to exit")
        assert [e.exit_code for e in watch.of("job_exit", PodEventKind.EXITED)] == [code, code]
        for rank in (0, 1):
            kinds = [e.kind for e in watch.of("job_exit") if e.rank == rank and e.kind in
                     (PodEventKind.STARTED, PodEventKind.EXITED)]
            assert kinds == [PodEventKind.STARTED, PodEventKind.EXITED]
        assert "job_exit" not in harness.executor.running_jobs()

    def test_poll_returns_each_event_once_and_in_order(self, harness: ExecutorHarness) -> None:
        harness.executor.launch(harness.request("job_once", Behaviour.EXITS_0_QUICKLY))
        watch = Watch(harness)
        watch.until(watch.ended("job_once", 2), "both pods to exit")
        stamps = [e.at for e in watch.of("job_once")]
        assert stamps == sorted(stamps)
        seen = len(watch.events)
        for _ in range(3):
            harness.advance()
            watch.poll()
        assert len(watch.events) == seen
        assert len(watch.of("job_once", PodEventKind.STARTED)) == 2

    # -- signals ---------------------------------------------------------------------------------------------------
    def test_sigterm_lets_an_honest_job_checkpoint_and_exit_0(self, harness: ExecutorHarness) -> None:
        _, watch = self._started(harness, "job_term", Behaviour.RUNS_UNTIL_SIGNALLED)
        mark = len(watch.events)
        harness.executor.terminate("job_term", harness.grace_s)
        watch.until(watch.ended("job_term", 2), "both pods to exit after SIGTERM")
        after = [e for e in watch.events[mark:] if e.job_id == "job_term"]
        exits = [e for e in after if e.kind is PodEventKind.EXITED]
        assert [e.exit_code for e in exits] == [0, 0]
        checkpoints = [i for i, e in enumerate(after) if e.kind is PodEventKind.CHECKPOINT]
        assert checkpoints and checkpoints[0] < after.index(exits[0])
        assert "job_term" not in harness.executor.running_jobs()

    def test_a_job_that_ignores_sigterm_is_killed_when_the_grace_ends(self, harness: ExecutorHarness) -> None:
        _, watch = self._started(harness, "job_deaf", Behaviour.IGNORES_SIGTERM)
        signalled_at = harness.now()
        harness.executor.terminate("job_deaf", harness.grace_s)
        watch.through(signalled_at + harness.grace_s / 2)
        assert [e for e in watch.of("job_deaf", PodEventKind.EXITED) if e.at < signalled_at + harness.grace_s / 2] \
            == []
        watch.until(watch.all_ranks("job_deaf", PodEventKind.EXITED, 2), "the pods to be killed")
        assert all(e.exit_code not in (0, None) for e in watch.of("job_deaf", PodEventKind.EXITED))
        assert "job_deaf" not in harness.executor.running_jobs()

    def test_grace_zero_kills_at_once(self, harness: ExecutorHarness) -> None:
        _, watch = self._started(harness, "job_kill", Behaviour.RUNS_UNTIL_SIGNALLED)
        mark = len(watch.events)
        harness.executor.terminate("job_kill", 0)
        watch.until(watch.all_ranks("job_kill", PodEventKind.EXITED, 2), "the pods to be killed")
        exits = watch.of("job_kill", PodEventKind.EXITED)
        assert all(e.exit_code not in (0, None) for e in exits)
        assert [e for e in watch.events[mark:] if e.kind is PodEventKind.CHECKPOINT] == []

    def test_terminating_again_or_after_exit_or_an_unknown_job_is_harmless(self, harness: ExecutorHarness) -> None:
        _, watch = self._started(harness, "job_again", Behaviour.RUNS_UNTIL_SIGNALLED)
        harness.executor.terminate("job_again", harness.grace_s)
        harness.executor.terminate("job_again", harness.grace_s)
        watch.until(watch.ended("job_again", 2), "both pods to exit")
        harness.executor.terminate("job_again", 0)
        harness.executor.terminate("job_never_launched", 0)
        harness.executor.request_checkpoint("job_never_launched")
        for _ in range(3):
            harness.advance()
            watch.poll()
        assert watch.ranks("job_again", PodEventKind.EXITED) == [0, 1]
        assert watch.of("job_never_launched") == []

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def test_request_checkpoint_reports_one_and_the_job_keeps_running(self, harness: ExecutorHarness) -> None:
        _, watch = self._started(harness, "job_ckpt", Behaviour.RUNS_UNTIL_SIGNALLED)
        harness.executor.request_checkpoint("job_ckpt")
        watch.until(lambda: bool(watch.of("job_ckpt", PodEventKind.CHECKPOINT)), "a checkpoint")
        checkpoint = watch.of("job_ckpt", PodEventKind.CHECKPOINT)[0]
        assert isinstance(checkpoint.data.get("step"), int)
        assert isinstance(checkpoint.data.get("uri"), str)
        assert watch.of("job_ckpt", PodEventKind.EXITED) == []
        assert "job_ckpt" in harness.executor.running_jobs()
        harness.executor.terminate("job_ckpt", 0)
        watch.until(watch.ended("job_ckpt", 2), "the pods to be killed")

    # -- optional: adoption and node failure ----------------------------------------------------------------------
    def test_a_new_executor_adopts_running_gangs_and_reports_their_events(self, harness: ExecutorHarness) -> None:
        _, first = self._started(harness, "job_adopt", Behaviour.RUNS_UNTIL_SIGNALLED)
        try:
            second = harness.reopen()
        except NotImplementedError:
            pytest.skip("this harness cannot reopen its backend")
        second.adopt({"job_adopt"})
        assert "job_adopt" in second.running_jobs()
        second.terminate("job_adopt", harness.grace_s)
        watch = Watch(harness, second)
        watch.until(watch.ended("job_adopt", 2), "the adopted pods to exit")
        assert [e.exit_code for e in watch.of("job_adopt", PodEventKind.EXITED)] == [0, 0]

    def test_a_lost_node_fails_its_pods_only(self, harness: ExecutorHarness) -> None:
        request, watch = self._started(harness, "job_lost", Behaviour.RUNS_UNTIL_SIGNALLED)
        lost = request.placement.pods[1].node
        try:
            harness.fail_node(lost)
        except NotImplementedError:
            pytest.skip("this harness cannot fail a node")
        watch.until(lambda: bool(watch.of("job_lost", PodEventKind.FAILED)), "the lost pod to fail")
        failed = watch.of("job_lost", PodEventKind.FAILED)
        assert [(e.rank, e.node) for e in failed] == [(1, lost)]
        assert watch.of("job_lost", PodEventKind.EXITED) == []
        assert "job_lost" in harness.executor.running_jobs()
        harness.executor.terminate("job_lost", harness.grace_s)
        watch.until(watch.ended("job_lost", 2), "the surviving pod to exit")
        assert watch.ranks("job_lost", PodEventKind.EXITED) == [0]
