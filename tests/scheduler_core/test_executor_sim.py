"""``SimExecutor`` passes the Executor contract suite; and its virtual-time model, case by case."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pytest

from scheduler_core.executor.base import Executor, LaunchRequest, PodEvent, PodEventKind
from scheduler_core.executor.sim import KILLED, SimBehaviour, SimExecutor
from scheduler_core.job_env import gang_env, nodes_of

from .executor_contract import Behaviour, ExecutorContract, ExecutorHarness
from .runtime_builders import cluster_nodes, make_spec, place

NODES = {node.name: node for node in cluster_nodes()}
H100 = [name for name, node in NODES.items() if "h100" in node.devices]

SIM_BEHAVIOURS = {
    Behaviour.RUNS_UNTIL_SIGNALLED: SimBehaviour(work_s=math.inf, start_latency_s=2.0, checkpoint_interval_s=None,
                                                 checkpoint_cost_s=5.0),
    Behaviour.EXITS_0_QUICKLY: SimBehaviour(work_s=10.0, start_latency_s=1.0),
    Behaviour.EXITS_3: SimBehaviour(work_s=10.0, start_latency_s=1.0, exit_code=3),
    Behaviour.IGNORES_SIGTERM: SimBehaviour(work_s=math.inf, start_latency_s=1.0, honours_sigterm=False),
}


def launch_request(job_id: str, pods: int = 2, *, units: int = 2, interval_s: float = 600.0,
                   attempt: int = 0) -> LaunchRequest:
    spec = make_spec(job_id).pods(pods, units).build()
    placement = place("h100", *((H100[i], tuple(range(units))) for i in range(pods)))
    env = gang_env(job_id, spec, placement, checkpoint_uri=f"file:///ckpt/fraud-ml/{job_id}/",
                   checkpoint_interval_s=interval_s)
    return LaunchRequest(job_id=job_id, spec=spec, placement=placement, nodes=nodes_of(placement, NODES), env=env,
                         attempt=attempt)


class SimHarness(ExecutorHarness):
    """Virtual time: ``advance`` jumps to the executor's next event (or a minute on, when nothing is due)."""

    def __init__(self) -> None:
        self._behaviours: dict[str, SimBehaviour] = {}
        self._executor = SimExecutor(lambda request: self._behaviours[request.job_id])
        self._now = 0.0

    @property
    def executor(self) -> Executor:
        return self._executor

    def request(self, job_id: str, behaviour: Behaviour, *, pods: int = 2) -> LaunchRequest:
        self._behaviours[job_id] = SIM_BEHAVIOURS[behaviour]
        return launch_request(job_id, pods)

    def now(self) -> float:
        return self._now

    def advance(self) -> None:
        upcoming = self._executor.next_event_at()
        self._now = upcoming if upcoming is not None and upcoming > self._now else self._now + 60.0

    def pod_env(self, job_id: str, rank: int) -> Mapping[str, str]:
        return self._executor.pod_env(job_id, rank)

    def reopen(self) -> Executor:
        # The simulated backend and its executor are one object: a restarted controller keeps using it.
        return self._executor

    def fail_node(self, node: str) -> None:
        self._executor.fail_node(node, self._now)


class TestSimExecutor(ExecutorContract):
    def make_harness(self, tmp_path: Path) -> ExecutorHarness:
        return SimHarness()


# -- the virtual-time model --------------------------------------------------------------------------------------


class Run:
    """A ``SimExecutor`` and the events it reported so far, driven to chosen instants."""

    def __init__(self, behaviour: SimBehaviour) -> None:
        self.executor = SimExecutor(behaviour)
        self.events: list[PodEvent] = []

    def to(self, at: float) -> list[PodEvent]:
        new = self.executor.poll(at)
        self.events.extend(new)
        return new

    def kinds(self, job_id: str = "job_a") -> list[tuple[float, int, PodEventKind, int | None]]:
        return [(e.at, e.rank, e.kind, e.exit_code) for e in self.events
                if e.job_id == job_id and e.kind is not PodEventKind.STEP_TIME]


def test_pods_start_after_their_latency_and_the_gang_computes_once_all_have() -> None:
    run = Run(SimBehaviour(work_s=100.0, start_latency_s=(3.0, 8.0), checkpoint_interval_s=None))
    run.executor.launch(launch_request("job_a"))
    assert run.executor.next_event_at() == 3.0
    run.to(1000.0)
    assert run.kinds() == [(3.0, 0, PodEventKind.STARTED, None), (8.0, 1, PodEventKind.STARTED, None),
                           (108.0, 0, PodEventKind.EXITED, 0), (108.0, 1, PodEventKind.EXITED, 0)]
    assert run.executor.next_event_at() is None
    assert run.executor.running_jobs() == set()


def test_a_pod_that_never_starts_holds_the_gang_back() -> None:
    run = Run(SimBehaviour(work_s=100.0, start_latency_s=(1.0, math.inf)))
    run.executor.launch(launch_request("job_a"))
    run.to(10_000.0)
    assert run.kinds() == [(1.0, 0, PodEventKind.STARTED, None)]
    assert run.executor.progress("job_a") == 0.0
    run.executor.terminate("job_a", 30.0)
    run.to(10_001.0)
    assert [(k, c) for _, _, k, c in run.kinds()[1:]] == [(PodEventKind.EXITED, -15), (PodEventKind.EXITED, 0)]


def test_periodic_checkpoints_follow_the_contract_interval_and_pause_progress() -> None:
    run = Run(SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_cost_s=10.0, step_s=2.0))
    run.executor.launch(launch_request("job_a", interval_s=300.0))
    run.to(2000.0)
    checkpoints = [e for e in run.events if e.kind is PodEventKind.CHECKPOINT]
    # Work 0..300 saved at 310, 300..600 at 620, 600..900 at 930; 1000 done at 930 + 100 = 1030.
    assert [(e.at, e.data["progress_s"], e.data["step"]) for e in checkpoints] == [
        (310.0, 300.0, 150), (620.0, 600.0, 300), (930.0, 900.0, 450)]
    assert checkpoints[0].data["uri"] == "file:///ckpt/fraud-ml/job_a/step-00000150/"
    assert [e.at for e in run.events if e.kind is PodEventKind.EXITED] == [1030.0, 1030.0]


def test_a_relaunch_resumes_from_the_last_checkpoint_and_the_rest_is_lost() -> None:
    run = Run(SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_cost_s=10.0))
    run.executor.launch(launch_request("job_a", interval_s=300.0))
    run.to(500.0)                                   # checkpoint of 300 written at 310; 490 done by 500
    assert run.executor.progress("job_a") == pytest.approx(490.0)
    run.executor.terminate("job_a", 0)
    run.to(500.0)
    assert run.executor.progress("job_a") == 300.0
    assert run.executor.stats.lost_gpu_s["job_a"] == pytest.approx(190.0 * 4)   # 2 pods × 2 GPUs
    run.executor.launch(launch_request("job_a", interval_s=10_000.0, attempt=1))
    run.to(5000.0)
    assert [e.at for e in run.events if e.kind is PodEventKind.EXITED][-1] == 500.0 + 700.0


def test_sigterm_during_a_periodic_checkpoint_exits_when_it_is_written() -> None:
    run = Run(SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_cost_s=20.0))
    run.executor.launch(launch_request("job_a", interval_s=100.0))
    run.to(105.0)
    run.executor.terminate("job_a", 60.0)
    run.to(1000.0)
    assert [(at, kind) for at, rank, kind, _ in run.kinds() if rank == 0] == [
        (0.0, PodEventKind.STARTED), (120.0, PodEventKind.CHECKPOINT), (120.0, PodEventKind.EXITED)]


def test_a_checkpoint_longer_than_the_grace_is_cut_off_by_the_kill() -> None:
    run = Run(SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_cost_s=90.0,
                           checkpoint_interval_s=None))
    run.executor.launch(launch_request("job_a"))
    run.to(50.0)
    run.executor.terminate("job_a", 60.0)
    run.to(1000.0)
    assert [(at, kind, code) for at, rank, kind, code in run.kinds() if rank == 0] == [
        (0.0, PodEventKind.STARTED, None), (110.0, PodEventKind.EXITED, KILLED)]
    assert run.executor.progress("job_a") == 0.0


def test_a_job_that_cannot_checkpoint_exits_at_once_on_sigterm() -> None:
    run = Run(SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_cost_s=None))
    run.executor.launch(launch_request("job_a"))
    run.to(50.0)
    run.executor.terminate("job_a", 60.0)
    assert [(e.at, e.exit_code) for e in run.to(50.0)] == [(50.0, 0), (50.0, 0)]


def test_a_failed_node_fails_its_pods_and_stops_the_gang() -> None:
    run = Run(SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_cost_s=10.0))
    run.executor.launch(launch_request("job_a", interval_s=100.0))
    run.to(150.0)
    run.executor.fail_node(H100[1], 250.0)
    failed = run.to(250.0)
    assert [(e.at, e.rank, e.kind, e.node) for e in failed if e.kind is not PodEventKind.CHECKPOINT] == [
        (250.0, 1, PodEventKind.FAILED, H100[1])]
    # Checkpoints of 100 (at 110) and 200 (at 220); 30 more by 250, then nothing.
    assert run.executor.progress("job_a") == pytest.approx(230.0)
    run.to(5000.0)
    assert run.kinds()[-1][2] is PodEventKind.FAILED          # no more progress, no exit on its own
    run.executor.terminate("job_a", 30.0)
    assert [(e.rank, e.exit_code) for e in run.to(5000.0)] == [(0, -15)]
    assert run.executor.progress("job_a") == 200.0
    assert run.executor.stats.lost_gpu_s["job_a"] == pytest.approx(30.0 * 4)
    # A launch onto the lost node fails at once until it is repaired.
    run.executor.launch(launch_request("job_b"))
    assert [(e.rank, e.kind) for e in run.to(5000.0)] == [(1, PodEventKind.FAILED), (0, PodEventKind.STARTED)]
    run.executor.terminate("job_b", 0)
    run.executor.repair_node(H100[1])
    run.executor.launch(launch_request("job_c"))
    assert [e.kind for e in run.to(5000.0)] == [PodEventKind.EXITED, PodEventKind.STARTED, PodEventKind.STARTED]


def test_a_slow_node_slows_the_gang_and_its_rank_reports_longer_steps() -> None:
    run = Run(SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None, step_s=2.0,
                           report_every_s=100.0))
    run.executor.set_node_slowdown(H100[1], 1.25)
    run.executor.launch(launch_request("job_a"))
    run.to(100.0)
    reports = [e for e in run.events if e.kind is PodEventKind.STEP_TIME]
    assert [(e.rank, e.data["step_time_s"], e.data["step"]) for e in reports] == [(0, 2.0, 40), (1, 2.5, 40)]
    run.to(10_000.0)
    assert [e.at for e in run.events if e.kind is PodEventKind.EXITED] == [1250.0, 1250.0]


def test_a_checkpoint_asked_before_the_gang_runs_is_written_once_it_does() -> None:
    run = Run(SimBehaviour(work_s=math.inf, start_latency_s=30.0, checkpoint_cost_s=5.0,
                           checkpoint_interval_s=None))
    run.executor.launch(launch_request("job_a"))
    run.executor.request_checkpoint("job_a")
    run.to(100.0)
    assert [(e.at, e.kind) for e in run.events if e.rank == 0] == [
        (30.0, PodEventKind.STARTED), (35.0, PodEventKind.CHECKPOINT)]


def test_behaviour_can_depend_on_the_attempt() -> None:
    executor = SimExecutor(lambda request: SimBehaviour(work_s=10.0, start_latency_s=0.0,
                                                        exit_code=1 if request.attempt == 0 else 0))
    executor.launch(launch_request("job_a", pods=1))
    assert [e.exit_code for e in executor.poll(100.0) if e.kind is PodEventKind.EXITED] == [1]
    executor.launch(launch_request("job_a", pods=1, attempt=1))
    assert [e.exit_code for e in executor.poll(200.0) if e.kind is PodEventKind.EXITED] == [0]


def test_a_relaunch_is_not_confused_with_what_the_previous_launch_had_scheduled() -> None:
    run = Run(SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None, checkpoint_cost_s=10.0))
    run.executor.launch(launch_request("job_a"))
    run.to(300.0)
    run.executor.terminate("job_a", 60.0)          # checkpoint of 300 at 310, exit
    run.to(310.0)
    run.executor.launch(launch_request("job_a", attempt=1))
    run.to(5000.0)
    # The first launch would have finished at 1000; the relaunch resumes at 300 and finishes at 310 + 700.
    assert [e.at for e in run.events if e.kind is PodEventKind.EXITED] == [310.0, 310.0, 1010.0, 1010.0]
