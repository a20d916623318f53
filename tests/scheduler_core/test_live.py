"""``LiveController`` in real time on one event loop: wake-ups, one leader at a time, stepping down, heartbeats,
and re-adopting running pods after a restart (real processes)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from scheduler_core.controller import ControllerConfig
from scheduler_core.executor.base import Executor
from scheduler_core.executor.local import LocalExecutor
from scheduler_core.executor.sim import SimBehaviour, SimExecutor
from scheduler_core.service.live import LiveConfig, LiveController
from scheduler_core.store.records import JobState
from scheduler_core.store.sql import SqlStore

from .greedy_policy import GreedyPolicy
from .runtime_builders import cluster_nodes, make_spec, sqlite_store
from .test_executor_local import HONEST, base_env

FAST = LiveConfig(lease_ttl_s=3.0, renew_every_s=0.5, standby_poll_s=0.1, safety_margin_s=1.0, tick_min_s=0.05,
                  tick_max_s=0.1, heartbeat_every_s=0.2)
#: Ticks so far apart that only ``wake()`` can explain a prompt step.
NO_TICKS = LiveConfig(lease_ttl_s=3.0, renew_every_s=0.5, standby_poll_s=0.1, safety_margin_s=1.0,
                      tick_min_s=60.0, tick_max_s=60.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    with sqlite_store(tmp_path) as s:
        yield s


def live(store: SqlStore, executor: Executor, holder: str, config: LiveConfig = FAST) -> LiveController:
    return LiveController(store, executor, GreedyPolicy(), nodes=cluster_nodes(), holder=holder, config=config,
                          controller_config=ControllerConfig(checkpoint_root="/tmp/shoal-test-ckpt"))


def sim() -> SimExecutor:
    return SimExecutor(SimBehaviour(work_s=0.3, start_latency_s=0.0, checkpoint_interval_s=None))


async def until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def running(*controllers: LiveController) -> Callable[[Callable[[], Awaitable[None]]], None]:
    """Run ``body`` while the controllers run on one loop; stop them all afterwards."""
    def run(body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            tasks = [asyncio.create_task(c.run()) for c in controllers]
            try:
                await body()
            finally:
                for c in controllers:
                    c.stop()
                await asyncio.gather(*tasks)
        asyncio.run(main())
    return run


def test_wake_steps_at_once_without_waiting_for_the_tick(store: SqlStore) -> None:
    controller = live(store, sim(), "a", NO_TICKS)

    async def body() -> None:
        await until(lambda: controller.is_leader and controller.stats.steps >= 1, "leadership and recovery")
        job = store.submit(make_spec("w").pods(1, 8).build(), user="ana", now=time.time())
        controller.wake()
        await until(lambda: store.get(job.id).state is not JobState.PENDING, "the job to be admitted", 10.0)
    running(controller)(body)


def test_one_leader_at_a_time_and_a_standby_takes_over_with_a_larger_epoch(store: SqlStore) -> None:
    a, b = live(store, sim(), "a"), live(store, sim(), "b")

    async def body() -> None:
        await until(lambda: a.is_leader or b.is_leader, "a leader")
        await asyncio.sleep(0.5)   # several renewals and standby polls: the leadership must not flap
        assert [a.is_leader, b.is_leader].count(True) == 1
        leader, standby = (a, b) if a.is_leader else (b, a)
        first = leader.epoch
        assert first is not None and store.lease_info().holder == leader.holder
        leader.stop()                      # a clean shutdown gives the lease up
        await until(lambda: standby.is_leader, "the standby to take over", 10.0)
        assert standby.epoch is not None and standby.epoch > first
        # The new leader records its election just after it starts leading: wait for the record, not a tick.
        await until(lambda: [e.data["holder"] for e in store.events() if e.kind == "leadership"][-2:]
                    == [leader.holder, standby.holder], "the takeover to be recorded", 10.0)
    running(a, b)(body)


def test_a_leader_whose_lease_was_taken_stops_leading(store: SqlStore) -> None:
    controller = live(store, sim(), "a")

    async def body() -> None:
        await until(lambda: controller.is_leader, "leadership")
        old = controller.epoch
        # Another scheduler takes the lease as if ours had lapsed (its clock is far ahead of our lease's end).
        intruder = store.acquire_lease("intruder", ttl_s=3600.0, now=time.time() + 60.0)
        assert intruder is not None and old is not None and intruder > old
        await until(lambda: not controller.is_leader, "the old leader to step down", 10.0)
        job = store.submit(make_spec("late").pods(1, 8).build(), user="ana", now=time.time())
        controller.wake()
        await asyncio.sleep(0.3)
        assert store.get(job.id).state is JobState.PENDING   # nobody legitimate admitted it, and we did not
    running(controller)(body)


def test_the_leader_writes_node_heartbeats(store: SqlStore, tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path / "state", cluster_nodes(), env=base_env())
    executor.fail_node("h100-b1-n02")
    controller = live(store, executor, "a")

    async def body() -> None:
        await until(lambda: all(r.heartbeat_at is not None for r in store.list_nodes()
                                if r.node.name != "h100-b1-n02"), "every healthy node's heartbeat")
        assert {r.node.name: r.heartbeat_at for r in store.list_nodes()}["h100-b1-n02"] is None
    running(controller)(body)


def test_a_restarted_scheduler_readopts_running_pods(store: SqlStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec = make_spec("long").pods(2, 8).command(sys.executable, "-c", HONEST).build()
    first = live(store, LocalExecutor(state, cluster_nodes(), env=base_env()), "a")
    job_id = ""
    pids: dict[int, int] = {}

    async def before() -> None:
        nonlocal job_id, pids
        await until(lambda: first.is_leader, "leadership")
        job_id = store.submit(spec, user="ana", now=time.time()).id
        first.wake()
        await until(lambda: store.get(job_id).state is JobState.RUNNING, "the job to run")
        assert isinstance(first.executor, LocalExecutor)
        pids = first.executor.pids(job_id)
    running(first)(before)

    # The first scheduler is gone (it gave its lease up); its pods were not touched.
    assert store.get(job_id).state is JobState.RUNNING
    second_executor = LocalExecutor(state, cluster_nodes(), env=base_env())
    assert job_id in second_executor.running_jobs()
    second = live(store, second_executor, "b")

    async def after() -> None:
        await until(lambda: second.is_leader and second.stats.steps >= 2, "the new leader to recover")
        assert store.get(job_id).state is JobState.RUNNING
        assert second_executor.pids(job_id) == pids           # the same processes, adopted
        store.request_cancel(job_id, now=time.time())
        second.wake()
        await until(lambda: store.get(job_id).state is JobState.CANCELLED, "the cancel to finish")
        adopted = [e for e in store.events(job_id=job_id) if e.kind == "adopt"]
        assert len(adopted) == 1
        checkpoints = store.checkpoints(job_id)
        assert checkpoints and checkpoints[-1].verified   # SIGTERM → the job checkpointed on its way out
    running(second)(after)


def test_live_config_rejects_a_renewal_slower_than_the_lease() -> None:
    with pytest.raises(ValueError, match="renew_every_s"):
        LiveConfig(lease_ttl_s=5.0, renew_every_s=4.0, safety_margin_s=2.0)
