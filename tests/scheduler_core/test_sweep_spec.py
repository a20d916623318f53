"""Sweep specs: a full example is accepted and round-trips; each bad field is refused with its location named;
the trial template is held to every rule of a job; trial jobs carry their parameters in env and args."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_core.model import JobKind, JobSpec, SweepSpec, TrialTemplate
from scheduler_core.model.sweep import ENV_TRIAL_NUMBER, ENV_TRIAL_PARAMS, LABEL_SWEEP, LABEL_TRIAL, format_arg

EXAMPLE: dict[str, Any] = {
    "name": "mlp-search",
    "team": "search",
    "search_space": {
        "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
        "hidden": {"type": "int", "low": 8, "high": 128, "step": 8},
        "activation": {"type": "categorical", "choices": ["relu", "tanh"]},
    },
    "objective": {"metric": "val_loss", "direction": "minimize"},
    "n_trials": 20,
    "parallelism": 4,
    "sampler": "tpe",
    "pruner": {"name": "median", "n_startup_trials": 3},
    "trial": {
        "flavour": "h100-mig-1g",
        "command": ["python", "train.py"],
        "time_limit": "30m",
        "env": {"DATA": "/data/x"},
    },
}


def spec(**changes: Any) -> dict[str, Any]:
    """The example with dotted-path changes applied (``{"trial.pods": 2}``); ``None`` deletes."""
    data = copy.deepcopy(EXAMPLE)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return data


def test_example_is_accepted_and_round_trips() -> None:
    sweep = SweepSpec.model_validate(EXAMPLE)
    assert sweep.sampler.name == "tpe" and sweep.pruner.name == "median"
    assert sweep.pruner.model_dump()["n_startup_trials"] == 3
    assert sweep.trial.flavour == ("h100-mig-1g",)
    assert sweep.trial.time_limit == 1800
    assert SweepSpec.model_validate(sweep.model_dump(mode="json")) == sweep
    assert SweepSpec.model_validate_json(sweep.model_dump_json()) == sweep


def test_trial_template_has_every_job_field_but_the_sweeps_own() -> None:
    assert set(TrialTemplate.model_fields) == set(JobSpec.model_fields) - {"name", "team", "kind"}
    template = TrialTemplate.model_validate({"flavour": "h100", "command": ["x"]})
    job = JobSpec.model_validate({"name": "x", "team": "t", "flavour": "h100", "command": ["x"]})
    for field in TrialTemplate.model_fields:
        assert getattr(template, field) == getattr(job, field), field


@pytest.mark.parametrize(("changes", "loc", "words"), [
    ({"n_trials": 0}, "n_trials", "greater than or equal to 1"),
    ({"n_trials": 10_001}, "n_trials", "less than or equal to 10000"),
    ({"parallelism": 0}, "parallelism", "greater than or equal to 1"),
    ({"name": "bad name"}, "name", "pattern"),
    ({"team": "Search"}, "team", "pattern"),
    ({"search_space": {}}, "search_space", "at least 1"),
    ({"search_space__lr": {"type": "float", "low": 1, "high": 1}}, "search_space.lr.float", "must be below"),
    ({"search_space__lr": {"type": "float", "low": 0, "high": 1, "log": True}}, "search_space.lr.float",
     "needs low > 0"),
    ({"search_space__lr": {"type": "float", "low": 0.1, "high": 1, "log": True, "step": 0.1}},
     "search_space.lr.float", "either log or step"),
    ({"search_space__lr": {"type": "float", "low": 0, "high": 1, "step": 0.3}}, "search_space.lr.float",
     "not a multiple of step"),
    ({"search_space__lr": {"type": "float", "low": "a", "high": 1}}, "search_space.lr.float.low", "valid number"),
    ({"search_space__hidden": {"type": "int", "low": 8, "high": 130, "step": 8}}, "search_space.hidden.int",
     "not a multiple of step"),
    ({"search_space__activation": {"type": "categorical", "choices": []}}, "search_space.activation.categorical",
     "at least 1"),
    ({"search_space__activation": {"type": "categorical", "choices": ["a", "a"]}},
     "search_space.activation.categorical.choices", "listed twice"),
    ({"search_space__lr": {"type": "normal", "low": 0, "high": 1}}, "search_space.lr", "does not match any"),
    ({"search_space__1bad": {"type": "int", "low": 0, "high": 1}}, "search_space.1bad.[key]", "pattern"),
    ({"objective__direction": "up"}, "objective.direction", "'minimize' or 'maximize'"),
    ({"sampler": "cmaes"}, "sampler", "does not match any"),
    ({"pruner": "always"}, "pruner", "does not match any"),
    ({"pruner": {"name": "hyperband", "min_resource": 5, "max_resource": 3}}, "pruner.hyperband",
     "must exceed min_resource"),
    ({"pruner": {"name": "median", "n_warmup_steps": -1}}, "pruner.median.n_warmup_steps", "greater than or equal"),
    ({"sampler": "grid"}, "", "needs a step for float parameter 'lr'"),
    ({"trial__time_limit": "90d"}, "trial.time_limit", "between 1m and 60d"),
    ({"trial__flavour": "h200"}, "trial.flavour", "unknown flavour 'h200'"),
    ({"trial__gpus_per_pod": 16, "trial__flavour": "h100"}, "trial", "at most 8 GPUs"),
    ({"trial__pods": 2}, "trial", "single-pod"),
    ({"trial__command": []}, "trial.command", "at least 1"),
    ({"trial__env": {"1BAD": "x"}}, "trial.env", "invalid environment variable name"),
    ({"trial__name": "x"}, "trial", "set by the sweep"),
    ({"trial__kind": "batch"}, "trial", "set by the sweep"),
    ({"trial": None}, "trial", "Field required"),
    ({"surprise": 1}, "surprise", "Extra inputs are not permitted"),
    ({"max_failed_trials": 0}, "max_failed_trials", "greater than or equal to 1"),
])
def test_bad_fields_are_named(changes: dict[str, Any], loc: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        SweepSpec.model_validate(spec(**changes))
    errors = info.value.errors()
    located = [e for e in errors if ".".join(str(p) for p in e["loc"]).startswith(loc)]
    assert located, errors
    assert any(words in e["msg"] for e in located), errors


def test_grid_sampler_counts_the_grid() -> None:
    grid_space = {
        "lr": {"type": "float", "low": 0.1, "high": 0.3, "step": 0.1},
        "hidden": {"type": "int", "low": 8, "high": 32, "step": 8},
        "activation": {"type": "categorical", "choices": ["relu", "tanh"]},
    }
    ok = SweepSpec.model_validate(spec(sampler="grid", search_space=grid_space, n_trials=24))
    grid = ok.grid()
    assert grid["hidden"] == [8, 16, 24, 32] and grid["activation"] == ["relu", "tanh"]
    assert [round(float(v), 9) for v in grid["lr"]] == [0.1, 0.2, 0.3]
    with pytest.raises(ValidationError, match=r"n_trials \(25\) exceeds the grid's 24 points"):
        SweepSpec.model_validate(spec(sampler="grid", search_space=grid_space, n_trials=25))


def test_trial_job_carries_params_in_env_and_args() -> None:
    sweep = SweepSpec.model_validate(EXAMPLE)
    params = {"lr": 0.01, "hidden": 64, "activation": "tanh"}
    job = sweep.trial_job(sweep_id="sw-1", number=7, params=params, env={"SHOAL_API_URL": "http://x"})
    assert job.kind is JobKind.TRIAL
    assert job.name == "mlp-search-t7" and job.team == "search"
    assert job.command == ("python", "train.py", "--lr", "0.01", "--hidden", "64", "--activation", "tanh")
    assert json.loads(job.env[ENV_TRIAL_PARAMS]) == params
    assert job.env[ENV_TRIAL_NUMBER] == "7" and job.env["DATA"] == "/data/x"
    assert job.env["SHOAL_API_URL"] == "http://x"
    assert job.labels[LABEL_SWEEP] == "sw-1" and job.labels[LABEL_TRIAL] == "7"
    assert job.time_limit == 1800 and job.flavour == ("h100-mig-1g",)


def test_trial_job_refuses_params_outside_the_space() -> None:
    sweep = SweepSpec.model_validate(EXAMPLE)
    with pytest.raises(ValueError, match=r"unknown \['depth'\], missing \['hidden'\]"):
        sweep.trial_job(sweep_id="s", number=0, params={"lr": 0.1, "activation": "relu", "depth": 3})


@pytest.mark.parametrize(("value", "text"), [(True, "true"), (False, "false"), (3, "3"), (0.1, "0.1"),
                                             (1e-05, "1e-05"), ("relu", "relu")])
def test_format_arg(value: Any, text: str) -> None:
    assert format_arg(value) == text


def test_objective_better_follows_direction() -> None:
    minimize = SweepSpec.model_validate(EXAMPLE).objective
    maximize = SweepSpec.model_validate(spec(objective__direction="maximize")).objective
    assert minimize.better(1.0, 2.0) and not minimize.better(2.0, 1.0)
    assert maximize.better(2.0, 1.0) and not maximize.better(1.0, 2.0)


@pytest.mark.parametrize(("params", "words"), [
    ({"lr": 0.5, "hidden": 64, "activation": "relu"}, r"'lr': 0.5 is outside \[0.0001, 0.1\]"),
    ({"lr": 0.01, "hidden": 64.0, "activation": "relu"}, "'hidden': expected a whole number"),
    ({"lr": 0.01, "hidden": 64, "activation": "gelu"}, "'activation': 'gelu' is not one of"),
    ({"lr": "x", "hidden": 64, "activation": "relu"}, "'lr': expected a number"),
])
def test_trial_job_refuses_values_outside_the_space(params: dict[str, Any], words: str) -> None:
    sweep = SweepSpec.model_validate(EXAMPLE)
    with pytest.raises(ValueError, match=words):
        sweep.trial_job(sweep_id="s", number=0, params=params)


def test_example_params_are_a_valid_point() -> None:
    sweep = SweepSpec.model_validate(EXAMPLE)
    assert sweep.example_params() == {"lr": 1e-4, "hidden": 8, "activation": "relu"}
    sweep.trial_job(sweep_id="s", number=0, params=sweep.example_params())


def test_a_sweeps_trials_are_one_equivalence_class() -> None:
    """Trials differ in name, env, args and labels only: the policy sees one shape and places it once."""
    from scheduler_core.bench.sweep import sweep_spec, trial_jobs
    from scheduler_core.policy.snapshot import JobRequest

    sweep = SweepSpec.model_validate(EXAMPLE)
    requests = [JobRequest.from_spec(f"job_{n}", sweep.trial_job(
        sweep_id="s", number=n, params={"lr": 0.001 * (n + 1), "hidden": 8 * (1 + n % 16),
                                         "activation": ("relu", "tanh")[n % 2]}), 0.0) for n in range(50)]
    assert len({r.shape for r in requests}) == 1
    assert len({(r.team, r.priority_class, r.preemptible, r.time_limit_s) for r in requests}) == 1
    bench = trial_jobs(sweep_spec(500), 0.0)
    assert len({j.request.shape for j in bench}) == 1
    assert len({j.request.shape for j in trial_jobs(sweep_spec(500), 0.0, distinct_shapes=True)}) == 500
