"""``Reflector``: one kind of object kept current in memory by list-then-watch, as client-go's informers do.

Why a cache and not a request per question: the controller polls every second, and a 1,024-pod gang would cost a
list of 1,024 pods each time. The reflector lists once, then follows a watch from the list's resourceVersion, so
the API server sends only changes.

Nothing is lost when the API server goes away for a while: a watch that breaks is resumed from the last version
seen, and if that version is too old for the server (``410 Gone``) the reflector lists again and compares — an
object missing from the new list was deleted meanwhile and becomes a *tombstone* holding its last known state, so
the executor still learns how that pod ended. Every ``resync_s`` it lists again anyway, as a safety net.

Objects are plain dicts as the API serves them (``_preload_content=False``: no model classes), keyed by uid, since
a name can be reused (a gang's pods keep their names across attempts). Thread safety: the watch runs in its own
daemon thread; every read takes the lock and returns copies of the mapping (the objects themselves are never
changed in place).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]


def _version(obj: Obj) -> int | None:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return None


def _uid(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])


class _Gone(Exception):
    """The server no longer has the history a watch asked for (HTTP 410): list again."""


class Reflector:
    """Lists and watches ``list_call`` (an official-client list function such as ``CoreV1Api.list_node``).

    ``watch_timeout_s`` bounds one watch request (the server ends it and a new one resumes); ``retry_s`` is the
    first pause after a failure, doubling up to ``max_retry_s``.
    """

    def __init__(self, name: str, list_call: Callable[..., Any], *, label_selector: str | None = None,
                 watch_timeout_s: float = 240.0, resync_s: float = 600.0, request_timeout_s: float = 10.0,
                 retry_s: float = 0.2, max_retry_s: float = 5.0, tombstone_ttl_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._list_call = list_call
        self._selector = label_selector
        self.watch_timeout_s = watch_timeout_s
        self.resync_s = resync_s
        self.request_timeout_s = request_timeout_s
        self.retry_s = retry_s
        self.max_retry_s = max_retry_s
        self.tombstone_ttl_s = tombstone_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._objects: dict[str, Obj] = {}
        self._tombstones: dict[str, tuple[Obj, float]] = {}
        self._version = "0"
        self._listed_at = float("-inf")
        self._response: Any = None
        self._thread: threading.Thread | None = None
        #: Counters for operators and tests: lists done (the first, resyncs and after 410), failures met.
        self.lists = 0
        self.gone = 0
        self.failures = 0
        self.connected = False

    # -- life cycle ----------------------------------------------------------------------------------------------
    def start(self) -> Reflector:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"shoal-reflector-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """End the watch now: its socket is shut down, which wakes the thread blocked reading it."""
        self._stop.set()
        response = self._response
        if response is not None:
            try:
                sock = getattr(response.connection, "sock", None)
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
                response.close()
            except Exception:  # noqa: BLE001 - closing a broken stream may fail in many ways; it is closed anyway
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def wait_synced(self, timeout_s: float) -> bool:
        """Whether the first list has been done (waiting up to ``timeout_s``)."""
        return self._synced.wait(timeout_s)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    # -- reads ---------------------------------------------------------------------------------------------------
    def objects(self) -> dict[str, Obj]:
        with self._lock:
            return dict(self._objects)

    def get(self, uid: str) -> Obj | None:
        with self._lock:
            return self._objects.get(uid)

    def tombstone(self, uid: str) -> Obj | None:
        """The last known state of a deleted object, until ``forget`` or its time-to-live."""
        with self._lock:
            entry = self._tombstones.get(uid)
            return entry[0] if entry is not None else None

    def is_gone(self, uid: str) -> bool:
        with self._lock:
            return uid in self._tombstones

    def by_name(self) -> dict[str, Obj]:
        with self._lock:
            return {str(obj["metadata"]["name"]): obj for obj in self._objects.values()}

    # -- writes from the executor --------------------------------------------------------------------------------
    def observe(self, obj: Obj) -> None:
        """Record an object this process just created (the API's answer), so it is known before its watch event
        arrives. Never overwrites what the watch already said, and never resurrects a deleted object."""
        uid = _uid(obj)
        with self._lock:
            if uid not in self._objects and uid not in self._tombstones:
                self._objects[uid] = obj

    def forget(self, uid: str) -> None:
        with self._lock:
            self._tombstones.pop(uid, None)

    # -- the loop ------------------------------------------------------------------------------------------------
    def _run(self) -> None:
        pause = self.retry_s
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list or self._clock() - self._listed_at >= self.resync_s:
                    self._list()
                    need_list = False
                began = self._clock()
                self._watch()
                if self._clock() - began < 0.05:
                    self._stop.wait(self.retry_s)   # a server that ends every watch at once must not spin us
                pause = self.retry_s
            except _Gone:
                self.gone += 1
                need_list = True
            except Exception as exc:  # noqa: BLE001 - an unreachable server shows up as many exception types
                if self._stop.is_set():
                    return
                self.failures += 1
                self.connected = False
                log.warning("%s watch: %s; retrying in %.1fs", self.name, _short(exc), pause)
                self._stop.wait(pause)
                pause = min(pause * 2, self.max_retry_s)
                # Resuming from the last version loses nothing; the server answers 410 if it is too old.

    def _list(self) -> None:
        response = self._list_call(label_selector=self._selector, _preload_content=False,
                                   _request_timeout=self.request_timeout_s)
        try:
            body = json.loads(response.data)
        finally:
            response.release_conn()
        version = str(body["metadata"].get("resourceVersion") or "0")
        listed = {_uid(obj): obj for obj in body.get("items") or ()}
        listed_version = int(version) if version.isdigit() else None
        now = self._clock()
        with self._lock:
            for uid, obj in self._objects.items():
                if uid in listed:
                    continue
                seen = _version(obj)
                if listed_version is not None and seen is not None and seen > listed_version:
                    listed[uid] = obj          # created after the list was taken: not a deletion
                else:
                    self._tombstones[uid] = (obj, now)
            self._objects = listed
            self._version = version
            self._listed_at = now
            self._prune(now)
        self.lists += 1
        self.connected = True
        self._synced.set()

    def _watch(self) -> None:
        response = self._list_call(
            label_selector=self._selector, watch=True, resource_version=self._version,
            timeout_seconds=max(1, int(self.watch_timeout_s)), allow_watch_bookmarks=True, _preload_content=False,
            _request_timeout=(self.request_timeout_s, self.watch_timeout_s + self.request_timeout_s))
        self._response = response
        self.connected = True
        try:
            if self._stop.is_set():   # stopped while the request was being made: ``stop`` saw no response
                return
            buffer = bytearray()
            for chunk in response.stream(amt=None, decode_content=False):
                if self._stop.is_set():
                    return
                buffer.extend(chunk)
                start = 0
                while (end := buffer.find(b"\n", start)) >= 0:
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        self._apply(json.loads(line))
                del buffer[:start]
        finally:
            self._response = None
            response.release_conn()

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone(obj.get("message", "resource version too old"))
            raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
        version = str((obj.get("metadata") or {}).get("resourceVersion") or self._version)
        with self._lock:
            self._version = version
            if kind == "BOOKMARK":
                return
            uid = _uid(obj)
            if kind == "DELETED":
                self._objects.pop(uid, None)
                self._tombstones[uid] = (obj, self._clock())
            elif kind in ("ADDED", "MODIFIED") and uid not in self._tombstones:
                self._objects[uid] = obj

    def _prune(self, now: float) -> None:
        stale = [uid for uid, (_, at) in self._tombstones.items() if now - at > self.tombstone_ttl_s]
        for uid in stale:
            del self._tombstones[uid]


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
