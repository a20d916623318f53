"""The sweep controller as a ``shoal up`` service: it mints its own admin token, works only while its process
leads, launches trials over the API (their specs carry no token), and revokes a dead predecessor's token at start."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.services import ServiceContext, start_services, stop_services
from sweeps import service as sweep_service
from tests.scheduler_core.api.harness import Harness, running_harness

from .builders import make_sweep
from .shoal_up import eventually


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()


def test_the_service_drives_sweeps_while_leading(api: Harness, tmp_path: Path) -> None:
    # The admin token of a controller that died without stopping (kill -9): the next start revokes it.
    dead = api.tokens.create_token(sweep_service.SERVICE_USER, now=api.clock(), note=sweep_service.SERVICE_NOTE)
    leading = threading.Event()
    ctx = ServiceContext(api_url=api.url, state_dir=tmp_path, tokens=api.tokens, clock=api.clock,
                         settings={"sweeps.interval": "0.05"}, is_leader=leading.is_set)
    running = start_services(ctx, {"sweeps": sweep_service.start})
    service = running["sweeps"]
    assert api.tokens.resolve_token(dead) is None
    assert isinstance(service, sweep_service.SweepService)
    try:
        sweep_id = api.client("bob").create_sweep(make_sweep("svc").trials(3).parallel(2).build()).sweep_id
        pause = threading.Event()
        pause.wait(0.3)                               # several intervals in which a standby must do nothing
        assert api.store.list_trials(sweep_id) == [] and service.passes == 0
        leading.set()
        eventually(lambda: len(api.store.list_trials(sweep_id)) == 2, "the leader to launch two trials", 30)
        assert (tmp_path / "sweeps.db").exists()      # the embedded default: SQLite next to the state
        assert sweep_service.storage_url(ctx) == f"sqlite:///{(tmp_path / 'sweeps.db').resolve()}"
        job = api.store.get(api.store.list_trials(sweep_id)[0][1].id)
        assert "SHOAL_API_TOKEN" not in job.spec.env      # the scheduler injects it at launch (auth.job_tokens)
        assert job.spec.env["SHOAL_API_URL"] == api.url
    finally:
        stop_services(running)


def test_a_service_that_fails_to_start_is_left_out(api: Harness, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    def broken(ctx: ServiceContext) -> sweep_service.SweepService:
        raise RuntimeError("no storage")

    ctx = ServiceContext(api_url=api.url, state_dir=tmp_path, tokens=api.tokens)
    running = start_services(ctx, {"broken": broken})
    assert running == {} and "service broken failed to start" in caplog.text
