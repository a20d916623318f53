"""``Reaper.cull_idle``: one sweep over every running server, through the hub's REST API only.

In the manner of jupyterhub-idle-culler: the hub lists servers with their activity and spawner state (the Shoal job
id); each server is asked for its kernels; the GPU figure comes from NVML or the scheduler; the pure ``is_idle``
decides. A server found idle first has its job cancelled with the reason (so the scheduler keeps it as the job's
message, and the spawn page tells the user why), then is stopped through the hub, which releases the slice. An error
with one server is logged and the sweep goes on. ``clock`` is the only source of time, so tests can move it.

A notebook on slices its team borrowed (the scheduler lets notebooks borrow because they are reclaimable when idle)
gets the shorter ``borrowed_limit``: the lender may want its slice back, and the scheduler never stops a notebook.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable
from urllib.parse import quote

import httpx

from ..scheduler import NotebookJob, NotebookScheduler, SchedulerRefused, SchedulerUnavailable
from .arbiter import KernelActivity, ServerActivity, Verdict, is_idle
from .gpu import GpuUtilisationSource

log = logging.getLogger("shoal.reaper")

PAGINATION = "application/jupyterhub-pagination+json"


def parse_time(value: str | None) -> float | None:
    """ISO-8601 (as the hub and Jupyter server write it, ``Z`` included) → epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Decision:
    user: str
    server_name: str
    job_id: str | None
    verdict: Verdict
    stopped: bool
    error: str = ""


@dataclass
class Reaper:
    """``hub_api_url`` like ``http://127.0.0.1:8081/hub/api``; ``proxy_url`` is where the servers' own APIs are
    reached (the hub's public URL). ``token`` needs the scopes in ``REAPER_SCOPES``."""

    hub_api_url: str
    proxy_url: str
    token: str
    scheduler: NotebookScheduler | None = None
    gpu: GpuUtilisationSource | None = None
    limit: float = 3600.0
    #: Idle limit of a notebook running on borrowed slices (the scheduler's ``admitted_as``).
    borrowed_limit: float = 600.0
    gpu_busy_percent: float = 5.0
    clock: Callable[[], float] = time.time
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=10.0))
    _gpu_last_busy: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    async def cull_idle(self) -> list[Decision]:
        """One sweep: judge every ready server, stop the idle ones. Returns what was decided, for logs and tests."""
        decisions: list[Decision] = []
        async for user in self._users():
            for server_name, server in (user.get("servers") or {}).items():
                if not server.get("ready") or server.get("pending"):
                    continue
                try:
                    decisions.append(await self._judge(user["name"], server_name, server))
                except Exception as exc:  # one broken server must not stop the sweep
                    log.exception("reaper: %s/%s: %s", user["name"], server_name, exc)
                    decisions.append(Decision(user["name"], server_name, None, Verdict(False, "error"), False,
                                              error=str(exc)))
        return decisions

    async def _users(self) -> Any:
        url: str | None = f"{self.hub_api_url}/users?state=ready"
        while url:
            reply = await self.http.get(url, headers={**self._headers, "Accept": PAGINATION})
            reply.raise_for_status()
            body = reply.json()
            if isinstance(body, list):  # a hub without pagination
                for user in body:
                    yield user
                return
            for user in body["items"]:
                yield user
            following = (body.get("_pagination") or {}).get("next")
            url = following["url"] if following else None

    async def _judge(self, user: str, server_name: str, server: dict[str, Any]) -> Decision:
        now = self.clock()
        state = server.get("state") or {}
        job_id = state.get("job_id")
        kernels = await self._kernels(server["url"])
        job = await self._job(job_id)
        gpu_now = await self._gpu_utilization(job)
        key = (user, server_name)
        if gpu_now is not None and gpu_now >= self.gpu_busy_percent:
            self._gpu_last_busy[key] = now
        activity = ServerActivity(
            user=user, server_name=server_name, started=parse_time(server.get("started")),
            hub_last_activity=parse_time(server.get("last_activity")), kernels=kernels,
            gpu_utilization=gpu_now, gpu_last_busy=self._gpu_last_busy.get(key))
        borrowed = job is not None and job.admitted_as == "borrowed"
        verdict = is_idle(activity, now, self.borrowed_limit if borrowed else self.limit, self.gpu_busy_percent,
                          on_borrowed=borrowed)
        if not verdict.idle:
            log.debug("reaper: keeping %s/%s: %s", user, server_name, verdict.reason)
            await self._report_idle_clock(job, verdict, self.borrowed_limit if borrowed else self.limit)
            return Decision(user, server_name, job_id, verdict, stopped=False)
        log.info("reaper: stopping %s/%s (job %s): %s", user, server_name, job_id, verdict.reason)
        if job_id and self.scheduler is not None:
            try:
                await self.scheduler.cancel(job_id, reason=f"stopped by the idle reaper: {verdict.reason}")
            except (SchedulerRefused, SchedulerUnavailable) as exc:
                log.warning("reaper: cancel of %s failed (%s); stopping through the hub anyway", job_id, exc)
        await self._stop(user, server_name)
        self._gpu_last_busy.pop(key, None)
        return Decision(user, server_name, job_id, verdict, stopped=True)

    async def _report_idle_clock(self, job: NotebookJob | None, verdict: Verdict, limit: float) -> None:
        """Tell the scheduler when this notebook frees its slice if it stays idle (last activity + limit), or
        that no clock runs (busy), so the spawn page of a notebook waiting for a slice is honest. Nothing is
        said when the server could not be read; a refusal is logged and the sweep goes on."""
        if job is None or self.scheduler is None or not job.holds_slice:
            return
        if verdict.busy:
            since, idle_limit = None, None
        elif verdict.last_activity is not None:
            since, idle_limit = verdict.last_activity, limit
        else:
            return
        try:
            await self.scheduler.report_idle_clock(job.id, since, idle_limit)
        except (SchedulerRefused, SchedulerUnavailable) as exc:
            log.warning("reaper: could not report the idle clock of %s: %s", job.id, exc)

    async def _kernels(self, server_url: str) -> tuple[KernelActivity, ...] | None:
        try:
            reply = await self.http.get(f"{self.proxy_url.rstrip('/')}{server_url}api/kernels",
                                        headers=self._headers)
        except httpx.HTTPError as exc:
            log.warning("reaper: %s did not answer: %s", server_url, exc)
            return None
        if reply.status_code != 200:
            log.warning("reaper: %sapi/kernels answered %d", server_url, reply.status_code)
            return None
        return tuple(KernelActivity(k["id"], k.get("execution_state", "unknown"), parse_time(k.get("last_activity")))
                     for k in reply.json())

    async def _job(self, job_id: str | None) -> NotebookJob | None:
        if not job_id or self.scheduler is None:
            return None
        try:
            return await self.scheduler.get(job_id)
        except (SchedulerRefused, SchedulerUnavailable):
            return None

    async def _gpu_utilization(self, job: NotebookJob | None) -> float | None:
        if job is None or self.scheduler is None:
            return None
        if self.gpu is not None and job.devices:
            figure = self.gpu.utilisation(job.devices)
            if figure is not None:
                return figure
        if job.node:
            try:
                return await self.scheduler.node_gpu_utilization(job.node)
            except (SchedulerRefused, SchedulerUnavailable):
                return None
        return None

    async def _stop(self, user: str, server_name: str) -> None:
        path = f"/users/{quote(user, safe='')}/server" if not server_name else \
            f"/users/{quote(user, safe='')}/servers/{quote(server_name, safe='')}"
        reply = await self.http.delete(f"{self.hub_api_url}{path}", headers=self._headers)
        if reply.status_code not in (202, 204):
            reply.raise_for_status()

    async def close(self) -> None:
        await self.http.aclose()
        if self.scheduler is not None:
            await self.scheduler.close()


#: What the reaper's hub role needs (``deploy/jupyterhub_config.py`` grants exactly these).
REAPER_SCOPES = ["list:users", "read:users:activity", "read:servers", "admin:server_state", "delete:servers",
                 "access:servers"]
