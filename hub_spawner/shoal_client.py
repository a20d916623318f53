"""``ShoalClientScheduler``: the spawner's and the reaper's seam, over the client SDK (the only way in, DESIGN §2)."""

from __future__ import annotations

from scheduler_core.client import ApiError, ApiUnavailable, AsyncShoalClient
from scheduler_core.model import JobSpec
from scheduler_core.schemas import JobView

from .scheduler import NotebookJob, NotebookScheduler, RoomNow, SchedulerRefused, SchedulerUnavailable

#: Borrowing limit ``null`` means no limit of the team's own; the cohort's idle quota still bounds it.
UNLIMITED = 1 << 30


def notebook_job(view: JobView, stop_reason: str = "") -> NotebookJob:
    """Flatten the API's job view into what the spawner shows and decides on."""
    pod = view.placement.pods[0] if view.placement and view.placement.pods else None
    return NotebookJob(
        id=view.job_id, state=view.state, team=view.team,
        flavour=view.placement.flavour if view.placement else view.spec.flavour[0],
        reason=view.reason, reason_message=view.reason_message, queue_position=view.position,
        estimated_start=view.estimated_start.timestamp() if view.estimated_start else None,
        node=pod.node if pod else None, admitted_as=view.admitted_as, devices=tuple(pod.devices) if pod else (),
        exit_code=view.exit_code, message=stop_reason or view.message,
        submitted_at=view.submitted_at.timestamp(),
        started_at=view.started_at.timestamp() if view.started_at else None,
        finished_at=view.finished_at.timestamp() if view.finished_at else None,
        labels=dict(view.spec.labels),
    )


class ShoalClientScheduler(NotebookScheduler):
    def __init__(self, url: str, token: str | None, *, client: AsyncShoalClient | None = None) -> None:
        self._client = client or AsyncShoalClient(url, token)

    async def submit(self, spec: JobSpec, *, idempotency_key: str) -> NotebookJob:
        try:
            reply = await self._client.submit(spec, idempotency_key=idempotency_key)
            return await self.get(reply.job_id)
        except ApiUnavailable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        except ApiError as exc:
            raise SchedulerRefused(exc.code, exc.message, exc.fields, exc.status) from None

    async def get(self, job_id: str) -> NotebookJob:
        try:
            view = await self._client.job(job_id)
            reason = await self._stop_reason(job_id) if view.cancel_requested else ""
        except ApiUnavailable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        except ApiError as exc:
            raise SchedulerRefused(exc.code, exc.message, exc.fields, exc.status) from None
        return notebook_job(view, reason)

    async def _stop_reason(self, job_id: str) -> str:
        """The reason given with the first cancel of the job (the reaper's, when it was the reaper)."""
        events = await self._client.events(job_id)
        for event in events.events:
            if event.reason == "CancelRequested" and event.data.get("reason"):
                return str(event.data["reason"])
        return ""

    async def cancel(self, job_id: str, *, reason: str = "") -> NotebookJob:
        try:
            view = await self._client.cancel(job_id, reason=reason or None)
        except ApiUnavailable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        except ApiError as exc:
            if exc.status == 409:  # already ended: nothing to cancel
                return await self.get(job_id)
            raise SchedulerRefused(exc.code, exc.message, exc.fields, exc.status) from None
        return notebook_job(view)

    async def room_now(self, team: str) -> RoomNow:
        try:
            nodes = await self._client.nodes()
            quota = await self._client.quota(team)
        except ApiUnavailable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        except ApiError as exc:
            raise SchedulerRefused(exc.code, exc.message, exc.fields, exc.status) from None
        largest: dict[str, int] = {}
        for node in nodes.nodes:
            if node.health != "ready" or node.spare:
                continue
            for flavour, free in node.free.items():
                largest[flavour] = max(largest.get(flavour, 0), free)
        room = {q.flavour: q.nominal + (UNLIMITED if q.borrowing_limit is None else q.borrowing_limit) - q.used
                for q in quota.flavours}
        return RoomNow(largest_free=largest, quota_room=room)

    async def report_idle_clock(self, job_id: str, last_activity: float | None, idle_limit_s: float | None) -> None:
        try:
            await self._client.idle_clock(job_id, last_activity, idle_limit_s)
        except ApiUnavailable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        except ApiError as exc:
            raise SchedulerRefused(exc.code, exc.message, exc.fields, exc.status) from None

    async def node_gpu_utilization(self, node: str) -> float | None:
        try:
            nodes = await self._client.nodes()
        except ApiUnavailable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        except ApiError as exc:
            raise SchedulerRefused(exc.code, exc.message, exc.fields, exc.status) from None
        return next((n.gpu_utilization for n in nodes.nodes if n.name == node), None)

    async def close(self) -> None:
        await self._client.aclose()
