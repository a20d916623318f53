"""High availability, for real: two scheduler processes on one PostgreSQL, a stream of jobs, ``kill -9`` of the
leader. The standby must take the lease within 15 s, adopt the running gang, keep the queue moving, and no GPU
may ever be bound to two jobs at once (checked on the allocation history in the database)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from scheduler_core.executor.local import LocalExecutor
from scheduler_core.store.records import JobState
from scheduler_core.store.sql import SqlStore, open_store

from .runtime_builders import CLUSTER, cluster_nodes, make_spec, team_configs
from .sql_support import fresh_pg_database
from .test_executor_local import HONEST

REPO = Path(__file__).resolve().parents[2]
TAKEOVER_LIMIT_S = 15.0
SHORT = "import time; time.sleep(0.5)"

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


class Scheduler:
    """One ``python -m scheduler_core.service.run`` process."""

    def __init__(self, holder: str, url: str, tmp_path: Path) -> None:
        self.holder = holder
        self.log = tmp_path / f"scheduler-{holder}.log"
        cluster, teams = tmp_path / "cluster.yaml", tmp_path / "teams.yaml"
        if not cluster.exists():
            cluster.write_text(yaml.safe_dump(CLUSTER))
            teams.write_text(yaml.safe_dump({"teams": [t.model_dump(mode="json") for t in team_configs()]}))
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scheduler_core.service.run", "--db", url, "--state-dir",
                 str(tmp_path / "state"), "--cluster", str(cluster), "--teams", str(teams), "--holder", holder,
                 "--policy", "tests.scheduler_core.greedy_policy:GreedyPolicy"],
                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)

    def kill(self, signum: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)


def wait_for(condition: Callable[[], bool], what: str, timeout: float, logs: list[Path]) -> float:
    """Seconds it took for ``condition`` to hold; fails with the schedulers' logs after ``timeout``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs if p.exists())
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}\n{tails}")
        time.sleep(0.05)
    return time.monotonic() - start


def overlapping_bindings(store: SqlStore) -> list[str]:
    """Every pair of allocations that held one unit at the same time (there must be none)."""
    with store.db.connection(write=False) as conn:
        rows = conn.execute(text("SELECT job_id, placement, bound_at, released_at FROM allocations")).all()
    by_unit: dict[tuple[str, str, int], list[tuple[float, float, str]]] = {}
    for job_id, placement, bound_at, released_at in rows:
        doc = json.loads(placement)
        for node, units in doc["pods"]:
            for unit in units:
                end = released_at if released_at is not None else float("inf")
                by_unit.setdefault((node, doc["flavour"], unit), []).append((bound_at, end, job_id))
    problems = []
    for unit, spans in by_unit.items():
        spans.sort()
        for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
            if start < end:
                problems.append(f"{unit}: {first} until {end} and {second} from {start}")
    return problems


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_pg_database("shoal_ha") as url:
        yield url


def test_the_standby_takes_over_within_15_s_of_kill_9_and_no_gpu_is_bound_twice(database: str,
                                                                                  tmp_path: Path) -> None:
    store = open_store(database)
    schedulers: list[Scheduler] = []
    logs = [tmp_path / "scheduler-a.log", tmp_path / "scheduler-b.log"]
    try:
        a = Scheduler("a", database, tmp_path)
        schedulers.append(a)
        wait_for(lambda: store.lease_info().holder == "a", "scheduler a to lead", 60, logs)
        b = Scheduler("b", database, tmp_path)
        schedulers.append(b)

        def submit(name: str, program: str = SHORT, pods: int = 1) -> str:
            spec = make_spec(name).pods(pods, 8).command(sys.executable, "-c", program).build()
            return store.submit(spec, user="ana", now=time.time()).id

        long_job = submit("long", HONEST, pods=2)
        before = [submit(f"before-{i}") for i in range(8)]
        wait_for(lambda: store.get(long_job).state is JobState.RUNNING, "the long gang to run", 60, logs)
        wait_for(lambda: sum(store.get(j).state is JobState.SUCCEEDED for j in before) >= 3,
                 "progress under the first leader", 60, logs)
        first_epoch = store.lease_info().epoch
        pids = LocalExecutor(tmp_path / "state" / "executor", cluster_nodes()).pids(long_job)
        assert len(pids) == 2

        a.kill(signal.SIGKILL)                       # the leader dies mid-stream; its pods do not
        killed_at = time.monotonic()
        after = [submit(f"after-{i}") for i in range(6)]
        takeover = wait_for(lambda: store.lease_info().epoch > first_epoch, "a new lease epoch", 60, logs)
        assert store.lease_info().holder == "b"
        assert takeover <= TAKEOVER_LIMIT_S, f"standby took {takeover:.1f}s to take over"
        wait_for(lambda: all(store.get(j).state is JobState.SUCCEEDED for j in before + after),
                 "every queued job to finish under the new leader", 120, logs)
        progress = time.monotonic() - killed_at
        assert store.get(long_job).state is JobState.RUNNING
        assert LocalExecutor(tmp_path / "state" / "executor", cluster_nodes()).pids(long_job) == pids
        assert [e.data["holder"] for e in store.events() if e.kind == "leadership"] == ["a", "b"]
        assert any(e.kind == "adopt" for e in store.events(job_id=long_job))

        store.request_cancel(long_job, now=time.time())
        wait_for(lambda: store.get(long_job).state is JobState.CANCELLED, "the adopted gang to stop", 60, logs)
        assert overlapping_bindings(store) == []
        assert store.bound_unit_count() == 0
        print(f"takeover {takeover:.2f}s after kill -9 (epoch {first_epoch} → {store.lease_info().epoch}); "
              f"{len(before) + len(after)} short jobs done {progress:.1f}s after the kill")

        b.kill(signal.SIGTERM)
        assert b.proc.wait(timeout=30) == 0
        assert store.lease_info().holder is None     # b gave the lease up on its way out
    finally:
        for scheduler in schedulers:
            scheduler.kill(signal.SIGKILL)
            scheduler.proc.wait(timeout=30)
        reaper = LocalExecutor(tmp_path / "state" / "executor", cluster_nodes())
        for job_id in reaper.running_jobs():
            reaper.terminate(job_id, 0)
        store.dispose()
