"""The ``Executor`` plug point: launch a gang on exact nodes, signal it, and report what its pods do.

Contract (checked by ``tests/scheduler_core/executor_contract.py`` against every implementation):

* ``launch`` starts every pod of a gang or raises (a ``ShoalError``) and leaves none running: a placement naming a
  node the request does not describe, or a job id whose pods still run, is refused. ``SpecNotLaunchable`` when the
  spec itself cannot be started (an argv or environment the OS refuses): the job fails without a retry. Each pod's environment is
  ``scheduler_core.job_env.pod_env(request, rank)``, never computed otherwise.
* ``terminate(job, grace_s)`` delivers SIGTERM (or its equivalent) to every pod at once and a hard kill to any pod
  still alive ``grace_s`` later; ``grace_s == 0`` kills at once. Calling it again, after the gang ended, or for a
  job it never ran is harmless (so is ``request_checkpoint``). A killed pod reports a non-zero exit code.
* ``poll`` returns each pod event exactly once, in the order they happened: STARTED when a pod runs, EXITED with
  its exit code, FAILED when the infrastructure lost it (node failure: not the job's fault), CHECKPOINT and
  STEP_TIME when the job reports them through the job contract.
* Pods outlive the scheduler: a new executor over the same backend ``adopt``s gangs still running and reports their
  later events; it never kills what it did not start unless told to.
* Time: the ``sim`` executor runs in virtual time given to ``poll(now)``; real executors ignore ``now`` except to
  stamp events.
* Conventions a backend may set, which the controller (and a harness) put into every ``LaunchRequest``:
  ``container_devices`` (the backend exposes only the granted devices to a pod, as Kubernetes' device plugin does,
  so ``CUDA_VISIBLE_DEVICES`` counts them from 0) and ``master_addr`` (how the other ranks reach rank 0).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Mapping

from ..model.cluster import Health, Node
from ..model.job import JobSpec
from ..policy.snapshot import Placement


#: ``PodEvent.data`` key of an EXITED event whose command could not be started at all (no such executable, not
#: executable): the job's own fault, and one no retry can mend.
CANNOT_START = "cannot_start"


class PodEventKind(StrEnum):
    STARTED = "started"
    EXITED = "exited"
    FAILED = "failed"
    CHECKPOINT = "checkpoint"
    STEP_TIME = "step_time"


@dataclass(frozen=True, slots=True)
class PodEvent:
    job_id: str
    rank: int
    kind: PodEventKind
    at: float
    node: str | None = None
    exit_code: int | None = None
    message: str = ""
    data: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """Everything an executor needs to start one gang.

    ``env`` holds the job contract's variables common to every pod (``SHOAL_JOB_ID``, ``WORLD_SIZE``,
    ``SHOAL_CHECKPOINT_URI``, ``SHOAL_CHECKPOINT_INTERVAL``, ``MASTER_ADDR``, ``MASTER_PORT``, the spec's own env);
    the executor adds the per-pod ones (``RANK``, ``LOCAL_RANK``, ``CUDA_VISIBLE_DEVICES``) from ``placement``.
    ``attempt`` counts launches of this job, so logs and pods of a restart never collide with the last one.
    """

    job_id: str
    spec: JobSpec
    placement: Placement
    nodes: Mapping[str, Node]
    env: Mapping[str, str]
    attempt: int = 0
    #: The backend shows a pod only its granted devices (Kubernetes' device plugin), so ``CUDA_VISIBLE_DEVICES``
    #: numbers them from 0 inside the pod instead of naming the node's GPU indices or MIG UUIDs.
    container_devices: bool = False


@dataclass(frozen=True, slots=True)
class NodeReport:
    """A backend's own judgement of a node (Kubernetes: conditions, taints, cordoning, device-plugin health)."""

    health: Health
    reason: str = ""


@dataclass(frozen=True, slots=True)
class GpuErrorReport:
    """A node's GPU error counters as the executor reads them: ``count`` only ever grows (uncorrected ECC errors,
    critical XID events, failed row remaps, summed over the node's GPUs), so the controller marks the node suspect
    when it grows; ``detail`` says what was counted (``"xid 79 on GPU 3"``)."""

    count: int
    detail: str = ""


class Executor(ABC):
    #: See ``LaunchRequest.container_devices``; the controller copies it into every request.
    container_devices: bool = False

    @abstractmethod
    def launch(self, request: LaunchRequest) -> None: ...

    @abstractmethod
    def terminate(self, job_id: str, grace_s: float) -> None: ...

    @abstractmethod
    def request_checkpoint(self, job_id: str) -> None:
        """Ask every pod to checkpoint at its next step (SIGUSR1 for processes); the job keeps running."""

    @abstractmethod
    def poll(self, now: float) -> list[PodEvent]: ...

    @abstractmethod
    def running_jobs(self) -> set[str]:
        """Jobs with at least one live pod, as the backend itself sees them (for re-adoption after a restart)."""

    def heartbeats(self, now: float) -> Mapping[str, float | None]:
        """Nodes the backend vouches for right now, each with its GPU utilisation (0–1) when known. The live
        controller writes them to the store as node heartbeats. Default: none (the backend reports no health)."""
        return {}

    def node_health(self, now: float) -> Mapping[str, NodeReport]:
        """What the backend itself says of its nodes' health, for nodes it has an opinion on. The live loop applies
        changes to the store (``service.nodes.apply_backend_health``). Default: no opinion."""
        return {}

    def gpu_errors(self, now: float) -> Mapping[str, GpuErrorReport]:
        """Each node's GPU error counters, for nodes the executor can read them on (NVML on real GPUs, or the
        executor's own report). Called once per controller step; a node whose count grows turns suspect.
        Default: none."""
        return {}

    def master_addr(self, job_id: str, placement: Placement, attempt: int) -> str:
        """The address the gang's ranks reach rank 0 at (``MASTER_ADDR``). Default: rank 0's node name; a backend
        with its own network names (a Kubernetes headless Service) says so here."""
        return placement.pods[0].node

    def adopt(self, job_ids: set[str]) -> None:
        """Take over gangs another executor instance started (default: nothing to do)."""

    def close(self) -> None:
        """Release the executor's own resources. Running pods are left alone: they outlive the scheduler."""
