"""Tornado handlers: decode the request, authenticate, run the service in a worker thread, encode the answer.

Thin on purpose: who may do what and what is valid live in ``ApiService``; how errors look lives in ``api.errors``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import date, datetime, time as dtime, timezone
from typing import Any, TypeVar

import tornado.web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel

from ..auth.tokens import Identity
from ..errors import NotFound, ShoalError, StoreUnavailable, Unauthorized
from ..model.sweep import INT64_MAX
from ..schemas import FINISHED_STATES, CancelRequest, IdleClockRequest, LogChunk
from ..store.health import HealthView
from ..store.records import JobState
from . import body
from .auth import Authenticator, CookieAuthenticator, bearer_token
from .errors import RETRY_AFTER_S, BadRequest, error_body, plain_error, status_of
from .logs import LogReader
from .service import ACTIVE_STATES, MAX_EVENTS, ApiService
from .sweeps import parse

log = logging.getLogger("shoal.api")
T = TypeVar("T")
_MAX_KEY = 255
_READS = ("GET", "HEAD")


@dataclass(frozen=True)
class ApiContext:
    service: ApiService
    authenticator: Authenticator
    pool: Executor
    write_pool: Executor
    registry: CollectorRegistry
    openapi: dict[str, Any]
    logs: LogReader | None = None
    cookies: CookieAuthenticator | None = None


class BaseHandler(tornado.web.RequestHandler):
    """JSON in, JSON out; every error as ``{"error": {...}}``."""

    ctx: ApiContext
    identity: Identity
    requires_auth = True

    def initialize(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")

    async def prepare(self) -> None:
        if not self.requires_auth:
            return
        token = bearer_token(self.request.headers.get("Authorization"))
        if token is None and self.ctx.cookies is not None and self.request.method in _READS:
            identity = await self.ctx.cookies.from_cookie(self)
            if identity is not None:
                self.identity = identity
                return
        if token is None:
            raise Unauthorized("missing bearer token: send 'Authorization: Bearer <token>' "
                               "(create one with 'shoal token create')")
        identity = await self.ctx.authenticator.authenticate(token)
        if identity is None:
            raise Unauthorized("this token is not valid (unknown or revoked)")
        self.identity = identity

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking service call that only reads in the worker pool, so the event loop keeps serving."""
        return await asyncio.get_running_loop().run_in_executor(self.ctx.pool, lambda: fn(*args, **kwargs))

    async def call_write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a call that writes in the write pool: one thread for SQLite, whose writers would otherwise queue
        on its file lock by sleeping and retrying (a 2 s tail at a few hundred submissions a second)."""
        return await asyncio.get_running_loop().run_in_executor(self.ctx.write_pool, lambda: fn(*args, **kwargs))

    def send(self, body: BaseModel, status: int = 200) -> None:
        self.set_status(status)
        self.finish(body.model_dump_json())

    # -- request parsing ----------------------------------------------------------------------------------------
    def json_body(self) -> Any:
        """The decoded body, checked for what no field can take (``api.body``)."""
        return body.decode(self.request.body)

    def int_arg(self, name: str, default: int | None = None, *, minimum: int = 0,
                maximum: int = INT64_MAX) -> int | None:
        """A whole-number query parameter within ``[minimum, maximum]`` (by default a non-negative int64: what
        the store's integer columns hold)."""
        value = self.get_query_argument(name, None)
        if value is None or value == "":
            return default
        if not (value.isascii() and value.lstrip("-").isdigit()) or len(value) > 20:
            raise BadRequest(f"query parameter {name} must be a whole number from {minimum} to {maximum}, got "
                             f"{value[:40]!r}", fields={name: "expected a whole number"})
        number = int(value)
        if not minimum <= number <= maximum:
            raise BadRequest(f"query parameter {name} must be from {minimum} to {maximum}, got {number}",
                             fields={name: f"must be from {minimum} to {maximum}"})
        return number

    def time_arg(self, name: str) -> float | None:
        """An ISO-8601 date or date-time (UTC when no offset is given) as epoch seconds."""
        value = self.get_query_argument(name, None)
        if value is None or value == "":
            return None
        return parse_time(value, name)

    def states_arg(self) -> tuple[JobState, ...]:
        value = self.get_query_argument("state", None)
        if value is None or value == "":
            return ACTIVE_STATES
        if value.lower() == "all":
            return tuple(JobState)
        states = []
        for part in value.split(","):
            try:
                states.append(JobState(part.strip().upper()))
            except ValueError:
                raise BadRequest(f"unknown job state {part.strip()!r}; use one or more of "
                                 f"{', '.join(s.value for s in JobState)}, or 'all'",
                                 fields={"state": f"unknown state {part.strip()!r}"}) from None
        return tuple(states)

    # -- errors -------------------------------------------------------------------------------------------------
    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        error = exc_info[1] if exc_info else None
        if isinstance(error, ShoalError):
            self.set_status(status_of(error))
            if isinstance(error, Unauthorized):
                self.set_header("WWW-Authenticate", 'Bearer realm="shoal"')
            if isinstance(error, StoreUnavailable):
                self.set_header("Retry-After", str(RETRY_AFTER_S))
            reply = error_body(error)
        elif isinstance(error, tornado.web.HTTPError) and status_code < 500:
            if status_code == 405:
                self.set_header("Allow", ", ".join(self.allowed_methods()))
            reply = plain_error(_HTTP_CODES.get(status_code, "bad_request"),
                                error.log_message or self._reason or "bad request")
        else:
            reply = plain_error("internal", "internal error; the server log has the details")
        self.set_header("Content-Type", "application/json")
        self.finish(reply.model_dump_json())

    def allowed_methods(self) -> list[str]:
        """The methods this handler implements (tornado's defaults answer 405), for the ``Allow`` header."""
        return [method for method in self.SUPPORTED_METHODS
                if getattr(type(self), method.lower(), None) is not getattr(tornado.web.RequestHandler,
                                                                             method.lower(), None)]

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, ShoalError):
            log.info("%s %s -> %s: %s", self.request.method, self.request.uri, value.code, value)
            return
        super().log_exception(typ, value, tb)


_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


def parse_time(value: str, name: str) -> float:
    try:
        if len(value) == 10:
            moment = datetime.combine(date.fromisoformat(value), dtime(0), tzinfo=timezone.utc)
        else:
            moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    except (ValueError, OverflowError):
        raise BadRequest(f"query parameter {name} must be an ISO-8601 date or time such as 2026-10-27 or "
                         f"2026-10-27T14:20:00Z, got {value!r}", fields={name: "expected an ISO-8601 date or time"}
                         ) from None


class JobsHandler(BaseHandler):
    async def post(self) -> None:
        key = self.request.headers.get("Idempotency-Key")
        if key is not None and not (0 < len(key) <= _MAX_KEY and key.isascii() and key.isprintable()):
            raise BadRequest(f"Idempotency-Key must be 1–{_MAX_KEY} printable ASCII characters",
                             fields={"Idempotency-Key": "1–255 printable ASCII characters"})
        payload = self.json_body()
        reply = await self.call_write(self.ctx.service.submit, self.identity, payload, idempotency_key=key)
        mount = self.request.path[:-len("/v1/jobs")]  # "" on the direct port, the hub service's prefix under it
        self.set_header("Location", f"{mount}/v1/jobs/{reply.job_id}")
        self.send(reply, 202)


class JobHandler(BaseHandler):
    async def get(self, job_id: str) -> None:
        self.send(await self.call(self.ctx.service.job, self.identity, job_id))


class JobLogsHandler(BaseHandler):
    """What one pod printed, from ``offset`` on. The job's state is read first: ``eof`` is only claimed for output
    read after the job was seen finished, so a follower never stops before the last line."""

    async def get(self, job_id: str) -> None:
        view = await self.call(self.ctx.service.job, self.identity, job_id)
        rank = self.int_arg("rank", 0)
        offset = self.int_arg("offset", 0)
        attempt = self.int_arg("attempt")
        assert rank is not None and offset is not None
        if rank >= view.spec.pods:
            raise BadRequest(f"job {job_id} has ranks 0 to {view.spec.pods - 1}, not {rank}",
                             fields={"rank": f"must be below {view.spec.pods}"})
        if self.ctx.logs is None:
            raise NotFound("this scheduler's executor keeps no pod logs it can serve")
        read = await self.call(self.ctx.logs.read, job_id, rank, offset, attempt=attempt)
        superseded = read.attempt is not None and read.latest is not None and read.attempt < read.latest
        self.send(LogChunk(job_id=job_id, rank=rank, attempt=read.attempt, latest_attempt=read.latest,
                           offset=offset, next_offset=read.next_offset, text=read.text,
                           eof=(view.state in FINISHED_STATES or superseded) and read.at_end))


class JobCancelHandler(BaseHandler):
    async def post(self, job_id: str) -> None:
        """An optional body ``{"reason": "..."}`` says why (at most 500 characters); it is kept with the job."""
        reason = ""
        if self.request.body.strip():
            reason = parse(CancelRequest, self.json_body(), "cancel request").reason.strip()
        self.send(await self.call_write(self.ctx.service.cancel, self.identity, job_id, reason), 202)


class JobCheckpointHandler(BaseHandler):
    async def post(self, job_id: str) -> None:
        self.send(await self.call_write(self.ctx.service.checkpoint, self.identity, job_id), 202)


class JobIdleClockHandler(BaseHandler):
    async def post(self, job_id: str) -> None:
        """``{"last_activity": "2026-12-02T09:10:00Z", "idle_limit_s": 3600}``, or both null (busy)."""
        from .sweeps import parse
        request = parse(IdleClockRequest, self.json_body(), "idle clock")
        self.send(await self.call_write(self.ctx.service.idle_clock, self.identity, job_id, request))


class QueuesHandler(BaseHandler):
    async def get(self) -> None:
        self.send(await self.call(self.ctx.service.queues, self.identity, self.states_arg()))


class QueueHandler(BaseHandler):
    async def get(self, team: str) -> None:
        self.send(await self.call(self.ctx.service.queue, self.identity, team, self.states_arg()))


class QuotaHandler(BaseHandler):
    async def get(self, team: str) -> None:
        self.send(await self.call(self.ctx.service.quota, self.identity, team))


class NodesHandler(BaseHandler):
    async def get(self) -> None:
        self.send(await self.call(self.ctx.service.nodes, self.identity))


class EventsHandler(BaseHandler):
    async def get(self) -> None:
        job_id = self.get_query_argument("job_id", None) or None
        after = self.int_arg("after")
        limit = self.int_arg("limit", 100, minimum=1, maximum=MAX_EVENTS)
        assert limit is not None
        self.send(await self.call(self.ctx.service.events, self.identity, job_id=job_id, after=after, limit=limit))


class UsageHandler(BaseHandler):
    async def get(self) -> None:
        team = self.get_query_argument("team", None) or None
        since, until = self.time_arg("since"), self.time_arg("until")
        if since is not None and until is not None and until <= since:
            raise BadRequest("until must be after since", fields={"until": "must be after since"})
        self.send(await self.call(self.ctx.service.usage, self.identity, team=team, since=since, until=until))


class WhoAmIHandler(BaseHandler):
    async def get(self) -> None:
        self.send(self.ctx.service.whoami(self.identity))


class OpenApiHandler(BaseHandler):
    requires_auth = False

    def get(self) -> None:
        self.finish(json.dumps(self.ctx.openapi))


class HealthHandler(BaseHandler):
    """``/healthz``: is this server well (200) or not (503)? Not well while its store cannot write: the last
    write, the API's or the controller's, failed (``Store.health``); it says why and since when."""

    requires_auth = False

    def get(self) -> None:
        self._answer(self.ctx.service.store.health.view())

    def _answer(self, view: HealthView) -> None:
        if not view.writable:
            self.set_status(503)
            self.set_header("Retry-After", str(RETRY_AFTER_S))
        self.finish(json.dumps({"ok": view.writable, "store": "ok" if view.writable else "unwritable",
                                "problem": view.problem, "since": view.since}))


class ReadyHandler(HealthHandler):
    """``/readyz``: may a load balancer send requests here? 200 only when a probe write to the store succeeds
    now (not just the last one), so a server whose disk filled a second ago is taken out before it answers 503s."""

    async def get(self) -> None:  # type: ignore[override]
        try:
            await self.call_write(self.ctx.service.store.probe_write)
        except StoreUnavailable:
            pass
        self._answer(self.ctx.service.store.health.view())


class MetricsHandler(BaseHandler):
    """Prometheus scrapes without a token, as is usual; the gauges hold no team's secrets."""

    requires_auth = False

    async def get(self) -> None:
        payload = await self.call(generate_latest, self.ctx.registry)
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(payload)


class NotFoundHandler(BaseHandler):
    requires_auth = False

    def prepare(self) -> None:  # type: ignore[override]
        raise tornado.web.HTTPError(404, f"no such endpoint: {self.request.method} {self.request.path}")
