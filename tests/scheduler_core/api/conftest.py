from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import Harness, running_harness


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()
