"""The ``%%gpujob`` widget in JupyterLab, in headless Chromium: it renders, streams output, and its Cancel button
stops the job. Screenshots go to ``test-output/``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nbformat
import pytest

from scheduler_core.client import ShoalClient

from tests.ports import free_port

from .servers import ShoalServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"
CHROMIUM = Path("/usr/bin/chromium")
JOB_CELL = """%%gpujob --pods 2 --gpus-per-pod 8 --name browser-demo --time 10m
import os, time
for step in range(600):
    print(f"rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']} step {step} loss {1 / (step + 1):.4f}", flush=True)
    time.sleep(0.5)
"""




def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pause.wait(0.2)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def lab(shoal_server: ShoalServer, tmp_path: Path) -> Iterator[str]:
    """JupyterLab on a free port with a token, its kernels identified as ana of fraud-ml; yields the notebook URL."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (tests/services/system-deps.sh installs it)")
    work = tmp_path / "lab"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext magics"), nbformat.v4.new_code_cell(JOB_CELL)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "widget.ipynb")
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = free_port(), "browser-test-token"
    env = {**os.environ, "SHOAL_URL": shoal_server.url, "SHOAL_TOKEN": shoal_server.token,
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("JUPYTERHUB_API_TOKEN", None)
    log = open(tmp_path / "jupyterlab.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is None and _answers(f"http://127.0.0.1:{port}/api/status?token={token}"),
                 120, "JupyterLab to answer")
        yield f"http://127.0.0.1:{port}/doc/tree/widget.ipynb?token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_widget_in_jupyterlab_streams_output_and_cancels(lab: str, shoal_server: ShoalServer) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(lab)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            # The kernel has started: the status bar says so. Even then the first request can be lost while the
            # kernel's websocket connects, so run the first cell until it has an execution count.
            page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=120_000)
            prompt = page.locator(".jp-Cell .jp-InputPrompt").first
            for _ in range(6):
                page.locator(".jp-Cell").nth(0).click()
                page.keyboard.press("Shift+Enter")
                try:
                    page.locator(".jp-Cell .jp-InputPrompt", has_text="[1]").first.wait_for(timeout=10_000)
                    break
                except PlaywrightTimeout:
                    continue
            assert "[1]" in prompt.inner_text()
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
            page.screenshot(path=str(OUTPUT / "gpujob-widget-running.png"), full_page=True)

            cancel.click()
            page.locator(".jupyter-widgets", has_text="CANCELLED").first.wait_for(timeout=120_000)
            page.screenshot(path=str(OUTPUT / "gpujob-widget-cancelled.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(OUTPUT / "gpujob-widget-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    with ShoalClient(shoal_server.url, shoal_server.token) as client:
        jobs = client.queue("fraud-ml", states="all").jobs
        assert [(j.name, j.state) for j in jobs] == [("browser-demo", "CANCELLED")]
