"""``shoal nodes``: list nodes through the API; ``fail``, ``drain`` and ``repair`` act on the store (operators).

Marking a node works on the store directly, like ``shoal token create``: whoever can open the state is the
operator, and it still works when the API is down. The controller sees the new health at its next cycle: a node
in repair or draining takes no new work, and gangs on a failed node are restarted elsewhere from their last
checkpoint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..service.nodes import drain_node, fail_node, repair_node
from ..store.base import Store
from ..store.records import NodeRecord
from .jobs import client, emit_json, json_option
from .state import executor_dir, open_state, state_options
from .table import render, when

if TYPE_CHECKING:
    from ..executor.local import LocalExecutor


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def nodes(ctx: click.Context, as_json: bool) -> None:
    """List nodes (health, free and allocated units); fail, drain or repair one (operators)."""
    if ctx.invoked_subcommand is not None:
        return
    with client() as api:
        listing = api.nodes()
    if as_json:
        emit_json(listing)
        return
    rows = []
    for node in listing.nodes:
        units = ", ".join(f"{node.free[f]}/{node.capacity[f]} {f}" for f in sorted(node.capacity))
        rows.append([node.name, node.block, node.health + (" (spare)" if node.spare else ""), units,
                     ",".join(node.jobs) or "-", node.health_reason or "-", when(node.heartbeat_at)])
    click.echo(render(["NODE", "BLOCK", "HEALTH", "FREE/TOTAL", "JOBS", "REASON", "HEARTBEAT"], rows))


def _admin(state_dir: Path, db_url: str | None, name: str,
           act: Callable[[Store, LocalExecutor | None], NodeRecord]) -> NodeRecord:
    """Apply ``act`` to the store and, when this installation runs the local executor, to its pods."""
    store = open_state(state_dir, db_url)
    executor = None
    try:
        names = sorted(r.node.name for r in store.list_nodes())
        if name not in names:
            raise click.BadParameter(f"no node {name!r} (nodes include: {', '.join(names[:8])}, …)",
                                     param_hint="NODE")
        pods = executor_dir(state_dir)
        if (pods / "pods").is_dir():
            # On the local executor a node is a label on processes: failing it must kill its pods (as lost
            # hardware would) and keep new ones off it. Other executors have real nodes of their own.
            from ..executor.local import LocalExecutor
            executor = LocalExecutor(pods, [r.node for r in store.list_nodes()])
        return act(store, executor)
    finally:
        if executor is not None:
            executor.close()
        store.dispose()


@nodes.command()
@click.argument("name")
@state_options
def fail(name: str, state_dir: Path, db_url: str | None) -> None:
    """Fail a node (into repair): its pods die, and their gangs restart from their last checkpoint elsewhere."""
    record = _admin(state_dir, db_url, name,
                    lambda store, executor: fail_node(store, executor, name, now=time.time(), by=_who()))
    click.echo(f"Node {name} is now {record.health.value}: its gangs restart from their last checkpoint elsewhere.")


@nodes.command()
@click.argument("name")
@state_options
def drain(name: str, state_dir: Path, db_url: str | None) -> None:
    """Drain a node: it takes no new work; its jobs finish there."""
    record = _admin(state_dir, db_url, name, lambda store, _: drain_node(store, name, now=time.time(), by=_who()))
    click.echo(f"Node {name} is now {record.health.value}: it takes no new work.")


@nodes.command()
@click.argument("name")
@state_options
def repair(name: str, state_dir: Path, db_url: str | None) -> None:
    """Return a node to service."""
    record = _admin(state_dir, db_url, name,
                    lambda store, executor: repair_node(store, executor, name, now=time.time(), by=_who()))
    click.echo(f"Node {name} is now {record.health.value}.")


def _who() -> str:
    return os.environ.get("USER") or "admin"
