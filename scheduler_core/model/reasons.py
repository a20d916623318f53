"""Why a job is not running: the reason codes users see, kept by the store and shown by the API and the CLI."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a job is not running. Shown to users verbatim, so each has a one-line explanation in ``message``."""

    QUOTA_FULL = "QuotaFull"                  # team at nominal + borrowing limit for every listed flavour
    COHORT_FULL = "CohortFull"                # within limits, but the cohort has no idle lendable quota
    WAITING_FOR_CAPACITY = "WaitingForCapacity"   # quota allows it; not enough free units right now
    WAITING_FOR_TOPOLOGY = "WaitingForTopology"   # enough free units, but not inside one domain of its level
    BEHIND_RESERVATION = "BehindReservation"      # would fit, but would delay a reserved job's start
    PREEMPTING_VICTIMS = "PreemptingVictims"      # victims signalled; starts when they exit
    NODE_UNHEALTHY = "NodeUnhealthy"              # the units it could use are on unhealthy nodes
    INVALID_FLAVOUR = "InvalidFlavour"            # no listed flavour exists in this cluster / team has no quota

    @property
    def is_quota(self) -> bool:
        """The job waits for quota (its team's or the cohort's), not for room on the nodes: such waits do not
        count in its block cap's window (``PendingJob.room_wait_since``)."""
        return self in (Reason.QUOTA_FULL, Reason.COHORT_FULL, Reason.INVALID_FLAVOUR)
