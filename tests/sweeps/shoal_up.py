"""A real ``shoal up`` for the sweep tests: SQLite in a temporary state directory, the demo cluster, the local
executor, and the sweep controller started by ``shoal up`` itself as a ``shoal.services`` entry point.

When the installed Shoal predates that entry point (an editable install made before it was added to
``pyproject.toml``), the fixture puts a one-file distribution on the child's ``PYTHONPATH`` that declares it — the
same declaration ``pip install -e .`` writes — so ``shoal up`` discovers the controller exactly as it would on an
up-to-date install. Nothing else is stubbed.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.shoal_up import ROOT, Up as _Up, child_env, eventually, started

__all__ = ["ROOT", "Up", "eventually", "start_up"]


@dataclass
class Up(_Up):
    """The sweep tests' ``shoal up``, and where its sweep controller keeps the Optuna studies."""

    @property
    def storage_url(self) -> str:
        return f"sqlite:///{(self.state / 'sweeps.db').resolve()}"


def _entry_point_shim(where: Path) -> Path | None:
    """A distribution declaring ``shoal.services: sweeps``, if the installed one does not."""
    if "sweeps" in {e.name for e in importlib.metadata.entry_points(group="shoal.services")}:
        return None
    dist = where / "shoal_sweeps_entry_point-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shoal-sweeps-entry-point\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[shoal.services]\nsweeps = sweeps.service:start\n")
    return where


def start_up(tmp: Path, *extra: str, state: Path | None = None) -> Iterator[Up]:
    """``shoal up`` with its sweep controller, on ``state`` (default ``tmp/state``)."""
    shim = _entry_point_shim(tmp / "entry-points")
    env = child_env(*([shim] if shim is not None else []), SHOAL_SWEEPS_INTERVAL="0.25")
    for name in ("SHOAL_SWEEPS_STORAGE", "SHOAL_DISABLE_SERVICES"):
        env.pop(name, None)
    with started(state or tmp / "state", "--tick", "0.5", *extra, env=env) as up:
        up.eventually(lambda: any("sweeps: controller started" in line for line in up.output),
                      "the sweep controller to start inside shoal up", 60)
        yield Up(up.proc, up.state, up.url, up.output, up.env)
