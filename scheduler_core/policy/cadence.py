"""Two decision-neutral economies for long replays: plan estimates on a cadence, skip passes with nothing to do.

``PlanEvery``: plan estimated starts on a cadence, as Slurm's backfill does (``bf_interval``), not on every pass.

``run_cycle`` gives every waiting job an estimated start. Planning them is the costliest part of a pass
(40 % of it on the busy Tuesday), yet it changes no decision: estimates only inform users. ``PlanEvery`` wraps
Shoal's policy so a pass with no recent plan plans as usual, and the passes after it carry that plan in
``Snapshot.plan`` (``run_cycle`` then reuses its estimates, never earlier than now). Decisions are identical to
planning every pass; estimates are at most ``every_s`` old. `shoal up` wraps its policy the same way (the live
controller and the simulator share it).

A pass in which a job the plan has not seen waits (a submission, a requeue) plans anyway (``run_cycle`` does
not use a plan that lacks a waiting job): the first estimate a user reads right after submitting is the one that
matters most, and a carried plan has none for the job, only its reservation if it got one, whose start is planned
on time limits (promises) and is often hours later than the likely start. On the busy Tuesday every reading in the
worst tenth of the estimate errors was such a first one. The pass decides first and plans last, so it knows by
then which jobs wait: only those passes plan (a new job waits in one pass of 25; most are admitted at once), and
the plan they make comes back on the result (``CycleResult.plan``) and is carried from then on.

``SkipWhenIdle``: with no job pending and no running job at its time limit, a policy has nothing to decide (every
decision — admit, preempt, reserve, defragment — is for a pending job, except stopping a job at its limit), so the
pass is not run. A test checks that decisions are the same with and without it.
"""

from __future__ import annotations

from dataclasses import replace

from .decisions import CycleResult
from .snapshot import Plan, Snapshot
from .types import Policy

PLAN_EVERY_S = 30.0


class PlanEvery:
    """A ``Policy``: ``policy`` with its estimates planned at most once per ``every_s`` of virtual time, and
    whenever a job new to the plan waits (``policy`` plans then by itself: ``run_cycle`` does)."""

    def __init__(self, policy: Policy, every_s: float = PLAN_EVERY_S) -> None:
        self.policy = policy
        self.every_s = every_s
        self._plan: Plan | None = None
        self.__name__ = getattr(policy, "__name__", "policy")

    def __call__(self, snapshot: Snapshot, now: float) -> CycleResult:
        plan = self._plan
        carry = plan if plan is not None and now - plan.made_at < self.every_s else None
        result = self.policy(replace(snapshot, plan=carry), now)
        if result.plan is not None:         # the pass planned: with no plan to carry, or a job new to it waits
            self._plan = result.plan
        return result


class SkipWhenIdle:
    """A ``Policy``: ``policy``, not called when nothing is pending and no running job has reached its limit."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.skipped = 0
        self.__name__ = getattr(policy, "__name__", "policy")

    def __call__(self, snapshot: Snapshot, now: float) -> CycleResult:
        if snapshot.pending or any(not job.terminating and now >= job.limit_end
                                   for job in snapshot.running):
            return self.policy(snapshot, now)
        self.skipped += 1
        return CycleResult(now=now)
