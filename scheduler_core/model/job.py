"""What users write to submit a job: ``JobSpec`` and its parts, with a clear message for every bad field.

The shape is the one in the reference design's ``POST /v1/jobs``. Limits that need the cluster (does this
flavour exist here, is 1,024 × 8 more than the cluster has) are checked by the API against its config, not here.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema, field_validator,
                      model_validator)

from .durations import format_duration, parse_duration
from .flavours import FLAVOURS
from .team import TeamName


def _seconds(value: Any) -> float:
    return parse_duration(value)


#: Seconds in, seconds kept; accepts "12h", "300s", "1h30m" or a number of seconds.
Duration = Annotated[
    float, BeforeValidator(_seconds), PlainSerializer(format_duration, return_type=str),
    # The schema says what is accepted (the OpenAPI document is generated from it), not the float kept.
    WithJsonSchema({"anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "examples": ["90s", "12h", "1h30m"]}],
                    "description": "seconds, or a duration such as '90s', '30m', '12h', '1h30m', '3d'"},
                   mode="validation"),
]


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

    uri: str | None = Field(default=None, description="where checkpoints go; default: the platform's store")
    interval: Literal["auto"] | Duration = Field(
        default="auto", description="'auto' (Young–Daly from measured cost and gang MTBF) or a duration")
    grace_period: Duration = Field(default=300.0, description="SIGTERM → SIGKILL; sized to the checkpoint cost")
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


MAX_PODS = 1024
MAX_UNITS_PER_POD = 56  # a whole MIG node of 1g slices; whole-GPU pods are bounded by the node's GPUs


class JobSpec(BaseModel):
    """A job submission. All pods of a job start together or not at all."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")
    team: TeamName
    kind: JobKind = JobKind.BATCH
    priority_class: PriorityClass = PriorityClass.STANDARD
    flavour: tuple[str, ...] = Field(
        description="a flavour, or flavours in order of preference (a gang never spans two)")
    pods: int = Field(default=1, ge=1, le=MAX_PODS)
    gpus_per_pod: int = Field(default=1, ge=1, le=MAX_UNITS_PER_POD,
                              description="GPUs per pod, or MIG slices per pod for a MIG flavour")
    cpus_per_pod: int | None = Field(default=None, ge=1, le=1024)
    memory_gb_per_pod: int | None = Field(default=None, ge=1, le=16384)
    topology: Topology | None = None
    image: str | None = Field(default=None, max_length=512)
    command: tuple[str, ...] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    time_limit: Duration = Field(default=86400.0, description="the job is stopped (or checkpointed) at its limit")
    preemptible: bool = True
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    max_restarts: int = Field(default=3, ge=0, le=1000, description="for the job's own faults; infra faults are free")
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("flavour", mode="before")
    @classmethod
    def _flavour_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        return value

    @field_validator("flavour")
    @classmethod
    def _known_flavours(cls, value: tuple[str, ...]) -> tuple[str, ...]:
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

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key or not (key[0].isalpha() or key[0] == "_") or not all(c.isalnum() or c == "_" for c in key):
                raise ValueError(f"invalid environment variable name {key!r}")
        return value

    @model_validator(mode="after")
    def _shape(self) -> Self:
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
