"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by Playwright (``playwright install`` is
never run: the browser is the system's), JupyterLab serving one notebook, and screenshots in ``test-output/``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import nbformat

from tests.ports import free_port
from tests.shoal_up import ROOT, child_env, eventually

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

OUTPUT = ROOT / "test-output"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAB_TOKEN = "browser-test-token"


def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's chromium, headless; as root in a container it needs no sandbox, no GPU and no /dev/shm."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])


@contextmanager
def chromium_page(width: int, height: int, failure_shot: Path | None = None) -> Iterator[Page]:
    """A page in headless Chromium for the block; if the block fails, its screenshot goes to ``failure_shot``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            try:
                yield page
            except Exception:
                if failure_shot is not None:
                    shot(page, failure_shot)
                raise
        finally:
            browser.close()


def shot(page: Page, path: Path) -> Path:
    """A screenshot of the whole page to ``path``, named in the test's output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def jupyterlab(tmp: Path, notebook: str, cells: list[str], env: Mapping[str, str]) -> Iterator[str]:
    """JupyterLab on a free port serving ``tmp/lab/NOTEBOOK`` made of ``cells``, its kernels in this checkout's
    environment plus ``env`` (``SHOAL_URL``, ``SHOAL_TOKEN``: whom they act as), its settings under ``tmp`` and news
    fetching off (no pop-up over the cells); yields the notebook's URL."""
    work = tmp / "lab"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / notebook)
    settings = tmp / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = free_port()
    lab_env = child_env(XDG_CONFIG_HOME=str(tmp / "config"), JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
                        JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"),
                        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"), **env)
    with open(tmp / "jupyterlab.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", f"--ServerApp.token={LAB_TOKEN}", f"--ServerApp.root_dir={work}"],
            env=lab_env, stdout=log, stderr=subprocess.STDOUT)
        try:
            eventually(lambda: proc.poll() is None
                       and _answers(f"http://127.0.0.1:{port}/api/status?token={LAB_TOKEN}"),
                       "JupyterLab to answer", 120)
            yield f"http://127.0.0.1:{port}/doc/tree/{notebook}?token={LAB_TOKEN}"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def open_notebook(page: Page, url: str) -> None:
    """Open the notebook at ``url``, wait until the status bar says its kernel is idle (the notebook's execution
    indicator reads idle before the kernel has started), and run its first cell until the kernel has: the status can
    read idle a moment before the kernel's websocket is up, and a request sent then is lost."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=120_000)
    first = page.locator(".jp-Cell").first
    for _ in range(6):
        first.click()
        page.keyboard.press("Shift+Enter")
        try:
            eventually(lambda: re.search(r"\[\d+\]", first.locator(".jp-InputPrompt").inner_text()),
                       "the first cell's execution count", 20)
            return
        except AssertionError:
            continue
    raise AssertionError("the notebook's first cell never ran")
