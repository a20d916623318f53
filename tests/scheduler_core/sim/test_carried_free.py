"""The baselines' carried free map (``sim.freemap.CarriedFree``) equals a from-scratch rebuild after every pass.

Random worlds (the policy properties' ``worlds``) run each baseline for several passes with its decisions
applied, and between passes jobs end and leave (``World.advance``), nodes fail and come back and jobs arrive
(``test_carried._events``). After each pass the carried map and quota usage must equal ``FreeMap(nodes,
running)`` and a recount, and the baseline must decide exactly as it does on a fresh carry.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from scheduler_core.policy.snapshot import Snapshot
from scheduler_core.sim import baselines
from scheduler_core.sim.baselines import BASELINES
from scheduler_core.sim.freemap import CarriedFree, FreeMap

from ..policy.test_carried import _events, _nonzero
from ..policy.test_properties import SETTINGS, describe, worlds
from .builders import job, nodes, snapshot, unhealthy


def _assert_same(carried: CarriedFree, snap: Snapshot) -> None:
    fresh = FreeMap(snap.nodes, snap.running)
    assert carried.free.masks == fresh.masks
    assert _nonzero(carried.free.total) == _nonzero(fresh.total)
    usage: dict[tuple[str, str], int] = {}
    for running in snap.running:
        key = (running.request.team, running.placement.flavour)
        usage[key] = usage.get(key, 0) + running.request.units
    assert _nonzero(carried.usage) == _nonzero(usage)
    # The earliest time limit of a job not terminating, which spares most passes the scan for jobs at their limit.
    assert carried.first_limit_end() == min((r.limit_end for r in snap.running if not r.terminating),
                                            default=float("inf"))


@SETTINGS
@given(worlds(), st.sampled_from(sorted(BASELINES)), st.data())
def test_the_carried_free_map_equals_a_rebuild_after_every_pass(drawn: Any, name: str, data: Any) -> None:
    world, gaps = drawn
    note(describe(world, gaps))
    policy = BASELINES[name]
    carried = CarriedFree()
    now = 0.0
    for step, gap in enumerate(gaps + gaps):
        snap = world.snapshot
        _assert_same(carried.update(snap.nodes, snap.running), snap)
        result = policy(snap, now)
        baselines._CARRIED = CarriedFree()              # the same pass on a fresh carry decides the same
        assert policy(snap, now) == result
        world.apply(result)
        now += gap
        world.advance(now)
        world.snapshot = _events(data, world.snapshot, step, now)


def test_a_unit_passed_from_an_ended_job_to_a_new_one_stays_taken() -> None:
    """In one update a job ends and another starts on its units: the units end up taken, whatever the order."""
    cluster = nodes("b0", 1)
    old = job("old").gpus(8).limit(10_000).running(["b0-n00"])
    new = job("new").gpus(8).limit(10_000).running(["b0-n00"])
    carried = CarriedFree()
    first = snapshot(cluster, running=[old], pending=[])
    carried.update(first.nodes, first.running)
    second = snapshot(cluster, running=[new], pending=[])
    carried.update(first.nodes, second.running)
    assert carried.free.free_units("h100") == 0
    assert carried.usage[("a", "h100")] == 8


def test_new_nodes_rebuild_the_map() -> None:
    """Nodes in a new tuple (a node changed health) are never carried over: the map is built afresh, so a node
    gone to repair no longer counts its free units (a carried map would still count all 16)."""
    cluster = nodes("b0", 2)
    carried = CarriedFree()
    first = snapshot(cluster, pending=[])
    carried.update(first.nodes, first.running)
    assert carried.free.free_units("h100") == 16
    sick = snapshot([cluster[0], unhealthy(cluster[1])], pending=[])
    carried.update(sick.nodes, sick.running)
    assert carried.free.free_units("h100") == 8
