"""Honest notebook waits, through the real pieces: the reaper's report goes over the API into the store, the
policy plans the waiting notebook from it, and the spawn page's line is made from the job as the API returns it.

The MIG pool (56 slices of ``mig-a-n00``) is full of notebooks of both teams, 12-hour time limits, idle for 50
minutes under the reaper's 1-hour limit. On time limits the waiting notebook would be told "in about 10 h";
with the reaper's clocks the slices free in 10 minutes, and the page says so, and names the profile that could
start now (whole H100s are free)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from hub_spawner.profiles import DEFAULT_PROFILES, load_profiles
from hub_spawner.progress import progress_event, startable_profiles
from hub_spawner.scheduler import RoomNow
from hub_spawner.shoal_client import ShoalClientScheduler
from scheduler_core.model import JobSpec
from scheduler_core.policy.cycle import run_cycle
from scheduler_core.policy.snapshot import AdmittedAs, PolicyConfig
from scheduler_core.runtime.snapshot_builder import SnapshotBuilder
from scheduler_core.store.records import JobState

from ..scheduler_core.api.harness import T0, Harness, running_harness
from ..scheduler_core.runtime_builders import cluster_nodes, make_spec, place

H = 3600.0


def notebook(spec: JobSpec) -> JobSpec:
    return JobSpec.model_validate({**spec.model_dump(), "kind": "notebook"})


@pytest.fixture()
def api() -> Iterator[Harness]:
    yield from running_harness("memory")


def step_policy(api: Harness, now: float) -> None:
    """The controller's part of one step: snapshot from the store, the real cycle, the waits written back."""
    store = api.store
    builder = SnapshotBuilder(cluster_nodes(), PolicyConfig())
    snapshot = builder.build(nodes=store.list_nodes(), teams=store.list_teams(),
                             pending=store.list_jobs(states=[JobState.PENDING]),
                             running=store.list_jobs(states=[JobState.RUNNING]), decayed_usage={})
    result = run_cycle(snapshot, now)
    assert not result.admits
    store.set_waits([(w.job_id, w.reason, w.message + (f"; estimated start {w.estimate_note}" if w.estimate_note
                                                       else ""), w.position, w.estimated_start)
                     for w in result.waits], now)


def fill_the_pool(api: Harness, *, idle_for: float | None) -> tuple[str, ShoalClientScheduler]:
    """56 notebooks running since two hours ago; the reaper (root) reports each idle for ``idle_for``."""
    reaper = ShoalClientScheduler(api.url, api.users["root"])
    spawner = ShoalClientScheduler(api.url, api.users["alice"])
    holders = []
    for k in range(56):
        spec = make_spec(f"nb{k}").team("fraud-ml" if k < 28 else "search").mig().non_preemptible() \
            .time_limit(12 * H).build()
        spec = notebook(spec)
        record = api.store.submit(spec, user="alice" if k < 28 else "bob", now=T0 - 2 * H)
        api.store.bind(record.id, place("h100-mig-1g", ("mig-a-n00", (k,))), AdmittedAs.NOMINAL, epoch=0,
                       now=T0 - 2 * H)
        api.store.mark_running(record.id, T0 - 2 * H)
        holders.append(record.id)

    async def report() -> None:
        for job_id in holders:
            await reaper.report_idle_clock(job_id, None if idle_for is None else T0 - idle_for,
                                           None if idle_for is None else H)
        await reaper.close()

    asyncio.run(report())
    spec = notebook(make_spec("mine").mig().non_preemptible().time_limit(12 * H).build())
    waiting = api.store.submit(spec, user="alice", now=T0 - 30)
    return waiting.id, spawner


@pytest.mark.parametrize(("idle_for", "words"), [
    (50 * 60, "in about 10 min"),        # the reaper frees a slice at 1 h idle: 10 minutes from now
    (None, "in about 10 h 00 min"),      # busy kernels: no clock, the time limits are all there is
])
def test_a_full_pool_of_idle_notebooks_tells_the_waiting_one_when_the_reaper_frees_a_slice(
        api: Harness, idle_for: float | None, words: str) -> None:
    waiting_id, spawner = fill_the_pool(api, idle_for=idle_for)
    step_policy(api, T0)

    async def read() -> tuple[str, RoomNow]:
        job = await spawner.get(waiting_id)
        room = await spawner.room_now("fraud-ml")
        await spawner.close()
        profiles = load_profiles(DEFAULT_PROFILES)
        names = [p.display_name for p in startable_profiles(profiles, "mig-1g", room)]
        return progress_event(job, T0, names)["message"], room

    message, room = asyncio.run(read())
    assert words in message, message
    if idle_for is not None:
        assert "idle reaper" in message
    # Whole H100s are free and within fraud-ml's quota; no other MIG profile exists on this cluster.
    assert room.largest_free.get("h100-mig-1g", 0) == 0 and room.largest_free["h100"] == 8
    assert "'Whole H100' could start now" in message


def test_only_profiles_with_free_room_and_quota_are_named() -> None:
    profiles = load_profiles(DEFAULT_PROFILES)
    room = RoomNow(largest_free={"h100-mig-1g": 0, "h100-mig-2g": 3, "h100-mig-3g": 1, "h100": 8},
                   quota_room={"h100-mig-1g": 5, "h100-mig-2g": 2, "h100-mig-3g": 4, "h100": 0})
    # 2g has room and quota; 3g has quota and one free slot; the H100 is free but the team's quota is spent.
    assert [p.slug for p in startable_profiles(profiles, "mig-1g", room)] == ["mig-2g", "mig-3g"]
    assert startable_profiles(profiles, "mig-2g", RoomNow()) == []
