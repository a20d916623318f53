"""A real JupyterHub with configurable-http-proxy over the real scheduler (``shoal up``): notebooks on MIG slices.

The pool has two 3g.40gb slices. In order: a spawn through the hub's REST API lands on a slice; a full pool makes
the next spawn wait with its position and reason, and it starts when a slice frees; the reaper, its clock moved
two hours on, stops the idle server and keeps the one whose kernel is busy.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from hub_spawner.reaper import Reaper
from hub_spawner.shoal_client import ShoalClientScheduler

from .conftest import Stack
from .kernels import KernelClient
from .stack import wait_for

pytestmark = [pytest.mark.hub, pytest.mark.slow]


def _job(stack: Stack, job_id: str) -> dict[str, Any]:
    reply = httpx.get(f"{stack.shoal_url}/v1/jobs/{job_id}", timeout=30,
                      headers={"Authorization": f"Bearer {stack.shoal_admin_token}"})
    reply.raise_for_status()
    return dict(reply.json())


def _running(stack: Stack, job_id: str) -> dict[str, Any]:
    """The job once the scheduler has marked it RUNNING: the hub calls the server ready when it answers HTTP, which
    can come a scheduling step before that."""
    return dict(wait_for(lambda: (job := _job(stack, job_id))["state"] == "RUNNING" and job, timeout=30,
                         what=f"job {job_id} RUNNING"))


def _spawn_and_wait(stack: Stack, user: str, timeout: float = 90) -> dict[str, Any]:
    stack.hub.login(user).close()
    reply = stack.hub.spawn(user, profile="mig-3g")
    assert reply.status_code in (201, 202), reply.text
    return stack.hub.wait_ready(user, timeout)


def _environment(stack: Stack, user: str, names: str) -> str:
    kernels = KernelClient(stack.hub.url, user, stack.hub.token)
    kernel = kernels.start()
    return kernels.run(kernel, f"import os; print(' '.join(os.environ.get(n, '-') for n in {names.split()!r}))")


def test_a_spawn_through_the_rest_api_gets_a_server_pinned_to_its_mig_slice(stack: Stack) -> None:
    started = time.monotonic()
    server = _spawn_and_wait(stack, "alice")
    print(f"\nalice's server ready {time.monotonic() - started:.1f} s after the spawn request")
    job = _running(stack, server["state"]["job_id"])
    assert (job["user"], job["team"], job["kind"]) == ("alice", "fraud-ml", "notebook")
    assert job["placement"]["flavour"] == "h100-mig-3g"
    devices, job_id = _environment(stack, "alice", "CUDA_VISIBLE_DEVICES SHOAL_JOB_ID").split()
    assert devices.startswith("MIG-") and devices == job["placement"]["pods"][0]["devices"][0]
    assert job_id == job["job_id"]


def test_a_full_pool_makes_the_next_spawn_wait_with_position_and_reason_until_a_slice_frees(stack: Stack) -> None:
    _spawn_and_wait(stack, "bob")  # alice and bob now hold both slices
    stack.hub.login("carol").close()
    assert stack.hub.spawn("carol", profile="mig-3g").status_code == 202
    events = stack.hub.progress("carol", until=lambda e: "position" in e.get("message", ""), timeout=60)
    waiting = events[-1]["message"]
    assert "Waiting for a GPU slice; position 1 in team search's queue" in waiting, events
    assert any(reason in waiting for reason in ("WaitingForCapacity", "CohortFull")), waiting
    carol_job = stack.hub.server("carol")["state"]["job_id"]  # type: ignore[index]
    assert _job(stack, carol_job)["state"] == "PENDING"

    assert stack.hub.stop_server("alice").status_code in (202, 204)
    stack.hub.wait_ready("carol", timeout=90)
    alice_job = _job(stack, _find_job(stack, "alice"))
    assert alice_job["state"] in ("CANCELLED", "SUCCEEDED", "FAILED") and alice_job["gpu_hours_used"] > 0
    _running(stack, carol_job)


def _find_job(stack: Stack, user: str) -> str:
    reply = httpx.get(f"{stack.shoal_url}/v1/queues/fraud-ml", params={"state": "CANCELLED,SUCCEEDED,FAILED"},
                      headers={"Authorization": f"Bearer {stack.shoal_admin_token}"}, timeout=30)
    reply.raise_for_status()
    return str(next(j["job_id"] for j in reply.json()["jobs"] if j["user"] == user))


def test_the_reaper_with_its_clock_moved_stops_the_idle_server_and_keeps_the_busy_kernel(stack: Stack) -> None:
    # bob is idle; carol's kernel is busy with a long cell.
    carol = KernelClient(stack.hub.url, "carol", stack.hub.token)
    kernel = carol.start()
    carol.start_running(kernel, "import time; time.sleep(600)")
    wait_for(lambda: any(k["execution_state"] == "busy" for k in carol.kernels()), timeout=30,
             what="carol's kernel busy")
    bob_job = stack.hub.server("bob")["state"]["job_id"]  # type: ignore[index]

    reaper = Reaper(hub_api_url=stack.hub.api, proxy_url=stack.hub.url, token=stack.hub.token,
                    scheduler=ShoalClientScheduler(stack.shoal_url, stack.shoal_admin_token),
                    limit=3600, clock=lambda: time.time() + 2 * 3600)

    async def sweep() -> list[Any]:
        try:
            return await reaper.cull_idle()
        finally:
            await reaper.close()

    decisions = {d.user: d for d in asyncio.run(sweep())}
    assert decisions["bob"].stopped and "idle for" in decisions["bob"].verdict.reason
    assert not decisions["carol"].stopped and decisions["carol"].verdict.reason == f"kernel {kernel} is busy"

    wait_for(lambda: stack.hub.server("bob") is None, timeout=60, what="bob's server stopped")
    assert stack.hub.server("carol")["ready"]  # type: ignore[index]
    job = _job(stack, bob_job)
    wait_for(lambda: _job(stack, bob_job)["state"] == "CANCELLED", timeout=30, what="bob's job cancelled")
    assert job["gpu_hours_used"] > 0  # the holding time is in the team's usage

    # bob is told why on his next spawn page
    browser = stack.hub.login("bob")
    page = browser.get("/hub/spawn/bob").text
    browser.close()
    assert "stopped by the idle reaper: idle for" in page
    stack.hub.stop_server("carol")
    wait_for(lambda: stack.hub.server("carol") is None, timeout=60, what="carol's server stopped")
