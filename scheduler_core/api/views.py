"""Store records → API bodies. Pure functions: the store's epoch-seconds floats become UTC datetimes here, and
nothing else about the wire format leaks into the store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..job_env import visible_devices
from ..model.cluster import Node
from ..model.allocation import Placement
from ..schemas import (CheckpointView, EventView, JobView, NodeView, PlacementView, PodView, QueueEntry,
                       SubmitResponse, utc)
from ..store.records import CheckpointRecord, Event, JobRecord, NodeRecord


def placement_view(placement: Placement, block_of: Mapping[str, str],
                   nodes: Mapping[str, Node] | None = None) -> PlacementView:
    names = list(placement.nodes)
    blocks = list(dict.fromkeys(block_of.get(name, "?") for name in names))
    return PlacementView(
        flavour=placement.flavour, blocks=blocks, nodes=len(names), node_names=names,
        pods=[PodView(rank=rank, node=pod.node, units=list(pod.units),
                      devices=_devices(nodes, pod.node, placement.flavour, pod.units))
              for rank, pod in enumerate(placement.pods)],
    )


def _devices(nodes: Mapping[str, Node] | None, node: str, flavour: str, units: tuple[int, ...]) -> list[str]:
    """What the executor puts in the pod's ``CUDA_VISIBLE_DEVICES`` (the same pure function computes both)."""
    if nodes is None or node not in nodes or flavour not in nodes[node].devices:
        return []
    return visible_devices(nodes[node], flavour, units).split(",")


def checkpoint_view(checkpoint: CheckpointRecord | None) -> CheckpointView | None:
    if checkpoint is None:
        return None
    at = utc(checkpoint.written_at)
    assert at is not None
    return CheckpointView(step=checkpoint.step, at=at, bytes=checkpoint.bytes, uri=checkpoint.uri)


def submit_response(record: JobRecord) -> SubmitResponse:
    return SubmitResponse(job_id=record.id, state=record.state.value, queue=record.team,
                          position=record.queue_position, reason=_reason(record),
                          estimated_start=utc(record.estimated_start))


def run_times(record: JobRecord, now: float | None) -> tuple[float | None, float | None]:
    """(elapsed, time left) of the job's current or last run at ``now``, as ``squeue`` shows TIME and TIME_LEFT:
    from its start (its admission until the pods report in) to now, or to its end; the limit counts per run."""
    began = record.started_at if record.started_at is not None else record.admitted_at
    if now is None or began is None:
        return None, None
    holding = record.state.value in ("ADMITTED", "RUNNING", "TERMINATING")
    until = now if holding or record.finished_at is None else record.finished_at
    elapsed = max(0.0, until - began)
    left = max(0.0, began + record.spec.time_limit - now) if holding else None
    return elapsed, left


def job_view(record: JobRecord, *, block_of: Mapping[str, str], gpu_seconds: float,
             nodes: Mapping[str, Node] | None = None, now: float | None = None) -> JobView:
    submitted = utc(record.submitted_at)
    elapsed, left = run_times(record, now)
    assert submitted is not None
    return JobView(
        job_id=record.id, name=record.spec.name, team=record.team, user=record.user, kind=record.spec.kind.value,
        state=record.state.value,
        admitted_as=record.admitted_as.value if record.admitted_as is not None else None,
        placement=placement_view(record.placement, block_of, nodes) if record.placement is not None else None,
        restarts=record.restarts, infra_restarts=record.infra_restarts, preemptions=record.preemptions,
        last_checkpoint=checkpoint_view(record.last_checkpoint), gpu_hours_used=round(gpu_seconds / 3600.0, 6),
        submitted_at=submitted, admitted_at=utc(record.admitted_at), started_at=utc(record.started_at),
        finished_at=utc(record.finished_at), position=record.queue_position, reason=_reason(record),
        reason_message=record.wait_message, estimated_start=utc(record.estimated_start),
        exit_code=record.exit_code, message=record.message, cancel_requested=record.cancel_requested,
        checkpoint_requested=record.checkpoint_requested, spec=record.spec, elapsed_s=elapsed, time_left_s=left,
    )


def queue_entry(record: JobRecord, now: float | None = None) -> QueueEntry:
    submitted = utc(record.submitted_at)
    assert submitted is not None
    elapsed, left = run_times(record, now)
    return QueueEntry(
        job_id=record.id, name=record.spec.name, user=record.user, state=record.state.value,
        priority_class=record.spec.priority_class.value, flavour=list(record.spec.flavour), pods=record.spec.pods,
        gpus_per_pod=record.spec.gpus_per_pod,
        admitted_as=record.admitted_as.value if record.admitted_as is not None else None,
        position=record.queue_position, reason=_reason(record), reason_message=record.wait_message,
        estimated_start=utc(record.estimated_start), submitted_at=submitted, time_limit_s=record.spec.time_limit,
        started_at=utc(record.started_at if record.started_at is not None else record.admitted_at),
        elapsed_s=elapsed, time_left_s=left,
        node_names=list(record.placement.nodes) if record.placement is not None else [],
    )


def queue_order(records: Iterable[JobRecord]) -> list[JobRecord]:
    """Pending jobs by queue position (those the cycle has not placed yet last, oldest first), then the jobs
    holding GPUs by admission time: the order ``squeue`` users read."""
    pending = [r for r in records if r.state.value == "PENDING"]
    others = [r for r in records if r.state.value != "PENDING"]
    pending.sort(key=lambda r: (r.queue_position is None, r.queue_position or 0, r.queued_at))
    others.sort(key=lambda r: (r.admitted_at or r.submitted_at, r.id))
    return pending + others


def node_view(record: NodeRecord, *, allocated: Mapping[str, int], jobs: list[str]) -> NodeView:
    node = record.node
    capacity = dict(node.capacity)
    return NodeView(
        name=node.name, block=node.block, leaf=node.leaf, gpu_model=node.gpu_model, health=record.health.value,
        health_reason=record.health_reason, spare=node.spare, small_jobs=node.small_jobs, capacity=capacity,
        allocated={f: allocated.get(f, 0) for f in capacity},
        free={f: capacity[f] - allocated.get(f, 0) for f in capacity},
        jobs=jobs, heartbeat_at=utc(record.heartbeat_at), health_since=utc(record.health_changed_at),
        gpu_utilization=record.gpu_utilization,
    )


def event_view(event: Event) -> EventView:
    at = utc(event.at)
    assert at is not None and event.id is not None
    return EventView(id=event.id, at=at, kind=event.kind, reason=event.reason, message=event.message,
                     job_id=event.job_id, node=event.node, team=event.team, data=dict(event.data))


def _reason(record: JobRecord) -> str | None:
    if record.state.value != "PENDING":
        return None
    return record.wait_reason.value if record.wait_reason is not None else None
