"""A stand-in for the single-user server in the warm-start tests: ``python -m tests.hub_spawner.zygote_probe MODE``.

It prints what a server would see (pid, parent, process group, working directory, argv, environment) as one JSON
line, then: ``serve`` waits, and on SIGTERM prints ``stopping`` and exits 0 as Jupyter Server does; ``deaf`` waits
with SIGTERM's default action (it dies of it); ``exit-N`` exits N at once.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if mode == "serve":   # before the first line: the tests signal as soon as they have read it
        def stop(signum: int, frame: object) -> None:
            print("stopping", flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, stop)
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgrp(), "cwd": os.getcwd(),
                      "argv": sys.argv, "env": dict(os.environ), "path0": sys.path[0]}), flush=True)
    if mode.startswith("exit-"):
        return int(mode.split("-", 1)[1])
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
