"""The dashboard's pages: tornado handlers that ask ``ApiService`` as the logged-in user and render a template.

Each handler is thin, as the API's are: who the user is comes from the hub (``DashboardHandler.prepare``), what
they may see is decided by ``ApiService`` exactly as for the API, and what a page shows is assembled by the pure
functions of ``figures``. A job or team the user may not read is a 404 (the API's 403 names the owner; a page does
not even say that it exists).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tornado.web
from jupyterhub.services.auth import HubOAuth, HubOAuthenticated, UserNotAllowed

from ..api.hub_auth import identity_from_hub_model
from ..api.logs import LogReader
from ..api.service import ApiService
from ..api.sweeps import SweepService
from ..auth.tokens import Identity
from ..errors import Forbidden, NotFound, ShoalError
from ..store.records import JobState
from . import figures

T = TypeVar("T")


@dataclass(frozen=True)
class DashboardContext:
    service: ApiService
    oauth: HubOAuth
    prefix: str
    admin_services: frozenset[str] = frozenset()
    logs: LogReader | None = None
    service_name: str = "shoal"

    @property
    def sweeps(self) -> SweepService:
        return SweepService(self.service)


class DashboardHandler(HubOAuthenticated, tornado.web.RequestHandler):  # type: ignore[misc]
    """A page for a user logged in through the hub; one who is not is sent to the hub's OAuth first."""

    dash: DashboardContext
    identity: Identity

    def initialize(self, dash: DashboardContext) -> None:
        self.dash = dash
        self.hub_auth = dash.oauth
        self._model: dict[str, Any] | None = None

    def get_current_user(self) -> dict[str, Any] | None:
        return self._model

    async def prepare(self) -> None:
        model = await self.hub_auth.get_user(self, sync=False)
        if model is not None:
            try:
                model = self.check_hub_user(model)
            except UserNotAllowed:
                raise tornado.web.HTTPError(403, "this hub login does not grant access to Shoal") from None
        self._model = model
        if model is None:
            if self.request.method in ("GET", "HEAD"):
                self.redirect(self.get_login_url())
                return
            raise tornado.web.HTTPError(403, "log in through the hub first")
        identity = identity_from_hub_model(model, service_name=self.dash.service_name, teams=self.dash.service.teams,
                                           admin_services=self.dash.admin_services)
        if identity is None:
            raise tornado.web.HTTPError(403, f"hub user {model.get('name')!r} is in no team of this cluster")
        self.identity = identity

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking ``ApiService`` call in a worker thread, so the event loop keeps serving. What the caller may
        not read is a 404: a page does not say that another team's job exists."""
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except (Forbidden, NotFound):
            raise tornado.web.HTTPError(404) from None

    def team_arg(self) -> str:
        """``?team=``: one of the user's own teams (any, for an admin); their first team by default."""
        team = self.get_query_argument("team", None) or self.identity.team
        if team not in self.dash.service.teams or not self.identity.may_act_on(team):
            raise tornado.web.HTTPError(404)
        return team

    def get_template_namespace(self) -> dict[str, Any]:
        namespace = super().get_template_namespace()
        now = time.time()
        namespace.update(prefix=self.dash.prefix, me=getattr(self, "identity", None), now=now,
                         when=lambda moment: figures.when(moment, now), duration=figures.duration)
        return namespace

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None))[1]
        if isinstance(error, ShoalError):
            message = str(error)
        elif isinstance(error, tornado.web.HTTPError) and status_code < 500:
            message = error.log_message or ("not found" if status_code == 404 else self._reason)
        else:
            message = "internal error; the scheduler's log has the details"
        self.render("error.html", status=status_code, message=message)


#: States in which a job holds its GPUs (admitted, starting, running, being stopped).
HOLDING = tuple(s for s in JobState if s.holds_units)


class TeamPage(DashboardHandler):
    """My team: who waits and why, what runs where, the quota and the last day's use."""

    @tornado.web.authenticated
    async def get(self) -> None:
        service, me = self.dash.service, self.identity
        team = self.team_arg()
        waiting = await self.call(service.queue, me, team, (JobState.PENDING,))
        holding = await self.call(service.queue, me, team, HOLDING)
        running = [await self.call(service.job, me, entry.job_id) for entry in holding.jobs]
        quota = await self.call(service.quota, me, team)
        since, until = figures.window(time.time())
        usage = await self.call(service.usage_series, me, team, since=since, until=until, step=figures.HOUR)
        plot = figures.usage_plot(usage, since, int((until - since) // figures.HOUR),
                                  title=f"GPU-hours of team {team}, last 24 h")
        teams = sorted(service.teams) if me.admin else sorted({me.team, *me.other_teams})
        self.render("team.html", team=team, teams=teams, waiting=waiting.jobs, running=running, quota=quota,
                    plot=plot)


class JobPage(DashboardHandler):
    """One job: its state, placement, restarts and checkpoints, its events, and each rank's log, live."""

    @tornado.web.authenticated
    async def get(self, job_id: str) -> None:
        service, me = self.dash.service, self.identity
        job = await self.call(service.job, me, job_id)
        events = await self.call(service.events, me, job_id=job_id, limit=500)
        checkpoints = await self.call(service.checkpoints, me, job_id)
        self.render("job.html", job=job, events=events.events, checkpoints=checkpoints,
                    logs=self.dash.logs is not None, restarts=[e for e in events.events if e.kind == "requeue"])


class CancelJob(DashboardHandler):
    """The cancel button: a form POST carrying the page's ``_xsrf`` (checked with the hub's cookie before the user
    is even identified), for the user's own jobs (an admin's: any)."""

    @tornado.web.authenticated
    async def post(self, job_id: str) -> None:
        service, me = self.dash.service, self.identity
        job = await self.call(service.job, me, job_id)
        if job.user != me.user and not me.admin:
            raise tornado.web.HTTPError(403, f"job {job_id} is {job.user}'s; only they (or an admin) cancel it here")
        await self.call(service.cancel, me, job_id, "from the dashboard")
        back = self.get_body_argument("next", "")
        self.redirect(back if back.startswith(self.dash.prefix) else f"{self.dash.prefix}jobs/{job_id}", status=303)


class ClusterPage(DashboardHandler):
    """The cluster: free GPUs beside the largest free shape per flavour, nodes by block and health, the MIG pool's
    slices, and the last day's utilisation."""

    @tornado.web.authenticated
    async def get(self) -> None:
        service, me = self.dash.service, self.identity
        shapes = await self.call(service.free_shapes)
        nodes = (await self.call(service.nodes, me)).nodes
        since, until = figures.window(time.time())
        used = await self.call(service.utilisation, since=since, until=until, step=figures.HOUR)
        capacity: dict[str, int] = {}
        for node in nodes:
            for flavour, units in node.capacity.items():
                capacity[flavour] = capacity.get(flavour, 0) + units
        self.render("cluster.html", shapes=shapes, capacity=capacity, blocks=figures.blocks(nodes),
                    mig=figures.mig_pool(nodes),
                    plot=figures.utilisation_plot(used, since, int((until - since) // figures.HOUR)))


class SweepsPage(DashboardHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        me = self.identity
        team = self.get_query_argument("team", None)
        if team is not None:
            team = self.team_arg()
        sweeps = await self.call(self.dash.sweeps.list, me, team=team)
        self.render("sweeps.html", sweeps=list(reversed(sweeps.sweeps)))


class SweepPage(DashboardHandler):
    @tornado.web.authenticated
    async def get(self, sweep_id: str) -> None:
        me = self.identity
        sweep = await self.call(self.dash.sweeps.get, me, sweep_id)
        trials = (await self.call(self.dash.sweeps.trials, me, sweep_id)).trials
        self.render("sweep.html", sweep=sweep, trials=trials,
                    plot=figures.objective_plot(trials, sweep.direction, sweep.objective))


_ID = r"([A-Za-z0-9][A-Za-z0-9_\-]{0,127})"


def dashboard_routes(dash: DashboardContext) -> list[tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]]:
    args = {"dash": dash}
    prefix = dash.prefix
    return [
        (prefix, TeamPage, args),
        (rf"{prefix}jobs/{_ID}", JobPage, args),
        (rf"{prefix}jobs/{_ID}/cancel", CancelJob, args),
        (rf"{prefix}cluster", ClusterPage, args),
        (rf"{prefix}sweeps", SweepsPage, args),
        (rf"{prefix}sweeps/{_ID}", SweepPage, args),
    ]
