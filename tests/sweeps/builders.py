"""Small fluent builders for sweep specs: ``make_sweep("s").trials(20).parallel(4).pruner("none").build()``."""

from __future__ import annotations

from typing import Any, Self

from scheduler_core.model import SweepSpec


class SweepBuilder:
    def __init__(self, name: str) -> None:
        self.data: dict[str, Any] = {
            "name": name, "team": "search",
            "search_space": {"x": {"type": "float", "low": -10.0, "high": 10.0}},
            "objective": {"metric": "loss", "direction": "minimize"},
            "n_trials": 10, "parallelism": 2,
            "sampler": {"name": "random", "seed": 7},
            "pruner": "none",
            "trial": {"flavour": "h100-mig-1g", "command": ["python", "-m", "objective"], "time_limit": "10m"},
        }

    def team(self, team: str) -> Self:
        self.data["team"] = team
        return self

    def trials(self, n: int) -> Self:
        self.data["n_trials"] = n
        return self

    def parallel(self, n: int) -> Self:
        self.data["parallelism"] = n
        return self

    def maximize(self) -> Self:
        self.data["objective"]["direction"] = "maximize"
        return self

    def space(self, **params: dict[str, Any]) -> Self:
        self.data["search_space"] = params
        return self

    def sampler(self, sampler: str | dict[str, Any]) -> Self:
        self.data["sampler"] = sampler
        return self

    def pruner(self, pruner: str | dict[str, Any]) -> Self:
        self.data["pruner"] = pruner
        return self

    def max_failed(self, n: int) -> Self:
        self.data["max_failed_trials"] = n
        return self

    def trial(self, **fields: Any) -> Self:
        self.data["trial"] = {**self.data["trial"], **fields}
        return self

    def json(self) -> dict[str, Any]:
        return dict(self.data)

    def build(self) -> SweepSpec:
        return SweepSpec.model_validate(self.data)


def make_sweep(name: str = "sweep") -> SweepBuilder:
    return SweepBuilder(name)
