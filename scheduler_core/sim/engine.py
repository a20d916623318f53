"""The discrete-event engine: a workload through the real controller, store and sim executor, in virtual time.

Time jumps from one thing that happens to the next — a submission, a pod that ends (exits, is killed at the end of
its grace, is lost), a node failure or repair, a rule with a clock (readiness timeout, time limit) — and the
controller steps at most once per scheduler tick (10 s of virtual time, like the live loop), only when something
happened. Pod starts and checkpoints free no units, so they do not wake the controller: they wait, time-stamped,
for its next step. While jobs wait the controller also steps every minute even if nothing did (backing off to five
minutes while nothing changes), so the policy's own clocks (topology widening, starvation promotion, minimum run
time) are honoured. A run is deterministic for a given workload and seed: every draw comes from a seeded generator
or a hash, and every collection the engine walks has a fixed order.
"""

from __future__ import annotations

import heapq
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..controller import Controller, ControllerConfig
from ..executor.sim import SimExecutor
from ..model.cluster import Node
from ..model.flavours import FLAVOURS
from ..policy.types import Policy
from ..policy.decisions import CycleResult, Reason, Wait
from .baselines import BASELINES
from ..policy.cadence import PlanEvery, SkipWhenIdle
from ..runtime.heap import fewer_young_collections
from ..runtime.node_lifecycle import Signal
from .behaviour import GPU_HOURS_PER_FAILURE, REPAIR_S, FailureModel, NodeFault, ScriptedFailures, behaviour_for
from .recorder import RecordingStore
from .records import RunRecord, Series
from .waste import Held, Holder, WasteLedger
from .workloads.types import Workload

POLICIES = ("shoal", "fifo", "kueue", "easy")


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int = 0
    tick_s: float = 10.0
    idle_step_s: float = 60.0
    idle_step_max_s: float = 300.0
    gpu_hours_per_failure: float | None = GPU_HOURS_PER_FAILURE
    repair_s: float = REPAIR_S
    #: Stop this long after the last submission even if measured jobs are still unfinished.
    horizon_s: float = 30 * 86400.0
    readiness_timeout_s: float = 600.0
    progress: bool = False
    #: Split the idle GPU-hours by waiting job and by holder (``--explain-waste``, ``waste``): accounting only,
    #: off unless asked, since a long queue would pay for a share per waiting job every pass.
    explain_waste: bool = False


def resolve_policy(name: str) -> Policy:
    """``shoal`` is the real ``run_cycle`` (estimates planned every 30 s, see ``cadence``); the rest are the
    baselines."""
    if name == "shoal":
        from ..policy.cycle import run_cycle
        return PlanEvery(run_cycle)
    if name in BASELINES:
        return BASELINES[name]
    raise ValueError(f"unknown policy {name!r}; use one of: {', '.join(POLICIES)}")


def block_gpus(nodes: list[Node]) -> int:
    """Whole GPUs in the largest block (spares included): the unit of the placement rule."""
    per_block: dict[str, int] = {}
    for node in nodes:
        whole = sum(units for flavour, units in node.capacity.items() if not FLAVOURS[flavour].is_mig)
        per_block[node.block] = per_block.get(node.block, 0) + whole
    return max(per_block.values(), default=0)


def simulate(workload: Workload, policy: str | Policy, config: SimConfig = SimConfig(), *,
             policy_name: str | None = None, faults: Sequence[NodeFault] | None = None) -> RunRecord:
    """Replay ``workload`` under ``policy`` and return everything that happened. ``faults``, when given, replaces
    the random node failures (tests script them). The collector runs less often meanwhile (``runtime.heap``)."""
    with fewer_young_collections():
        return _replay(workload, policy, config, policy_name, faults)


def _replay(workload: Workload, policy: str | Policy, config: SimConfig, policy_name: str | None,
            faults: Sequence[NodeFault] | None) -> RunRecord:
    started = time.perf_counter()
    decide = SkipWhenIdle(resolve_policy(policy) if isinstance(policy, str) else policy)
    name = policy if isinstance(policy, str) else (policy_name or str(getattr(policy, "__name__", "policy")))
    nodes = workload.cluster.expand()
    quotas = {team.name: {f: q.nominal for f, q in team.quotas.items()} for team in workload.teams.teams}
    store = RecordingStore(nodes, quotas, seed=config.seed, readiness_timeout_s=config.readiness_timeout_s)
    store.sync_nodes(nodes)
    store.sync_teams(workload.teams.teams)
    jobs = workload.jobs
    t0 = min(jobs[0].submit_at, workload.window[0])
    executor = SimExecutor(behaviour_for(store.workload_jobs, config.seed), now=t0)
    store.lost_units_s = lambda job_id: executor.stats.lost_gpu_s.get(job_id, 0.0)
    controller = Controller(store, executor, decide, nodes=nodes, config=ControllerConfig(
        readiness_timeout_s=config.readiness_timeout_s,
        gpu_hours_per_interruption=config.gpu_hours_per_failure or GPU_HOURS_PER_FAILURE))

    last_submit = jobs[-1].submit_at
    horizon = last_submit + config.horizon_s
    failures: FailureModel | ScriptedFailures = (
        FailureModel(nodes, config.seed, gpu_hours_per_failure=config.gpu_hours_per_failure,
                     repair_s=config.repair_s, start=t0) if faults is None else ScriptedFailures(faults))
    repairs: list[tuple[float, str]] = []
    down: set[str] = set()
    timers: list[float] = []
    series = Series(store.flavours)
    progress = _Progress(config.progress, t0, last_submit)

    tick = config.tick_s
    next_job = 0
    last_step = -math.inf
    idle_gap = config.idle_step_s
    cycles = node_failures = 0
    preempt_reasons: dict[str, int] = {}
    waste = WasteLedger({f: FLAVOURS[f].units_per_gpu for f in store.flavours}, explain=config.explain_waste)
    while next_job < len(jobs) or store.measured_open > 0:
        keepalive = last_step + idle_gap if store.pending_count > 0 else math.inf
        while timers and timers[0] <= last_step:
            heapq.heappop(timers)
        t = min(jobs[next_job].submit_at if next_job < len(jobs) else math.inf, failures.peek(),
                repairs[0][0] if repairs else math.inf, timers[0] if timers else math.inf, keepalive)
        # Pod starts and checkpoints free no units: let them happen unseen until something that matters.
        ended = executor.advance_to_pod_end(min(t, horizon))
        if ended is not None:
            t = min(t, ended)
        if t == math.inf or t > horizon:
            break
        at = max(math.ceil(t / tick) * tick, last_step + tick)
        while next_job < len(jobs) and jobs[next_job].submit_at <= at:
            store.submit_workload_job(jobs[next_job])
            next_job += 1
        # Failures and repairs take the live path (``runtime.node_lifecycle``): a failed node goes to repair; a
        # repaired one to burn-in, and the controller's burn-in puts it back to ready.
        while min(failures.peek(), repairs[0][0] if repairs else math.inf) <= at:
            if repairs and repairs[0][0] <= failures.peek():
                when, node = heapq.heappop(repairs)
                down.discard(node)
                executor.repair_node(node)
                controller.health.signal(node, Signal.REPAIRED, "repaired", when)
                continue
            fault = failures.pop()
            if fault.node in down:
                continue
            down.add(fault.node)
            node_failures += 1
            heapq.heappush(repairs, (fault.repair_at, fault.node))
            controller.health.signal(fault.node, Signal.FAILED, "simulated hardware failure", fault.at)
            executor.fail_node(fault.node, fault.at)
        before = store.changes
        step = controller.step(at)
        for moved in step.health:
            if moved.signal is Signal.BURNIN_FAILED and moved.node not in down:
                # A burn-in failed on a node that is up (lost again meanwhile): it goes back to repair.
                down.add(moved.node)
                heapq.heappush(repairs, (at + config.repair_s, moved.node))
        cycles += 1
        if step.cycle is not None and step.preempted and at >= workload.window[0]:
            applied = set(step.preempted)
            for preempt in step.cycle.preempts:
                if preempt.job_id in applied:
                    reason = preempt.reason.value
                    preempt_reasons[reason] = preempt_reasons.get(reason, 0) + 1
        for deadline in store.deadlines:
            heapq.heappush(timers, deadline)
        store.deadlines.clear()
        idle_gap = config.idle_step_s if store.changes != before else min(idle_gap * 2, config.idle_step_max_s)
        state = store.cluster_state()
        if last_step >= workload.window[0]:
            waste.charge(at - last_step)
        waits = _fitting_waits(store, state, step.cycle)
        idle = {f: healthy - allocated for f, (allocated, healthy, _) in state.items()}
        waste.open(waits, idle)
        if waits and waste.explains:
            waste.hold(*_held(store, step.cycle, waits, idle))
        series.add(at, store.pending_count, store.holding_count, {
            f: (allocated, healthy, fitting, any(wait.reason.value in ADMISSIBLE for _, wait in waits.get(f, ())))
            for f, (allocated, healthy, fitting) in state.items()})
        last_step = at
        progress.update(at, store.pending_count, store.holding_count, len(jobs) - next_job, store.measured_open)
    progress.close()

    end = max(last_step, workload.window[1])
    logs = sorted(store.logs.values(), key=lambda log: (log.submitted_at, log.id))
    return RunRecord(
        workload=workload.name, policy=name, seed=config.seed, window=workload.window, end=end, quotas=quotas,
        units_per_gpu={f: FLAVOURS[f].units_per_gpu for f in store.flavours}, block_gpus=block_gpus(nodes),
        jobs=logs, series=series, preempt_reasons=preempt_reasons,
        node_failures=node_failures, cycles=cycles, waste=waste,
        wall_s=time.perf_counter() - started, notes=workload.notes)


#: Reasons that say the policy would run the job but for capacity, topology, a reservation or leaving victims.
ADMISSIBLE = frozenset({Reason.WAITING_FOR_CAPACITY.value, Reason.WAITING_FOR_TOPOLOGY.value,
                        Reason.BEHIND_RESERVATION.value, Reason.PREEMPTING_VICTIMS.value,
                        Reason.NODE_UNHEALTHY.value})


def _fitting_waits(store: RecordingStore, state: dict[str, tuple[int, int, bool]],
                   cycle: CycleResult | None) -> dict[str, list[tuple[str, Wait]]]:
    """Per flavour, the pending jobs that would fit its idle units by count (their first flavour): each job's
    workload id and its wait."""
    if cycle is None or not any(fitting for _, _, fitting in state.values()):
        return {}
    found: dict[str, list[tuple[str, Wait]]] = {}
    logs = store.logs
    room = {f: healthy - allocated for f, (allocated, healthy, fitting) in state.items() if fitting}
    for wait in cycle.waits:
        log = logs.get(wait.job_id)
        if log is None:
            continue
        flavour = log.flavours[0]
        idle = room.get(flavour)
        if idle is not None and log.units <= idle:
            found.setdefault(flavour, []).append((log.id, wait))
    return found


def _held(store: RecordingStore, cycle: CycleResult | None, fitting: dict[str, list[tuple[str, Wait]]],
          idle: dict[str, int]) -> tuple[list[Held], dict[str, tuple[str, Wait]]]:
    """What keeps the idle units of each flavour with fitting waits idle (``waste.Holder``): the nodes the cycle
    reserved (each node's idle units charged to the first reservation that names it), then idle whole nodes, then
    the rest; and each reserved job's flavour and wait, by workload id."""
    held: list[Held] = []
    reserved: dict[str, tuple[str, Wait]] = {}
    if cycle is None:
        return held, reserved
    logs = store.logs
    waits = {wait.job_id: wait for wait in cycle.waits} if cycle.reservations else {}
    for flavour in fitting:
        seen: set[str] = set()
        reserved_units = reserved_whole = 0
        for reservation in cycle.reservations:
            if reservation.flavour != flavour:
                continue
            units, whole = store.idle_on([n for n in reservation.nodes if n not in seen], flavour)
            seen.update(reservation.nodes)
            log = logs.get(reservation.job_id)
            job_id = log.id if log is not None else reservation.job_id
            if units:
                held.append(Held(flavour, Holder.RESERVED, units, job_id))
                reserved_units += units
                reserved_whole += whole
            wait = waits.get(reservation.job_id)
            if wait is not None:
                reserved[job_id] = (flavour, wait)
        whole_nodes = store.whole_free[flavour] - reserved_whole
        held.append(Held(flavour, Holder.WHOLE_NODES, whole_nodes))
        held.append(Held(flavour, Holder.PARTLY_USED, max(0, idle.get(flavour, 0)) - reserved_units - whole_nodes))
    return held, reserved


class _Progress:
    """A progress bar on stderr over virtual time (shown only for runs longer than a couple of seconds)."""

    def __init__(self, enabled: bool, start: float, last_submit: float) -> None:
        self._bar = None
        self._start = start
        self._total = max(1, math.ceil((last_submit - start) / 3600.0))
        if enabled:
            from tqdm import tqdm
            self._bar = tqdm(total=self._total, unit="h", desc="simulating", file=sys.stderr, delay=2.0,
                             dynamic_ncols=True, leave=False)
        self._shown = 0

    def update(self, now: float, pending: int, running: int, to_submit: int, open_jobs: int) -> None:
        if self._bar is None:
            return
        hours = min(self._total, int((now - self._start) // 3600))
        if hours > self._shown:
            self._bar.update(hours - self._shown)
            self._shown = hours
            if to_submit == 0:
                self._bar.set_description("draining")
            self._bar.set_postfix(pending=pending, running=running, unfinished=open_jobs, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
