"""``KubernetesExecutor``: every gang a set of pods on the exact nodes the scheduler chose (DESIGN §3.5).

The scheduler stays the brain; Kubernetes runs the pods. ``launch`` creates the gang's headless Service, then its
pods (``scheduler_core.kube.manifests``), each bound to its node with ``nodeName`` and owned by the Service. What the
pods do comes back through two reflectors (list + watch, ``reflector.Reflector``): one on Shoal's pods, one on the
nodes. ``poll`` turns what they hold into the executor's events (``status``): STARTED when the job's container runs,
EXITED with its exit code, FAILED when the infrastructure ended it — the kubelet evicted or refused it, something
outside Shoal deleted it, or its node stopped being Ready for ``node_lost_after_s`` (the pod is then force-deleted,
so its GPUs are released by the kubelet whenever the node comes back).

Stopping is deletion: ``terminate(job, grace)`` deletes each pod with ``gracePeriodSeconds`` = the grace, so the
kubelet sends SIGTERM and SIGKILL at the end of the grace even if the scheduler is down meanwhile. Deleting the
Service deletes the whole gang (garbage collection through the owner references); the executor does that once a
gang has ended and been reported, after ``keep_finished_s`` (so ``kubectl logs`` works for a while).

Checkpoints and step times come from the job contract helper's report file on the shared volume
(``manifests.SharedVolume``), read as the local executor reads it; a checkpoint request raises a counter in the
gang's control file there (``jobkit`` reads it), since no API call can send a pod SIGUSR1.

Nothing is lost while the API server is unreachable: the reflectors resume (or list again) when it is back, and
events are derived from the pods' *state*, not from watch events, so a missed watch event changes nothing; deletions
and annotation writes that fail are queued and retried on every ``poll`` (a stop keeps its original deadline).
Which events were reported is written to the gang's Service (``shoal.io/reported``), so a restarted scheduler's
executor (``adopt``) reports each event once.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import Conflict, NotFound, ShoalError
from ..executor.base import Executor, LaunchRequest, NodeReport, PodEvent, PodEventKind
from ..model.cluster import Health, Node
from ..policy.snapshot import Placement
from . import manifests, names
from .inventory import NodeLabels, is_ready, node_health, not_ready_since
from .manifests import PodSettings
from .reflector import Obj, Reflector
from .status import Outcome, has_started, is_deleting, outcome, outcome_of_deleted, running_since

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KubeExecutorConfig:
    """Timing and behaviour of the executor; ``pods`` is what every job pod gets."""

    pods: PodSettings = field(default_factory=PodSettings)
    labels: NodeLabels = field(default_factory=NodeLabels)
    #: A node not Ready this long loses its pods (FAILED, force-deleted). Kubernetes itself waits 300 s
    #: (``tolerationSeconds`` of the not-ready taint) before evicting; a gang of 1,024 GPUs should not.
    node_lost_after_s: float = 60.0
    #: An ended gang's Service (and so its pods and logs) is deleted this long after it ended, by a sweep every
    #: ``collect_every_s`` (which also finds gangs a previous scheduler left).
    keep_finished_s: float = 3600.0
    collect_every_s: float = 60.0
    watch_timeout_s: float = 240.0
    resync_s: float = 600.0
    request_timeout_s: float = 10.0
    #: How long ``running_jobs``/``launch`` wait for the first list before refusing to answer.
    sync_timeout_s: float = 30.0
    #: Parallel API calls when creating or deleting a large gang's pods.
    api_workers: int = 16
    #: A pod whose container started less than this ago, and whose job has not said (through the job contract
    #: helper's ``ready`` report) that it handles SIGTERM, is deleted only when it says so or this has passed, so a
    #: preemption in a pod's first moments does not kill a job that would have checkpointed. The stop's deadline
    #: is kept. Generous, like the local executor's: it only delays stopping a pod in its first seconds, and a
    #: Python job importing its framework on a loaded node takes well over 5 s to reach its handler.
    sigterm_startup_window_s: float = 30.0


class KubeUnavailable(ShoalError):
    """The API server could not be reached (or refused) and nothing was changed."""


@dataclass(slots=True)
class _Gang:
    job_id: str
    attempt: int
    world: int
    uids: dict[int, str]
    nodes: dict[int, str]
    started: set[int] = field(default_factory=set)
    ended: set[int] = field(default_factory=set)
    persisted: tuple[frozenset[int], ...] = ()          # (started, ended, ready) as last annotated
    stopping: bool = False
    kill_by: float | None = None
    report_offset: int = 0
    last_seen: dict[int, Obj] = field(default_factory=dict)
    ready: set[int] = field(default_factory=set)     # ranks that reported their SIGTERM handler installed
    held: set[int] = field(default_factory=set)      # ranks whose deletion waits for ``ready`` (or the window)
    reports: list[PodEvent] = field(default_factory=list)   # read, not yet handed out by ``poll``

    @property
    def name(self) -> str:
        return names.gang_name(self.job_id)

    @property
    def live(self) -> list[int]:
        return [rank for rank in range(self.world) if rank not in self.ended]


@dataclass(slots=True)
class _Retry:
    """An API call that failed and must still happen."""

    what: str
    call: Callable[[], None]
    #: A deletion's deadline (wall clock): the retry uses what is left of the grace, never a fresh one.
    deadline: float | None = None


def _api_exception() -> type[Exception]:
    from kubernetes.client.exceptions import ApiException
    return ApiException  # type: ignore[no-any-return]


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return int(status) if isinstance(status, int) else None


class KubernetesExecutor(Executor):
    """Runs gangs as pods through the official client. ``api_client``: a ``kubernetes.client.ApiClient``
    (in-cluster or from a kubeconfig: ``scheduler_core.kube.setup``). ``nodes``: the nodes the scheduler places on
    (from ``inventory``); pods are only ever placed on those."""

    container_devices = True

    def __init__(self, api_client: Any, config: KubeExecutorConfig, nodes: Iterable[Node] = (), *,
                 clock: Callable[[], float] = time.time, start: bool = True) -> None:
        from kubernetes import client

        self.config = config
        self.settings = config.pods
        self.namespace = config.pods.namespace
        self.core = client.CoreV1Api(api_client)
        self.nodes: dict[str, Node] = {node.name: node for node in nodes}
        self._clock = clock
        self._gangs: dict[str, _Gang] = {}
        self._retries: dict[str, _Retry] = {}
        self._last_collect = float("-inf")
        self._warned_no_shared = False
        self._open(start)

    def _open(self, start: bool = True) -> None:
        """Watches and a worker pool of its own; made again when a closed executor is used again (a scheduler
        that lost the lease closes its executor, and may lead again later with the same one)."""
        config = self.config
        timing = partial(Reflector, watch_timeout_s=config.watch_timeout_s, resync_s=config.resync_s,
                         request_timeout_s=config.request_timeout_s)
        self.pods = timing("pods", partial(self.core.list_namespaced_pod, self.namespace),
                           label_selector=names.managed_selector())
        self.node_watch = timing("nodes", self.core.list_node, label_selector=config.labels.selector)
        self._pool = ThreadPoolExecutor(max_workers=max(1, config.api_workers), thread_name_prefix="shoal-kube")
        self._closed = False
        if start:
            self.pods.start()
            self.node_watch.start()

    def _reopen_if_closed(self) -> None:
        if self._closed:
            self._open()

    # -- conventions -------------------------------------------------------------------------------------------
    def master_addr(self, job_id: str, placement: Placement, attempt: int) -> str:
        return names.pod_address(job_id, 0, self.namespace, self.settings.cluster_domain)

    # -- launch ------------------------------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> None:
        job_id = request.job_id
        self._reopen_if_closed()
        self._check_placement(request)
        self._wait_synced()
        if job_id in self.running_jobs():
            raise Conflict(f"job {job_id} still has pods running; it cannot be launched again")
        pods = manifests.make_gang(request, self.settings)   # refuses a job with no image before anything is made
        self._clear_leftovers(job_id)
        self._prepare_shared(job_id, request.attempt)
        service_body = manifests.make_gang_service(job_id, request.attempt, self.settings)
        try:
            service = self._call(partial(self.core.create_namespaced_service, self.namespace, service_body))
        except KubeUnavailable as exc:
            raise KubeUnavailable(f"job {job_id}: the gang's Service could not be created: {exc}") from None
        owner = manifests.owner_reference(service)
        for pod in pods:
            pod["metadata"]["ownerReferences"] = [owner]
        created: list[Obj] = []
        failure: BaseException | None = None
        results = self._pool.map(self._create_pod, pods)
        for result in results:
            if isinstance(result, BaseException):
                failure = failure or result
            else:
                created.append(result)
        if failure is not None:
            self._abort(job_id, service, created)
            raise KubeUnavailable(f"job {job_id}: {len(created)} of {len(pods)} pods were created before "
                                  f"{failure}; the gang was deleted") from None
        for obj in created:
            self.pods.observe(obj)
        gang = _Gang(job_id=job_id, attempt=request.attempt, world=len(pods),
                     uids={manifests.pod_rank(obj) or 0: str(obj["metadata"]["uid"]) for obj in created},
                     nodes={rank: placed.node for rank, placed in enumerate(request.placement.pods)})
        self._gangs[job_id] = gang

    def _check_placement(self, request: LaunchRequest) -> None:
        for rank, placed in enumerate(request.placement.pods):
            node = request.nodes.get(placed.node)
            if node is None:
                raise Conflict(f"pod {rank} of job {request.job_id} is placed on {placed.node}, which the request "
                               f"does not describe")
            if self.nodes and placed.node not in self.nodes:
                raise NotFound(f"pod {rank} of job {request.job_id} is placed on {placed.node}, which is not a "
                               f"node of this cluster ({len(self.nodes)} GPU nodes)")
            available = len(node.devices.get(request.placement.flavour, ()))
            if any(not 0 <= unit < available for unit in placed.units):
                raise Conflict(f"pod {rank} of job {request.job_id} names units {placed.units} of "
                               f"{request.placement.flavour}, but {placed.node} has {available}")

    def _create_pod(self, body: dict[str, Any]) -> Obj | BaseException:
        try:
            result: Obj = self._call(partial(self.core.create_namespaced_pod, self.namespace, body))
            return result
        except BaseException as exc:  # noqa: BLE001 - handed back to launch, which cleans up and raises
            return exc

    def _clear_leftovers(self, job_id: str) -> None:
        """An earlier attempt's ended pods and Service still hold the gang's names: delete them first."""
        gang = names.gang_name(job_id)
        for uid, pod in self.pods.objects().items():
            if pod["metadata"].get("labels", {}).get(names.LABEL_GANG) != gang:
                continue
            try:
                self._call(partial(self.core.delete_namespaced_pod, pod["metadata"]["name"], self.namespace,
                                   body=_delete_options(0, uid)), missing_ok=True)
            except KubeUnavailable as exc:
                raise KubeUnavailable(f"job {job_id}: a pod of its last attempt could not be deleted: {exc}") \
                    from None
        try:
            self._call(partial(self.core.delete_namespaced_service, gang, self.namespace,
                               body={"propagationPolicy": "Background"}), missing_ok=True)
        except KubeUnavailable as exc:
            raise KubeUnavailable(f"job {job_id}: the Service of its last attempt could not be deleted: {exc}") \
                from None

    def _abort(self, job_id: str, service: Obj, created: list[Obj]) -> None:
        """A launch that failed half-way: delete the Service (the garbage collector takes every pod it owns, even
        one whose creation answer was lost) and the pods we know of; whatever fails is retried on ``poll``."""
        gang = names.gang_name(job_id)
        uid = str(service["metadata"]["uid"])
        self._try(f"delete service {gang}", self._deferred(
            self.core.delete_namespaced_service, gang, self.namespace,
            body={"propagationPolicy": "Background", "preconditions": {"uid": uid}}))
        for obj in created:
            pod_uid = str(obj["metadata"]["uid"])
            self._try(f"delete pod {pod_uid}", self._deferred(
                self.core.delete_namespaced_pod, obj["metadata"]["name"], self.namespace,
                body=_delete_options(0, pod_uid)))

    def _prepare_shared(self, job_id: str, attempt: int) -> None:
        shared = self.settings.shared
        if shared is None:
            return
        gang = names.gang_name(job_id)
        for path in (shared.report_file(gang, attempt, local=True), shared.control_file(gang, attempt, local=True)):
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ShoalError(f"job {job_id}: cannot prepare {Path(path).parent} on the shared volume: {exc}") \
                    from None

    # -- stop and checkpoint -----------------------------------------------------------------------------------
    def terminate(self, job_id: str, grace_s: float) -> None:
        self._reopen_if_closed()
        gang = self._gang(job_id)
        if gang is None:
            return
        now = self._clock()
        deadline = now + max(grace_s, 0.0)
        if gang.kill_by is not None and deadline >= gang.kill_by:
            return   # already asked to be gone by then (a repeated stop never lengthens the grace)
        gang.stopping = True
        gang.kill_by = deadline
        self._absorb_reports(gang, now)
        for rank in gang.live:
            if grace_s <= 0 or not self._young(gang, rank, now):
                gang.held.discard(rank)
                self._delete_pod(gang, rank, deadline)
            else:
                gang.held.add(rank)

    def _young(self, gang: _Gang, rank: int, wall: float) -> bool:
        """The rank's container started a moment ago and its job has not said it handles SIGTERM yet."""
        if rank in gang.ready:
            return False
        uid = gang.uids.get(rank)
        obj = self.pods.get(uid) if uid is not None else None
        started = running_since(obj) if obj is not None else None
        return started is not None and wall - started < self.config.sigterm_startup_window_s

    def _release_held(self, gang: _Gang) -> None:
        wall = self._clock()
        for rank in sorted(gang.held):
            if rank in gang.ended or not self._young(gang, rank, wall) or (gang.kill_by or 0) <= wall:
                gang.held.discard(rank)
                if rank not in gang.ended:
                    self._delete_pod(gang, rank, gang.kill_by if gang.kill_by is not None else wall)

    def _delete_pod(self, gang: _Gang, rank: int, deadline: float) -> None:
        uid = gang.uids.get(rank)
        if uid is None:
            return
        name = names.pod_name(gang.job_id, rank)

        def delete() -> None:
            grace = manifests.grace_seconds(max(0.0, deadline - self._clock()))
            self._call(partial(self.core.delete_namespaced_pod, name, self.namespace,
                               body=_delete_options(grace, uid)), missing_ok=True)
        self._try(f"delete pod {uid}", delete, deadline=deadline)

    def request_checkpoint(self, job_id: str) -> None:
        self._reopen_if_closed()
        gang = self._gang(job_id)
        if gang is None or gang.stopping:
            return
        shared = self.settings.shared
        if shared is None:
            if not self._warned_no_shared:
                self._warned_no_shared = True
                log.warning("checkpoint requests need the shared volume (--kube-shared-claim); job %s was not asked",
                            job_id)
            return
        path = Path(shared.control_file(gang.name, gang.attempt, local=True))
        try:
            count = int(path.read_text().strip() or "0")
        except (FileNotFoundError, ValueError):
            count = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        temp.write_text(str(count + 1))
        os.replace(temp, path)

    # -- events ------------------------------------------------------------------------------------------------
    def poll(self, now: float) -> list[PodEvent]:
        self._reopen_if_closed()
        self._run_retries()
        lost = self._lost_nodes()
        events: list[PodEvent] = []
        for gang in list(self._gangs.values()):
            if gang.held:
                self._absorb_reports(gang, now)
                self._release_held(gang)
            events.extend(self._poll_gang(gang, now, lost))
            if not gang.live:
                self._finished(gang)
        self._collect_finished()
        return events

    def _poll_gang(self, gang: _Gang, now: float, lost: Mapping[str, str]) -> list[PodEvent]:
        # Which pods ended is decided before the reports are read, so a report written before an exit we see is
        # read below and comes out first. A gang being stopped is reported as it ends, as a whole, so ranks that
        # leave at once do not come out before rank 0's last checkpoint (FAILED is never held back).
        ends: dict[int, Outcome] = {}
        live: dict[int, Obj] = {}
        for rank in gang.live:
            uid = gang.uids.get(rank)
            obj = self.pods.get(uid) if uid is not None else None
            if obj is None:
                gone = self.pods.tombstone(uid) if uid is not None else None
                ends[rank] = outcome_of_deleted(gone or gang.last_seen.get(rank), stopping=gang.stopping)
                continue
            gang.last_seen[rank] = obj
            live[rank] = obj
            ended = outcome(obj, stopping=gang.stopping)
            node = gang.nodes.get(rank, "")
            if ended is None and node in lost:
                ended = Outcome(PodEventKind.FAILED, None, f"node {node} lost: {lost[node]}")
                self._delete_pod(gang, rank, self._clock())   # force: the kubelet cannot be asked any more
            if ended is not None:
                ends[rank] = ended
        if gang.stopping and len(ends) < len(gang.live):
            ends = {rank: end for rank, end in ends.items() if end.kind is PodEventKind.FAILED}
        events: list[PodEvent] = []
        for rank in range(gang.world):
            if rank in gang.started:
                continue
            if rank in ends or (rank in live and has_started(live[rank])):
                gang.started.add(rank)
                events.append(PodEvent(gang.job_id, rank, PodEventKind.STARTED, now, node=gang.nodes.get(rank)))
        self._absorb_reports(gang, now)
        events.extend(gang.reports)
        gang.reports = []
        for rank, end in sorted(ends.items()):
            gang.started.add(rank)
            gang.ended.add(rank)
            events.append(PodEvent(gang.job_id, rank, end.kind, now, node=gang.nodes.get(rank),
                                   exit_code=end.exit_code, message=end.message))
            uid = gang.uids.get(rank)
            if uid is not None and not self.pods.get(uid):
                self.pods.forget(uid)
        self._persist_reported(gang)
        return events

    def _lost_nodes(self) -> dict[str, str]:
        """Nodes whose pods are lost: not Ready for ``node_lost_after_s``, or gone from the cluster."""
        if not self.node_watch.synced:
            return {}
        wall = self._clock()
        present = self.node_watch.by_name()
        lost: dict[str, str] = {}
        for name, obj in present.items():
            since = not_ready_since(obj)
            if since is not None and wall - since >= self.config.node_lost_after_s:
                lost[name] = node_health(obj, self.config.labels).reason
        for name in self.nodes:
            if name not in present:
                lost[name] = "the node is gone from the cluster"
        return lost

    def _absorb_reports(self, gang: _Gang, now: float) -> None:
        """New lines of the gang's report file: ``ready`` marks a rank's SIGTERM handler as installed; checkpoints
        and step times wait in ``gang.reports`` for the next ``poll``."""
        for line in self._read_reports(gang):
            try:
                record = json.loads(line)
                if record.get("kind") == "ready":
                    gang.ready.add(int(record.get("rank", 0)))
                    continue
            except (ValueError, TypeError, AttributeError):
                pass
            event = _report_event(gang, line, now)
            if event is not None:
                gang.reports.append(event)

    def _read_reports(self, gang: _Gang) -> list[bytes]:
        shared = self.settings.shared
        if shared is None:
            return []
        path = Path(shared.report_file(gang.name, gang.attempt, local=True))
        try:
            with path.open("rb") as handle:
                handle.seek(gang.report_offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        gang.report_offset += end + 1
        return chunk[:end].splitlines()

    def _persist_reported(self, gang: _Gang) -> None:
        state = (frozenset(gang.started), frozenset(gang.ended), frozenset(gang.ready))
        if state == gang.persisted:
            return
        gang.persisted = state
        # ``ready`` goes with the offset: an adopter reads the reports only from there, so it would never see the
        # ranks' ``ready`` lines and would hold (then kill at the deadline) pods that handle SIGTERM.
        value = json.dumps({"attempt": gang.attempt, "started": sorted(state[0]), "ended": sorted(state[1]),
                            "ready": sorted(state[2]), "report_offset": gang.report_offset})
        self._annotate(gang, {names.ANNOTATION_REPORTED: value})

    def _annotate(self, gang: _Gang, annotations: Mapping[str, str]) -> None:
        body = {"metadata": {"annotations": dict(annotations)}}
        # Keyed by gang, so only the newest annotation write of a gang waits for a retry.
        self._try(f"annotate {gang.name}", self._deferred(
            self.core.patch_namespaced_service, gang.name, self.namespace, body),
            key=f"annotate {gang.name} {','.join(sorted(annotations))}")

    def _finished(self, gang: _Gang) -> None:
        del self._gangs[gang.job_id]
        if self.config.keep_finished_s <= 0:
            self._try(f"delete service {gang.name}", self._deferred(
                self.core.delete_namespaced_service, gang.name, self.namespace,
                body={"propagationPolicy": "Background"}))
        else:
            self._annotate(gang, {names.ANNOTATION_ENDED_AT: f"{self._clock():.3f}"})

    def _collect_finished(self) -> None:
        """Delete gangs that ended more than ``keep_finished_s`` ago (a sweep every ``collect_every_s``)."""
        wall = self._clock()
        if self.config.keep_finished_s <= 0 or wall - self._last_collect < self.config.collect_every_s:
            return
        self._last_collect = wall
        try:
            services = self._call(partial(self.core.list_namespaced_service, self.namespace,
                                          label_selector=names.managed_selector())).get("items") or ()
        except (KubeUnavailable, Conflict, ValueError, AttributeError):
            return
        for service in services:
            ended = (service["metadata"].get("annotations") or {}).get(names.ANNOTATION_ENDED_AT)
            try:
                expired = ended is not None and wall - float(ended) >= self.config.keep_finished_s
            except ValueError:
                expired = False
            if expired:
                name = service["metadata"]["name"]
                self._try(f"delete service {name}", self._deferred(
                    self.core.delete_namespaced_service, name, self.namespace,
                    body={"propagationPolicy": "Background"}))

    # -- what runs ---------------------------------------------------------------------------------------------
    def running_jobs(self) -> set[str]:
        self._reopen_if_closed()
        self._wait_synced()
        running = {job_id for job_id, gang in self._gangs.items() if gang.live}
        for pod in self.pods.objects().values():
            job_id = manifests.pod_job(pod)
            if job_id is not None and job_id not in running and outcome(pod, stopping=is_deleting(pod)) is None:
                running.add(job_id)
        return running

    def adopt(self, job_ids: set[str]) -> None:
        """Follow gangs another executor instance started, reporting from where it left off (the Service's
        ``shoal.io/reported`` annotation)."""
        self._reopen_if_closed()
        self._wait_synced()
        for job_id in job_ids:
            if job_id not in self._gangs:
                gang = self._load(job_id)
                if gang is not None:
                    self._gangs[job_id] = gang

    def _gang(self, job_id: str) -> _Gang | None:
        gang = self._gangs.get(job_id)
        if gang is None and self.pods.synced:
            gang = self._load(job_id)
            if gang is not None and gang.live:
                self._gangs[job_id] = gang
        return gang

    def _load(self, job_id: str) -> _Gang | None:
        gang_name = names.gang_name(job_id)
        pods = [pod for pod in self.pods.objects().values()
                if pod["metadata"].get("labels", {}).get(names.LABEL_GANG) == gang_name
                and manifests.pod_job(pod) == job_id]
        if not pods:
            return None
        attempt = max(manifests.pod_attempt(pod) for pod in pods)
        current = [pod for pod in pods if manifests.pod_attempt(pod) == attempt]
        world = max(_world_size(pod) for pod in current)
        gang = _Gang(job_id=job_id, attempt=attempt, world=world, uids={}, nodes={})
        for pod in current:
            rank = manifests.pod_rank(pod)
            if rank is not None:
                gang.uids[rank] = str(pod["metadata"]["uid"])
                gang.nodes[rank] = str(pod["spec"].get("nodeName") or "")
                gang.last_seen[rank] = pod
                gang.stopping = gang.stopping or is_deleting(pod)
        reported = self._read_reported(gang_name, attempt)
        if reported is not None:
            gang.started = set(reported.get("started", ()))
            gang.ended = set(reported.get("ended", ()))
            gang.ready = set(reported.get("ready", ()))
            gang.report_offset = int(reported.get("report_offset", 0))
            gang.persisted = (frozenset(gang.started), frozenset(gang.ended), frozenset(gang.ready))
        return gang

    def _read_reported(self, gang_name: str, attempt: int) -> dict[str, Any] | None:
        try:
            service = self._call(partial(self.core.read_namespaced_service, gang_name, self.namespace))
            data = json.loads((service["metadata"].get("annotations") or {})[names.ANNOTATION_REPORTED])
        except (KubeUnavailable, Conflict, KeyError, ValueError, TypeError):
            return None
        return data if isinstance(data, dict) and data.get("attempt") == attempt else None

    # -- nodes -------------------------------------------------------------------------------------------------
    def heartbeats(self, now: float) -> dict[str, float | None]:
        """The nodes the cluster says are Ready (no GPU utilisation: that is DCGM's, through Prometheus)."""
        self._reopen_if_closed()
        return {name: None for name, obj in self.node_watch.by_name().items()
                if is_ready(obj) and (not self.nodes or name in self.nodes)}

    def node_health(self, now: float) -> dict[str, NodeReport]:
        self._reopen_if_closed()
        if not self.node_watch.synced:
            return {}
        present = self.node_watch.by_name()
        reports = {name: node_health(obj, self.config.labels) for name, obj in present.items()
                   if not self.nodes or name in self.nodes}
        for name in self.nodes:
            if name not in present:
                reports[name] = NodeReport(Health.REPAIR, "gone from the cluster")
        return reports

    def close(self) -> None:
        """Stop watching and forget the gangs. Pods keep running; whoever leads next adopts them (this executor
        too: using it again opens new watches)."""
        self._closed = True
        self.pods.stop()
        self.node_watch.stop()
        self._pool.shutdown(wait=False)
        self._gangs.clear()
        self._retries.clear()

    # -- inspection (tests, ``shoal`` tools) -------------------------------------------------------------------
    def pod_manifest(self, job_id: str, rank: int) -> Obj:
        gang = self._gang(job_id)
        uid = gang.uids.get(rank) if gang is not None else None
        obj = self.pods.get(uid) if uid is not None else None
        if obj is None:
            raise KeyError(f"job {job_id} has no live pod {rank}")
        return obj

    def ready_ranks(self, job_id: str) -> set[int]:
        """Ranks whose job said (through the job contract helper) that it handles SIGTERM."""
        gang = self._gang(job_id)
        return set(gang.ready) if gang is not None else set()

    @property
    def pending_retries(self) -> list[str]:
        return sorted(retry.what for retry in self._retries.values())

    # -- API calls ---------------------------------------------------------------------------------------------
    def _call(self, fn: Callable[..., Any], *, missing_ok: bool = False) -> Any:
        """One API call with the executor's timeout, answered as the JSON the server sent (no model classes: they
        cost more than the call). A missing object is fine when ``missing_ok``; any other failure is
        ``KubeUnavailable`` (or ``Conflict`` when the server refuses the object itself)."""
        api_exception = _api_exception()
        try:
            response = fn(_request_timeout=self.config.request_timeout_s, _preload_content=False)
            try:
                return json.loads(response.data) if response.data else None
            finally:
                response.release_conn()
        except api_exception as exc:
            status = _status(exc)
            if missing_ok and status in (404, 409):
                return None   # gone already, or a newer object holds the name (its uid differs)
            if status in (400, 403, 409, 422):
                raise Conflict(f"the API server refused: {status} {_reason(exc)}") from None
            raise KubeUnavailable(f"the API server answered {status} {_reason(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - urllib3 and socket errors of an unreachable server
            raise KubeUnavailable(f"the API server is unreachable ({type(exc).__name__}: {exc})") from None

    def _deferred(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], Any]:
        """A call for ``_try``: ``fn(*args, **kwargs)`` through ``_call``, a missing object being fine."""
        return partial(self._call, partial(fn, *args, **kwargs), missing_ok=True)

    def _try(self, what: str, call: Callable[[], Any], *, deadline: float | None = None,
             key: str | None = None) -> None:
        """Do ``call`` now; if the API server cannot be reached, remember it and retry on every ``poll``."""
        try:
            call()
        except KubeUnavailable as exc:
            log.warning("%s failed (%s); retrying", what, exc)
            self._retries[key or what] = _Retry(what, call, deadline)
        except Conflict as exc:
            log.warning("%s refused: %s", what, exc)
        else:
            self._retries.pop(key or what, None)

    def _run_retries(self) -> None:
        for key, retry in list(self._retries.items()):
            try:
                retry.call()
            except KubeUnavailable:
                return   # still unreachable: the rest would fail too
            except Conflict as exc:
                log.warning("%s refused: %s", retry.what, exc)
            self._retries.pop(key, None)

    def _wait_synced(self) -> None:
        if not (self.pods.wait_synced(self.config.sync_timeout_s)
                and self.node_watch.wait_synced(self.config.sync_timeout_s)):
            raise KubeUnavailable(f"no answer from the Kubernetes API server within {self.config.sync_timeout_s:g}s"
                                  f"; the executor does not know what runs")


def _delete_options(grace: int, uid: str) -> dict[str, Any]:
    return {"gracePeriodSeconds": grace, "preconditions": {"uid": uid}, "propagationPolicy": "Background"}


def _reason(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        message = None
    return str(message or getattr(exc, "reason", "") or exc)


def _world_size(pod: Obj) -> int:
    env = manifests.container_env(pod)
    try:
        return int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _report_event(gang: _Gang, line: bytes, now: float) -> PodEvent | None:
    try:
        record = json.loads(line)
        rank = int(record.get("rank", 0))
        kind = record["kind"]
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("job %s: ignoring a malformed report line %r", gang.job_id, line[:200])
        return None
    if not 0 <= rank < gang.world:
        return None
    node = gang.nodes.get(rank)
    if kind == "checkpoint":
        data = {key: record[key] for key in ("step", "uri", "bytes", "cost_s", "verified", "written_at")
                if key in record}
        return PodEvent(gang.job_id, rank, PodEventKind.CHECKPOINT, now, node=node, data=data)
    if kind == "step_time":
        step: dict[str, object] = {"step_time_s": record.get("step_time_s")}
        if "step" in record:
            step["step"] = record["step"]
        return PodEvent(gang.job_id, rank, PodEventKind.STEP_TIME, now, node=node, data=step)
    return None
