"""``SweepPanel`` in JupyterLab, in headless Chromium: the form renders, "Launch sweep" starts a sweep, the live view
follows it (counts, best trial, plot) and "Cancel sweep" cancels it. Screenshots go to ``test-output/``.

The API is a real server in this process; the sweep controller runs here over that API, and the scheduler's part
(starting and ending trial jobs) is played on the store, so the test decides exactly what the panel must show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import nbformat
import optuna
import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.model.sweep import SweepState
from sweeps.api_launcher import ApiLauncher, TrialTokens
from sweeps.controller import SweepController
from tests.ports import free_port
from tests.scheduler_core.api.harness import Harness, running_harness

from .test_over_the_api import Scheduler

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"
CHROMIUM = Path("/usr/bin/chromium")




def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pause.wait(0.2)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()


@pytest.fixture
def lab(api: Harness, tmp_path: Path) -> Iterator[str]:
    """JupyterLab on a free port, its kernels acting as bob of team search; yields the notebook's URL."""
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is required for browser tests (apt-get install chromium)")
    work = tmp_path / "lab"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from sweeps import SweepPanel\npanel = SweepPanel(poll_s=0.5)\npanel")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "panel.ipynb")
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = free_port(), "sweep-panel-test"
    env = {**os.environ, "SHOAL_URL": api.url, "SHOAL_TOKEN": api.users["bob"],
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    log = open(tmp_path / "jupyterlab.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is None and _answers(f"http://127.0.0.1:{port}/api/status?token={token}"),
                 120, "JupyterLab to answer")
        yield f"http://127.0.0.1:{port}/doc/tree/panel.ipynb?token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run_first_cell(page: object) -> None:
    """Run the notebook's first cell, again if the kernel was not connected yet when the keys were pressed (the
    execution indicator can read 'idle' a moment before the kernel's websocket is up)."""
    for _ in range(5):
        page.click(".jp-Cell >> nth=0")  # type: ignore[attr-defined]
        page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
        prompt = page.locator(".jp-Cell >> nth=0").locator(".jp-InputPrompt")  # type: ignore[attr-defined]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(mark in prompt.inner_text() for mark in ("[1]", "[*]")):
                return
            threading.Event().wait(0.2)
    raise AssertionError("the notebook's first cell never ran")


def test_panel_in_jupyterlab_launches_and_follows_a_sweep(lab: str, api: Harness) -> None:
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(exist_ok=True)
    admin = ShoalClient(api.url, api.users["root"])
    controller = SweepController(ApiLauncher(admin, job_api_url=api.url, tokens=TrialTokens(api.tokens, api.clock)),
                                 optuna.storages.InMemoryStorage())
    bob, cluster = ShoalClient(api.url, api.users["bob"]), Scheduler(api)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        try:
            page.goto(lab)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", state="attached",
                                   timeout=120_000)
            run_first_cell(page)
            launch = page.locator(".jupyter-widgets button", has_text="Launch sweep")
            launch.wait_for(timeout=60_000)
            panel = page.locator(".jupyter-widgets.widget-vbox").first
            assert "Search space" in panel.inner_text()
            page.screenshot(path=str(OUTPUT / "sweep-panel-form.png"), full_page=True)

            launch.click()
            wait_for(lambda: api.store.list_sweeps(), 60, "the panel to start a sweep")
            [sweep] = api.store.list_sweeps()
            assert (sweep.user, sweep.spec.n_trials, sweep.spec.parallelism) == ("bob", 20, 4)

            image = page.locator(".jupyter-widgets img").first
            first_plot = image.get_attribute("src")
            # Two trials complete, one is pruned-by-report-path (fails), two run: the panel must show it all.
            controller.run_once()
            jobs = [t.job_id for t, _ in api.store.list_trials(sweep.id)]
            for job_id, value in zip(jobs[:2], (0.52, 0.31)):
                cluster.start(job_id)
                bob.report(job_id, value + 0.2, step=0)
                bob.report(job_id, value, final=True)
                cluster.exit(job_id)
            cluster.start(jobs[2])
            cluster.exit(jobs[2], 1, "Traceback: boom")
            cluster.start(jobs[3])
            bob.report(jobs[3], 0.9, step=0)
            controller.run_once()
            page.locator(".jupyter-widgets", has_text="failed 1").first.wait_for(timeout=60_000)
            wait_for(lambda: image.get_attribute("src") != first_plot and image.evaluate(
                "img => img.complete && img.naturalWidth > 0"), 30, "the plot to be redrawn")
            text = panel.inner_text()
            assert "done 2" in text and "3/20" in text and "best: trial 1" in text and "0.31" in text
            assert image.is_visible()
            page.screenshot(path=str(OUTPUT / "sweep-panel-live.png"), full_page=True)

            page.locator(".jupyter-widgets button", has_text="Cancel sweep").click()
            page.locator(".jupyter-widgets", has_text="CANCELLING").first.wait_for(timeout=60_000)
            controller.run_once()
            page.locator(".jupyter-widgets", has_text="CANCELLED").first.wait_for(timeout=60_000)
            page.screenshot(path=str(OUTPUT / "sweep-panel-cancelled.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(OUTPUT / "sweep-panel-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
            admin.close()
            bob.close()
    assert api.store.get_sweep(sweep.id).state is SweepState.CANCELLED
