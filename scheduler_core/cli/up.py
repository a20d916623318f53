"""``shoal up``: the composition root. It alone builds the store, the executor, the controller and its live loop,
and the API, and wires them together (DESIGN §2).

Embedded defaults, so a laptop needs nothing installed: SQLite in the state directory, the demo cluster and teams,
and the local executor (each pod a process on this machine, logs in ``<state-dir>/logs``). The same command runs
against PostgreSQL with ``--db``, and on Kubernetes with ``--executor kubernetes`` (the nodes are then the cluster's
GPU nodes, and each pod a Kubernetes pod: docs/deploy.md). Stopping it (Ctrl-C) stops the API and the scheduler; running pods keep running,
and the next ``shoal up`` on the same state adopts them.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import secrets
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..auth.job_tokens import JobTokens
from ..config import load_cluster, load_teams
from ..kube.setup import KubeOptions, kube_options, options_from
from ..model.durations import parse_duration
from ..runtime.node_lifecycle import HealthConfig
from .hub import ADMIN_SERVICES, DEFAULT_USERS, SERVICE_NAME, SERVICE_PREFIX, HubProcess, HubSettings
from .state import DEFAULT_STATE_DIR, database_url, executor_dir, open_state, state_options

#: Marks that the first start already printed its admin token (tokens are kept only as hashes).
ADMIN_MARKER = "admin-token-created"


@dataclass(frozen=True)
class UpOptions:
    cluster: str
    teams: str
    state_dir: Path
    db_url: str | None
    host: str
    port: int
    tick_s: float
    min_run_time_s: float = 1800.0
    hub: HubOptions | None = None
    #: Run pods on Kubernetes instead of as local processes.
    kube: KubeOptions | None = None
    #: A JupyterHub that ``shoal up`` does not start (Zero to JupyterHub): its API, for hub tokens on Shoal's API.
    hub_api_url: str | None = None
    #: The node lifecycle's settings (``--heartbeat-limit``, ``--burnin-command``, ``--burnin-time-limit``).
    health: HealthConfig = HealthConfig()


@dataclass(frozen=True)
class HubOptions:
    """JupyterHub beside the scheduler (``--no-hub`` leaves it out): notebooks on MIG slices (DESIGN §4)."""

    url: str = "http://127.0.0.1:8000"
    api_port: int = 8081
    proxy_api_port: int = 8001
    users: Path = DEFAULT_USERS
    password: str | None = None
    extra_config: Path | None = None
    reaper_timeout: str = "1h"


def _store_flags(options: UpOptions) -> str:
    """The flags a store-side command needs to find this installation (nothing for the defaults)."""
    flags = []
    if options.state_dir != Path(DEFAULT_STATE_DIR):
        flags.append(f"--state-dir {shlex.quote(str(options.state_dir))}")
    if options.db_url:
        flags.append(f"--db {shlex.quote(options.db_url)}")
    return (" " + " ".join(flags)) if flags else ""


def _pod_environment() -> dict[str, str]:
    """What every pod starts with: this process's environment, with this interpreter's directory first on PATH so
    a job's ``python`` is the one Shoal runs in (and can import ``scheduler_core.jobkit``)."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


async def serve(options: UpOptions, *, announce: bool = True) -> None:
    """Start everything, serve until SIGINT/SIGTERM, then stop in order: API, scheduler, store."""
    from ..api import ApiService, ChainAuthenticator, TokenAuthenticator, make_app
    from ..api.app import write_threads_for
    from ..api.auth import Authenticator
    from ..api.hub_auth import HubAuthenticator
    from ..api.logs import LogReader, PodLogReader
    from ..api.metrics import CycleTimer, make_registry
    from ..api.server import favour_latency, listen
    from ..auth.tokens import Identity
    from ..controller import ControllerConfig
    from ..executor.local import LocalExecutor
    from ..policy.cadence import PlanEvery
    from ..policy.cycle import run_cycle
    from ..policy.snapshot import PolicyConfig
    from ..runtime.heap import freeze_start_up_heap
    from ..service.live import LiveConfig, LiveController
    from ..services import ServiceContext, start_services, stop_services

    favour_latency()
    from ..executor.base import Executor
    executor: Executor
    logs: LogReader
    checkpoint_root = str((options.state_dir / "checkpoints").resolve())
    if options.kube is not None:
        from ..kube.logs import KubePodLogReader
        from ..kube.setup import connect
        kube = connect(options.kube)
        nodes, executor = kube.nodes, kube.executor
        logs = KubePodLogReader(kube.executor.core.api_client, kube.executor.namespace)
        checkpoint_root = options.kube.checkpoint_root or checkpoint_root
    else:
        _, nodes = load_cluster(options.cluster)
        local = LocalExecutor(executor_dir(options.state_dir), nodes, env=_pod_environment())
        executor, logs = local, PodLogReader(local.state_dir / "logs")
    teams = load_teams(options.teams, nodes)
    options.state_dir.mkdir(parents=True, exist_ok=True)
    url = database_url(options.state_dir, options.db_url)
    store = open_state(options.state_dir, options.db_url, create=True)
    store.sync_nodes(nodes)
    store.sync_teams(teams.teams)
    policy_config = PolicyConfig(min_run_time_s=options.min_run_time_s)
    registry = make_registry(store)
    timer = CycleTimer(registry)
    live = LiveController(
        store, executor, PlanEvery(run_cycle), nodes=nodes, policy_config=policy_config,
        config=LiveConfig(tick_min_s=options.tick_s, tick_max_s=options.tick_s * 1.5),
        controller_config=ControllerConfig(checkpoint_root=checkpoint_root, health=options.health),
        on_step=lambda _report, seconds: timer.observe(seconds), job_tokens=JobTokens(store, time.time))
    service = ApiService(store, wake=live.wake, policy_config=policy_config)
    # Shoal's own tokens; running as a JupyterHub service, the hub's authenticator joins this chain: a notebook's
    # own hub token then submits for its user's team (the team is a hub group).
    chain: list[Authenticator] = [TokenAuthenticator(store)]
    hub_settings = _hub_settings(options) if options.hub is not None else None
    hub_api_url = hub_settings.hub_api_url if hub_settings is not None else options.hub_api_url
    under_hub: dict[str, Any] = {}
    if hub_api_url:
        hub_tokens = HubAuthenticator(hub_api_url, service_name=SERVICE_NAME, teams=lambda: service.teams,
                                      admin_services=ADMIN_SERVICES)
        chain.append(hub_tokens)
        # The hub's proxy forwards /services/shoal/ here, prefix kept: the same API answers below it.
        under_hub["mounts"] = ("", SERVICE_PREFIX)
        service_token = hub_settings.service_token if hub_settings is not None else os.environ.get(
            "SHOAL_HUB_SERVICE_TOKEN", "")
        if service_token:  # the service's OAuth client secret: browsers log in through the hub
            under_hub.update(_dashboard(service, hub_tokens, hub_api_url, service_token, options.state_dir, logs))
    authenticator = ChainAuthenticator(chain)
    # Operators fail nodes through the API; on local processes that kills the node's pods, from an executor
    # instance of the API's own (the controller's is stepped by one thread only).
    node_faults = None if options.kube is not None else LocalExecutor(executor_dir(options.state_dir), nodes)
    app = make_app(service, authenticator, write_threads=write_threads_for(url), registry=registry, logs=logs,
                   node_faults=node_faults, **under_hub)
    try:
        server, port = listen(app, options.host, options.port)
    except OSError as exc:
        store.dispose()
        if exc.errno == errno.EADDRINUSE:
            raise click.UsageError(f"port {options.port} on {options.host} is in use (another 'shoal up'?): "
                                   f"pass --port") from None
        raise
    admin_token = None
    marker = options.state_dir / ADMIN_MARKER
    if not marker.exists():
        admin_token = store.create_token(Identity("admin", teams.teams[0].name, admin=True), now=time.time(),
                                         note="created by the first 'shoal up'")
        marker.write_text(f"an admin token was printed by 'shoal up' at {time.ctime()}\n")
    freeze_start_up_heap()
    scheduler = asyncio.create_task(live.run())
    hub: HubProcess | None = None
    if hub_settings is not None:
        hub_settings = _with_api_url(hub_settings, options.host, port)
        hub = HubProcess(hub_settings)
        try:
            await asyncio.to_thread(hub.start)
        except BaseException:
            server.stop()
            live.stop()
            await scheduler
            executor.close()
            store.dispose()
            raise
    # Services built on the API (the sweep controller), found as `shoal.services` entry points; the core never
    # imports them. They act only while this process leads.
    services = start_services(ServiceContext(
        api_url=f"http://127.0.0.1:{port}" if options.host in ("0.0.0.0", "") else f"http://{options.host}:{port}",
        state_dir=options.state_dir, tokens=store, is_leader=lambda: live.is_leader))
    if announce:
        where = (f"pods run in namespace {options.kube.namespace} of the Kubernetes cluster"
                 if options.kube is not None else
                 f"pods run as local processes, logs in {executor_dir(options.state_dir)}/logs/JOB/ATTEMPT/rank-N.log")
        _announce(options, port, len(nodes), [t.name for t in teams.teams], admin_token, where)
        if hub_settings is not None:
            _announce_hub(hub_settings)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        click.echo("shoal: stopping (running jobs keep running; the next 'shoal up' adopts them)", err=True)
        await asyncio.to_thread(stop_services, services)
        if hub is not None:  # while the API still answers: the hub stops its notebooks, freeing the slices
            await asyncio.to_thread(hub.stop)
        server.stop()
        await server.close_all_connections()
        live.stop()
        await scheduler
        executor.close()
        store.dispose()


def _dashboard(service: Any, hub_tokens: Any, hub_api_url: str, service_token: str, state_dir: Path,
               logs: Any) -> dict[str, Any]:
    """``make_app``'s arguments for the dashboard at ``/services/shoal/`` and the hub's OAuth cookie on the API."""
    from ..dashboard.app import dashboard_app_arguments
    from ..dashboard.login import HubCookies, hub_oauth

    oauth = hub_oauth(hub_api_url=hub_api_url, service_name=SERVICE_NAME, service_token=service_token)
    return dashboard_app_arguments(service, oauth, HubCookies(oauth, hub_tokens),
                                   cookie_secret=_kept_secret(state_dir / "dashboard-cookie-secret"),
                                   admin_services=ADMIN_SERVICES, logs=logs, service_name=SERVICE_NAME)


def _kept_secret(path: Path) -> bytes:
    """A random secret kept (owner-only) in ``path``, so the dashboard's logins outlive a restart and every replica
    on a shared state directory signs cookies alike (the first to start writes it; the others read it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # another replica may be writing it this instant
            kept = path.read_bytes().strip()
            if kept:
                return kept
            time.sleep(0.1)
        raise click.UsageError(f"{path} is empty: delete it and start again") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(secret)
    return secret


def _hub_settings(options: UpOptions) -> HubSettings:
    assert options.hub is not None
    hub = options.hub
    settings = HubSettings(shoal_url="", state_dir=options.state_dir.resolve() / "hub",
                           public_url=hub.url.rstrip("/"), hub_api_port=hub.api_port,
                           proxy_api_port=hub.proxy_api_port, users_file=hub.users.resolve(),
                           extra_config=hub.extra_config.resolve() if hub.extra_config else None,
                           reaper_timeout=hub.reaper_timeout,
                           # Kept, not new each start: the hub stores every service token it is given, and old ones
                           # would stay valid.
                           service_token=_kept_secret(options.state_dir / "hub" / "service-token").decode())
    if hub.password:
        from dataclasses import replace
        settings = replace(settings, password=hub.password)
    return settings


def _with_api_url(settings: HubSettings, host: str, port: int) -> HubSettings:
    from dataclasses import replace
    reachable = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return replace(settings, shoal_url=f"http://{reachable}:{port}")


def _announce_hub(settings: HubSettings) -> None:
    import yaml
    users = sorted((yaml.safe_load(settings.users_file.read_text()) or {}).get("users", {}))
    click.echo(f"Notebooks: open {settings.public_url} and log in as {', '.join(users[:5]) or 'a listed user'} "
               f"with the password {settings.password}")
    click.echo(f"  (users and teams: {settings.users_file}; hub log: {settings.state_dir}/jupyterhub.log)")
    click.echo(f"Dashboard: {settings.public_url}{SERVICE_PREFIX} (the same login; the API under it, for hub "
               f"tokens: {settings.public_url}{SERVICE_PREFIX}v1/)")
    sys.stdout.flush()


def _announce(options: UpOptions, port: int, node_count: int, team_names: list[str],
              admin_token: str | None, where: str) -> None:
    host = "127.0.0.1" if options.host in ("0.0.0.0", "") else options.host
    url = f"http://{host}:{port}"
    store = options.db_url.split("@")[-1] if options.db_url else f"{options.state_dir}/shoal.db"
    flags = _store_flags(options)
    click.echo(f"Shoal is up: API at {url}")
    cluster = "Kubernetes" if options.kube is not None else options.cluster
    click.echo(f"  cluster {cluster} ({node_count} nodes), teams {', '.join(team_names)}; state in {store}; {where}")
    click.echo("Get a token and submit a job, in another terminal:")
    click.echo(f"  export SHOAL_URL={url}")
    click.echo(f"  export SHOAL_TOKEN=$(shoal token create --team {team_names[0]}{flags})")
    click.echo("  shoal submit deploy/examples/two-pods.yaml && shoal queue    # then: shoal logs -f JOB_ID")
    if admin_token is not None:
        click.echo(f"An admin token (shown once, may act on every team): {admin_token}")
    click.echo(f"Metrics: {url}/metrics   API document: {url}/v1/openapi.json   Stop: Ctrl-C")
    sys.stdout.flush()


@click.command()
@click.option("--cluster", default="demo", show_default=True, help="Built-in cluster name or a cluster YAML file.")
@click.option("--teams", default="demo", show_default=True, help="Built-in teams name or a teams YAML file.")
@state_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the API listens on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of the API (0: any free port).")
@click.option("--tick", "tick_s", type=click.FloatRange(0.05, 60), default=2.0, show_default=True,
              help="Seconds between scheduling cycles (a submission or cancel wakes it sooner).")
@click.option("--min-run-time", "min_run_time", default="30m", show_default=True,
              help="A job admitted less than this ago is preempted only by critical work (e.g. 0s for demos).")
@click.option("--no-hub", is_flag=True, help="Do not start JupyterHub (the scheduler and its API only).")
@click.option("--hub-url", default="http://127.0.0.1:8000", show_default=True,
              help="Where users open JupyterHub (its proxy listens here).")
@click.option("--hub-api-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
              help="Port of the hub's own API.")
@click.option("--hub-proxy-api-port", type=click.IntRange(1, 65535), default=8001, show_default=True,
              help="Port of configurable-http-proxy's API.")
@click.option("--hub-users", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=DEFAULT_USERS,
              show_default=True, help="Hub users and their teams (the embedded default's authenticator).")
@click.option("--hub-password", envvar="SHOAL_HUB_PASSWORD", default=None,
              help="The password every listed user logs in with (default: a new one, printed; env "
                   "SHOAL_HUB_PASSWORD).")
@click.option("--hub-extra-config", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A jupyterhub_config.py fragment loaded after Shoal's own.")
@click.option("--reaper-timeout", default="1h", show_default=True,
              help="Stop notebooks idle (hub, kernels and GPU) for longer than this.")
@click.option("--hub-api-url", default=None, metavar="URL",
              help="With --no-hub: the API of a JupyterHub run elsewhere (Zero to JupyterHub), so notebooks' hub "
                   "tokens work on Shoal's API, e.g. http://hub.jupyterhub:8081/hub/api.")
@click.option("--executor", "executor_kind", type=click.Choice(["local", "kubernetes"]), default="local",
              show_default=True, help="Run pods as local processes, or as pods of the Kubernetes cluster this "
                                      "process can reach (the nodes are then the cluster's; --cluster is ignored).")
@click.option("--heartbeat-limit", default="60s", show_default=True,
              help="A node with no heartbeat for this long turns suspect (takes no new work).")
@click.option("--burnin-command", default=None, metavar="COMMAND",
              help="The check a repaired or idle suspect node runs before it takes work (a shell-style command "
                   "line; default: python -m scheduler_core.executor.burnin, a matrix product per GPU).")
@click.option("--burnin-time-limit", default="5m", show_default=True,
              help="A burn-in still running after this is ended and counts as failed.")
@kube_options
def command(cluster: str, teams: str, state_dir: Path, db_url: str | None, host: str, port: int,
            tick_s: float, min_run_time: str, no_hub: bool, hub_url: str, hub_api_port: int,
            hub_proxy_api_port: int, hub_users: Path, hub_password: str | None, hub_extra_config: Path | None,
            reaper_timeout: str, hub_api_url: str | None, executor_kind: str, heartbeat_limit: str,
            burnin_command: str | None, burnin_time_limit: str, **kube: Any) -> None:
    """Start the API and the scheduler on embedded defaults: SQLite in the state directory, the demo cluster,
    pods as local processes."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One line per request would drown the scheduler's own messages; refused requests (4xx/5xx) still show.
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the hub-token checks, one line each otherwise
    try:
        min_run_time_s = parse_duration(min_run_time)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--min-run-time") from None
    health = _health_config(heartbeat_limit, burnin_command, burnin_time_limit)
    hub = None if no_hub else HubOptions(hub_url, hub_api_port, hub_proxy_api_port, hub_users, hub_password,
                                         hub_extra_config, reaper_timeout)
    if hub_api_url and hub is not None:
        raise click.UsageError("--hub-api-url is for a JupyterHub run elsewhere: give it with --no-hub")
    kube_settings = options_from(**kube) if executor_kind == "kubernetes" else None
    asyncio.run(serve(UpOptions(cluster, teams, state_dir, db_url, host, port, tick_s, min_run_time_s, hub,
                                kube=kube_settings, hub_api_url=hub_api_url, health=health)))


def _health_config(heartbeat_limit: str, burnin_command: str | None, burnin_time_limit: str) -> HealthConfig:
    limits: dict[str, float] = {}
    for hint, raw in (("--heartbeat-limit", heartbeat_limit), ("--burnin-time-limit", burnin_time_limit)):
        try:
            limits[hint] = parse_duration(raw)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=hint) from None
        if limits[hint] <= 0:
            raise click.BadParameter("must be more than 0s", param_hint=hint)
    command = None
    if burnin_command is not None:
        command = tuple(shlex.split(burnin_command))
        if not command:
            raise click.BadParameter("must name a program", param_hint="--burnin-command")
    return HealthConfig(heartbeat_limit_s=limits["--heartbeat-limit"], burnin_command=command,
                        burnin_time_limit_s=limits["--burnin-time-limit"])
