"""``SimExecutor.advance_to_pod_end``: the simulator's extension that lets starts and checkpoints happen unseen."""

from __future__ import annotations

from scheduler_core.config import load_cluster
from scheduler_core.executor.base import LaunchRequest, PodEventKind
from scheduler_core.executor.sim import SimBehaviour, SimExecutor
from scheduler_core.model.job import JobSpec
from scheduler_core.policy.snapshot import Placement, PodPlacement


def launch(executor: SimExecutor, job_id: str, node: str, *, work: float) -> None:
    _, nodes = load_cluster("demo")
    spec = JobSpec(name=job_id, team="a", flavour="h100", gpus_per_pod=8, command=("x",))
    placement = Placement("h100", (PodPlacement(node, tuple(range(8))),))
    executor.launch(LaunchRequest(job_id=job_id, spec=spec, placement=placement,
                                  nodes={n.name: n for n in nodes if n.name == node},
                                  env={"SHOAL_CHECKPOINT_INTERVAL": "100"}))


def test_starts_and_checkpoints_happen_unseen_until_a_pod_ends() -> None:
    executor = SimExecutor(SimBehaviour(work_s=250.0, start_latency_s=5.0, checkpoint_cost_s=10.0))
    launch(executor, "j", "h100-a-n00", work=250.0)
    assert executor.advance_to_pod_end(50.0) is None          # the start, and no end before 50 s
    assert executor.next_scheduled_at() == 105.0               # the first checkpoint
    ended = executor.advance_to_pod_end(1000.0)
    assert ended == 5.0 + 250.0 + 2 * 10.0                     # two checkpoints paused it
    assert executor.advance_to_pod_end(2000.0) == ended        # an end already waits: the present
    events = executor.poll(ended)
    assert [e.kind for e in events] == [PodEventKind.STARTED, PodEventKind.CHECKPOINT, PodEventKind.CHECKPOINT,
                                        PodEventKind.EXITED]
    assert [e.at for e in events] == [5.0, 115.0, 225.0, ended]
    assert executor.advance_to_pod_end(5000.0) is None
