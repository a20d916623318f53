from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .servers import ShoalServer, shoal_up


@pytest.fixture
def shoal_server(tmp_path: Path) -> Iterator[ShoalServer]:
    """A running ``shoal up`` on the demo cluster, and a token of ana (fraud-ml)."""
    with shoal_up(tmp_path) as server:
        yield server
