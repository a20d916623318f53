"""``shoal up``: the composition root. It alone builds the store, the executor, the controller and its live loop,
and the API, and wires them together (DESIGN §2).

Embedded defaults, so a laptop needs nothing installed: SQLite in the state directory, the demo cluster and teams,
and the local executor (each pod a process on this machine, logs in ``<state-dir>/logs``). The same command runs
against PostgreSQL with ``--db``. Stopping it (Ctrl-C) stops the API and the scheduler; running pods keep running,
and the next ``shoal up`` on the same state adopts them.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from ..config import load_cluster, load_teams
from ..model.durations import parse_duration
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
    from ..api import ApiService, TokenAuthenticator, make_app
    from ..api.app import write_threads_for
    from ..api.metrics import CycleTimer, make_registry
    from ..api.server import listen
    from ..auth.tokens import Identity
    from ..controller import ControllerConfig
    from ..executor.local import LocalExecutor
    from ..policy.cycle import run_cycle
    from ..policy.snapshot import PolicyConfig
    from ..service.live import LiveConfig, LiveController
    from ..services import ServiceContext, start_services, stop_services

    _, nodes = load_cluster(options.cluster)
    teams = load_teams(options.teams, nodes)
    options.state_dir.mkdir(parents=True, exist_ok=True)
    url = database_url(options.state_dir, options.db_url)
    store = open_state(options.state_dir, options.db_url, create=True)
    store.sync_nodes(nodes)
    store.sync_teams(teams.teams)
    executor = LocalExecutor(executor_dir(options.state_dir), nodes, env=_pod_environment())
    policy_config = PolicyConfig(min_run_time_s=options.min_run_time_s)
    registry = make_registry(store)
    timer = CycleTimer(registry)
    live = LiveController(
        store, executor, run_cycle, nodes=nodes, policy_config=policy_config,
        config=LiveConfig(tick_min_s=options.tick_s, tick_max_s=options.tick_s * 1.5),
        controller_config=ControllerConfig(checkpoint_root=str((options.state_dir / "checkpoints").resolve())),
        on_step=lambda _report, seconds: timer.observe(seconds))
    service = ApiService(store, wake=live.wake, policy_config=policy_config)
    app = make_app(service, TokenAuthenticator(store), write_threads=write_threads_for(url), registry=registry)
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
    scheduler = asyncio.create_task(live.run())
    # Services built on the API (the sweep controller), found as `shoal.services` entry points; the core never
    # imports them. They act only while this process leads.
    services = start_services(ServiceContext(
        api_url=f"http://127.0.0.1:{port}" if options.host in ("0.0.0.0", "") else f"http://{options.host}:{port}",
        state_dir=options.state_dir, tokens=store, is_leader=lambda: live.is_leader))
    if announce:
        _announce(options, port, len(nodes), [t.name for t in teams.teams], admin_token)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        click.echo("shoal: stopping (running jobs keep running; the next 'shoal up' adopts them)", err=True)
        await asyncio.to_thread(stop_services, services)
        server.stop()
        await server.close_all_connections()
        live.stop()
        await scheduler
        executor.close()
        store.dispose()


def _announce(options: UpOptions, port: int, node_count: int, team_names: list[str],
              admin_token: str | None) -> None:
    host = "127.0.0.1" if options.host in ("0.0.0.0", "") else options.host
    url = f"http://{host}:{port}"
    where = options.db_url.split("@")[-1] if options.db_url else f"{options.state_dir}/shoal.db"
    flags = _store_flags(options)
    click.echo(f"Shoal is up: API at {url}")
    click.echo(f"  cluster {options.cluster} ({node_count} nodes), teams {', '.join(team_names)}; "
               f"state in {where}; pods run as local processes, logs in "
               f"{executor_dir(options.state_dir)}/logs/JOB/ATTEMPT/rank-N.log")
    click.echo("Get a token and submit a job, in another terminal:")
    click.echo(f"  export SHOAL_URL={url}")
    click.echo(f"  export SHOAL_TOKEN=$(shoal token create --user $USER --team {team_names[0]}{flags})")
    click.echo("  shoal submit deploy/examples/two-pods.yaml && shoal queue")
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
def command(cluster: str, teams: str, state_dir: Path, db_url: str | None, host: str, port: int,
            tick_s: float, min_run_time: str) -> None:
    """Start the API and the scheduler on embedded defaults: SQLite in the state directory, the demo cluster,
    pods as local processes."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One line per request would drown the scheduler's own messages; refused requests (4xx/5xx) still show.
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        min_run_time_s = parse_duration(min_run_time)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--min-run-time") from None
    asyncio.run(serve(UpOptions(cluster, teams, state_dir, db_url, host, port, tick_s, min_run_time_s)))
