"""``GET /v1/jobs/{id}/logs``: a pod's output read on from an offset, over a real server and the typed client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler_core.api import ApiService, TokenAuthenticator, make_app
from scheduler_core.api.logs import PodLogReader
from scheduler_core.api.server import ServerThread
from scheduler_core.auth.memory import MemoryTokenStore
from scheduler_core.auth.tokens import Identity
from scheduler_core.client import InvalidRequest, JobNotFound, PermissionDenied, ShoalClient
from scheduler_core.policy.snapshot import AdmittedAs
from scheduler_core.store.memory import MemoryStore
from scheduler_core.store.records import JobState

from .runtime_builders import cluster_nodes, make_spec, team_configs, whole_nodes

T0 = 1_793_059_200.0


@dataclass
class LogsApi:
    store: MemoryStore
    root: Path
    url: str
    tokens: dict[str, str]

    def client(self, who: str = "alice") -> ShoalClient:
        return ShoalClient(self.url, self.tokens[who])

    def running_job(self, pods: int = 2) -> str:
        nodes = [f"h100-b0-n0{i}" for i in range(pods)]
        record = self.store.submit(make_spec("train").pods(pods, 8).build(), user="alice", now=T0)
        self.store.bind(record.id, whole_nodes(*nodes), AdmittedAs.NOMINAL, epoch=0, now=T0)
        self.store.mark_running(record.id, T0)
        return record.id

    def write(self, job_id: str, attempt: int, rank: int, data: bytes) -> None:
        path = self.root / job_id / str(attempt) / f"rank-{rank}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as fh:
            fh.write(data)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[LogsApi]:
    store = MemoryStore(seed=1)
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    tokens = MemoryTokenStore()
    service = ApiService(store, clock=lambda: T0)
    reader = PodLogReader(tmp_path / "logs")
    server = ServerThread(lambda: make_app(service, TokenAuthenticator(tokens), logs=reader)).start()
    try:
        yield LogsApi(store=store, root=tmp_path / "logs", url=server.url, tokens={
            "alice": tokens.create_token(Identity("alice", "fraud-ml"), now=T0),
            "bob": tokens.create_token(Identity("bob", "search"), now=T0),
        })
    finally:
        server.stop()


def test_follow_a_pod_from_offset_to_eof(api: LogsApi) -> None:
    job = api.running_job()
    client = api.client()
    empty = client.logs(job, rank=1)
    assert (empty.text, empty.next_offset, empty.eof, empty.attempt) == ("", 0, False, None)
    api.write(job, 0, 1, b"rank 1 of 2\n")
    first = client.logs(job, rank=1)
    assert (first.text, first.next_offset, first.eof, first.attempt) == ("rank 1 of 2\n", 12, False, 0)
    api.write(job, 0, 1, b"done\n")
    second = client.logs(job, rank=1, offset=first.next_offset)
    assert (second.text, second.next_offset, second.eof) == ("done\n", 17, False)
    api.store.release(job, state=JobState.SUCCEEDED, now=T0 + 60, epoch=0, exit_code=0)
    last = client.logs(job, rank=1, offset=second.next_offset)
    assert (last.text, last.next_offset, last.eof) == ("", 17, True)
    whole = client.logs(job, rank=1, offset=0)
    assert (whole.text, whole.eof) == ("rank 1 of 2\ndone\n", True)


def test_a_read_stops_at_the_limit_and_is_not_the_end(tmp_path: Path) -> None:
    path = tmp_path / "job_x" / "0" / "rank-0.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"0123456789")
    reader = PodLogReader(tmp_path)
    head = reader.read("job_x", 0, 0, limit=4)
    assert (head.text, head.next_offset, head.at_end) == ("0123", 4, False)
    tail = reader.read("job_x", 0, head.next_offset, limit=100)
    assert (tail.text, tail.next_offset, tail.at_end) == ("456789", 10, True)


def test_a_restart_serves_the_new_attempt(api: LogsApi) -> None:
    job = api.running_job(1)
    api.write(job, 0, 0, b"first try\n")
    api.write(job, 1, 0, b"second try\n")
    chunk = api.client().logs(job, rank=0)
    assert (chunk.attempt, chunk.text) == (1, "second try\n")


def test_an_earlier_attempt_is_read_to_its_end_and_says_so(api: LogsApi) -> None:
    job = api.running_job(1)
    api.write(job, 0, 0, b"first try\n")
    client = api.client()
    live = client.logs(job, rank=0, attempt=0)
    assert (live.attempt, live.latest_attempt, live.text, live.eof) == (0, 0, "first try\n", False)
    api.write(job, 0, 0, b"last words\n")
    api.write(job, 1, 0, b"second try\n")
    old = client.logs(job, rank=0, attempt=0, offset=live.next_offset)
    assert (old.attempt, old.latest_attempt, old.text, old.eof) == (0, 1, "last words\n", True)
    new = client.logs(job, rank=0, attempt=1)
    assert (new.attempt, new.latest_attempt, new.text, new.eof) == (1, 1, "second try\n", False)
    future = client.logs(job, rank=0, attempt=5)
    assert (future.attempt, future.latest_attempt, future.text, future.eof) == (None, 1, "", False)
    with pytest.raises(InvalidRequest, match="attempt must be"):
        client.logs(job, rank=0, attempt=-1)


def test_a_character_cut_by_a_read_comes_whole_in_the_next(api: LogsApi) -> None:
    job = api.running_job(1)
    api.write(job, 0, 0, "é".encode()[:1])
    chunk = api.client().logs(job, rank=0)
    assert (chunk.text, chunk.next_offset) == ("", 0)
    api.write(job, 0, 0, "é".encode()[1:] + b"\n")
    chunk = api.client().logs(job, rank=0)
    assert (chunk.text, chunk.next_offset) == ("é\n", 3)


def test_bad_rank_other_team_and_unknown_job(api: LogsApi) -> None:
    job = api.running_job(2)
    with pytest.raises(InvalidRequest, match="ranks 0 to 1, not 2"):
        api.client().logs(job, rank=2)
    with pytest.raises(PermissionDenied):
        api.client("bob").logs(job)
    with pytest.raises(JobNotFound):
        api.client().logs("job_nope")


def test_reader_without_files(tmp_path: Path) -> None:
    read = PodLogReader(tmp_path).read("job_x", 0, 5)
    assert (read.attempt, read.text, read.next_offset, read.at_end) == (None, "", 5, True)
