"""A pass remembers each victim search while no verb changes its working copy (``Preemptor._search``): on random
worlds with a few jobs cloned (a sweep's trials: the same shape, team and limit), over several passes with every
decision applied, it decides exactly as a pass that searches again for every job."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from unittest import mock

from hypothesis import given, note
from hypothesis import strategies as st

from scheduler_core.policy.cycle import run_cycle
from scheduler_core.policy.preemption import Found, VictimSearch
from scheduler_core.policy.stage_preempt import Preemptor

from .builders import H, make_cluster, make_job, make_snapshot, nodes_of
from .test_properties import SETTINGS, describe, worlds

_search = Preemptor._search


def _forgetful(self: Preemptor, *args: Any, **kwargs: Any) -> Found | None:
    self._searched.clear()
    return _search(self, *args, **kwargs)


@SETTINGS
@given(worlds(), st.data())
def test_remembered_searches_decide_as_searching_again(drawn: Any, data: Any) -> None:
    world, gaps = drawn
    pending = list(world.snapshot.pending)
    for i, job in enumerate(data.draw(st.lists(st.sampled_from(pending), max_size=3), label="cloned")):
        for k in range(data.draw(st.integers(1, 4), label="copies")):
            clone = f"{job.request.id}-{i}-{k}"
            pending.append(replace(job, request=replace(job.request, id=clone)))
            world.runtime[clone] = world.runtime[job.request.id]
    world.snapshot = replace(world.snapshot, pending=tuple(pending))
    note(describe(world, gaps))
    now = 0.0
    for gap in gaps:
        result = run_cycle(world.snapshot, now)
        with mock.patch.object(Preemptor, "_search", _forgetful):
            assert run_cycle(world.snapshot, now) == result
        world.apply(result)
        now += gap
        world.advance(now)


@SETTINGS
@given(clones=st.integers(2, 6), queued_at=st.sampled_from([0.0, -200.0, -300.0, -600.0]),
       young=st.sampled_from([None, -100.0, -400.0]), gang_pods=st.integers(9, 10),
       other=st.sampled_from([None, (1, 8), (2, 8), (1, 2)]), limit=st.sampled_from([None, 0.5 * H]))
def test_a_sweep_reclaiming_from_borrowers_decides_as_searching_again(
        clones: int, queued_at: float, young: float | None, gang_pods: int, other: tuple[int, int] | None,
        limit: float | None) -> None:
    """Trials of one sweep reclaim their team's quota from a cohort whose borrowers are a large gang and maybe a
    young job near their size, beside another job of theirs; some trials may have a shorter limit. Remembering
    searches must decide as searching again, and never search more."""
    nodes = nodes_of("b0", 4) + nodes_of("b1", 4) + nodes_of("b2", 4)
    builder = (make_snapshot(make_cluster().blocks("b", 3, nodes=4)).team("fraud", h100=48).team("search", h100=48)
               .run(make_job("G").team("search").pods(gang_pods, 8), nodes[:gang_pods], admitted="borrowed",
                    started=-4000)
               .run(make_job("y").team("search").pods(1, 8), nodes[gang_pods], admitted="borrowed" if young else
                    "nominal", started=young if young is not None else -4000))
    for k, node in enumerate(nodes[gang_pods + 1:]):       # the rest of the cluster: search's nominal work
        builder = builder.run(make_job(f"n{k}").team("search").pods(1, 8), node, started=-4000)
    trials = []
    for k in range(clones):
        job = make_job(f"t{k}").pods(1, 1)
        trials.append((job.limit(limit) if limit is not None and k % 2 else job).pending(queued_at=queued_at))
    if other is not None:
        trials.insert(1, make_job("o").pods(*other).pending(queued_at=queued_at))
    snap = builder.pending(*trials).build()
    counted: list[int] = []
    run = VictimSearch.run
    with mock.patch.object(VictimSearch, "run", lambda self, eligible: counted.append(1) or run(self, eligible)):
        result = run_cycle(snap, 0.0)
        remembered = len(counted)
        with mock.patch.object(Preemptor, "_search", _forgetful):
            assert run_cycle(snap, 0.0) == result
    assert remembered <= len(counted) - remembered


def test_a_search_is_remembered_only_while_the_copy_and_the_question_stay_the_same() -> None:
    """The same question on an unchanged working copy is answered from memory; any verb, or another end for the
    job (a reservation it might run into), asks again."""
    from scheduler_core.policy.placement import PlaceContext
    from scheduler_core.policy.snapshot import Band
    from scheduler_core.policy.stage_preempt import Strategy
    from scheduler_core.policy.working_copy import WorkingCopy

    snap = (make_snapshot(make_cluster().blocks("b", 3, nodes=4)).team("fraud", h100=48).team("search", h100=48)
            .run(make_job("G").team("search").pods(10, 8), nodes_of("b0", 4) + nodes_of("b1", 4) + nodes_of("b2", 2),
                 admitted="borrowed", started=-4000)
            .run(make_job("n").team("search").pods(2, 8), nodes_of("b2", 2, start=2), started=-4000)
            .pending(make_job("a").pods(1, 1)).build())
    work = WorkingCopy(snap, 0.0)
    preemptor = Preemptor(work)
    pending = snap.pending[0]
    pool = work.cap.pools["h100"]
    verdict = work.ledger.verdict(pending.request, "h100")
    assert verdict.reclaim
    eligible = preemptor._eligible_victims(pending.request, pool, verdict, Band.GUARANTEED, Strategy.NOW)
    counted: list[int] = []
    run = VictimSearch.run
    with mock.patch.object(VictimSearch, "run", lambda self, e: counted.append(1) or run(self, e)):
        def ask(end: float = H) -> Found | None:
            return preemptor._search(pending, pool, verdict, PlaceContext(end=end), True, eligible)

        first = ask()
        assert first is not None and [v.id for v in first.victims] == ["G"]
        assert ask() is first and len(counted) == 1
        assert ask(end=2 * H) == first and len(counted) == 2       # another question
        work.release(snap.running[1], 300.0)                       # a verb: the copy moved on
        assert ask() == first and len(counted) == 3
