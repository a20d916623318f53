"""A real API server on a real socket, with a small stand-in controller that runs each job's pods as real processes.

Why a stand-in: these fast tests exercise the magics end to end (submit, widget, streamed output, pulls, cancel)
in a second or two each, and need the scheduler's part only to be *observable*: jobs bound to nodes, their pods
run with the job contract's ``RANK``/``WORLD_SIZE``, their output in the local executor's log layout, cancel
honoured with SIGTERM. The full stack (``shoal up``: real policy, controller and local executor) is exercised by
``test_quickstart_notebook.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from scheduler_core.api import ApiService, TokenAuthenticator, make_app
from scheduler_core.api.logs import PodLogReader
from scheduler_core.api.server import ServerThread
from scheduler_core.auth.memory import MemoryTokenStore
from scheduler_core.auth.tokens import Identity
from scheduler_core.policy.decisions import Reason
from scheduler_core.policy.snapshot import AdmittedAs, Placement, PodPlacement
from scheduler_core.store.memory import MemoryStore
from scheduler_core.store.records import JobRecord, JobState

from ..scheduler_core.runtime_builders import cluster_nodes, team_configs

NODES = ("h100-b0-n00", "h100-b0-n01", "h100-b0-n02", "h100-b1-n00", "h100-b1-n01", "h100-b1-n02")


@dataclass
class Gang:
    procs: list[subprocess.Popen[bytes]]
    files: list[IO[bytes]]


@dataclass
class Cluster:
    store: MemoryStore
    server: ServerThread
    log_root: Path
    tokens: dict[str, str]
    hold: bool = False  # keep new jobs pending (to show queue position and reason)
    gangs: dict[str, Gang] = field(default_factory=dict)
    node_failures: set[str] = field(default_factory=set)  # jobs whose node "fails" at the next tick
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> Cluster:
        self._thread = threading.Thread(target=self._loop, name="stand-in-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for gang in self.gangs.values():
            for proc in gang.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for fh in gang.files:
                fh.close()
        self.server.stop()

    def set_wait(self, job_id: str, reason: Reason, message: str, position: int) -> None:
        self.store.set_waits([(job_id, reason, message, position, None)], _now())

    # -- the stand-in controller ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self._tick()

    def _tick(self) -> None:
        now = _now()
        if not self.hold:
            for record in self.store.list_jobs(states=[JobState.PENDING]):
                self._launch(record, now)
        for record in self.store.list_jobs(states=[JobState.RUNNING, JobState.TERMINATING]):
            gang = self.gangs[record.id]
            if record.id in self.node_failures:
                # A node failure: the whole gang is stopped and requeued; it is not the job's fault.
                self.node_failures.discard(record.id)
                for proc in gang.procs:
                    proc.kill()
                    proc.wait()
                for fh in gang.files:
                    fh.close()
                self.store.release(record.id, state=JobState.PENDING, now=now, epoch=0, infra_fault=True,
                                   message="node h100-b0-n00 failed")
                continue
            if record.cancel_requested and record.state is JobState.RUNNING:
                self.store.mark_terminating(record.id, requeue=False, terminate_by=now + 30, now=now, epoch=0)
                for proc in gang.procs:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
            codes = [proc.poll() for proc in gang.procs]
            if any(code is None for code in codes):
                continue
            for fh in gang.files:
                fh.close()
            worst = next((c for c in codes if c != 0), 0)
            state = (JobState.CANCELLED if record.cancel_requested
                     else JobState.SUCCEEDED if worst == 0 else JobState.FAILED)
            message = "cancelled by the user" if record.cancel_requested else (
                "" if worst == 0 else f"a pod exited with code {worst}")
            self.store.release(record.id, state=state, now=now, epoch=0, exit_code=worst, message=message)

    def _launch(self, record: JobRecord, now: float) -> None:
        spec = record.spec
        placement = Placement("h100", tuple(PodPlacement(NODES[rank], tuple(range(spec.gpus_per_pod)))
                                            for rank in range(spec.pods)))
        self.store.bind(record.id, placement, AdmittedAs.NOMINAL, epoch=0, now=now)
        attempt = record.restarts + record.infra_restarts + record.preemptions
        logs = self.log_root / record.id / str(attempt)
        logs.mkdir(parents=True)
        gang = Gang(procs=[], files=[])
        for rank in range(spec.pods):
            out = open(logs / f"rank-{rank}.log", "wb")
            env = {**os.environ, **spec.env, "SHOAL_JOB_ID": record.id, "RANK": str(rank), "LOCAL_RANK": "0",
                   "WORLD_SIZE": str(spec.pods), "MASTER_ADDR": NODES[0], "MASTER_PORT": "29500"}
            gang.procs.append(subprocess.Popen(list(spec.command), env=env, stdout=out, stderr=subprocess.STDOUT,
                                               cwd="/"))
            gang.files.append(out)
        self.gangs[record.id] = gang
        self.store.mark_running(record.id, now)


def _now() -> float:
    import time

    return time.time()


def start_cluster(tmp: Path) -> Cluster:
    store = MemoryStore(seed=7)
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    tokens = MemoryTokenStore()
    service = ApiService(store)
    reader = PodLogReader(tmp / "logs")
    server = ServerThread(lambda: make_app(service, TokenAuthenticator(tokens), logs=reader)).start()
    users = {
        "ana": tokens.create_token(Identity("ana", "fraud-ml"), now=_now()),
        "bo": tokens.create_token(Identity("bo", "search"), now=_now()),
    }
    return Cluster(store=store, server=server, log_root=tmp / "logs", tokens=users).start()
