"""The engine drives the real controller: same seed, same decisions; failures restart from the last checkpoint
on the block's hot spare; preemption checkpoints and requeues; time limits stop jobs."""

from __future__ import annotations

import pytest

from scheduler_core.policy.decisions import Reason, Wait
from scheduler_core.sim.behaviour import NodeFault
from scheduler_core.sim.engine import SimConfig, simulate
from scheduler_core.sim.metrics import summarise
from scheduler_core.sim.records import RunRecord
from scheduler_core.sim.waste import Held, Holder, WasteLedger, explain, explain_holders

from . import tiny

POLICIES = ["shoal", "fifo", "kueue", "easy"]


def mixed_workload() -> tiny.Workload:
    jobs = []
    for i in range(40):
        gpus = [1, 2, 4, 8, 16, 24][i % 6]
        jobs.append(tiny.job(f"j{i:02d}", team="ab"[i % 2], at=i * 97.0, gpus=gpus, work=1800 + (i * 613) % 5400,
                             limit=4 * 3600))
    jobs.append(tiny.job("overruns", team="a", at=20_000.0, gpus=8, work=7200.0, limit=3600.0))   # alone, late
    return tiny.workload(*jobs)


def decisions(record: RunRecord) -> list[object]:
    return [(job.id, job.admissions, job.interruptions, job.running_at, job.finished_at, job.final_state)
            for job in record.jobs]


@pytest.mark.parametrize("policy", POLICIES)
def test_the_same_workload_and_seed_give_the_same_decisions(policy: str) -> None:
    config = SimConfig(seed=7, gpu_hours_per_failure=50.0, repair_s=3600.0)   # failures often, to exercise them
    first = simulate(mixed_workload(), policy, config)
    second = simulate(mixed_workload(), policy, config)
    assert first.node_failures > 0
    assert decisions(first) == decisions(second)
    assert first.series == second.series
    other = simulate(mixed_workload(), policy, SimConfig(seed=8, gpu_hours_per_failure=50.0, repair_s=3600.0))
    assert decisions(other) != decisions(first)


def test_a_failed_gang_restarts_on_its_blocks_spare_from_its_last_checkpoint() -> None:
    long_job = tiny.job("train", gpus=24, work=4 * 3600.0, interval=600.0, cost=20.0)
    first = simulate(tiny.workload(long_job), "fifo", SimConfig(gpu_hours_per_failure=None), faults=[])
    (admission,) = first.jobs[0].admissions
    victim = admission.nodes[1]
    record = simulate(tiny.workload(long_job), "fifo", SimConfig(gpu_hours_per_failure=None),
                      faults=[NodeFault(at=5000.0, node=victim, repair_at=10 * 86400.0)])
    log = record.jobs[0]
    assert log.final_state == "SUCCEEDED"
    assert [i.cause for i in log.interruptions] == ["failure"]
    assert 0 < log.interruptions[0].lost_gpu_s <= 600.0 * 24 + 1e-6     # at most one interval of work
    restart = log.admissions[1]
    block = victim.rsplit("-", 1)[0]
    assert victim not in restart.nodes
    assert f"{block}-n03" in restart.nodes                              # the block's hot spare
    assert restart.blocks == 1
    assert 0 < restart.at - 5000.0 <= 20.0                                # restarted within two ticks
    late = log.finished_at - first.jobs[0].finished_at
    assert late >= log.interruptions[0].lost_gpu_s / 24


def test_a_reclaimed_borrower_checkpoints_in_its_grace_and_loses_nothing() -> None:
    borrower = tiny.job("borrower", team="a", at=0, gpus=48, work=6 * 3600.0, cost=30.0)
    owner = tiny.job("owner", team="b", at=3600.0, gpus=24, work=3600.0)
    record = simulate(tiny.workload(borrower, owner), "kueue", SimConfig(gpu_hours_per_failure=None))
    logs = {job.id: job for job in record.jobs}
    assert [(i.cause, i.lost_gpu_s) for i in logs["borrower"].interruptions] == [("preemption", 0.0)]
    assert logs["borrower"].admissions[0].admitted_as == "borrowed"
    assert logs["borrower"].final_state == "SUCCEEDED"
    wait = logs["owner"].wait_s(record.end)
    assert 30.0 <= wait <= 60.0          # the victim's checkpoint (30 s) plus up to two ticks
    assert logs["owner"].in_quota
    summary = summarise(record)
    assert summary["preemptions"] == 1 and summary["gpu_hours_lost"] == 0.0


def test_a_job_is_stopped_at_its_time_limit() -> None:
    overrun = tiny.job("overrun", gpus=8, work=7200.0, limit=3600.0)
    record = simulate(tiny.workload(overrun), "easy", SimConfig(gpu_hours_per_failure=None))
    log = record.jobs[0]
    assert log.final_state == "TIMED_OUT"
    assert 3600.0 <= log.finished_at - log.running_at <= 3600.0 + 20.0 + 300.0


def test_fitting_work_waiting_next_to_idle_gpus_lowers_utilization_while_waiting() -> None:
    # FIFO: a whole-cluster gang heads the queue behind a running 8-GPU job; small jobs wait behind it on idle GPUs.
    jobs = [tiny.job("first", gpus=8, at=0, work=7200.0), tiny.job("gang", gpus=64, at=10, work=600.0)]
    jobs += [tiny.job(f"small{i}", gpus=1, at=20 + i, work=600.0, limit=1800.0) for i in range(5)]
    fifo = summarise(simulate(tiny.workload(*jobs), "fifo", SimConfig(gpu_hours_per_failure=None)))
    easy = summarise(simulate(tiny.workload(*jobs), "easy", SimConfig(gpu_hours_per_failure=None)))
    assert fifo["utilization_while_waiting"] < 0.3
    assert easy["small_job_wait_p50_s"] < fifo["small_job_wait_p50_s"]


def test_the_idle_gpus_of_fitting_waits_are_shared_out_among_the_jobs_that_waited() -> None:
    # FIFO again: the small jobs wait behind the gang on idle GPUs; the gang itself never fits them.
    jobs = [tiny.job("first", gpus=8, at=0, work=7200.0), tiny.job("gang", gpus=64, at=10, work=600.0)]
    jobs += [tiny.job(f"small{i}", gpus=1, at=20 + i, work=600.0, limit=1800.0) for i in range(5)]
    record = simulate(tiny.workload(*jobs), "fifo", SimConfig(gpu_hours_per_failure=None, explain_waste=True))
    assert record.waste is not None
    shares = record.waste.gpu_s
    assert set(shares) == {f"small{i}" for i in range(5)}
    assert sum(shares.values()) / 3600 == pytest.approx(summarise(record)["idle_gpu_hours_while_waiting"],
                                                        rel=0.02)
    top = explain(record, 2)
    assert [row["job"] for row in top] == sorted(shares, key=lambda job: (-shares[job], job))[:2]
    assert top[0]["reason"] and top[0]["team"] == "a" and top[0]["gpus"] == 1
    log = next(job for job in record.jobs if job.id == top[0]["job"])
    assert top[0]["admitted_h"] == [round((a.at - record.window[0]) / 3600, 2) for a in log.admissions]
    assert len(top[0]["admitted_h"]) == 1 and top[0]["interrupted_h"] == []
    assert sum(top[0]["idle_gpu_hours_by_reason"].values()) == pytest.approx(top[0]["idle_gpu_hours"], abs=0.1)
    assert summarise(record)["fitting_wait_hours_by_reason"]          # the same ledger times the waits


@pytest.mark.parametrize(("policy", "holders"), [
    ("easy", [Holder.RESERVED]),
    ("fifo", [Holder.WHOLE_NODES, Holder.PARTLY_USED]),
])
def test_the_same_idle_gpus_are_split_by_what_held_them(policy: str, holders: list[Holder]) -> None:
    # A whole-cluster gang waits for the 4-GPU job ahead of it; a later job too long to run before the gang starts
    # waits beside the 60 idle GPUs. EASY reserves the whole cluster for the gang: the idle GPUs are the
    # reservation's, charged to the gang. FIFO reserves nothing: most are idle whole nodes, the rest the first
    # job's node's.
    jobs = [tiny.job("first", gpus=4, at=0, work=3000.0, limit=7200.0), tiny.job("gang", gpus=64, at=10, work=600.0),
            tiny.job("late", gpus=8, at=20, work=600.0, limit=3 * 3600.0)]
    record = simulate(tiny.workload(*jobs), policy, SimConfig(gpu_hours_per_failure=None, explain_waste=True))
    assert record.waste is not None
    held = explain_holders(record)
    total = summarise(record)["idle_gpu_hours_while_waiting"]
    assert total > 30                     # 60 GPUs for the first job's ~3,000 s
    assert sum(held["by_holder"].values()) == pytest.approx(total, abs=0.2)
    assert sum(held["by_holder"].values()) == pytest.approx(sum(record.waste.gpu_s.values()) / 3600, abs=0.2)
    assert [h for h in Holder if held["by_holder"][h.value] > 0] == holders
    assert held["by_holder"][holders[0].value] > 0.8 * total
    reserved = [(row["job"], row["gpus"], row["reason"]) for row in held["reservations"]]
    assert reserved == ([("gang", 64, "WaitingForCapacity")] if policy == "easy" else [])


@pytest.mark.parametrize(("policy", "idle"), [("easy", True), ("fifo", True), ("shoal", False)])
def test_splitting_the_idle_gpus_is_accounting_only_and_off_unless_asked(policy: str, idle: bool) -> None:
    # The day of the holder test: EASY and FIFO leave GPUs idle beside fitting work, Shoal backfills them.
    jobs = [tiny.job("first", gpus=4, at=0, work=3000.0, limit=7200.0), tiny.job("gang", gpus=64, at=10, work=600.0),
            tiny.job("late", gpus=8, at=20, work=600.0, limit=3 * 3600.0)]
    plain = simulate(tiny.workload(*jobs), policy, SimConfig(gpu_hours_per_failure=None))
    split = simulate(tiny.workload(*jobs), policy, SimConfig(gpu_hours_per_failure=None, explain_waste=True))
    assert {k: v for k, v in summarise(plain).items() if k != "wall_s"} == \
        {k: v for k, v in summarise(split).items() if k != "wall_s"}
    assert (summarise(plain)["idle_gpu_hours_while_waiting"] > 30) is idle
    if idle:                              # the wait hours by reason are kept either way
        assert summarise(plain)["fitting_wait_hours_by_reason"]
    assert plain.waste is not None and plain.waste.gpu_s == {} and plain.waste.held_s == {}
    with pytest.raises(ValueError, match="explain_waste=True"):
        explain(plain)
    with pytest.raises(ValueError, match="explain_waste=True"):
        explain_holders(plain)


def test_a_reservation_s_idle_gpus_are_told_per_reason_it_waited_for() -> None:
    # A gang holds 16 idle GPUs for an hour waiting for capacity, then 8 for ten minutes waiting for its victims.
    ledger = WasteLedger({"h100": 1})
    fits = {"h100": [("small", Wait("s", Reason.QUOTA_FULL, "quota", 1))]}
    for units, seconds, reason in [(16, 3600.0, Reason.WAITING_FOR_CAPACITY), (8, 600.0, Reason.PREEMPTING_VICTIMS)]:
        ledger.open(fits, {"h100": units})
        waits = {"gang": ("h100", Wait("g", reason, str(reason), 1))}
        ledger.hold([Held("h100", Holder.RESERVED, units, "gang")], waits)
        ledger.charge(seconds)
    assert ledger.reserved_s == {("gang", "WaitingForCapacity"): 16 * 3600.0, ("gang", "PreemptingVictims"): 8 * 600.0}
    assert ledger.held_s == {Holder.RESERVED: 16 * 3600.0 + 8 * 600.0}
    assert ledger.reserved_why[("gang", "PreemptingVictims")][1].message == "PreemptingVictims"


def test_a_job_s_idle_gpus_are_told_per_reason_it_waited_for() -> None:
    # A gang shares 16 idle GPUs for an hour waiting for its cohort, then 8 for a minute waiting for its victims:
    # its last reason is PreemptingVictims, yet nearly all its share was spent on CohortFull.
    ledger = WasteLedger({"h100": 1})
    for units, seconds, reason in [(16, 3600.0, Reason.COHORT_FULL), (8, 60.0, Reason.PREEMPTING_VICTIMS)]:
        ledger.open({"h100": [("gang", Wait("g", reason, str(reason), 1))]}, {"h100": units})
        ledger.charge(seconds)
    assert ledger.by_reason == {"gang": {"CohortFull": 16 * 3600.0, "PreemptingVictims": 8 * 60.0}}
    top = ledger.top(1)[0]
    assert top.reason == "PreemptingVictims" and top.gpu_s == 16 * 3600.0 + 8 * 60.0


def test_planning_estimates_on_a_cadence_changes_no_decision() -> None:
    from scheduler_core.policy.cycle import run_cycle
    config = SimConfig(seed=2, gpu_hours_per_failure=200.0, repair_s=3600.0)
    every_pass = simulate(mixed_workload(), run_cycle, config, policy_name="shoal")
    cadenced = simulate(mixed_workload(), "shoal", config)
    assert decisions(every_pass) == decisions(cadenced)


@pytest.mark.parametrize("policy", POLICIES)
def test_skipping_passes_with_nothing_pending_changes_no_decision(policy: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler_core.policy import cadence
    from scheduler_core.sim import engine
    config = SimConfig(seed=4, gpu_hours_per_failure=200.0, repair_s=3600.0)
    skipping = simulate(mixed_workload(), policy, config)
    monkeypatch.setattr(engine, "SkipWhenIdle", lambda p: p)
    assert cadence.SkipWhenIdle is not engine.SkipWhenIdle
    every_pass = simulate(mixed_workload(), policy, config)
    assert decisions(every_pass) == decisions(skipping)
    assert {job.id: job.final_state for job in skipping.jobs}["overruns"] == "TIMED_OUT"


def test_a_warm_up_before_time_zero_runs_like_any_other_time() -> None:
    warm = tiny.job("warm", at=-7200.0, gpus=8, work=3600.0, measured=False)
    later = tiny.job("later", at=-3000.0, gpus=8, work=600.0)
    record = simulate(tiny.workload(warm, later, window=(-3600.0, 0.0)), "kueue", SimConfig(gpu_hours_per_failure=None))
    logs = {job.id: job for job in record.jobs}
    assert logs["warm"].interruptions == [] and logs["later"].interruptions == []
    assert -7200.0 < logs["warm"].running_at < -7200.0 + 120.0
    assert logs["warm"].finished_at < -3000.0


def test_signals_are_counted_by_the_policys_reason() -> None:
    borrower = tiny.job("borrower", team="a", at=0, gpus=48, work=6 * 3600.0, cost=30.0)
    owner = tiny.job("owner", team="b", at=3600.0, gpus=24, work=3600.0)
    overrun = tiny.job("overrun", team="b", at=4000.0, gpus=8, work=7200.0, limit=3600.0)
    summary = summarise(simulate(tiny.workload(borrower, owner, overrun), "kueue",
                                 SimConfig(gpu_hours_per_failure=None)))
    assert summary["signals_by_reason"] == {"Reclaim": 1, "TimeLimit": 1}


def test_a_repaired_node_rejoins_through_the_schedulers_burnin_as_in_the_live_loop() -> None:
    """The simulator's failures take the live path: failed → repair, repaired → burn-in, and only the burn-in's
    pass (``BURNIN_S`` later) makes a node ready, so work that needs it starts after that, not at the repair."""
    from scheduler_core.model.job import Topology
    from scheduler_core.sim.behaviour import BURNIN_S

    big = tiny.job("big", at=200.0, gpus=24, work=600.0, topology=Topology(required="block"))
    down = ("b0-n00", "b0-n01", "b1-n00", "b1-n01")   # no block keeps three working nodes
    record = simulate(tiny.workload(big), "shoal", SimConfig(gpu_hours_per_failure=None),
                      faults=[NodeFault(at=100.0, node=node, repair_at=5000.0) for node in down])

    (admission,) = record.jobs[0].admissions
    assert record.node_failures == 4
    assert 5000.0 + BURNIN_S <= admission.at <= 5000.0 + BURNIN_S + 20.0   # within two ticks of the pass
    assert record.jobs[0].final_state == "SUCCEEDED"
