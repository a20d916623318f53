"""``shoal bench live``: the controller's step on a SQL store, and how much the live loop delays its event loop.

Two figures for ``docs/BENCHMARKS.md``:

* ``Controller.step`` on SQLite or PostgreSQL with 2,000 pending and 300 running jobs on the reference cluster,
  under a policy that admits nothing (so the figure is the store's and controller's own cost per cycle);
* the lateness of a 10 ms asyncio timer while a ``LiveController`` steps continuously on the same loop: the delay
  the API's tornado handlers would see. Steps run in a worker thread, so only the GIL is shared.

Printed, never asserted.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import click

from ..config import load_cluster, load_teams
from ..controller import Controller
from ..executor.sim import SimExecutor
from ..model.cluster import Node
from ..model.job import JobSpec
from ..model.team import TeamConfig
from ..policy.decisions import CycleResult, Reason, Wait
from ..policy.snapshot import AdmittedAs, Placement, PodPlacement, Snapshot
from ..store.base import Store
from ..runtime.heap import freeze_start_up_heap
from ..store.sql import SqlStore, open_store
from .live import LiveConfig, LiveController

_SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (1, 8), (2, 8), (4, 8), (16, 8))


def wait_for_everything(snapshot: Snapshot, now: float) -> CycleResult:
    """A policy that admits nothing: each pending job waits, in snapshot order."""
    return CycleResult(now=now, waits=[Wait(p.request.id, Reason.WAITING_FOR_CAPACITY, "bench", i + 1)
                                       for i, p in enumerate(snapshot.pending)])


def _whole_h100_nodes(nodes: Sequence[Node]) -> list[Node]:
    return [node for node in nodes if "h100" in node.devices and not node.spare]


def populate(store: Store, *, pending: int, running: int, seed: int) -> None:
    rng = random.Random(seed)
    teams = [team.name for team in store.list_teams()]
    nodes = _whole_h100_nodes([r.node for r in store.list_nodes()])
    for i in range(running):
        spec = JobSpec(name=f"run-{i}", team=rng.choice(teams), flavour=("h100",), pods=1, gpus_per_pod=8,
                       command=("python", "train.py"))
        job = store.submit(spec, user="bench", now=float(i))
        store.bind(job.id, Placement("h100", (PodPlacement(nodes[i % len(nodes)].name, tuple(range(8))),)),
                   AdmittedAs.NOMINAL, epoch=0, now=float(i))
        store.mark_running(job.id, now=float(i))
    for i in range(pending):
        pods, gpus = rng.choice(_SHAPES)
        spec = JobSpec(name=f"pend-{i}", team=rng.choice(teams), flavour=("h100",), pods=pods, gpus_per_pod=gpus,
                       command=("python", "train.py"))
        store.submit(spec, user="bench", now=float(running + i))


def _reopen(store: SqlStore, url: str, nodes: Sequence[Node], teams: Sequence[TeamConfig]) -> SqlStore:
    """The store as a scheduler process that has just started holds it: opened afresh, cluster and teams synced."""
    store.dispose()
    fresh = open_store(url)
    fresh.sync_nodes(nodes)
    fresh.sync_teams(teams)
    return fresh


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms, max {ordered[-1] * 1e3:.1f} ms"


async def _loop_lag(live: LiveController, steps: int, period_s: float = 0.01) -> list[float]:
    lateness: list[float] = []
    task = asyncio.create_task(live.run())
    target = live.stats.steps + steps
    while live.stats.steps < target:
        expected = time.perf_counter() + period_s
        await asyncio.sleep(period_s)
        lateness.append(max(time.perf_counter() - expected, 0.0))
    live.stop()
    await task
    return lateness


@click.command()
@click.option("--db", default=None, help="database URL (default: a SQLite file in a temporary directory)")
@click.option("--cluster", default="reference", show_default=True)
@click.option("--teams", "teams_name", default="reference", show_default=True)
@click.option("--pending", type=click.IntRange(min=0), default=2000, show_default=True)
@click.option("--running", type=click.IntRange(min=0), default=300, show_default=True)
@click.option("--repeat", type=click.IntRange(min=1), default=30, show_default=True)
@click.option("--seed", default=0, show_default=True)
def command(db: str | None, cluster: str, teams_name: str, pending: int, running: int, repeat: int,
            seed: int) -> None:
    """Time Controller.step on a SQL store and the live loop's delay of its event loop."""
    _, nodes = load_cluster(cluster)
    teams = load_teams(teams_name, nodes)
    machines = len(_whole_h100_nodes(nodes))
    if running > machines:
        raise click.UsageError(f"--running is {running}; each running job holds a whole h100 node, and cluster "
                               f"{cluster!r} has {machines}")
    with tempfile.TemporaryDirectory() as tmp:
        url = db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        store = open_store(url)
        try:
            store.sync_nodes(nodes)
            store.sync_teams(teams.teams)
            started = time.perf_counter()
            populate(store, pending=pending, running=running, seed=seed)
            fill = time.perf_counter() - started
            # The first step after a start: a store opened afresh (no parsed specs or records cached) and given the
            # cluster and teams, as a scheduler process that has just started sees it (``service.run``, ``shoal
            # up``), start-up's heap set aside from the collector. It writes every pending job's wait and event.
            store = _reopen(store, url, nodes, teams.teams)
            controller = Controller(store, SimExecutor(), wait_for_everything, nodes=nodes)
            freeze_start_up_heap()  # as the process's composition root does before its first step
            steps: list[float] = []
            first_cpu = 0.0
            for i in range(repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                controller.step(1e6 + i)
                steps.append(time.perf_counter() - t0)
                if i == 0:
                    first_cpu = time.process_time() - c0
            # A restart: the same, but the waits the last leader wrote are still there (none is rewritten).
            store = _reopen(store, url, nodes, teams.teams)
            controller = Controller(store, SimExecutor(), wait_for_everything, nodes=nodes)
            freeze_start_up_heap()
            t0, c0 = time.perf_counter(), time.process_time()
            controller.step(1e6 + repeat)
            restart, restart_cpu = time.perf_counter() - t0, time.process_time() - c0
            live = LiveController(store, SimExecutor(), wait_for_everything, nodes=nodes, holder="bench",
                                  config=LiveConfig(tick_min_s=0.001, tick_max_s=0.002))
            lateness = asyncio.run(_loop_lag(live, repeat))
            backend = store.db.backend
        finally:
            store.dispose()
    click.echo(f"{backend}: {len(nodes)} nodes, {pending} pending, {running} running "
               f"(filled in {fill:.1f} s, {(pending + running) / fill:.0f} submissions/s)")
    click.echo(f"Controller.step (no admits): {_ms(steps[1:] or steps)}; first after a start {steps[0] * 1e3:.1f} ms "
               f"({first_cpu * 1e3:.0f} ms CPU); first after a restart, waits already stored, "
               f"{restart * 1e3:.1f} ms ({restart_cpu * 1e3:.0f} ms CPU)")
    mean_step = live.stats.step_seconds_total / max(live.stats.steps, 1)
    click.echo(f"LiveController stepping back to back: 10 ms timer lateness {_ms(lateness)} over {len(lateness)} "
               f"ticks; live steps mean {mean_step * 1e3:.1f} ms, max {live.stats.step_seconds_max * 1e3:.1f} ms")
