"""``LocalExecutor`` passes the Executor contract suite with real processes; and what only real processes show:
logs, exit records that outlive the scheduler, the wrapper's own grace enforcement, held-back signals, MIG env."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from scheduler_core.errors import NotFound
from scheduler_core.executor import procfs
from scheduler_core.executor.base import Executor, LaunchRequest, PodEvent, PodEventKind
from scheduler_core.executor.local import LocalExecutor
from scheduler_core.job_env import gang_env, mig_uuid, nodes_of
from scheduler_core.model import JobSpec

from .executor_contract import Behaviour, ExecutorContract, ExecutorHarness, Watch
from .runtime_builders import cluster_nodes, make_spec, place

REPO = Path(__file__).resolve().parents[2]
NODES = {node.name: node for node in cluster_nodes()}
H100 = [name for name, node in NODES.items() if "h100" in node.devices]
MIG_NODE = next(name for name, node in NODES.items() if "h100-mig-1g" in node.devices)

#: Keeps the job contract: resumes, checkpoints on SIGUSR1, and on SIGTERM checkpoints and exits 0.
HONEST = textwrap.dedent("""
    import sys, time
    from scheduler_core import jobkit
    ckpt = jobkit.resume()
    step = ckpt.step + 1 if ckpt else 0
    print("rank", jobkit.context().rank, "from step", step, flush=True)
    while True:
        time.sleep(0.01)
        jobkit.report_step_time(0.01, step) if step % 50 == 0 else None
        if jobkit.should_checkpoint():
            jobkit.save(step, {"state": str(step).encode()})
        if jobkit.should_stop():
            sys.exit(0)
        step += 1
""")
DEAF = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)\n"
PROGRAMS = {
    Behaviour.RUNS_UNTIL_SIGNALLED: HONEST,
    Behaviour.EXITS_0_QUICKLY: "pass",
    Behaviour.EXITS_3: "import sys; sys.exit(3)",
    Behaviour.IGNORES_SIGTERM: DEAF,
}


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "HOME": str(REPO)}


def request_for(tmp_path: Path, job_id: str, spec: JobSpec, units: int | None = None, *, attempt: int = 0,
                nodes: list[str] | None = None, flavour: str = "h100") -> LaunchRequest:
    units = units if units is not None else spec.gpus_per_pod
    chosen = nodes or H100[:spec.pods]
    placement = place(flavour, *((chosen[i], tuple(range(units))) for i in range(spec.pods)))
    env = gang_env(job_id, spec, placement, checkpoint_uri=(tmp_path / "ckpt" / job_id).as_uri() + "/",
                   checkpoint_interval_s=3600)
    return LaunchRequest(job_id=job_id, spec=spec, placement=placement, nodes=nodes_of(placement, NODES), env=env,
                         attempt=attempt)


def python_spec(job_id: str, program: str, pods: int = 2, units: int = 2) -> JobSpec:
    return make_spec(job_id).pods(pods, units).command(sys.executable, "-c", program).build()


class LocalHarness(ExecutorHarness):
    """Real processes in real time: ``advance`` waits one short poll interval."""

    grace_s = 3.0
    timeout_s = 60.0

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.state_dir = tmp_path / "state"
        self._executor = self.new_executor()
        self._all: list[LocalExecutor] = [self._executor]

    def new_executor(self) -> LocalExecutor:
        return LocalExecutor(self.state_dir, NODES.values(), env=base_env())

    @property
    def executor(self) -> LocalExecutor:
        return self._executor

    def request(self, job_id: str, behaviour: Behaviour, *, pods: int = 2) -> LaunchRequest:
        return request_for(self.tmp_path, job_id, python_spec(job_id, PROGRAMS[behaviour], pods))

    def now(self) -> float:
        return time.time()

    def advance(self) -> None:
        time.sleep(0.02)

    def pod_env(self, job_id: str, rank: int) -> Mapping[str, str]:
        return self._executor.pod_env(job_id, rank)

    def reopen(self) -> Executor:
        """The first instance is dropped, as a crashed scheduler's would be; a new one reads the state dir."""
        self._executor.close()
        self._executor = self.new_executor()
        self._all.append(self._executor)
        return self._executor

    def fail_node(self, node: str) -> None:
        self._executor.fail_node(node)

    def close(self) -> None:
        reaper = self.new_executor()
        for job_id in reaper.running_jobs():
            reaper.terminate(job_id, 0)
        for executor in self._all:
            executor.close()


class TestLocalExecutor(ExecutorContract):
    def make_harness(self, tmp_path: Path) -> ExecutorHarness:
        return LocalHarness(tmp_path)


# -- beyond the contract ----------------------------------------------------------------------------------------

@pytest.fixture
def harness(tmp_path: Path) -> Iterator[LocalHarness]:
    h = LocalHarness(tmp_path)
    try:
        yield h
    finally:
        h.close()


def launch(h: LocalHarness, job_id: str, program: str, pods: int = 2, **kwargs: object) -> LaunchRequest:
    request = request_for(h.tmp_path, job_id, python_spec(job_id, program, pods), **kwargs)  # type: ignore[arg-type]
    h.executor.launch(request)
    return request


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_two_pod_gang_gets_the_job_contract_env(harness: LocalHarness) -> None:
    request = launch(harness, "job_env2", HONEST, pods=2)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_env2", PodEventKind.STARTED, 2), "both pods to start")
    envs = [harness.executor.pod_env("job_env2", rank) for rank in (0, 1)]
    for rank, env in enumerate(envs):
        assert env["RANK"] == str(rank) and env["LOCAL_RANK"] == "0" and env["WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == request.placement.pods[0].node and env["MASTER_PORT"].isdigit()
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert env["SHOAL_JOB_ID"] == "job_env2" and env["SHOAL_CHECKPOINT_URI"].startswith("file://")
        assert env["SHOAL_CHECKPOINT_INTERVAL"] == "3600" and env["SHOAL_GANG_GPUS"] == "4"
        assert env["SHOAL_NODE"] == request.placement.pods[rank].node
    assert envs[0]["SHOAL_REPORT_FILE"] == envs[1]["SHOAL_REPORT_FILE"]
    harness.executor.terminate("job_env2", 0)
    watch.until(watch.ended("job_env2", 2), "the pods to be killed")


def test_mig_slices_are_visible_as_mig_uuids(harness: LocalHarness) -> None:
    spec = make_spec("job_mig").mig(2).command(sys.executable, "-c", HONEST).build()
    request = request_for(harness.tmp_path, "job_mig", spec, nodes=[MIG_NODE], flavour="h100-mig-1g")
    harness.executor.launch(request)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_mig", PodEventKind.STARTED, 1), "the pod to start")
    devices = NODES[MIG_NODE].devices["h100-mig-1g"]
    expected = ",".join(mig_uuid(MIG_NODE, devices[i].gpu, devices[i].slice or 0) for i in (0, 1))
    assert harness.executor.pod_env("job_mig", 0)["CUDA_VISIBLE_DEVICES"] == expected
    assert expected.startswith("MIG-")
    harness.executor.terminate("job_mig", 0)
    watch.until(watch.ended("job_mig", 1), "the pod to be killed")


def test_real_mig_device_names_override_the_derived_ones(tmp_path: Path) -> None:
    devices = NODES[MIG_NODE].devices["h100-mig-1g"]
    names = {(MIG_NODE, devices[i].gpu, devices[i].slice or 0): f"MIG-real-{i}" for i in range(len(devices))}
    executor = LocalExecutor(tmp_path / "state", NODES.values(), env=base_env(), device_names=names)
    spec = make_spec("job_real").mig(2).command(sys.executable, "-c", "pass").build()
    request = request_for(tmp_path, "job_real", spec, nodes=[MIG_NODE], flavour="h100-mig-1g")
    assert executor._env(request, 0, tmp_path)["CUDA_VISIBLE_DEVICES"] == "MIG-real-0,MIG-real-1"


def test_each_pod_logs_to_its_own_file(harness: LocalHarness) -> None:
    launch(harness, "job_log", "import os; print('hello from', os.environ['RANK'])", pods=2)
    watch = Watch(harness)
    watch.until(watch.ended("job_log", 2), "both pods to exit")
    for rank in (0, 1):
        path = harness.state_dir / "logs" / "job_log" / "0" / f"rank-{rank}.log"
        assert path.read_text() == f"hello from {rank}\n"


def test_checkpoints_and_step_times_are_reported_from_the_helper(harness: LocalHarness) -> None:
    launch(harness, "job_rep", HONEST, pods=2)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_rep", PodEventKind.STARTED, 2), "both pods to start")
    watch.until(lambda: {e.rank for e in watch.of("job_rep", PodEventKind.STEP_TIME)} == {0, 1}, "step times")
    harness.executor.request_checkpoint("job_rep")
    watch.until(lambda: bool(watch.of("job_rep", PodEventKind.CHECKPOINT)), "a checkpoint")
    [checkpoint] = watch.of("job_rep", PodEventKind.CHECKPOINT)
    assert checkpoint.rank == 0 and checkpoint.data["verified"] is True
    assert str(checkpoint.data["uri"]).startswith((harness.tmp_path / "ckpt" / "job_rep").as_uri())
    step_time = watch.of("job_rep", PodEventKind.STEP_TIME)[0]
    assert step_time.data["step_time_s"] == 0.01 and isinstance(step_time.data["step"], int)
    harness.executor.terminate("job_rep", 0)
    watch.until(watch.ended("job_rep", 2), "the pods to be killed")


def test_pods_outlive_the_executor_and_a_new_one_reports_their_exit(harness: LocalHarness) -> None:
    launch(harness, "job_long", HONEST, pods=2)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_long", PodEventKind.STARTED, 2), "both pods to start")
    pids = harness.executor.pids("job_long")
    for rank in (0, 1):
        wait_for(lambda: _child_handles_sigterm(harness, "job_long", rank), "the job to install its handler")
    harness.executor.close()                      # the scheduler goes away
    assert all(procfs.stat(pid) is not None and procfs.stat(pid).alive for pid in pids.values())  # type: ignore[union-attr]
    # While nobody watches, the job ends on its own (here: its pods get SIGTERM from outside Shoal).
    for pid in pids.values():
        os.killpg(pid, signal.SIGTERM)
    wait_for(lambda: all((harness.state_dir / "pods" / "job_long" / "0" / f"rank-{r}" / "exit.json").exists()
                         for r in (0, 1)), "the wrappers to record the exits")
    fresh = harness.reopen()
    # Ended, but not reported: still the executor's to report (a controller adopts it rather than call it lost).
    assert "job_long" in fresh.running_jobs()
    fresh.adopt({"job_long"})
    events = fresh.poll(time.time())
    assert sorted((e.rank, e.kind, e.exit_code) for e in events if e.kind is PodEventKind.EXITED) == [
        (0, PodEventKind.EXITED, 0), (1, PodEventKind.EXITED, 0)]
    assert [e for e in events if e.kind is PodEventKind.STARTED] == []   # reported once, by the first instance
    assert fresh.poll(time.time()) == []
    assert "job_long" not in fresh.running_jobs() and "job_long" not in harness.reopen().running_jobs()


def test_the_wrapper_kills_at_the_deadline_with_no_executor_watching(harness: LocalHarness) -> None:
    launch(harness, "job_deaf", DEAF, pods=1)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_deaf", PodEventKind.STARTED, 1), "the pod to start")
    wait_for(lambda: _child_handles_sigterm(harness, "job_deaf"), "the job to ignore SIGTERM")
    signalled = time.time()
    harness.executor.terminate("job_deaf", 1.0)
    pid = harness.executor.pids("job_deaf")[0]
    harness.executor.close()                      # nobody polls from here on
    wait_for(lambda: not procfs.is_same_process(pid, 0), "the pod to be killed by its wrapper", timeout=20)
    record = json.loads((harness.state_dir / "pods" / "job_deaf" / "0" / "rank-0" / "exit.json").read_text())
    assert record["exit_code"] == -signal.SIGKILL and record["at"] >= signalled + 1.0


def _child_handles_sigterm(h: LocalHarness, job_id: str, rank: int = 0) -> bool:
    path = h.state_dir / "pods" / job_id / "0" / f"rank-{rank}" / "child.json"
    child = json.loads(path.read_text())["pid"] if path.exists() else None
    return child is not None and procfs.handles(child, signal.SIGTERM)


SLOW_STARTER = textwrap.dedent("""
    import time
    time.sleep(0.5)                 # imports, data loading: the handler is not installed yet
    from scheduler_core import jobkit
    jobkit.context()
    while not jobkit.should_stop():
        time.sleep(0.01)
    jobkit.save(1, b"x")
""")


def test_sigterm_waits_for_a_just_started_job_to_install_its_handler(harness: LocalHarness) -> None:
    launch(harness, "job_slow", SLOW_STARTER, pods=1)
    harness.executor.terminate("job_slow", 20.0)  # at once: its SIGTERM handler does not exist yet
    watch = Watch(harness)
    watch.until(watch.ended("job_slow", 1), "the pod to exit")
    assert [e.exit_code for e in watch.of("job_slow", PodEventKind.EXITED)] == [0]
    assert len(watch.of("job_slow", PodEventKind.CHECKPOINT)) == 1


def test_a_checkpoint_request_never_kills_a_job_that_does_not_handle_sigusr1(harness: LocalHarness) -> None:
    launch(harness, "job_plain", "import time\nwhile True: time.sleep(0.05)\n", pods=1)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_plain", PodEventKind.STARTED, 1), "the pod to start")
    harness.executor.request_checkpoint("job_plain")
    for _ in range(10):
        harness.advance()
        watch.poll()
    assert watch.of("job_plain", PodEventKind.EXITED) == []
    assert "job_plain" in harness.executor.running_jobs()
    harness.executor.terminate("job_plain", 0)
    watch.until(watch.ended("job_plain", 1), "the pod to be killed")


def test_a_command_that_cannot_start_exits_127(harness: LocalHarness) -> None:
    spec = make_spec("job_nocmd").pods(1, 1).command("/nonexistent/train").build()
    harness.executor.launch(request_for(harness.tmp_path, "job_nocmd", spec))
    watch = Watch(harness)
    watch.until(watch.ended("job_nocmd", 1), "the pod to exit")
    assert [e.exit_code for e in watch.of("job_nocmd", PodEventKind.EXITED)] == [127]
    assert "cannot start" in (harness.state_dir / "logs" / "job_nocmd" / "0" / "rank-0.log").read_text()


def test_a_failed_node_takes_no_pods_until_repaired_and_sends_no_heartbeat(harness: LocalHarness) -> None:
    node = H100[1]
    harness.executor.fail_node(node)
    assert node not in harness.executor.heartbeats(time.time())
    assert H100[0] in harness.executor.heartbeats(time.time())
    launch(harness, "job_down", HONEST, pods=2)
    watch = Watch(harness)
    watch.until(lambda: bool(watch.of("job_down", PodEventKind.FAILED)) and
                watch.ranks("job_down", PodEventKind.STARTED) == [0], "one pod to fail, the other to start")
    assert [(e.rank, e.node) for e in watch.of("job_down", PodEventKind.FAILED)] == [(1, node)]
    harness.executor.terminate("job_down", 0)
    watch.until(watch.ended("job_down", 2), "the other pod to be killed")
    harness.executor.repair_node(node)
    assert node in harness.executor.heartbeats(time.time())
    launch(harness, "job_up", "pass", pods=2)
    watch.until(watch.ended("job_up", 2), "both pods to exit")
    assert [e.exit_code for e in watch.of("job_up", PodEventKind.EXITED)] == [0, 0]


def test_fail_node_from_another_instance_is_seen_by_the_one_running_the_gang(harness: LocalHarness) -> None:
    request = launch(harness, "job_far", HONEST, pods=2)
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_far", PodEventKind.STARTED, 2), "both pods to start")
    admin = harness.new_executor()                # `shoal nodes fail` from another process
    assert admin.fail_node(request.placement.pods[0].node) == ["job_far"]
    watch.until(lambda: bool(watch.of("job_far", PodEventKind.FAILED)), "the pod to fail")
    assert [e.rank for e in watch.of("job_far", PodEventKind.FAILED)] == [0]
    with pytest.raises(NotFound):
        admin.fail_node("no-such-node")
    harness.executor.terminate("job_far", 0)
    watch.until(watch.ended("job_far", 2), "the other pod to be killed")


def test_a_relaunch_needs_a_new_attempt_and_logs_apart(harness: LocalHarness) -> None:
    launch(harness, "job_re", "print('first')", pods=1)
    watch = Watch(harness)
    watch.until(watch.ended("job_re", 1), "the first attempt to exit")
    launch(harness, "job_re", "print('second')", pods=1, attempt=1)
    events: list[PodEvent] = []
    wait_for(lambda: bool(events.extend(harness.executor.poll(time.time())) or
                          [e for e in events if e.kind is PodEventKind.EXITED]), "the second attempt to exit")
    logs = harness.state_dir / "logs" / "job_re"
    assert (logs / "0" / "rank-0.log").read_text() == "first\n"
    assert (logs / "1" / "rank-0.log").read_text() == "second\n"


def test_a_relative_state_dir_works_for_pods_running_elsewhere(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`shoal up` defaults to ./.shoal; pods run in their own working directory and must still find their files."""
    monkeypatch.chdir(tmp_path)
    h = LocalHarness(tmp_path)
    h._executor = LocalExecutor(Path(".shoal-relative"), NODES.values(), env=base_env())
    h.state_dir = tmp_path / ".shoal-relative"
    h._all.append(h._executor)
    try:
        launch(h, "job_rel", "import os; print('rank', os.environ['RANK'])", pods=2)
        watch = Watch(h)
        watch.until(watch.ended("job_rel", 2), "both pods to exit")
        assert [e.exit_code for e in watch.events if e.kind is PodEventKind.EXITED] == [0, 0]
        assert (h.state_dir / "logs" / "job_rel" / "0" / "rank-1.log").read_text() == "rank 1\n"
    finally:
        h.close()
