"""Each baseline's defining behaviour on a tiny cluster: FIFO blocks behind its head, Kueue borrows and reclaims but
never reserves, EASY backfills only what cannot delay its one reservation. Every waiting job gets a reason."""

from __future__ import annotations

import pytest

from scheduler_core.model.job import TopologyLevel
from scheduler_core.policy.decisions import CycleResult, PreemptReason, Reason
from scheduler_core.policy.snapshot import AdmittedAs, Snapshot
from scheduler_core.sim.baselines import BASELINES, easy, fifo, kueue

from .builders import job, nodes, snapshot, team, unhealthy


def admitted(result: CycleResult) -> list[str]:
    return [a.job_id for a in result.admits]


def reasons(result: CycleResult) -> dict[str, Reason]:
    return {w.job_id: w.reason for w in result.waits}


def blocked_head() -> Snapshot:
    """Two nodes, one busy; a two-node job at the head, a one-GPU job behind it that would fit."""
    cluster = nodes("b0", 2)
    busy = job("busy").gpus(8).limit(10_000).running(["b0-n00"])
    return snapshot(cluster, running=[busy], pending=[
        job("small").gpus(1).at(2).build(),
        job("big").gpus(16).at(1).build(),
    ])


def test_fifo_blocks_everything_behind_a_head_that_does_not_fit() -> None:
    result = fifo(blocked_head(), now=10)
    assert admitted(result) == []
    assert reasons(result) == {"big": Reason.WAITING_FOR_CAPACITY, "small": Reason.WAITING_FOR_CAPACITY}
    assert "behind big" in next(w.message for w in result.waits if w.job_id == "small")
    assert [w.position for w in result.waits] == [1, 2]


def test_fifo_starts_jobs_in_submission_order() -> None:
    snap = snapshot(nodes("b0", 1), pending=[job(f"j{i}").gpus(4).at(10 - i).build() for i in range(3)])
    result = fifo(snap, now=20)
    assert admitted(result) == ["j2", "j1"]
    assert reasons(result) == {"j0": Reason.WAITING_FOR_CAPACITY}


def test_fifo_does_not_block_behind_a_job_that_can_never_fit() -> None:
    snap = snapshot(nodes("b0", 2) + nodes("b1", 2), pending=[
        job("huge").gpus(24).required(TopologyLevel.BLOCK).at(1).build(),
        job("next").gpus(8).at(2).build(),
    ])
    result = fifo(snap, now=5)
    assert admitted(result) == ["next"]
    assert reasons(result) == {"huge": Reason.WAITING_FOR_TOPOLOGY}


def test_kueue_lets_a_fitting_job_pass_the_head_and_never_reserves() -> None:
    result = kueue(blocked_head(), now=10)
    assert admitted(result) == ["small"]
    assert result.reservations == []
    assert reasons(result) == {"big": Reason.WAITING_FOR_CAPACITY}


def test_kueue_borrows_idle_quota_of_the_cohort() -> None:
    snap = snapshot(nodes("b0", 2), teams=[team("a", 8, borrowing=8), team("b", 8)],
                    pending=[job("wide").team("a").gpus(16).build()])
    result = kueue(snap, now=1)
    assert [(a.job_id, a.admitted_as) for a in result.admits] == [("wide", AdmittedAs.BORROWED)]


def test_kueue_respects_borrowing_and_lending_limits() -> None:
    no_borrowing = snapshot(nodes("b0", 2), teams=[team("a", 8, borrowing=0), team("b", 8)],
                            pending=[job("wide").team("a").gpus(16).build()])
    assert reasons(kueue(no_borrowing, now=1)) == {"wide": Reason.QUOTA_FULL}
    no_lending = snapshot(nodes("b0", 2), teams=[team("a", 8), team("b", 8, lending=0)],
                          pending=[job("wide").team("a").gpus(16).build()])
    assert reasons(kueue(no_lending, now=1)) == {"wide": Reason.COHORT_FULL}


def test_kueue_reclaims_lent_quota_from_a_borrower_once() -> None:
    cluster = nodes("b0", 2)
    teams = [team("a", 8, borrowing=8), team("b", 8)]
    borrower = job("borrower").team("a").gpus(8).at(0)
    owner = job("mine").team("b").gpus(8).at(5).build()
    own = job("own").team("a").gpus(8).running(["b0-n00"], started=0)
    first = kueue(snapshot(cluster, teams=teams, pending=[owner],
                           running=[own, borrower.running(["b0-n01"], started=1, as_=AdmittedAs.BORROWED)]), now=10)
    assert [(p.job_id, p.reason, p.for_job) for p in first.preempts] == [("borrower", PreemptReason.RECLAIM, "mine")]
    assert reasons(first) == {"mine": Reason.PREEMPTING_VICTIMS}
    # Next cycle the borrower is still checkpointing: nobody else is signalled.
    second = kueue(snapshot(cluster, teams=teams, pending=[owner], running=[
        own, borrower.running(["b0-n01"], started=1, as_=AdmittedAs.BORROWED, terminating=True)]), now=20)
    assert second.preempts == []
    assert reasons(second) == {"mine": Reason.PREEMPTING_VICTIMS}


def test_kueue_orders_work_within_nominal_quota_before_borrowing_work() -> None:
    snap = snapshot(nodes("b0", 1), teams=[team("a", 0, borrowing=8), team("b", 8)], pending=[
        job("borrows").team("a").gpus(8).at(1).build(),
        job("owns").team("b").gpus(8).at(2).build(),
    ])
    assert admitted(kueue(snap, now=3)) == ["owns"]


def test_kueue_numbers_waiting_jobs_within_each_teams_queue() -> None:
    """Kueue reports a workload's position in its ClusterQueue: one team's jobs are numbered apart from another's,
    so one team's admission never renumbers every other team's queue."""
    snap = snapshot(nodes("b0", 1), teams=[team("a", 64), team("b", 64)], pending=[
        job("a-runs").team("a").gpus(8).at(0).build(),
        job("a-1").team("a").gpus(8).at(1).build(),
        job("b-1").team("b").gpus(8).at(2).build(),
        job("a-2").team("a").gpus(8).at(3).build(),
        job("b-2").team("b").gpus(8).at(4).build(),
    ])
    result = kueue(snap, now=5)
    assert admitted(result) == ["a-runs"]
    assert {w.job_id: w.position for w in result.waits} == {"a-1": 1, "a-2": 2, "b-1": 1, "b-2": 2}


def test_kueue_works_out_each_job_of_a_like_queue_again_once_the_cluster_moved() -> None:
    """A pass remembers why a job waits and whether it fits once the signalled jobs exit, for the like jobs after
    it; an admission in between takes the room that answer counted on, so the next like job is asked afresh."""
    cluster = nodes("b0", 2)
    teams = [team("b", 64), team("c", 64)]
    running = [job("half0").team("c").gpus(4).running(["b0-n00"]),
               job("half1").team("c").gpus(4).running(["b0-n01"]),
               job("leaving").team("c").gpus(4).running(["b0-n01"], first_unit=4, terminating=True)]
    snap = snapshot(cluster, teams=teams, running=running, pending=[
        job("first").team("b").pods(2, 4).at(1).build(),    # fits only once "leaving" has left: it waits for it
        job("takes").team("c").gpus(4).at(2).build(),       # takes the free half of b0-n00 that counted on
        job("like").team("b").pods(2, 4).at(3).build(),
    ])
    result = kueue(snap, now=10)
    assert admitted(result) == ["takes"]
    assert reasons(result) == {"first": Reason.PREEMPTING_VICTIMS, "like": Reason.WAITING_FOR_CAPACITY}


def test_easy_backfills_only_jobs_that_end_before_the_reservation_on_its_nodes() -> None:
    cluster = nodes("b0", 3)
    running = [job("ends-soon").gpus(8).limit(1000).running(["b0-n00"], started=0),
               job("ends-late").gpus(8).limit(9000).running(["b0-n01"], started=0)]
    snap = snapshot(cluster, running=running, pending=[
        job("big").gpus(16).at(1).build(),
        job("short").gpus(8).limit(500).at(2).build(),
        job("long").gpus(8).limit(5000).at(3).build(),
    ])
    result = easy(snap, now=100)
    assert [(r.job_id, r.start_at, set(r.nodes)) for r in result.reservations] == [
        ("big", 1000, {"b0-n00", "b0-n02"})]
    assert [(a.job_id, a.backfill) for a in result.admits] == [("short", True)]
    assert reasons(result) == {"big": Reason.WAITING_FOR_CAPACITY, "long": Reason.BEHIND_RESERVATION}
    assert {w.job_id: w.estimated_start for w in result.waits} == {"big": 1000, "long": 1000}


def test_easy_backfills_a_long_job_on_nodes_the_reservation_does_not_need() -> None:
    cluster = nodes("a", 2) + nodes("b", 2)
    running = [job("a-busy").gpus(8).limit(1000).running(["a-n00"], started=0),
               job("b-busy").gpus(8).limit(9000).running(["b-n00"], started=0)]
    snap = snapshot(cluster, running=running, pending=[
        job("block-job").gpus(16).required(TopologyLevel.BLOCK).at(1).build(),
        job("long").gpus(8).limit(50_000).at(2).build(),
    ])
    result = easy(snap, now=10)
    assert [(r.job_id, set(r.nodes)) for r in result.reservations] == [("block-job", {"a-n00", "a-n01"})]
    assert [(a.job_id, a.placement.nodes) for a in result.admits] == [("long", ("b-n01",))]


def test_easy_ignores_quotas() -> None:
    snap = snapshot(nodes("b0", 2), teams=[team("a", 0, borrowing=0), team("b", 16)],
                    pending=[job("over").team("a").gpus(16).build()])
    assert admitted(easy(snap, now=1)) == ["over"]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_baseline_stops_jobs_at_their_time_limit(name: str) -> None:
    snap = snapshot(nodes("b0", 1), running=[job("late").gpus(8).limit(100).running(["b0-n00"], started=0)])
    result = BASELINES[name](snap, 100)
    assert [(p.job_id, p.reason, p.requeue) for p in result.preempts] == [("late", PreemptReason.TIME_LIMIT, False)]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_baseline_gives_every_waiting_job_a_reason(name: str) -> None:
    cluster = nodes("b0", 2, spares=1) + [unhealthy(n) for n in nodes("b1", 1)]
    pending = [job(f"j{i}").gpus(g).at(i).build() for i, g in enumerate([8, 16, 4, 4, 8, 1])]
    pending.append(job("mig").flavours("h100-mig-1g").at(9).build())
    result = BASELINES[name](snapshot(cluster, pending=pending), now=10)
    decided = admitted(result) + [w.job_id for w in result.waits]
    assert sorted(decided) == sorted(p.request.id for p in pending)
    assert reasons(result)["mig"] is Reason.INVALID_FLAVOUR
    used = [pod.node for a in result.admits for pod in a.placement.pods]
    assert "b0-n01" not in used and "b1-n00" not in used  # the hot spare and the broken node take nothing


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_baseline_restarts_a_broken_gang_on_its_blocks_hot_spare(name: str) -> None:
    cluster = nodes("b0", 2, spares=1)
    busy = job("busy").gpus(8).limit(10_000).running(["b0-n00"])
    restarted = job("restarted").gpus(8).restart_in("b0").build()
    result = BASELINES[name](snapshot(cluster, running=[busy], pending=[restarted]), now=1)
    assert [(a.job_id, a.placement.nodes) for a in result.admits] == [("restarted", ("b0-n01",))]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_gang_takes_a_hot_spare_only_when_it_cannot_fit_without_one(name: str) -> None:
    cluster = nodes("b0", 4, spares=1)
    whole_block = job("block").gpus(32).required(TopologyLevel.BLOCK).build()
    result = BASELINES[name](snapshot(cluster, pending=[whole_block]), now=1)
    assert [len(a.placement.nodes) for a in result.admits] == [4]
    small = [job(f"s{i}").gpus(8).at(i).build() for i in range(4)]
    result = BASELINES[name](snapshot(cluster, pending=small), now=1)
    assert sorted(a.job_id for a in result.admits) == ["s0", "s1", "s2"]


def test_fifo_queues_per_flavour_as_slurm_does_per_partition() -> None:
    """A blocked H100 head holds back later H100 work, not A100 work; a job listing both may take the open one."""
    cluster = nodes("b0", 2) + nodes("a0", 1, flavour="a100")
    busy = job("busy").gpus(8).limit(10_000).running(["b0-n00"])
    snap = snapshot(cluster, running=[busy], pending=[
        job("big").gpus(16).at(1).build(),
        job("h100-small").gpus(1).at(2).build(),
        job("a100-small").flavours("a100").gpus(4).at(3).build(),
        job("either").flavours("h100", "a100").gpus(4).at(4).build(),
    ])
    result = fifo(snap, now=10)
    assert admitted(result) == ["a100-small", "either"]
    assert {a.job_id: a.placement.flavour for a in result.admits}["either"] == "a100"
    assert "behind big" in next(w.message for w in result.waits if w.job_id == "h100-small")


@pytest.mark.parametrize("policy", ["fifo", "kueue", "easy"])
def test_a_job_that_never_fits_the_healthy_cluster_fits_once_its_nodes_are_repaired(policy: str) -> None:
    """Whether a shape fits the empty cluster is remembered from pass to pass, but only for the same nodes in the
    same health: a repair is seen at once."""
    cluster = nodes("b0", 2)
    pending = [job("huge").gpus(16).required(TopologyLevel.BLOCK).at(1).build()]
    broken = BASELINES[policy](snapshot([cluster[0], unhealthy(cluster[1])], pending=pending), 5)
    again = BASELINES[policy](snapshot([cluster[0], unhealthy(cluster[1])], pending=pending), 15)
    assert [(w.reason, w.message) for w in broken.waits] == [(w.reason, w.message) for w in again.waits] == [
        (Reason.WAITING_FOR_TOPOLOGY, "does not fit this cluster's healthy nodes even when empty")]
    repaired = BASELINES[policy](snapshot(cluster, pending=pending), 25)
    assert admitted(repaired) == ["huge"]
