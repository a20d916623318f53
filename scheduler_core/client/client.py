"""``ShoalClient`` and ``AsyncShoalClient``: the typed SDK every other part of Shoal uses to reach the scheduler.

Both are thin over httpx, and share one description of each call (``_calls``), so they cannot drift apart.
The transport is httpx's own seam: pass ``transport=`` (e.g. ``httpx.MockTransport``) to run a client without a
network, or leave it out to talk HTTP to ``url``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from ..model.job import JobSpec
from ..model.sweep import Choice, SweepSpec
from ..schemas import (FINISHED_STATES, FINISHED_SWEEP_STATES, ErrorResponse, EventList, JobView, LogChunk, NodeList,
                       NodeView, QueueList, QueueView, QuotaView, ReportResponse, SubmitResponse, SweepList, SweepView,
                       TrialList, TrialView, UsageReport, WhoAmI)
from .config import ClientConfig, config_path
from .errors import ApiError, ApiUnavailable, AuthenticationFailed, for_status

M = TypeVar("M", bound=BaseModel)
#: What ``node_action`` may do to a node (``POST /v1/nodes/{node}:ACTION``).
NODE_ACTIONS = ("fail", "drain", "repair")
When = datetime | date | str
Spec = JobSpec | Mapping[str, Any]
SweepBody = SweepSpec | Mapping[str, Any]


@dataclass(frozen=True)
class _Call(Generic[M]):
    method: str
    path: str
    model: type[M]
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def _job(job_id: str) -> str:
    return "/v1/jobs/" + quote(job_id, safe="")


def _sweep(sweep_id: str) -> str:
    return "/v1/sweeps/" + quote(sweep_id, safe="")


def _when(value: When) -> str:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def _states(states: str | list[str] | tuple[str, ...] | None) -> dict[str, str]:
    if states is None:
        return {}
    return {"state": states if isinstance(states, str) else ",".join(states)}


class _calls:
    """One place that says what each API call is: method, path, parameters and the body type it returns."""

    @staticmethod
    def submit(spec: Spec, idempotency_key: str | None) -> _Call[SubmitResponse]:
        body = spec.model_dump(mode="json") if isinstance(spec, JobSpec) else dict(spec)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return _Call("POST", "/v1/jobs", SubmitResponse, body=body, headers=headers)

    @staticmethod
    def job(job_id: str) -> _Call[JobView]:
        return _Call("GET", _job(job_id), JobView)

    @staticmethod
    def cancel(job_id: str, reason: str | None = None) -> _Call[JobView]:
        return _Call("POST", _job(job_id) + ":cancel", JobView, body={"reason": reason} if reason else None)

    @staticmethod
    def checkpoint(job_id: str) -> _Call[JobView]:
        return _Call("POST", _job(job_id) + ":checkpoint", JobView)

    @staticmethod
    def idle_clock(job_id: str, last_activity: float | None, idle_limit_s: float | None) -> _Call[JobView]:
        when = None if last_activity is None else datetime.fromtimestamp(last_activity, timezone.utc).isoformat()
        return _Call("POST", _job(job_id) + ":idle", JobView,
                     body={"last_activity": when, "idle_limit_s": idle_limit_s if when is not None else None})

    @staticmethod
    def logs(job_id: str, rank: int, offset: int, attempt: int | None) -> _Call[LogChunk]:
        params = {"rank": str(rank), "offset": str(offset)}
        if attempt is not None:
            params["attempt"] = str(attempt)
        return _Call("GET", _job(job_id) + "/logs", LogChunk, params=params)

    @staticmethod
    def queue(team: str, states: str | list[str] | tuple[str, ...] | None) -> _Call[QueueView]:
        return _Call("GET", "/v1/queues/" + quote(team, safe=""), QueueView, params=_states(states))

    @staticmethod
    def queues(states: str | list[str] | tuple[str, ...] | None) -> _Call[QueueList]:
        return _Call("GET", "/v1/queues", QueueList, params=_states(states))

    @staticmethod
    def quota(team: str) -> _Call[QuotaView]:
        return _Call("GET", f"/v1/teams/{quote(team, safe='')}/quota", QuotaView)

    @staticmethod
    def nodes() -> _Call[NodeList]:
        return _Call("GET", "/v1/nodes", NodeList)

    @staticmethod
    def node_action(name: str, action: str, reason: str | None) -> _Call[NodeView]:
        if action not in NODE_ACTIONS:
            raise ValueError(f"unknown node action {action!r}; use one of: {', '.join(NODE_ACTIONS)}")
        return _Call("POST", f"/v1/nodes/{quote(name, safe='')}:{action}", NodeView,
                     body={"reason": reason} if reason else None)

    @staticmethod
    def events(job_id: str | None, after: int | None, limit: int | None) -> _Call[EventList]:
        params = {k: str(v) for k, v in (("job_id", job_id), ("after", after), ("limit", limit)) if v is not None}
        return _Call("GET", "/v1/events", EventList, params=params)

    @staticmethod
    def usage(team: str | None, since: When | None, until: When | None) -> _Call[UsageReport]:
        params = {"team": team} if team else {}
        if since is not None:
            params["since"] = _when(since)
        if until is not None:
            params["until"] = _when(until)
        return _Call("GET", "/v1/usage", UsageReport, params=params)

    @staticmethod
    def whoami() -> _Call[WhoAmI]:
        return _Call("GET", "/v1/whoami", WhoAmI)

    # -- sweeps ----------------------------------------------------------------------------------------------
    @staticmethod
    def create_sweep(spec: SweepBody, idempotency_key: str | None) -> _Call[SweepView]:
        body = spec.model_dump(mode="json") if isinstance(spec, SweepSpec) else dict(spec)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return _Call("POST", "/v1/sweeps", SweepView, body=body, headers=headers)

    @staticmethod
    def sweep(sweep_id: str) -> _Call[SweepView]:
        return _Call("GET", _sweep(sweep_id), SweepView)

    @staticmethod
    def sweeps(states: str | list[str] | tuple[str, ...] | None, team: str | None,
               limit: int | None) -> _Call[SweepList]:
        params = _states(states)
        if team:
            params["team"] = team
        if limit is not None:
            params["limit"] = str(limit)
        return _Call("GET", "/v1/sweeps", SweepList, params=params)

    @staticmethod
    def cancel_sweep(sweep_id: str) -> _Call[SweepView]:
        return _Call("POST", _sweep(sweep_id) + ":cancel", SweepView)

    @staticmethod
    def trials(sweep_id: str) -> _Call[TrialList]:
        return _Call("GET", _sweep(sweep_id) + "/trials", TrialList)

    @staticmethod
    def add_trial(sweep_id: str, number: int, params: Mapping[str, Choice],
                  env: Mapping[str, str] | None) -> _Call[TrialView]:
        body = {"number": number, "params": dict(params), "env": dict(env or {})}
        return _Call("POST", _sweep(sweep_id) + "/trials", TrialView, body=body)

    @staticmethod
    def finish_trial(sweep_id: str, number: int, state: str, value: float | None,
                     message: str) -> _Call[TrialView]:
        body = {"state": state, "value": value, "message": message}
        return _Call("POST", f"{_sweep(sweep_id)}/trials/{number}:finish", TrialView, body=body)

    @staticmethod
    def finish_sweep(sweep_id: str, state: str, message: str) -> _Call[SweepView]:
        return _Call("POST", _sweep(sweep_id) + ":finish", SweepView, body={"state": state, "message": message})

    @staticmethod
    def report(job_id: str, step: int | None, value: float, final: bool) -> _Call[ReportResponse]:
        body: dict[str, Any] = {"value": value, "final": final}
        if step is not None:
            body["step"] = step
        return _Call("POST", _job(job_id) + ":report", ReportResponse, body=body)


def _decode(call: _Call[M], response: httpx.Response) -> M:
    if response.is_success:
        try:
            return call.model.model_validate_json(response.content)
        except ValidationError as exc:
            raise ApiError(response.status_code, "bad_response",
                           f"{call.method} {call.path}: the server's answer is not a {call.model.__name__}: "
                           f"{exc.errors()[0]['msg']}") from None
    try:
        error = ErrorResponse.model_validate_json(response.content).error
        code, message, fields = error.code, error.message, error.fields
    except ValidationError:
        code, message, fields = "http_error", f"HTTP {response.status_code} from {call.method} {call.path}", {}
    raise for_status(response.status_code)(response.status_code, code, message, fields)


def _headers(config: ClientConfig) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "shoal-client"}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    return headers


def _unavailable(config: ClientConfig, exc: Exception) -> ApiUnavailable:
    return ApiUnavailable(f"cannot reach the Shoal API at {config.url}: {exc or type(exc).__name__} "
                          f"(the URL came from {config.url_source.value}; is 'shoal up' running? is SHOAL_URL right?)")


def _checked(config: ClientConfig, call: _Call[M], response: httpx.Response) -> M:
    """``_decode``, with a 401 for a client that found no token at all saying where it looked."""
    try:
        return _decode(call, response)
    except AuthenticationFailed as exc:
        if config.token is not None:
            raise
        raise AuthenticationFailed(exc.status, exc.code, f"{exc.message}: no token found (set SHOAL_TOKEN, or "
                                   f"write token = \"...\" to {config_path()}; inside JupyterHub the server's "
                                   f"JUPYTERHUB_API_TOKEN is used)", exc.fields) from None


class ShoalClient:
    """Synchronous client. Without ``url``/``token`` it finds them as ``config.discover`` says: ``SHOAL_URL``/
    ``SHOAL_TOKEN``, then the JupyterHub server's environment, then the config file."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 transport: httpx.BaseTransport | None = None, timeout: float = 30.0) -> None:
        self.config = ClientConfig.resolve(url, token)
        self._http = httpx.Client(base_url=self.config.url, headers=_headers(self.config), timeout=timeout,
                                  transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ShoalClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, call: _Call[M]) -> M:
        try:
            response = self._http.request(call.method, call.path, params=call.params or None,
                                          json=call.body, headers=call.headers or None)
        except httpx.TransportError as exc:
            raise _unavailable(self.config, exc) from None
        return _checked(self.config, call, response)

    def submit(self, spec: Spec, *, idempotency_key: str | None = None) -> SubmitResponse:
        return self._send(_calls.submit(spec, idempotency_key))

    def job(self, job_id: str) -> JobView:
        return self._send(_calls.job(job_id))

    def cancel(self, job_id: str, *, reason: str | None = None) -> JobView:
        return self._send(_calls.cancel(job_id, reason))

    def checkpoint(self, job_id: str) -> JobView:
        return self._send(_calls.checkpoint(job_id))

    def idle_clock(self, job_id: str, last_activity: float | None, idle_limit_s: float | None) -> JobView:
        """Report a running notebook's idle clock (the idle reaper does): last activity (epoch seconds) and the
        idle limit, or ``None``, ``None`` while it is busy."""
        return self._send(_calls.idle_clock(job_id, last_activity, idle_limit_s))

    def logs(self, job_id: str, *, rank: int = 0, offset: int = 0, attempt: int | None = None) -> LogChunk:
        """What pod ``rank`` printed from byte ``offset`` on, in ``attempt`` (default: the latest); read again
        from ``next_offset`` to follow it."""
        return self._send(_calls.logs(job_id, rank, offset, attempt))

    def queue(self, team: str, *, states: str | list[str] | None = None) -> QueueView:
        return self._send(_calls.queue(team, states))

    def queues(self, *, states: str | list[str] | None = None) -> QueueList:
        return self._send(_calls.queues(states))

    def quota(self, team: str) -> QuotaView:
        return self._send(_calls.quota(team))

    def nodes(self) -> NodeList:
        return self._send(_calls.nodes())

    def node_action(self, name: str, action: str, *, reason: str | None = None) -> NodeView:
        """``fail``, ``drain`` or ``repair`` node ``name`` (an admin token)."""
        return self._send(_calls.node_action(name, action, reason))

    def events(self, job_id: str | None = None, *, after: int | None = None, limit: int | None = None) -> EventList:
        return self._send(_calls.events(job_id, after, limit))

    def usage(self, *, team: str | None = None, since: When | None = None, until: When | None = None) -> UsageReport:
        return self._send(_calls.usage(team, since, until))

    def whoami(self) -> WhoAmI:
        return self._send(_calls.whoami())

    def wait(self, job_id: str, *, states: frozenset[str] | set[str] = FINISHED_STATES,
             timeout: float | None = None, interval: float = 1.0) -> JobView:
        """Poll until the job is in one of ``states`` (default: finished); ``TimeoutError`` after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = self.job(job_id)
            if view.state in states:
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {view.state} after {timeout:g} s")
            time.sleep(interval)

    # -- sweeps ----------------------------------------------------------------------------------------------
    def create_sweep(self, spec: SweepBody, *, idempotency_key: str | None = None) -> SweepView:
        return self._send(_calls.create_sweep(spec, idempotency_key))

    def sweep(self, sweep_id: str) -> SweepView:
        return self._send(_calls.sweep(sweep_id))

    def sweeps(self, *, states: str | list[str] | None = None, team: str | None = None,
               limit: int | None = None) -> SweepList:
        return self._send(_calls.sweeps(states, team, limit))

    def cancel_sweep(self, sweep_id: str) -> SweepView:
        return self._send(_calls.cancel_sweep(sweep_id))

    def trials(self, sweep_id: str) -> TrialList:
        return self._send(_calls.trials(sweep_id))

    def add_trial(self, sweep_id: str, number: int, params: Mapping[str, Choice], *,
                  env: Mapping[str, str] | None = None) -> TrialView:
        """Record trial ``number`` and submit its job (the sweep controller; needs an admin token)."""
        return self._send(_calls.add_trial(sweep_id, number, params, env))

    def finish_trial(self, sweep_id: str, number: int, state: str, *, value: float | None = None,
                     message: str = "") -> TrialView:
        return self._send(_calls.finish_trial(sweep_id, number, state, value, message))

    def finish_sweep(self, sweep_id: str, state: str, message: str = "") -> SweepView:
        return self._send(_calls.finish_sweep(sweep_id, state, message))

    def report(self, job_id: str, value: float, *, step: int | None = None, final: bool = False) -> ReportResponse:
        return self._send(_calls.report(job_id, step, value, final))

    def wait_sweep(self, sweep_id: str, *, timeout: float | None = None, interval: float = 1.0) -> SweepView:
        """Poll until the sweep has finished; ``TimeoutError`` after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = self.sweep(sweep_id)
            if view.state in FINISHED_SWEEP_STATES:
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"sweep {sweep_id} is still {view.state} after {timeout:g} s")
            time.sleep(interval)


class AsyncShoalClient:
    """The same calls as ``ShoalClient``, for event loops (the spawner, the sweep controller, widgets)."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 transport: httpx.AsyncBaseTransport | None = None, timeout: float = 30.0) -> None:
        self.config = ClientConfig.resolve(url, token)
        self._http = httpx.AsyncClient(base_url=self.config.url, headers=_headers(self.config), timeout=timeout,
                                       transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncShoalClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _send(self, call: _Call[M]) -> M:
        try:
            response = await self._http.request(call.method, call.path, params=call.params or None,
                                                json=call.body, headers=call.headers or None)
        except httpx.TransportError as exc:
            raise _unavailable(self.config, exc) from None
        return _checked(self.config, call, response)

    async def submit(self, spec: Spec, *, idempotency_key: str | None = None) -> SubmitResponse:
        return await self._send(_calls.submit(spec, idempotency_key))

    async def job(self, job_id: str) -> JobView:
        return await self._send(_calls.job(job_id))

    async def cancel(self, job_id: str, *, reason: str | None = None) -> JobView:
        return await self._send(_calls.cancel(job_id, reason))

    async def checkpoint(self, job_id: str) -> JobView:
        return await self._send(_calls.checkpoint(job_id))

    async def idle_clock(self, job_id: str, last_activity: float | None, idle_limit_s: float | None) -> JobView:
        return await self._send(_calls.idle_clock(job_id, last_activity, idle_limit_s))

    async def logs(self, job_id: str, *, rank: int = 0, offset: int = 0, attempt: int | None = None) -> LogChunk:
        return await self._send(_calls.logs(job_id, rank, offset, attempt))

    async def queue(self, team: str, *, states: str | list[str] | None = None) -> QueueView:
        return await self._send(_calls.queue(team, states))

    async def queues(self, *, states: str | list[str] | None = None) -> QueueList:
        return await self._send(_calls.queues(states))

    async def quota(self, team: str) -> QuotaView:
        return await self._send(_calls.quota(team))

    async def nodes(self) -> NodeList:
        return await self._send(_calls.nodes())

    async def node_action(self, name: str, action: str, *, reason: str | None = None) -> NodeView:
        """``fail``, ``drain`` or ``repair`` node ``name`` (an admin token)."""
        return await self._send(_calls.node_action(name, action, reason))

    async def events(self, job_id: str | None = None, *, after: int | None = None,
                     limit: int | None = None) -> EventList:
        return await self._send(_calls.events(job_id, after, limit))

    async def usage(self, *, team: str | None = None, since: When | None = None,
                    until: When | None = None) -> UsageReport:
        return await self._send(_calls.usage(team, since, until))

    async def whoami(self) -> WhoAmI:
        return await self._send(_calls.whoami())

    async def wait(self, job_id: str, *, states: frozenset[str] | set[str] = FINISHED_STATES,
                   timeout: float | None = None, interval: float = 1.0) -> JobView:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = await self.job(job_id)
            if view.state in states:
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {view.state} after {timeout:g} s")
            await asyncio.sleep(interval)

    # -- sweeps ----------------------------------------------------------------------------------------------
    async def create_sweep(self, spec: SweepBody, *, idempotency_key: str | None = None) -> SweepView:
        return await self._send(_calls.create_sweep(spec, idempotency_key))

    async def sweep(self, sweep_id: str) -> SweepView:
        return await self._send(_calls.sweep(sweep_id))

    async def sweeps(self, *, states: str | list[str] | None = None, team: str | None = None,
                     limit: int | None = None) -> SweepList:
        return await self._send(_calls.sweeps(states, team, limit))

    async def cancel_sweep(self, sweep_id: str) -> SweepView:
        return await self._send(_calls.cancel_sweep(sweep_id))

    async def trials(self, sweep_id: str) -> TrialList:
        return await self._send(_calls.trials(sweep_id))

    async def add_trial(self, sweep_id: str, number: int, params: Mapping[str, Choice], *,
                        env: Mapping[str, str] | None = None) -> TrialView:
        return await self._send(_calls.add_trial(sweep_id, number, params, env))

    async def finish_trial(self, sweep_id: str, number: int, state: str, *, value: float | None = None,
                           message: str = "") -> TrialView:
        return await self._send(_calls.finish_trial(sweep_id, number, state, value, message))

    async def finish_sweep(self, sweep_id: str, state: str, message: str = "") -> SweepView:
        return await self._send(_calls.finish_sweep(sweep_id, state, message))

    async def report(self, job_id: str, value: float, *, step: int | None = None,
                     final: bool = False) -> ReportResponse:
        return await self._send(_calls.report(job_id, step, value, final))
