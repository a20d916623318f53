"""The spawner's seam over the real API (in process, on a MemoryStore): what a notebook job looks like through it.

The controller is not part of this test: admission is the store's ``bind``, as the controller would write it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hub_spawner.notebook_job import notebook_spec
from hub_spawner.profiles import DEFAULT_PROFILES, load_profiles
from hub_spawner.scheduler import SchedulerRefused
from hub_spawner.shoal_client import ShoalClientScheduler
from scheduler_core.api import ApiService, ChainAuthenticator, TokenAuthenticator, make_app
from scheduler_core.api.server import ServerThread
from scheduler_core.auth.memory import MemoryTokenStore
from scheduler_core.auth.tokens import Identity
from scheduler_core.policy.decisions import Reason
from scheduler_core.policy.snapshot import AdmittedAs, Placement, PodPlacement
from scheduler_core.store.memory import MemoryStore
from tests.scheduler_core.runtime_builders import cluster_nodes, team_configs

PROFILES = {p.slug: p for p in load_profiles(DEFAULT_PROFILES)}


@dataclass
class Api:
    store: MemoryStore
    url: str
    alice: str
    admin: str


@pytest.fixture
def api() -> Iterator[Api]:
    store = MemoryStore()
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    tokens = MemoryTokenStore()
    alice = tokens.create_token(Identity("alice", "fraud-ml"), now=0)
    admin = tokens.create_token(Identity("reaper", "", admin=True), now=0)
    server = ServerThread(lambda: make_app(ApiService(store), ChainAuthenticator([TokenAuthenticator(tokens)])))
    with server:
        yield Api(store, server.url, alice, admin)


def _spec(team: str = "fraud-ml", profile: str = "mig-1g"):  # type: ignore[no-untyped-def]
    return notebook_spec(user="alice", server_name="", team=team, profile=PROFILES[profile],
                         command=["python", "-m", "hub_spawner.launch", "/x", "--", "jupyterhub-singleuser"])


def test_a_notebook_job_through_the_sdk_waits_with_its_reason_then_shows_its_mig_slice(api: Api) -> None:
    async def scenario() -> None:
        scheduler = ShoalClientScheduler(api.url, api.alice)
        job = await scheduler.submit(_spec(), idempotency_key="k1")
        assert (job.state, job.team, job.flavour) == ("PENDING", "fraud-ml", "h100-mig-1g")
        assert (await scheduler.submit(_spec(), idempotency_key="k1")).id == job.id

        api.store.set_waits([(job.id, Reason.WAITING_FOR_CAPACITY, "all 56 slices in use", 2, 1_900_000_000.0)], 1_800_000_000.0)
        waiting = await scheduler.get(job.id)
        assert (waiting.reason, waiting.reason_message, waiting.queue_position, waiting.estimated_start) == (
            "WaitingForCapacity", "all 56 slices in use", 2, 1_900_000_000.0)

        api.store.bind(job.id, Placement("h100-mig-1g", (PodPlacement("mig-a-n00", (9,)),)), AdmittedAs.NOMINAL,
                       epoch=0, now=1.0)
        admitted = await scheduler.get(job.id)
        assert admitted.state == "ADMITTED" and admitted.node == "mig-a-n00"
        assert len(admitted.devices) == 1 and admitted.devices[0].startswith("MIG-")

        stopping = await scheduler.cancel(job.id, reason="stopped by the idle reaper: idle for 1 h 2 min")
        assert stopping.holds_slice
        assert (await scheduler.get(job.id)).message == "stopped by the idle reaper: idle for 1 h 2 min"
        await scheduler.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("team, profile, code", [
    ("search", "mig-1g", "forbidden"),        # alice is not in search
    ("fraud-ml", "mig-3g", "invalid_spec"),   # no 3g slices on this cluster
])
def test_refusals_arrive_as_scheduler_refused_with_the_apis_code(api: Api, team: str, profile: str,
                                                                 code: str) -> None:
    async def scenario() -> SchedulerRefused:
        scheduler = ShoalClientScheduler(api.url, api.alice)
        try:
            with pytest.raises(SchedulerRefused) as caught:
                await scheduler.submit(_spec(team, profile), idempotency_key="k")
        finally:
            await scheduler.close()
        return caught.value

    assert asyncio.run(scenario()).code == code


def test_the_reaper_reads_the_executors_gpu_figure_for_a_node(api: Api) -> None:
    api.store.heartbeat("mig-a-n00", 5.0, gpu_utilization=37.5)

    async def scenario() -> tuple[float | None, float | None]:
        scheduler = ShoalClientScheduler(api.url, api.admin)
        try:
            return (await scheduler.node_gpu_utilization("mig-a-n00"),
                    await scheduler.node_gpu_utilization("h100-b0-n00"))
        finally:
            await scheduler.close()

    assert asyncio.run(scenario()) == (37.5, None)
