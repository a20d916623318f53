"""Where a job runs and how it holds its units: the words the policy decides in and the store keeps.

They live in the model, not the policy, because the store, the API and the executors record and show them
without needing (or importing) the decision code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AdmittedAs(StrEnum):
    """How a running job holds its units. Nominal is protected; borrowed can be reclaimed; scavenger is killed
    without ceremony whenever anyone else wants the units."""

    NOMINAL = "nominal"
    BORROWED = "borrowed"
    SCAVENGER = "scavenger"


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """One pod on one node: ``units`` index ``Node.devices[flavour]`` of that node."""

    node: str
    units: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Placement:
    flavour: str
    pods: tuple[PodPlacement, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(pod.node for pod in self.pods))
