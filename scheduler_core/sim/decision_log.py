"""Every decision of every pass, one line each: the record that shows a refactor or a speed-up decides the same.

A change meant to preserve behaviour (a faster index, the cycle split into stages) is checked by replaying a day
before and after it with ``shoal sim --decision-log FILE`` and comparing the two files (``cmp``, ``diff``): a
figure can stay equal while a decision moved, a decision line cannot. A line is the pass's virtual time and the
decision's ``repr`` (frozen dataclasses, floats written exactly), in the order the policy returned them.
"""

from __future__ import annotations

from typing import TextIO

from ..policy.decisions import CycleResult
from ..policy.snapshot import Snapshot
from ..policy.types import Policy


class DecisionLog:
    """A ``Policy``: ``policy``, writing each pass's decisions to ``out`` as it returns them."""

    def __init__(self, policy: Policy, out: TextIO) -> None:
        self.policy = policy
        self.out = out
        self.__name__ = getattr(policy, "__name__", "policy")

    def __call__(self, snapshot: Snapshot, now: float) -> CycleResult:
        result = self.policy(snapshot, now)
        at = repr(now)
        for kind in (result.preempts, result.relabels, result.admits, result.reservations, result.waits):
            self.out.writelines(f"{at} {decision!r}\n" for decision in kind)
        return result
