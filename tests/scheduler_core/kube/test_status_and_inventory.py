"""Pure readings of the cluster: what a pod's status means (whose fault), and what a node is to Shoal."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_core.executor.base import PodEventKind as K
from scheduler_core.kube.inventory import NodeLabels, Skipped, inventory, node_from_object, node_health, quantity
from scheduler_core.kube.status import has_started, outcome, outcome_of_deleted
from scheduler_core.model import Device, Health, Node

from .builders import a_node, a_pod

# -- pods --------------------------------------------------------------------------------------------------------

OUTCOMES: list[tuple[str, dict[str, Any], bool, tuple[K, int | None] | None]] = [
    ("pending", a_pod().build(), False, None),
    ("pulling its image", a_pod().waiting("ContainerCreating").build(), False, None),
    ("running", a_pod().running().build(), False, None),
    ("being deleted, still running", a_pod().running().deleting().build(), True, None),
    ("exited 0", a_pod().exited(0).build(), False, (K.EXITED, 0)),
    ("exited 3", a_pod().exited(3).build(), False, (K.EXITED, 3)),
    ("OOM-killed is the job's own fault", a_pod().exited(137, "OOMKilled").build(), False, (K.EXITED, 137)),
    ("exit seen before the phase", a_pod().terminated_in_running_phase(2).build(), False, (K.EXITED, 2)),
    ("evicted by the kubelet", a_pod().exited(137).phase("Failed", "Evicted", "low on memory").build(), False,
     (K.FAILED, None)),
    ("refused at admission", a_pod().phase("Failed", "UnexpectedAdmissionError", "no GPU").build(), False,
     (K.FAILED, None)),
    ("out of a device", a_pod().phase("Failed", "OutOfnvidia.com/gpu").build(), False, (K.FAILED, None)),
    ("node shut down", a_pod().exited(143).phase("Failed", "Terminated", "node shutdown").build(), False,
     (K.FAILED, None)),
    ("disrupted by the taint manager", a_pod().exited(137).disrupted().build(), False, (K.FAILED, None)),
    ("disrupted while Shoal stops it", a_pod().exited(143).disrupted().build(), True, (K.EXITED, 143)),
    ("failed before running", a_pod().phase("Failed", "Deleted").build(), False, (K.FAILED, None)),
    ("failed before running, stopping", a_pod().phase("Failed", "Deleted").build(), True, (K.EXITED, 137)),
]


@pytest.mark.parametrize(("pod", "stopping", "expected"), [c[1:] for c in OUTCOMES], ids=[c[0] for c in OUTCOMES])
def test_how_a_pod_ended_and_whose_fault_it_was(pod: dict[str, Any], stopping: bool,
                                                 expected: tuple[K, int | None] | None) -> None:
    result = outcome(pod, stopping=stopping)
    assert (None if result is None else (result.kind, result.exit_code)) == expected


@pytest.mark.parametrize(("last", "stopping", "expected"), [
    (a_pod().running().build(), True, (K.EXITED, 137)),          # force-deleted by Shoal: killed
    (a_pod().running().build(), False, (K.FAILED, None)),        # deleted by someone else: not the job's fault
    (a_pod().exited(0).build(), True, (K.EXITED, 0)),            # its exit code arrived with the deletion
    (None, False, (K.FAILED, None)),                             # never seen at all
], ids=["killed", "deleted-outside", "exit-known", "unseen"])
def test_a_pod_gone_from_the_api(last: dict[str, Any] | None, stopping: bool, expected: tuple[K, int | None]) -> None:
    result = outcome_of_deleted(last, stopping=stopping)
    assert (result.kind, result.exit_code) == expected


@pytest.mark.parametrize(("pod", "started"), [
    (a_pod().build(), False), (a_pod().waiting("CreateContainerConfigError").build(), False),
    (a_pod().running().build(), True), (a_pod().exited(1).build(), True),
])
def test_started_means_the_container_runs_or_ran(pod: dict[str, Any], started: bool) -> None:
    assert has_started(pod) is started


# -- nodes -------------------------------------------------------------------------------------------------------

def test_a_whole_gpu_node_with_block_and_leaf_from_its_labels() -> None:
    node = node_from_object(a_node("gpu-7").label("shoal.io/spare", "true").build())
    assert node == Node(name="gpu-7", block="b0", leaf="b0-l1", gpu_model="H100", gpus=8, cpus=192,
                        memory_gb=2064, devices={"h100": tuple(Device(g) for g in range(8))}, spare=True)


def test_a_mig_node_has_one_device_per_slice_on_its_gpus() -> None:
    node = node_from_object(a_node().gpus(0).mig("1g.10gb", 56).label("shoal.io/small-jobs", "true").build())
    assert isinstance(node, Node) and node.small_jobs
    assert node.gpus == 8 and node.capacity == {"h100-mig-1g": 56}
    assert node.devices["h100-mig-1g"][:8] == tuple(Device(0, s) for s in range(7)) + (Device(1, 0),)


def test_mixed_mig_profiles_and_whole_gpus_on_one_node() -> None:
    node = node_from_object(a_node().gpus(4).mig("3g.40gb", 4).mig("1g.10gb", 14).build())
    assert isinstance(node, Node)
    assert node.capacity == {"h100": 4, "h100-mig-3g": 4, "h100-mig-1g": 14} and node.gpus == 4 + 2 + 2


@pytest.mark.parametrize(("node", "why"), [
    (a_node().gpus(0).build(), "no NVIDIA GPUs"),
    (a_node().label("nvidia.com/gpu.product", "Tesla-T4").build(), "unknown GPU model"),
    (a_node().gpus(0).mig("7g.80gb", 8).build(), "not one of Shoal's flavours"),
    (a_node().label("nvidia.com/mig.strategy", "single").build(), "strategy 'single'"),
], ids=["cpu-only", "unknown-model", "unknown-profile", "single-strategy"])
def test_nodes_shoal_cannot_use_are_skipped_with_the_reason(node: dict[str, Any], why: str) -> None:
    result = node_from_object(node)
    assert isinstance(result, Skipped) and why in result.reason


def test_labels_are_configurable_and_the_flavour_label_wins() -> None:
    labels = NodeLabels(block="example.com/pod", leaf="example.com/rack", flavour="example.com/gpu")
    obj = a_node().label("example.com/pod", "p3").label("example.com/rack", "r9") \
        .label("example.com/gpu", "a100").label("nvidia.com/gpu.product", "Unknown").build()
    node = node_from_object(obj, labels)
    assert isinstance(node, Node) and (node.block, node.leaf, node.gpu_model) == ("p3", "r9", "A100")
    unlabelled = node_from_object(a_node().label("topology.kubernetes.io/block", None)
                                  .label("topology.kubernetes.io/leaf", None).build())
    assert isinstance(unlabelled, Node) and (unlabelled.block, unlabelled.leaf) == ("default", "default-leaf")


def test_the_inventory_is_sorted_and_names_what_it_left_out() -> None:
    result = inventory([a_node("z").build(), a_node("cpu").gpus(0).build(),
                        a_node("a").label("topology.kubernetes.io/block", "b9").build()])
    assert [n.name for n in result.nodes] == ["z", "a"]
    assert [s.name for s in result.skipped] == ["cpu"]


HEALTH: list[tuple[str, dict[str, Any], Health, str]] = [
    ("ready", a_node().build(), Health.READY, "Ready"),
    ("not ready", a_node().condition("Ready", "False", "KubeletNotReady", "PLEG is not healthy").build(),
     Health.REPAIR, "KubeletNotReady"),
    ("unreachable", a_node().condition("Ready", "Unknown", "NodeStatusUnknown").build(), Health.REPAIR, "Unknown"),
    ("NoExecute taint", a_node().taint("example.com/broken", "NoExecute").build(), Health.REPAIR, "broken"),
    ("cordoned", a_node().cordoned().taint("node.kubernetes.io/unschedulable", "NoSchedule").build(),
     Health.DRAINING, "cordoned"),
    ("NoSchedule taint", a_node().taint("example.com/maintenance", "NoSchedule", "tue").build(), Health.DRAINING,
     "maintenance=tue"),
    ("GPU unhealthy (DCGM)", a_node().condition("GPUUnhealthy", "True", message="DCGM: NVLink down").build(),
     Health.SUSPECT, "NVLink down"),
    ("Xid error (node-problem-detector)", a_node().condition("XidCriticalError", "True", message="Xid 79").build(),
     Health.SUSPECT, "Xid 79"),
    ("a condition that is False is fine", a_node().condition("GPUUnhealthy", "False").build(), Health.READY, ""),
    ("device plugin withdrew a GPU", a_node().gpus(8, allocatable=7).build(), Health.SUSPECT, "7 of 8"),
    ("worst wins", a_node().cordoned().condition("Ready", "False").build(), Health.REPAIR, "not Ready"),
]


@pytest.mark.parametrize(("node", "health", "reason"), [c[1:] for c in HEALTH], ids=[c[0] for c in HEALTH])
def test_health_from_conditions_taints_cordoning_and_devices(node: dict[str, Any], health: Health,
                                                             reason: str) -> None:
    report = node_health(node)
    assert report.health is health and reason in report.reason


@pytest.mark.parametrize(("text", "value"), [("192", 192), ("1500m", 1.5), ("2064Gi", 2064 * 2**30), ("1k", 1000)])
def test_quantities(text: str, value: float) -> None:
    assert quantity(text) == value


def test_a_bad_quantity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a resource quantity"):
        quantity("lots")
