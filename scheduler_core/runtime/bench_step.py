"""``shoal bench step``: what the controller adds around one policy pass, on the reference cluster.

The design's budget is one scheduling pass in ≤ 20 ms with 2,000 pending jobs on 512 nodes; the snapshot the
controller builds for it (and the waits it writes back) must be a small part of that. This times, on a
``MemoryStore`` + ``SimExecutor``: building the snapshot cold (first cycle: every ``JobRequest`` derived), building
it warm (per-job parts cached), and a whole ``Controller.step`` whose policy only answers "wait" for every pending
job (so the figure is the controller's own cost: poll, list, snapshot, ``set_waits``). Printed, never asserted.
"""

from __future__ import annotations

import random
import statistics
import time

import click

from ..config import load_cluster, load_teams
from ..controller import Controller
from ..executor.sim import SimExecutor
from ..model.job import JobSpec
from ..policy.decisions import CycleResult, Reason, Wait
from ..policy.snapshot import AdmittedAs, Placement, PodPlacement, Snapshot
from ..store.memory import MemoryStore
from ..store.records import JobState

_SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (1, 8), (2, 8), (4, 8), (16, 8))


def _wait_for_everything(snapshot: Snapshot, now: float) -> CycleResult:
    """A policy that admits nothing: each pending job waits, in snapshot order."""
    return CycleResult(now=now, waits=[Wait(p.request.id, Reason.WAITING_FOR_CAPACITY, "bench", i + 1)
                                       for i, p in enumerate(snapshot.pending)])


def _populate(store: MemoryStore, *, pending: int, running: int, finished: int, seed: int) -> None:
    rng = random.Random(seed)
    teams = [team.name for team in store.list_teams()]
    nodes = [record.node for record in store.list_nodes() if "h100" in record.node.devices and not record.node.spare]

    def spec(i: int, pods: int, gpus: int) -> JobSpec:
        return JobSpec(name=f"bench-{i}", team=rng.choice(teams), flavour=("h100",), pods=pods, gpus_per_pod=gpus,
                       command=("python", "train.py"))

    now = 0.0
    for i in range(finished):      # a usage ledger to decay
        job = store.submit(spec(i, 1, 8), user="bench", now=now)
        node = nodes[i % len(nodes)]
        store.bind(job.id, Placement("h100", (PodPlacement(node.name, tuple(range(8))),)), AdmittedAs.NOMINAL,
                   epoch=0, now=now)
        store.release(job.id, state=JobState.SUCCEEDED, now=now + 600.0, epoch=0, exit_code=0)
        now += 1.0
    for i in range(running):        # one whole node each
        job = store.submit(spec(finished + i, 1, 8), user="bench", now=now)
        node = nodes[i % len(nodes)]
        store.bind(job.id, Placement("h100", (PodPlacement(node.name, tuple(range(8))),)), AdmittedAs.NOMINAL,
                   epoch=0, now=now)
        store.mark_running(job.id, now=now)
    for i in range(pending):
        pods, gpus = rng.choice(_SHAPES)
        store.submit(spec(finished + running + i, pods, gpus), user="bench", now=now + i)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms"


@click.command()
@click.option("--cluster", default="reference", show_default=True)
@click.option("--teams", "teams_name", default="reference", show_default=True)
@click.option("--pending", default=2000, show_default=True)
@click.option("--running", default=300, show_default=True, help="running jobs, one whole node each")
@click.option("--finished", default=5000, show_default=True, help="finished jobs in the usage ledger")
@click.option("--repeat", default=50, show_default=True)
@click.option("--seed", default=0, show_default=True)
def command(cluster: str, teams_name: str, pending: int, running: int, finished: int, repeat: int,
            seed: int) -> None:
    """Time the controller's snapshot and step around a policy that admits nothing."""
    _, nodes = load_cluster(cluster)
    teams = load_teams(teams_name, nodes)
    store = MemoryStore(seed=seed)
    store.sync_nodes(nodes)
    store.sync_teams(teams.teams)
    _populate(store, pending=pending, running=running, finished=finished, seed=seed)
    controller = Controller(store, SimExecutor(), _wait_for_everything, nodes=nodes)
    now = 1e6
    started = time.perf_counter()
    controller.build_snapshot(now)
    cold = time.perf_counter() - started
    warm: list[float] = []
    steps: list[float] = []
    for i in range(repeat):
        started = time.perf_counter()
        controller.build_snapshot(now + i)
        warm.append(time.perf_counter() - started)
    for i in range(repeat):
        started = time.perf_counter()
        controller.step(now + repeat + i)
        steps.append(time.perf_counter() - started)
    click.echo(f"{len(nodes)} nodes, {pending} pending, {running} running, {finished} in the usage ledger")
    click.echo(f"snapshot, cold:  {cold * 1e3:.2f} ms")
    click.echo(f"snapshot, warm:  {_ms(warm)}")
    click.echo(f"step (no admits): {_ms(steps)}")
