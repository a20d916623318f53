"""``Reaper.cull_idle`` over the hub's REST API, served here through httpx's transport seam: which servers are
judged, what is cancelled with which reason, what is stopped, and that one broken server does not stop the sweep."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import httpx

from hub_spawner.reaper import Reaper
from scheduler_core.model import JobSpec

from .fakes import FakeScheduler

NOW = 1_800_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def server(job_id: str, last_activity: float, **extra: Any) -> dict[str, Any]:
    return {"ready": True, "pending": None, "url": f"/user/{job_id}/", "started": iso(NOW - 5 * 3600),
            "last_activity": iso(last_activity), "state": {"job_id": job_id}, **extra}


class Hub:
    """The hub's users API (two pages) and each server's kernels API, as JupyterHub and Jupyter Server answer."""

    def __init__(self) -> None:
        self.pages = [
            [{"name": "idle-ann", "servers": {"": server("j1", NOW - 7200)}},
             {"name": "busy-bo", "servers": {"": server("j2", NOW - 7200)}}],
            [{"name": "broken-cy", "servers": {"": server("j3", NOW - 7200)}},
             {"name": "recent-di", "servers": {"": server("j4", NOW - 60)}},
             {"name": "gpu-ed", "servers": {"": server("j5", NOW - 7200)}},
             {"name": "spawning-fi", "servers": {"": server("j6", NOW - 7200, ready=False, pending="spawn")}}],
        ]
        self.kernels = {
            "j1": [{"id": "k1", "execution_state": "idle", "last_activity": iso(NOW - 7000)}],
            "j2": [{"id": "k2", "execution_state": "busy", "last_activity": iso(NOW - 7000)}],
            "j4": [], "j5": [],
        }
        self.deleted: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "token reaper-token"
        path = request.url.path
        if path == "/hub/api/users":
            offset = int(request.url.params.get("offset", "0"))
            page = self.pages[offset]
            following = {"offset": 1, "limit": 2, "url": "http://hub/hub/api/users?state=ready&offset=1"}
            return httpx.Response(200, json={"items": page, "_pagination": {
                "offset": offset, "limit": 2, "total": 6, "next": following if offset == 0 else None}})
        if path.endswith("/api/kernels"):
            job = path.split("/")[2]
            if job == "j3":
                return httpx.Response(502, text="bad gateway")
            return httpx.Response(200, json=self.kernels[job])
        if request.method == "DELETE":
            self.deleted.append(path)
            return httpx.Response(204)
        return httpx.Response(404)


def test_one_sweep_stops_only_the_servers_quiet_by_every_measure() -> None:
    hub = Hub()
    scheduler = FakeScheduler(pool={"h100-mig-1g": 10}, utilization={"mig-a-n00": 0.0},
                              devices={"j5": ("GPU-busy",)})

    async def scenario() -> dict[str, Any]:
        for n in range(1, 7):  # jobs j1..j6 running on mig-a-n00
            await scheduler.submit(JobSpec(name=f"nb{n}", team="fraud-ml", kind="notebook",
                                           flavour="h100-mig-1g", command=["x"], preemptible=False),
                                   idempotency_key=str(n))

        class Gpu:
            def utilisation(self, devices: Any) -> float | None:
                return 93.0 if "GPU-busy" in devices else None

        reaper = Reaper(hub_api_url="http://hub/hub/api", proxy_url="http://proxy", token="reaper-token",
                        scheduler=scheduler, gpu=Gpu(), limit=3600, clock=lambda: NOW,
                        http=httpx.AsyncClient(transport=httpx.MockTransport(hub.handle)))
        decisions = await reaper.cull_idle()
        await reaper.http.aclose()
        return {d.user: d for d in decisions}

    decisions = asyncio.run(scenario())
    assert set(decisions) == {"idle-ann", "busy-bo", "broken-cy", "recent-di", "gpu-ed"}  # spawning-fi skipped
    assert [u for u, d in decisions.items() if d.stopped] == ["idle-ann"]
    assert decisions["busy-bo"].verdict.reason == "kernel k2 is busy"
    assert "did not say" in decisions["broken-cy"].verdict.reason
    assert "(hub)" in decisions["recent-di"].verdict.reason
    assert decisions["gpu-ed"].verdict.reason == "GPU busy (93 %)"
    assert hub.deleted == ["/hub/api/users/idle-ann/server"]
    reason = decisions["idle-ann"].verdict.reason
    assert reason.startswith("idle for 1 h 5") and "no hub, kernel or GPU activity" in reason
    assert scheduler.cancel_reasons == {"j1": f"stopped by the idle reaper: {reason}"}
    # The servers it keeps have their idle clocks told to the scheduler (estimated starts of waiting notebooks
    # count on them): a recent one from its last activity, busy ones as no clock, an unreadable one not at all.
    assert scheduler.idle_clocks == {"j4": (NOW - 60, 3600), "j2": (None, None), "j5": (None, None)}


def test_a_notebook_on_borrowed_slices_is_reaped_after_the_shorter_borrowed_limit() -> None:
    """Notebooks may borrow because they are reclaimable when idle: 20 quiet minutes stop one on borrowed slices
    (limit 10 min), and keep one within its team's quota (limit 1 h)."""
    hub = Hub()
    hub.pages = [[{"name": "lent-gus", "servers": {"": server("j1", NOW - 1200)}}],
                 [{"name": "own-hal", "servers": {"": server("j2", NOW - 1200)}}]]
    hub.kernels = {"j1": [{"id": "k1", "execution_state": "idle", "last_activity": iso(NOW - 1200)}],
                   "j2": [{"id": "k2", "execution_state": "idle", "last_activity": iso(NOW - 1200)}]}
    scheduler = FakeScheduler(pool={"h100-mig-1g": 10}, borrowed={"j1"})

    async def scenario() -> dict[str, Any]:
        for n in (1, 2):
            await scheduler.submit(JobSpec(name=f"nb{n}", team="fraud-ml", kind="notebook",
                                           flavour="h100-mig-1g", command=["x"], preemptible=False),
                                   idempotency_key=str(n))
        reaper = Reaper(hub_api_url="http://hub/hub/api", proxy_url="http://proxy", token="reaper-token",
                        scheduler=scheduler, limit=3600, borrowed_limit=600, clock=lambda: NOW,
                        http=httpx.AsyncClient(transport=httpx.MockTransport(hub.handle)))
        decisions = await reaper.cull_idle()
        await reaper.http.aclose()
        return {d.user: d for d in decisions}

    decisions = asyncio.run(scenario())
    assert {u: d.stopped for u, d in decisions.items()} == {"lent-gus": True, "own-hal": False}
    assert hub.deleted == ["/hub/api/users/lent-gus/server"]
    assert "(limit 10 min on slices borrowed from another team)" in decisions["lent-gus"].verdict.reason
    assert scheduler.cancel_reasons["j1"].endswith(decisions["lent-gus"].verdict.reason)
    assert scheduler.idle_clocks == {"j2": (NOW - 1200, 3600)}
