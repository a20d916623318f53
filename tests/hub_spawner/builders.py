"""Small fluent builders for the spawner's unit tests: a hub user and a ShoalSpawner wired to a fake scheduler."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub_spawner import ShoalSpawner
from hub_spawner.scheduler import NotebookScheduler


@dataclass(frozen=True)
class Group:
    name: str


@dataclass
class HubUser:
    """What a Spawner reads of ``spawner.user`` (a real object, not a mock)."""

    name: str
    groups: list[Group] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"/user/{self.name}/"

    @property
    def escaped_name(self) -> str:
        return self.name


@dataclass
class Hub:
    public_host: str = ""
    api_url: str = "http://127.0.0.1:8081/hub/api"
    base_url: str = "/hub/"


#: The fake scheduler runs no server: no warm process to fork one, nothing that will listen on the port.
NO_SERVER = {"warm_start": False, "ready_check": False}


class SpawnerBuilder:
    def __init__(self, scheduler: NotebookScheduler, tmp: Path) -> None:
        self._scheduler = scheduler
        self._tmp = tmp
        self._user = HubUser("alice", [Group("fraud-ml")])
        self._options: dict[str, Any] = {}
        self._config: dict[str, Any] = {}

    def user(self, name: str, *teams: str) -> SpawnerBuilder:
        self._user = HubUser(name, [Group(t) for t in teams])
        return self

    def options(self, **options: Any) -> SpawnerBuilder:
        self._options = options
        return self

    def config(self, **traits: Any) -> SpawnerBuilder:
        self._config.update(traits)
        return self

    def build(self) -> ShoalSpawner:
        scheduler = self._scheduler
        spawner = ShoalSpawner(user=self._user, hub=Hub(), scheduler_factory=lambda _s: scheduler,
                               secrets_dir=str(self._tmp / "secrets"), status_interval=0.01,
                               work_dir=str(self._tmp / "work" / "{username}"), **{**NO_SERVER, **self._config})
        spawner.user_options = dict(self._options)
        spawner.api_token = f"token-of-{self._user.name}"
        return spawner
