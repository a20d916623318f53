"""The dashboard at ``/services/shoal/`` in headless Chromium (Debian's, through Playwright), logged in through the
hub as users of two teams and an admin. What each page shows is checked against the API's own answers: the waiting
job with the reason the API gives, no other team's job (a 404 when asked for), a cancel that cancels, a log line
appearing live, and the cluster's free and largest-shape figures equal to ``/metrics``. A screenshot of each page
goes to ``test-output/dashboard/``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser import CHROMIUM, OUTPUT, shot

from .conftest import PASSWORD, USERS, Stack, shoal_stack
from .stack import ROOT, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.hub, pytest.mark.slow]

SHOTS = OUTPUT / "dashboard"
FLAVOUR = "h100-mig-3g"

#: Two whole-GPU nodes beside the MIG node, so that one GPU in use makes the free GPUs (3) differ from the largest
#: free shape (2): the figures the cluster page and ``/metrics`` must agree on.
CLUSTER = """\
name: dashtest
blocks:
  - name: gpu-a
    nodes:
      - {count: 2, gpu: h100, gpus_per_node: 2, cpus_per_node: 16, memory_gb_per_node: 64}
  - name: mig-a
    small_jobs: true
    nodes:
      - {count: 1, gpu: h100, gpus_per_node: 1, mig: 3g.40gb, cpus_per_node: 16, memory_gb_per_node: 64}
"""
TEAMS = """\
teams:
  - name: fraud-ml
    cohort: shared
    quotas: {h100: {nominal: 2}, h100-mig-3g: {nominal: 2}}
  - name: search
    cohort: shared
    quotas: {h100: {nominal: 2}, h100-mig-3g: {nominal: 2}}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """This module's own ``shoal up`` and hub, on the cluster above (the session's has one MIG node only)."""
    with shoal_stack(tmp_path_factory.mktemp("dashboard"), ROOT / "test-output" / "dashboard-stack",
                     cluster=CLUSTER, teams=TEAMS, users=USERS) as running:
        yield running


class Api:
    """The direct port, as one user with a Shoal token."""

    def __init__(self, stack: Stack, user: str, team: str) -> None:
        self.url = stack.shoal_url
        self.http = httpx.Client(base_url=stack.shoal_url, timeout=30,
                                 headers={"Authorization": f"Bearer {stack.up.token(user, team)}"})

    def submit(self, name: str, team: str, command: list[str], flavour: str = FLAVOUR) -> str:
        reply = self.http.post("/v1/jobs", json={"name": name, "team": team, "flavour": [flavour], "pods": 1,
                                                 "gpus_per_pod": 1, "command": command, "time_limit": "10m"})
        assert reply.status_code == 202, reply.text
        return str(reply.json()["job_id"])

    def job(self, job_id: str) -> dict[str, Any]:
        reply = self.http.get(f"/v1/jobs/{job_id}")
        reply.raise_for_status()
        return dict(reply.json())


def _holder(flag: Path) -> list[str]:
    """A job that prints, waits for ``flag`` to exist, prints a marker, then holds its slice."""
    code = ("import os, sys, time\n"
            "print('holder ready', flush=True)\n"
            f"while not os.path.exists({str(flag)!r}): time.sleep(0.2)\n"
            "print('marker: the flag is up', flush=True)\n"
            "time.sleep(600)\n")
    return ["python", "-c", code]


def _metric(text: str, name: str, flavour: str) -> int:
    found = re.search(rf'^{name}{{flavour="{flavour}"}} ([0-9.e+]+)$', text, re.M)
    assert found, f"{name} for {flavour} not in /metrics"
    return int(float(found.group(1)))


def _log_in(page: Any, stack: Stack, user: str) -> None:
    page.goto(f"{stack.hub.url}/hub/login?next=%2Fservices%2Fshoal%2F")
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    page.wait_for_url("**/services/shoal/", timeout=60_000)  # through the hub's OAuth, no second login
    page.wait_for_selector("#me")


@pytest.fixture
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed: run `make test` (tests/services/system-deps.sh)")
    from playwright.sync_api import sync_playwright

    from tests.browser import launch_chromium

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


def _page(browser: Any) -> Any:
    return browser.new_context(viewport={"width": 1000, "height": 760}).new_page()


def test_the_dashboard_shows_each_team_its_own_queue_logs_cluster_and_sweeps(stack: Stack, browser: Any,
                                                                              tmp_path: Path) -> None:
    carol, bob = Api(stack, "carol", "search"), Api(stack, "bob", "fraud-ml")
    admin = httpx.Client(base_url=stack.shoal_url, timeout=30,
                         headers={"Authorization": f"Bearer {stack.shoal_admin_token}"})

    # A small sweep first, while the pool is free: 3 trials to completion.
    sweep = carol.http.post("/v1/sweeps", json={
        "name": "dash-sweep", "team": "search", "n_trials": 3, "parallelism": 2,
        "objective": {"metric": "loss", "direction": "minimize"}, "sampler": {"name": "random", "seed": 3},
        "pruner": {"name": "none"}, "search_space": {"x": {"type": "int", "low": 0, "high": 9}},
        "trial": {"flavour": FLAVOUR, "command": ["python", "-m", "tests.sweeps.objective", "--steps", "2",
                                                  "--step-seconds", "0.05"], "time_limit": "5m"}})
    assert sweep.status_code in (201, 202), sweep.text
    sweep_id = sweep.json()["sweep_id"]
    done = wait_for(lambda: (s := carol.http.get(f"/v1/sweeps/{sweep_id}").json())["state"] == "SUCCEEDED" and s,
                    timeout=240, what="the 3-trial sweep to succeed", interval=0.5)

    # Carol's team fills the pool; one more of hers and one of bob's wait.
    flag = tmp_path / "flag"
    holders = [carol.submit(f"holder-{i}", "search", _holder(flag)) for i in range(2)]
    for job_id in holders:
        wait_for(lambda: carol.job(job_id)["state"] == "RUNNING", timeout=90, what=f"{job_id} running")
    fragment = carol.submit("one-gpu", "search", ["sleep", "600"], flavour="h100")
    wait_for(lambda: carol.job(fragment)["state"] == "RUNNING", timeout=90, what="the one-GPU job running")
    waiter = carol.submit("carol-waits", "search", ["true"])
    bobs = bob.submit("bob-waits", "fraud-ml", ["true"])
    waiting = wait_for(lambda: (j := carol.job(waiter))["reason"] and j, timeout=60, what="a reason for the waiter")
    wait_for(lambda: bob.job(bobs)["reason"], timeout=60, what="a reason for bob's job")

    page = _page(browser)
    try:
        _log_in(page, stack, "carol")
        # -- my team --------------------------------------------------------------------------------------------
        assert page.inner_text("#me") == "carol · search"
        row = page.locator(f"#waiting tr[data-job='{waiter}']")
        waiting = carol.job(waiter)
        assert waiting["reason"] in row.locator(".reason").inner_text()
        assert row.locator(".position").inner_text() == str(waiting["position"])
        assert page.locator("#running tr[data-job]").count() == 3
        content = page.content()
        assert bobs not in content and "bob-waits" not in content
        assert page.locator("#quota tr[data-flavour='h100-mig-3g'] td").nth(2).inner_text() == "2"  # used
        assert page.locator("svg rect[fill]").count() > 0  # the usage plot has bars: the sweep and the holders
        shot(page, SHOTS / "1-team.png")

        # Another team's job, or team, is a 404, not a hidden row.
        assert page.goto(f"{stack.hub.url}/services/shoal/jobs/{bobs}").status == 404
        assert page.goto(f"{stack.hub.url}/services/shoal/?team=fraud-ml").status == 404

        # -- a job: events, and its log, live ---------------------------------------------------------------------
        page.goto(f"{stack.hub.url}/services/shoal/jobs/{holders[0]}")
        page.wait_for_selector("#log-0:has-text('holder ready')", timeout=30_000)
        assert "marker" not in page.inner_text("#log-0")
        assert "admit" in page.inner_text("#events")
        flag.write_text("up")
        page.wait_for_selector("#log-0:has-text('marker: the flag is up')", timeout=30_000)  # no reload
        shot(page, SHOTS / "2-job.png")

        # -- the cluster: the figures /metrics serves ------------------------------------------------------------
        page.goto(f"{stack.hub.url}/services/shoal/cluster")
        metrics = httpx.get(f"{stack.shoal_url}/metrics", timeout=30).text
        shown = {}
        for flavour in ("h100", FLAVOUR):
            row = page.locator(f"#free tr[data-flavour='{flavour}']")
            shown[flavour] = (int(row.locator(".free").inner_text()), int(row.locator(".largest").inner_text()))
            assert shown[flavour] == (_metric(metrics, "shoal_units_free", flavour),
                                      _metric(metrics, "shoal_largest_free_shape_units", flavour)), flavour
        assert shown == {"h100": (3, 2), FLAVOUR: (0, 0)}   # one GPU held on a 2-GPU node: 3 free, at most 2 at once
        assert page.locator(".block[data-block='gpu-a'] .node.ready").count() == 2
        assert page.locator("#mig .slot.held").count() == 2 and page.locator("#mig .slot.open").count() == 0
        shot(page, SHOTS / "3-cluster.png")

        # -- sweeps ----------------------------------------------------------------------------------------------
        page.goto(f"{stack.hub.url}/services/shoal/sweeps")
        sweep_row = page.locator(f"#sweeps tr[data-sweep='{sweep_id}']")
        assert sweep_row.locator(".progress").inner_text().startswith("3 / 3")
        assert done["study_name"] in sweep_row.inner_text()
        shot(page, SHOTS / "4-sweeps.png")
        page.goto(f"{stack.hub.url}/services/shoal/sweeps/{sweep_id}")
        assert f"trial {done['best']['number']}:" in page.inner_text("#best")
        assert page.locator("#objective-plot circle").count() == 3
        shot(page, SHOTS / "5-sweep.png")

        # -- text from users is shown as text: a cancel reason with markup in it ---------------------------------
        hostile = "<script>window.pwned = 1</script><b>bold</b>"
        assert carol.http.post(f"/v1/jobs/{fragment}:cancel", json={"reason": hostile}).status_code == 202
        page.goto(f"{stack.hub.url}/services/shoal/jobs/{fragment}")
        assert hostile in page.inner_text("#events")
        assert page.evaluate("window.pwned") is None and page.locator("#events b").count() == 0

        # -- a cancel that cancels -------------------------------------------------------------------------------
        page.goto(f"{stack.hub.url}/services/shoal/")
        page.locator(f"#waiting tr[data-job='{waiter}'] button.cancel").click()
        page.wait_for_load_state()
        wait_for(lambda: carol.job(waiter)["state"] == "CANCELLED", timeout=30, what="the waiter cancelled")
        page.goto(f"{stack.hub.url}/services/shoal/")
        assert page.locator(f"#waiting tr[data-job='{waiter}']").count() == 0
    finally:
        page.context.close()

    # Bob, of the other team, sees his job and none of carol's.
    page = _page(browser)
    try:
        _log_in(page, stack, "bob")
        assert page.inner_text("#me") == "bob · fraud-ml"
        row = page.locator(f"#waiting tr[data-job='{bobs}']")
        assert bob.job(bobs)["reason"] in row.locator(".reason").inner_text()
        content = page.content()
        assert all(job_id not in content for job_id in [*holders, fragment, waiter])
        assert page.goto(f"{stack.hub.url}/services/shoal/jobs/{holders[0]}").status == 404
        shot(page, SHOTS / "6-team-bob.png")
    finally:
        page.context.close()

    # An admin sees every team.
    page = _page(browser)
    try:
        _log_in(page, stack, "frank")
        assert page.inner_text("#me") == "frank · search · admin"
        page.goto(f"{stack.hub.url}/services/shoal/?team=fraud-ml")
        assert page.locator(f"#waiting tr[data-job='{bobs}']").count() == 1
    finally:
        page.context.close()
        for job_id in [*holders, fragment, bobs]:
            admin.post(f"/v1/jobs/{job_id}:cancel")
