"""``MemoryStore`` passes the Store contract suite; and what only it promises: ids that repeat under a seed, and
lists by state kept in order as jobs move."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.errors import Conflict, NotFound
from scheduler_core.model.allocation import AdmittedAs
from scheduler_core.model.reasons import Reason
from scheduler_core.store.base import Store
from scheduler_core.store.memory import MemoryStore
from scheduler_core.store.records import JobState

from .runtime_builders import cluster_nodes, make_spec, place, team_configs
from .store_contract import StoreContract


class TestMemoryStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return MemoryStore()


def test_seeded_stores_give_the_same_ids_in_the_same_order() -> None:
    def ids(seed: int) -> list[str]:
        store = MemoryStore(seed=seed)
        return [store.submit(make_spec(f"j{i}").build(), user="ana", now=float(i)).id for i in range(50)]

    assert ids(7) == ids(7)
    assert ids(7) != ids(8)


STATE_SETS = [frozenset(s) for s in ([JobState.PENDING], [JobState.ADMITTED, JobState.RUNNING, JobState.TERMINATING],
                                     [JobState.RUNNING], [JobState.PENDING, JobState.CANCELLED, JobState.SUCCEEDED])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "bind", "run", "stop", "release", "cancel", "list"]),
                          st.integers(0, 30), st.integers(0, len(STATE_SETS) - 1)), max_size=60))
def test_listing_by_state_stays_in_submission_order_as_jobs_move(ops: list[tuple[str, int, int]]) -> None:
    """The lists ``list_jobs`` keeps per set of states match a fresh filter of every job, in list order, after
    any run of submissions (some at earlier instants), admissions, starts, stops, requeues and cancels."""
    store = MemoryStore(seed=1)
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    now = 100.0
    for op, pick, which in ops:
        now += 1.0
        jobs = store.list_jobs()
        job = jobs[pick % len(jobs)] if jobs else None
        try:
            if op == "submit" or job is None:
                store.submit(make_spec(f"j{pick}").build(), user="ana", now=now - pick)
            elif op == "bind":
                node = f"h100-b{pick % 2}-n0{pick % 3}"
                store.bind(job.id, place("h100", (node, (pick % 8,))), AdmittedAs.NOMINAL, epoch=0, now=now)
            elif op == "run":
                store.mark_running(job.id, now)
            elif op == "stop":
                store.mark_terminating(job.id, requeue=bool(pick % 2), terminate_by=now, now=now, epoch=0)
            elif op == "release":
                store.release(job.id, state=JobState.PENDING if pick % 2 else JobState.SUCCEEDED, now=now, epoch=0)
            elif op == "cancel":
                store.request_cancel(job.id, now)
        except (Conflict, NotFound):
            pass   # a move the job's state does not allow changes nothing
        wanted = STATE_SETS[which]
        assert [j.id for j in store.list_jobs(states=wanted)] == [j.id for j in store.list_jobs()
                                                                   if j.state in wanted]


def test_a_record_with_a_new_wait_changes_those_fields_and_no_other() -> None:
    store = MemoryStore(seed=1)
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    job = store.submit(make_spec("j").build(), user="ana", now=1.0)
    # every field set away from its default, so a field taken from the wrong position shows
    full = dataclasses.replace(job, front_of_queue=True, admitted_at=2.0, labelled_at=3.0, started_at=4.0,
                               finished_at=5.0, terminate_by=6.0, requeue_on_exit=True, restarts=1,
                               infra_restarts=2, preemptions=3, attained_gpu_s=7.0, restart_block="b0",
                               avoid_nodes=frozenset({"n"}), exit_code=9, message="m", cancel_requested=True,
                               checkpoint_requested=True, epoch=4, idle_since=8.0, idle_limit_s=10.0)
    changed = full.with_wait(Reason.QUOTA_FULL, "full", 3, 99.0, 11.0, 12.0)
    assert changed == dataclasses.replace(full, wait_reason=Reason.QUOTA_FULL, wait_message="full",
                                          queue_position=3, estimated_start=99.0, room_wait_since=11.0,
                                          room_waited_s=12.0)
