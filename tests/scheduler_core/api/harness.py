"""A real API server on a real socket, over a ``MemoryStore`` with the test cluster, for the API, client and CLI
tests. Time is a fake clock the test moves; the controller's part (bind, run, release) is played by calling the
store directly, so each test sets up exactly the state it asserts on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler_core.api import ApiService, TokenAuthenticator, make_app
from scheduler_core.api.server import ServerThread
from scheduler_core.auth.memory import MemoryTokenStore
from scheduler_core.auth.tokens import Identity, TokenStore
from scheduler_core.cli.main import main
from scheduler_core.client import ShoalClient
from scheduler_core.model import JobSpec
from scheduler_core.policy.snapshot import AdmittedAs, Placement
from scheduler_core.store.base import Store
from scheduler_core.store.memory import MemoryStore
from scheduler_core.store.sql import open_store
from scheduler_core.store.records import JobRecord

from ..runtime_builders import cluster_nodes, team_configs
from ..sql_support import fresh_pg_database

#: 2026-10-27T00:00:00Z: a fixed, readable instant for the fake clock.
T0 = 1793059200.0


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Harness:
    store: Store
    tokens: TokenStore
    clock: Clock
    server: ServerThread
    service: ApiService
    wakes: list[float] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    def client(self, who: str) -> ShoalClient:
        return ShoalClient(self.url, self.users[who])

    def http(self, method: str, path: str, *, who: str | None = "alice", token: str | None = None,
             **kwargs: Any) -> httpx.Response:
        """A raw request, for what the typed client would never send (bodies that are not JSON, bad tokens)."""
        headers = dict(kwargs.pop("headers", {}))
        bearer = token if token is not None else (self.users[who] if who else None)
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        return httpx.request(method, self.url + path, headers=headers, timeout=10, **kwargs)

    # -- the controller's part, played by hand ------------------------------------------------------------------
    def submit(self, spec: JobSpec, user: str = "alice") -> JobRecord:
        return self.store.submit(spec, user=user, now=self.clock())

    def run(self, spec: JobSpec, placement: Placement, *, admitted_as: AdmittedAs = AdmittedAs.NOMINAL,
            user: str = "alice") -> JobRecord:
        record = self.submit(spec, user)
        self.store.bind(record.id, placement, admitted_as, epoch=0, now=self.clock())
        return self.store.mark_running(record.id, self.clock())


IDENTITIES = {
    "alice": Identity("alice", "fraud-ml"),
    "bob": Identity("bob", "search"),
    "root": Identity("root", "platform", admin=True),
}


def start_harness(backend: str = "memory", tmp_path: Path | None = None, database_url: str | None = None) -> Harness:
    """``backend``: ``memory`` (``MemoryStore`` and ``MemoryTokenStore``), ``sqlite`` (one ``SqlStore`` for both, in
    ``tmp_path``) or ``postgres`` (on ``database_url``), so the API's reads are checked against the records each
    store really returns."""
    clock = Clock()
    store: Store
    tokens: TokenStore
    if backend in ("sqlite", "postgres"):
        assert tmp_path is not None or backend == "postgres"
        url = f"sqlite:///{tmp_path / 'api.db'}" if backend == "sqlite" else database_url
        assert url is not None
        sql = open_store(url, seed=1)
        store, tokens = sql, sql
    else:
        store, tokens = MemoryStore(seed=1), MemoryTokenStore()
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    wakes: list[float] = []
    service = ApiService(store, clock=clock, wake=lambda: wakes.append(clock()))
    server = ServerThread(lambda: make_app(service, TokenAuthenticator(tokens))).start()
    harness = Harness(store=store, tokens=tokens, clock=clock, server=server, service=service, wakes=wakes)
    for name, identity in IDENTITIES.items():
        harness.users[name] = tokens.create_token(identity, now=clock())
    return harness


def running_harness(backend: str = "memory", tmp_path: Path | None = None) -> Iterator[Harness]:
    if backend == "postgres":
        with fresh_pg_database("shoal_api") as url:
            yield from _serve_harness(start_harness(backend, tmp_path, url))
        return
    yield from _serve_harness(start_harness(backend, tmp_path))


def _serve_harness(harness: Harness) -> Iterator[Harness]:
    try:
        yield harness
    finally:
        harness.server.stop()
        dispose = getattr(harness.store, "dispose", None)
        if dispose is not None:
            dispose()


class Shoal:
    """Run ``shoal ARGS`` in process; returns (exit code, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self._capsys.readouterr()
        code = main(list(args))
        out, err = self._capsys.readouterr()
        return code, out, err

