"""Secrets against a real ``shoal up`` (SQLite, the local executor, real trial processes, the sweep controller it
starts): a sweep's trials report with a token the scheduler injects into their pods at launch, so no token sits in
a stored spec, in ``GET /v1/jobs/{id}``, ``GET /v1/queues/{team}`` or
the database file; each trial's token is revoked when its job is released;
and the sweep controller's admin token, if its process is killed with SIGKILL, is revoked by the next start."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, select

from scheduler_core.client import ShoalClient
from scheduler_core.store.sql.schema import api_tokens
from sweeps.service import SERVICE_NOTE

from .shoal_up import eventually, start_up

pytestmark = pytest.mark.slow
#: A plaintext token: the prefix and 32 random bytes in URL-safe base64 (``scheduler_core.auth.tokens.new_token``).
TOKEN = re.compile(rb"shoal_[A-Za-z0-9_\-]{43}")


def token_rows(db: Path) -> list[tuple[str, str, bool]]:
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return [(r.token_hash, r.note, bool(r.revoked)) for r in conn.execute(select(api_tokens))]
    finally:
        engine.dispose()


def test_trial_tokens_stay_out_of_specs_and_are_revoked_and_a_dead_controllers_token_too(tmp_path: Path) -> None:
    runs = start_up(tmp_path, "--min-run-time", "0s")
    up = next(runs)
    db = up.state / "shoal.db"
    try:
        bob_token = up.token("bob", "search")
        with ShoalClient(up.url, bob_token) as bob:
            sweep = bob.create_sweep({
                "name": "secrets", "team": "search", "n_trials": 2, "parallelism": 2,
                "objective": {"metric": "loss", "direction": "minimize"},
                "sampler": {"name": "random", "seed": 3},
                "search_space": {"x": {"type": "int", "low": 0, "high": 9}},
                "trial": {"flavour": "h100-mig-1g", "command": ["python", "-m", "tests.sweeps.objective",
                                                                      "--steps", "2", "--step-seconds", "0.1"],
                          "time_limit": "5m"},
            })
            final = eventually(lambda: (v if (v := bob.sweep(sweep.sweep_id)).state in
                                        ("SUCCEEDED", "FAILED", "CANCELLED") else None),
                               "the sweep to finish", 300, up.output)
            # The trials reported through the API with their injected token: the sweep has a best value.
            assert final.state == "SUCCEEDED", final.message
            assert final.best is not None and final.best.value is not None
            jobs = [t.job_id for t in bob.trials(sweep.sweep_id).trials]
        headers = {"Authorization": f"Bearer {bob_token}"}
        answers = [httpx.get(f"{up.url}/v1/queues/search", headers=headers)]
        answers += [httpx.get(f"{up.url}/v1/jobs/{job}", headers=headers) for job in jobs]
        assert [a.status_code for a in answers] == [200] * (1 + len(jobs))
        bodies = [a.content for a in answers]
        assert all(job.encode() in body for job, body in zip(jobs, bodies[1:]))
        assert all(b"SHOAL_TRIAL_PARAMS" in body for body in bodies[1:])      # the spec's env is there, no token
        for body in bodies:
            assert not TOKEN.search(body), body[:200]
            assert b"SHOAL_API_TOKEN" not in body
        for path in [db, *db.parent.glob("shoal.db-*")]:        # the WAL too, where there is one
            assert not TOKEN.search(path.read_bytes()), path
        # One token was minted per launch, noted with its job, and every one is revoked now the jobs are released.
        rows = token_rows(db)
        for job in jobs:
            minted = [revoked for _, note, revoked in rows if note == f"job {job}"]
            assert minted and all(minted), (job, minted)
        live = [h for h, note, revoked in rows if note == SERVICE_NOTE and not revoked]
        assert len(live) == 1

        # The whole process dies without a chance to clean up: its admin token outlives it ...
        up.proc.send_signal(signal.SIGKILL)
        up.proc.wait(30)
        assert [h for h, note, revoked in token_rows(db) if note == SERVICE_NOTE and not revoked] == live
    finally:
        runs.close()
    # ... until the next start, which revokes it before minting its own.
    with_restart = start_up(tmp_path / "restart", "--min-run-time", "0s", state=up.state)
    next(with_restart)
    try:
        rows = token_rows(db)
        assert {h: revoked for h, note, revoked in rows if h in live} == {live[0]: True}
        assert len([h for h, note, revoked in rows if note == SERVICE_NOTE and not revoked]) == 1
    finally:
        with_restart.close()
