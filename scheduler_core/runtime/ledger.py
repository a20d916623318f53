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
    """Per team, its decayed usage as of the last instant it was touched. Adding one team's record decays only that
    team's totals, so loading a long ledger costs one decay per record, not one per team per record."""

    def __init__(self, half_life_s: float) -> None:
        self._half_life_s = half_life_s
        self._teams: dict[str, tuple[float, dict[str, float]]] = {}   # team → (as of, resource → value)

    def add(self, team: str, amounts: Mapping[str, float], at: float) -> None:
        """Add ``amounts`` (resource → amount) used by ``team``, as of instant ``at``."""
        as_of, values = self._teams.get(team, (at, dict.fromkeys(RESOURCES, 0.0)))
        if at > as_of:
            values = _scaled(values, decay(1.0, at - as_of, self._half_life_s))
            as_of = at
        else:
            values = dict(values)           # ``decayed`` may have handed the old one out
        for resource, amount in amounts.items():
            values[resource] = values.get(resource, 0.0) + decay(amount, as_of - at, self._half_life_s)
        self._teams[team] = (as_of, values)

    def decayed(self, now: float) -> dict[str, dict[str, float]]:
        """Every team's decayed usage at ``now``: dicts the ledger never changes afterwards (the caller may keep
        them, and must not change them), handed out without a copy since every pass asks for forty."""
        result: dict[str, dict[str, float]] = {}
        factors: dict[float, float] = {}     # most teams were last decayed at the same instant: one power each
        for team, (as_of, values) in self._teams.items():
            if now > as_of:
                elapsed = now - as_of
                factor = factors.get(elapsed)
                if factor is None:
                    factor = factors[elapsed] = decay(1.0, elapsed, self._half_life_s)
                values = _scaled(values, factor)
                self._teams[team] = (now, values)
            result[team] = values
        return result


def _scaled(values: dict[str, float], factor: float) -> dict[str, float]:
    """``values`` decayed by ``factor`` (``decay(1.0, elapsed, half_life)``: the same floats as decaying each)."""
    return {resource: value * factor for resource, value in values.items()}


def usage_amounts(flavour: str, units: int, pods: int, cpus_per_pod: int, memory_gb_per_pod: int,
                  seconds: float) -> dict[str, float]:
    """What holding a placement for ``seconds`` costs in each resource: GPU-seconds normalised by the flavour's
    speed (so a slow flavour or a small slice is not a penalty), CPU-seconds and GB-seconds."""
    speed = FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0
    return {"gpu": units * speed * seconds, "cpu": pods * cpus_per_pod * seconds,
            "memory": pods * memory_gb_per_pod * seconds}
