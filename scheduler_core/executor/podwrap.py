"""The tiny process every local pod runs under: ``python podwrap.py POD_DIR -- COMMAND...``.

Why a wrapper: pods outlive the scheduler, so the executor that later adopts a pod is not its parent and cannot
``wait`` for it. The wrapper is the pod's parent; it records the command's exit code in ``POD_DIR/exit.json`` for
whichever executor looks next: written to a temporary file, fsynced, renamed, the directory fsynced, and retried
(with backoff, for as long as it takes) when the disk refuses it. A job that finished while the state disk was full
is so recorded as finished once there is room again, and never mistaken for one that vanished (and run again). It also enforces the grace period on its own: on SIGTERM it reads the
deadline the executor wrote to ``POD_DIR/kill_at`` and kills the pod's process group then, so a job that ignores
SIGTERM is killed on time even while no scheduler is running.

Started by the executor as a session leader (its own process group, so one ``killpg`` reaches the whole pod).
Standard library only, and run with ``-I -S``: it must start fast and never import the scheduler.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import FrameType


#: Keys of ``exit.json`` beside ``exit_code``, ``how`` and ``at`` (``executor.base.CANNOT_START``).
CANNOT_START = "cannot_start"
_RETRY_MAX_S = 5.0


def _write_json(path: str, data: dict[str, object]) -> None:
    temp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temp, "w") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _write_json_durably(path: str, data: dict[str, object], attempts: int | None = None) -> bool:
    """``_write_json`` until it succeeds (``attempts``: at most that many tries). The record stays in memory
    meanwhile; the pod's directory shows the wrapper alive, so nobody takes the pod for lost."""
    delay, tried = 0.05, 0
    while True:
        try:
            _write_json(path, data)
            return True
        except OSError:
            tried += 1
            if attempts is not None and tried >= attempts:
                return False
            time.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: podwrap.py POD_DIR -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    pod_dir, command = argv[1], argv[3:]
    # Who we are, in case the executor died between starting us and recording our pid.
    _write_json_durably(os.path.join(pod_dir, "wrapper.json"), {"pid": os.getpid()})
    exit_path = os.path.join(pod_dir, "exit.json")

    def record_exit(code: int, how: str, *, attempts: int | None = None, **extra: object) -> None:
        if not os.path.exists(exit_path):
            _write_json_durably(exit_path, {"exit_code": code, "how": how, "at": time.time(), **extra}, attempts)

    def kill_pod() -> None:
        # A few tries only: the deadline is the deadline (the executor reads a missing record as killed).
        record_exit(-signal.SIGKILL, "killed when the grace period ended", attempts=3)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        # The command got the same SIGTERM (one process group); arm the backstop for its grace period.
        try:
            with open(os.path.join(pod_dir, "kill_at")) as handle:
                deadline = float(handle.read().strip())
        except (OSError, ValueError):
            return
        delay = deadline - time.time()
        if delay <= 0:
            kill_pod()
        else:
            signal.setitimer(signal.ITIMER_REAL, delay)

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGALRM, lambda signum, frame: kill_pod())
    try:
        child = subprocess.Popen(command)
    except (OSError, ValueError) as exc:
        why = f"cannot start {command[0]!r}: {getattr(exc, 'strerror', None) or exc}"
        try:
            print(f"shoal: {why}", file=sys.stderr, flush=True)
        except OSError:
            pass
        record_exit(127, why, **{CANNOT_START: True})
        return 0
    _write_json_durably(os.path.join(pod_dir, "child.json"), {"pid": child.pid})
    code = child.wait()
    record_exit(code, "exited")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
