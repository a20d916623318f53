"""``shoal bench api``: sustained job submissions through the REST API, each one durably stored before its 202.

The server runs in its own process exactly as ``shoal up`` serves it (tornado, the token cache, validation
against the cluster, the SQL store), on the demo cluster and teams, over a fresh database: SQLite in a temporary
directory by default, or ``--db URL`` (PostgreSQL). The load comes from this process over keep-alive HTTP/1.1
connections written by hand, so the client's own cost stays small next to the server's on a small machine.

Every request carries a distinct ``Idempotency-Key`` (what a careful client sends), and after the run the database
is opened again and its jobs counted: every 202 must be there, or the figure is void.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.connection
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click


@dataclass(frozen=True)
class ApiBenchResult:
    db: str
    concurrency: int
    seconds: float
    submissions: int
    errors: int
    submissions_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    stored_jobs: int


def _serve(url: str, conn: multiprocessing.connection.Connection) -> None:
    """The server process: the API on a fresh store with the demo cluster and teams, one token for the load."""
    from ..api import ApiService, TokenAuthenticator, make_app
    from ..api.app import write_threads_for
    from ..api.server import favour_latency, listen
    from ..auth.tokens import Identity
    from ..config import load_cluster, load_teams
    from ..store.sql import open_store

    favour_latency()
    store = open_store(url)
    _, nodes = load_cluster("demo")
    store.sync_nodes(nodes)
    store.sync_teams(load_teams("demo", nodes).teams)
    token = store.create_token(Identity("bench", "fraud-ml"), now=time.time(), note="shoal bench api")

    async def main() -> None:
        app = make_app(ApiService(store), TokenAuthenticator(store), write_threads=write_threads_for(url))
        _, port = listen(app, "127.0.0.1", 0)
        conn.send((port, token))
        await asyncio.Event().wait()

    asyncio.run(main())


def _request(token: str, key: str, body: bytes) -> bytes:
    return (b"POST /v1/jobs HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\nIdempotency-Key: " + key.encode() +
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length:
        await reader.readexactly(length)
    return status


async def _load(port: int, token: str, *, concurrency: int, warmup: float,
                seconds: float) -> tuple[list[float], int, int]:
    body = json.dumps({"name": "bench", "team": "fraud-ml", "flavour": "h100", "pods": 2, "gpus_per_pod": 4,
                       "time_limit": "1h", "command": ["python", "train.py"]}).encode()
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    latencies: list[float] = []
    counts = {"ok": 0, "errors": 0}

    async def worker(index: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sent = 0
        try:
            while True:
                began = time.perf_counter()
                if began >= stop_at:
                    return
                writer.write(_request(token, f"bench-{index}-{sent}", body))
                sent += 1
                status = await _read_response(reader)
                done = time.perf_counter()
                counts["ok" if status == 202 else "errors"] += 1
                if began >= measure_from:
                    latencies.append(done - began)
        finally:
            writer.close()

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return latencies, counts["ok"], counts["errors"]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_bench(db_url: str | None, *, concurrency: int, seconds: float, warmup: float) -> ApiBenchResult:
    from ..store.sql import open_store

    with tempfile.TemporaryDirectory(prefix="shoal-bench-api-") as tmp:
        url = db_url or f"sqlite:///{Path(tmp) / 'shoal.db'}"
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        server = context.Process(target=_serve, args=(url, child), daemon=True)
        server.start()
        try:
            if not parent.poll(120):
                raise click.ClickException("the API server did not start within 120 s")
            port, token = parent.recv()
            latencies, ok, errors = asyncio.run(_load(port, token, concurrency=concurrency, warmup=warmup,
                                                      seconds=seconds))
        finally:
            server.terminate()
            server.join(10)
        store = open_store(url)
        try:
            stored = len(store.list_jobs(team="fraud-ml"))
        finally:
            store.dispose()
    measured = len(latencies)
    return ApiBenchResult(
        db=url.split("://", 1)[0] if db_url else "sqlite (temporary file)", concurrency=concurrency,
        seconds=seconds, submissions=ok, errors=errors, submissions_per_s=round(measured / seconds, 1),
        p50_ms=round(_percentile(latencies, 0.50) * 1000, 2), p99_ms=round(_percentile(latencies, 0.99) * 1000, 2),
        max_ms=round(max(latencies, default=float("nan")) * 1000, 2), stored_jobs=stored,
    )


@click.command()
@click.option("--db", "db_url", default=None, metavar="URL",
              help="Database to write to (default: a fresh SQLite file in a temporary directory). "
                   "A PostgreSQL database should be empty: the bench counts the jobs in it.")
@click.option("--seconds", type=click.FloatRange(1, 600), default=10.0, show_default=True,
              help="How long to measure.")
@click.option("--warmup", type=click.FloatRange(0, 60), default=2.0, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 512), default=16, show_default=True,
              help="Connections submitting at once.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def command(db_url: str | None, seconds: float, warmup: float, concurrency: int, as_json: bool) -> None:
    """Sustained submissions through the REST API, durably stored; prints submissions_per_s and p99_ms."""
    result = run_bench(db_url, concurrency=concurrency, seconds=seconds, warmup=warmup)
    if result.stored_jobs != result.submissions:
        raise click.ClickException(f"{result.submissions} submissions were accepted but {result.stored_jobs} "
                                   f"jobs are stored: the figure is void")
    if as_json:
        click.echo(json.dumps(asdict(result), indent=2))
        return
    for key, value in asdict(result).items():
        click.echo(f"{key}: {value}")
