"""``shoal bench``: figures for docs/BENCHMARKS.md, printed, never asserted in tests."""

from __future__ import annotations

import click

from .lazy import LazyGroup

BENCHES: dict[str, tuple[str, str]] = {
    "cycle": ("scheduler_core.bench.cycle:command", "Time full run_cycle passes on a realistic snapshot."),
    "api": ("scheduler_core.bench.api:command", "Sustained submissions through the REST API."),
    "step": ("scheduler_core.runtime.bench_step:command", "Time the controller's snapshot and step around a pass."),
    "live": ("scheduler_core.service.bench_live:command", "Controller.step on a SQL store; event-loop lag of the live loop."),
    "sweep": ("scheduler_core.bench.sweep:command", "A 500-trial sweep: the cycle with its trials pending."),
}


@click.group(cls=LazyGroup, lazy=BENCHES)
def bench() -> None:
    """Benchmarks: the scheduling cycle, the API."""
