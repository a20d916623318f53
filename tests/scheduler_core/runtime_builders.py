"""Small fluent builders for the runtime's tests: ``make_spec("a").team("search").pods(2, 8).build()``.

Shared by the store and executor contract suites and the controller tests, so a case reads as the job it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scheduler_core.model import ClusterConfig, JobSpec, Node, TeamConfig
from scheduler_core.policy.snapshot import Placement, PodPlacement
from scheduler_core.store.sql import SqlStore, open_store

#: Two H100 blocks of four nodes (two leaves each, the last node a hot spare), and one MIG node (7 × 1g per GPU).
CLUSTER: dict[str, Any] = {
    "name": "test",
    "blocks": [
        {"name": "h100-b{i}", "repeat": 2, "gpu": "h100", "nodes": 4, "nodes_per_leaf": 2, "spares": 1},
        {"name": "mig-a", "small_jobs": True, "nodes": [{"count": 1, "gpu": "h100", "mig": "1g.10gb"}]},
    ],
}


def cluster_nodes() -> list[Node]:
    """h100-b0-n00..n03 and h100-b1-n00..n03 (n03 spare), and mig-a-n00 with 56 1g slices."""
    return ClusterConfig.model_validate(CLUSTER).expand()


def team_configs() -> list[TeamConfig]:
    return [
        TeamConfig.model_validate({"name": "fraud-ml", "cohort": "shared",
                                   "quotas": {"h100": {"nominal": 16}, "h100-mig-1g": {"nominal": 28}}}),
        TeamConfig.model_validate({"name": "search", "cohort": "shared", "weight": 2.0,
                                   "quotas": {"h100": {"nominal": 32}, "h100-mig-1g": {"nominal": 28}}}),
    ]


class SpecBuilder:
    def __init__(self, name: str) -> None:
        self._data: dict[str, Any] = {"name": name, "team": "fraud-ml", "flavour": ["h100"], "pods": 1,
                                      "gpus_per_pod": 1, "command": ["python", "train.py"], "checkpoint": {}}

    def team(self, team: str) -> SpecBuilder:
        self._data["team"] = team
        return self

    def pods(self, pods: int, units_per_pod: int = 8) -> SpecBuilder:
        self._data["pods"] = pods
        self._data["gpus_per_pod"] = units_per_pod
        return self

    def flavour(self, *flavours: str) -> SpecBuilder:
        self._data["flavour"] = list(flavours)
        return self

    def mig(self, slices: int = 1) -> SpecBuilder:
        return self.flavour("h100-mig-1g").pods(1, slices)

    def non_preemptible(self) -> SpecBuilder:
        self._data["preemptible"] = False
        return self

    def grace(self, seconds: float) -> SpecBuilder:
        self._data["checkpoint"]["grace_period"] = seconds
        return self

    def checkpoint(self, **fields: Any) -> SpecBuilder:
        self._data["checkpoint"].update(fields)
        return self

    def max_restarts(self, count: int) -> SpecBuilder:
        self._data["max_restarts"] = count
        return self

    def time_limit(self, seconds: float) -> SpecBuilder:
        self._data["time_limit"] = seconds
        return self

    def env(self, **env: str) -> SpecBuilder:
        self._data["env"] = dict(env)
        return self

    def command(self, *argv: str) -> SpecBuilder:
        self._data["command"] = list(argv)
        return self

    def build(self) -> JobSpec:
        return JobSpec.model_validate(self._data)


def make_spec(name: str = "job") -> SpecBuilder:
    return SpecBuilder(name)


def place(flavour: str, *pods: tuple[str, tuple[int, ...]]) -> Placement:
    """``place("h100", ("h100-b0-n00", (0, 1)))``: one pod per (node, units)."""
    return Placement(flavour, tuple(PodPlacement(node, units) for node, units in pods))


def whole_nodes(*nodes: str, gpus: int = 8) -> Placement:
    """One pod of ``gpus`` whole H100s on each node."""
    return place("h100", *((node, tuple(range(gpus))) for node in nodes))


@contextmanager
def sqlite_store(directory: Path, nodes: Sequence[Node] | None = None,
                 teams: Sequence[TeamConfig] | None = None) -> Iterator[SqlStore]:
    """A SQLite store in ``directory`` holding ``nodes`` and ``teams`` (default: the test cluster's), disposed
    of afterwards: the store of the tests that run a controller against real processes."""
    store = open_store(f"sqlite:///{directory}/shoal.db")
    store.sync_nodes(list(cluster_nodes() if nodes is None else nodes))
    store.sync_teams(list(team_configs() if teams is None else teams))
    try:
        yield store
    finally:
        store.dispose()
