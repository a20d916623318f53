"""A scheduler process without the API: ``python -m scheduler_core.service.run --db URL --state-dir DIR``.

It leads (or stands by) on the given store with a ``LocalExecutor`` until SIGTERM or SIGINT, then gives the lease
up so a standby takes over at once. Run two on one PostgreSQL for high availability; ``shoal up`` runs the same
``LiveController`` inside the API process instead.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import shlex
import signal
import sys
import time
from pathlib import Path

from ..auth.job_tokens import JobTokens
from ..config import load_cluster, load_teams
from ..controller import ControllerConfig
from ..executor.local import LocalExecutor
from ..policy.types import Policy
from ..runtime.heap import freeze_start_up_heap
from ..runtime.node_lifecycle import HealthConfig
from ..store.sql import open_store
from .live import LiveConfig, LiveController

DEFAULT_POLICY = "scheduler_core.policy.cycle:run_cycle"


def load_policy(reference: str) -> Policy:
    """``module:attr`` → a policy: the attribute itself if it is a function, an instance if it is a class."""
    module_name, _, attr = reference.partition(":")
    if not module_name or not attr:
        raise ValueError(f"policy must be given as module:attribute, got {reference!r}")
    target = getattr(importlib.import_module(module_name), attr)
    policy: Policy = target() if isinstance(target, type) else target
    return policy


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    defaults = LiveConfig()
    parser = argparse.ArgumentParser(prog="python -m scheduler_core.service.run", description=__doc__)
    parser.add_argument("--db", required=True, help="sqlite:///path.db or postgresql+psycopg://user@host/db")
    parser.add_argument("--state-dir", required=True, type=Path, help="the local executor's pods and logs")
    parser.add_argument("--cluster", default="demo", help="built-in cluster name or a YAML path")
    parser.add_argument("--teams", default="demo", help="built-in teams name or a YAML path")
    parser.add_argument("--policy", default=DEFAULT_POLICY, help="module:attribute of the policy")
    parser.add_argument("--holder", default=None, help="lease holder name (default: host:pid:random)")
    parser.add_argument("--checkpoint-root", default=None, help="default checkpoint place (default: STATE/ckpt)")
    parser.add_argument("--lease-ttl", type=float, default=defaults.lease_ttl_s)
    parser.add_argument("--renew-every", type=float, default=defaults.renew_every_s)
    parser.add_argument("--standby-poll", type=float, default=defaults.standby_poll_s)
    parser.add_argument("--tick", type=float, nargs=2, default=(defaults.tick_min_s, defaults.tick_max_s),
                        metavar=("MIN", "MAX"))
    health = HealthConfig()
    parser.add_argument("--heartbeat-limit", type=float, default=health.heartbeat_limit_s, metavar="SECONDS",
                        help="a node with no heartbeat for this long turns suspect")
    parser.add_argument("--burnin-command", default=None, metavar="COMMAND",
                        help="the burn-in a repaired or idle suspect node runs (default: executor/burnin.py)")
    parser.add_argument("--burnin-time-limit", type=float, default=health.burnin_time_limit_s, metavar="SECONDS",
                        help="a burn-in still running then counts as failed")
    return parser.parse_args(argv)


async def serve(live: LiveController) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, live.stop)
    await live.run()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _, nodes = load_cluster(args.cluster)
    teams = load_teams(args.teams, nodes)
    store = open_store(args.db)
    store.sync_nodes(nodes)
    store.sync_teams(teams.teams)
    state_dir: Path = args.state_dir
    executor = LocalExecutor(state_dir / "executor", nodes)
    checkpoint_root = args.checkpoint_root or str(state_dir / "checkpoints")
    live = LiveController(
        store, executor, load_policy(args.policy), nodes=nodes, holder=args.holder,
        job_tokens=JobTokens(store, time.time),
        config=LiveConfig(lease_ttl_s=args.lease_ttl, renew_every_s=args.renew_every,
                          standby_poll_s=args.standby_poll, tick_min_s=args.tick[0], tick_max_s=args.tick[1]),
        controller_config=ControllerConfig(checkpoint_root=checkpoint_root, health=HealthConfig(
            heartbeat_limit_s=args.heartbeat_limit, burnin_time_limit_s=args.burnin_time_limit,
            burnin_command=tuple(shlex.split(args.burnin_command)) if args.burnin_command else None)))
    freeze_start_up_heap()
    try:
        asyncio.run(serve(live))
    finally:
        store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
