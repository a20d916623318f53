"""The sweep controller as a ``shoal up`` service (entry point ``shoal.services: sweeps``).

It runs ``SweepController.run_once`` on its own thread every ``interval`` seconds, through the API with an admin
token it mints for itself (user ``shoal-sweeps``), revoked at ``stop`` or, if it died, at the next start. It runs
once per deployment (inside ``shoal up``). The Optuna study storage is, in order: the ``sweeps.storage``
setting, ``SHOAL_SWEEPS_STORAGE``, or ``sqlite:///<state dir>/sweeps.db``. In production give it its own PostgreSQL
database (``postgresql+psycopg://…/optuna``): Optuna keeps its own schema and Alembic version table, which must not
share a database with the scheduler's.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from scheduler_core.auth.tokens import Identity
from scheduler_core.client import ShoalClient
from scheduler_core.services import ServiceContext

from .api_launcher import ApiLauncher
from .controller import SweepController
from .study import default_storage_url, make_storage

log = logging.getLogger("shoal.sweeps")

ENV_STORAGE = "SHOAL_SWEEPS_STORAGE"
ENV_INTERVAL = "SHOAL_SWEEPS_INTERVAL"
SERVICE_USER = Identity("shoal-sweeps", "platform", admin=True)
#: The note on the controller's admin token: a start revokes every token so noted, so the token of a controller
#: that died (kill -9, never reaching ``stop``) is dead by the time its successor runs.
SERVICE_NOTE = "sweep controller"


def storage_url(ctx: ServiceContext) -> str:
    return ctx.settings.get("sweeps.storage") or os.environ.get(ENV_STORAGE) or default_storage_url(ctx.state_dir)


class SweepService:
    """The controller loop. ``stop`` ends it after the pass in progress and revokes the tokens it minted."""

    def __init__(self, controller: SweepController, *, interval: float, on_stop: list[Callable[[], object]],
                 is_leader: Callable[[], bool] = lambda: True) -> None:
        self.controller = controller
        self.is_leader = is_leader
        self.interval = interval
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._on_stop = on_stop
        self._thread = threading.Thread(target=self._run, name="shoal-sweeps", daemon=True)
        self.passes = 0

    def start(self) -> SweepService:
        self._thread.start()
        return self

    def wake(self) -> None:
        """Run the next pass now rather than at the end of the interval."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._thread.join(30)
        for action in self._on_stop:
            try:
                action()
            except Exception:  # noqa: BLE001 - best effort on shutdown
                log.exception("sweeps: cleanup step failed")

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self.is_leader():       # one controller per deployment: a standby's stays idle
                try:
                    self.controller.run_once()
                except Exception:  # noqa: BLE001 - the API may be briefly unreachable; try again next pass
                    log.exception("sweeps: pass failed; retrying")
                self.passes += 1
            self._wake.wait(self.interval)
            self._wake.clear()


def start(ctx: ServiceContext) -> SweepService:
    """Entry point: build the controller over the API and start its loop."""
    url = storage_url(ctx)
    stale = ctx.tokens.revoke_noted(SERVICE_NOTE)
    if stale:
        log.warning("sweeps: revoked %d admin token(s) of a previous controller that did not stop cleanly", stale)
    token = ctx.tokens.create_token(SERVICE_USER, now=ctx.clock(), note=SERVICE_NOTE)
    client = ShoalClient(ctx.api_url, token)
    launcher = ApiLauncher(client, job_api_url=ctx.url_for_jobs)
    controller = SweepController(launcher, make_storage(url))
    interval = float(ctx.settings.get("sweeps.interval") or os.environ.get(ENV_INTERVAL) or 0.5)
    log.info("sweeps: controller started; Optuna storage %s (open it with optuna-dashboard)", url)
    return SweepService(controller, interval=interval, is_leader=ctx.is_leader, on_stop=[
        lambda: ctx.tokens.revoke_token(token), client.close]).start()
