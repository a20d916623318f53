"""The API under the hub: ``shoal up`` registers the scheduler as the hub service ``shoal`` with its URL, so the
proxy forwards ``/services/shoal/`` to it. Hub tokens (a user's, a notebook's ``JUPYTERHUB_API_TOKEN``) and the
hub's OAuth cookie open ``/services/shoal/v1/...``, the same API as the direct port's ``/v1/...``; a spawned server
learns where the hub is from ``JUPYTERHUB_PUBLIC_HUB_URL``."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import pytest

from .conftest import Stack
from .kernels import KernelClient

pytestmark = [pytest.mark.hub, pytest.mark.slow]

SHOAL_SCOPE = "access:services!service=shoal"


def _hub_token(stack: Stack, user: str, scopes: list[str]) -> str:
    stack.hub.login(user).close()
    reply = stack.hub.http.post(f"{stack.hub.api}/users/{user}/tokens", json={"scopes": scopes, "note": "test"})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["token"])


def _curl(url: str, *headers: str) -> tuple[int, dict[str, object]]:
    """``curl`` itself, as a user would run it: the status and the JSON body."""
    args = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *[a for h in headers for a in ("-H", h)], url]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    body, _, status = out.rpartition("\n")
    return int(status), json.loads(body)


def test_curl_with_a_hub_token_on_services_shoal_answers_as_the_hub_user(stack: Stack) -> None:
    token = _hub_token(stack, "carol", [SHOAL_SCOPE])
    proxy = f"{stack.hub.url}/services/shoal/v1/whoami"
    for scheme in ("token", "Bearer"):
        status, body = _curl(proxy, f"Authorization: {scheme} {token}")
        assert (status, body) == (200, {"user": "carol", "team": "search", "admin": False})
    # The direct port answers the same token the same way: one API, two doors.
    status, body = _curl(f"{stack.shoal_url}/v1/whoami", f"Authorization: token {token}")
    assert (status, body["user"]) == (200, "carol")
    # The same endpoints under the prefix: a job submitted there is found at its Location, through the proxy.
    reply = httpx.post(f"{stack.hub.url}/services/shoal/v1/jobs", headers={"Authorization": f"token {token}"},
                       json={"name": "under-hub", "team": "search", "flavour": ["h100-mig-3g"], "pods": 1,
                             "gpus_per_pod": 1, "command": ["true"], "time_limit": "1m"}, timeout=30)
    assert reply.status_code == 202, reply.text
    assert reply.headers["Location"] == f"/services/shoal/v1/jobs/{reply.json()['job_id']}"
    job = httpx.get(f"{stack.hub.url}{reply.headers['Location']}", headers={"Authorization": f"token {token}"},
                    timeout=30)
    assert (job.status_code, job.json()["team"]) == (200, "search")


def test_a_hub_token_without_the_services_scope_or_none_at_all_is_refused(stack: Stack) -> None:
    other = _hub_token(stack, "carol", ["read:users:name!user"])
    status, body = _curl(f"{stack.hub.url}/services/shoal/v1/whoami", f"Authorization: token {other}")
    assert (status, body["error"]["code"]) == (401, "unauthorized")  # type: ignore[index]
    status, body = _curl(f"{stack.hub.url}/services/shoal/v1/whoami")
    assert status == 401


def test_the_hub_oauth_cookie_logs_a_browser_in_and_opens_the_apis_reads_but_not_its_writes(stack: Stack) -> None:
    browser = stack.hub.login("bob")
    try:
        page = browser.get("/services/shoal/", follow_redirects=True)
        assert page.status_code == 200 and str(page.url).endswith("/services/shoal/"), (page.status_code, page.url)
        assert "bob · fraud-ml" in page.text
        assert "service-shoal" in browser.cookies  # the OAuth token, signed, on the service's path
        whoami = browser.get("/services/shoal/v1/whoami")
        assert (whoami.status_code, whoami.json()["user"]) == (200, "bob")
        # A write carried by the cookie alone could come from any site the user visits: it needs a token.
        submit = browser.post("/services/shoal/v1/jobs", json={"name": "forged", "team": "fraud-ml"})
        assert submit.status_code == 401
    finally:
        browser.close()


def test_a_spawned_server_is_told_the_public_hub_url_and_its_token_opens_the_api_through_the_proxy(
        stack: Stack) -> None:
    stack.hub.login("erin").close()
    assert stack.hub.spawn("erin", profile="mig-3g").status_code in (201, 202)
    try:
        stack.hub.wait_ready("erin", timeout=90)
        kernels = KernelClient(stack.hub.url, "erin", stack.hub.token)
        kernel = kernels.start()
        out = kernels.run(kernel, (
            "import os, json, urllib.request\n"
            "hub = os.environ['JUPYTERHUB_PUBLIC_HUB_URL']\n"
            "api = hub.rstrip('/').rsplit('/', 1)[0] + '/services/shoal/'\n"
            "req = urllib.request.Request(api + 'v1/whoami',"
            " headers={'Authorization': 'token ' + os.environ['JUPYTERHUB_API_TOKEN']})\n"
            "print(json.dumps([hub, os.environ['JUPYTERHUB_PUBLIC_URL'],"
            " json.load(urllib.request.urlopen(req))]))\n"))
        hub_url, server_url, whoami = json.loads(out)
        assert hub_url == f"{stack.hub.url}/hub/"
        assert server_url == f"{stack.hub.url}/user/erin/"
        assert (whoami["user"], whoami["team"]) == ("erin", "fraud-ml")
    finally:
        stack.hub.stop_server("erin")


def test_the_dashboards_cancel_form_needs_the_pages_xsrf_token_with_the_cookie(stack: Stack) -> None:
    token = _hub_token(stack, "bob", [SHOAL_SCOPE])
    api = httpx.Client(base_url=f"{stack.hub.url}/services/shoal", headers={"Authorization": f"token {token}"},
                       timeout=30)
    reply = api.post("/v1/jobs", json={"name": "to-cancel", "team": "fraud-ml", "flavour": ["h100-mig-3g"],
                                       "pods": 1, "gpus_per_pod": 1, "command": ["sleep", "120"], "time_limit": "5m"})
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["job_id"]
    browser = stack.hub.login("bob")
    try:
        page = browser.get("/services/shoal/", follow_redirects=True)
        assert f'action="/services/shoal/jobs/{job_id}/cancel"' in page.text
        forged = browser.post(f"/services/shoal/jobs/{job_id}/cancel", data={"next": "/services/shoal/"})
        assert forged.status_code == 403
        assert api.get(f"/v1/jobs/{job_id}").json()["cancel_requested"] is False
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert xsrf is not None
        real = browser.post(f"/services/shoal/jobs/{job_id}/cancel",
                            data={"_xsrf": xsrf.group(1), "next": "/services/shoal/"})
        assert (real.status_code, real.headers["Location"]) == (303, "/services/shoal/")
        assert api.get(f"/v1/jobs/{job_id}").json()["cancel_requested"] is True
    finally:
        browser.close()
        api.close()
