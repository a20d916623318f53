"""A user in headless Chromium (Debian's ``chromium``, driven by Playwright): log in, pick a profile, watch the
spawn page wait for a slice, land in JupyterLab. A screenshot of each step goes to ``test-output/browser/``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, OUTPUT, chromium_page, shot

from .conftest import PASSWORD, Stack
from .stack import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.hub, pytest.mark.slow]

SHOTS = OUTPUT / "browser"


@pytest.fixture
def page() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed: run `make test` (tests/services/system-deps.sh)")
    with chromium_page(1280, 800) as page:
        yield page


def _shot(page: object, name: str) -> Path:
    return shot(page, SHOTS / f"{name}.png")  # type: ignore[arg-type]


def _fill_pool(stack: Stack, *users: str) -> None:
    for user in users:
        stack.hub.login(user).close()
        assert stack.hub.spawn(user, profile="mig-3g").status_code in (201, 202)
    for user in users:
        stack.hub.wait_ready(user, timeout=90)


def test_log_in_pick_a_profile_wait_for_a_slice_and_land_in_jupyterlab(stack: Stack, page: object) -> None:
    p = page  # playwright's Page
    _fill_pool(stack, "alice", "erin")

    p.goto(f"{stack.hub.url}/hub/login")  # type: ignore[attr-defined]
    p.fill("#username_input", "dave")  # type: ignore[attr-defined]
    p.fill("#password_input", PASSWORD)  # type: ignore[attr-defined]
    _shot(p, "1-login")
    p.click("#login_submit")  # type: ignore[attr-defined]

    p.goto(f"{stack.hub.url}/hub/spawn")  # type: ignore[attr-defined]
    p.wait_for_selector("#shoal-profiles")  # type: ignore[attr-defined]
    p.check("#profile-mig-3g")  # type: ignore[attr-defined]
    _shot(p, "2-profile")
    p.click("input[type=submit], button[type=submit]")  # type: ignore[attr-defined]

    # The first message may come before the scheduler's pass has placed the job in its queue: wait for the one
    # that says where it is, as a user watching the page would.
    message = p.wait_for_selector(  # type: ignore[attr-defined]
        "#progress-message:has-text(\"position 1 in team search's queue\")", timeout=60_000)
    text = message.inner_text()
    assert text.startswith("Waiting for a GPU slice"), text
    _shot(p, "3-waiting")

    assert stack.hub.stop_server("erin").status_code in (202, 204)  # a slice frees up
    p.wait_for_url("**/user/dave/lab**", timeout=90_000)  # type: ignore[attr-defined]
    p.wait_for_selector(".jp-LabShell", timeout=90_000)  # type: ignore[attr-defined]
    _shot(p, "4-jupyterlab")

    # A second start with a free slice: how long from pressing Start to JupyterLab, as a new user would feel it.
    assert stack.hub.stop_server("dave").status_code in (202, 204)
    wait_for(lambda: stack.hub.server("dave") is None, timeout=60, what="dave's server stopped")
    p.goto(f"{stack.hub.url}/hub/spawn")  # type: ignore[attr-defined]
    p.wait_for_selector("#shoal-profiles")  # type: ignore[attr-defined]
    started = time.monotonic()
    p.click("input[type=submit], button[type=submit]")  # type: ignore[attr-defined]
    p.wait_for_selector(".jp-LabShell", timeout=90_000)  # type: ignore[attr-defined]
    seconds = time.monotonic() - started
    _shot(p, "5-jupyterlab-again")
    print(f"spawn → JupyterLab on a free slice: {seconds:.1f} s")
    (SHOTS / "spawn-seconds.txt").write_text(f"{seconds:.2f}\n")

    for user in ("alice", "dave"):
        stack.hub.stop_server(user)
    wait_for(lambda: stack.hub.server("alice") is None and stack.hub.server("dave") is None, timeout=60,
             what="servers stopped")
