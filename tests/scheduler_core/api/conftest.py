from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Harness, Shoal, running_harness


@pytest.fixture
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """The API over a ``MemoryStore``; modules that mark ``parametrize("api", ["memory", "sqlite"],
    indirect=True)`` run over the SQL store too."""
    yield from running_harness(getattr(request, "param", "memory"), tmp_path)


@pytest.fixture
def shoal(api: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Shoal]:
    """The CLI against ``api`` as alice (``SHOAL_URL`` and ``SHOAL_TOKEN`` set)."""
    monkeypatch.setenv("SHOAL_URL", api.url)
    monkeypatch.setenv("SHOAL_TOKEN", api.users["alice"])
    yield Shoal(capsys)
