"""What the controller remembers about each gang it runs, between one executor event and the next.

The store holds the durable truth (state, placement, counters); this is the short-lived part that only matters
while pods live: which ranks started or ended, why the controller is stopping the gang, straggler evidence.
It is rebuilt by ``Controller.recover`` after a restart, so losing it loses nothing that matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..policy.decisions import PreemptReason
from .stragglers import StragglerDetector


class Stop(StrEnum):
    """Why a gang is being stopped; decides where the job goes once every pod has ended."""

    PREEMPT = "preempt"              # by the policy, back to the front of its queue
    POLICY_END = "policy_end"        # by the policy, not requeued (time limit)
    CANCEL = "cancel"                # asked by the user
    OWN_FAULT = "own_fault"          # a pod exited non-zero: restart within max_restarts, else FAILED
    NODE_FAILURE = "node_failure"    # infrastructure: requeue on the block's spare, avoiding the node
    READINESS = "readiness"          # infrastructure: pods not all running within the readiness timeout
    STRAGGLER = "straggler"          # infrastructure: moved off a slow node at its checkpoint
    LOST = "lost"                    # infrastructure: gone from the executor while the scheduler was down

    @property
    def infra(self) -> bool:
        return self in (Stop.NODE_FAILURE, Stop.READINESS, Stop.STRAGGLER, Stop.LOST)


@dataclass(slots=True)
class Gang:
    job_id: str
    nodes: tuple[str, ...]                     # node of each rank
    launched_at: float
    detector: StragglerDetector
    started: set[int] = field(default_factory=set)
    ended: dict[int, int | None] = field(default_factory=dict)   # rank → exit code (None: FAILED)
    marked_running: bool = False
    stop: Stop | None = None
    preempt_reason: PreemptReason | None = None
    first_bad_exit: int | None = None
    avoid: set[str] = field(default_factory=set)
    restart_block: str | None = None
    move_from: str | None = None               # a straggler's node, left at the job's next checkpoint
    cannot_start: bool = False                 # a pod's command could not be started: never retried
    message: str = ""

    @property
    def pods(self) -> int:
        return len(self.nodes)

    @property
    def all_started(self) -> bool:
        return len(self.started) >= self.pods

    @property
    def all_ended(self) -> bool:
        return len(self.ended) >= self.pods
