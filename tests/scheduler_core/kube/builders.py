"""Small fluent builders of Pod and Node objects as the API serves them: ``a_pod().exited(3).build()``."""

from __future__ import annotations

import copy
from typing import Any

from scheduler_core.kube.names import CONTAINER


class PodBuilder:
    def __init__(self) -> None:
        self._pod: dict[str, Any] = {"metadata": {"name": "job-x-0", "uid": "u-1"},
                                     "spec": {"nodeName": "n1", "containers": [{"name": CONTAINER}]},
                                     "status": {"phase": "Pending"}}

    def _state(self, state: dict[str, Any]) -> PodBuilder:
        self._pod["status"]["containerStatuses"] = [{"name": CONTAINER, "state": state}]
        return self

    def running(self, started_at: str = "2026-01-01T00:00:00Z") -> PodBuilder:
        self._pod["status"]["phase"] = "Running"
        return self._state({"running": {"startedAt": started_at}})

    def waiting(self, reason: str) -> PodBuilder:
        return self._state({"waiting": {"reason": reason}})

    def exited(self, code: int, reason: str = "", phase: str | None = None) -> PodBuilder:
        self._pod["status"]["phase"] = phase or ("Succeeded" if code == 0 else "Failed")
        return self._state({"terminated": {"exitCode": code, "reason": reason or ("Completed" if code == 0 else
                                                                                   "Error")}})

    def terminated_in_running_phase(self, code: int) -> PodBuilder:
        self._state({"terminated": {"exitCode": code, "reason": "Error"}})
        self._pod["status"]["phase"] = "Running"
        return self

    def phase(self, phase: str, reason: str = "", message: str = "") -> PodBuilder:
        self._pod["status"].update({"phase": phase})
        if reason:
            self._pod["status"].update({"reason": reason, "message": message})
        return self

    def disrupted(self, reason: str = "DeletionByTaintManager") -> PodBuilder:
        self._pod["status"].setdefault("conditions", []).append(
            {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": "taint manager"})
        return self

    def deleting(self) -> PodBuilder:
        self._pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._pod)


def a_pod() -> PodBuilder:
    return PodBuilder()


class NodeBuilder:
    def __init__(self, name: str = "gpu-1") -> None:
        self._node: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                  "topology.kubernetes.io/block": "b0",
                                                  "topology.kubernetes.io/leaf": "b0-l1"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "192", "memory": "2064Gi", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "190", "memory": "2000Gi", "nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}

    def labels(self, **labels: str) -> NodeBuilder:
        self._node["metadata"]["labels"].update({k.replace("__", "/").replace("_", "-"): v
                                                 for k, v in labels.items()})
        return self

    def label(self, key: str, value: str | None) -> NodeBuilder:
        if value is None:
            self._node["metadata"]["labels"].pop(key, None)
        else:
            self._node["metadata"]["labels"][key] = value
        return self

    def gpus(self, count: int, allocatable: int | None = None) -> NodeBuilder:
        self._node["status"]["capacity"]["nvidia.com/gpu"] = str(count)
        self._node["status"]["allocatable"]["nvidia.com/gpu"] = str(count if allocatable is None else allocatable)
        return self

    def mig(self, profile: str, count: int) -> NodeBuilder:
        for key in ("capacity", "allocatable"):
            self._node["status"][key][f"nvidia.com/mig-{profile}"] = str(count)
        return self

    def condition(self, kind: str, status: str, reason: str = "", message: str = "",
                  since: str = "2026-01-01T00:00:00Z") -> NodeBuilder:
        conditions = [c for c in self._node["status"]["conditions"] if c["type"] != kind]
        conditions.append({"type": kind, "status": status, "reason": reason or kind, "message": message,
                           "lastTransitionTime": since})
        self._node["status"]["conditions"] = conditions
        return self

    def taint(self, key: str, effect: str, value: str = "") -> NodeBuilder:
        self._node["spec"]["taints"].append({"key": key, "value": value, "effect": effect})
        return self

    def cordoned(self) -> NodeBuilder:
        self._node["spec"]["unschedulable"] = True
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._node)


def a_node(name: str = "gpu-1") -> NodeBuilder:
    return NodeBuilder(name)
