"""What users write to submit a job: ``JobSpec`` and its parts, with a clear message for every bad field.

The shape is the one in the reference design's ``POST /v1/jobs``. Limits that need the cluster (does this
flavour exist here, is 1,024 × 8 more than the cluster has) are checked by the API against its config, not here.
"""

from __future__ import annotations

import re
from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationInfo, WithJsonSchema,
                      field_validator,
                      model_validator)

from .durations import DURATION_PATTERN, MAX_DURATION_S, format_duration, parse_duration
from .flavours import FLAVOURS
from .team import TeamName
from .text import (MAX_ARG_CHARS, MAX_ARGS, MAX_ENV, MAX_LABEL_KEY, MAX_LABEL_VALUE, MAX_LABELS, NO_NUL_PATTERN,
                   LabelKey, Text512, Text1024, Text4096, arg_problem, exec_budget_problem)


def _seconds(value: Any) -> float:
    return parse_duration(value)


def _duration_schema(low: float = 0.0, high: float = MAX_DURATION_S) -> WithJsonSchema:
    """The schema says what is accepted (the OpenAPI document is generated from it), with the field's bounds, not
    the float kept."""
    bounds = f"between {format_duration(low)} and {format_duration(high)}"
    return WithJsonSchema({"anyOf": [{"type": "number", "minimum": low, "maximum": high},
                                     {"type": "string", "pattern": DURATION_PATTERN, "maxLength": 64,
                                      "examples": ["90s", "12h", "1h30m"]}],
                           "description": f"seconds, or a duration such as '90s', '30m', '12h', '1h30m', '3d'; "
                                          f"{bounds}"}, mode="validation")


_AS_SECONDS = BeforeValidator(_seconds)
_AS_TEXT = PlainSerializer(format_duration, return_type=str)


#: Seconds in, seconds kept; accepts "12h", "300s", "1h30m" or a number of seconds. Any duration, 0 to 366 days.
Duration = Annotated[float, _AS_SECONDS, _AS_TEXT, _duration_schema()]
TimeLimit = Annotated[float, _AS_SECONDS, _AS_TEXT, _duration_schema(60.0, 60 * 86400.0)]
GracePeriod = Annotated[float, _AS_SECONDS, _AS_TEXT, _duration_schema(0.0, 3600.0)]
Interval = Annotated[float, _AS_SECONDS, _AS_TEXT, _duration_schema(10.0)]

#: One argv string: no NUL, at most MAX_ARG_STRLEN - 1 characters (and bytes: checked by ``arg_problem``).
Arg = Annotated[str, Field(max_length=MAX_ARG_CHARS, json_schema_extra={"pattern": NO_NUL_PATTERN})]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
EnvName = Annotated[str, Field(max_length=1024)]   # the form is checked by JobSpec._env_exec, with its own message
_NO_NUL_ARG = {"type": "string", "maxLength": MAX_ARG_CHARS, "pattern": NO_NUL_PATTERN}
Labels = Annotated[dict[LabelKey, Text1024], Field(max_length=MAX_LABELS), WithJsonSchema({
    "type": "object", "maxProperties": MAX_LABELS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_LABEL_KEY, "pattern": NO_NUL_PATTERN},
    "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE, "pattern": NO_NUL_PATTERN},
    "description": f"at most {MAX_LABELS} labels; keys 1–{MAX_LABEL_KEY} characters, values at most "
                   f"{MAX_LABEL_VALUE}, no NUL"})]
Command = Annotated[tuple[Arg, ...], Field(min_length=1, max_length=MAX_ARGS, description=(
    "the pod's argv (no shell); each argument at most 131,071 bytes in UTF-8 and without NUL, and command and "
    "env together within the executor OS's ARG_MAX less what the executor adds (the error names both sizes)"))]
Env = Annotated[dict[EnvName, Arg], Field(max_length=MAX_ENV), WithJsonSchema({
    "type": "object", "maxProperties": MAX_ENV,
    "propertyNames": {"minLength": 1, "maxLength": 1024, "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
    "additionalProperties": _NO_NUL_ARG,
    "description": "added to the pod's environment; each NAME=value at most 131,071 bytes in UTF-8, without NUL; "
                   "command and env together within the budget stated for command"})]


_FLAVOUR_NAME = {"type": "string", "enum": list(FLAVOURS)}
#: One flavour name or a list of them (in order of preference); validated by ``JobSpec._known_flavours``.
FlavourList = Annotated[tuple[str, ...], WithJsonSchema({"anyOf": [
    _FLAVOUR_NAME, {"type": "array", "items": _FLAVOUR_NAME, "minItems": 1, "maxItems": len(FLAVOURS),
                    "uniqueItems": True}]}, mode="validation")]


def check_exec(command: tuple[str, ...], env: dict[str, str]) -> None:
    """Raise ``ValueError`` naming the field when this argv and environment could never be exec'd."""
    for index, arg in enumerate(command):
        problem = arg_problem(arg)
        if problem is not None:
            raise ValueError(f"command[{index}] {problem}")
    for name, value in env.items():
        problem = arg_problem(f"{name}={value}")
        if problem is not None:
            raise ValueError(f"env[{name!r}] {problem}")
    problem = exec_budget_problem(command, env)
    if problem is not None:
        raise ValueError(problem)


class JobKind(StrEnum):
    BATCH = "batch"
    NOTEBOOK = "notebook"
    TRIAL = "trial"


class PriorityClass(StrEnum):
    """Priority classes. ``critical`` runs in the critical band (inference reclaims, incidents);
    ``scavenger`` runs only on idle GPUs and is killed without ceremony; the rest order work within a team."""

    CRITICAL = "critical"
    HIGH = "high"
    STANDARD = "standard"
    LOW = "low"
    SCAVENGER = "scavenger"

    @property
    def rank(self) -> int:
        """Higher runs first within a team."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {
    PriorityClass.CRITICAL: 4, PriorityClass.HIGH: 3, PriorityClass.STANDARD: 2,
    PriorityClass.LOW: 1, PriorityClass.SCAVENGER: 0,
}


class TopologyLevel(IntEnum):
    """Network domains from tightest to widest; a job's pods must (or should) share one domain of its level."""

    NODE = 0
    LEAF = 1
    BLOCK = 2
    CLUSTER = 3


class Topology(BaseModel):
    """``{"required": "block"}`` never splits; ``{"preferred": "leaf"}`` may widen after a bounded wait."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    required: Literal["node", "leaf", "block"] | None = None
    preferred: Literal["node", "leaf", "block"] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.required is None) == (self.preferred is None):
            raise ValueError("give exactly one of 'required' or 'preferred' (node, leaf or block)")
        return self

    @property
    def level(self) -> TopologyLevel:
        name = self.required or self.preferred
        assert name is not None
        return TopologyLevel[name.upper()]

    @property
    def is_required(self) -> bool:
        return self.required is not None


class CheckpointPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: Text4096 | None = Field(
        default=None, description="where checkpoints go; default: the platform's store")
    interval: Literal["auto"] | Interval = Field(
        default="auto", description="'auto' (Young–Daly from measured cost and gang MTBF) or a duration")
    grace_period: GracePeriod = Field(
        default=300.0, description="SIGTERM → SIGKILL; sized to the checkpoint cost")
    cost: Duration | None = Field(default=None, description="expected time to write one checkpoint, until measured")

    @field_validator("grace_period")
    @classmethod
    def _grace_bounds(cls, value: float) -> float:
        if not 0 <= value <= 3600:
            raise ValueError(f"grace_period must be between 0s and 1h, got {format_duration(value)}")
        return value

    @field_validator("interval")
    @classmethod
    def _interval_bounds(cls, value: Any) -> Any:
        if value != "auto" and value < 10:
            raise ValueError("interval must be at least 10s, or 'auto'")
        return value


#: The validation context of a spec read back from where it was stored after passing every rule here at
#: submission (``JobSpec.model_validate_json(text, context=STORED)``): pydantic's core still checks each field's
#: type and bounds, but the rules in Python below (flavour names, the argv budget, the gang's shape) are not run
#: again: they cost more than the parse itself, and a starting scheduler reads every pending job's spec.
STORED: dict[str, bool] = {"stored": True}


def _stored(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and info.context.get("stored") is True


MAX_PODS = 1024
MAX_UNITS_PER_POD = 56  # a whole MIG node of 1g slices; whole-GPU pods are bounded by the node's GPUs


class JobSpec(BaseModel):
    """A job submission. All pods of a job start together or not at all."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")
    team: TeamName
    kind: JobKind = JobKind.BATCH
    priority_class: PriorityClass = PriorityClass.STANDARD
    flavour: FlavourList = Field(
        description="a flavour, or flavours in order of preference (a gang never spans two)")
    pods: int = Field(default=1, ge=1, le=MAX_PODS, strict=True)
    gpus_per_pod: int = Field(default=1, ge=1, le=MAX_UNITS_PER_POD, strict=True,
                              description="GPUs per pod, or MIG slices per pod for a MIG flavour")
    cpus_per_pod: int | None = Field(default=None, ge=1, le=1024, strict=True)
    memory_gb_per_pod: int | None = Field(default=None, ge=1, le=16384, strict=True)
    topology: Topology | None = None
    image: Text512 | None = None
    command: Command
    env: Env = Field(default_factory=dict)
    time_limit: TimeLimit = Field(
        default=86400.0, description="the job is stopped (or checkpointed) at its limit")
    preemptible: bool = Field(default=True, strict=True)
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    max_restarts: int = Field(default=3, ge=0, le=1000, strict=True,
                              description="for the job's own faults; infrastructure faults have a budget of their own")
    labels: Labels = Field(default_factory=dict)

    @field_validator("flavour", mode="before")
    @classmethod
    def _flavour_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        return value

    @field_validator("flavour")
    @classmethod
    def _known_flavours(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if _stored(info):
            return value
        if not value:
            raise ValueError("give at least one flavour")
        unknown = [f for f in value if f not in FLAVOURS]
        if unknown:
            raise ValueError(f"unknown flavour {unknown[0]!r}; known flavours: {', '.join(FLAVOURS)}")
        if len(set(value)) != len(value):
            raise ValueError("a flavour is listed twice")
        if len({FLAVOURS[f].is_mig for f in value}) > 1:
            raise ValueError("do not mix MIG slices and whole GPUs in one job's flavour list")
        return value

    @field_validator("time_limit")
    @classmethod
    def _time_limit_bounds(cls, value: float) -> float:
        if not 60 <= value <= 60 * 86400:
            raise ValueError(f"time_limit must be between 1m and 60d, got {format_duration(value)}")
        return value

    @field_validator("command")
    @classmethod
    def _command_exec(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if not _stored(info):
            check_exec(value, {})
        return value

    @field_validator("env")
    @classmethod
    def _env_exec(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if _stored(info):
            return value
        for key in value:
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"invalid environment variable name {key!r}")
        # After command (declared first), so the budget is checked on both; a bad command was reported already.
        check_exec(info.data.get("command", ()), value)
        return value

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> Self:
        if _stored(info):
            return self
        mig = FLAVOURS[self.flavour[0]].is_mig
        if not mig and self.gpus_per_pod > 8:
            raise ValueError(f"gpus_per_pod is {self.gpus_per_pod}, but a node has at most 8 GPUs; "
                             f"use more pods")
        if mig and self.pods > 1:
            raise ValueError("MIG slices are for single-pod work (notebooks, small jobs); use whole GPUs for gangs")
        if self.kind == JobKind.NOTEBOOK and self.pods != 1:
            raise ValueError("a notebook is one pod")
        return self

    @property
    def total_units(self) -> int:
        return self.pods * self.gpus_per_pod
