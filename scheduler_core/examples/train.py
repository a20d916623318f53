"""A toy training job that keeps the job contract: ``python -m scheduler_core.examples.train --steps 120``.

Each rank prints who and where it is (``RANK``, ``WORLD_SIZE``, the node, ``CUDA_VISIBLE_DEVICES``), resumes from
the newest verified checkpoint, "trains" by sleeping ``--step-seconds`` per step, and saves (rank 0) whenever the
contract asks: every ``--save-every`` steps, on ``shoal checkpoint`` (SIGUSR1), and on SIGTERM, after which it
exits 0 within the grace period. Standard library and ``scheduler_core.jobkit`` only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .. import jobkit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_core.examples.train")
    parser.add_argument("--steps", type=int, default=120, help="steps to train (default 120)")
    parser.add_argument("--step-seconds", type=float, default=0.5, help="how long one step takes (default 0.5)")
    parser.add_argument("--save-every", type=int, default=20, help="checkpoint every N steps (0: only when asked)")
    parser.add_argument("--fail-at-step", type=int, default=None, help="exit 3 at this step (a job's own fault)")
    args = parser.parse_args(argv)

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    where = os.environ.get("SHOAL_NODE", "?")
    print(f"rank {rank}/{world} of job {os.environ.get('SHOAL_JOB_ID', '?')} on {where}, "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}, "
          f"master {os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}", flush=True)
    jobkit.context().install_signal_handlers()

    checkpoint = jobkit.resume()
    step = checkpoint.step + 1 if checkpoint is not None else 0
    loss = json.loads(checkpoint.read("state.json"))["loss"] if checkpoint is not None else 10.0
    print(f"rank {rank}: {'resuming from step ' + str(checkpoint.step) if checkpoint else 'starting fresh'}",
          flush=True)

    while step < args.steps:
        began = time.monotonic()
        if args.fail_at_step is not None and step == args.fail_at_step:
            print(f"rank {rank}: failing on purpose at step {step}", flush=True)
            return 3
        time.sleep(args.step_seconds)
        loss *= 0.98
        jobkit.report_step_time(time.monotonic() - began)
        periodic = args.save_every > 0 and step > 0 and step % args.save_every == 0
        # Read the stop flag once: a SIGTERM landing between two checks must still be saved before exiting.
        stop = jobkit.should_stop()
        if periodic or stop or jobkit.should_checkpoint():
            jobkit.save(step, {"state.json": json.dumps({"step": step, "loss": loss}).encode()})
            if rank == 0:
                print(f"rank {rank}: checkpoint at step {step} (loss {loss:.4f})", flush=True)
        if stop:
            print(f"rank {rank}: SIGTERM: saved step {step}, exiting", flush=True)
            return 0
        step += 1
    print(f"rank {rank}: done after {args.steps} steps (loss {loss:.4f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
