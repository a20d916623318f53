"""What users write to start a hyper-parameter sweep: ``SweepSpec``, its search space and its per-trial job shape.

A sweep is a first-class scheduler object (DESIGN §6). The core stores and serves it; the controller in ``sweeps/``
turns each Optuna trial into a ``kind: trial`` job built by ``SweepSpec.trial_job``. Validation is as strict as for
jobs: the trial template is checked by ``JobSpec`` itself, so a sweep whose trials could never be submitted is
refused before anything is stored, with the offending field named (``trial.time_limit``, ``search_space.lr.low``).
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from .job import (CheckpointPolicy, Command, Env, FlavourList, JobKind, JobSpec, Labels, PriorityClass, TimeLimit,
                  Topology)
from .team import TeamName
from .text import Text512, Text1024

#: Environment variables every trial job gets, besides the job contract's own.
ENV_TRIAL_PARAMS = "SHOAL_TRIAL_PARAMS"      # the trial's parameters as a JSON object
ENV_TRIAL_NUMBER = "SHOAL_TRIAL_NUMBER"      # the Optuna trial number (0, 1, ...)
ENV_SWEEP_ID = "SHOAL_SWEEP_ID"
ENV_OBJECTIVE = "SHOAL_SWEEP_OBJECTIVE"      # the objective metric's name, for logs
ENV_API_URL = "SHOAL_API_URL"                # where the trial reports
ENV_API_TOKEN = "SHOAL_API_TOKEN"            # injected at launch by the scheduler (auth.job_tokens), never in the spec

#: Labels the controller puts on each trial job, so ``shoal queue`` and the API can tell trials apart.
LABEL_SWEEP = "shoal.sweep"
LABEL_TRIAL = "shoal.trial"

MAX_TRIALS = 10_000
MAX_PARALLELISM = 1_000
MAX_GRID = 1_000_000

ParamName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")]
#: Bounds of a parameter's numbers: integers within int64, floats finite (JSON numbers beyond are refused).
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
MAX_FLOAT = 1.7976931348623157e308
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX, strict=True)]
Finite = Annotated[float, Field(ge=-MAX_FLOAT, le=MAX_FLOAT, allow_inf_nan=False, strict=True)]
#: A choice as it appears in a trial's env and on its command line (bounded, so a trial's argv stays small).
Choice = Annotated[bool, Field(strict=True)] | Int64 | Finite | Text1024


class FloatParam(BaseModel):
    """A real number in ``[low, high]``; ``log`` samples its logarithm uniformly; ``step`` makes it discrete."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["float"] = "float"
    low: Finite
    high: Finite
    log: bool = Field(default=False, strict=True)
    step: Finite | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _range(self) -> Self:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError("low and high must be finite numbers")
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-scaled range needs low > 0, got low={self.low}")
        if self.log and self.step is not None:
            raise ValueError("give either log or step, not both")
        if self.step is not None:
            count = (self.high - self.low) / self.step
            if not math.isfinite(count) or count > 2 ** 53:
                raise ValueError(f"[low, high] holds too many steps of {self.step} to count; use a larger step")
            if abs(count - round(count)) > 1e-9 * max(1.0, count):
                raise ValueError(f"high - low ({self.high - self.low}) is not a multiple of step ({self.step})")
        return self

    def check(self, value: Choice) -> str | None:
        """What is wrong with ``value`` as a value of this parameter, or ``None``."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected a number, got {value!r}"
        if not self.low <= value <= self.high:
            return f"{value} is outside [{self.low}, {self.high}]"
        return None

    def grid_size(self) -> int | None:
        return None if self.step is None else round((self.high - self.low) / self.step) + 1

    def grid(self) -> list[Choice] | None:
        if self.step is None:
            return None
        count = round((self.high - self.low) / self.step)
        # Rounded so 0.1 + 2 × 0.1 is 0.3, not 0.30000000000000004 (which would lie outside [low, high]).
        return [min(self.high, round(self.low + i * self.step, 12)) for i in range(count + 1)]


class IntParam(BaseModel):
    """An integer in ``[low, high]`` (both included), every ``step``; ``log`` samples its logarithm uniformly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["int"] = "int"
    low: Int64
    high: Int64
    log: bool = Field(default=False, strict=True)
    step: int = Field(default=1, ge=1, le=INT64_MAX, strict=True)

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-scaled range needs low > 0, got low={self.low}")
        if self.log and self.step != 1:
            raise ValueError("a log-scaled integer range takes no step")
        if (self.high - self.low) % self.step:
            raise ValueError(f"high - low ({self.high - self.low}) is not a multiple of step ({self.step})")
        return self

    def check(self, value: Choice) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected a whole number, got {value!r}"
        if not self.low <= value <= self.high:
            return f"{value} is outside [{self.low}, {self.high}]"
        return None

    def grid_size(self) -> int:
        return (self.high - self.low) // self.step + 1

    def grid(self) -> list[Choice]:
        return list(range(self.low, self.high + 1, self.step))


class CategoricalParam(BaseModel):
    """One of a few values (strings, numbers or booleans)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["categorical"] = "categorical"
    choices: tuple[Choice, ...] = Field(min_length=1, max_length=1000)

    @field_validator("choices")
    @classmethod
    def _distinct(cls, value: tuple[Choice, ...]) -> tuple[Choice, ...]:
        keys = [json.dumps(c) for c in value]
        if len(set(keys)) != len(keys):
            raise ValueError("a choice is listed twice")
        for choice in value:
            if isinstance(choice, float) and not math.isfinite(choice):
                raise ValueError(f"choices must be finite numbers, got {choice}")
        return value

    def check(self, value: Choice) -> str | None:
        if not any(type(value) is type(c) and value == c for c in self.choices):
            return f"{value!r} is not one of {list(self.choices)}"
        return None

    def grid_size(self) -> int:
        return len(self.choices)

    def grid(self) -> list[Choice]:
        return list(self.choices)


Param = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class SweepState(StrEnum):
    """A sweep's life. ``CANCELLING``: cancelled by a user, its trial jobs stopping, the study not yet closed."""

    RUNNING = "RUNNING"
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"      # every trial finished and at least one completed
    FAILED = "FAILED"            # no trial completed, too many failed, or its trials cannot be submitted
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        return self in (SweepState.SUCCEEDED, SweepState.FAILED, SweepState.CANCELLED)


class TrialState(StrEnum):
    """A trial's outcome, as Optuna records it. An ``ACTIVE`` trial's job may be pending, running or requeued after
    a preemption: it stays the same trial until it completes, is pruned, or fails."""

    ACTIVE = "ACTIVE"
    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self is not TrialState.ACTIVE


class Direction(StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


class Objective(BaseModel):
    """What a trial's final value means: its metric's name (shown and stored in the study) and which way is better."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(default="objective", min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")
    direction: Direction = Direction.MINIMIZE

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` beats value ``b``."""
        return a < b if self.direction is Direction.MINIMIZE else a > b


def _by_name(value: Any) -> Any:
    """``"tpe"`` is shorthand for ``{"name": "tpe"}``."""
    return {"name": value} if isinstance(value, str) else value


class TpeSampler(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["tpe"] = "tpe"
    seed: int | None = Field(default=None, ge=0, le=2 ** 32 - 1, strict=True)
    n_startup_trials: int = Field(default=10, ge=0, le=MAX_TRIALS, strict=True,
                                  description="random trials before TPE models")
    multivariate: bool = Field(default=False, strict=True)


class RandomSampler(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["random"] = "random"
    seed: int | None = Field(default=None, ge=0, le=2 ** 32 - 1, strict=True)


class GridSampler(BaseModel):
    """Every combination once; every parameter must be categorical, an integer, or a float with a step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["grid"] = "grid"
    seed: int | None = Field(default=None, ge=0, le=2 ** 32 - 1, strict=True)


Sampler = Annotated[TpeSampler | RandomSampler | GridSampler, BeforeValidator(_by_name), Field(discriminator="name")]


class MedianPruner(BaseModel):
    """Prune a trial whose latest value is worse than the median of earlier trials at the same step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["median"] = "median"
    n_startup_trials: int = Field(default=5, ge=0, le=MAX_TRIALS, strict=True,
                                  description="trials that finish before any is pruned")
    n_warmup_steps: int = Field(default=0, ge=0, le=INT64_MAX, strict=True,
                                description="steps of each trial before it may be pruned")
    interval_steps: int = Field(default=1, ge=1, le=INT64_MAX, strict=True)


class HyperbandPruner(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["hyperband"] = "hyperband"
    min_resource: int = Field(default=1, ge=1, le=INT64_MAX, strict=True)
    max_resource: Annotated[int, Field(ge=1, le=INT64_MAX, strict=True)] | Literal["auto"] = "auto"
    reduction_factor: int = Field(default=3, ge=2, le=1000, strict=True)

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.max_resource != "auto" and self.max_resource <= self.min_resource:
            raise ValueError(f"max_resource ({self.max_resource}) must exceed min_resource ({self.min_resource})")
        return self


class NoPruner(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["none"] = "none"


Pruner = Annotated[MedianPruner | HyperbandPruner | NoPruner, BeforeValidator(_by_name), Field(discriminator="name")]


class TrialTemplate(BaseModel):
    """The job every trial runs: a ``JobSpec`` without name, team and kind, which the sweep supplies.

    It is checked by ``JobSpec`` itself (a before-validator builds a probe job), so every rule for jobs applies to
    trials with the same messages, located under ``trial.``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    priority_class: PriorityClass = PriorityClass.STANDARD
    flavour: FlavourList
    pods: int = Field(default=1, ge=1, le=1024, strict=True)
    gpus_per_pod: int = Field(default=1, ge=1, le=56, strict=True)
    cpus_per_pod: int | None = Field(default=None, ge=1, le=1024, strict=True)
    memory_gb_per_pod: int | None = Field(default=None, ge=1, le=16384, strict=True)
    topology: Topology | None = None
    image: Text512 | None = None
    command: Command
    env: Env = Field(default_factory=dict)
    time_limit: TimeLimit = 86400.0
    preemptible: bool = Field(default=True, strict=True)
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    max_restarts: int = Field(default=3, ge=0, le=1000, strict=True)
    labels: Labels = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _as_strict_as_a_job(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for reserved in ("name", "team", "kind"):
            if reserved in data:
                raise ValueError(f"{reserved!r} is set by the sweep, not in its trial template")
        JobSpec.model_validate({**data, "name": "trial-probe", "team": "probe", "kind": JobKind.TRIAL})
        return data

    @field_validator("flavour", mode="before")
    @classmethod
    def _flavour_list(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class SweepSpec(BaseModel):
    """A sweep submission: search ``n_trials`` points of ``search_space``, at most ``parallelism`` at once."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")
    team: TeamName
    search_space: dict[ParamName, Param] = Field(min_length=1, max_length=100)
    objective: Objective = Field(default_factory=Objective)
    n_trials: int = Field(ge=1, le=MAX_TRIALS, strict=True)
    parallelism: int = Field(default=1, ge=1, le=MAX_PARALLELISM, strict=True)
    sampler: Sampler = Field(default_factory=TpeSampler)
    pruner: Pruner = Field(default_factory=MedianPruner)
    max_failed_trials: int | None = Field(
        default=None, ge=1, le=MAX_TRIALS, strict=True, description="stop the sweep (FAILED) once this many trials have failed; none: never")
    trial: TrialTemplate
    labels: Labels = Field(default_factory=dict)

    @model_validator(mode="after")
    def _grid_fits(self) -> Self:
        if self.sampler.name != "grid":
            return self
        size = 1
        for name, param in self.search_space.items():
            count = param.grid_size()   # counted, not listed: a step of 1e-300 must not build the list
            if count is None:
                raise ValueError(f"the grid sampler needs a step for float parameter {name!r}")
            size *= count
            if size > MAX_GRID:
                raise ValueError(f"the grid has more than {MAX_GRID:,} points")
        if self.n_trials > size:
            raise ValueError(f"n_trials ({self.n_trials}) exceeds the grid's {size} points")
        return self

    def example_params(self) -> dict[str, Choice]:
        """One valid point of the search space (each range's low end, each first choice): for checking that a
        trial job can run here before any trial is asked."""
        out: dict[str, Choice] = {}
        for name, param in self.search_space.items():
            out[name] = param.choices[0] if isinstance(param, CategoricalParam) else param.low
        return out

    def grid(self) -> dict[str, list[Choice]]:
        """The grid sampler's search space (every parameter's values)."""
        out: dict[str, list[Choice]] = {}
        for name, param in self.search_space.items():
            values = param.grid()
            if values is None:
                raise ValueError(f"parameter {name!r} has no grid")
            out[name] = values
        return out

    def trial_job(self, *, sweep_id: str, number: int, params: dict[str, Choice],
                  env: dict[str, str] | None = None) -> JobSpec:
        """The job that runs trial ``number`` with ``params``: in its env as JSON, and as ``--name value`` args."""
        unknown = sorted(set(params) - set(self.search_space))
        missing = sorted(set(self.search_space) - set(params))
        if unknown or missing:
            raise ValueError(f"trial parameters do not match the search space (unknown {unknown}, missing {missing})")
        for name, param in self.search_space.items():
            problem = param.check(params[name])
            if problem is not None:
                raise ValueError(f"parameter {name!r}: {problem}")
        args: list[str] = []
        for name in self.search_space:
            args += [f"--{name}", format_arg(params[name])]
        template = self.trial.model_dump(mode="json")
        trial_env = {
            **self.trial.env,
            ENV_TRIAL_PARAMS: json.dumps(params, sort_keys=True),
            ENV_TRIAL_NUMBER: str(number),
            ENV_SWEEP_ID: sweep_id,
            ENV_OBJECTIVE: self.objective.metric,
            **(env or {}),
        }
        return JobSpec.model_validate({
            **template,
            "name": f"{self.name}-t{number}",
            "team": self.team,
            "kind": JobKind.TRIAL,
            "command": [*self.trial.command, *args],
            "env": trial_env,
            "labels": {**self.trial.labels, **self.labels, LABEL_SWEEP: sweep_id, LABEL_TRIAL: str(number)},
        })


def format_arg(value: Choice) -> str:
    """How a parameter value appears on a trial's command line: JSON for booleans, ``repr`` for floats."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
