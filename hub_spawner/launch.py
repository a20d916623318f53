"""The notebook job's command: read the hub's private environment from a file, then become the server.

Why a file: the job's spec (command, env) is stored by the scheduler and readable by the whole team, and the hub's
token for this server must not be. The spawner writes the token and the rest of the hub's environment to a file
only its owner can read; the scheduler's executor runs ``python -m hub_spawner.launch FILE -- CMD...``, and this
merges the file into the environment it was given (which keeps the executor's ``CUDA_VISIBLE_DEVICES`` and
``SHOAL_*`` variables: the grant wins over anything the hub passed), changes to the work directory (copying the
example notebooks into it, as the user, never over their own files: ``examples``), and ``exec``s the single-user
server, so signals from the executor reach the server itself.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .examples import copy_examples

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
    """What the spawner's file says: the hub's environment, the work directory, where the examples are."""

    env: dict[str, str]
    cwd: str | None
    examples: str | None


def read_env_file(path: Path) -> LaunchFile:
    data = json.loads(path.read_text())
    env = {str(k): str(v) for k, v in data.get("env", {}).items()}
    return LaunchFile(env=env, cwd=data.get("cwd"), examples=data.get("examples"))


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
    sys.stdout.flush()
    os.execvpe(command[0], command, env)
    return 127  # not reached: execvpe raises on failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
