"""How a workload's job behaves each time it is launched in the simulator, and when nodes fail.

Job behaviour (one ``SimBehaviour`` per launch, for ``SimExecutor``):

* work: the job's ``work_s`` on its first flavour, scaled by speed on the flavour it landed on;
* pod start-up: 20–80 s per gang plus up to 10 s per pod (images cached, checkpoint read included), drawn from a
  hash of (job, attempt), so a relaunch starts differently but the same run always repeats;
* one launch in 500 has a pod that never starts (an image pull that hangs): the controller's readiness timeout
  must evict the gang and requeue it;
* checkpoints at ``SHOAL_CHECKPOINT_INTERVAL`` (the controller's Young–Daly interval), each costing the job's
  checkpoint cost; on SIGTERM a preemptible job checkpoints and exits; a non-preemptible one runs on until killed;
  notebooks cannot checkpoint.

Node failures: each GPU fails on average once per ``gpu_hours_per_failure`` (default 50,700, the Llama 3 report's
rate, as in DESIGN §3.3), so the cluster sees failures as a Poisson process; the failed node is drawn uniformly
(every node has the same number of GPUs) and comes back after ``repair_s`` (default two days, the reference
document's figure). Both come from one ``numpy`` generator seeded by the run's seed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..executor.base import LaunchRequest
from ..executor.sim import SimBehaviour
from ..model.cluster import Node
from .workloads.types import WorkloadJob

GPU_HOURS_PER_FAILURE = 50_700.0
REPAIR_S = 2 * 86400.0
STUCK_POD_ONE_IN = 500
#: How long the scheduler's burn-in of a repaired node takes in the simulator (start-up included).
BURNIN_S = 120.0


def _unit(*parts: object) -> float:
    digest = hashlib.blake2b(":".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def behaviour_for(jobs: Mapping[str, WorkloadJob], seed: int) -> Callable[[LaunchRequest], SimBehaviour]:
    """The executor's behaviour function: ``jobs`` maps the store's job id to the workload's job."""

    burnin = SimBehaviour(work_s=BURNIN_S - 5.0, start_latency_s=5.0, checkpoint_interval_s=None,
                          checkpoint_cost_s=None, report_every_s=None)

    def behaviour(request: LaunchRequest) -> SimBehaviour:
        if request.env.get("SHOAL_BURNIN") == "1":
            return burnin   # the scheduler's own check of a node (``runtime.health_keeper``): it passes if the node
            #                 is up, and fails as any pod does if the node is lost meanwhile
        job = jobs[request.job_id]
        key = (seed, job.id, request.attempt)
        pods = len(request.placement.pods)
        base = 20.0 + 60.0 * _unit(*key, "start")
        latency = [base + 10.0 * _unit(*key, "pod", rank) for rank in range(pods)]
        if _unit(*key, "stuck") < 1.0 / STUCK_POD_ONE_IN:
            latency[int(_unit(*key, "stuck-rank") * pods)] = float("inf")
        cost = job.checkpoint_cost_s if job.checkpoint_cost_s > 0 else None
        return SimBehaviour(
            work_s=job.run_s_on(request.placement.flavour),
            start_latency_s=tuple(latency),
            checkpoint_interval_s="env" if cost is not None else None,
            checkpoint_cost_s=cost,
            honours_sigterm=job.spec.preemptible,
            step_s=1.0,
            report_every_s=None,
        )

    return behaviour


@dataclass(frozen=True, slots=True)
class NodeFault:
    at: float
    node: str
    repair_at: float


class FailureModel:
    """Node failures in time order, drawn lazily so a run of any length needs no horizon up front."""

    def __init__(self, nodes: Sequence[Node], seed: int, *, gpu_hours_per_failure: float | None = GPU_HOURS_PER_FAILURE,
                 repair_s: float = REPAIR_S, start: float = 0.0) -> None:
        self._names = [node.name for node in nodes]
        gpus = sum(node.gpus for node in nodes)
        self._rate = 0.0 if not gpu_hours_per_failure else gpus / (gpu_hours_per_failure * 3600.0)
        self._repair_s = repair_s
        self._rng = np.random.default_rng([seed, 0x5A17])
        self._next = start + self._gap() if self._rate > 0 else float("inf")

    def _gap(self) -> float:
        return float(self._rng.exponential(1.0 / self._rate))

    def peek(self) -> float:
        return self._next

    def pop(self) -> NodeFault:
        at = self._next
        node = self._names[int(self._rng.integers(len(self._names)))]
        self._next = at + self._gap()
        return NodeFault(at, node, at + self._repair_s)


class ScriptedFailures:
    """Given failures instead of drawn ones, in time order (for tests and what-if runs)."""

    def __init__(self, faults: Sequence[NodeFault]) -> None:
        self._faults = sorted(faults, key=lambda f: (f.at, f.node))

    def peek(self) -> float:
        return self._faults[0].at if self._faults else float("inf")

    def pop(self) -> NodeFault:
        return self._faults.pop(0)
