"""GPU flavours: each GPU type, and each MIG profile of the H100, is its own flavour with its own quota.

A flavour's unit is what a pod asks for: a whole GPU for ``h100``/``a100``, one slice for a MIG flavour.
So "1 GPU" never means two things, and "8 units of h100-mig-1g" is eight 1g.10gb slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True, slots=True)
class Flavour:
    """One kind of schedulable accelerator unit.

    ``speed`` is throughput relative to a whole H100 on a reference job; usage is also reported normalised by it,
    so landing on older hardware (or a small slice) is not a penalty on the bill.
    """

    name: str
    gpu_model: str
    mig_profile: str | None
    units_per_gpu: int
    memory_gb: int
    speed: float

    @property
    def is_mig(self) -> bool:
        return self.mig_profile is not None


def _mig(profile: str, per_gpu: int, memory_gb: int, compute_sevenths: int) -> Flavour:
    return Flavour(
        name=f"h100-mig-{profile.split('.')[0]}",
        gpu_model="H100",
        mig_profile=profile,
        units_per_gpu=per_gpu,
        memory_gb=memory_gb,
        speed=compute_sevenths / 7,
    )


#: The built-in catalogue. The A100's speed is its on-demand price ratio to the H100 (2.74 / 6.88 ≈ 0.4),
#: the honest yardstick of the reference document.
FLAVOURS: Mapping[str, Flavour] = MappingProxyType({
    f.name: f
    for f in (
        Flavour("h100", "H100", None, 1, 80, 1.0),
        Flavour("a100", "A100", None, 1, 80, 0.4),
        _mig("1g.10gb", 7, 10, 1),
        _mig("2g.20gb", 3, 20, 2),
        _mig("3g.40gb", 2, 40, 3),
    )
})

#: MIG profile name ("1g.10gb") → flavour name ("h100-mig-1g").
MIG_PROFILES: Mapping[str, str] = MappingProxyType(
    {f.mig_profile: f.name for f in FLAVOURS.values() if f.mig_profile is not None}
)

#: The GPU models a node can carry, by the flavour name of the whole GPU.
WHOLE_GPU_FLAVOURS: tuple[str, ...] = tuple(f.name for f in FLAVOURS.values() if not f.is_mig)


def get_flavour(name: str) -> Flavour:
    """The flavour called ``name``; ``KeyError`` names the known ones."""
    try:
        return FLAVOURS[name]
    except KeyError:
        raise KeyError(f"unknown flavour {name!r}; known flavours: {', '.join(FLAVOURS)}") from None
