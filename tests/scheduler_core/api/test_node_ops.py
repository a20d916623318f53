"""``POST /v1/nodes/{node}:fail|drain|repair`` and ``shoal nodes fail|drain|repair``: admins only, through the
API from any directory, and every action an event that names who acted."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_core.cli.main import main
from scheduler_core.model import Health

from .harness import Harness

NODE = "h100-b0-n01"
ACTIONS = ("fail", "drain", "repair")
pytestmark = pytest.mark.parametrize("api", ["memory", "sqlite"], indirect=True)


def health(api: Harness, node: str = NODE) -> Health:
    return next(r.health for r in api.store.list_nodes() if r.node.name == node)


def shoal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: Harness, who: str,
          *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("SHOAL_URL", api.url)
    monkeypatch.setenv("SHOAL_TOKEN", api.users[who])
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("action", ACTIONS)
def test_a_non_admin_token_gets_403_over_http_and_nothing_changes(api: Harness, action: str) -> None:
    api.store.set_node_health(NODE, Health.REPAIR, "broken", api.clock())   # so that repair would change it

    response = api.http("POST", f"/v1/nodes/{NODE}:{action}", who="alice", json={"reason": "mine now"})

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden" and "admin" in response.json()["error"]["message"]
    assert health(api) is Health.REPAIR and api.store.events() == []


@pytest.mark.parametrize("action", ACTIONS)
def test_a_non_admin_token_is_refused_by_the_cli_with_one_line_and_the_auth_exit_code(
        api: Harness, action: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = shoal(monkeypatch, capsys, api, "bob", "nodes", action, NODE)

    assert (code, out) == (3, "")   # ExitCode.AUTH
    assert err.startswith("shoal: error:") and "admin token" in err and len(err.strip().splitlines()) == 1
    assert health(api) is Health.READY and api.store.events() == []


@pytest.mark.parametrize("action", ACTIONS)
def test_without_a_token_401(api: Harness, action: str) -> None:
    assert api.http("POST", f"/v1/nodes/{NODE}:{action}", who=None).status_code == 401


def test_an_admin_fails_drains_and_repairs_from_another_directory_and_the_events_name_them(
        api: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)   # no .shoal/ here: the CLI needs only SHOAL_URL and SHOAL_TOKEN

    code, out, _ = shoal(monkeypatch, capsys, api, "root", "nodes", "fail", NODE, "--reason", "PSU smoke")
    assert code == 0 and f"Node {NODE} is now repair" in out
    assert shoal(monkeypatch, capsys, api, "root", "nodes", "drain", "h100-b0-n02")[0] == 0
    code, out, _ = shoal(monkeypatch, capsys, api, "root", "nodes", "repair", NODE)
    assert code == 0 and f"Node {NODE} is now burnin" in out and "burn-in" in out

    assert (health(api), health(api, "h100-b0-n02")) == (Health.BURNIN, Health.DRAINING)
    events = [(e.reason, e.node, e.data) for e in api.store.events()]
    assert events == [
        ("NodeFailed", NODE, {"health": "repair", "was": "ready", "by": "root"}),
        ("Drained", "h100-b0-n02", {"health": "draining", "was": "ready", "by": "root"}),
        ("Repaired", NODE, {"health": "burnin", "was": "repair", "by": "root"}),
    ]
    assert "PSU smoke (by root)" in api.store.events()[0].message
    assert api.wakes   # the controller is woken to act on it

    code, out, _ = shoal(monkeypatch, capsys, api, "root", "nodes", "events", NODE)
    assert code == 0 and "ready → repair" in out and "repair → burnin" in out and "Repaired" in out
    code, out, _ = shoal(monkeypatch, capsys, api, "root", "nodes")
    assert code == 0 and "burnin" in out and "SINCE" in out


def test_node_actions_answer_with_the_node_and_refuse_what_makes_no_sense(api: Harness) -> None:
    answer = api.http("POST", f"/v1/nodes/{NODE}:drain", who="root", json={"reason": "firmware"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["name"], body["health"], body["health_reason"]) == (NODE, "draining", "firmware (by root)")
    assert body["health_since"] is not None

    assert api.http("POST", "/v1/nodes/h100-zz-n99:fail", who="root").status_code == 404
    too_long = api.http("POST", f"/v1/nodes/{NODE}:fail", who="root", json={"reason": "x" * 501})
    assert too_long.status_code == 400 and "reason" in too_long.json()["error"]["fields"]
    assert api.http("POST", f"/v1/nodes/{NODE}:reboot", who="root").status_code == 404
    assert api.http("POST", f"/v1/nodes/{NODE}:fail", who="root").status_code == 200
    conflict = api.http("POST", f"/v1/nodes/{NODE}:drain", who="root")
    assert conflict.status_code == 409 and "repair it first" in conflict.json()["error"]["message"]
    # Idempotent: failing a failed node changes nothing more.
    assert api.http("POST", f"/v1/nodes/{NODE}:fail", who="root").json()["health"] == "repair"
    assert [e.reason for e in api.store.events()] == ["Drained", "NodeFailed"]


def test_metrics_count_every_transition_by_from_to_and_reason_and_nodes_by_health(api: Harness) -> None:
    for action in ("fail", "repair"):
        assert api.http("POST", f"/v1/nodes/{NODE}:{action}", who="root").status_code == 200

    text = api.http("GET", "/metrics", who=None).text

    def metric(name: str, **labels: str) -> float:
        prefix = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "} "
        [line] = [line for line in text.splitlines() if line.startswith(prefix)]
        return float(line.split()[-1])

    assert metric("shoal_node_transitions_total", **{"from": "ready", "to": "repair", "reason": "NodeFailed"}) == 1
    assert metric("shoal_node_transitions_total", **{"from": "repair", "to": "burnin", "reason": "Repaired"}) == 1
    assert metric("shoal_nodes", health="burnin") == 1 and metric("shoal_nodes", health="repair") == 0


@pytest.mark.parametrize("action", ACTIONS)
def test_an_unknown_node_is_404_over_http_and_the_not_found_exit_code_in_the_cli(
        api: Harness, action: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    response = api.http("POST", f"/v1/nodes/no-such-node:{action}", who="root")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"

    code, out, err = shoal(monkeypatch, capsys, api, "root", "nodes", action, "no-such-node")

    assert (code, out) == (4, "")   # ExitCode.NOT_FOUND
    assert "no node 'no-such-node'" in err and len(err.strip().splitlines()) == 1
    assert api.store.events() == []
