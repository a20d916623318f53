"""The policy's input: a frozen picture of the cluster, the teams and the queue at one instant.

These are lean, slotted types on purpose: the cycle walks thousands of them in a few milliseconds. The live
controller and the simulator build the same ``Snapshot`` from their store; ``run_cycle`` never sees anything else.
``AdmittedAs`` and ``Placement`` live in ``model.allocation`` (the store keeps them) and are re-exported here.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from ..model.allocation import AdmittedAs as AdmittedAs, Placement as Placement, PodPlacement as PodPlacement
from ..model.cluster import Health, Node
from ..model.job import JobKind, JobSpec, PriorityClass, TopologyLevel
from ..model.team import Quota, TeamConfig

if TYPE_CHECKING:
    from .carried import CarriedIndex


class Band(IntEnum):
    """Preemption bands, lowest first. A job may preempt only jobs of a strictly lower band."""

    SCAVENGER = 0
    BORROWED = 1
    GUARANTEED = 2
    CRITICAL = 3


def band_of(priority_class: PriorityClass, admitted_as: AdmittedAs) -> Band:
    if priority_class is PriorityClass.CRITICAL:
        return Band.CRITICAL
    if admitted_as is AdmittedAs.SCAVENGER or priority_class is PriorityClass.SCAVENGER:
        return Band.SCAVENGER
    return Band.GUARANTEED if admitted_as is AdmittedAs.NOMINAL else Band.BORROWED


#: Resources that dominant-resource fairness weighs.
RESOURCES = ("gpu", "cpu", "memory")


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node as the policy sees it: topology, capacity per flavour, health. Free units are derived from
    ``Snapshot.running``, never stored twice."""

    name: str
    block: str
    leaf: str
    capacity: Mapping[str, int]
    cpus: int
    memory_gb: int
    health: Health = Health.READY
    spare: bool = False
    small_jobs: bool = False

    @classmethod
    def from_node(cls, node: Node, health: Health = Health.READY) -> NodeState:
        return cls(name=node.name, block=node.block, leaf=node.leaf, capacity=MappingProxyType(node.capacity),
                   cpus=node.cpus, memory_gb=node.memory_gb, health=health, spare=node.spare,
                   small_jobs=node.small_jobs)

    @property
    def schedulable(self) -> bool:
        """Takes new work. A suspect node keeps what it runs but takes nothing new."""
        return self.health is Health.READY


@dataclass(frozen=True, slots=True)
class TeamState:
    """A team's limits and its fair-share history.

    ``decayed_usage[r]`` is the team's past use of resource ``r`` (``gpu`` in GPU-seconds normalised by flavour
    speed, ``cpu`` in CPU-seconds, ``memory`` in GB-seconds), decayed with ``PolicyConfig.usage_half_life_s``
    up to the snapshot's instant. Current allocations are not in it: the policy adds them itself.
    """

    name: str
    cohort: str
    weight: float
    quotas: Mapping[str, Quota]
    decayed_usage: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_config(cls, team: TeamConfig, decayed_usage: Mapping[str, float] | None = None) -> TeamState:
        return cls(name=team.name, cohort=team.cohort, weight=team.weight, quotas=MappingProxyType(team.quotas),
                   decayed_usage=MappingProxyType(dict(decayed_usage or {})))

    def nominal(self, flavour: str) -> int:
        quota = self.quotas.get(flavour)
        return quota.nominal if quota else 0


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What the policy needs to know of a job: its shape and its rules, nothing of how it runs."""

    id: str
    team: str
    kind: JobKind
    priority_class: PriorityClass
    flavours: tuple[str, ...]
    pods: int
    units_per_pod: int
    cpus_per_pod: int
    memory_gb_per_pod: int
    topology_level: TopologyLevel | None
    topology_required: bool
    time_limit_s: float
    preemptible: bool
    grace_s: float
    checkpoint_cost_s: float
    submitted_at: float
    #: ``pods × units_per_pod``, worked out once: a pass reads it tens of thousands of times.
    units: int = field(init=False, repr=False, compare=False)
    #: Jobs with equal shapes have equal placements: the cycle evaluates each shape once (a 500-trial sweep is
    #: one placement problem). Worked out once, like ``units``.
    shape: tuple[object, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "units", self.pods * self.units_per_pod)
        object.__setattr__(self, "shape", (self.flavours, self.pods, self.units_per_pod, self.cpus_per_pod,
                                           self.memory_gb_per_pod, self.topology_level, self.topology_required))

    @classmethod
    def from_spec(cls, job_id: str, spec: JobSpec, submitted_at: float, *, default_grace_s: float = 300.0,
                  node_cpus: int = 192, node_memory_gb: int = 2048, gpus_per_node: int = 8) -> JobRequest:
        """Derive the request from a spec. CPUs and memory default to the GPU's share of a node."""
        share = spec.gpus_per_pod / gpus_per_node
        cost = spec.checkpoint.cost if spec.checkpoint.cost is not None else min(spec.checkpoint.grace_period, 60.0)
        return cls(
            id=job_id, team=spec.team, kind=spec.kind, priority_class=spec.priority_class,
            flavours=spec.flavour, pods=spec.pods, units_per_pod=spec.gpus_per_pod,
            cpus_per_pod=spec.cpus_per_pod or max(1, int(node_cpus * min(share, 1.0))),
            memory_gb_per_pod=spec.memory_gb_per_pod or max(1, int(node_memory_gb * min(share, 1.0))),
            topology_level=spec.topology.level if spec.topology else None,
            topology_required=bool(spec.topology and spec.topology.is_required),
            time_limit_s=spec.time_limit, preemptible=spec.preemptible,
            grace_s=spec.checkpoint.grace_period if spec.preemptible else 0.0,
            checkpoint_cost_s=cost, submitted_at=submitted_at,
        )


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting to run.

    ``queued_at`` is when it last entered the queue; ``front_of_queue`` marks a preemption victim, which goes back
    ahead of its team's other work. ``attained_gpu_s`` is the GPU × time it has already had (Tiresias).
    ``restart_block`` names the block of a gang broken by a failure, whose hot spare it should take;
    ``avoid_nodes`` lists nodes it should not use (a straggler's, a failed one's, the nodes of a gang it was moved
    for): for ``PolicyConfig.avoid_nodes_for_s`` from ``queued_at`` only, so a job whose only room is such a node
    (back in service by then) is not kept waiting for ever.
    The block cap of a block-sized gang (``topology_cap_wait_s``) runs from ``block_cap_since(now)``: ``now`` less
    the time it has waited for room rather than quota (its runs of such waits laid end to end), so a gang held for
    hours by quota still gets its time to find whole blocks. While it waits for room, ``room_wait_since`` is that
    instant, fixed; while quota holds it, ``quota_held_after_s`` is the time it waited for room before, and the
    instant moves with ``now`` (kept as a duration so the job is the same object pass after pass); with neither,
    the window runs from ``queued_at``. Widening after ``topology_widen_after_s`` runs from ``queued_at``: five
    minutes' latency against locality, where the time already waited counts.
    """

    request: JobRequest
    queued_at: float
    front_of_queue: bool = False
    attained_gpu_s: float = 0.0
    restart_block: str | None = None
    avoid_nodes: frozenset[str] = frozenset()
    room_wait_since: float | None = None
    quota_held_after_s: float | None = None

    def block_cap_since(self, now: float) -> float:
        """When its block cap's window started, as of ``now``."""
        if self.room_wait_since is not None:
            return max(self.queued_at, self.room_wait_since)
        if self.quota_held_after_s is not None:
            return max(self.queued_at, now - self.quota_held_after_s)
        return self.queued_at


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding units. ``terminating`` means it has been signalled and holds its units until it exits,
    by ``terminate_by`` at the latest. ``preempted_for`` names the pending job it was preempted for (the
    ``Preempt.for_job`` the caller applied): that job waits for it instead of choosing more victims."""

    request: JobRequest
    placement: Placement
    admitted_as: AdmittedAs
    started_at: float
    last_checkpoint_at: float | None = None
    terminating: bool = False
    terminate_by: float | None = None
    preempted_for: str | None = None
    #: A notebook's idle clock, as the idle reaper last reported it: its last activity and the limit after which
    #: the reaper frees its slice (``None``: not reported). Only estimates read it; no decision does.
    idle_since: float | None = None
    idle_limit_s: float | None = None
    #: ``band_of`` its class and label, worked out once: victim searches read it for every running job.
    band: Band = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "band", band_of(self.request.priority_class, self.admitted_as))

    @property
    def limit_end(self) -> float:
        """When its time limit runs out: the promise reservations, the quota clock and enforcement all keep to."""
        return self.started_at + self.request.time_limit_s


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Every knob of the cycle, with the defaults of DESIGN §3.2."""

    min_run_time_s: float = 1800.0
    topology_widen_after_s: float = 300.0
    #: How long a ``preferred`` gang as large as a block keeps to the fewest blocks it could need before it may
    #: spread like any widened job (a failed node takes 48 h to repair; a gang should not idle that long).
    topology_cap_wait_s: float = 7200.0
    usage_half_life_s: float = 7 * 86400.0
    #: Attained-service thresholds (GPU-seconds) that split short, small work into discrete levels.
    service_levels_gpu_s: tuple[float, ...] = (3600.0, 8 * 3600.0)
    #: A job waiting longer than this is promoted to the top service level (no starvation).
    starvation_after_s: float = 2 * 3600.0
    small_job_max_units: int = 8
    #: If the head job's reservation starts later than this from now, preempting borrowers for it is costed.
    reservation_preempt_after_s: float = 6 * 3600.0
    #: Defragment when the largest free whole-node shape is below this fraction of the free GPUs.
    defrag_ratio: float = 0.25
    defrag_max_moves: int = 4
    #: How long a reclaim waits for borrowers near its own size before it stops a far larger one.
    reclaim_patience_s: float = 300.0
    #: A job may be moved for a gang once it has run this long (moving costs it a checkpoint, not its place).
    migrate_min_run_s: float = 300.0
    #: The most jobs moved at once to open a domain for a gang waiting for one, per 512 units the gang needs
    #: (``0``: never move for a gang).
    migrate_max_moves: int = 32
    #: Blocked jobs (capacity or topology) whose plan becomes a reservation that backfill must not delay, in
    #: cycle order; a job that has waited longer than ``starvation_after_s`` gets one beyond this count, up to
    #: twice it, so a big gang behind a stream of small blocked jobs is not starved of one.
    max_reservations: int = 8
    #: How long a requeued job keeps off the nodes it left (``PendingJob.avoid_nodes``). Long enough for the gang
    #: it was moved for to take them, or for a repaired node to prove itself; bounded, so that avoiding a node
    #: never becomes a reason to wait for good (a liveness rule: a job that fits must start).
    avoid_nodes_for_s: float = 1800.0
    #: Non-preemptible work (not notebooks) may borrow above its team's nominal only while, after it, the cohort
    #: keeps at least this share of its nominal quota of the flavour free to lend (``1``: never). Such units are
    #: not reclaimable until the job ends: the share keeps the lenders' own work room beside them. A job whose
    #: time limit is shorter than ``unreclaimable_borrow_full_after_s`` needs that much less of it kept, unless a
    #: preemptible borrower that quota held back waits in the cohort (``quota.unreclaimable_share``).
    unreclaimable_borrow_free_share: float = 0.5
    #: The time limit from which a non-preemptible borrower needs the whole ``unreclaimable_borrow_free_share``
    #: kept free: a loan no reclaim can end costs the lenders its units for as long as it may run, so the cohort
    #: keeps free in proportion to that, up to the share for a loan that outlasts the office day.
    unreclaimable_borrow_full_after_s: float = 12 * 3600.0


#: Ratios a (team, kind) needs before its own history speaks for it instead of its kind's.
MIN_RUNTIME_SAMPLES = 4


@dataclass(frozen=True, slots=True)
class RunTimes:
    """How long jobs really run, as a fraction of their time limits, from the jobs that finished lately
    (``runtime.runtimes`` keeps the history): the recent ratios, sorted, per (team, kind) and per kind; only keys
    with at least ``MIN_RUNTIME_SAMPLES`` of them.

    Estimated starts use it: a job is expected to hold its units for ``ratio × time limit``, not its limit —
    users ask for more than they use (Slurm's estimates, from limits, come out late; Tsafrir, Etsion and
    Feitelson, 2007, predict from the user's recent jobs instead). A ratio of 1 (no history) is the time limit.
    A running job's is conditioned on how long it has already run (:meth:`ratio_after`). Decisions never read
    it: reservations keep to time limits, which are promises."""

    by_team: Mapping[tuple[str, str], tuple[float, ...]] = field(default_factory=dict)
    by_kind: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def ratio(self, team: str, kind: str) -> float:
        """The median ratio of the team's recent jobs of ``kind`` (its kind's, with too few of the team's)."""
        value = self.ratio_after(team, kind, -math.inf)
        return 1.0 if value is None else min(max(value, 0.01), 1.0)

    def ratio_after(self, team: str, kind: str, used: float) -> float | None:
        """The median ratio of the recent jobs that ran longer than ``used`` (a running job's share of its
        limit so far): when a job that has run this long is likely to end, by those that ran at least as long
        (the team's, or its kind's when too few of the team's did). ``None`` when too few did. Called for every
        running job of each plan: the median is read in place, without copying the samples."""
        for samples in (self.by_team.get((team, kind), ()), self.by_kind.get(kind, ())):
            first = bisect_right(samples, used)
            count = len(samples) - first
            if count >= MIN_RUNTIME_SAMPLES:
                middle = first + count // 2
                return samples[middle] if count % 2 else (samples[middle - 1] + samples[middle]) / 2
        return None

    @property
    def known(self) -> bool:
        return bool(self.by_team or self.by_kind)


@dataclass(frozen=True, slots=True)
class Plan:
    """Estimated starts from :func:`~scheduler_core.policy.cycle.plan`, made at ``made_at``: job id → instant
    (``None``: no start in sight, e.g. a shape larger than any free domain will ever be)."""

    made_at: float
    estimates: Mapping[str, float | None] = field(default_factory=dict)
    #: What each guessed estimate counts on (``Wait.estimate_note``).
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one cycle may look at. Immutable: the cycle copies what it changes.

    ``plan``: the last plan, when the caller plans on its own cadence; ``None`` makes every cycle plan.
    ``runtimes``: how long jobs really run, for estimated starts only.
    ``carried``: the caller's index of the running jobs, kept from pass to pass (``policy.carried``); a cache
    that changes no decision, so ``None`` (every pass builds its own) gives the same result, only slower."""

    nodes: tuple[NodeState, ...]
    teams: Mapping[str, TeamState]
    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...]
    config: PolicyConfig = PolicyConfig()
    plan: Plan | None = None
    runtimes: RunTimes = RunTimes()
    carried: CarriedIndex | None = field(default=None, compare=False, repr=False)
