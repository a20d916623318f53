"""A fake Kubernetes cluster with behaviour: an API server over real HTTP and a kubelet that runs real processes.

No real API server can run on these machines, so the Kubernetes executor is tested against this one, through the
official ``kubernetes`` client, over HTTP. It implements the subset of the core/v1 REST API the executor, the node
inventory and the spawner use, with the semantics they rely on:

* **pods, services, secrets** (namespaced) and **nodes**: create (validated against the Kubernetes OpenAPI schema,
  ``422`` when invalid, ``409`` on a taken name), get, list with label selectors, strategic/merge patch of
  metadata, delete. Deleting a pod honours ``gracePeriodSeconds`` (``0``: removed at once; otherwise marked with a
  ``deletionTimestamp`` for the kubelet to stop it), ``preconditions.uid`` (``409`` when it names another pod), and
  removes a pod that never ran or already ended at once. Deleting an owner deletes its dependents (the garbage
  collector, background propagation), each with its own grace period. A pod's ``log`` (its process's output, with
  ``limitBytes``).
* **watches** with resource versions: events after the given version, then new ones until ``timeoutSeconds``;
  a version older than the retained history (``history`` events, or ``compact()``) gets the ``410 Gone`` ERROR event.
* **the kubelet** of each node runs a bound pod's container command as a local process with the pod's environment
  (literal values, ``secretKeyRef``/``envFrom`` from Secrets, ``fieldRef`` to ``spec.nodeName``/``metadata.name``),
  admits it only if the node's allocatable ``nvidia.com/*`` devices are free (else ``UnexpectedAdmissionError``), holds
  a container whose non-optional Secret is missing in ``CreateContainerConfigError``, reports ``running`` then
  ``terminated`` with the exit code (``128 + signal`` when killed), sends SIGTERM on graceful deletion and SIGKILL
  when the grace ends.

Test controls: ``add_node``, ``set_node_condition``, ``cordon``, ``set_allocatable``, ``fail_node`` (the machine
dies: its processes are killed, its kubelet stops reporting, Ready turns Unknown), ``evict``, ``compact``,
``unreachable()`` (a context in which the server listens nowhere and every open watch is cut), and ``requests`` (every
verb and resource the clients used, for the RBAC test).

What it does **not** do: scheduling (pods are bound by ``nodeName`` only), container images (the command runs on this
machine; volumes are not mounted — a PVC's ``mountPath`` must be a real directory here), networking and DNS (a
Service only owns its pods), authentication and authorisation, admission webhooks, field selectors, server-side
apply, ``Binding`` subresources, and the node lifecycle controller's taint-based eviction (the executor acts on a
NotReady node itself). docs/deploy.md repeats this list.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import kubernetes_validate
import tornado.httpserver
import tornado.netutil
import tornado.web
from tornado.iostream import StreamClosedError

T = TypeVar("T")
#: The Kubernetes version whose OpenAPI schemas objects are validated against (the client is 35.x = 1.35).
K8S_VERSION = "1.35"
KINDS = {"pods": "Pod", "services": "Service", "secrets": "Secret", "nodes": "Node"}
CLUSTER_SCOPED = {"nodes"}


def rfc3339(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    """``a=b,c!=d,e`` label selectors (equality, inequality, existence)."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """JSON merge patch (RFC 7386), which strategic merge equals for the maps Shoal patches."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                "reason": self.reason, "code": self.code}


@dataclass
class Running:
    """A container the fake kubelet runs."""

    popen: subprocess.Popen[bytes]
    term_sent: bool = False
    kill_at: float | None = None


@dataclass
class Store:
    """Every object, and the event history watches replay. Touched only on the server's event loop thread."""

    history_size: int
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    history: deque[tuple[int, str, str, dict[str, Any]]] = field(default_factory=deque)
    version: int = 1
    compacted: int = 0
    changed: asyncio.Event | None = None

    def record(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.history.append((self.version, kind, event, copy.deepcopy(obj)))
        while len(self.history) > self.history_size:
            self.compacted = self.history.popleft()[0]
        if self.changed is not None:
            self.changed.set()
            self.changed = asyncio.Event()


class FakeCluster:
    """The fake API server and its kubelets, served from a thread of their own (``start``/``stop``)."""

    def __init__(self, workdir: Path, *, base_env: Mapping[str, str] | None = None, history: int = 2000,
                 validate: bool = True) -> None:
        self.workdir = workdir
        self.base_env = dict(base_env or {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        self.validate = validate
        self.store = Store(history)
        self.requests: list[tuple[str, str, str | None]] = []
        #: Every pod deletion asked for: (namespace, name, grace period in seconds).
        self.deletions: list[tuple[str, str, int]] = []
        self.kubelets_down: set[str] = set()
        self.running: dict[str, Running] = {}          # pod uid → its process
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: tornado.httpserver.HTTPServer | None = None
        self._app = tornado.web.Application([(r"/(.*)", _Handler, {"cluster": self})])
        self._tick: asyncio.Task[None] | None = None

    # -- life cycle ----------------------------------------------------------------------------------------------
    def start(self) -> FakeCluster:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            self.store.changed = asyncio.Event()
            self._listen()
            self._tick = loop.create_task(self._kubelet_loop())
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-kube", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            if self._tick is not None:
                self._tick.cancel()
            for uid in list(self.running):
                self._kill(uid)
            if self._server is not None:
                self._server.stop()
                await self._server.close_all_connections()
        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api_client(self) -> Any:
        from kubernetes import client
        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    def _listen(self) -> None:
        sockets = tornado.netutil.bind_sockets(self.port, "127.0.0.1")
        self.port = sockets[0].getsockname()[1]
        self._server = tornado.httpserver.HTTPServer(self._app)
        self._server.add_sockets(sockets)

    @contextlib.contextmanager
    def unreachable(self) -> Iterator[None]:
        """The API server is gone (nothing listens on its port, open watches are cut) until the block ends."""
        async def down() -> None:
            assert self._server is not None
            self._server.stop()
            await self._server.close_all_connections()
        self._on_loop_async(down)
        try:
            yield
        finally:
            self._on_loop(self._listen)

    # -- running things on the server's loop ---------------------------------------------------------------------
    def _on_loop(self, fn: Callable[[], T]) -> T:
        assert self._loop is not None
        future: Future[T] = Future()

        def call() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                future.set_exception(exc)
        self._loop.call_soon_threadsafe(call)
        return future.result(10)

    def _on_loop_async(self, fn: Callable[[], Any]) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(fn(), self._loop).result(10)

    # -- test controls -------------------------------------------------------------------------------------------
    def add_node(self, name: str, *, labels: Mapping[str, str] | None = None, gpus: int = 8,
                 mig: Mapping[str, int] | None = None, cpu: str = "192", memory: str = "2064Gi",
                 product: str = "NVIDIA-H100-80GB-HBM3") -> None:
        capacity: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": "110"}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        for profile, count in (mig or {}).items():
            capacity[f"nvidia.com/mig-{profile}"] = str(count)
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                      "nvidia.com/gpu.product": product, **(labels or {})}},
                "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                "status": {"capacity": capacity, "allocatable": dict(capacity),
                           "conditions": [_condition("Ready", "True", "KubeletReady", "kubelet is posting ready")]}}
        self._on_loop(lambda: self._create("nodes", None, node, validate=False))

    def node(self, name: str) -> dict[str, Any]:
        return self._on_loop(lambda: copy.deepcopy(self._get("nodes", None, name)))

    def _update_node(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        def update() -> None:
            node = self._get("nodes", None, name)
            change(node)
            self.store.record("nodes", "MODIFIED", node)
        self._on_loop(update)

    def set_node_condition(self, name: str, kind: str, status: str, reason: str = "", message: str = "") -> None:
        def change(node: dict[str, Any]) -> None:
            conditions = [c for c in node["status"]["conditions"] if c["type"] != kind]
            conditions.append(_condition(kind, status, reason or kind, message))
            node["status"]["conditions"] = conditions
        self._update_node(name, change)

    def cordon(self, name: str, cordoned: bool = True) -> None:
        self._update_node(name, lambda node: node["spec"].__setitem__("unschedulable", cordoned))

    def set_allocatable(self, name: str, resource: str, count: int) -> None:
        self._update_node(name, lambda node: node["status"]["allocatable"].__setitem__(resource, str(count)))

    def fail_node(self, name: str) -> None:
        """The machine dies: its containers with it; its kubelet posts nothing more; Ready becomes Unknown."""
        def fail() -> None:
            self.kubelets_down.add(name)
            for pod in self._all("pods"):
                if pod["spec"].get("nodeName") == name and pod["metadata"]["uid"] in self.running:
                    self._kill(pod["metadata"]["uid"])
            node = self._get("nodes", None, name)
            node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
            node["status"]["conditions"].append(
                _condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."))
            self.store.record("nodes", "MODIFIED", node)
        self._on_loop(fail)

    def evict(self, namespace: str, name: str, reason: str = "Evicted",
              message: str = "The node was low on resource: memory.") -> None:
        """The kubelet ends a pod on its own account (not the job's fault)."""
        def evict() -> None:
            pod = self._get("pods", namespace, name)
            self._kill(pod["metadata"]["uid"])
            pod["status"].update({"phase": "Failed", "reason": reason, "message": message})
            _set_container(pod, {"terminated": {"exitCode": 137, "reason": "Error"}})
            self.store.record("pods", "MODIFIED", pod)
        self._on_loop(evict)

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: older resource versions now get 410 Gone."""
        def compact() -> None:
            self.store.history.clear()
            self.store.compacted = self.store.version
        self._on_loop(compact)

    def delete_outside(self, namespace: str, name: str) -> None:
        """Someone else (an operator's ``kubectl delete --force``) removes a pod."""
        self._on_loop(lambda: self._delete("pods", namespace, name, {"gracePeriodSeconds": 0}))

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        return self._on_loop(lambda: [copy.deepcopy(p) for p in self._all("pods", namespace)
                                      if matches(selector, p["metadata"].get("labels") or {})])

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._on_loop(lambda: [copy.deepcopy(o) for o in self._all(resource, namespace)])

    def verbs(self) -> set[tuple[str, str]]:
        """(verb, resource) pairs the clients used, as RBAC names them."""
        return {(verb, resource) for verb, resource, _ in list(self.requests)}

    # -- the store -------------------------------------------------------------------------------------------------
    def _all(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [obj for (kind, ns, _), obj in sorted(self.store.objects.items())
                if kind == resource and (namespace is None or ns == namespace)]

    def _get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.store.objects.get((resource, namespace or "", name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
        return obj

    def _create(self, resource: str, namespace: str | None, body: dict[str, Any], *,
                validate: bool = True) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        obj.setdefault("apiVersion", "v1")
        obj.setdefault("kind", KINDS[resource])
        if validate and self.validate:
            try:
                kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                raise ApiError(422, "Invalid", f"{obj['kind']} is invalid: {str(exc).splitlines()[0]}") from None
        metadata = obj.setdefault("metadata", {})
        name = metadata.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if resource not in CLUSTER_SCOPED:
            metadata["namespace"] = namespace
        key = (resource, namespace or "", name)
        if key in self.store.objects:
            raise ApiError(409, "AlreadyExists", f'{resource} "{name}" already exists')
        metadata.update({"uid": str(uuid.uuid4()), "creationTimestamp": rfc3339(time.time())})
        if resource == "pods":
            obj["status"] = {"phase": "Pending"}
        if resource == "secrets" and "stringData" in obj:
            obj.setdefault("data", {}).update(obj.pop("stringData"))   # kept as text: the fake does not base64
        self.store.objects[key] = obj
        self.store.record(resource, "ADDED", obj)
        return obj

    def _patch(self, resource: str, namespace: str | None, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        obj = self._get(resource, namespace, name)
        merge(obj, {key: value for key, value in patch.items() if key in ("metadata", "spec")})
        self.store.record(resource, "MODIFIED", obj)
        return obj

    def _remove(self, resource: str, obj: dict[str, Any]) -> None:
        key = (resource, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        if self.store.objects.pop(key, None) is not None:
            self.store.record(resource, "DELETED", obj)
            self._collect_garbage(obj["metadata"]["uid"])

    def _delete(self, resource: str, namespace: str | None, name: str, options: Mapping[str, Any]) -> dict[str, Any]:
        obj = self._get(resource, namespace, name)
        wanted = (options.get("preconditions") or {}).get("uid")
        if wanted and wanted != obj["metadata"]["uid"]:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {wanted}, UID in object "
                                            f"meta: {obj['metadata']['uid']}")
        if resource != "pods":
            self._remove(resource, obj)
            return obj
        grace = options.get("gracePeriodSeconds")
        grace = int(obj["spec"].get("terminationGracePeriodSeconds", 30)) if grace is None else int(grace)
        uid = obj["metadata"]["uid"]
        self.deletions.append((namespace or "", name, grace))
        ended = obj["status"].get("phase") in ("Succeeded", "Failed")
        if grace == 0 or not obj["spec"].get("nodeName") or (ended and uid not in self.running):
            if uid in self.running and obj["spec"].get("nodeName") not in self.kubelets_down:
                self._kill(uid)   # the kubelet finds its pod gone from the API and stops it at once
            self._remove("pods", obj)
            return obj
        current = obj["metadata"].get("deletionGracePeriodSeconds")
        if current is None or grace < current:
            obj["metadata"]["deletionGracePeriodSeconds"] = grace
            obj["metadata"]["deletionTimestamp"] = rfc3339(time.time() + grace)
            running = self.running.get(uid)
            if running is not None:
                running.kill_at = time.time() + grace
            self.store.record("pods", "MODIFIED", obj)
        return obj

    def _collect_garbage(self, owner_uid: str) -> None:
        for resource in ("pods", "services", "secrets"):
            for obj in self._all(resource):
                owners = obj["metadata"].get("ownerReferences") or ()
                if any(ref.get("uid") == owner_uid for ref in owners):
                    self._delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"], {})

    # -- the kubelets ----------------------------------------------------------------------------------------------
    async def _kubelet_loop(self) -> None:
        while True:
            try:
                self._kubelet_tick()
            except Exception as exc:  # noqa: BLE001 - a bug here must show, not silently stop every kubelet
                print(f"fake kubelet: {type(exc).__name__}: {exc}")
            await asyncio.sleep(0.02)

    def _kubelet_tick(self) -> None:
        now = time.time()
        for pod in self._all("pods"):
            node = pod["spec"].get("nodeName")
            if not node or node in self.kubelets_down or ("nodes", "", node) not in self.store.objects:
                continue
            uid = pod["metadata"]["uid"]
            phase = pod["status"].get("phase")
            running = self.running.get(uid)
            deleting = pod["metadata"].get("deletionTimestamp") is not None
            if phase == "Pending" and running is None:
                if deleting:
                    self._finish(pod, None, "the pod was deleted before it started")
                else:
                    self._admit_and_start(pod)
                continue
            if running is None:
                if deleting:
                    self._remove("pods", pod)   # ended and deleted: the kubelet confirms the deletion
                continue
            code = running.popen.poll()
            if code is None and deleting:
                if not running.term_sent:
                    running.term_sent = True
                    if running.kill_at is None:
                        running.kill_at = now + float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
                    _signal(running.popen, signal.SIGTERM)
                elif running.kill_at is not None and now >= running.kill_at:
                    _signal(running.popen, signal.SIGKILL)
                continue
            if code is not None:
                del self.running[uid]
                self._finish(pod, 128 - code if code < 0 else code, None)
                if deleting:
                    self._remove("pods", pod)

    def _admit_and_start(self, pod: dict[str, Any]) -> None:
        node = self._get("nodes", None, pod["spec"]["nodeName"])
        container = pod["spec"]["containers"][0]
        wanted = {k: int(v) for k, v in (container.get("resources", {}).get("limits") or {}).items()
                  if k.startswith("nvidia.com/")}
        for resource, count in wanted.items():
            used = sum(int((p["spec"]["containers"][0].get("resources", {}).get("limits") or {}).get(resource, 0))
                       for p in self._all("pods") if p["spec"].get("nodeName") == node["metadata"]["name"]
                       and p["metadata"]["uid"] in self.running)
            free = int(node["status"]["allocatable"].get(resource, 0)) - used
            if count > free:
                pod["status"].update({"phase": "Failed", "reason": "UnexpectedAdmissionError",
                                      "message": f"Allocate failed due to requested number of devices unavailable "
                                                 f"for {resource}. Requested: {count}, Available: {max(free, 0)}"})
                self.store.record("pods", "MODIFIED", pod)
                return
        try:
            env = self._container_env(pod, container)
        except ApiError as exc:
            waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": exc.message}}
            if _container_state(pod) != waiting:
                _set_container(pod, waiting)
                self.store.record("pods", "MODIFIED", pod)
            return
        directory = self.workdir / "pods" / f"{pod['metadata']['name']}-{pod['metadata']['uid'][:8]}"
        directory.mkdir(parents=True, exist_ok=True)
        with (directory / "log").open("ab") as log:
            popen = subprocess.Popen([*container["command"], *container.get("args", ())], cwd=directory, env=env,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.running[pod["metadata"]["uid"]] = Running(popen)
        pod["status"].update({"phase": "Running", "startTime": rfc3339(time.time()), "podIP": "10.0.0.1"})
        _set_container(pod, {"running": {"startedAt": rfc3339(time.time())}})
        self.store.record("pods", "MODIFIED", pod)

    def _container_env(self, pod: dict[str, Any], container: Mapping[str, Any]) -> dict[str, str]:
        namespace = pod["metadata"]["namespace"]
        env = dict(self.base_env)
        for source in container.get("envFrom") or ():
            ref = source.get("secretRef")
            if ref is None:
                continue
            secret = self.store.objects.get(("secrets", namespace, ref["name"]))
            if secret is None:
                if ref.get("optional"):
                    continue
                raise ApiError(404, "NotFound", f'secret "{ref["name"]}" not found')
            env.update({str(k): str(v) for k, v in (secret.get("data") or {}).items()})
        for item in container.get("env") or ():
            if "value" in item:
                env[item["name"]] = str(item["value"])
                continue
            source = item.get("valueFrom") or {}
            if "fieldRef" in source:
                path = source["fieldRef"]["fieldPath"]
                env[item["name"]] = {"spec.nodeName": pod["spec"].get("nodeName", ""),
                                     "metadata.name": pod["metadata"]["name"],
                                     "metadata.namespace": namespace}.get(path, "")
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = self.store.objects.get(("secrets", namespace, ref["name"]))
                if secret is None or ref["key"] not in (secret.get("data") or {}):
                    raise ApiError(404, "NotFound", f'secret "{ref["name"]}" (key {ref["key"]}) not found')
                env[item["name"]] = str(secret["data"][ref["key"]])
        return env

    def _finish(self, pod: dict[str, Any], code: int | None, message: str | None) -> None:
        if code is None:
            pod["status"].update({"phase": "Failed", "reason": "Deleted", "message": message or ""})
        else:
            pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            _set_container(pod, {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                                "finishedAt": rfc3339(time.time())}})
        self.store.record("pods", "MODIFIED", pod)

    def _kill(self, uid: str) -> None:
        running = self.running.pop(uid, None)
        if running is not None:
            _signal(running.popen, signal.SIGKILL)
            running.popen.wait(5)

    def log(self, namespace: str, name: str) -> str:
        """The pod's output (stdout and stderr of its process)."""
        return self._on_loop(lambda: self._log_bytes(namespace, name).decode(errors="replace"))

    def _log_bytes(self, namespace: str, name: str) -> bytes:
        pod = self._get("pods", namespace, name)
        path = self.workdir / "pods" / f"{name}-{pod['metadata']['uid'][:8]}" / "log"
        return path.read_bytes() if path.exists() else b""


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    now = rfc3339(time.time())
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastHeartbeatTime": now,
            "lastTransitionTime": now}


def _container_state(pod: Mapping[str, Any]) -> Any:
    statuses = pod["status"].get("containerStatuses") or [{}]
    return statuses[0].get("state")


def _set_container(pod: dict[str, Any], state: dict[str, Any]) -> None:
    container = pod["spec"]["containers"][0]
    pod["status"]["containerStatuses"] = [{"name": container["name"], "image": container.get("image", ""),
                                           "imageID": "", "ready": "running" in state, "restartCount": 0,
                                           "started": "running" in state, "state": state}]


def _signal(popen: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class _Handler(tornado.web.RequestHandler):
    """One handler for the whole REST surface: ``/api/v1/[namespaces/NS/]RESOURCE[/NAME]``."""

    def initialize(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.closed = False

    def on_connection_close(self) -> None:
        self.closed = True

    def check_xsrf_cookie(self) -> None:
        return None

    def _route(self, path: str) -> tuple[str, str | None, str | None]:
        parts = path.strip("/").split("/")
        if parts[:2] != ["api", "v1"]:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource: /{path}")
        rest = parts[2:]
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if rest[:1] == ["pods"] and len(rest) == 3 and rest[2] == "log":
            return "pods/log", namespace, rest[1]
        if not rest or rest[0] not in KINDS or len(rest) > 2:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource: /{path}")
        resource = rest[0]
        if (resource in CLUSTER_SCOPED) == (namespace is not None):
            raise ApiError(404, "NotFound", f"{resource} is {'not ' if namespace else ''}namespaced")
        return resource, namespace, rest[1] if len(rest) == 2 else None

    def _reply(self, code: int, body: Any) -> None:
        self.set_status(code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def _body(self) -> dict[str, Any]:
        return json.loads(self.request.body or b"{}") or {}

    async def _serve(self, method: str, path: str) -> None:
        try:
            if path == "version":
                self._reply(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0-fake"})
                return
            resource, namespace, name = self._route(path)
            watching = self.get_argument("watch", "").lower() in ("true", "1")
            verb = {"GET": "watch" if watching else ("get" if name else "list"), "POST": "create",
                    "DELETE": "delete", "PATCH": "patch", "PUT": "update"}[method]
            self.cluster.requests.append((verb, resource, namespace))
            if verb == "watch":
                await self._watch(resource, namespace)
                return
            store = self.cluster
            if resource == "pods/log":
                assert name is not None and namespace is not None
                store._get("pods", namespace, name)
                data = store._log_bytes(namespace, name)
                limit = self.get_argument("limitBytes", None)
                self.set_header("Content-Type", "text/plain")
                self.finish(data[:int(limit)] if limit is not None else data)
                return
            if verb == "list":
                selector = self.get_argument("labelSelector", None)
                items = [copy.deepcopy(o) for o in store._all(resource, namespace)
                         if matches(selector, o["metadata"].get("labels") or {})]
                self._reply(200, {"kind": f"{KINDS[resource]}List", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": str(store.store.version)}, "items": items})
            elif verb == "get":
                assert name is not None
                self._reply(200, store._get(resource, namespace, name))
            elif verb == "create":
                self._reply(201, store._create(resource, namespace, self._body()))
            elif verb == "patch":
                assert name is not None
                self._reply(200, store._patch(resource, namespace, name, self._body()))
            elif verb == "delete":
                assert name is not None
                options = self._body()
                if self.get_argument("gracePeriodSeconds", None) is not None:
                    options["gracePeriodSeconds"] = int(self.get_argument("gracePeriodSeconds"))
                self._reply(200, store._delete(resource, namespace, name, options))
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported by the fake")
        except ApiError as exc:
            self._reply(exc.code, exc.status())

    async def _watch(self, resource: str, namespace: str | None) -> None:
        store = self.cluster.store
        selector = self.get_argument("labelSelector", None)
        timeout = float(self.get_argument("timeoutSeconds", "300"))
        requested = self.get_argument("resourceVersion", "") or "0"
        self.set_header("Content-Type", "application/json")
        cursor = int(requested)

        def visible(kind: str, obj: Mapping[str, Any]) -> bool:
            return kind == resource and (namespace is None or obj["metadata"].get("namespace") == namespace) \
                and matches(selector, obj["metadata"].get("labels") or {})

        lines: list[dict[str, Any]] = []
        if cursor == 0:
            lines = [{"type": "ADDED", "object": copy.deepcopy(o)} for o in self.cluster._all(resource, namespace)
                     if visible(resource, o)]
            cursor = store.version
        elif cursor < store.compacted:
            self.write(json.dumps({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                "message": f"too old resource version: {cursor} ({store.compacted})"}}) + "\n")
            self.finish()
            return
        deadline = time.monotonic() + timeout
        try:
            while not self.closed and time.monotonic() < deadline:
                for version, kind, event, obj in list(store.history):
                    if version > cursor:
                        cursor = version
                        if visible(kind, obj):
                            lines.append({"type": event, "object": obj})
                for line in lines:
                    self.write(json.dumps(line) + "\n")
                lines = []
                await self.flush()
                changed = store.changed
                assert changed is not None
                try:
                    await asyncio.wait_for(changed.wait(), timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                except asyncio.TimeoutError:
                    pass
            self.finish()
        except StreamClosedError:
            return

    async def get(self, path: str) -> None:
        await self._serve("GET", path)

    async def post(self, path: str) -> None:
        await self._serve("POST", path)

    async def delete(self, path: str) -> None:
        await self._serve("DELETE", path)

    async def patch(self, path: str) -> None:
        await self._serve("PATCH", path)
