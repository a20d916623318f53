"""``SweepPanel`` in JupyterLab, in headless Chromium: the form renders, "Launch sweep" starts a sweep, the live view
follows it (counts, best trial, plot) and "Cancel sweep" cancels it. Screenshots go to ``test-output/``.

The API is a real server in this process; the sweep controller runs here over that API, and the scheduler's part
(starting and ending trial jobs) is played on the store, so the test decides exactly what the panel must show.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.model.sweep import SweepState
from sweeps.api_launcher import ApiLauncher
from sweeps.controller import SweepController
from tests.browser import CHROMIUM, OUTPUT, chromium_page, jupyterlab, open_notebook, shot
from tests.scheduler_core.api.harness import Harness, running_harness
from tests.shoal_up import eventually

from .test_over_the_api import Scheduler

pytestmark = pytest.mark.browser


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()


@pytest.fixture
def lab(api: Harness, tmp_path: Path) -> Iterator[str]:
    """JupyterLab, its kernels acting as bob of team search; yields the notebook's URL."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is required for browser tests (apt-get install chromium)")
    with jupyterlab(tmp_path, "panel.ipynb", ["from sweeps import SweepPanel\npanel = SweepPanel(poll_s=0.5)\npanel"],
                    {"SHOAL_URL": api.url, "SHOAL_TOKEN": api.users["bob"]}) as url:
        yield url


def test_panel_in_jupyterlab_launches_and_follows_a_sweep(lab: str, api: Harness) -> None:
    admin = ShoalClient(api.url, api.users["root"])
    controller = SweepController(ApiLauncher(admin, job_api_url=api.url),
                                 optuna.storages.InMemoryStorage())
    bob, cluster = ShoalClient(api.url, api.users["bob"]), Scheduler(api)
    with admin, bob, chromium_page(1280, 1400, failure_shot=OUTPUT / "sweep-panel-failure.png") as page:
        open_notebook(page, lab)
        launch = page.locator(".jupyter-widgets button", has_text="Launch sweep")
        launch.wait_for(timeout=60_000)
        panel = page.locator(".jupyter-widgets.widget-vbox").first
        assert "Search space" in panel.inner_text()
        shot(page, OUTPUT / "sweep-panel-form.png")

        launch.click()
        eventually(lambda: api.store.list_sweeps(), "the panel to start a sweep", 60)
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
        eventually(lambda: image.get_attribute("src") != first_plot and image.evaluate(
            "img => img.complete && img.naturalWidth > 0"), "the plot to be redrawn", 30)
        text = panel.inner_text()
        assert "done 2" in text and "3/20" in text and "best: trial 1" in text and "0.31" in text
        assert image.is_visible()
        shot(page, OUTPUT / "sweep-panel-live.png")

        page.locator(".jupyter-widgets button", has_text="Cancel sweep").click()
        page.locator(".jupyter-widgets", has_text="CANCELLING").first.wait_for(timeout=60_000)
        controller.run_once()
        page.locator(".jupyter-widgets", has_text="CANCELLED").first.wait_for(timeout=60_000)
        shot(page, OUTPUT / "sweep-panel-cancelled.png")
    assert api.store.get_sweep(sweep.id).state is SweepState.CANCELLED
