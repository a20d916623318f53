"""The carried index (``policy.carried``) equals a from-scratch rebuild after every pass, and changes no decision.

Random worlds (``test_properties.worlds``) run for several passes with every decision applied, and between passes
random events: arrivals, completions and exits (``World.advance``), preemptions and relabels (the cycle's own),
node failures and repairs. After each pass the carried free units, unit end times and quota usage must equal
``Capacity``/``Timeline``/``QuotaLedger`` built from the snapshot, and ``run_cycle`` must decide exactly the same
with the index as without it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from scheduler_core.model.cluster import Health
from scheduler_core.policy.capacity import Capacity
from scheduler_core.policy.carried import CarriedIndex
from scheduler_core.policy.cycle import run_cycle
from scheduler_core.policy.fairshare import cluster_capacity
from scheduler_core.policy.quota import QuotaClock, QuotaEnds, QuotaLedger
from scheduler_core.policy.reservation import Timeline, _WholeNodes
from scheduler_core.policy.snapshot import AdmittedAs, PendingJob, Snapshot

from .builders import H, make_cluster, make_job
from .test_properties import SETTINGS, describe, worlds


def _nonzero(values: dict[Any, int]) -> dict[Any, int]:
    """Usage and pools read as ``get(key, 0)``: a key at zero and an absent key mean the same."""
    return {key: value for key, value in values.items() if value}


def _pool_state(cap: Capacity) -> dict[str, tuple[object, ...]]:
    return {flavour: (pool.mask, pool.free, pool.whole, pool.whole_spare, pool.whole_leaf, pool.bfree,
                      pool.bfree_spare, pool.free_units, pool.free_spare, pool.free_unusable, pool.whole_unusable,
                      pool.buckets, pool.usable, pool.holds)
            for flavour, pool in cap.pools.items()}


def assert_same_index(snap: Snapshot, index: CarriedIndex, now: float) -> None:
    working = index.working(snap.nodes, snap.teams, snap.running, now)
    cap, ledger, timeline = working.cap, working.ledger, working.timeline
    assert working.totals == cluster_capacity(snap.nodes)
    fresh_cap = Capacity(snap.nodes, snap.running)
    fresh_ledger = QuotaLedger(snap.teams, snap.running)
    fresh_timeline = Timeline(fresh_cap, snap.running, now)
    assert [n.name for n in cap.nodes] == [n.name for n in fresh_cap.nodes]
    assert (cap.free_cpu, cap.free_mem) == (fresh_cap.free_cpu, fresh_cap.free_mem)
    assert _pool_state(cap) == _pool_state(fresh_cap)
    assert _nonzero(ledger.usage) == _nonzero(fresh_ledger.usage)
    assert _nonzero(ledger.nominal_usage) == _nonzero(fresh_ledger.nominal_usage)
    assert _nonzero(ledger.pool) == _nonzero(fresh_ledger.pool)
    assert _nonzero(ledger.borrowed) == _nonzero(fresh_ledger.borrowed)
    assert ledger.members == fresh_ledger.members and ledger.version == {} and ledger.teams is snap.teams
    assert timeline.times == fresh_timeline.times
    assert_same_quota_ends(snap, working.quota_ends, fresh_ledger, now)


def assert_same_quota_ends(snap: Snapshot, ends: QuotaEnds | None, ledger: QuotaLedger, now: float) -> None:
    """The carried quota holdings give the lists ``QuotaClock`` sorts from every running job, with none leaving
    and with every other job leaving (some before the pass's time, some after); at ``now`` and later, when jobs
    have run past their limits."""
    assert ends is not None
    jobs = {job.request.id: job for job in snap.running}
    for at in (now, now + 3 * H):
        leaving = {job.request.id: at + (-30.0 if i % 4 else 45.0) for i, job in enumerate(snap.running) if i % 2}
        for gone in ({}, leaving):
            fresh = QuotaClock(ledger, {}, [
                (gone.get(job.request.id, max(job.started_at + job.request.time_limit_s, at)), job.request.team,
                 job.placement.flavour, job.request.units, job.admitted_as is AdmittedAs.NOMINAL)
                for job in snap.running if job.admitted_as is not AdmittedAs.SCAVENGER])
            assert ends.at(at, gone, jobs) == {key: rows for key, rows in fresh.ends.items() if rows}


def _events(data: Any, snap: Snapshot, step: int, now: float) -> Snapshot:
    """Between two passes: maybe a node fails or comes back, maybe a job arrives."""
    nodes = list(snap.nodes)
    for _ in range(data.draw(st.integers(0, 2), label="node events")):
        k = data.draw(st.integers(0, len(nodes) - 1), label="node")
        health = data.draw(st.sampled_from([Health.REPAIR, Health.READY, Health.SUSPECT]), label="health")
        nodes[k] = replace(nodes[k], health=health)
    pending = list(snap.pending)
    flavours = sorted({f for n in nodes for f in n.capacity})
    for k in range(data.draw(st.integers(0, 2), label="arrivals")):
        flavour = data.draw(st.sampled_from(flavours), label="flavour")
        team = data.draw(st.sampled_from(sorted(snap.teams)), label="team")
        request = (make_job(f"n{step}-{k}").team(team).flavour(flavour).pods(1, 1)
                   .limit(data.draw(st.sampled_from([0.5 * H, 2 * H]), label="limit")).submitted(now).build())
        pending.append(PendingJob(request, now))
    return replace(snap, nodes=tuple(nodes), pending=tuple(pending))


@SETTINGS
@given(worlds(), st.data())
def test_carried_index_equals_a_rebuild_after_every_pass(drawn: Any, data: Any) -> None:
    world, gaps = drawn
    note(describe(world, gaps))
    index = CarriedIndex()
    world.snapshot = replace(world.snapshot, carried=index)
    now = 0.0
    for step, gap in enumerate(gaps + gaps):
        snap = world.snapshot
        assert_same_index(snap, index, now)
        result = run_cycle(snap, now)
        assert result == run_cycle(replace(snap, carried=None), now)
        world.apply(result)
        now += gap
        world.advance(now)
        world.snapshot = _events(data, world.snapshot, step, now)
    assert index.rebuilds >= 1


def test_a_pass_with_nothing_changed_rebuilds_nothing() -> None:
    """The carried base is changed by job changes only: the same snapshot twice costs no update."""
    nodes = make_cluster().block("b0", 4, per_leaf=2).build()
    index = CarriedIndex()
    snap = Snapshot(nodes=nodes, teams={}, pending=(), running=(), carried=index)
    index.working(snap.nodes, snap.teams, snap.running, 0.0)
    index.working(snap.nodes, snap.teams, snap.running, 10.0)
    assert (index.rebuilds, index.updates) == (1, 0)


def _whole_state(whole: Any) -> tuple[object, ...]:
    return (whole.cur, whole.block, whole.spare, whole.leaf, whole.leaf_spare, whole.all, whole.all_spare)


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 40), st.sampled_from([0.0, 0.5 * H, 3 * H]),
                          st.sampled_from([0.5 * H, 2 * H, 8 * H])), min_size=1, max_size=12))
def test_the_whole_node_index_equals_a_rebuild_after_every_booking(bookings: list[tuple[int, float, float]]) -> None:
    """``Timeline.book`` keeps the flavour's whole-node index (``_WholeNodes``) node by node for a small gang and
    drops it for a big one (rebuilt when next asked): either way it is what the unit times alone give."""
    nodes = make_cluster().blocks("b", 3, 20, per_leaf=4, spares=1).build()
    cap = Capacity(nodes, ())
    timeline = Timeline(cap, (), 0.0)
    pool = cap.pools["h100"]
    for k, (pods, not_before, duration) in enumerate(bookings):
        request = make_job(f"g{k}").flavour("h100").pods(pods, 8).build()
        slot = timeline.earliest(request, "h100", not_before=not_before, widen_at=0.0, block_cap=None)
        if slot is None:
            continue
        timeline.book(slot, duration)
        rebuilt = _WholeNodes(pool, [max(row) for row in timeline.times["h100"]])
        assert _whole_state(timeline._whole_nodes(pool)) == _whole_state(rebuilt)
