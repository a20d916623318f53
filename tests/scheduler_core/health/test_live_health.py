"""The node lifecycle with real processes: the local executor runs the jobs and the burn-ins, the real policy
places, SQLite keeps the state. Each transition the issue names is driven here and its consequence checked:

* heartbeats stop → suspect within the limit; its job keeps running; nothing new is placed there;
* GPU errors (the executor's own report) → suspect; once idle, a burn-in, and ready again when it passes;
* a repaired node runs its burn-in and becomes ready with no human step;
* a gang never lands on a node that failed its burn-in;
* a burn-in that hangs is ended by its time limit and counts as failed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from scheduler_core.controller import Controller, ControllerConfig
from scheduler_core.executor import procfs
from scheduler_core.executor.local import LocalExecutor
from scheduler_core.model import ClusterConfig, Health, Node, TeamConfig
from scheduler_core.policy.cycle import run_cycle
from scheduler_core.runtime.node_lifecycle import HealthConfig
from scheduler_core.service.live import LiveConfig, LiveController
from scheduler_core.service.nodes import fail_node, repair_node
from scheduler_core.store.records import JobRecord, JobState
from scheduler_core.store.sql import SqlStore

from ..runtime_builders import make_spec, sqlite_store
from ..test_executor_local import base_env

T = TypeVar("T")
NODES = ClusterConfig.model_validate(
    {"name": "health", "blocks": [{"name": "h100-b0", "nodes": 3, "gpu": "h100"}]}).expand()
N0, N1, N2 = (node.name for node in NODES)
TEAM = TeamConfig.model_validate({"name": "search", "cohort": "shared", "quotas": {"h100": {"nominal": 24}}})
SLEEPER = ("python", "-c", "import time; time.sleep(120)")


class SilencingExecutor(LocalExecutor):
    """A local executor whose ``silent`` nodes stop vouching for themselves (a host that hangs, a lost network
    link): no heartbeats, pods left alone."""

    silent: set[str]

    def heartbeats(self, now: float) -> dict[str, float | None]:
        return {name: value for name, value in super().heartbeats(now).items() if name not in self.silent}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    with sqlite_store(tmp_path, NODES, [TEAM]) as s:
        yield s


def executor(tmp_path: Path, nodes: list[Node] = NODES) -> SilencingExecutor:
    env = dict(base_env(), PATH=f"{Path(sys.executable).parent}:{base_env()['PATH']}")
    ex = SilencingExecutor(tmp_path / "executor", nodes, env=env, sigterm_startup_window_s=0.2)
    ex.silent = set()
    return ex


def controller(store: SqlStore, ex: LocalExecutor, tmp_path: Path, **health: object) -> Controller:
    return Controller(store, ex, run_cycle, nodes=NODES, config=ControllerConfig(
        checkpoint_root=str(tmp_path / "ckpt"), health=HealthConfig(**health)))  # type: ignore[arg-type]


def health_of(store: SqlStore, node: str) -> Health:
    return next(r.health for r in store.list_nodes() if r.node.name == node)


def reason_of(store: SqlStore, node: str) -> str:
    return next(r.health_reason for r in store.list_nodes() if r.node.name == node)


def steps_until(ctl: Controller, condition: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Step the controller in real time until ``condition`` holds (a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        ctl.step(time.time())
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def submit(store: SqlStore, name: str, pods: int = 1) -> JobRecord:
    spec = make_spec(name).team("search").pods(pods, 8).command(*SLEEPER).build()
    return store.submit(spec, user="ana", now=time.time())


def nodes_of(store: SqlStore, job_id: str) -> set[str]:
    record = store.get(job_id)
    return set() if record.placement is None else {pod.node for pod in record.placement.pods}


def health_events(store: SqlStore, node: str) -> list[tuple[str, str]]:
    """The node's transitions, as (reason, health after)."""
    return [(e.reason, str(e.data["health"])) for e in store.events() if e.kind == "node_health"
            and e.node == node and "health" in e.data]


def test_heartbeats_stop_then_suspect_within_the_limit_its_job_runs_on_and_nothing_new_lands_there(
        store: SqlStore, tmp_path: Path) -> None:
    ex = executor(tmp_path)
    limit = 1.0
    live = LiveController(store, ex, run_cycle, nodes=NODES, holder="t",
                          config=LiveConfig(lease_ttl_s=3.0, renew_every_s=0.5, standby_poll_s=0.1,
                                            safety_margin_s=1.0, tick_min_s=0.05, tick_max_s=0.1,
                                            heartbeat_every_s=0.2),
                          controller_config=ControllerConfig(checkpoint_root=str(tmp_path / "ckpt"),
                                                             health=HealthConfig(heartbeat_limit_s=limit)))

    async def until(condition: Callable[[], object], what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)

    async def body() -> None:
        first = submit(store, "first")
        live.wake()
        await until(lambda: store.get(first.id).state is JobState.RUNNING, "the first job to run")
        [node] = nodes_of(store, first.id)
        ex.silent.add(node)
        silenced = time.monotonic()
        await until(lambda: health_of(store, node) is Health.SUSPECT, "the silent node to turn suspect")
        took = time.monotonic() - silenced
        # The limit, plus at most one heartbeat period and a tick or two of the loop.
        assert took <= limit + 0.2 + 0.5, took
        assert store.get(first.id).state is JobState.RUNNING
        assert ex.running_jobs() == {first.id}   # its process was left alone
        others = [submit(store, f"next-{i}") for i in range(3)]
        live.wake()
        await until(lambda: sum(store.get(j.id).state is JobState.RUNNING for j in others) == 2,
                    "two more jobs to run on the other nodes")
        waiting = next(j for j in others if store.get(j.id).state is JobState.PENDING)
        await until(lambda: store.get(waiting.id).wait_reason is not None, "the third to get a reason")
        assert all(node not in nodes_of(store, j.id) for j in others)
        assert store.get(first.id).state is JobState.RUNNING
        assert health_events(store, node) == [("HeartbeatStale", "suspect")]

    async def main() -> None:
        task = asyncio.create_task(live.run())
        try:
            await body()
        finally:
            live.stop()
            await task
            for job in store.list_jobs(states=[JobState.RUNNING]):
                ex.terminate(job.id, 0.0)

    asyncio.run(main())


def test_gpu_errors_make_a_node_suspect_and_once_idle_a_passed_burnin_makes_it_ready(
        store: SqlStore, tmp_path: Path) -> None:
    ex = executor(tmp_path)
    ctl = controller(store, ex, tmp_path)
    job = submit(store, "busy")
    steps_until(ctl, lambda: store.get(job.id).state is JobState.RUNNING, "the job to run")
    [node] = nodes_of(store, job.id)

    ex.report_gpu_errors(node, 2, "xid 79 on GPU 3")
    steps_until(ctl, lambda: health_of(store, node) is Health.SUSPECT, "the node to turn suspect")
    assert "xid 79 on GPU 3" in reason_of(store, node)
    for _ in range(3):   # busy: its job keeps running, no burn-in yet
        ctl.step(time.time())
    assert store.get(job.id).state is JobState.RUNNING and health_of(store, node) is Health.SUSPECT

    store.request_cancel(job.id, time.time())
    steps_until(ctl, lambda: health_of(store, node) is Health.READY, "the idle suspect node's burn-in to pass")
    assert health_events(store, node) == [("GpuErrors", "suspect"), ("IdleSuspect", "burnin"),
                                          ("BurnInPassed", "ready")]
    logs = list((ex.state_dir / "logs").glob(f"burnin-{node}-*/0/rank-0.log"))
    assert len(logs) == 1 and '"burnin": "passed"' in logs[0].read_text()


def test_a_repaired_node_runs_its_burnin_and_becomes_ready_with_no_human_step(store: SqlStore,
                                                                             tmp_path: Path) -> None:
    ex = executor(tmp_path)
    ctl = controller(store, ex, tmp_path)
    fail_node(store, ex, N1, now=time.time(), by="ops")
    repair_node(store, ex, N1, now=time.time(), by="ops")
    assert health_of(store, N1) is Health.BURNIN

    steps_until(ctl, lambda: health_of(store, N1) is Health.READY, "the burn-in to pass")

    assert health_events(store, N1) == [("NodeFailed", "repair"), ("Repaired", "burnin"),
                                        ("BurnInPassed", "ready")]
    started = [e for e in store.events() if e.reason == "BurnInStarted"]
    assert [e.node for e in started] == [N1]
    [log] = (ex.state_dir / "logs").glob(f"burnin-{N1}-*/0/rank-0.log")
    lines = log.read_text().splitlines()
    assert sum('"mode": "virtual"' in line for line in lines) == 8   # each of the node's 8 slots exercised
    assert ex.running_jobs() == set()


def test_a_gang_never_lands_on_a_node_that_failed_its_burnin(store: SqlStore, tmp_path: Path) -> None:
    ex = executor(tmp_path)
    check = ("sh", "-c", f'test "$SHOAL_NODE" != {N1}')   # the check fails on N1 only
    ctl = controller(store, ex, tmp_path, burnin_command=check)
    for node in (N0, N1):
        fail_node(store, ex, node, now=time.time())
        repair_node(store, ex, node, now=time.time())

    steps_until(ctl, lambda: health_of(store, N0) is Health.READY and health_of(store, N1) is Health.REPAIR,
                "N0's burn-in to pass and N1's to fail")
    assert reason_of(store, N1) == "burn-in exited 1"
    assert health_events(store, N1)[-1] == ("BurnInFailed", "repair")

    gang = submit(store, "gang", pods=2)
    second = submit(store, "second", pods=2)
    steps_until(ctl, lambda: store.get(gang.id).state is JobState.RUNNING, "the gang to run")
    assert nodes_of(store, gang.id) == {N0, N2}
    for _ in range(5):
        ctl.step(time.time())
    assert store.get(second.id).state is JobState.PENDING and not nodes_of(store, second.id)
    assert store.get(second.id).wait_reason is not None
    for job in (gang, second):
        store.request_cancel(job.id, time.time())
    steps_until(ctl, lambda: not ex.running_jobs(), "the gang to stop")


def test_a_hanging_burnin_is_ended_by_its_time_limit_and_counts_as_failed(store: SqlStore, tmp_path: Path) -> None:
    ex = executor(tmp_path)
    ctl = controller(store, ex, tmp_path, burnin_command=("sleep", "600"), burnin_time_limit_s=1.0)
    fail_node(store, ex, N2, now=time.time())
    repair_node(store, ex, N2, now=time.time())
    burnin = steps_until(ctl, lambda: next(iter(ex.running_jobs()), None), "the burn-in to start")
    [pid] = ex.pids(burnin).values()

    steps_until(ctl, lambda: health_of(store, N2) is Health.REPAIR, "the time limit to end the burn-in")

    assert health_events(store, N2)[-1] == ("BurnInTimedOut", "repair")
    assert "burn-in still running after" in reason_of(store, N2)
    steps_until(ctl, lambda: not ex.running_jobs() and not procfs.is_same_process(pid, 0), "the sleep to be killed")
    for _ in range(3):   # its late exit changes nothing: the node stays in repair until an operator repairs it
        ctl.step(time.time())
    assert health_of(store, N2) is Health.REPAIR
