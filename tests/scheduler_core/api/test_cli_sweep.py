"""``shoal sweep submit | list | show | cancel`` against a real server: files validated before sending, one-line
errors, tables, ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler_core.cli.main import main

from .harness import Harness

SWEEP = {
    "name": "mlp", "n_trials": 5, "parallelism": 2,
    "search_space": {"lr": {"type": "float", "low": 0.01, "high": 1.0, "log": True},
                     "act": {"type": "categorical", "choices": ["relu", "tanh"]}},
    "objective": {"metric": "val_loss"},
    "trial": {"flavour": "h100-mig-1g", "command": ["python", "t.py"], "time_limit": "10m"},
}


@pytest.fixture
def as_bob(api: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Harness:
    monkeypatch.setenv("SHOAL_URL", api.url)
    monkeypatch.setenv("SHOAL_TOKEN", api.users["bob"])
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return api


def write(tmp_path: Path, data: object, name: str = "sweep.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_submit_list_show_cancel(as_bob: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "submit", write(tmp_path, SWEEP), "--trials", "4"]) == 0
    out = capsys.readouterr().out
    [sweep] = as_bob.store.list_sweeps()
    assert f"Started sweep {sweep.id}: 4 trials of mlp, at most 2 at once, for team search." in out
    assert sweep.spec.team == "search" and sweep.user == "bob" and sweep.spec.n_trials == 4

    job = as_bob.client("root").add_trial(sweep.id, 0, {"lr": 0.1, "act": "relu"})
    as_bob.client("bob").report(job.job_id, 0.25, final=True)

    assert main(["sweep", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["SWEEP", "NAME", "TEAM", "USER", "STATE", "DONE", "PEND", "RUN", "COMPLETE",
                                "PRUNED", "FAILED", "BEST"]
    assert table[1].split() == [sweep.id, "mlp", "search", "bob", "RUNNING", "1/4", "0", "0", "1", "0", "0",
                                "#0", "0.25"]

    assert main(["sweep", "show", sweep.id]) == 0
    shown = capsys.readouterr().out
    assert "best: trial 0: val_loss = 0.25" in shown
    assert "trials: 3 not started, 0 pending, 0 running, 1 complete, 0 pruned, 0 failed" in shown
    assert f'0      COMPLETE  {job.job_id}' in shown

    assert main(["sweep", "show", sweep.id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sweep_id"] == sweep.id and data["best"]["value"] == 0.25

    assert main(["sweep", "list", "--json"]) == 0
    assert [s["sweep_id"] for s in json.loads(capsys.readouterr().out)["sweeps"]] == [sweep.id]

    assert main(["sweep", "cancel", sweep.id]) == 0
    assert "Cancelling sweep" in capsys.readouterr().out
    assert as_bob.store.get_sweep(sweep.id).state.value == "CANCELLING"


@pytest.mark.parametrize(("data", "words"), [
    ({**SWEEP, "n_trials": 0}, "sweep.yaml: n_trials: Input should be greater than or equal to 1"),
    ({**SWEEP, "trial": {"flavour": "h100-mig-1g", "command": ["x"], "time_limit": "99d"}},
     "sweep.yaml: trial.time_limit: time_limit must be between 1m and 60d"),
    ({**SWEEP, "trial": {"flavour": "a100", "command": ["x"]}},
     "this sweep's trials can never run here: trial.flavour: this cluster has no 'a100'"),
    ([1, 2], "expected a mapping"),
])
def test_bad_files_exit_2_with_one_line(as_bob: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        data: object, words: str) -> None:
    assert main(["sweep", "submit", write(tmp_path, data)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shoal: error: ") and words in err and err.count("\n") == 1
    assert as_bob.store.list_sweeps() == []


def test_unknown_sweep_exits_4(as_bob: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "show", "sweep_nope"]) == 4
    assert "no sweep 'sweep_nope'" in capsys.readouterr().err
