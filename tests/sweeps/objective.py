"""A trial program for the end-to-end tests: ``python -m tests.sweeps.objective --x 7 --steps 6``.

The loss after step ``t`` is ``x + 4 / (t + 1)``: a trial with a large ``x`` falls behind the median at every step,
so the median pruner reliably stops some of a sweep's trials. Each step takes ``--step-seconds``; the job contract
is kept (checkpoint on SIGTERM, resume from the newest checkpoint), and progress goes through ``sweeps.trial``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from scheduler_core import jobkit
from sweeps import trial


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--step-seconds", type=float, default=0.2)
    args = parser.parse_args()
    assert trial.params()["x"] == args.x            # the same parameters in the env and in the args
    checkpoint = jobkit.resume()
    first = json.loads(checkpoint.read("state.json"))["step"] + 1 if checkpoint else 0
    loss = float("nan")
    for step in range(first, args.steps):
        time.sleep(args.step_seconds)               # one step of "training"
        loss = args.x + 4.0 / (step + 1)
        if trial.report(step, loss):
            return 0
        if jobkit.should_checkpoint() or jobkit.should_stop():
            jobkit.save(step, {"state.json": json.dumps({"step": step}).encode()})
        if jobkit.should_stop():
            return 0
    trial.finish(loss)
    return 0


if __name__ == "__main__":
    sys.exit(main())
