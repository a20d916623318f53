"""The cluster: blocks of nodes, each node's GPUs (whole or MIG-sliced), leaves, hot spares, small-job blocks.

``ClusterConfig`` is what an operator writes (``deploy/clusters/*.yaml``); ``Node`` is what it expands to.
A block may be written once with ``repeat`` so the 512-node reference cluster stays a page of YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .flavours import FLAVOURS, MIG_PROFILES, WHOLE_GPU_FLAVOURS


class Health(StrEnum):
    """Node health (DESIGN §3.3). Only a ready node takes new work: a suspect node finishes its healthy work but
    takes none, a draining one lets its jobs finish, one in repair runs nothing, and one in burn-in runs only the
    scheduler's own check job. ``runtime.node_lifecycle`` says how a node moves between them."""

    READY = "ready"
    SUSPECT = "suspect"
    DRAINING = "draining"
    REPAIR = "repair"
    BURNIN = "burnin"


@dataclass(frozen=True, slots=True)
class Device:
    """One schedulable unit on a node: a whole GPU (``slice is None``) or one MIG slice of a GPU."""

    gpu: int
    slice: int | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """A machine, as configured. Health changes at run time and lives in the store, not here.

    ``devices[flavour]`` lists the node's units of that flavour; a placement names units by their index in it.
    """

    name: str
    block: str
    leaf: str
    gpu_model: str
    gpus: int
    cpus: int
    memory_gb: int
    devices: dict[str, tuple[Device, ...]]
    spare: bool = False
    small_jobs: bool = False

    @property
    def capacity(self) -> dict[str, int]:
        return {flavour: len(units) for flavour, units in self.devices.items()}

    @property
    def is_mig(self) -> bool:
        return any(FLAVOURS[f].is_mig for f in self.devices)


_Name = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9\-{}:]*$")]


class NodeGroup(BaseModel):
    """``count`` identical nodes inside a block."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=1, le=4096)
    gpu: str = Field(default="h100", description="whole-GPU flavour of the node's GPUs: h100 or a100")
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    cpus_per_node: int = Field(default=192, ge=1)
    memory_gb_per_node: int = Field(default=2048, ge=1)
    mig: str | list[str] | None = Field(
        default=None,
        description="MIG profile of every GPU ('1g.10gb'), or one profile per GPU; omitted: whole GPUs",
    )

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value not in WHOLE_GPU_FLAVOURS:
            raise ValueError(f"unknown GPU {value!r}; use one of: {', '.join(WHOLE_GPU_FLAVOURS)}")
        return value

    @model_validator(mode="after")
    def _valid_mig(self) -> Self:
        if self.mig is None:
            return self
        profiles = [self.mig] * self.gpus_per_node if isinstance(self.mig, str) else list(self.mig)
        if len(profiles) != self.gpus_per_node:
            raise ValueError(f"mig lists {len(profiles)} profiles for {self.gpus_per_node} GPUs per node")
        for profile in profiles:
            if profile not in MIG_PROFILES:
                raise ValueError(f"unknown MIG profile {profile!r}; use one of: {', '.join(MIG_PROFILES)}")
        if self.gpu != "h100":
            raise ValueError("MIG slices are offered on h100 nodes only")
        return self

    def mig_profiles(self) -> list[str | None]:
        if self.mig is None:
            return [None] * self.gpus_per_node
        return [self.mig] * self.gpus_per_node if isinstance(self.mig, str) else list(self.mig)


class BlockConfig(BaseModel):
    """One network block (leaf switches under one spine port group); ``repeat`` stamps out identical blocks.

    With ``repeat: N`` the name must contain ``{i}`` (formatted like ``{i:02d}``), numbered from ``start``.
    The last ``spares`` nodes of each block are hot spares: they run only gangs restarted after a failure.
    """

    model_config = ConfigDict(extra="forbid")

    name: _Name
    repeat: int = Field(default=1, ge=1, le=1024)
    start: int = Field(default=0, ge=0)
    nodes: list[NodeGroup] | int
    gpu: str | None = Field(default=None, description="shorthand for one group when `nodes` is a count")
    nodes_per_leaf: int = Field(default=8, ge=1)
    spares: int = Field(default=0, ge=0)
    small_jobs: bool = Field(default=False, description="single-node jobs, notebooks and trials go here first")

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.repeat > 1 and "{i" not in self.name:
            raise ValueError("a block with repeat > 1 needs '{i}' in its name, for example 'h100-b{i:02d}'")
        if isinstance(self.nodes, int):
            if self.nodes < 1:
                raise ValueError("a block needs at least one node")
            self.nodes = [NodeGroup(count=self.nodes, gpu=self.gpu or "h100")]
        elif self.gpu is not None:
            raise ValueError("give 'gpu' per node group when 'nodes' is a list of groups")
        if self.spares >= self.node_count:
            raise ValueError(f"{self.spares} spares leave no working node among {self.node_count}")
        return self

    @property
    def groups(self) -> list[NodeGroup]:
        assert isinstance(self.nodes, list)
        return self.nodes

    @property
    def node_count(self) -> int:
        return sum(group.count for group in self.groups)

    def block_names(self) -> list[str]:
        if self.repeat == 1 and "{i" not in self.name:
            return [self.name]
        return [self.name.format(i=self.start + k) for k in range(self.repeat)]


class ClusterConfig(BaseModel):
    """A whole cluster as written in ``deploy/clusters/NAME.yaml``."""

    model_config = ConfigDict(extra="forbid")

    name: _Name
    description: str = ""
    blocks: list[BlockConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_blocks(self) -> Self:
        seen: set[str] = set()
        for block in self.blocks:
            for name in block.block_names():
                if name in seen:
                    raise ValueError(f"block {name!r} is defined twice")
                seen.add(name)
        return self

    def expand(self) -> list[Node]:
        """Every node of the cluster, in a stable order (block, then index)."""
        nodes: list[Node] = []
        for block in self.blocks:
            for block_name in block.block_names():
                index = 0
                total = block.node_count
                for group in block.groups:
                    for _ in range(group.count):
                        nodes.append(_make_node(block, block_name, group, index, spare=index >= total - block.spares))
                        index += 1
        return nodes


def _make_node(block: BlockConfig, block_name: str, group: NodeGroup, index: int, *, spare: bool) -> Node:
    devices: dict[str, list[Device]] = {}
    for gpu, profile in enumerate(group.mig_profiles()):
        if profile is None:
            devices.setdefault(group.gpu, []).append(Device(gpu))
        else:
            flavour = FLAVOURS[MIG_PROFILES[profile]]
            devices.setdefault(flavour.name, []).extend(Device(gpu, s) for s in range(flavour.units_per_gpu))
    return Node(
        name=f"{block_name}-n{index:02d}",
        block=block_name,
        leaf=f"{block_name}-l{index // block.nodes_per_leaf}",
        gpu_model=FLAVOURS[group.gpu].gpu_model,
        gpus=group.gpus_per_node,
        cpus=group.cpus_per_node,
        memory_gb=group.memory_gb_per_node,
        devices={flavour: tuple(units) for flavour, units in devices.items()},
        spare=spare,
        small_jobs=block.small_jobs,
    )


def capacity_by_flavour(nodes: list[Node], *, include_spares: bool = False) -> dict[str, int]:
    """Units of each flavour in ``nodes`` (hot spares left out unless asked for)."""
    total: dict[str, int] = {}
    for node in nodes:
        if node.spare and not include_spares:
            continue
        for flavour, count in node.capacity.items():
            total[flavour] = total.get(flavour, 0) + count
    return total
