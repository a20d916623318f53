"""Services that run inside the scheduler's process and talk to it only through its API (the sweep controller).

The core never imports them (DESIGN §2). ``shoal up`` — the composition root — finds them as entry points of the
``shoal.services`` group, calls each one's ``start(ctx)`` with a ``ServiceContext``, and ``stop()``s what it got
back on shutdown::

    [project.entry-points."shoal.services"]
    sweeps = "sweeps.service:start"

A service that fails to start is reported and skipped: the scheduler itself keeps running without it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .auth.tokens import TokenStore

ENTRY_POINT_GROUP = "shoal.services"
#: Comma-separated entry point names to leave out (``SHOAL_DISABLE_SERVICES=sweeps``).
ENV_DISABLE = "SHOAL_DISABLE_SERVICES"

log = logging.getLogger("shoal.services")


@dataclass(frozen=True)
class ServiceContext:
    """What a service gets from the composition root.

    ``api_url`` is where this process serves the API; ``job_api_url`` where a job (a process on a node, a pod)
    reaches it — the same for the local executor. ``tokens`` lets a service mint its own token and tokens for the
    jobs it starts (the sweep controller gives each trial a token of its sweep's team); ``clock`` stamps them.
    ``settings`` are free-form ``name → value`` pairs for services (e.g. ``sweeps.storage``). ``is_leader`` says
    whether this process holds the scheduler lease now: a service that must run once per deployment (the sweep
    controller) works only while it does, so a standby's copy stays idle until it takes over.
    """

    api_url: str
    state_dir: Path
    tokens: TokenStore
    job_api_url: str | None = None
    clock: Callable[[], float] = time.time
    settings: Mapping[str, str] = field(default_factory=dict)
    is_leader: Callable[[], bool] = lambda: True

    @property
    def url_for_jobs(self) -> str:
        return self.job_api_url or self.api_url


class Service(Protocol):
    def stop(self) -> None:
        """Stop and release what the service holds; called once, on the scheduler's shutdown."""


Starter = Callable[[ServiceContext], Service]


def discover(disabled: Iterable[str] = ()) -> dict[str, Starter]:
    """The installed services by entry point name (each once, even if two installs list it), minus ``disabled``
    and those named in ``SHOAL_DISABLE_SERVICES``."""
    skip = set(disabled) | {n.strip() for n in os.environ.get(ENV_DISABLE, "").split(",") if n.strip()}
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in skip and entry.name not in found:
            found[entry.name] = entry
    return {name: _loader(entry.load) for name, entry in found.items()}


def _loader(load: Callable[[], object]) -> Starter:
    def start(ctx: ServiceContext) -> Service:
        starter = load()
        if not callable(starter):
            raise TypeError(f"service entry point {starter!r} is not callable")
        service: Service = starter(ctx)
        return service
    return start


def start_services(ctx: ServiceContext, starters: Mapping[str, Starter] | None = None) -> dict[str, Service]:
    """Start every service (default: every installed one); one that fails is logged and left out."""
    running: dict[str, Service] = {}
    for name, start in (discover() if starters is None else starters).items():
        try:
            running[name] = start(ctx)
        except Exception:  # noqa: BLE001 - a broken add-on must not keep the scheduler from starting
            log.exception("service %s failed to start; the scheduler runs without it", name)
        else:
            log.info("service %s started", name)
    return running


def stop_services(running: Mapping[str, Service]) -> None:
    for name, service in reversed(list(running.items())):
        try:
            service.stop()
        except Exception:  # noqa: BLE001 - stop the others all the same
            log.exception("service %s failed to stop cleanly", name)
