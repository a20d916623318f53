"""A real ``shoal up`` for the notebook and browser tests: the demo cluster, SQLite in a temp state directory, the
real policy, controller and local executor, on a free port; and a token of ana, team fraud-ml."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.shoal_up import started


@dataclass
class ShoalServer:
    url: str
    token: str
    state: Path
    output: list[str] = field(default_factory=list)

    def tail(self, lines: int = 40) -> str:
        return "".join(self.output[-lines:])


@contextmanager
def shoal_up(tmp: Path) -> Iterator[ShoalServer]:
    with started(tmp / "shoal-state", "--cluster", "demo", "--teams", "demo", "--tick", "0.2",
                 "--min-run-time", "0s") as up:
        yield ShoalServer(url=up.url, token=up.token("ana", "fraud-ml"), state=up.state, output=up.output)
