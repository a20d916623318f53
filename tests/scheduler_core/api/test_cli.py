"""The ``shoal`` commands a user types, against a real API server; and the operator's commands on a real SQL store.

Each mistake exits with its documented code (2 usage, 3 auth or permission, 4 not found, 1 server or unreachable)
and one ``shoal: error:`` line, and stores nothing.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.cli.main import main
from scheduler_core.cli.state import open_state
from scheduler_core.policy.decisions import Reason
from scheduler_core.store.records import JobState
from scheduler_core.store.sql import SqlStore

from ..runtime_builders import cluster_nodes, make_spec, team_configs, whole_nodes
from .harness import T0, Harness, Shoal


def test_submit_a_yaml_file(api: Harness, shoal: Shoal, tmp_path: Path) -> None:
    job_file = tmp_path / "gang.yaml"
    job_file.write_text("name: gang\nflavour: h100\npods: 2\ngpus_per_pod: 8\ntime_limit: 2h\n"
                        "command: [python, train.py]\n")

    code, out, err = shoal("submit", str(job_file))

    assert (code, err) == (0, "")
    [job] = api.store.list_jobs()
    assert (job.spec.name, job.spec.team, job.spec.pods, job.spec.time_limit) == ("gang", "fraud-ml", 2, 7200)
    assert f"Submitted job {job.id} to fraud-ml's queue (PENDING)." in out


def test_submit_with_flags_and_a_command(api: Harness, shoal: Shoal) -> None:
    code, out, _ = shoal("submit", "--pods", "2", "--gpus", "4", "--time", "30m", "--env", "LR=0.1",
                         "--topology", "required:block", "--json", "--", "python", "train.py", "--lr", "0.1")

    assert code == 0
    [job] = api.store.list_jobs()
    assert json.loads(out)["job_id"] == job.id
    spec = job.spec
    assert (spec.name, spec.pods, spec.gpus_per_pod, spec.time_limit, spec.env) == ("train", 2, 4, 1800, {"LR": "0.1"})
    assert spec.command == ("python", "train.py", "--lr", "0.1")
    assert spec.topology is not None and spec.topology.required == "block"


def test_flags_override_the_file(api: Harness, shoal: Shoal, tmp_path: Path) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text("name: j\npods: 1\ngpus_per_pod: 8\ncommand: [python, a.py]\n")

    assert shoal("submit", str(job_file), "--pods", "2")[0] == 0

    assert api.store.list_jobs()[0].spec.pods == 2


@pytest.mark.parametrize(("content", "args", "exit_code", "words"), [
    ("name: j\n  bad: indent\n", (), 2, "job.yaml:2: not valid YAML: mapping values are not allowed here"),
    ("name: j\npods: 0\ngpus_per_pod: 8\ncommand: [x]\n", (), 2, "job.yaml: pods: Input should be greater than"),
    ("- just\n- a list\n", (), 2, "expected a mapping of job fields"),
    ("name: j\ncommand: [x]\n", ("--pods", "1250", "--gpus", "8"), 2,
     "pods: Input should be less than or equal to 1024"),
    ("name: j\ncommand: [x]\n", ("--pods", "1000", "--gpus", "8"), 2, "this job can never run here: pods:"),
    ("name: j\ncommand: [x]\n", ("--flavour", "h200"), 2, "unknown flavour 'h200'"),
    ("name: j\ncommand: [x]\n", ("--team", "search"), 3, "may not submit jobs for team 'search'"),
    ("name: j\ncommand: [x]\n", ("--team", "nosuch"), 2, "unknown team 'nosuch'"),
    ("name: j\n", (), 2, "no command"),
    ("name: j\ncommand: [x]\n", ("--env", "NOEQUALS"), 2, "expected NAME=VALUE"),
])
def test_bad_submissions_exit_with_their_code_and_one_line_and_store_nothing(
        api: Harness, shoal: Shoal, tmp_path: Path, content: str, args: tuple[str, ...], exit_code: int,
        words: str) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(content)

    code, out, err = shoal("submit", str(job_file), *args)

    assert code == exit_code and out == ""
    assert err.startswith("shoal: error: ") and err.count("\n") == 1
    assert words in err
    assert api.store.list_jobs() == [] and api.wakes == []


def test_a_missing_file_and_a_wrong_token_are_one_line_each(api: Harness, shoal: Shoal,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = shoal("submit", "nosuch.yaml")
    assert code == 2 and "cannot read nosuch.yaml" in err and err.count("\n") == 1

    monkeypatch.setenv("SHOAL_TOKEN", "shoal_wrong")
    code, _, err = shoal("queue")
    assert code == 3 and err == "shoal: error: this token is not valid (unknown or revoked)\n"


@pytest.mark.parametrize(("setup", "args", "exit_code", "words"), [
    ("", ("queue", "--bogus"), 2, "No such option '--bogus'"),
    ("", ("show",), 2, "Missing argument 'JOB_ID'"),
    ("", ("usage", "--since", "soon"), 2, "since must be an ISO-8601 date"),
    ("no token", ("queue",), 3, "no token found (set SHOAL_TOKEN"),
    ("bad token", ("show", "job_x"), 3, "this token is not valid"),
    ("other team", ("cancel", "JOB"), 3, "may not"),
    ("", ("show", "job_nope"), 4, "job_nope"),
    ("", ("logs", "job_nope"), 4, "job_nope"),
    ("", ("cancel", "job_nope"), 4, "job_nope"),
    ("unreachable", ("queue",), 1, "cannot reach the Shoal API at http://127.0.0.1:9"),
])
def test_each_kind_of_failure_has_its_exit_code(api: Harness, shoal: Shoal, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path, setup: str, args: tuple[str, ...], exit_code: int,
                                                words: str) -> None:
    job = api.submit(make_spec("j").pods(1, 8).build())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))   # no config file to fall back on
    if setup == "no token":
        monkeypatch.delenv("SHOAL_TOKEN")
    elif setup == "bad token":
        monkeypatch.setenv("SHOAL_TOKEN", "shoal_wrong")
    elif setup == "other team":
        monkeypatch.setenv("SHOAL_TOKEN", api.users["bob"])
    elif setup == "unreachable":
        monkeypatch.setenv("SHOAL_URL", "http://127.0.0.1:9")

    code, out, err = shoal(*[job.id if a == "JOB" else a for a in args])

    assert (code, out) == (exit_code, "") and err.count("\n") == 1 and err.startswith("shoal: error: ")
    assert words in err


def test_help_documents_the_exit_codes(shoal: Shoal) -> None:
    code, out, _ = shoal("--help")
    assert code == 0
    codes = out[out.index("Exit codes:"):].splitlines()[1:6]
    assert [line.split()[0] for line in codes] == ["0", "1", "2", "3", "4"]
    assert "cannot be reached" in codes[1] and "usage" in codes[2] and "permission" in codes[3]
    assert "not found" in codes[4]


def test_queue_show_cancel_checkpoint(api: Harness, shoal: Shoal) -> None:
    running = api.run(make_spec("trainer").pods(2, 8).build(), whole_nodes("h100-b0-n00", "h100-b0-n01"))
    waiting = api.submit(make_spec("waiter").pods(1, 8).build())
    api.store.set_waits([(waiting.id, Reason.QUOTA_FULL, "fraud-ml is at its quota", 1, T0 + 3600)], T0)

    code, out, _ = shoal("queue")
    assert code == 0
    header, first, second = out.splitlines()
    assert header.split()[:5] == ["JOB", "TEAM", "NAME", "USER", "STATE"]
    assert first.split()[:5] == [waiting.id, "fraud-ml", "waiter", "alice", "PENDING"]
    assert first.split()[-3:] == ["1", "2026-10-27T01:00:00Z", "(QuotaFull)"]
    assert second.split()[:5] == [running.id, "fraud-ml", "trainer", "alice", "RUNNING"]

    code, out, _ = shoal("show", running.id)
    assert code == 0
    assert "placement: 2 node(s) in h100-b0: h100-b0-n00, h100-b0-n01" in out

    code, out, _ = shoal("checkpoint", running.id)
    assert (code, out) == (0, f"Asked job {running.id} to checkpoint at its next step.\n")
    assert api.store.get(running.id).checkpoint_requested

    code, out, _ = shoal("cancel", waiting.id)
    assert (code, out) == (0, f"Cancelled job {waiting.id}.\n")
    assert api.store.get(waiting.id).state is JobState.CANCELLED

    code, out, _ = shoal("cancel", running.id)
    assert code == 0 and "gets SIGTERM, then 300s to checkpoint and exit" in out

    code, out, _ = shoal("events", running.id)
    assert [line.split()[3] for line in out.splitlines()[1:]] == ["CheckpointRequested", "CancelRequested"]


@pytest.mark.parametrize("args", [
    ("queue",), ("queue", "--team", "fraud-ml"), ("show", "JOB"), ("usage",), ("usage", "--by-day"), ("events",),
    ("nodes",), ("cancel", "JOB"), ("checkpoint", "JOB"),
])
def test_every_read_command_has_json(api: Harness, shoal: Shoal, args: tuple[str, ...]) -> None:
    job = api.run(make_spec("j").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    argv = [job.id if a == "JOB" else a for a in args]

    code, out, err = shoal(*argv, "--json")

    assert (code, err) == (0, "")
    assert isinstance(json.loads(out), dict)


def test_usage_and_nodes_tables(api: Harness, shoal: Shoal) -> None:
    api.run(make_spec("j").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.clock.advance(1800)

    code, out, _ = shoal("usage")
    assert code == 0
    assert out.splitlines()[1].split() == ["fraud-ml", "4.00", "0.00", "0.00", "4.00", "4.00"]

    code, out, _ = shoal("nodes")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["h100-b0-n00"][:6] == ["h100-b0-n00", "h100-b0", "ready", "-", "0/8", "h100"]
    assert rows["h100-b0-n03"][2:4] == ["ready", "(spare)"]


def test_a_bad_usage_date_is_one_line(shoal: Shoal) -> None:
    code, _, err = shoal("usage", "--since", "last tuesday")

    assert code == 2 and "since must be an ISO-8601 date" in err


# -- operator commands on the store ---------------------------------------------------------------------------------

@pytest.fixture
def state(tmp_path: Path) -> Iterator[tuple[Path, SqlStore]]:
    store = open_state(tmp_path, None, create=True)
    store.sync_nodes(cluster_nodes())
    store.sync_teams(team_configs())
    try:
        yield tmp_path, store
    finally:
        store.dispose()


def test_token_create_prints_a_token_that_resolves(state: tuple[Path, SqlStore],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    state_dir, store = state

    code = main(["token", "create", "--user", "ana", "--team", "search", "--state-dir", str(state_dir)])

    token = capsys.readouterr().out.strip()
    assert code == 0
    resolved = store.resolve_token(token)
    assert resolved is not None and (resolved.user, resolved.team, resolved.admin) == ("ana", "search", False)


@pytest.mark.parametrize(("args", "words"), [
    (("--user", "ana", "--team", "nosuch"), "no team 'nosuch'; teams: fraud-ml, search"),
    (("--user", "ana"), "Missing option '--team'"),
])
def test_token_create_refuses_bad_input(state: tuple[Path, SqlStore], capsys: pytest.CaptureFixture[str],
                                        args: tuple[str, ...], words: str) -> None:
    code = main(["token", "create", *args, "--state-dir", str(state[0])])

    err = capsys.readouterr().err
    assert code == 2 and words in err and err.count("\n") == 1


def test_store_commands_refuse_a_state_dir_with_no_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["token", "create", "--user", "a", "--team", "t", "--state-dir", str(tmp_path / "typo")])

    err = capsys.readouterr().err
    assert code == 2 and "no Shoal state in" in err
    assert not (tmp_path / "typo").exists()


def test_up_refuses_a_port_in_use_and_an_unknown_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["up", "--port", str(port), "--state-dir", str(tmp_path / "a")])
        err = capsys.readouterr().err
        assert code == 2 and f"port {port} on 127.0.0.1 is in use" in err and err.count("shoal: error") == 1

    code = main(["up", "--cluster", "nosuch", "--state-dir", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 2 and "no built-in cluster named 'nosuch'" in err


def test_token_create_defaults_the_user_to_the_login_name(state: tuple[Path, SqlStore],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["token", "create", "--team", "search", "--state-dir", str(state[0])])
    token = capsys.readouterr().out.strip()
    assert code == 0
    identity = state[1].resolve_token(token)
    assert identity is not None and identity.user == getpass.getuser() and identity.team == "search"
