"""The ``%%gpujob`` widget in JupyterLab, in headless Chromium: it renders, streams output, and its Cancel button
stops the job. Screenshots go to ``test-output/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.client import ShoalClient
from tests.browser import CHROMIUM, OUTPUT, chromium_page, jupyterlab, open_notebook, shot

from .servers import ShoalServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOB_CELL = """%%gpujob --pods 2 --gpus-per-pod 8 --name browser-demo --time 10m
import os, time
for step in range(600):
    print(f"rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']} step {step} loss {1 / (step + 1):.4f}", flush=True)
    time.sleep(0.5)
"""


@pytest.fixture
def lab(shoal_server: ShoalServer, tmp_path: Path) -> Iterator[str]:
    """JupyterLab, its kernels identified as ana of fraud-ml; yields the notebook URL."""
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (tests/services/system-deps.sh installs it)")
    with jupyterlab(tmp_path, "widget.ipynb", ["%load_ext magics", JOB_CELL],
                    {"SHOAL_URL": shoal_server.url, "SHOAL_TOKEN": shoal_server.token}) as url:
        yield url


def test_widget_in_jupyterlab_streams_output_and_cancels(lab: str, shoal_server: ShoalServer) -> None:
    with chromium_page(1280, 1000, failure_shot=OUTPUT / "gpujob-widget-failure.png") as page:
        open_notebook(page, lab)
        page.locator(".jp-Cell").nth(1).click()
        page.keyboard.press("Shift+Enter")
        cancel = page.locator(".jupyter-widgets button", has_text="Cancel job")
        cancel.wait_for(timeout=60_000)
        widget = page.locator(".jupyter-widgets.widget-vbox").first
        page.locator(".jp-OutputArea-output", has_text="rank 0/2 step 3").first.wait_for(timeout=120_000)
        text = widget.inner_text()
        assert "browser-demo" in text and "RUNNING" in text
        assert "2 × h100 pods on" in text and "GPU-hours used" in text
        assert "rank 1/2" not in text  # rank 0's output only, by default
        shot(page, OUTPUT / "gpujob-widget-running.png")

        cancel.click()
        page.locator(".jupyter-widgets", has_text="CANCELLED").first.wait_for(timeout=120_000)
        shot(page, OUTPUT / "gpujob-widget-cancelled.png")
    with ShoalClient(shoal_server.url, shoal_server.token) as client:
        jobs = client.queue("fraud-ml", states="all").jobs
        assert [(j.name, j.state) for j in jobs] == [("browser-demo", "CANCELLED")]
