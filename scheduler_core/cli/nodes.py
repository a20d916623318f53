"""``shoal nodes``: list nodes through the API; ``fail``, ``drain`` and ``ready`` act on the store (operators).

Marking a node works on the store directly, like ``shoal token create``: whoever can open the state is the
operator, and it still works when the API is down. The controller sees the new health at its next cycle: a node
in repair or draining takes no new work, and gangs on a failed node are restarted elsewhere from their last
checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..errors import NotFound
from ..model.cluster import Health
from ..store.records import Event, NodeRecord
from .jobs import client, emit_json, json_option
from .state import open_state, state_options
from .table import render, when


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def nodes(ctx: click.Context, as_json: bool) -> None:
    """List nodes (health, free and allocated units); fail, drain or ready one (operators)."""
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


def _set_health(state_dir: Path, db_url: str | None, name: str, health: Health, reason: str, event: str) -> None:
    store = open_state(state_dir, db_url)
    try:
        now = time.time()
        try:
            store.set_node_health(name, health, reason, now)
        except NotFound:
            known = ", ".join(sorted(r.node.name for r in store.list_nodes())[:8])
            raise click.BadParameter(f"no node {name!r} (nodes include: {known}, …)", param_hint="NODE") from None
        store.append_event(Event(at=now, kind="node_health", reason=event, node=name, message=reason))
        hit = _local_pods(state_dir, store.list_nodes(), name, failed=health is Health.REPAIR)
    finally:
        store.dispose()
    click.echo(f"Node {name} is now {health.value}: {reason}")
    if hit:
        click.echo(f"Its pods were killed as a hardware failure would: {', '.join(hit)} (they restart from their "
                   f"last checkpoint elsewhere)")


def _local_pods(state_dir: Path, records: list[NodeRecord], name: str, *, failed: bool) -> list[str]:
    """On the local executor a node is a label on processes, so failing it must also kill its pods (as lost
    hardware would) and make it refuse new ones; readying it undoes that. Other executors have real nodes."""
    if not (state_dir / "pods").is_dir():
        return []
    from ..executor.local import LocalExecutor

    executor = LocalExecutor(state_dir, [r.node for r in records])
    try:
        if failed:
            return executor.fail_node(name)
        executor.repair_node(name)
        return []
    finally:
        executor.close()


@nodes.command()
@click.argument("name")
@click.option("--reason", default="marked failed by an operator", show_default=True)
@state_options
def fail(name: str, reason: str, state_dir: Path, db_url: str | None) -> None:
    """Mark a node failed (repair): its pods die, and their gangs restart from their last checkpoint elsewhere."""
    _set_health(state_dir, db_url, name, Health.REPAIR, reason, "NodeFailed")


@nodes.command()
@click.argument("name")
@click.option("--reason", default="drained by an operator", show_default=True)
@state_options
def drain(name: str, reason: str, state_dir: Path, db_url: str | None) -> None:
    """Drain a node: it takes no new work."""
    _set_health(state_dir, db_url, name, Health.DRAINING, reason, "NodeDraining")


@nodes.command()
@click.argument("name")
@click.option("--reason", default="returned to service by an operator", show_default=True)
@state_options
def ready(name: str, reason: str, state_dir: Path, db_url: str | None) -> None:
    """Return a node to service."""
    _set_health(state_dir, db_url, name, Health.READY, reason, "NodeReady")
