"""What only the SQL store promises: migrations that keep data, guarantees across processes, tokens kept as hashes,
and the SQLite settings that make it safe to share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from scheduler_core.auth.tokens import Identity
from scheduler_core.errors import StaleLeader
from scheduler_core.model import Health
from scheduler_core.policy.snapshot import AdmittedAs
from scheduler_core.store.records import Event, JobState
from scheduler_core.store.sql import SqlStore, current_revision, head_revision, open_store, upgrade
from scheduler_core.store.sql import codec
from scheduler_core.store.sql.database import Database

from .runtime_builders import cluster_nodes, make_spec, team_configs, whole_nodes
from .sql_support import fresh_pg_database

REPO = Path(__file__).resolve().parents[2]
N0 = "h100-b0-n00"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database, not migrated."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/shoal.db"
    else:
        with fresh_pg_database() as url:
            yield url


def synced(url: str) -> SqlStore:
    store = open_store(url)
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    return store


# -- migrations -------------------------------------------------------------------------------------------------

def test_upgrade_from_the_first_revision_keeps_existing_data(db_url: str) -> None:
    db = Database(db_url)
    upgrade(db, "0001")
    assert current_revision(db) == "0001"
    node = cluster_nodes()[0]
    spec = make_spec("old").pods(1, 8).time_limit(5400.5).build()
    placement = whole_nodes(N0)
    # What the first release wrote, in its own schema (no api_tokens, no nodes.health_changed_at).
    with db.connection() as conn:
        conn.execute(text("INSERT INTO nodes (name, position, config, health, health_reason, heartbeat_at) "
                          "VALUES (:n, 0, :c, 'suspect', 'slow rank', 42.0)"),
                     {"n": node.name, "c": codec.node_to_json(node)})
        conn.execute(text("INSERT INTO teams (name, position, config) VALUES ('fraud-ml', 0, :c)"),
                     {"c": codec.dumps(team_configs()[0])})
        conn.execute(text(
            "INSERT INTO jobs (id, team, user_name, state, spec, idempotency_key, submitted_at, queued_at, "
            "front_of_queue, admitted_as, placement, admitted_at, started_at, requeue_on_exit, restarts, "
            "infra_restarts, preemptions, attained_gpu_s, avoid_nodes, wait_message, message, cancel_requested, "
            "checkpoint_requested, epoch) VALUES ('job_0ld000', 'fraud-ml', 'ana', 'RUNNING', :spec, 'key-1', "
            "1.0, 1.0, false, 'nominal', :placement, 2.0, 3.0, false, 1, 2, 3, 99.5, :avoid, '', '', false, "
            "false, 7)"),
            {"spec": codec.spec_to_json(spec), "placement": codec.placement_to_json(placement),
             "avoid": json.dumps(["h100-b0-n02"])})
        conn.execute(text("INSERT INTO allocations (job_id, epoch, admitted_as, placement, bound_at) "
                          "VALUES ('job_0ld000', 7, 'nominal', :p, 2.0)"), {"p": codec.placement_to_json(placement)})
        allocation = conn.execute(text("SELECT id FROM allocations")).scalar_one()
        for unit in range(8):
            conn.execute(text("INSERT INTO bound_units (node, flavour, unit, job_id, allocation_id) "
                              "VALUES (:n, 'h100', :u, 'job_0ld000', :a)"), {"n": N0, "u": unit, "a": allocation})
        conn.execute(text("INSERT INTO events (at, kind, reason, message, job_id, data) "
                          "VALUES (2.0, 'decision', 'Admit', 'admitted', 'job_0ld000', '{\"gpus\": 8}')"))
        conn.execute(text("UPDATE lease SET holder = 'sched-a', epoch = 7, expires_at = 10.0"))
    db.dispose()

    store = open_store(db_url)   # migrates to head
    try:
        assert current_revision(store.db) == head_revision() != "0001"
        job = store.get("job_0ld000")
        assert (job.state, job.spec, job.user, job.placement) == (JobState.RUNNING, spec, "ana", placement)
        assert (job.restarts, job.infra_restarts, job.preemptions, job.attained_gpu_s, job.epoch) == (1, 2, 3, 99.5, 7)
        assert job.avoid_nodes == frozenset({"h100-b0-n02"})
        assert store.submit(spec, user="ana", now=5.0, idempotency_key="key-1").id == "job_0ld000"
        [record] = store.list_nodes()
        assert (record.node, record.health, record.health_reason, record.heartbeat_at) == (
            node, Health.SUSPECT, "slow rank", 42.0)
        assert store.list_teams() == team_configs()[:1]
        [event] = store.events(job_id="job_0ld000")
        assert (event.reason, event.data) == ("Admit", {"gpus": 8})
        assert store.current_epoch() == 7
        # The held units are still held, and what the new revision added works.
        other = store.submit(make_spec("new").pods(1, 8).build(), user="bo", now=6.0)
        with pytest.raises(Exception, match="held by job job_0ld000"):
            store.bind(other.id, placement, AdmittedAs.NOMINAL, epoch=7, now=7.0)
        token = store.create_token(Identity("ana", "fraud-ml"), now=8.0)
        assert store.resolve_token(token) == Identity("ana", "fraud-ml")
        assert store.set_node_health(node.name, Health.READY, "", now=9.0).health is Health.READY
    finally:
        store.dispose()


def test_open_store_on_a_migrated_database_is_a_no_op(db_url: str) -> None:
    first = synced(db_url)
    job = first.submit(make_spec().build(), user="ana", now=1.0)
    first.dispose()
    again = open_store(db_url)
    try:
        assert again.get(job.id).state is JobState.PENDING
        assert [r.node.name for r in again.list_nodes()] == [n.name for n in cluster_nodes()]
    finally:
        again.dispose()


# -- across processes -------------------------------------------------------------------------------------------

CONTENDER = textwrap.dedent("""
    import json, os, sys, time
    from scheduler_core.errors import Conflict, StaleLeader
    from scheduler_core.policy.snapshot import AdmittedAs, Placement, PodPlacement
    from scheduler_core.store.sql import SqlStore
    url, job_id, go, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = SqlStore(url)
    store.list_nodes()                                  # connect before the start line
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.001)
    placement = Placement("h100", (PodPlacement("h100-b0-n02", tuple(range(8))),))
    try:
        store.bind(job_id, placement, AdmittedAs.NOMINAL, epoch=epoch, now=2.0)
        print("bound")
    except Conflict:
        print("conflict")
    except StaleLeader:
        print("stale")
""")


def run_contenders(url: str, jobs: list[tuple[str, int]], tmp_path: Path) -> list[str]:
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, url, job_id, str(go), str(epoch)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for job_id, epoch in jobs]
    for proc in procs:   # every contender connected and waiting at the start line
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(out.strip())
    return results


def test_binds_of_one_gpu_from_several_processes_let_exactly_one_win(db_url: str, tmp_path: Path) -> None:
    store = synced(db_url)
    try:
        jobs = [store.submit(make_spec(f"j{i}").pods(1, 8).build(), user="ana", now=1.0).id for i in range(4)]
        results = run_contenders(db_url, [(job_id, 0) for job_id in jobs], tmp_path)
        assert sorted(results) == ["bound", "conflict", "conflict", "conflict"]
        winner = jobs[results.index("bound")]
        assert [j.id for j in store.list_jobs(states=[JobState.ADMITTED])] == [winner]
        assert store.bound_unit_count() == 8
    finally:
        store.dispose()


def test_a_deposed_leader_in_another_process_cannot_bind(db_url: str, tmp_path: Path) -> None:
    store = synced(db_url)
    try:
        old = store.acquire_lease("sched-a", ttl_s=10.0, now=0.0)
        new = store.acquire_lease("sched-b", ttl_s=10.0, now=11.0)
        assert old is not None and new is not None and new > old
        stale, fresh = (store.submit(make_spec(n).pods(1, 8).build(), user="ana", now=1.0).id for n in "ab")
        assert run_contenders(db_url, [(stale, old)], tmp_path) == ["stale"]
        assert run_contenders(db_url, [(fresh, new)], tmp_path) == ["bound"]
        assert store.get(stale).state is JobState.PENDING
    finally:
        store.dispose()


def test_two_store_instances_see_one_lease(db_url: str) -> None:
    """Two schedulers are two connection pools on one database: the lease and fencing live in the database."""
    a, b = synced(db_url), SqlStore(db_url)
    try:
        epoch_a = a.acquire_lease("sched-a", ttl_s=10.0, now=0.0)
        assert epoch_a is not None and b.acquire_lease("sched-b", ttl_s=10.0, now=5.0) is None
        epoch_b = b.acquire_lease("sched-b", ttl_s=10.0, now=10.5)
        assert epoch_b is not None and epoch_b > epoch_a
        job = a.submit(make_spec().pods(1, 8).build(), user="ana", now=1.0)
        with pytest.raises(StaleLeader):
            a.bind(job.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=epoch_a, now=11.0)
        assert b.bind(job.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=epoch_b, now=11.0).epoch == epoch_b
        assert b.release_lease("sched-b") and not b.release_lease("sched-b")
        epoch_c = a.acquire_lease("sched-a", ttl_s=10.0, now=12.0)   # no need to wait for the lapse
        assert epoch_c is not None and epoch_c > epoch_b
        info = b.lease_info()
        assert (info.holder, info.epoch, info.expires_at) == ("sched-a", epoch_c, 22.0)
    finally:
        a.dispose()
        b.dispose()


def test_events_appended_by_concurrent_writers_page_without_gaps(db_url: str, tmp_path: Path) -> None:
    store = synced(db_url)
    try:
        script = ("import sys\nfrom scheduler_core.store.sql import SqlStore\nfrom scheduler_core.store.records "
                  "import Event\ns = SqlStore(sys.argv[1])\nfor i in range(40):\n"
                  "    s.append_event(Event(at=float(i), kind='k', reason=sys.argv[2]))\n")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        procs = [subprocess.Popen([sys.executable, "-c", script, db_url, f"w{w}"], env=env) for w in range(3)]
        seen: list[int] = []
        last = 0
        deadline = time.monotonic() + 60
        while len(seen) < 120 and time.monotonic() < deadline:
            page = store.events(after_id=last)
            seen.extend(e.id for e in page if e.id is not None)
            last = seen[-1] if seen else 0
        for proc in procs:
            assert proc.wait(timeout=60) == 0
        seen.extend(e.id for e in store.events(after_id=last) if e.id is not None)
        assert sorted(seen) == seen and len(seen) == len(set(seen)) == 120
    finally:
        store.dispose()


# -- tokens -----------------------------------------------------------------------------------------------------

def test_tokens_are_kept_only_as_hashes(db_url: str) -> None:
    store = synced(db_url)
    try:
        admin = store.create_token(Identity("root", "ops", admin=True), now=1.0, note="bootstrap")
        user = store.create_token(Identity("ana", "fraud-ml"), now=2.0)
        assert admin != user and admin.startswith("shoal_")
        assert store.resolve_token(admin) == Identity("root", "ops", admin=True)
        assert store.resolve_token(user) == Identity("ana", "fraud-ml")
        with store.db.connection(write=False) as conn:
            stored = [tuple(row) for row in conn.execute(text("SELECT * FROM api_tokens"))]
        assert not any(admin in map(str, row) or user in map(str, row) for row in stored)
        hashes = [row[0] for row in stored]
        assert all(store.resolve_token(h) is None for h in hashes)
        assert store.resolve_token("shoal_nope") is None
        store.revoke_token(user)
        assert store.resolve_token(user) is None and store.resolve_token(admin) is not None
    finally:
        store.dispose()


# -- details ----------------------------------------------------------------------------------------------------

def test_specs_round_trip_exactly_even_with_fractional_durations(db_url: str) -> None:
    store = synced(db_url)
    try:
        spec = (make_spec("precise").time_limit(90.25).checkpoint(grace_period=12.5, cost=0.75, interval=33.3)
                .env(A="1").build())
        job = store.submit(spec, user="ana", now=1.0)
        fresh = SqlStore(db_url)   # no cache: parsed from the row
        try:
            assert fresh.get(job.id).spec == spec
        finally:
            fresh.dispose()
    finally:
        store.dispose()


def test_sqlite_runs_in_wal_with_a_busy_timeout(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/shoal.db")
    try:
        with store.db.connection(write=False) as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert int(conn.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) >= 10_000
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        store.dispose()


def test_a_reader_is_not_blocked_by_a_writer_in_another_connection(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shoal.db"
    store = synced(url)
    raw = create_engine(url)
    try:
        job = store.submit(make_spec().build(), user="ana", now=1.0)
        with raw.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.exec_driver_sql("UPDATE jobs SET message = 'in flight'")
            assert store.get(job.id).message == ""      # WAL: the reader sees the last commit, at once
            conn.exec_driver_sql("ROLLBACK")
    finally:
        raw.dispose()
        store.dispose()


def test_unsupported_url_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="sqlite:///"):
        SqlStore("mysql://x/y")


def test_events_data_round_trips(db_url: str) -> None:
    store = synced(db_url)
    try:
        stored = store.append_event(Event(at=1.5, kind="decision", reason="Preempt", job_id="job_x", node=N0,
                                          team="search", message="for job_y", data={"victims": ["a", "b"]}))
        assert store.events() == [stored]
    finally:
        store.dispose()


def test_the_sqlite_file_and_its_wal_are_owner_only(tmp_path: Path) -> None:
    import stat

    from scheduler_core.store.sql import open_store
    from .runtime_builders import cluster_nodes
    store = open_store(f"sqlite:///{tmp_path}/shoal.db")
    try:
        store.sync_nodes(cluster_nodes())
        for name in ("shoal.db", "shoal.db-wal"):
            path = tmp_path / name
            if path.exists():
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
        assert (tmp_path / "shoal.db").exists()
    finally:
        store.dispose()
