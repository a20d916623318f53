"""The controller with ``MemoryStore`` + ``SimExecutor`` + a fake clock, driven by a small real policy.

Each test tells one story of DESIGN §3.3 end to end and checks the store's record, the executor's view and the
event log, never the controller's internals.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from scheduler_core.controller import Controller, ControllerConfig, StepReport
from scheduler_core.executor.base import LaunchRequest
from scheduler_core.auth.job_tokens import JobTokens
from scheduler_core.auth.memory import MemoryTokenStore
from scheduler_core.auth.tokens import Identity
from scheduler_core.executor.sim import SimBehaviour, SimExecutor
from scheduler_core.job_env import master_port
from scheduler_core.model import Health, JobSpec
from scheduler_core.model.job import JobKind
from scheduler_core.policy.decisions import CycleResult, PreemptReason, Reserve
from scheduler_core.policy.fairshare import decay
from scheduler_core.policy.snapshot import AdmittedAs, PolicyConfig, Snapshot
from scheduler_core.store.memory import MemoryStore
from scheduler_core.store.records import CheckpointRecord, JobRecord, JobState
from scheduler_core.young_daly import gang_mtbf_s, young_daly_interval_s

from .greedy_policy import GreedyPolicy
from .runtime_builders import cluster_nodes, make_spec, team_configs, whole_nodes

B0 = [f"h100-b0-n0{i}" for i in range(4)]    # n03 is the block's hot spare
B1 = [f"h100-b1-n0{i}" for i in range(4)]

Behaviour = SimBehaviour | Callable[[LaunchRequest], SimBehaviour]


class RefusingExecutor(SimExecutor):
    """A SimExecutor whose backend refuses to launch the jobs named in ``refuse`` (as a full disk would)."""

    def __init__(self, behaviour: Callable[[LaunchRequest], SimBehaviour]) -> None:
        super().__init__(behaviour)
        self.refuse: set[str] = set()

    def launch(self, request: LaunchRequest) -> None:
        if request.spec.name in self.refuse:
            raise OSError(28, "No space left on device")
        super().launch(request)


class World:
    """One store, one simulated cluster, one controller, one fake clock. Behaviours are chosen by job name."""

    def __init__(self, *, config: ControllerConfig | None = None, policy_config: PolicyConfig | None = None,
                 default: SimBehaviour | None = None) -> None:
        self.store = MemoryStore(seed=11)
        self.store.sync_nodes(cluster_nodes())
        self.store.sync_teams(team_configs())
        self.behaviours: dict[str, Behaviour] = {}
        self.default = default or SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None)
        self.executor = RefusingExecutor(self._behaviour)
        self.policy = GreedyPolicy()
        self.config = config or ControllerConfig(checkpoint_root="/ckpt")
        self.policy_config = policy_config or PolicyConfig()
        self.job_tokens: JobTokens | None = None
        self.controller = self.new_controller()
        self.now = 0.0

    def new_controller(self, epoch: int = 0) -> Controller:
        return Controller(self.store, self.executor, self.policy, nodes=cluster_nodes(),
                          policy_config=self.policy_config, epoch=epoch, config=self.config,
                          job_tokens=self.job_tokens)

    def _behaviour(self, request: LaunchRequest) -> SimBehaviour:
        chosen = self.behaviours.get(request.spec.name, self.default)
        return chosen if isinstance(chosen, SimBehaviour) else chosen(request)

    def submit(self, spec: JobSpec, behaviour: Behaviour | None = None) -> str:
        if behaviour is not None:
            self.behaviours[spec.name] = behaviour
        return self.store.submit(spec, user="ana", now=self.now).id

    def step(self, at: float | None = None) -> StepReport:
        if at is not None:
            self.now = at
        return self.controller.step(self.now)

    def run_until(self, condition: Callable[[], bool], *, limit: float = 100_000.0, tick: float = 60.0) -> float:
        """Step at every executor event (and at least every ``tick``) until ``condition`` holds."""
        same_instant = 0
        while self.now <= limit:
            self.step()
            if condition():
                return self.now
            upcoming = self.executor.next_event_at()
            later = min(upcoming if upcoming is not None else math.inf, self.now + tick)
            same_instant = same_instant + 1 if later == self.now else 0
            if same_instant > 100:
                pytest.fail(f"time stopped at t={self.now}: every step makes another event at the same instant")
            self.now = later
        pytest.fail(f"condition not reached by t={limit}")

    def job(self, job_id: str) -> JobRecord:
        return self.store.get(job_id)

    def is_(self, job_id: str, *states: JobState) -> Callable[[], bool]:
        return lambda: self.store.get(job_id).state in states

    def events(self, job_id: str, *kinds: str) -> list[tuple[str, str]]:
        return [(e.kind, e.reason) for e in self.store.events(job_id=job_id) if not kinds or e.kind in kinds]


# -- start, env, success -----------------------------------------------------------------------------------------


def test_a_gang_runs_only_once_every_pod_has_started_with_the_job_contract_env() -> None:
    world = World()
    spec = make_spec("train").pods(2, 8).env(DATASET="s3://data/x").build()
    job = world.submit(spec, SimBehaviour(work_s=1000.0, start_latency_s=(5.0, 50.0), checkpoint_interval_s=None))
    assert world.step(0.0).admitted == [job]
    assert world.job(job).state is JobState.ADMITTED
    world.step(10.0)
    assert world.job(job).state is JobState.ADMITTED          # rank 1 has not started yet
    world.step(50.0)
    record = world.job(job)
    assert (record.state, record.started_at) == (JobState.RUNNING, 50.0)
    assert record.placement is not None
    env = world.executor.pod_env(job, 1)
    interval = young_daly_interval_s(60.0, gang_mtbf_s(16))
    assert {k: env[k] for k in ("SHOAL_JOB_ID", "WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                "SHOAL_CHECKPOINT_URI", "SHOAL_CHECKPOINT_INTERVAL", "CUDA_VISIBLE_DEVICES",
                                "DATASET")} == {
        "SHOAL_JOB_ID": job, "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "0",
        "MASTER_ADDR": record.placement.pods[0].node, "MASTER_PORT": str(master_port(job)),
        "SHOAL_CHECKPOINT_URI": f"file:///ckpt/fraud-ml/{job}/", "SHOAL_CHECKPOINT_INTERVAL": str(round(interval)),
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "DATASET": "s3://data/x"}
    world.run_until(world.is_(job, JobState.SUCCEEDED))
    done = world.job(job)
    assert (done.finished_at, done.exit_code) == (1050.0, 0)
    assert world.events(job) == [("admit", "nominal"), ("running", "AllPodsStarted"), ("finish", "SUCCEEDED")]


def test_a_trial_gets_an_api_token_in_its_pods_only_and_it_is_revoked_when_the_job_is_released() -> None:
    world = World()
    tokens = MemoryTokenStore()
    world.job_tokens = JobTokens(tokens, lambda: world.now)
    world.controller = world.new_controller()
    trial = make_spec("trial").build().model_copy(update={"kind": JobKind.TRIAL})
    job, plain = world.submit(trial), world.submit(make_spec("plain").build())
    world.run_until(lambda: world.job(job).state is JobState.RUNNING and world.job(plain).state is JobState.RUNNING)
    token = world.executor.pod_env(job, 0)["SHOAL_API_TOKEN"]
    assert tokens.resolve_token(token) == Identity("ana", trial.team)       # the job's user and team, not admin
    assert "SHOAL_API_TOKEN" not in world.job(job).spec.env                # never in the stored spec
    assert "SHOAL_API_TOKEN" not in world.executor.pod_env(plain, 0)       # only trials report through the API
    world.run_until(world.is_(job, JobState.SUCCEEDED))
    assert tokens.resolve_token(token) is None


def test_the_checkpoint_interval_uses_the_measured_cost_once_known() -> None:
    world = World()
    spec = make_spec("train").pods(1, 8).checkpoint(cost=200.0, uri="s3://bucket/run/").build()
    job = world.submit(spec, SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_interval_s=None,
                                          checkpoint_cost_s=30.0))
    world.step(0.0)
    env = world.executor.pod_env(job, 0)
    assert env["SHOAL_CHECKPOINT_URI"] == "s3://bucket/run/"
    assert env["SHOAL_CHECKPOINT_INTERVAL"] == str(round(young_daly_interval_s(200.0, gang_mtbf_s(8))))
    world.policy.preempt(job, grace_s=60.0)
    world.run_until(lambda: world.executor.running_jobs() == {job} and world.job(job).preemptions == 1)
    relaunched = world.executor.pod_env(job, 0)
    assert relaunched["SHOAL_CHECKPOINT_INTERVAL"] == str(round(young_daly_interval_s(30.0, gang_mtbf_s(8))))


# -- preemption ----------------------------------------------------------------------------------------------------


def test_preemption_checkpoints_requeues_at_the_front_and_resumes_from_the_checkpoint() -> None:
    world = World()
    behaviour = SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None, checkpoint_cost_s=10.0)
    victim = world.submit(make_spec("victim").pods(6, 8).build(), behaviour)
    world.step(0.0)
    assert world.job(victim).admitted_as is AdmittedAs.BORROWED       # 48 GPUs on a 16-GPU nominal quota
    world.now = 100.0
    waiting = world.submit(make_spec("waiting").team("search").pods(6, 8).build(), behaviour)
    world.step(100.0)
    assert world.job(waiting).state is JobState.PENDING
    world.policy.preempt(victim, grace_s=60.0)
    report = world.step(300.0)
    assert report.preempted == [victim]
    signalled = world.job(victim)
    assert (signalled.state, signalled.terminate_by, signalled.requeue_on_exit) == (JobState.TERMINATING, 360.0, True)
    # SIGTERM at 300 → checkpoint of step 300 written at 310 → exit 0 → requeued at the front, ahead of `waiting`
    # (queued at 100), and admitted again in the same step.
    report = world.step(310.0)
    assert report.requeued == [victim] and report.admitted == [victim]
    record = world.job(victim)
    assert record.state is JobState.ADMITTED and record.preemptions == 1 and record.queued_at == 310.0
    assert record.last_checkpoint is not None and record.last_checkpoint.step == 300
    assert world.job(waiting).state is JobState.PENDING
    assert world.executor.progress(victim) == 300.0
    world.run_until(world.is_(victim, JobState.SUCCEEDED))
    assert world.job(victim).finished_at == 310.0 + 700.0
    assert world.events(victim, "preempt", "checkpoint", "requeue") == [
        ("preempt", "Reclaim"), ("checkpoint", "CheckpointWritten"), ("requeue", "Preempted")]


def test_a_job_moved_for_a_gang_comes_back_elsewhere_not_on_the_gangs_nodes() -> None:
    world = World()
    behaviour = SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None, checkpoint_cost_s=10.0)
    moved = world.submit(make_spec("moved").pods(1, 8).build(), behaviour)
    reclaimed = world.submit(make_spec("reclaimed").pods(1, 8).build(), behaviour)
    world.step(0.0)
    left = {world.job(moved).placement.pods[0].node, world.job(reclaimed).placement.pods[0].node}
    world.policy.preempt(moved, PreemptReason.DEFRAGMENT, grace_s=60.0, avoid=tuple(sorted(left)))
    world.policy.preempt(reclaimed, PreemptReason.RECLAIM, grace_s=60.0)
    world.step(100.0)
    report = world.step(110.0)                 # both checkpoint and exit, and are admitted again at once
    assert sorted(report.requeued) == sorted([moved, reclaimed]) and sorted(report.admitted) == sorted(report.requeued)
    assert world.job(moved).avoid_nodes == frozenset(left)
    assert {pod.node for pod in world.job(moved).placement.pods}.isdisjoint(left)
    assert world.job(reclaimed).avoid_nodes == frozenset()


def test_the_policy_reclaims_borrowers_and_usage_is_split_nominal_and_borrowed() -> None:
    half_life = 3600.0
    world = World(policy_config=PolicyConfig(usage_half_life_s=half_life))
    behaviour = SimBehaviour(work_s=500.0, start_latency_s=0.0, checkpoint_interval_s=None, checkpoint_cost_s=None)
    nominal = world.submit(make_spec("nominal").pods(2, 8).build(), behaviour)
    borrowed = world.submit(make_spec("borrowed").pods(1, 8).build(),
                            SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_cost_s=None))
    world.step(0.0)
    assert (world.job(nominal).admitted_as, world.job(borrowed).admitted_as) == (
        AdmittedAs.NOMINAL, AdmittedAs.BORROWED)
    world.policy.reclaim_borrowed = True
    assert world.step(100.0).preempted == [borrowed]
    world.policy.reclaim_borrowed = False
    world.run_until(world.is_(nominal, JobState.SUCCEEDED))
    assert world.job(borrowed).preemptions == 1
    usage = world.store.usage(team="fraud-ml")
    by_kind = {kind: sum(u.gpu_seconds for u in usage if u.admitted_as is kind) for kind in AdmittedAs}
    assert by_kind[AdmittedAs.NOMINAL] == 16 * 500.0
    first_borrowed = next(u for u in usage if u.job_id == borrowed)
    assert (first_borrowed.admitted_as, first_borrowed.start, first_borrowed.end, first_borrowed.units) == (
        AdmittedAs.BORROWED, 0.0, 100.0, 8)
    # The fair-share history the policy sees is the ledger decayed with the configured half-life.
    later = world.now + 7200.0
    expected = sum(decay(u.gpu_seconds, later - u.end, half_life) for u in usage)
    snapshot = world.controller.build_snapshot(later)
    assert snapshot.teams["fraud-ml"].decayed_usage["gpu"] == pytest.approx(expected)
    assert snapshot.teams["search"].decayed_usage.get("gpu", 0.0) == 0.0


def test_a_relabel_changes_the_label_keeps_the_job_running_and_splits_its_usage() -> None:
    world = World()
    behaviour = SimBehaviour(work_s=500.0, start_latency_s=0.0, checkpoint_interval_s=None, checkpoint_cost_s=None)
    job = world.submit(make_spec("q").pods(1, 8).build(), behaviour)
    world.step(0.0)
    assert world.job(job).admitted_as is AdmittedAs.NOMINAL
    world.policy.relabel(job, AdmittedAs.BORROWED, for_job="notebook-1")
    world.step(200.0)
    record = world.job(job)
    assert (record.state, record.admitted_as, record.labelled_at) == (JobState.RUNNING, AdmittedAs.BORROWED, 200.0)
    assert ("relabel", "borrowed") in world.events(job, "relabel")
    world.run_until(world.is_(job, JobState.SUCCEEDED))
    assert sorted((u.admitted_as, u.start, u.end) for u in world.store.usage()) == [
        (AdmittedAs.BORROWED, 200.0, 500.0), (AdmittedAs.NOMINAL, 0.0, 200.0)]


def test_a_time_limit_preemption_ends_the_job_as_timed_out() -> None:
    world = World()
    job = world.submit(make_spec("long").pods(1, 8).time_limit(120.0).grace(30.0).build(),
                       SimBehaviour(work_s=10_000.0, start_latency_s=0.0, checkpoint_cost_s=5.0,
                                    checkpoint_interval_s=None))
    world.run_until(world.is_(job, JobState.TIMED_OUT))
    record = world.job(job)
    assert record.exit_code == 0 and record.preemptions == 0
    assert ("preempt", "TimeLimit") in world.events(job)
    assert world.events(job)[-1] == ("finish", "TIMED_OUT")


# -- failures ------------------------------------------------------------------------------------------------------


def test_a_node_failure_restarts_the_gang_on_the_blocks_spare_avoiding_the_node() -> None:
    world = World()
    behaviour = SimBehaviour(work_s=5000.0, start_latency_s=0.0, checkpoint_interval_s=100.0, checkpoint_cost_s=5.0)
    gang = world.submit(make_spec("gang").pods(2, 8).max_restarts(0).build(), behaviour)
    filler = world.submit(make_spec("filler").team("search").pods(1, 8).build(), behaviour)
    world.step(0.0)
    assert world.job(gang).placement == whole_nodes(B0[0], B0[1])
    assert world.job(filler).placement == whole_nodes(B0[2])
    world.run_until(lambda: world.now >= 250.0, tick=10.0)
    world.executor.fail_node(B0[1], 250.0)
    report = world.step(250.0)
    assert gang in report.stopped
    assert {r.node.name: r.health for r in world.store.list_nodes()}[B0[1]] is Health.REPAIR
    world.step(250.0)                                # the surviving pod's exit arrives; the gang is requeued
    record = world.job(gang)
    assert record.state is JobState.ADMITTED
    assert record.placement == whole_nodes(B0[0], B0[3])          # the hot spare of its own block
    assert (record.infra_restarts, record.restarts) == (1, 0)
    assert record.avoid_nodes == frozenset({B0[1]}) and record.restart_block == "h100-b0"
    assert world.executor.progress(gang) == pytest.approx(200.0)   # from the checkpoint written at 210
    assert world.events(gang, "pod_failed", "requeue") == [("pod_failed", "NodeLost"), ("requeue", "NodeLost")]
    node_events = [(e.kind, e.reason, e.node) for e in world.store.events() if e.kind == "node_health"]
    assert node_events == [("node_health", "NodeLost", B0[1])]


def test_own_faults_are_bounded_by_max_restarts() -> None:
    world = World()
    job = world.submit(make_spec("crashy").pods(2, 8).max_restarts(2).build(),
                       SimBehaviour(work_s=30.0, start_latency_s=0.0, exit_code=3))
    world.run_until(world.is_(job, JobState.FAILED))
    record = world.job(job)
    assert (record.restarts, record.infra_restarts, record.exit_code) == (2, 0, 3)
    assert "restart budget of 2 spent" in record.message
    assert [r for k, r in world.events(job) if k in ("admit", "requeue", "finish")] == [
        "nominal", "OwnFault", "nominal", "OwnFault", "nominal", "FAILED"]


def test_infrastructure_restarts_are_not_bounded_by_max_restarts() -> None:
    world = World()
    job = world.submit(make_spec("sturdy").pods(1, 8).max_restarts(0).build(),
                       SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_interval_s=None))
    world.step(0.0)
    for round_ in range(1, 4):
        record = world.job(job)
        assert record.placement is not None
        world.executor.fail_node(record.placement.pods[0].node, world.now + 10.0)
        world.run_until(lambda: world.job(job).infra_restarts == round_ and world.job(job).state is JobState.RUNNING)
    record = world.job(job)
    assert (record.infra_restarts, record.restarts, record.state) == (3, 0, JobState.RUNNING)


def test_a_gang_not_running_within_the_readiness_timeout_is_evicted_whole_and_requeued() -> None:
    world = World(config=ControllerConfig(checkpoint_root="/ckpt", readiness_timeout_s=600.0))

    def behaviour(request: LaunchRequest) -> SimBehaviour:
        stuck = (0.0, math.inf) if request.attempt == 0 else 0.0
        return SimBehaviour(work_s=100.0, start_latency_s=stuck, checkpoint_interval_s=None)

    job = world.submit(make_spec("stuck").pods(2, 8).build(), behaviour)
    world.step(0.0)
    stuck_node = B0[1]
    world.step(599.0)
    assert world.job(job).state is JobState.ADMITTED
    report = world.step(600.0)
    assert job in report.stopped
    world.step(600.0)
    record = world.job(job)
    assert (record.infra_restarts, record.restarts) == (1, 0)
    assert record.avoid_nodes == frozenset({stuck_node})
    assert record.placement is not None and stuck_node not in record.placement.nodes
    assert ("stop", "ReadinessTimeout") in world.events(job)
    world.run_until(world.is_(job, JobState.SUCCEEDED))


def test_a_straggler_marks_its_node_suspect_and_the_job_moves_at_its_next_checkpoint() -> None:
    world = World()
    behaviour = SimBehaviour(work_s=20_000.0, start_latency_s=0.0, checkpoint_interval_s=600.0,
                             checkpoint_cost_s=10.0, report_every_s=60.0)
    job = world.submit(make_spec("big").pods(3, 8).build(), behaviour)
    world.step(0.0)
    slow = B0[2]
    world.executor.set_node_slowdown(slow, 1.5)
    world.run_until(lambda: {r.node.name: r.health for r in world.store.list_nodes()}[slow] is Health.SUSPECT,
                    tick=60.0)
    assert world.now == 300.0                        # the fifth report at 1.5× its peers' step time
    assert world.job(job).state is JobState.RUNNING  # it keeps running until its next checkpoint
    world.run_until(lambda: world.job(job).infra_restarts == 1)
    record = world.job(job)
    # Its checkpoint was written at 610; then SIGTERM, one more (10 s) checkpoint and exit at 620.
    assert world.now == 620.0
    assert record.avoid_nodes == frozenset({slow})
    assert record.placement is not None and slow not in record.placement.nodes
    assert world.events(job, "node_health", "requeue") == [("node_health", "SlowRank"),
                                                           ("requeue", "StragglerMove")]


def test_a_launch_the_executor_refuses_is_requeued_and_frees_its_units() -> None:
    world = World()
    world.executor.refuse.add("unlucky")
    job = world.submit(make_spec("unlucky").pods(1, 8).build())
    report = world.step(0.0)
    assert report.admitted == [] and report.requeued == [job]
    record = world.job(job)
    assert record.state is JobState.PENDING and record.infra_restarts == 1
    assert "No space left on device" in record.message
    world.executor.refuse.clear()
    assert world.step(10.0).admitted == [job]


# -- requests from users -----------------------------------------------------------------------------------------


def test_cancel_stops_the_gang_with_its_grace_and_ends_it_cancelled() -> None:
    world = World()
    job = world.submit(make_spec("c").pods(2, 8).grace(120.0).build(),
                       SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_interval_s=None,
                                    checkpoint_cost_s=20.0))
    world.step(0.0)
    world.store.request_cancel(job, now=50.0)
    report = world.step(50.0)
    assert job in report.stopped
    assert world.job(job).terminate_by == 170.0
    world.run_until(world.is_(job, JobState.CANCELLED))
    assert world.now == 70.0                              # it checkpointed (20 s) and exited
    assert world.events(job)[-3:] == [("stop", "CancelRequested"), ("checkpoint", "CheckpointWritten"),
                                      ("finish", "CANCELLED")]
    assert world.executor.running_jobs() == set()


def test_a_checkpoint_request_reaches_the_job() -> None:
    world = World()
    job = world.submit(make_spec("c").pods(1, 8).build(),
                       SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_interval_s=None,
                                    checkpoint_cost_s=20.0))
    world.step(0.0)
    world.store.request_checkpoint(job, now=100.0)
    world.step(100.0)
    assert not world.job(job).checkpoint_requested
    world.step(120.0)
    checkpoint = world.job(job).last_checkpoint
    assert checkpoint is not None and (checkpoint.step, checkpoint.written_at, checkpoint.cost_s) == (100, 120.0, 20.0)
    assert world.job(job).state is JobState.RUNNING


def test_waits_are_recorded_and_logged_when_the_reason_changes() -> None:
    world = World()
    big = world.submit(make_spec("big").pods(6, 8).build(),
                       SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None))
    blocked = world.submit(make_spec("blocked").pods(1, 8).build())
    for at in (0.0, 10.0, 20.0):
        world.step(at)
    record = world.job(blocked)
    assert (record.wait_reason, record.queue_position) == ("WaitingForCapacity", 1)
    assert world.events(blocked) == [("wait", "WaitingForCapacity")]
    world.run_until(world.is_(blocked, JobState.SUCCEEDED))
    assert world.job(big).state is JobState.SUCCEEDED


class ReservingPolicy(GreedyPolicy):
    """The greedy policy, reserving ``nodes`` for each job named in ``reserve`` from ``start_at``."""

    def __init__(self, reserve: dict[str, float]) -> None:
        super().__init__()
        self.reserve = reserve

    def __call__(self, snapshot: Snapshot, now: float) -> CycleResult:
        result = super().__call__(snapshot, now)
        result.reservations.extend(Reserve(job_id, "h100", tuple(B1), start_at)
                                   for job_id, start_at in self.reserve.items())
        return result


def test_a_reservation_event_says_when_in_words_not_epoch_seconds() -> None:
    world = World()
    world.policy = ReservingPolicy({})
    world.controller = world.new_controller()
    waiting = world.submit(make_spec("big").pods(1, 8).build())
    world.policy.reserve[waiting] = 1_793_062_805.0   # 2026-10-27T01:00:05Z
    world.step(0.0)
    [event] = [e for e in world.store.events(job_id=waiting) if e.kind == "reserve"]
    assert event.message == "4 h100 nodes from 2026-10-27 01:00:05Z"
    assert event.data["start_at"] == 1_793_062_805.0


# -- leadership and recovery ---------------------------------------------------------------------------------------


def test_a_stale_leader_applies_nothing_more_of_its_cycle() -> None:
    world = World()
    epoch = world.store.acquire_lease("sched-a", ttl_s=15.0, now=0.0)
    assert epoch is not None
    world.controller = world.new_controller(epoch=epoch)
    running = world.submit(make_spec("running").pods(1, 8).build(),
                           SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_interval_s=None))
    world.step(0.0)
    first = world.submit(make_spec("first").pods(1, 8).build())
    second = world.submit(make_spec("second").pods(1, 8).build())
    assert world.store.acquire_lease("sched-b", ttl_s=15.0, now=20.0) is not None
    world.policy.preempt(running, grace_s=30.0)
    report = world.step(20.0)
    assert report.stale_leader and report.preempted == [] and report.admitted == []
    assert world.job(running).state is JobState.RUNNING                     # never signalled
    assert world.executor.running_jobs() == {running}
    assert world.executor.poll(100.0) == []                                  # no SIGTERM went out
    assert world.job(first).state is world.job(second).state is JobState.PENDING
    assert ("leadership", "StaleLeader") in [(e.kind, e.reason) for e in world.store.events()]


def test_recover_adopts_live_gangs_and_requeues_the_lost_ones() -> None:
    world = World()
    kept = world.submit(make_spec("kept").pods(2, 8).build(),
                        SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None))
    lost = world.submit(make_spec("lost").pods(1, 8).build(),
                        SimBehaviour(work_s=1000.0, start_latency_s=0.0, checkpoint_interval_s=None))
    world.step(0.0)
    world.step(10.0)
    assert world.job(kept).state is world.job(lost).state is JobState.RUNNING
    # The scheduler goes down. Meanwhile the `lost` gang disappears with its node's reports.
    world.executor.terminate(lost, 0)
    world.executor.poll(20.0)
    world.controller = world.new_controller()
    report = world.controller.recover(30.0)
    assert report.adopted == [kept] and report.requeued == [lost]
    assert world.job(kept).state is JobState.RUNNING
    requeued = world.job(lost)
    assert requeued.state is JobState.PENDING and requeued.infra_restarts == 1
    assert ("requeue", "LostOnRestart") in world.events(lost)
    world.now = 30.0
    world.run_until(lambda: all(world.job(j).state is JobState.SUCCEEDED for j in (kept, lost)))
    assert world.job(kept).finished_at == 1000.0


def test_recover_applies_what_happened_while_the_scheduler_was_down() -> None:
    world = World()
    job = world.submit(make_spec("quick").pods(1, 8).build(),
                       SimBehaviour(work_s=100.0, start_latency_s=0.0, checkpoint_interval_s=None))
    world.step(0.0)
    world.controller = world.new_controller()       # the old one never saw the pod start or exit
    report = world.controller.recover(500.0)
    assert report.finished == {job: JobState.SUCCEEDED}
    assert world.job(job).finished_at == 500.0


# -- the snapshot ----------------------------------------------------------------------------------------------------


def test_the_snapshot_carries_queue_state_and_running_state_from_the_store() -> None:
    world = World()
    store = world.store
    a = store.submit(make_spec("a").pods(1, 8).build(), user="ana", now=1.0).id
    b = store.submit(make_spec("b").pods(2, 8).build(), user="ana", now=2.0).id
    c = store.submit(make_spec("c").pods(1, 8).build(), user="ana", now=3.0).id
    store.bind(b, whole_nodes(B0[0], B0[1]), AdmittedAs.BORROWED, epoch=0, now=5.0)
    store.add_attained(b, 160.0)
    store.release(b, state=JobState.PENDING, now=15.0, epoch=0, infra_fault=True, restart_block="h100-b0",
                  avoid_nodes=[B0[1]])
    store.bind(c, whole_nodes(B1[0]), AdmittedAs.NOMINAL, epoch=0, now=20.0)
    store.mark_running(c, now=21.0)
    store.record_checkpoint(CheckpointRecord(c, 7, "file:///x", 1, 40.0, True))
    store.mark_terminating(c, requeue=True, terminate_by=400.0, now=50.0, epoch=0)
    store.set_node_health(B1[2], Health.SUSPECT, "slow", now=50.0)
    snapshot = world.controller.build_snapshot(60.0)
    assert [p.request.id for p in snapshot.pending] == [a, b]
    pending_b = snapshot.pending[1]
    assert (pending_b.queued_at, pending_b.front_of_queue, pending_b.attained_gpu_s, pending_b.restart_block,
            pending_b.avoid_nodes) == (15.0, True, 160.0, "h100-b0", frozenset({B0[1]}))
    assert pending_b.request.pods == 2 and pending_b.request.units == 16
    (running,) = snapshot.running
    assert (running.request.id, running.started_at, running.last_checkpoint_at, running.terminating,
            running.terminate_by, running.admitted_as) == (c, 21.0, 40.0, True, 400.0, AdmittedAs.NOMINAL)
    assert {n.name: n.health for n in snapshot.nodes}[B1[2]] is Health.SUSPECT
    assert [n.name for n in snapshot.nodes] == [n.name for n in cluster_nodes()]
    assert set(snapshot.teams) == {"fraud-ml", "search"}
    # Asked again, unchanged jobs are the very same objects: the per-job parts are cached.
    again = world.controller.build_snapshot(61.0)
    assert again.pending[0] is snapshot.pending[0] and again.nodes[0] is snapshot.nodes[0]


def test_recover_finishes_a_preemption_that_completed_while_the_scheduler_was_down() -> None:
    world = World()
    job = world.submit(make_spec("victim").pods(1, 8).build(),
                       SimBehaviour(work_s=math.inf, start_latency_s=0.0, checkpoint_interval_s=None,
                                    checkpoint_cost_s=10.0))
    world.step(0.0)
    world.policy.preempt(job, grace_s=60.0)
    world.policy.admit_nothing = True
    world.step(100.0)
    assert world.job(job).state is JobState.TERMINATING
    world.controller = world.new_controller()        # down before the victim's checkpoint and exit at 110
    report = world.controller.recover(200.0)
    assert report.requeued == [job] and report.adopted == [job]
    record = world.job(job)
    assert (record.state, record.preemptions, record.infra_restarts) == (JobState.PENDING, 1, 0)
    assert record.last_checkpoint is not None and record.last_checkpoint.step == 100
