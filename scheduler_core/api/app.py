"""Build the tornado ``Application`` of the REST API from its parts (the composition root passes them in)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import tornado.web
from prometheus_client import CollectorRegistry

from ..service.nodes import NodeAction, NodeFaults
from . import handlers as h
from . import sweep_handlers as sh
from .auth import Authenticator, CookieAuthenticator
from .logs import LogReader
from .metrics import make_registry
from .node_ops import NodeActionHandler, NodeOps
from .service import ApiService
from .sweeps import SweepService

_JOB = r"(?P<job_id>[A-Za-z0-9][A-Za-z0-9_\-]{0,127})"
_TEAM = r"(?P<team>[^/]+)"
_SWEEP = r"(?P<sweep_id>[A-Za-z0-9][A-Za-z0-9_\-]{0,127})"
_NUMBER = r"(?P<number>[0-9]{1,6})"
_NODE = r"(?P<node>[a-z0-9][a-z0-9\-]{0,62})"


def write_threads_for(database_url: str) -> int:
    """SQLite takes one writer at a time, so more threads would only queue on its lock; PostgreSQL commits
    concurrently, and a few writers hide its round trips."""
    return 1 if database_url.startswith("sqlite") else 4


Route = tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]


def make_app(service: ApiService, authenticator: Authenticator, *, read_threads: int = 8, write_threads: int = 1,
             registry: CollectorRegistry | None = None, logs: LogReader | None = None,
             mounts: Sequence[str] = ("",), cookies: CookieAuthenticator | None = None,
             extra_routes: Sequence[Route] = (), node_faults: NodeFaults | None = None,
             **settings: Any) -> tornado.web.Application:
    """The API on ``service``. Blocking store calls run in worker threads: ``read_threads`` for reads and
    ``write_threads`` for writes (1 suits SQLite, which takes one writer at a time; PostgreSQL takes more).
    ``registry`` is the Prometheus registry ``/metrics`` serves (default: one with the store's gauges); ``logs``
    reads pod output for ``/v1/jobs/{id}/logs`` (none: that endpoint answers 404); ``node_faults`` kills a failed
    node's pods (``POST /v1/nodes/{node}:fail``) where the executor cannot see that for itself (local processes).

    ``mounts`` are the path prefixes the same API answers under: ``""`` is the direct port's ``/v1/...``, and
    running as a JupyterHub service, ``/services/shoal`` is where the hub's proxy forwards (it keeps the prefix).
    ``cookies`` identifies a browser by the hub's OAuth cookie on reads (the dashboard polls a job's logs this
    way); ``extra_routes`` (the dashboard's pages) are served by the same process, after the API's."""
    from .openapi import document  # here, so `python -m scheduler_core.api.openapi` runs it exactly once

    ctx = h.ApiContext(
        service=service, authenticator=authenticator,
        pool=ThreadPoolExecutor(max_workers=read_threads, thread_name_prefix="shoal-api-read"),
        write_pool=ThreadPoolExecutor(max_workers=write_threads, thread_name_prefix="shoal-api-write"),
        registry=registry or make_registry(service.store), openapi=document(), logs=logs, cookies=cookies,
    )
    args = {"ctx": ctx}
    ops = NodeOps(service, node_faults)
    sweep_args = {"ctx": ctx, "sweeps": SweepService(service)}
    api: list[Route] = [
        (r"/v1/jobs", h.JobsHandler, args),
        (rf"/v1/jobs/{_JOB}:cancel", h.JobCancelHandler, args),
        (rf"/v1/jobs/{_JOB}:checkpoint", h.JobCheckpointHandler, args),
        (rf"/v1/jobs/{_JOB}:idle", h.JobIdleClockHandler, args),
        (rf"/v1/jobs/{_JOB}:report", sh.JobReportHandler, sweep_args),
        (rf"/v1/jobs/{_JOB}/logs", h.JobLogsHandler, args),
        (rf"/v1/jobs/{_JOB}", h.JobHandler, args),
        (r"/v1/sweeps", sh.SweepsHandler, sweep_args),
        (rf"/v1/sweeps/{_SWEEP}:cancel", sh.SweepCancelHandler, sweep_args),
        (rf"/v1/sweeps/{_SWEEP}:finish", sh.SweepFinishHandler, sweep_args),
        (rf"/v1/sweeps/{_SWEEP}/trials", sh.SweepTrialsHandler, sweep_args),
        (rf"/v1/sweeps/{_SWEEP}/trials/{_NUMBER}:finish", sh.SweepTrialFinishHandler, sweep_args),
        (rf"/v1/sweeps/{_SWEEP}", sh.SweepHandler, sweep_args),
        (r"/v1/queues", h.QueuesHandler, args),
        (rf"/v1/queues/{_TEAM}", h.QueueHandler, args),
        (rf"/v1/teams/{_TEAM}/quota", h.QuotaHandler, args),
        (r"/v1/nodes", h.NodesHandler, args),
        *[(rf"/v1/nodes/{_NODE}:{action.value}", NodeActionHandler, {"ctx": ctx, "ops": ops, "action": action})
          for action in NodeAction],
        (r"/v1/events", h.EventsHandler, args),
        (r"/v1/usage", h.UsageHandler, args),
        (r"/v1/whoami", h.WhoAmIHandler, args),
        (r"/v1/openapi.json", h.OpenApiHandler, args),
        (r"/healthz", h.HealthHandler, args),
        (r"/readyz", h.ReadyHandler, args),
        (r"/metrics", h.MetricsHandler, args),
    ]
    routes = [(mount.rstrip("/") + pattern, handler, kwargs) for mount in mounts for pattern, handler, kwargs in api]
    routes.extend(extra_routes)
    return tornado.web.Application(
        routes, default_handler_class=h.NotFoundHandler, default_handler_args=args,
        serve_traceback=False, **settings)
