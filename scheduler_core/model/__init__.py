"""The public model: what users and operators write (pydantic) and the names the rest of Shoal shares."""

from .allocation import AdmittedAs, Placement, PodPlacement
from .cluster import BlockConfig, ClusterConfig, Device, Health, Node, NodeGroup, capacity_by_flavour
from .durations import format_duration, parse_duration
from .flavours import FLAVOURS, MIG_PROFILES, Flavour, get_flavour
from .job import CheckpointPolicy, JobKind, JobSpec, PriorityClass, Topology, TopologyLevel
from .sweep import (
    CategoricalParam, Direction, FloatParam, IntParam, Objective, SweepSpec, TrialTemplate,
)
from .reasons import Reason
from .team import Quota, TeamConfig, TeamsConfig

__all__ = [
    "AdmittedAs", "Placement", "PodPlacement", "Reason",
    "BlockConfig", "CategoricalParam", "CheckpointPolicy", "Direction", "FloatParam", "IntParam", "Objective",
    "SweepSpec", "TrialTemplate", "ClusterConfig", "Device", "FLAVOURS", "Flavour", "Health", "JobKind",
    "JobSpec", "MIG_PROFILES", "Node", "NodeGroup", "PriorityClass", "Quota", "TeamConfig", "TeamsConfig",
    "Topology", "TopologyLevel", "capacity_by_flavour", "format_duration", "get_flavour", "parse_duration",
]
