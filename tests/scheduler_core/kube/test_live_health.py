"""The live loop on the Kubernetes executor: a GPU error signal on a node reaches the store as *suspect*, and a
cordon as *draining*, while the loop leads — no operator involved."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.controller import ControllerConfig
from scheduler_core.model import Health
from scheduler_core.service.live import LiveConfig, LiveController
from scheduler_core.store.sql import SqlStore

from ..greedy_policy import GreedyPolicy
from ..runtime_builders import cluster_nodes, sqlite_store
from .harness import KubeHarness

FAST = LiveConfig(lease_ttl_s=3.0, renew_every_s=0.5, standby_poll_s=0.1, safety_margin_s=1.0, tick_min_s=0.05,
                  tick_max_s=0.1, heartbeat_every_s=0.1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    with sqlite_store(tmp_path) as s:
        yield s


def test_node_health_follows_the_cluster_while_leading(tmp_path: Path, store: SqlStore) -> None:
    harness = KubeHarness(tmp_path)
    loop = LiveController(store, harness.executor, GreedyPolicy(), nodes=cluster_nodes(), holder="a", config=FAST,
                          controller_config=ControllerConfig(checkpoint_root=str(harness.shared)))

    def health() -> dict[str, Health]:
        return {r.node.name: r.health for r in store.list_nodes()}

    async def scenario() -> None:
        running = asyncio.create_task(loop.run())
        try:
            await until(lambda: loop.is_leader and loop.stats.steps > 2, "the loop to lead")
            await asyncio.to_thread(harness.cluster.set_node_condition, "h100-b0-n01", "XidCriticalError", "True",
                                    message="Xid 79: GPU has fallen off the bus")
            await asyncio.to_thread(harness.cluster.cordon, "h100-b1-n00")
            await until(lambda: health()["h100-b0-n01"] is Health.SUSPECT
                        and health()["h100-b1-n00"] is Health.DRAINING, "the cluster's word in the store")
            beats = {r.node.name: r.heartbeat_at for r in store.list_nodes()}
            assert all(beats[name] is not None for name in beats)
        finally:
            loop.stop()
            await running

    try:
        asyncio.run(scenario())
    finally:
        harness.close()
    reasons = {r.node.name: r.health_reason for r in store.list_nodes()}
    assert "Xid 79" in reasons["h100-b0-n01"] and reasons["h100-b1-n00"] == "cordoned"


async def until(condition: object, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
