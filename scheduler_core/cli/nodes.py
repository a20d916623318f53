"""``shoal nodes``: list nodes; ``fail``, ``drain`` and ``repair`` one (admins); ``events``: health changes.

Every command goes through the API (``SHOAL_URL`` and ``SHOAL_TOKEN``), so it works from any directory and the
API knows who acted: a non-admin token is refused (403, exit 3) and nothing changes; an admin's action is an
event that names them. The controller sees the new health at its next cycle: a node in repair or draining takes
no new work, gangs on a failed node restart elsewhere from their last checkpoint, and a repaired node runs the
scheduler's burn-in before it takes work again.
"""

from __future__ import annotations

import click

from ..schemas import NodeView
from .jobs import client, emit_json, json_option
from .table import render, when


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def nodes(ctx: click.Context, as_json: bool) -> None:
    """List nodes (health, free and allocated units); fail, drain or repair one (admins)."""
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
        rows.append([node.name, node.block, node.health + (" (spare)" if node.spare else ""), when(node.health_since),
                     units, ",".join(node.jobs) or "-", node.health_reason or "-", when(node.heartbeat_at)])
    click.echo(render(["NODE", "BLOCK", "HEALTH", "SINCE", "FREE/TOTAL", "JOBS", "REASON", "HEARTBEAT"], rows))


_DONE = {
    "fail": "its gangs restart from their last checkpoint elsewhere",
    "drain": "it takes no new work; its jobs finish there",
    "repair": "it runs the scheduler's burn-in and takes work again once that passes",
}


def _act(name: str, action: str, reason: str | None, as_json: bool) -> None:
    with client() as api:
        view: NodeView = api.node_action(name, action, reason=reason)
    if as_json:
        emit_json(view)
        return
    click.echo(f"Node {name} is now {view.health}: {_DONE[action]}.")


#: Pages of 1,000 events read at most (the log is read from its start; the API has no filter by kind).
_MAX_PAGES = 200
_reason = click.option("--reason", default=None, help="Why (kept as the node's reason and in its event).")


@nodes.command()
@click.argument("name")
@_reason
@json_option
def fail(name: str, reason: str | None, as_json: bool) -> None:
    """Fail a node (into repair): its pods die, and their gangs restart from their last checkpoint elsewhere."""
    _act(name, "fail", reason, as_json)


@nodes.command()
@click.argument("name")
@_reason
@json_option
def drain(name: str, reason: str | None, as_json: bool) -> None:
    """Drain a node: it takes no new work; its jobs finish."""
    _act(name, "drain", reason, as_json)


@nodes.command()
@click.argument("name")
@_reason
@json_option
def repair(name: str, reason: str | None, as_json: bool) -> None:
    """Return a node to service: it runs the burn-in, and is ready once that passes."""
    _act(name, "repair", reason, as_json)


@nodes.command()
@click.argument("name", required=False)
@click.option("--limit", default=50, show_default=True, help="Show at most this many (the newest).")
def events(name: str | None, limit: int) -> None:
    """Health changes of every node (or NAME): when, the transition and its reason."""
    rows: list[list[str]] = []
    with client() as api:
        after: int | None = None
        for _ in range(_MAX_PAGES):
            page = api.events(after=after, limit=1000)
            rows.extend([when(e.at), e.node or "-", f"{e.data.get('was', '?')} → {e.data.get('health', '?')}",
                         e.reason, e.message]
                        for e in page.events if e.kind == "node_health" and e.node and "health" in e.data
                        and (name is None or e.node == name))
            if not page.events or page.next_after is None or page.next_after == after:
                break
            after = page.next_after
    click.echo(render(["AT", "NODE", "CHANGE", "REASON", "MESSAGE"], rows[-limit:]))
