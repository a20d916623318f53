"""ShoalSpawner against a scheduler with behaviour: start, wait with reasons, refusals, state, poll and stop."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from jupyterhub.spawner import SpawnException

from hub_spawner.scheduler import SchedulerRefused
from hub_spawner.spawner import STATE_VERSION, ShoalSpawner

from .builders import SpawnerBuilder
from .fakes import FakeScheduler


@pytest.fixture
def scheduler() -> FakeScheduler:
    return FakeScheduler(pool={"h100-mig-1g": 1, "h100-mig-3g": 2})


@pytest.fixture
def make(scheduler: FakeScheduler, tmp_path: Path) -> SpawnerBuilder:
    return SpawnerBuilder(scheduler, tmp_path)


def test_start_submits_a_notebook_job_for_the_team_and_returns_the_server_address(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.options(profile="mig-3g").build()
    ip, port = asyncio.run(spawner.start())
    assert (ip, port) == ("127.0.0.1", spawner.port) and port > 0
    spec = scheduler.specs[spawner.job_id]
    assert (spec.team, spec.flavour, spec.kind) == ("fraud-ml", ("h100-mig-3g",), "notebook")
    assert list(spec.command[1:3]) == ["-m", "hub_spawner.launch"] and spec.command[4] == "--"
    assert list(spec.command[6:8]) == ["-m", "hub_spawner.singleuser"]   # jupyterhub-singleuser, started faster
    assert scheduler.jobs[spawner.job_id].holds_slice  # granted: the executor starts the server in that step


def test_the_hub_token_travels_in_a_private_file_never_in_the_job_spec(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.build()
    asyncio.run(spawner.start())
    spec = scheduler.specs[spawner.job_id]
    assert "token-of-alice" not in json.dumps(spec.model_dump(mode="json"))
    env_file = Path(spec.command[3])
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(env_file.parent.stat().st_mode) == 0o700
    data = json.loads(env_file.read_text())
    assert data["env"]["JUPYTERHUB_API_TOKEN"] == "token-of-alice"
    assert data["env"]["JUPYTERHUB_SERVICE_URL"].startswith(f"http://127.0.0.1:{spawner.port}")
    assert data["cwd"].endswith("/work/alice")


def test_a_full_pool_makes_the_spawn_wait_with_position_and_reason_then_start_when_a_slice_frees(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    first = make.user("bob", "fraud-ml").build()
    second = make.user("carol", "fraud-ml").build()

    async def scenario() -> list[dict[str, Any]]:
        await first.start()
        second._spawn_pending = True
        starting = asyncio.create_task(second.start())
        events: list[dict[str, Any]] = []

        async def watch() -> None:
            async for event in second.progress():
                events.append(event)
                if "position 1" in event["message"]:
                    await first.stop()  # a slice frees up

        await asyncio.wait_for(asyncio.gather(starting, watch()), timeout=10)
        return events

    events = asyncio.run(scenario())
    waiting = [e["message"] for e in events if e["progress"] == 20]
    assert waiting and "position 1 in team fraud-ml's queue" in waiting[0]
    assert "WaitingForCapacity: every slice of this size is in use" in waiting[0]
    assert events[-1]["progress"] == 80
    assert scheduler.jobs[second.job_id].state == "RUNNING"
    assert scheduler.jobs[first.job_id].state == "CANCELLED"


def test_a_full_team_quota_fails_the_spawn_with_an_actionable_reason_and_cancels_the_job(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    scheduler.team_limit[("fraud-ml", "h100-mig-3g")] = 1
    asyncio.run(make.user("bob", "fraud-ml").options(profile="mig-3g").build().start())
    spawner = make.user("carol", "fraud-ml").options(profile="mig-3g").build()
    with pytest.raises(SpawnException) as caught:
        asyncio.run(spawner.start())
    assert caught.value.reason == "shoal-QuotaFull"
    assert "Team fraud-ml cannot have another 3g.40gb MIG slice now" in caught.value.message
    assert "Pick a smaller profile" in caught.value.message
    assert scheduler.jobs[spawner.job_id].state == "CANCELLED"


def test_a_refused_submission_is_a_spawn_exception_naming_the_fields(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    scheduler.refuse = SchedulerRefused("invalid_spec", "team search has no quota for h100",
                                        {"flavour": "no quota"})
    spawner = make.options(profile="h100").build()
    with pytest.raises(SpawnException) as caught:
        asyncio.run(spawner.start())
    assert caught.value.reason == "shoal-invalid_spec"
    assert "refused a Whole H100 notebook for team fraud-ml: team search has no quota" in caught.value.message
    assert "flavour: no quota" in caught.value.message
    assert not list((Path(spawner.secrets_dir)).iterdir())  # the token file did not outlive the refusal


@pytest.mark.parametrize("user, teams, options, reason", [
    ("alice", ("fraud-ml",), {"profile": "a100-x8"}, "profile"),
    ("dave", (), {}, "team"),
    ("erin", ("fraud-ml", "search"), {}, "team"),
    ("erin", ("fraud-ml",), {"team": "search"}, "team"),
])
def test_bad_choices_are_refused_before_anything_is_submitted(
        make: SpawnerBuilder, scheduler: FakeScheduler, user: str, teams: tuple[str, ...],
        options: dict[str, Any], reason: str) -> None:
    with pytest.raises(SpawnException) as caught:
        asyncio.run(make.user(user, *teams).options(**options).build().start())
    assert caught.value.reason == reason
    assert scheduler.jobs == {}


def test_state_round_trips_with_its_version_and_unknown_versions_are_ignored(make: SpawnerBuilder) -> None:
    spawner = make.build()
    asyncio.run(spawner.start())
    state = spawner.get_state()
    assert state["shoal_state_version"] == STATE_VERSION and state["job_id"] == spawner.job_id
    restored = make.build()
    restored.load_state(state)
    assert (restored.job_id, restored.team, restored.job_token) == (spawner.job_id, "fraud-ml", "token-of-alice")
    future = make.build()
    future.load_state({**state, "shoal_state_version": STATE_VERSION + 1})
    assert future.job_id is None


def test_poll_is_none_while_running_and_the_exit_code_once_the_job_ends(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.build()
    asyncio.run(spawner.start())
    assert asyncio.run(spawner.poll()) is None
    scheduler.finish(spawner.job_id, exit_code=3)
    assert asyncio.run(spawner.poll()) == 3
    assert asyncio.run(make.build().poll()) == 0  # never started


def test_stop_releases_the_slice_at_once_and_removes_the_token_file(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.build()
    asyncio.run(spawner.start())
    job_id, env_file = spawner.job_id, Path(spawner.env_file)
    asyncio.run(spawner.stop())
    assert scheduler.jobs[job_id].state == "CANCELLED" and not scheduler.jobs[job_id].holds_slice
    assert not env_file.exists()
    spawner.clear_state()
    assert spawner.job_id is None and spawner.get_state()["last_job_id"] == job_id


def test_a_reaped_server_tells_its_user_why_on_the_next_spawn_page(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.build()
    asyncio.run(spawner.start())
    asyncio.run(scheduler.cancel(spawner.job_id, reason="stopped by the idle reaper: idle for 1 h 5 min"))
    asyncio.run(spawner.stop())
    spawner.clear_state()
    again = make.build()
    again.load_state(spawner.get_state())
    form = asyncio.run(again.get_options_form())
    assert "stopped by the idle reaper: idle for 1 h 5 min" in form
    asyncio.run(again.start())
    assert again.last_stop == ""


def test_a_briefly_unreachable_scheduler_is_retried_while_waiting(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    holder = make.user("bob", "fraud-ml").build()
    spawner = make.build()

    async def scenario() -> None:
        await holder.start()  # the pool's only 1g slice
        starting = asyncio.create_task(spawner.start())
        while spawner.job_id is None:
            await asyncio.sleep(0.01)
        scheduler.unreachable = 2   # the next two reads fail
        scheduler.finish(holder.job_id)
        await asyncio.wait_for(starting, timeout=10)

    asyncio.run(scenario())
    assert scheduler.unreachable == 0 and spawner.status_poll_failures == 0
    assert scheduler.jobs[spawner.job_id].holds_slice


def test_bad_options_are_refused_when_the_spawn_is_requested(make: SpawnerBuilder) -> None:
    spawner = make.user("erin", "fraud-ml", "search").build()
    with pytest.raises(SpawnException) as caught:
        spawner.apply_user_options(spawner, {"profile": "a100-x8"})
    assert caught.value.status_code == 400 and "choose one of" in caught.value.message
    with pytest.raises(SpawnException, match="several teams"):
        spawner.apply_user_options(spawner, {"profile": "mig-1g"})
    spawner.apply_user_options(spawner, {"profile": "mig-1g", "team": "search"})


def test_the_spawner_is_registered_as_the_shoal_entry_point() -> None:
    from importlib.metadata import entry_points
    spawners = {e.name: e.value for e in entry_points(group="jupyterhub.spawners")}
    assert spawners.get("shoal") == "hub_spawner:ShoalSpawner"
    assert issubclass(ShoalSpawner, __import__("jupyterhub.spawner").spawner.Spawner)
    assert os.environ.get("SHOAL_URL") is None or ShoalSpawner().shoal_url == os.environ["SHOAL_URL"]


def test_start_returns_once_the_granted_server_listens_so_the_hubs_first_check_succeeds(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.config(ready_check=True, ready_check_interval=0.01).build()

    async def scenario() -> tuple[bool, tuple[str, int]]:
        starting = asyncio.create_task(spawner.start())
        while not (spawner.job_id and scheduler.jobs[spawner.job_id].state == "RUNNING"):
            await asyncio.sleep(0.01)
        for _ in range(20):   # granted and running, but nothing listens yet: start() keeps waiting
            await asyncio.sleep(0.01)
        waited = not starting.done()
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", spawner.port)
        async with server:
            return waited, await asyncio.wait_for(starting, timeout=10)

    waited, address = asyncio.run(scenario())
    assert waited and address == ("127.0.0.1", spawner.port)


def test_a_server_that_exits_before_it_listens_fails_the_spawn_at_once_with_the_schedulers_word(
        make: SpawnerBuilder, scheduler: FakeScheduler) -> None:
    spawner = make.config(ready_check=True, http_timeout=300).build()

    async def scenario() -> None:
        starting = asyncio.create_task(spawner.start())
        while not (spawner.job_id and scheduler.jobs[spawner.job_id].state == "RUNNING"):
            await asyncio.sleep(0.01)
        scheduler.finish(spawner.job_id, exit_code=1)
        await asyncio.wait_for(starting, timeout=10)

    with pytest.raises(SpawnException, match="ended before it answered"):
        asyncio.run(scenario())
    assert spawner.job_id is None or scheduler.jobs[spawner.job_id].finished
