"""The notebook job's command: read the hub's private environment from a file, then become the server.

Why a file: the job's spec (command, env) is stored by the scheduler and readable by the whole team, and the hub's
token for this server must not be. The spawner writes the token and the rest of the hub's environment to a file
only its owner can read; the scheduler's executor runs ``python -m hub_spawner.launch FILE -- CMD...``, and this
merges the file into the environment it was given (which keeps the executor's ``CUDA_VISIBLE_DEVICES`` and
``SHOAL_*`` variables: the grant wins over anything the hub passed), changes to the work directory (copying the
example notebooks into it, as the user, never over their own files: ``examples``), and ``exec``s the single-user
server, so signals from the executor reach the server itself.

When the file names a warm process (``zygote``, started by the spawner: ``hub_spawner.zygote``), the launcher asks
it for the server instead, with the same environment, directory and descriptors, and stays the pod's command: it
relays the pod's signals and ends as the server ends (``hub_spawner.warm_launch``). No warm process, a refusal, or no
answer within ``zygote_timeout`` seconds, and it ``exec``s the server as above.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .examples import copy_examples
from .warm_launch import WarmStart, end_as

#: Variables that belong to the executor's grant; the hub's file may never override them.
GRANT_VARIABLES = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK",
                             "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})


def merged_environment(granted: Mapping[str, str], from_hub: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: the hub's variables, under the executor's grant and every ``SHOAL_*`` variable."""
    env = dict(granted)
    for key, value in from_hub.items():
        if key in GRANT_VARIABLES or (key.startswith("SHOAL_") and key in granted):
            continue
        env[key] = value
    return env


@dataclass(frozen=True, slots=True)
class LaunchFile:
    """What the spawner's file says: the hub's environment, the work directory, where the examples are, and the
    warm process to ask first (if any)."""

    env: dict[str, str]
    cwd: str | None
    examples: str | None
    zygote: str | None = None
    zygote_timeout: float = 30.0


def read_env_file(path: Path) -> LaunchFile:
    data = json.loads(path.read_text())
    env = {str(k): str(v) for k, v in data.get("env", {}).items()}
    return LaunchFile(env=env, cwd=data.get("cwd"), examples=data.get("examples"), zygote=data.get("zygote"),
                      zygote_timeout=float(data.get("zygote_timeout", 30.0)))


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m hub_spawner.launch ENV_FILE -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    path, command = Path(argv[0]), argv[2:]
    try:
        launch = read_env_file(path)
    except (OSError, ValueError) as exc:
        print(f"hub_spawner.launch: cannot read the hub's environment from {path}: {exc}", file=sys.stderr)
        return 2
    env = merged_environment(os.environ, launch.env)
    if launch.cwd:
        Path(launch.cwd).mkdir(parents=True, exist_ok=True)
        if launch.examples:
            try:
                copy_examples(Path(launch.examples), Path(launch.cwd))
            except OSError as exc:  # a server without the examples is still a server
                print(f"hub_spawner.launch: could not copy the example notebooks: {exc}", file=sys.stderr)
        os.chdir(launch.cwd)
    if launch.zygote:
        warm = WarmStart(launch.zygote, launch.zygote_timeout)
        code = warm.run(command, env, os.getcwd())
        if code is not None:
            return end_as(code)
        print(f"hub_spawner.launch: starting the server cold: {warm.why_not}", file=sys.stderr, flush=True)
        if warm.pending:   # stopped while it waited: end as the server would have
            return end_as(-warm.pending[0])
    sys.stdout.flush()
    os.execvpe(command[0], command, env)
    return 127  # not reached: execvpe raises on failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
