from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import start_cluster
from .servers import ShoalServer


@pytest.fixture
def shoal_server(tmp_path: Path) -> Iterator[ShoalServer]:
    cluster = start_cluster(tmp_path)
    try:
        yield ShoalServer(url=cluster.url, token=cluster.tokens["ana"])
    finally:
        cluster.stop()
