"""Each team's past use, decayed: the ``TeamState.decayed_usage`` fair sharing orders teams by.

Kept incrementally rather than re-summed from the store each cycle: the simulator's ledger grows to tens of
thousands of records, and one cycle must stay in milliseconds. Loaded once from ``Store.usage()`` on start; then
every release adds its record. Exponential decay is multiplicative, so decaying the running total is exact.
A record counts as used at its end (the moment the store learns of it).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model.flavours import FLAVOURS
from ..policy.fairshare import decay
from ..policy.snapshot import RESOURCES


class UsageLedger:
    def __init__(self, half_life_s: float) -> None:
        self._half_life_s = half_life_s
        self._values: dict[str, dict[str, float]] = {}
        self._as_of: float | None = None

    def add(self, team: str, amounts: Mapping[str, float], at: float) -> None:
        """Add ``amounts`` (resource → amount) used by ``team``, as of instant ``at``."""
        if self._as_of is None:
            self._as_of = at
        elif at > self._as_of:
            self._decay_to(at)
        values = self._values.setdefault(team, dict.fromkeys(RESOURCES, 0.0))
        for resource, amount in amounts.items():
            values[resource] = values.get(resource, 0.0) + decay(amount, self._as_of - at, self._half_life_s)

    def decayed(self, now: float) -> dict[str, dict[str, float]]:
        """Every team's decayed usage at ``now`` (a copy)."""
        if self._as_of is not None and now > self._as_of:
            self._decay_to(now)
        return {team: dict(values) for team, values in self._values.items()}

    def _decay_to(self, at: float) -> None:
        assert self._as_of is not None
        elapsed = at - self._as_of
        for values in self._values.values():
            for resource in values:
                values[resource] = decay(values[resource], elapsed, self._half_life_s)
        self._as_of = at


def usage_amounts(flavour: str, units: int, pods: int, cpus_per_pod: int, memory_gb_per_pod: int,
                  seconds: float) -> dict[str, float]:
    """What holding a placement for ``seconds`` costs in each resource: GPU-seconds normalised by the flavour's
    speed (so a slow flavour or a small slice is not a penalty), CPU-seconds and GB-seconds."""
    speed = FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0
    return {"gpu": units * speed * seconds, "cpu": pods * cpus_per_pod * seconds,
            "memory": pods * memory_gb_per_pod * seconds}
