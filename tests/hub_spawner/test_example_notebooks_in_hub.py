"""Both example notebooks, run inside a server that ``shoal up``'s JupyterHub spawned, with no ``SHOAL_URL`` and no
``SHOAL_TOKEN`` anywhere: the server starts in a directory holding copies of ``notebooks/*.ipynb``, and the SDK, the
magics and the sweep panel find the API under the hub (``services/shoal``) with the server's own hub token.

The notebooks run as a user would run them there: in the server's kernel, each executed by nbclient in a kernel of
that server (so with exactly the server's environment), on the demo cluster with real processes for every pod.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.shoal_up import Up, child_env, started

from .conftest import _chp_path
from .kernels import KernelClient
from .stack import GaveUp, Hub, free_port, wait_for

pytestmark = [pytest.mark.hub, pytest.mark.slow]

PASSWORD = "test-password"
USERS = "users:\n  bob: {teams: [fraud-ml]}\n"
# The embedded default gives servers no SHOAL_URL: only the hub's own variables lead to the API.
EXTRA = "c.ShoalSpawner.status_interval = 0.3\n"

RUN_NOTEBOOKS = r"""
import json, os, subprocess, time
import nbformat
from nbclient import NotebookClient

report = {"cwd": os.getcwd(), "files": sorted(os.listdir(".")),
          "env": {n: os.environ.get(n) for n in ("SHOAL_URL", "SHOAL_TOKEN", "JUPYTERHUB_PUBLIC_HUB_URL")},
          "notebooks": {}}
for name in ("quickstart.ipynb", "sweep.ipynb"):
    nb = nbformat.read(name, as_version=4)
    began = time.monotonic()
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": os.getcwd()}}).execute()
    report["notebooks"][name] = {
        "seconds": round(time.monotonic() - began, 1),
        "stdout": ["".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")
                   for cell in nb.cells if cell.cell_type == "code"],
    }
cli = subprocess.run(["shoal", "queue", "--state", "all", "-o", "name,state"], capture_output=True, text=True)
report["cli"] = {"rc": cli.returncode, "out": cli.stdout, "err": cli.stderr}
print(json.dumps(report))
"""


@dataclass
class DemoHub:
    hub: Hub
    up: Up
    home: Path


@pytest.fixture(scope="module")
def demo_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoHub]:
    if shutil.which("configurable-http-proxy", path=_chp_path()) is None:
        pytest.fail("configurable-http-proxy is not installed: run `make test` (it runs `npm install`)")
    tmp = tmp_path_factory.mktemp("demo-hub")
    (tmp / "users.yaml").write_text(USERS)
    token = os.urandom(24).hex()
    (tmp / "hub_extra.py").write_text(
        EXTRA + f"c.JupyterHub.services.append({{'name': 'test-admin', 'api_token': {token!r}}})\n"
        "c.JupyterHub.load_roles.append({'name': 'test-admin', 'services': ['test-admin'], 'scopes': ["
        "'admin:users', 'admin:servers', 'access:servers', 'read:servers', 'read:users', 'list:users']})\n")
    home = tmp / "home"      # the servers' ~ (their work_dir is ~/shoal-notebooks/USER) and ~/.config: empty
    home.mkdir()
    port = free_port()
    env = child_env(PATH=_chp_path(), HOME=str(home))
    env.pop("XDG_CONFIG_HOME", None)
    with started(tmp / "state", "--tick", "0.5", "--min-run-time", "0s", "--hub-url", f"http://127.0.0.1:{port}",
                 "--hub-api-port", str(free_port()), "--hub-proxy-api-port", str(free_port()),
                 "--hub-users", str(tmp / "users.yaml"), "--hub-password", PASSWORD,
                 "--hub-extra-config", str(tmp / "hub_extra.py"), env=env, cwd=tmp, hub=True) as up:
        hub = Hub(url=f"http://127.0.0.1:{port}", api=f"http://127.0.0.1:{port}/hub/api", token=token,
                  state=tmp / "state" / "hub", proc=up.proc, log=tmp / "state" / "hub" / "jupyterhub.log")

        def ready() -> bool:
            if up.proc.poll() is not None:
                raise GaveUp(f"shoal up exited ({up.proc.returncode}):\n{up.tail(100)}")
            return hub.http.get(f"{hub.api}/users").status_code == 200

        try:
            wait_for(ready, timeout=120, what="shoal up's JupyterHub", interval=0.3)
            yield DemoHub(hub=hub, up=up, home=home)
        finally:
            hub.http.close()


def test_both_example_notebooks_run_in_a_hub_spawned_server_with_no_shoal_variables(demo_hub: DemoHub) -> None:
    hub = demo_hub.hub
    hub.login("bob", PASSWORD).close()
    reply = hub.spawn("bob")
    assert reply.status_code in (201, 202), reply.text
    hub.wait_ready("bob", 180)
    kernels = KernelClient(hub.url, "bob", hub.token)
    kernel = kernels.start()

    report = json.loads(kernels.run(kernel, RUN_NOTEBOOKS, timeout=900).strip().splitlines()[-1])

    work_dir = demo_hub.home / "shoal-notebooks" / "bob"
    assert report["cwd"] == str(work_dir)
    assert {"quickstart.ipynb", "sweep.ipynb"} <= set(report["files"])
    assert report["env"]["SHOAL_URL"] is None and report["env"]["SHOAL_TOKEN"] is None
    assert report["env"]["JUPYTERHUB_PUBLIC_HUB_URL"] == f"{hub.url}/hub/"
    quickstart = "\n".join(report["notebooks"]["quickstart.ipynb"]["stdout"])
    assert "[rank 1] RANK=1 WORLD_SIZE=2" in quickstart and "widget shows: CANCELLED" in quickstart
    sweep = "\n".join(report["notebooks"]["sweep.ipynb"]["stdout"])
    assert "SUCCEEDED" in sweep and "best: trial" in sweep
    # shoal in the server (a JupyterLab terminal has the same environment) finds the API the same way.
    assert report["cli"]["rc"] == 0, report["cli"]["err"]
    assert re.search(r"^quickstart-sleeper\s+CANCELLED$", report["cli"]["out"], re.M), report["cli"]["out"]
    print(f"\nin bob's server: quickstart {report['notebooks']['quickstart.ipynb']['seconds']} s, "
          f"sweep {report['notebooks']['sweep.ipynb']['seconds']} s")
    # The copies are the user's now: a second start leaves an edited one alone.
    (work_dir / "quickstart.ipynb").write_text("{}")
    assert hub.stop_server("bob").status_code in (202, 204)
    wait_for(lambda: hub.server("bob") is None, timeout=120, what="bob's server stopped")
    assert hub.spawn("bob").status_code in (201, 202)
    hub.wait_ready("bob", 180)
    assert (work_dir / "quickstart.ipynb").read_text() == "{}"
    hub.stop_server("bob")
