"""The policy's output: decisions, each with a machine-readable reason. Nothing changes until a caller applies them."""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum

from ..model.allocation import AdmittedAs, Placement
from ..model.reasons import Reason as Reason
from .record import record
from .snapshot import Plan


class PreemptReason(StrEnum):
    RECLAIM = "Reclaim"              # a lender takes back its nominal quota from a borrower
    RESERVATION = "Reservation"      # start a reserved gang now rather than hours from now
    HIGHER_BAND = "HigherBand"       # critical work, or guaranteed work over scavengers
    TIME_LIMIT = "TimeLimit"         # the job reached its time limit
    DEFRAGMENT = "Defragment"        # move a small job so a large free shape opens


@record
class Admit:
    job_id: str
    placement: Placement
    admitted_as: AdmittedAs
    backfill: bool = False


@record
class Preempt:
    """Signal ``job_id`` (SIGTERM, ``grace_s``, then kill). ``requeue``: it goes back to the front of its queue;
    otherwise (time limit) it ends."""

    job_id: str
    reason: PreemptReason
    grace_s: float
    requeue: bool = True
    for_job: str | None = None
    #: Nodes it must not come back to: a job moved so a gang can have them would otherwise take them back from
    #: that gang when it restarts (and be moved again).
    avoid: tuple[str, ...] = ()


@record
class Reserve:
    """``job_id`` is expected to start on ``nodes`` at ``start_at``; lower work may use them only if it ends first."""

    job_id: str
    flavour: str
    nodes: tuple[str, ...]
    start_at: float


@record
class Wait:
    """``estimate_note``: what the estimated start counts on when it is a guess (minimum run times, the idle
    reaper, how long jobs usually run); the caller shows it beside ``message``."""

    job_id: str
    reason: Reason
    message: str
    position: int
    estimated_start: float | None = None
    estimate_note: str = ""


@record
class Relabel:
    """A running job's quota label changes; nothing stops. A team's preemptible job admitted as nominal becomes
    borrowed (reclaimable) so that the team's non-preemptible ``for_job``, admitted in the same cycle, takes the
    nominal quota it held."""

    job_id: str
    admitted_as: AdmittedAs
    for_job: str


@record
class CycleResult:
    now: float
    admits: list[Admit] = field(default_factory=list)
    preempts: list[Preempt] = field(default_factory=list)
    reservations: list[Reserve] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    relabels: list[Relabel] = field(default_factory=list)
    #: The estimates this pass planned, for the caller to carry to the next passes (``cadence.PlanEvery``);
    #: ``None`` when it carried the snapshot's plan. A by-product, not a decision: not compared.
    plan: Plan | None = field(default=None, compare=False)
