"""How long a new user waits: ``shoal up`` on its embedded defaults, then in headless Chromium log in, keep the
default profile (1g.10gb), press Start, and time until the hub hands over to the server (``/user/NAME/lab``) and
until JupyterLab has drawn itself. Not a test (tests never assert timings): the figures go to docs/BENCHMARKS.md.

    PATH=$PWD/node_modules/.bin:$PATH PYTHONPATH=$PWD .venv/bin/python tests/hub_spawner/measure_spawn.py --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scheduler_core.bench.child import shoal_up  # noqa: E402
from tests.browser import launch_chromium  # noqa: E402
from tests.hub_spawner.stack import free_port, wait_for  # noqa: E402

PASSWORD = "measure"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="shoal-measure-"))
    hub_url = f"http://127.0.0.1:{free_port()}"
    handover: list[float] = []
    drawn: list[float] = []
    printed: list[str] = []
    try:
        with shoal_up(tmp / "state", "--hub-url", hub_url, "--hub-api-port", str(free_port()), "--hub-proxy-api-port",
                      str(free_port()), "--hub-password", PASSWORD, hub=True) as up:
            printed = up.output
            wait_for(lambda: httpx.get(f"{hub_url}/hub/login", timeout=2).status_code == 200, timeout=120,
                     what="shoal up", interval=0.3)
            users = ["alice", "bob", "carol", "dave", "erin"][: args.runs]
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                for user in users:
                    page = browser.new_context().new_page()
                    page.goto(f"{hub_url}/hub/login")
                    page.fill("#username_input", user)
                    page.fill("#password_input", PASSWORD)
                    page.click("#login_submit")
                    page.wait_for_selector("#shoal-profiles")
                    started = time.monotonic()
                    page.click("input[type=submit], button[type=submit]")
                    page.wait_for_url(f"**/user/{user}/**", timeout=120_000)
                    handover.append(time.monotonic() - started)
                    page.wait_for_selector(".jp-LabShell", timeout=120_000)
                    drawn.append(time.monotonic() - started)
                    print(f"{user}: server handed over after {handover[-1]:.1f} s, JupyterLab drawn after "
                          f"{drawn[-1]:.1f} s")
                    page.context.close()
                browser.close()
    finally:
        (tmp / "up.log").write_text("".join(printed))
    if drawn:
        print(f"median: handed over {statistics.median(handover):.1f} s, JupyterLab drawn "
              f"{statistics.median(drawn):.1f} s (runs: {len(drawn)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
