"""What a simulated run leaves behind: one ``JobLog`` per job and a time series of the cluster's state.

The engine fills these as the controller acts (through the store it writes to); ``metrics`` and ``report`` read
them and nothing else, so every figure can be recomputed from a run without re-running it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .waste import WasteLedger


@dataclass(frozen=True, slots=True)
class Admission:
    """One time the job was bound to nodes."""

    at: float
    flavour: str
    nodes: tuple[str, ...]
    blocks: int
    admitted_as: str


@dataclass(frozen=True, slots=True)
class Interruption:
    """One time the job lost its units before finishing. ``cause``: ``preemption`` (signalled and requeued),
    ``failure`` (an infrastructure fault: node lost, readiness timeout), ``time_limit`` or ``own_fault``.
    ``lost_gpu_s``: work since the last checkpoint thrown away, in whole-GPU-equivalent seconds."""

    at: float
    cause: str
    lost_gpu_s: float


@dataclass(slots=True)
class JobLog:
    """One job's story. Times are virtual seconds; ``gpus`` is its size in whole-GPU equivalents."""

    id: str
    team: str
    kind: str
    flavours: tuple[str, ...]
    units: int
    gpus: float
    submitted_at: float
    work_s: float
    measured: bool
    in_quota: bool
    admissions: list[Admission] = field(default_factory=list)
    running_at: float | None = None          # first time every pod ran
    interruptions: list[Interruption] = field(default_factory=list)
    finished_at: float | None = None
    final_state: str | None = None
    #: ``(at, estimated start, reason)`` read during the first wait, at submission and each hour (``sim.eta``).
    eta_readings: list[tuple[float, float | None, str]] = field(default_factory=list)

    @property
    def first_admitted_at(self) -> float | None:
        return self.admissions[0].at if self.admissions else None

    def wait_s(self, end: float) -> float:
        """Submission to first admission; a job never admitted counts as waiting until ``end``."""
        start = self.first_admitted_at
        return (start if start is not None else end) - self.submitted_at


@dataclass(slots=True)
class Series:
    """The cluster over time, one column per quantity: the values at ``at[i]`` hold until ``at[i + 1]``.

    Per flavour: units ``allocated`` and ``healthy`` (working capacity); ``fitting`` — whether some pending job
    of that flavour would fit in the idle units by count; ``admissible`` — whether one of those was held back by
    something other than quota (capacity, topology, a reservation, victims still leaving), by the policy's own
    reasons. A sample is kept only when something changed.
    """

    flavours: tuple[str, ...]
    at: list[float] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    allocated: dict[str, list[int]] = field(default_factory=dict)
    healthy: dict[str, list[int]] = field(default_factory=dict)
    fitting: dict[str, list[bool]] = field(default_factory=dict)
    admissible: dict[str, list[bool]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for flavour in self.flavours:
            self.allocated.setdefault(flavour, [])
            self.healthy.setdefault(flavour, [])
            self.fitting.setdefault(flavour, [])
            self.admissible.setdefault(flavour, [])

    def add(self, at: float, pending: int, running: int, state: dict[str, tuple[int, int, bool, bool]]) -> None:
        columns: tuple[dict[str, list[Any]], ...] = (self.allocated, self.healthy, self.fitting, self.admissible)
        if self.at and pending == self.pending[-1] and running == self.running[-1] and all(
                tuple(column[f][-1] for column in columns) == state[f] for f in self.flavours):
            return
        if self.at and at <= self.at[-1]:
            self.at.pop()
            self.pending.pop()
            self.running.pop()
            for f in self.flavours:
                for column in columns:
                    column[f].pop()
        self.at.append(at)
        self.pending.append(pending)
        self.running.append(running)
        for f in self.flavours:
            for column, value in zip(columns, state[f]):
                column[f].append(value)


@dataclass(slots=True)
class RunRecord:
    """A whole run: the inputs that shape the figures, every job's log, and the time series."""

    workload: str
    policy: str
    seed: int
    window: tuple[float, float]
    end: float
    quotas: dict[str, dict[str, int]]            # team → flavour → nominal units
    units_per_gpu: dict[str, int]                 # flavour → units per whole GPU
    block_gpus: int                               # whole-GPU capacity of the largest block (placement rule)
    jobs: list[JobLog]
    series: Series
    #: Preemptions the policy decided from the window's start, by ``PreemptReason`` (a decision, whether or not
    #: the job was still running when it was applied).
    preempt_reasons: dict[str, int] = field(default_factory=dict)
    node_failures: int = 0
    cycles: int = 0
    wall_s: float = 0.0
    notes: tuple[str, ...] = ()
    #: The idle GPUs of the fitting waits, shared among the jobs that waited (``--explain-waste``), and how long
    #: such jobs waited by "flavour/reason".
    waste: WasteLedger | None = None

    @property
    def fitting_wait_s(self) -> dict[str, float]:
        """Seconds during which a pending job that would fit the idle units by count waited, by "flavour/reason"."""
        return self.waste.wait_s if self.waste is not None else {}
