"""What a workload is: jobs to submit at given instants, each with the work it needs and how it checkpoints.

A ``JobSpec`` says what the user asked for; a simulation also needs what the user did not say: how long the job
really runs and what a checkpoint costs it. Those live beside the spec in ``WorkloadJob``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.cluster import ClusterConfig
from ...model.flavours import FLAVOURS
from ...model.job import JobSpec
from ...model.team import TeamsConfig


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    """One job of a workload.

    ``work_s`` is the run time the job needs on its first listed flavour, without checkpoints, restarts or pod
    start-up; on a flavour of another speed it takes ``work_s * speed(first) / speed(that flavour)``.
    ``measured`` is false for warm-up jobs, which load the cluster but are left out of the figures.
    ``source`` says where the job came from (``path:line`` for a trace row), for error messages and reports.
    ``overlaid`` names the spec fields the overlay filled in (a trace's own columns are not in it).
    """

    id: str
    spec: JobSpec
    submit_at: float
    work_s: float
    checkpoint_cost_s: float
    measured: bool = True
    source: str = ""
    overlaid: frozenset[str] = frozenset()

    @property
    def units(self) -> int:
        return self.spec.total_units

    @property
    def gpus(self) -> float:
        """Size in whole-GPU equivalents: a 1g.10gb slice is a seventh of a GPU."""
        return self.units / FLAVOURS[self.spec.flavour[0]].units_per_gpu

    def run_s_on(self, flavour: str) -> float:
        """Seconds of work on ``flavour``: faster hardware finishes the same work sooner."""
        first = FLAVOURS[self.spec.flavour[0]].speed
        return self.work_s * first / FLAVOURS[flavour].speed


@dataclass(frozen=True, slots=True)
class Workload:
    """Jobs sorted by submission, with the cluster and teams they are meant for.

    ``window`` is the span the figures cover, ``(start, end)`` in virtual seconds; jobs submitted outside it are
    warm-up (``measured`` false). ``notes`` are the documented assumptions the report repeats (overlay, scaling).
    """

    name: str
    jobs: tuple[WorkloadJob, ...]
    cluster: ClusterConfig
    teams: TeamsConfig
    window: tuple[float, float]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def measured_jobs(self) -> list[WorkloadJob]:
        return [job for job in self.jobs if job.measured]
