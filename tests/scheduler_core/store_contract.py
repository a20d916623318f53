"""The ``Store`` contract suite: every clause of ``scheduler_core/store/base.py``, checked through the ABC only.

A backend is done when this suite passes on it. To run it on yours, subclass and say how to make a fresh store:

    class TestSqliteStore(StoreContract):
        def make_store(self, tmp_path: Path) -> Store:
            return SqlStore(f"sqlite:///{tmp_path}/shoal.db")

        def close_store(self, store: Store) -> None:   # optional
            store.dispose()

Each test gets an empty store with the test cluster's nodes and teams synced (``runtime_builders``).
The tests use only ``Store`` methods and the record types, never an implementation's internals.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.errors import Conflict, NotFound, StaleLeader
from scheduler_core.model import Health, JobSpec
from scheduler_core.policy.decisions import Reason
from scheduler_core.policy.snapshot import AdmittedAs, Placement
from scheduler_core.store.base import Store
from scheduler_core.store.records import CheckpointRecord, Event, JobRecord, JobState

from .runtime_builders import cluster_nodes, make_spec, place, team_configs, whole_nodes
from .sweep_store_contract import SweepStoreContract

N0, N1, N2 = "h100-b0-n00", "h100-b0-n01", "h100-b0-n02"


class StoreContract(SweepStoreContract, ABC):
    @abstractmethod
    def make_store(self, tmp_path: Path) -> Store:
        """A new, empty store."""

    def close_store(self, store: Store) -> None:
        """Release what ``make_store`` opened (default: nothing)."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        store = self.make_store(tmp_path)
        store.sync_nodes(cluster_nodes())
        store.sync_teams(team_configs())
        try:
            yield store
        finally:
            self.close_store(store)

    # -- helpers ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _bound(store: Store, placement: Placement | None = None, *, spec: JobSpec | None = None, now: float = 10.0,
               admitted_as: AdmittedAs = AdmittedAs.NOMINAL, epoch: int = 0) -> JobRecord:
        """A job submitted at 0 and bound at ``now`` (one pod of 8 GPUs on N0 unless told otherwise)."""
        spec = spec or make_spec("bound").pods(1, 8).build()
        job = store.submit(spec, user="ana", now=0.0)
        return store.bind(job.id, placement or whole_nodes(N0), admitted_as, epoch=epoch, now=now)

    # -- configuration ---------------------------------------------------------------------------------------------
    def test_sync_nodes_lists_them_in_order_and_ready(self, store: Store) -> None:
        records = store.list_nodes()
        assert [r.node.name for r in records] == [n.name for n in cluster_nodes()]
        assert all(r.health is Health.READY and r.heartbeat_at is None for r in records)

    def test_sync_nodes_keeps_health_of_nodes_that_stay_and_drops_the_rest(self, store: Store) -> None:
        store.set_node_health(N0, Health.REPAIR, "xid 79", now=5.0)
        store.heartbeat(N0, now=6.0, gpu_utilization=0.5)
        kept = [n for n in cluster_nodes() if n.name in (N0, N1)]
        store.sync_nodes(kept)
        records = {r.node.name: r for r in store.list_nodes()}
        assert set(records) == {N0, N1}
        assert records[N0].health is Health.REPAIR and records[N0].health_reason == "xid 79"
        assert records[N0].heartbeat_at == 6.0 and records[N0].gpu_utilization == 0.5
        assert records[N1].health is Health.READY

    def test_set_node_health_and_heartbeat(self, store: Store) -> None:
        record = store.set_node_health(N1, Health.SUSPECT, "slow rank", now=3.0)
        assert record.node.name == N1 and record.health is Health.SUSPECT and record.health_reason == "slow rank"
        store.heartbeat(N1, now=4.0)
        listed = {r.node.name: r for r in store.list_nodes()}[N1]
        assert listed.health is Health.SUSPECT and listed.heartbeat_at == 4.0

    def test_set_node_health_writes_its_event_in_the_same_call_and_stamps_the_change(self, store: Store) -> None:
        event = Event(at=3.0, kind="node_health", reason="HeartbeatStale", node=N1,
                      data={"health": "suspect", "was": "ready"})
        record = store.set_node_health(N1, Health.SUSPECT, "no heartbeat", now=3.0, expect=Health.READY,
                                       event=event)
        assert record.health is Health.SUSPECT and record.health_changed_at == 3.0
        [stored] = store.events()
        assert (stored.reason, stored.node, stored.data) == ("HeartbeatStale", N1, event.data)
        assert {r.node.name: r for r in store.list_nodes()}[N1].health_changed_at == 3.0

    def test_set_node_health_expecting_another_health_conflicts_and_writes_nothing(self, store: Store) -> None:
        store.set_node_health(N1, Health.DRAINING, "drained by ops", now=2.0)
        with pytest.raises(Conflict, match="draining"):
            store.set_node_health(N1, Health.SUSPECT, "no heartbeat", now=3.0, expect=Health.READY,
                                  event=Event(at=3.0, kind="node_health", reason="HeartbeatStale", node=N1))
        record = {r.node.name: r for r in store.list_nodes()}[N1]
        assert (record.health, record.health_reason, record.health_changed_at) == (
            Health.DRAINING, "drained by ops", 2.0)
        assert store.events() == []

    @pytest.mark.parametrize("health", list(Health))
    def test_every_health_round_trips(self, store: Store, health: Health) -> None:
        store.set_node_health(N0, health, f"now {health}", now=1.0)
        assert {r.node.name: r for r in store.list_nodes()}[N0].health is health

    @pytest.mark.parametrize("call", ["health", "heartbeat"])
    def test_unknown_node_is_not_found(self, store: Store, call: str) -> None:
        with pytest.raises(NotFound, match="no-such-node"):
            if call == "health":
                store.set_node_health("no-such-node", Health.REPAIR, "", now=1.0)
            else:
                store.heartbeat("no-such-node", now=1.0)

    def test_sync_teams_replaces_the_team_list(self, store: Store) -> None:
        assert sorted(t.name for t in store.list_teams()) == ["fraud-ml", "search"]
        store.sync_teams(team_configs()[:1])
        assert store.list_teams() == team_configs()[:1]

    # -- submission and idempotency --------------------------------------------------------------------------------
    def test_submit_stores_a_pending_job(self, store: Store) -> None:
        spec = make_spec("train").team("search").pods(2, 8).build()
        job = store.submit(spec, user="ana", now=12.5)
        assert re.fullmatch(r"job_[0-9a-f]{6,}", job.id)
        assert (job.state, job.spec, job.user, job.team) == (JobState.PENDING, spec, "ana", "search")
        assert job.submitted_at == job.queued_at == 12.5
        assert job.placement is None and job.restarts == job.infra_restarts == job.preemptions == 0
        assert store.get(job.id) == job

    def test_job_ids_are_unique(self, store: Store) -> None:
        spec = make_spec().build()
        ids = {store.submit(spec, user="ana", now=float(i)).id for i in range(300)}
        assert len(ids) == 300

    def test_same_idempotency_key_and_spec_returns_the_first_job(self, store: Store) -> None:
        spec = make_spec("train").build()
        first = store.submit(spec, user="ana", now=1.0, idempotency_key="k-1")
        again = store.submit(make_spec("train").build(), user="ana", now=2.0, idempotency_key="k-1")
        assert again == first
        assert [j.id for j in store.list_jobs()] == [first.id]

    def test_same_idempotency_key_with_another_spec_conflicts_and_stores_nothing(self, store: Store) -> None:
        first = store.submit(make_spec("train").build(), user="ana", now=1.0, idempotency_key="k-1")
        with pytest.raises(Conflict, match="k-1"):
            store.submit(make_spec("train").pods(2, 8).build(), user="ana", now=2.0, idempotency_key="k-1")
        assert [j.id for j in store.list_jobs()] == [first.id]

    def test_another_idempotency_key_makes_another_job(self, store: Store) -> None:
        spec = make_spec().build()
        a = store.submit(spec, user="ana", now=1.0, idempotency_key="k-1")
        b = store.submit(spec, user="ana", now=1.0, idempotency_key="k-2")
        c = store.submit(spec, user="ana", now=1.0)
        assert len({a.id, b.id, c.id}) == 3

    def test_get_unknown_job_is_not_found(self, store: Store) -> None:
        with pytest.raises(NotFound, match="job_nope"):
            store.get("job_nope")

    # -- listing ---------------------------------------------------------------------------------------------------
    def test_list_jobs_oldest_submission_first_with_filters(self, store: Store) -> None:
        late = store.submit(make_spec("late").build(), user="ana", now=30.0)
        early = store.submit(make_spec("early").team("search").build(), user="bo", now=10.0)
        middle = store.submit(make_spec("middle").pods(1, 8).build(), user="ana", now=20.0)
        store.bind(middle.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=0, now=40.0)
        assert [j.id for j in store.list_jobs()] == [early.id, middle.id, late.id]
        assert [j.id for j in store.list_jobs(team="fraud-ml")] == [middle.id, late.id]
        assert [j.id for j in store.list_jobs(states=[JobState.PENDING])] == [early.id, late.id]
        assert [j.id for j in store.list_jobs(team="fraud-ml", states=[JobState.PENDING])] == [late.id]
        assert [j.id for j in store.list_jobs(states=[JobState.ADMITTED, JobState.PENDING], limit=2)] == [
            early.id, middle.id]
        assert store.list_jobs(team="nobody") == []
        assert store.list_jobs(states=[]) == []

    # -- binding ---------------------------------------------------------------------------------------------------
    def test_bind_admits_on_exactly_the_placement(self, store: Store) -> None:
        job = store.submit(make_spec().pods(2, 8).build(), user="ana", now=1.0)
        placement = whole_nodes(N0, N1)
        bound = store.bind(job.id, placement, AdmittedAs.BORROWED, epoch=0, now=5.0)
        assert bound.state is JobState.ADMITTED
        assert (bound.placement, bound.admitted_as, bound.admitted_at) == (placement, AdmittedAs.BORROWED, 5.0)
        assert store.get(job.id) == bound

    def test_bind_of_a_held_unit_conflicts_and_changes_nothing(self, store: Store) -> None:
        first = self._bound(store, place("h100", (N0, (0, 1, 2, 3))), spec=make_spec().pods(1, 4).build())
        other = store.submit(make_spec("other").pods(2, 4).build(), user="bo", now=1.0)
        overlapping = place("h100", (N1, (0, 1, 2, 3)), (N0, (3, 4, 5, 6)))
        with pytest.raises(Conflict, match=first.id):
            store.bind(other.id, overlapping, AdmittedAs.NOMINAL, epoch=0, now=11.0)
        assert store.get(other.id).state is JobState.PENDING
        # Nothing of the failed bind was kept: N1's units are still free.
        bound = store.bind(other.id, place("h100", (N1, (0, 1, 2, 3)), (N0, (4, 5, 6, 7))), AdmittedAs.NOMINAL,
                           epoch=0, now=12.0)
        assert bound.state is JobState.ADMITTED

    def test_bind_of_a_job_not_pending_conflicts(self, store: Store) -> None:
        job = self._bound(store)
        with pytest.raises(Conflict, match=job.id):
            store.bind(job.id, whole_nodes(N1), AdmittedAs.NOMINAL, epoch=0, now=11.0)
        assert store.get(job.id).placement == whole_nodes(N0)

    def test_bind_to_an_unknown_node_is_not_found(self, store: Store) -> None:
        job = store.submit(make_spec().pods(1, 8).build(), user="ana", now=1.0)
        with pytest.raises(NotFound, match="h100-zz"):
            store.bind(job.id, whole_nodes("h100-zz"), AdmittedAs.NOMINAL, epoch=0, now=2.0)
        assert store.get(job.id).state is JobState.PENDING

    @pytest.mark.parametrize("placement", [
        whole_nodes(N0, N1),                              # two pods for a one-pod job
        place("h100", (N0, (0, 1, 2, 3))),                # four units for an eight-unit pod
        place("a100", (N0, tuple(range(8)))),             # a flavour the job did not ask for
        place("h100", (N0, (0, 1, 2, 3, 4, 5, 6, 9))),    # a unit the node does not have
    ], ids=["pods", "units", "flavour", "unit-index"])
    def test_bind_of_a_placement_that_does_not_fit_the_job_conflicts(self, store: Store,
                                                                       placement: Placement) -> None:
        job = store.submit(make_spec().pods(1, 8).build(), user="ana", now=1.0)
        with pytest.raises(Conflict):
            store.bind(job.id, placement, AdmittedAs.NOMINAL, epoch=0, now=2.0)
        assert store.get(job.id).state is JobState.PENDING

    def test_released_units_can_be_bound_again(self, store: Store) -> None:
        first = self._bound(store)
        store.release(first.id, state=JobState.SUCCEEDED, now=20.0, epoch=0, exit_code=0)
        second = self._bound(store, now=21.0)
        assert second.placement == whole_nodes(N0)

    def test_concurrent_binds_of_one_unit_let_exactly_one_win(self, store: Store) -> None:
        jobs = [store.submit(make_spec(f"j{i}").pods(1, 8).build(), user="ana", now=1.0) for i in range(8)]
        barrier = threading.Barrier(len(jobs))
        outcomes: list[str] = []
        lock = threading.Lock()

        def bind(job: JobRecord) -> None:
            barrier.wait()
            try:
                store.bind(job.id, whole_nodes(N2), AdmittedAs.NOMINAL, epoch=0, now=2.0)
                result = "bound"
            except Conflict:
                result = "conflict"
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=bind, args=(job,)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) == ["bound"] + ["conflict"] * 7
        assert len(store.list_jobs(states=[JobState.ADMITTED])) == 1

    # -- fencing ---------------------------------------------------------------------------------------------------
    def test_writes_with_a_stale_epoch_are_rejected_and_change_nothing(self, store: Store) -> None:
        old = store.acquire_lease("sched-a", ttl_s=15.0, now=0.0)
        assert old is not None
        running = self._bound(store, epoch=old)
        pending = store.submit(make_spec("p").pods(1, 8).build(), user="ana", now=1.0)
        new = store.acquire_lease("sched-b", ttl_s=15.0, now=16.0)
        assert new is not None and new > old
        with pytest.raises(StaleLeader):
            store.bind(pending.id, whole_nodes(N1), AdmittedAs.NOMINAL, epoch=old, now=17.0)
        with pytest.raises(StaleLeader):
            store.mark_terminating(running.id, requeue=True, terminate_by=100.0, now=17.0, epoch=old)
        with pytest.raises(StaleLeader):
            store.release(running.id, state=JobState.SUCCEEDED, now=17.0, epoch=old, exit_code=0)
        assert store.get(pending.id).state is JobState.PENDING
        assert store.get(running.id) == running
        assert store.usage() == []
        # The new leader's writes go through, and N1 was left free by the rejected bind.
        assert store.bind(pending.id, whole_nodes(N1), AdmittedAs.NOMINAL, epoch=new, now=18.0).epoch == new
        assert store.release(running.id, state=JobState.SUCCEEDED, now=18.0, epoch=new).state is JobState.SUCCEEDED

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def test_mark_running_once_admitted(self, store: Store) -> None:
        job = self._bound(store)
        running = store.mark_running(job.id, now=15.0)
        assert (running.state, running.started_at) == (JobState.RUNNING, 15.0)
        with pytest.raises(Conflict):
            store.mark_running(job.id, now=16.0)
        pending = store.submit(make_spec("p").build(), user="ana", now=1.0)
        with pytest.raises(Conflict):
            store.mark_running(pending.id, now=16.0)

    def test_mark_terminating_keeps_the_units_until_release(self, store: Store) -> None:
        job = self._bound(store)
        store.mark_running(job.id, now=11.0)
        signalled = store.mark_terminating(job.id, requeue=True, terminate_by=320.0, now=20.0, epoch=0)
        assert (signalled.state, signalled.terminate_by, signalled.requeue_on_exit) == (
            JobState.TERMINATING, 320.0, True)
        assert signalled.placement == whole_nodes(N0)
        other = store.submit(make_spec("o").pods(1, 8).build(), user="bo", now=1.0)
        with pytest.raises(Conflict):
            store.bind(other.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=0, now=21.0)

    def test_a_second_signal_keeps_the_earlier_deadline_and_requeues_only_if_both_did(self, store: Store) -> None:
        job = self._bound(store)
        store.mark_terminating(job.id, requeue=True, terminate_by=320.0, now=20.0, epoch=0)
        again = store.mark_terminating(job.id, requeue=False, terminate_by=400.0, now=30.0, epoch=0)
        assert (again.state, again.terminate_by, again.requeue_on_exit) == (JobState.TERMINATING, 320.0, False)

    def test_mark_terminating_a_pending_job_conflicts(self, store: Store) -> None:
        job = store.submit(make_spec().build(), user="ana", now=1.0)
        with pytest.raises(Conflict):
            store.mark_terminating(job.id, requeue=True, terminate_by=10.0, now=2.0, epoch=0)

    def test_release_to_pending_requeues_at_the_front_and_counts_a_preemption(self, store: Store) -> None:
        job = self._bound(store, now=10.0)
        store.mark_running(job.id, now=12.0)
        store.mark_terminating(job.id, requeue=True, terminate_by=400.0, now=100.0, epoch=0)
        requeued = store.release(job.id, state=JobState.PENDING, now=130.0, epoch=0, exit_code=0)
        assert requeued.state is JobState.PENDING
        assert requeued.front_of_queue and requeued.queued_at == 130.0 and requeued.submitted_at == 0.0
        assert requeued.placement is None and requeued.admitted_as is None
        assert (requeued.preemptions, requeued.restarts, requeued.infra_restarts) == (1, 0, 0)
        assert [j.id for j in store.list_jobs(states=[JobState.PENDING])] == [job.id]

    @pytest.mark.parametrize(("own", "infra", "counts"), [
        (True, False, (0, 1, 0)),
        (False, True, (0, 0, 1)),
    ], ids=["own-fault", "infra-fault"])
    def test_release_to_pending_counts_restarts_by_fault(self, store: Store, own: bool, infra: bool,
                                                         counts: tuple[int, int, int]) -> None:
        job = self._bound(store, placement=whole_nodes(N0, N1), spec=make_spec().pods(2, 8).build())
        requeued = store.release(job.id, state=JobState.PENDING, now=50.0, epoch=0, exit_code=None if infra else 3,
                                 own_fault=own, infra_fault=infra, restart_block="h100-b0", avoid_nodes=[N1],
                                 message="node lost" if infra else "exit 3")
        assert (requeued.preemptions, requeued.restarts, requeued.infra_restarts) == counts
        assert requeued.restart_block == "h100-b0" and requeued.avoid_nodes == frozenset({N1})
        assert requeued.message == ("node lost" if infra else "exit 3")
        again = self._bound(store, placement=whole_nodes(N0, N1), spec=make_spec().pods(2, 8).build(), now=60.0)
        assert again.state is JobState.ADMITTED   # the units were freed

    def test_release_to_a_finished_state(self, store: Store) -> None:
        job = self._bound(store)
        store.mark_running(job.id, now=11.0)
        done = store.release(job.id, state=JobState.FAILED, now=90.0, epoch=0, exit_code=3, message="exit 3")
        assert (done.state, done.finished_at, done.exit_code, done.message) == (JobState.FAILED, 90.0, 3, "exit 3")
        assert done.state.finished and not done.state.holds_units
        with pytest.raises(Conflict):
            store.release(job.id, state=JobState.SUCCEEDED, now=91.0, epoch=0)

    def test_release_to_a_state_that_holds_units_conflicts(self, store: Store) -> None:
        job = self._bound(store)
        with pytest.raises(Conflict):
            store.release(job.id, state=JobState.RUNNING, now=20.0, epoch=0)
        assert store.get(job.id) == job
        assert store.usage() == []

    # -- usage -----------------------------------------------------------------------------------------------------
    def test_release_writes_usage_with_how_the_units_were_held(self, store: Store) -> None:
        nominal = self._bound(store, now=10.0)
        borrowed = self._bound(store, whole_nodes(N1, gpus=4), spec=make_spec().team("search").pods(1, 4).build(),
                               now=20.0, admitted_as=AdmittedAs.BORROWED)
        store.release(nominal.id, state=JobState.SUCCEEDED, now=110.0, epoch=0, exit_code=0)
        store.release(borrowed.id, state=JobState.PENDING, now=70.0, epoch=0)
        records = {u.job_id: u for u in store.usage()}
        assert set(records) == {nominal.id, borrowed.id}
        n, b = records[nominal.id], records[borrowed.id]
        assert (n.team, n.flavour, n.admitted_as, n.start, n.end, n.units) == (
            "fraud-ml", "h100", AdmittedAs.NOMINAL, 10.0, 110.0, 8)
        assert n.gpu_seconds == 800.0
        assert (b.team, b.admitted_as, b.start, b.end, b.units, b.gpu_seconds) == (
            "search", AdmittedAs.BORROWED, 20.0, 70.0, 4, 200.0)
        assert [u.job_id for u in store.usage(team="search")] == [borrowed.id]
        assert [u.job_id for u in store.usage(since=80.0)] == [nominal.id]
        assert [u.job_id for u in store.usage(until=80.0)] == [borrowed.id]
        assert [u.job_id for u in store.usage(since=70.0, until=110.0)] == [borrowed.id]

    def test_relabel_splits_usage_at_the_change_and_keeps_the_units(self, store: Store) -> None:
        job = self._bound(store, now=10.0)
        relabelled = store.relabel(job.id, AdmittedAs.BORROWED, epoch=0, now=40.0)
        assert (relabelled.state, relabelled.admitted_as, relabelled.admitted_at, relabelled.labelled_at,
                relabelled.placement) == (job.state, AdmittedAs.BORROWED, 10.0, 40.0, job.placement)
        assert store.get(job.id).admitted_as is AdmittedAs.BORROWED
        with pytest.raises(Conflict):            # its units are still held
            store.bind(store.submit(make_spec("p").pods(1, 8).build(), user="ana", now=1.0).id, job.placement,
                       AdmittedAs.NOMINAL, epoch=0, now=41.0)
        store.release(job.id, state=JobState.PENDING, now=100.0, epoch=0)
        assert sorted((u.admitted_as, u.start, u.end, u.units) for u in store.usage()) == [
            (AdmittedAs.BORROWED, 40.0, 100.0, 8), (AdmittedAs.NOMINAL, 10.0, 40.0, 8)]
        again = store.bind(job.id, job.placement, AdmittedAs.NOMINAL, epoch=0, now=200.0)
        assert again.labelled_at is None and again.admitted_as is AdmittedAs.NOMINAL

    def test_relabel_refuses_a_job_without_units_a_scavenger_label_and_an_old_epoch(self, store: Store) -> None:
        with pytest.raises(Conflict):
            store.relabel(store.submit(make_spec("p").pods(1, 8).build(), user="ana", now=1.0).id,
                          AdmittedAs.BORROWED, epoch=0, now=1.0)
        job = self._bound(store, now=10.0)
        with pytest.raises(Conflict):
            store.relabel(job.id, AdmittedAs.SCAVENGER, epoch=0, now=11.0)
        store.acquire_lease("a", ttl_s=30.0, now=12.0)
        with pytest.raises(StaleLeader):
            store.relabel(job.id, AdmittedAs.BORROWED, epoch=0, now=13.0)
        assert store.get(job.id).admitted_as is AdmittedAs.NOMINAL and list(store.usage()) == []

    # -- waits -----------------------------------------------------------------------------------------------------
    def test_set_waits_records_why_each_pending_job_waits(self, store: Store) -> None:
        a = store.submit(make_spec("a").build(), user="ana", now=1.0)
        b = store.submit(make_spec("b").build(), user="ana", now=2.0)
        store.set_waits([(a.id, Reason.QUOTA_FULL, "fraud-ml is at its quota", 1, None),
                         (b.id, Reason.BEHIND_RESERVATION, "behind job_x", 2, 500.0)], 3.0)
        got_a, got_b = store.get(a.id), store.get(b.id)
        assert (got_a.wait_reason, got_a.wait_message, got_a.queue_position, got_a.estimated_start) == (
            Reason.QUOTA_FULL, "fraud-ml is at its quota", 1, None)
        assert (got_b.wait_reason, got_b.queue_position, got_b.estimated_start) == (
            Reason.BEHIND_RESERVATION, 2, 500.0)

    def test_set_waits_with_an_unknown_job_changes_nothing(self, store: Store) -> None:
        a = store.submit(make_spec("a").build(), user="ana", now=1.0)
        with pytest.raises(NotFound):
            store.set_waits([(a.id, Reason.QUOTA_FULL, "", 1, None),
                             ("job_nope", Reason.QUOTA_FULL, "", 2, None)], 3.0)
        assert store.get(a.id).wait_reason is None

    def test_set_waits_appends_the_cycles_events_in_the_same_call(self, store: Store) -> None:
        a = store.submit(make_spec("a").build(), user="ana", now=1.0)
        b = store.submit(make_spec("b").build(), user="ana", now=2.0)
        events = [Event(at=3.0, kind="reserve", reason="Reserved", job_id=b.id, data={"nodes": [N0]}),
                  *(Event(at=3.0, kind="wait", reason="QuotaFull", job_id=j.id, team="fraud-ml",
                          data={"position": i}) for i, j in enumerate((a, b), 1))]
        stored = store.set_waits([(a.id, Reason.QUOTA_FULL, "", 1, None), (b.id, Reason.QUOTA_FULL, "", 2, None)],
                                 3.0, events=events)
        assert [e.id for e in stored] == [e.id for e in store.events()]
        assert len({e.id for e in stored}) == 3 and [e.id for e in stored] == sorted(e.id for e in stored)
        assert [(e.kind, e.job_id, e.data) for e in store.events()] == [(e.kind, e.job_id, e.data) for e in events]
        assert store.get(b.id).wait_reason is Reason.QUOTA_FULL
        assert store.set_waits([], 4.0, events=[Event(at=4.0, kind="reserve", reason="Reserved")])[0].id == \
            stored[-1].id + 1   # events alone, with no waits

    def test_a_first_cycles_many_waits_and_events_are_written_whole_and_in_order(self, store: Store) -> None:
        """The batched paths (one statement per table): every wait as given, every event's id in the order given."""
        jobs = [store.submit(make_spec(f"j{i}").build(), user="ana", now=float(i)) for i in range(600)]
        waits = [(job.id, Reason.WAITING_FOR_CAPACITY if i % 3 else Reason.QUOTA_FULL, f"m{i}", i + 1,
                  None if i % 2 else 1000.0 + i) for i, job in enumerate(jobs)]
        events = [Event(at=700.0, kind="wait", reason=str(reason), message=message, job_id=job_id, team="fraud-ml",
                        data={"position": position, "estimated_start": start})
                  for job_id, reason, message, position, start in waits]
        stored = store.set_waits(waits, 700.0, events=events)
        assert [(e.job_id, e.data["position"]) for e in stored] == [(w[0], w[3]) for w in waits]
        assert [e.id for e in stored] == sorted(e.id for e in stored) == [e.id for e in store.events()]
        assert [(e.job_id, e.message, e.data) for e in store.events()] == [(e.job_id, e.message, e.data)
                                                                            for e in events]
        got = {record.id: record for record in store.list_jobs(states=[JobState.PENDING])}
        assert [(got[w[0]].wait_reason, got[w[0]].wait_message, got[w[0]].queue_position,
                 got[w[0]].estimated_start) for w in waits] == [w[1:] for w in waits]
        assert all((got[w[0]].room_wait_since is None) == w[1].is_quota for w in waits)

    def test_set_waits_with_an_unknown_job_writes_no_events(self, store: Store) -> None:
        a = store.submit(make_spec("a").build(), user="ana", now=1.0)
        with pytest.raises(NotFound):
            store.set_waits([(a.id, Reason.QUOTA_FULL, "", 1, None), ("job_nope", Reason.QUOTA_FULL, "", 2, None)],
                            3.0, events=[Event(at=3.0, kind="wait", reason="QuotaFull", job_id=a.id)])
        assert store.events() == [] and store.get(a.id).wait_reason is None

    def test_a_bind_clears_the_wait(self, store: Store) -> None:
        a = store.submit(make_spec("a").pods(1, 8).build(), user="ana", now=1.0)
        store.set_waits([(a.id, Reason.WAITING_FOR_CAPACITY, "no room", 1, 50.0)], 1.5)
        bound = store.bind(a.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=0, now=2.0)
        assert bound.wait_reason is None and bound.queue_position is None and bound.room_wait_since is None

    def test_the_time_waited_for_room_is_kept_apart_from_quota_waits(self, store: Store) -> None:
        a = store.submit(make_spec("a").pods(1, 8).build(), user="ana", now=1.0)

        def room(reason: Reason, now: float) -> tuple[float | None, float]:
            store.set_waits([(a.id, reason, f"{reason} at {now}", 1, None)], now)
            got = store.get(a.id)
            return got.room_wait_since, got.room_waited_s

        assert room(Reason.QUOTA_FULL, 10.0) == (None, 0.0)
        assert room(Reason.WAITING_FOR_TOPOLOGY, 20.0) == (20.0, 0.0)
        assert room(Reason.BEHIND_RESERVATION, 30.0) == (20.0, 0.0)
        assert room(Reason.COHORT_FULL, 40.0) == (None, 20.0)
        assert room(Reason.QUOTA_FULL, 45.0) == (None, 20.0)
        assert room(Reason.WAITING_FOR_CAPACITY, 50.0) == (50.0, 20.0)
        bound = store.bind(a.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=0, now=60.0)
        assert (bound.room_wait_since, bound.room_waited_s) == (None, 0.0)

    # -- cancel and checkpoint requests ----------------------------------------------------------------------------
    def test_cancel_of_a_pending_job_is_immediate(self, store: Store) -> None:
        job = store.submit(make_spec().build(), user="ana", now=1.0)
        cancelled = store.request_cancel(job.id, now=5.0)
        assert (cancelled.state, cancelled.finished_at) == (JobState.CANCELLED, 5.0)
        assert store.list_jobs(states=[JobState.PENDING]) == []
        assert store.request_cancel(job.id, now=6.0) == cancelled
        assert store.usage() == []

    def test_cancel_of_a_running_job_flags_it_for_the_controller(self, store: Store) -> None:
        job = self._bound(store)
        store.mark_running(job.id, now=11.0)
        flagged = store.request_cancel(job.id, now=12.0)
        assert flagged.state is JobState.RUNNING and flagged.cancel_requested
        assert flagged.placement == whole_nodes(N0)

    def test_cancel_of_a_finished_job_conflicts(self, store: Store) -> None:
        job = self._bound(store)
        store.release(job.id, state=JobState.SUCCEEDED, now=20.0, epoch=0, exit_code=0)
        with pytest.raises(Conflict):
            store.request_cancel(job.id, now=21.0)
        assert store.get(job.id).state is JobState.SUCCEEDED

    def test_checkpoint_request_is_flagged_and_cleared(self, store: Store) -> None:
        job = self._bound(store)
        assert store.request_checkpoint(job.id, now=12.0).checkpoint_requested
        store.clear_checkpoint_request(job.id)
        assert not store.get(job.id).checkpoint_requested
        pending = store.submit(make_spec("p").build(), user="ana", now=1.0)
        with pytest.raises(Conflict):
            store.request_checkpoint(pending.id, now=12.0)

    def test_idle_clock_is_kept_while_the_job_holds_its_units(self, store: Store) -> None:
        job = self._bound(store)
        clocked = store.set_idle_clock(job.id, 100.0, 3600.0)
        assert (clocked.idle_since, clocked.idle_limit_s) == (100.0, 3600.0)
        assert (store.get(job.id).idle_since, store.get(job.id).idle_limit_s) == (100.0, 3600.0)
        cleared = store.set_idle_clock(job.id, None, None)          # a busy kernel: no clock
        assert (cleared.idle_since, cleared.idle_limit_s) == (None, None)
        store.set_idle_clock(job.id, 200.0, 600.0)
        store.release(job.id, state=JobState.PENDING, now=300.0, epoch=0)
        rebound = store.bind(job.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=0, now=400.0)
        assert (rebound.idle_since, rebound.idle_limit_s) == (None, None)
        pending = store.submit(make_spec("p").build(), user="ana", now=1.0)
        with pytest.raises(Conflict):
            store.set_idle_clock(pending.id, 1.0, 3600.0)

    @pytest.mark.parametrize("call", ["cancel", "checkpoint", "clear", "attained", "checkpoints", "running",
                                      "idle_clock"])
    def test_unknown_job_is_not_found(self, store: Store, call: str) -> None:
        calls = {
            "cancel": lambda: store.request_cancel("job_nope", now=1.0),
            "checkpoint": lambda: store.request_checkpoint("job_nope", now=1.0),
            "clear": lambda: store.clear_checkpoint_request("job_nope"),
            "attained": lambda: store.add_attained("job_nope", 5.0),
            "checkpoints": lambda: store.checkpoints("job_nope"),
            "running": lambda: store.mark_running("job_nope", now=1.0),
            "idle_clock": lambda: store.set_idle_clock("job_nope", 1.0, 3600.0),
        }
        with pytest.raises(NotFound):
            calls[call]()

    def test_attained_service_accumulates(self, store: Store) -> None:
        job = store.submit(make_spec().build(), user="ana", now=1.0)
        store.add_attained(job.id, 100.0)
        store.add_attained(job.id, 50.0)
        assert store.get(job.id).attained_gpu_s == 150.0

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def test_only_verified_checkpoints_become_the_last_one(self, store: Store) -> None:
        job = self._bound(store)

        def checkpoint(step: int, at: float, verified: bool) -> CheckpointRecord:
            return CheckpointRecord(job.id, step, f"file:///ckpt/{step}", 1 << 20, at, verified, cost_s=12.0)

        assert store.checkpoints(job.id) == []
        store.record_checkpoint(checkpoint(100, 50.0, verified=True))
        store.record_checkpoint(checkpoint(200, 90.0, verified=False))
        assert store.get(job.id).last_checkpoint == checkpoint(100, 50.0, True)
        store.record_checkpoint(checkpoint(300, 130.0, verified=True))
        store.record_checkpoint(checkpoint(50, 20.0, verified=True))    # an older one reported late
        assert store.get(job.id).last_checkpoint == checkpoint(300, 130.0, True)
        assert [c.step for c in store.checkpoints(job.id)] == [100, 200, 300, 50]

    def test_checkpoint_of_an_unknown_job_is_not_found(self, store: Store) -> None:
        with pytest.raises(NotFound):
            store.record_checkpoint(CheckpointRecord("job_nope", 1, "file:///x", 1, 1.0, True))

    def test_last_checkpoint_survives_a_requeue(self, store: Store) -> None:
        job = self._bound(store)
        ckpt = CheckpointRecord(job.id, 7, "file:///ckpt/7", 10, 30.0, True)
        store.record_checkpoint(ckpt)
        requeued = store.release(job.id, state=JobState.PENDING, now=40.0, epoch=0)
        assert requeued.last_checkpoint == ckpt

    # -- events ----------------------------------------------------------------------------------------------------
    def test_events_get_increasing_ids_and_page_by_job_and_id(self, store: Store) -> None:
        appended = [store.append_event(Event(at=float(i), kind="decision" if i % 2 else "observation",
                                             reason=f"R{i}", job_id="job_a" if i % 3 == 0 else "job_b",
                                             data={"i": i}))
                     for i in range(7)]
        ids = [e.id for e in appended]
        assert all(i is not None for i in ids)
        assert ids == sorted(ids) and len(set(ids)) == 7
        assert appended[2] == dataclasses.replace(
            Event(at=2.0, kind="decision" if 2 % 2 else "observation", reason="R2", job_id="job_b",
                  data={"i": 2}), id=ids[2])
        assert store.events() == appended
        assert [e.reason for e in store.events(job_id="job_a")] == ["R0", "R3", "R6"]
        assert [e.reason for e in store.events(after_id=ids[3])] == ["R4", "R5", "R6"]
        assert [e.reason for e in store.events(after_id=ids[1], limit=2)] == ["R2", "R3"]
        assert [e.reason for e in store.events(job_id="job_a", after_id=ids[0], limit=1)] == ["R3"]
        assert store.events(after_id=ids[-1]) == []

    # -- leadership ------------------------------------------------------------------------------------------------
    def test_lease_is_exclusive_while_live_and_a_new_holder_gets_a_larger_epoch(self, store: Store) -> None:
        first = store.acquire_lease("sched-a", ttl_s=15.0, now=100.0)
        assert first is not None and store.current_epoch() == first
        assert store.acquire_lease("sched-b", ttl_s=15.0, now=110.0) is None
        assert store.acquire_lease("sched-a", ttl_s=15.0, now=110.0) == first   # a renewal keeps the epoch
        assert store.acquire_lease("sched-b", ttl_s=15.0, now=124.0) is None    # renewed until 125
        second = store.acquire_lease("sched-b", ttl_s=15.0, now=126.0)
        assert second is not None and second > first and store.current_epoch() == second
        assert store.acquire_lease("sched-a", ttl_s=15.0, now=127.0) is None
        third = store.acquire_lease("sched-a", ttl_s=15.0, now=200.0)
        assert third is not None and third > second

    # -- immutability ----------------------------------------------------------------------------------------------
    def test_records_are_immutable_snapshots(self, store: Store) -> None:
        job = store.submit(make_spec().pods(1, 8).build(), user="ana", now=1.0)
        with pytest.raises(dataclasses.FrozenInstanceError):
            job.state = JobState.RUNNING  # type: ignore[misc]
        store.bind(job.id, whole_nodes(N0), AdmittedAs.NOMINAL, epoch=0, now=2.0)
        assert job.state is JobState.PENDING and job.placement is None
        node = store.list_nodes()[0]
        store.set_node_health(node.node.name, Health.REPAIR, "", now=3.0)
        assert node.health is Health.READY
