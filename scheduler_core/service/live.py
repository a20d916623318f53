"""``LiveController``: the controller in real time — one leader per store, a standby waiting for the lease.

Two asyncio tasks share one event loop (tornado's, in ``shoal up``):

* the **lease** task takes or renews the store's lease every ``renew_every_s`` (a standby asks every
  ``standby_poll_s``). Its epoch is the fencing token of every write the leader makes, so a leader that lost the
  lease (paused, partitioned) cannot bind a GPU: the store refuses with ``StaleLeader``.
* the **step** task runs ``Controller.step(time.time())`` on a jittered tick and whenever ``wake()`` is called
  (a submission, a cancel), and — on becoming leader — ``Controller.recover`` first, which re-adopts the gangs the
  executor still runs. It also writes the executor's node heartbeats to the store.

Store and executor calls block, so each runs in a worker thread (a small pool of its own: a slow step never
delays a lease renewal); the event loop only waits. A leader steps only while its lease is comfortably valid
(``now < expires - safety_margin_s``), so one that cannot reach the database stops acting before a standby may
take over. Takeover time after a leader dies: at most ``lease_ttl_s + standby_poll_s`` plus one recovery step.

Clocks: lease expiry compares the wall clocks of the schedulers' hosts; keep them in sync (NTP), as for any lease.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from ..auth.job_tokens import JobTokens
from ..controller import Controller, ControllerConfig, StepReport
from ..errors import StaleLeader
from ..executor.base import Executor
from ..model.cluster import Health, Node
from ..policy.snapshot import PolicyConfig
from ..policy.types import Policy
from ..store.base import Store
from ..store.records import Event
from .nodes import apply_backend_health

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """Timing of the live loop. The defaults take over from a dead leader within ~11 s (DESIGN: ≤ 15 s)."""

    lease_ttl_s: float = 10.0
    renew_every_s: float = 3.0
    standby_poll_s: float = 1.0
    #: Stop stepping this long before the lease would lapse without a renewal.
    safety_margin_s: float = 2.0
    tick_min_s: float = 1.0
    tick_max_s: float = 2.0
    heartbeat_every_s: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_every_s < self.lease_ttl_s - self.safety_margin_s:
            raise ValueError(f"renew_every_s ({self.renew_every_s}) must be below lease_ttl_s ({self.lease_ttl_s}) "
                             f"minus safety_margin_s ({self.safety_margin_s}), or the leader would pause between "
                             f"renewals")
        if not 0 < self.tick_min_s <= self.tick_max_s:
            raise ValueError(f"tick must satisfy 0 < tick_min_s <= tick_max_s, got {self.tick_min_s}, "
                             f"{self.tick_max_s}")


@dataclass(slots=True)
class LiveStats:
    """What the loop has done, for metrics (``shoal up`` exports them) and for tests."""

    steps: int = 0
    step_seconds_last: float = 0.0
    step_seconds_max: float = 0.0
    step_seconds_total: float = 0.0
    terms: int = 0                      # times this process became leader
    leader_since: float | None = None
    last_report: StepReport | None = None
    errors: int = 0
    epochs: list[int] = field(default_factory=list)


def default_holder() -> str:
    """A lease holder name unique to this process: host, pid and a random suffix (a restarted process differs)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LiveController:
    """Runs a ``Controller`` while this process holds the store's lease.

    ``run()`` is a coroutine that returns after ``stop()``; ``wake()`` may be called from any thread.
    ``on_step(report, seconds)`` (optional) is called in the loop after every step, for metrics.
    """

    def __init__(self, store: Store, executor: Executor, policy: Policy, *, nodes: Sequence[Node],
                 holder: str | None = None, config: LiveConfig = LiveConfig(),
                 controller_config: ControllerConfig = ControllerConfig(),
                 policy_config: PolicyConfig = PolicyConfig(), clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None,
                 on_step: Callable[[StepReport, float], None] | None = None,
                 job_tokens: JobTokens | None = None) -> None:
        if controller_config.health.heartbeat_limit_s <= config.heartbeat_every_s:
            raise ValueError(f"the heartbeat limit ({controller_config.health.heartbeat_limit_s:g}s) must be longer "
                             f"than the time between heartbeats ({config.heartbeat_every_s:g}s), or every node "
                             f"would turn suspect")
        self.store = store
        self.job_tokens = job_tokens
        self.executor = executor
        self.policy = policy
        self.nodes = list(nodes)
        self.holder = holder or default_holder()
        self.config = config
        self.controller_config = controller_config
        self.policy_config = policy_config
        self.stats = LiveStats()
        self._clock = clock
        self._rng = rng or random.Random()
        self._on_step = on_step
        self._epoch: int | None = None
        self._lease_until = 0.0
        self._controller: Controller | None = None
        self._needs_recover = False
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="shoal-live")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping: asyncio.Event | None = None
        self._last_heartbeat = float("-inf")
        self._backend_health: dict[str, Health] = {}   # the executor's last judgement per node
        self._pending_close = False

    # -- public --------------------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self._epoch is not None

    @property
    def epoch(self) -> int | None:
        """The lease epoch while leading, else ``None``."""
        return self._epoch

    @property
    def controller(self) -> Controller | None:
        """The controller of the current term (``None`` on a standby)."""
        return self._controller

    def wake(self) -> None:
        """Step soon (a job was submitted or cancelled). Safe from any thread; a no-op before ``run``."""
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake.set()
        else:
            loop.call_soon_threadsafe(wake.set)

    async def run(self) -> None:
        """Lead or stand by until ``stop()``; then give the lease up so a standby takes over at once."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        tasks = [asyncio.create_task(self._lease_loop(), name="shoal-lease"),
                 asyncio.create_task(self._step_loop(), name="shoal-step")]
        try:
            await self._stopping.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                try:
                    await task
                except asyncio.CancelledError:
                    pass
            # A step may still be running in its thread: let it finish before the lease is given up.
            await asyncio.get_running_loop().run_in_executor(None, partial(self._pool.shutdown, wait=True))
            await self._resign()

    def stop(self) -> None:
        """Ask ``run`` to finish (safe from any thread)."""
        loop, stopping = self._loop, self._stopping
        if loop is None or stopping is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(stopping.set)

    # -- the lease -----------------------------------------------------------------------------------------------
    async def _lease_loop(self) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set():
            now = self._clock()
            try:
                epoch = await self._in_thread(partial(self.store.acquire_lease, self.holder,
                                                      ttl_s=self.config.lease_ttl_s, now=now))
            except Exception:   # the database is unreachable: keep the old term until the lease would lapse
                self.stats.errors += 1
                log.exception("renewing the scheduler lease failed")
                if self.is_leader and self._clock() >= self._lease_until - self.config.safety_margin_s:
                    self._demote("lease could not be renewed in time")
            else:
                if epoch is None:
                    if self.is_leader:
                        self._demote("another scheduler holds the lease")
                else:
                    self._lease_until = now + self.config.lease_ttl_s
                    if epoch != self._epoch:
                        self._promote(epoch, now)
            interval = self.config.renew_every_s if self.is_leader else self.config.standby_poll_s
            await self._sleep(self._stopping, interval)

    def _promote(self, epoch: int, now: float) -> None:
        log.info("scheduler %s leads with epoch %d", self.holder, epoch)
        self._epoch = epoch
        self._controller = Controller(self.store, self.executor, self.policy, nodes=self.nodes,
                                      policy_config=self.policy_config, epoch=epoch, config=self.controller_config,
                                      job_tokens=self.job_tokens)
        self._needs_recover = True
        self.stats.terms += 1
        self.stats.leader_since = now
        self.stats.epochs.append(epoch)
        self.wake()

    def _demote(self, why: str) -> None:
        log.warning("scheduler %s stops leading (epoch %s): %s", self.holder, self._epoch, why)
        self._epoch = None
        self._controller = None
        self.stats.leader_since = None
        self._pending_close = True

    async def _resign(self) -> None:
        if not self.is_leader:
            return
        release = getattr(self.store, "release_lease", None)
        self._epoch = None
        self._controller = None
        if callable(release):
            try:
                await asyncio.get_running_loop().run_in_executor(None, release, self.holder)
            except Exception:
                log.exception("giving the lease up failed; a standby will take over when it lapses")
        self.executor.close()

    # -- the steps -----------------------------------------------------------------------------------------------
    async def _step_loop(self) -> None:
        assert self._stopping is not None and self._wake is not None
        while not self._stopping.is_set():
            self._wake.clear()
            if self._pending_close:
                # Demoted meanwhile: drop the executor's view of the gangs (they keep running; whoever leads next
                # adopts them). Done here, between steps, because the executor is used by one thread at a time.
                self._pending_close = False
                self.executor.close()
            if self._may_act():
                await self._one_step()
            tick = self._rng.uniform(self.config.tick_min_s, self.config.tick_max_s)
            await self._sleep(self._wake, tick)

    def _may_act(self) -> bool:
        return self.is_leader and self._clock() < self._lease_until - self.config.safety_margin_s

    async def _one_step(self) -> None:
        controller = self._controller
        if controller is None:
            return
        started = time.perf_counter()
        now = self._clock()
        try:
            if self._needs_recover:
                epoch = controller.epoch
                await self._in_thread(partial(self.store.append_event, leadership_event(self.holder, epoch, now)))
                report = await self._in_thread(partial(controller.recover, now))
                # Only now: a recovery that failed (the executor's backend unreachable) is tried again next tick,
                # rather than leaving gangs the store holds unadopted.
                self._needs_recover = False
            else:
                await self._heartbeat(now)
                report = await self._in_thread(partial(controller.step, now))
        except StaleLeader:
            self._demote("the store refused a write: a newer leader exists")
            return
        except Exception:
            self.stats.errors += 1
            log.exception("controller step failed; retrying at the next tick")
            return
        seconds = time.perf_counter() - started
        self.stats.steps += 1
        self.stats.step_seconds_last = seconds
        self.stats.step_seconds_max = max(self.stats.step_seconds_max, seconds)
        self.stats.step_seconds_total += seconds
        self.stats.last_report = report
        if self._on_step is not None:
            self._on_step(report, seconds)
        if report.stale_leader and self._controller is controller:
            self._demote("the store refused a write: a newer leader exists")

    async def _heartbeat(self, now: float) -> None:
        if now - self._last_heartbeat < self.config.heartbeat_every_s:
            return
        self._last_heartbeat = now

        def write() -> None:
            for node, utilization in self.executor.heartbeats(now).items():
                try:
                    self.store.heartbeat(node, now, utilization)
                except Exception:
                    log.exception("heartbeat of node %s failed", node)
            reports = self.executor.node_health(now)
            if reports:
                try:
                    apply_backend_health(self.store, reports, self._backend_health, now=now)
                except Exception:
                    log.exception("applying the cluster's node health failed")
        await self._in_thread(write)

    # -- helpers -------------------------------------------------------------------------------------------------
    async def _in_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    @staticmethod
    async def _sleep(event: asyncio.Event, seconds: float) -> None:
        """Wait ``seconds`` or until ``event`` is set, whichever comes first."""
        try:
            await asyncio.wait_for(event.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass


def leadership_event(holder: str, epoch: int, now: float) -> Event:
    """The event a new leader writes, so operators see takeovers in the event log."""
    return Event(at=now, kind="leadership", reason="LeaseAcquired", message=f"{holder} leads with epoch {epoch}",
                 data={"holder": holder, "epoch": epoch})
