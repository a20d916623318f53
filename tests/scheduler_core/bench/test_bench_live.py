"""``shoal bench live`` fills a SQL store, times the first step after a start and a restart, and the live loop's
delay of its event loop (timings are printed, not asserted)."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.cli.main import main


@pytest.fixture
def restores_the_collector() -> Iterator[None]:
    yield
    gc.unfreeze()   # the command freezes its start-up heap, as a scheduler process does


def test_it_prints_each_figure_for_the_store_it_filled(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       restores_the_collector: None) -> None:
    code = main(["bench", "live", "--db", f"sqlite:///{tmp_path / 'b.db'}", "--cluster", "demo", "--teams", "demo",
                 "--pending", "40", "--running", "2", "--repeat", "3"])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"^sqlite: \d+ nodes, 40 pending, 2 running", out, re.M)
    assert re.search(r"first after a start \d+\.\d ms \(\d+ ms CPU\); first after a restart", out)
    assert re.search(r"10 ms timer lateness median \d+\.\d ms, p95 .* over \d+ ticks", out)


@pytest.mark.parametrize("args, message", [
    (["--cluster", "demo", "--teams", "demo", "--running", "4"], "cluster 'demo' has 3"),
    (["--repeat", "0"], "0 is not in the range x>=1"),
    (["--pending", "-1"], "-1 is not in the range x>=0"),
])
def test_sizes_it_cannot_build_are_a_usage_error(args: list[str], message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "live", *args]) == 2
    assert message in capsys.readouterr().err
