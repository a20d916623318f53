"""The trial helper outside the cluster: it imports nothing heavy, runs a script on a laptop unchanged, and
refuses values Optuna could not store."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scheduler_core.model import sweep as model
from sweeps import trial


def test_env_names_match_the_model() -> None:
    assert trial.ENV_TRIAL_PARAMS == model.ENV_TRIAL_PARAMS
    assert trial.ENV_TRIAL_NUMBER == model.ENV_TRIAL_NUMBER
    assert trial.ENV_API_URL == model.ENV_API_URL
    assert trial.ENV_API_TOKEN == model.ENV_API_TOKEN


def test_import_is_light() -> None:
    code = ("import sys; from sweeps import trial; "
            "heavy = {'optuna', 'ipywidgets', 'pydantic', 'httpx', 'numpy', 'scheduler_core'} & set(sys.modules); "
            "print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_outside_a_sweep(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("SHOAL_TRIAL_PARAMS", "SHOAL_TRIAL_NUMBER", "SHOAL_API_URL", "SHOAL_API_TOKEN", "SHOAL_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    assert not trial.in_trial() and trial.number() is None
    with pytest.raises(trial.TrialError, match="not running as a sweep trial"):
        trial.params()
    assert trial.params(default={"lr": 0.1}) == {"lr": 0.1}
    assert trial.report(0, 1.5) is False
    assert trial.finish(1.0) is True
    assert "step 0: 1.5" in capsys.readouterr().err


def test_inside_a_sweep_params_come_from_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_TRIAL_PARAMS", json.dumps({"lr": 0.01, "act": "relu"}))
    monkeypatch.setenv("SHOAL_TRIAL_NUMBER", "12")
    assert trial.in_trial() and trial.number() == 12
    assert trial.params() == {"lr": 0.01, "act": "relu"}
    monkeypatch.setenv("SHOAL_TRIAL_PARAMS", "[1, 2]")
    with pytest.raises(trial.TrialError, match="not a JSON object"):
        trial.params()


@pytest.mark.parametrize(("step", "value", "words"), [
    (0, float("nan"), "finite"), (0, float("inf"), "finite"), (-1, 1.0, "whole number"), (1.5, 1.0, "whole number"),
])
def test_bad_reports_are_refused(step: float, value: float, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        trial.report(step, value)  # type: ignore[arg-type]


def test_a_diverged_final_value_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        trial.finish(float("nan"))


def _closed_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_scheduler(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Progress reports are advisory: training goes on; the final value is not, so finish raises in the end."""
    monkeypatch.setenv("SHOAL_API_URL", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("SHOAL_API_TOKEN", "t")
    monkeypatch.setenv("SHOAL_JOB_ID", "job_1")
    monkeypatch.setenv("SHOAL_TRIAL_TIMEOUT_S", "0.3")
    assert trial.report(3, 0.5) is False
    assert "could not report step 3" in capsys.readouterr().err
    with pytest.raises(trial.TrialError, match="did not answer"):
        trial.finish(0.5)
