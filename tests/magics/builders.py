"""Small fluent builders for the API views the magics render."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from scheduler_core.model import JobSpec
from scheduler_core.schemas import CheckpointView, JobView, PlacementView, PodView, QueueEntry, QueueView

NOW = datetime(2025, 3, 4, 12, 0, 0, tzinfo=timezone.utc)


class ViewBuilder:
    def __init__(self, job_id: str = "j-1", name: str = "train") -> None:
        self._spec: dict[str, Any] = {"name": name, "team": "fraud-ml", "flavour": "h100", "pods": 2,
                                      "gpus_per_pod": 8, "command": ["python", "train.py"]}
        self._fields: dict[str, Any] = {
            "job_id": job_id, "name": name, "team": "fraud-ml", "user": "ana", "kind": "batch", "state": "PENDING",
            "admitted_as": None, "placement": None, "restarts": 0, "infra_restarts": 0, "preemptions": 0,
            "last_checkpoint": None, "gpu_hours_used": 0.0, "submitted_at": NOW - timedelta(minutes=1),
            "admitted_at": None, "started_at": None, "finished_at": None, "position": None, "reason": None,
            "reason_message": "", "estimated_start": None, "exit_code": None, "message": "",
            "cancel_requested": False, "checkpoint_requested": False,
        }

    def pending(self, position: int, reason: str, message: str = "", starts_in: timedelta | None = None
                ) -> ViewBuilder:
        self._fields.update(state="PENDING", position=position, reason=reason, reason_message=message,
                            estimated_start=None if starts_in is None else NOW + starts_in)
        return self

    def running(self, nodes: tuple[str, ...] = ("h100-a-n0", "h100-a-n1"), admitted_as: str = "nominal"
                ) -> ViewBuilder:
        placement = PlacementView(flavour="h100", blocks=["h100-a"], nodes=len(nodes), node_names=list(nodes),
                                  pods=[PodView(rank=i, node=n, units=list(range(8))) for i, n in enumerate(nodes)])
        self._fields.update(state="RUNNING", placement=placement, admitted_as=admitted_as,
                            admitted_at=NOW - timedelta(minutes=10), started_at=NOW - timedelta(minutes=10))
        return self

    def finished(self, state: str, exit_code: int | None = None, message: str = "") -> ViewBuilder:
        self._fields.update(state=state, exit_code=exit_code, message=message, finished_at=NOW)
        return self

    def restarts(self, own: int, infra: int = 0, preemptions: int = 0) -> ViewBuilder:
        self._fields.update(restarts=own, infra_restarts=infra, preemptions=preemptions)
        return self

    def checkpoint(self, step: int, ago: timedelta) -> ViewBuilder:
        self._fields["last_checkpoint"] = CheckpointView(step=step, at=NOW - ago, bytes=10, uri="file:///ckpt")
        return self

    def gpu_hours(self, hours: float) -> ViewBuilder:
        self._fields["gpu_hours_used"] = hours
        return self

    def cancelling(self) -> ViewBuilder:
        self._fields.update(cancel_requested=True, state="TERMINATING")
        return self

    def build(self) -> JobView:
        return JobView(**self._fields, spec=JobSpec(**self._spec))


def make_view(job_id: str = "j-1", name: str = "train") -> ViewBuilder:
    return ViewBuilder(job_id, name)


def make_queue(*entries: dict[str, Any]) -> QueueView:
    jobs = []
    for e in entries:
        base: dict[str, Any] = {"job_id": "j-1", "name": "train", "user": "ana", "state": "PENDING",
                                "priority_class": "standard", "flavour": ["h100"], "pods": 1, "gpus_per_pod": 1,
                                "admitted_as": None, "position": None, "reason": None, "reason_message": "",
                                "estimated_start": None, "submitted_at": NOW}
        base.update(e)
        jobs.append(QueueEntry(**base))
    return QueueView(team="fraud-ml", jobs=jobs)
