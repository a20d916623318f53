"""What only a cluster shows: the API server going away, watch history expiring, evictions, the kubelet's own
accounting, private environment from Secrets, gangs deleted as one, node health, and adoption exactly once."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.errors import ShoalError
from scheduler_core.executor.base import PodEventKind
from scheduler_core.kube import names
from scheduler_core.kube.executor import KubeUnavailable
from scheduler_core.kube.logs import KubePodLogReader
from scheduler_core.model import Health, JobKind

from ..executor_contract import Behaviour, Watch
from ..runtime_builders import make_spec
from .harness import DEAF, HONEST, MIG_NODE, NAMESPACE, KubeHarness, python_spec


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[KubeHarness]:
    h = KubeHarness(tmp_path)
    try:
        yield h
    finally:
        h.close()


def started(harness: KubeHarness, job_id: str, program: str = HONEST, pods: int = 2) -> Watch:
    harness.executor.launch(harness.request_for(job_id, python_spec(job_id, program, pods)))
    watch = Watch(harness)
    watch.until(watch.all_ranks(job_id, PodEventKind.STARTED, pods), f"{job_id} to start")
    return watch


def gang_objects(harness: KubeHarness, job_id: str) -> list[str]:
    gang = names.gang_name(job_id)
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for resource in ("pods", "services")
                  for o in harness.cluster.objects(resource, NAMESPACE)
                  if o["metadata"].get("labels", {}).get(names.LABEL_GANG) == gang)


# -- the API server goes away --------------------------------------------------------------------------------------

def test_pods_that_end_while_the_api_server_is_unreachable_are_reported_once_it_is_back(
        harness: KubeHarness, tmp_path: Path) -> None:
    # The pods end when the test says so, inside the outage: a fixed sleep raced a loaded machine's slow start.
    flag = tmp_path / "end-now"
    watch = started(harness, "job_outage",
                    f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)\n")
    with harness.cluster.unreachable():
        with pytest.raises(KubeUnavailable):
            harness.executor.launch(harness.request("job_during", Behaviour.EXITS_0_QUICKLY))
        flag.touch()

        def ended_in_the_cluster() -> bool:   # read from the fake's own state, not through the API
            gang = f"{names.LABEL_GANG}={names.gang_name('job_outage')}"
            return [p["status"].get("phase") for p in harness.cluster.pods(NAMESPACE, gang)] == ["Succeeded"] * 2
        watch.until(ended_in_the_cluster, "the pods to end in the cluster")
        assert watch.of("job_outage", PodEventKind.EXITED) == []   # nothing can be seen meanwhile
    watch.until(watch.all_ranks("job_outage", PodEventKind.EXITED, 2), "the exits seen after the outage")
    assert [e.exit_code for e in watch.of("job_outage", PodEventKind.EXITED)] == [0, 0]
    assert gang_objects(harness, "job_during") == []          # the launch that failed left nothing behind
    assert harness.executor.pods.failures > 0


def test_a_watch_too_old_for_the_server_lists_again_and_sees_what_was_deleted_meanwhile(
        harness: KubeHarness) -> None:
    watch = started(harness, "job_gone")
    lists = harness.executor.pods.lists
    with harness.cluster.unreachable():
        pass
    harness.cluster.delete_outside(NAMESPACE, names.pod_name("job_gone", 1))   # kubectl delete --force
    harness.cluster.compact()                                                   # and the history is gone
    watch.until(lambda: bool(watch.of("job_gone", PodEventKind.FAILED)), "the deleted pod to be reported")
    assert harness.executor.pods.lists > lists and harness.executor.pods.gone >= 1
    failed = watch.of("job_gone", PodEventKind.FAILED)
    assert [(e.rank, "deleted outside Shoal" in e.message) for e in failed] == [(1, True)]
    harness.executor.terminate("job_gone", 0)
    watch.until(watch.ended("job_gone", 2), "the gang to end")


def test_a_stop_ordered_while_the_api_server_is_unreachable_is_delivered_with_its_deadline(
        harness: KubeHarness) -> None:
    # Says it is ready (the job contract helper's handler installed), then ignores SIGTERM: only a kill ends it.
    deaf = "import signal\nfrom scheduler_core import jobkit\njobkit.context()\n" + DEAF
    watch = started(harness, "job_deaf", deaf)
    watch.until(lambda: harness.executor.ready_ranks("job_deaf") == {0, 1}, "both ranks to say they are ready")
    with harness.cluster.unreachable():
        signalled = harness.now()
        harness.executor.terminate("job_deaf", harness.grace_s)
        uids = sorted(pod["metadata"]["uid"] for pod in harness.cluster.pods(NAMESPACE)
                      if pod["metadata"]["name"].startswith("job-deaf-"))
        assert harness.executor.pending_retries == [f"delete pod {uid}" for uid in uids]
    watch.until(watch.all_ranks("job_deaf", PodEventKind.EXITED, 2), "the deaf pods to be killed")
    assert harness.executor.pending_retries == []
    assert all(e.exit_code == 137 for e in watch.of("job_deaf", PodEventKind.EXITED))
    assert min(e.at for e in watch.of("job_deaf", PodEventKind.EXITED)) >= signalled + harness.grace_s - 1.0


# -- the cluster ends pods on its own account ---------------------------------------------------------------------

def test_an_evicted_pod_is_an_infrastructure_fault(harness: KubeHarness) -> None:
    watch = started(harness, "job_evict")
    harness.cluster.evict(NAMESPACE, names.pod_name("job_evict", 0))
    watch.until(lambda: bool(watch.of("job_evict", PodEventKind.FAILED)), "the eviction")
    assert [(e.rank, e.message.startswith("Evicted")) for e in watch.of("job_evict", PodEventKind.FAILED)] \
        == [(0, True)]
    harness.executor.terminate("job_evict", 0)
    watch.until(watch.ended("job_evict", 2), "the gang to end")


def test_the_kubelet_refuses_a_pod_the_node_has_no_free_device_for(harness: KubeHarness) -> None:
    node = "h100-b1-n00"
    harness.executor.launch(harness.request_for("job_a", python_spec("job_a", HONEST, 1, 8), nodes=[node]))
    watch = Watch(harness)
    watch.until(watch.all_ranks("job_a", PodEventKind.STARTED, 1), "the first job to start")
    harness.cluster.set_allocatable(node, "nvidia.com/gpu", 8)
    second = harness.request_for("job_b", python_spec("job_b", HONEST, 1, 1), nodes=[node])
    harness.executor.launch(second)
    watch.until(lambda: bool(watch.of("job_b", PodEventKind.FAILED)), "the refusal")
    assert "UnexpectedAdmissionError" in watch.of("job_b", PodEventKind.FAILED)[0].message
    harness.executor.terminate("job_a", 0)
    watch.until(watch.ended("job_a", 1), "the first job to end")


# -- gangs as one ---------------------------------------------------------------------------------------------------

def test_a_half_created_gang_is_deleted_whole_and_the_launch_refused(harness: KubeHarness) -> None:
    squatter = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": names.pod_name("job_half", 1)},
                "spec": {"nodeName": "h100-b1-n03", "containers": [{"name": "x", "image": "busybox",
                                                                    "command": ["sleep", "60"]}]}}
    harness.executor.core.create_namespaced_pod(NAMESPACE, squatter)
    with pytest.raises(ShoalError, match="1 of 2 pods were created"):
        harness.executor.launch(harness.request("job_half", Behaviour.RUNS_UNTIL_SIGNALLED))
    watch = Watch(harness)
    watch.until(lambda: gang_objects(harness, "job_half") == [] and "job_half" not in
                harness.executor.running_jobs(), "the garbage collector to delete the gang")
    assert watch.of("job_half") == []


def test_an_ended_gang_is_deleted_as_one(harness: KubeHarness) -> None:
    harness.executor.launch(harness.request("job_done", Behaviour.EXITS_0_QUICKLY))
    watch = Watch(harness)
    watch.until(watch.ended("job_done", 2), "the gang to end")
    watch.until(lambda: gang_objects(harness, "job_done") == [], "the gang's objects to go")


def test_a_relaunch_replaces_the_last_attempts_pods(harness: KubeHarness) -> None:
    spec = python_spec("job_again", "import sys; sys.exit(3)", 1)
    harness.executor.launch(harness.request_for("job_again", spec))
    watch = Watch(harness)
    watch.until(watch.ended("job_again", 1), "the first attempt to end")
    harness.executor.launch(harness.request_for("job_again", spec, attempt=1, nodes=["h100-b1-n01"]))
    watch.until(lambda: len(watch.of("job_again", PodEventKind.EXITED)) == 2, "the second attempt to end")
    assert [e.node for e in watch.of("job_again", PodEventKind.EXITED)] == ["h100-b0-n00", "h100-b1-n01"]


# -- private environment --------------------------------------------------------------------------------------------

def test_a_notebook_waits_for_its_secret_and_gets_it_as_environment(harness: KubeHarness) -> None:
    program = "import os, time; print('token', os.environ['JUPYTERHUB_API_TOKEN'], flush=True); time.sleep(60)"
    spec = make_spec("nb").flavour("h100-mig-1g").pods(1, 1).command(sys.executable, "-c", program).build()
    spec = spec.model_copy(update={"kind": JobKind.NOTEBOOK})
    harness.executor.launch(harness.request_for("job_nb", spec, nodes=[MIG_NODE], flavour="h100-mig-1g"))
    watch = Watch(harness)
    pod = names.pod_name("job_nb", 0)
    watch.until(lambda: "CreateContainerConfigError" in str(harness.cluster.pods(NAMESPACE)), "the pod to wait")
    assert watch.of("job_nb", PodEventKind.STARTED) == []
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": names.env_secret_name("job_nb")},
              "stringData": {"JUPYTERHUB_API_TOKEN": "hub-token-1"}}
    harness.executor.core.create_namespaced_secret(NAMESPACE, secret)
    watch.until(watch.all_ranks("job_nb", PodEventKind.STARTED, 1), "the notebook to start")
    watch.until(lambda: "token hub-token-1" in harness.cluster.log(NAMESPACE, pod), "the token in its env")
    assert "hub-token-1" not in str(harness.executor.pod_manifest("job_nb", 0))
    harness.executor.terminate("job_nb", 0)
    watch.until(watch.ended("job_nb", 1), "the notebook to stop")


# -- nodes ----------------------------------------------------------------------------------------------------------

def test_node_health_and_heartbeats_follow_the_cluster(harness: KubeHarness) -> None:
    executor = harness.executor
    assert executor.node_watch.wait_synced(5)
    harness.cluster.set_node_condition("h100-b0-n00", "GPUUnhealthy", "True", message="DCGM: double-bit ECC")
    harness.cluster.cordon("h100-b0-n01")
    harness.cluster.set_allocatable("h100-b0-n02", "nvidia.com/gpu", 7)
    harness.cluster.fail_node("h100-b1-n00")
    watch = Watch(harness)
    watch.until(lambda: executor.node_health(0)["h100-b1-n00"].health is Health.REPAIR, "the failure to show")
    health = {name: report.health for name, report in executor.node_health(0).items()}
    assert {n: h for n, h in health.items() if h is not Health.READY} == {
        "h100-b0-n00": Health.SUSPECT, "h100-b0-n01": Health.DRAINING, "h100-b0-n02": Health.SUSPECT,
        "h100-b1-n00": Health.REPAIR}
    assert "ECC" in executor.node_health(0)["h100-b0-n00"].reason
    beats = executor.heartbeats(0)
    assert "h100-b1-n00" not in beats and "h100-b0-n00" in beats and len(beats) == 8


# -- a restarted scheduler ------------------------------------------------------------------------------------------

def test_an_adopting_executor_does_not_report_again_what_was_reported(harness: KubeHarness) -> None:
    program = "import os, sys, time\nif os.environ['RANK'] == '1': sys.exit(0)\ntime.sleep(60)\n"
    watch = started(harness, "job_adopt", program)
    watch.until(lambda: bool(watch.of("job_adopt", PodEventKind.EXITED)), "rank 1 to exit")
    watch.poll()
    second = harness.reopen()
    second.adopt({"job_adopt"})
    again = Watch(harness, second)
    for _ in range(10):
        harness.advance()
        again.poll()
    assert again.events == []
    second.terminate("job_adopt", 0)
    again.until(lambda: bool(again.of("job_adopt", PodEventKind.EXITED)), "rank 0 to be killed")
    assert [(e.rank, e.kind) for e in again.events] == [(0, PodEventKind.EXITED)]


# -- pod output -----------------------------------------------------------------------------------------------------

def test_pod_output_is_read_from_an_offset_for_followers(harness: KubeHarness) -> None:
    program = "print('first line', flush=True); print('é' * 3, flush=True); import time; time.sleep(60)"
    started(harness, "job_logs", program, pods=1)
    reader = KubePodLogReader(harness.cluster.api_client(), NAMESPACE)
    watch = Watch(harness)
    watch.until(lambda: reader.read("job_logs", 0, 0).text.endswith("ééé\n"), "the output")
    whole = reader.read("job_logs", 0, 0)
    assert (whole.text, whole.attempt, whole.next_offset, whole.at_end) == ("first line\nééé\n", 0, 18, True)
    cut = reader.read("job_logs", 0, 11, limit=4)          # 'é' is two bytes: a character is never cut in half
    assert (cut.text, cut.next_offset, cut.at_end) == ("éé", 15, False)
    assert reader.read("job_logs", 0, cut.next_offset).text == "é\n"
    nothing = reader.read("job_never", 0, 0)
    assert (nothing.text, nothing.attempt, nothing.at_end) == ("", None, True)
    harness.executor.terminate("job_logs", 0)
    watch.until(watch.ended("job_logs", 1), "the pod to stop")


def test_a_closed_executor_used_again_watches_anew_and_adopts(harness: KubeHarness) -> None:
    """A scheduler that lost the lease closes its executor; if it leads again it uses the same one."""
    started(harness, "job_again2")
    executor = harness.executor
    executor.close()
    executor.adopt({"job_again2"})
    assert "job_again2" in executor.running_jobs()
    executor.terminate("job_again2", 0)
    watch = Watch(harness)
    watch.until(watch.ended("job_again2", 2), "the adopted gang to be killed")
