"""What a pod's status means to the scheduler, as pure functions of the pod object the API serves.

Two questions per pod: has it started (the job's container runs, or ran), and has it ended — and if so, whose fault:
**EXITED** with the container's exit code when the job itself ended (its own success or failure, or the kill Shoal
asked for), **FAILED** when the infrastructure ended it (the node went away, the kubelet evicted or refused it,
something outside Shoal deleted it). Infrastructure faults do not spend the job's restart budget (DESIGN §3.3), so
this split matters more than the exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..executor.base import PodEventKind
from . import names

#: ``status.reason`` values by which the kubelet or the control plane, not the job, ended a pod.
INFRA_REASONS = frozenset({
    "Evicted", "NodeLost", "UnexpectedAdmissionError", "NodeAffinity", "NodeShutdown", "Shutdown", "Terminated",
    "Preempting", "DeadlineExceeded",
})
#: What a container killed by the kubelet (SIGKILL) reports, and what Shoal reports for a pod gone before its exit
#: code was seen (a force delete).
KILLED_EXIT_CODE = 137


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: PodEventKind          # EXITED or FAILED
    exit_code: int | None
    message: str


def _container(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == names.CONTAINER:
            return status  # type: ignore[no-any-return]
    return None


def _state(pod: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    container = _container(pod)
    if container is None:
        return None
    state = (container.get("state") or {}).get(key)
    return state if isinstance(state, Mapping) else None


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def has_started(pod: Mapping[str, Any]) -> bool:
    """The job's container runs or ran (a pod that ended is reported as started first)."""
    if _state(pod, "running") is not None or _state(pod, "terminated") is not None:
        return True
    return phase(pod) in ("Running", "Succeeded", "Failed") and _container(pod) is not None


def running_since(pod: Mapping[str, Any]) -> float | None:
    """When the job's container started running (epoch seconds), or ``None`` unless it runs now."""
    running = _state(pod, "running")
    stamp = running.get("startedAt") if running is not None else None
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _infra_reason(pod: Mapping[str, Any]) -> str | None:
    status = pod.get("status") or {}
    reason = str(status.get("reason") or "")
    if reason in INFRA_REASONS or reason.startswith("OutOf"):
        return f"{reason}: {status.get('message') or 'ended by the node'}"
    for condition in status.get("conditions") or ():
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return f"{condition.get('reason') or 'DisruptionTarget'}: {condition.get('message') or 'disrupted'}"
    return None


def outcome(pod: Mapping[str, Any], *, stopping: bool) -> Outcome | None:
    """How the pod ended, or ``None`` while it has not. ``stopping``: Shoal asked the gang to stop, so an end the
    cluster reports as a disruption is the stop Shoal asked for, not a fault."""
    terminated = _state(pod, "terminated")
    current = phase(pod)
    if terminated is None and current not in ("Succeeded", "Failed"):
        return None
    infra = _infra_reason(pod)
    if infra is not None and not stopping:
        return Outcome(PodEventKind.FAILED, None, infra)
    if terminated is not None:
        code = int(terminated.get("exitCode", 1))
        why = " ".join(str(part) for part in (terminated.get("reason"), terminated.get("message")) if part)
        return Outcome(PodEventKind.EXITED, code, why)
    if current == "Succeeded":
        return Outcome(PodEventKind.EXITED, 0, "Succeeded")
    if stopping:
        return Outcome(PodEventKind.EXITED, KILLED_EXIT_CODE, "stopped before its container reported an exit code")
    status = pod.get("status") or {}
    return Outcome(PodEventKind.FAILED, None,
                   f"the pod failed before its container ran: {status.get('reason') or 'Failed'} "
                   f"{status.get('message') or ''}".rstrip())


def outcome_of_deleted(last_seen: Mapping[str, Any] | None, *, stopping: bool) -> Outcome:
    """A pod that is gone from the API. Its last known state says how it ended if it had; otherwise it was killed
    (Shoal was stopping it: a force delete) or lost (someone or something else deleted it: not the job's fault)."""
    if last_seen is not None:
        ended = outcome(last_seen, stopping=stopping)
        if ended is not None:
            return ended
    if stopping:
        return Outcome(PodEventKind.EXITED, KILLED_EXIT_CODE, "killed")
    return Outcome(PodEventKind.FAILED, None, "the pod was deleted outside Shoal before it ended")
