"""A real ``shoal up`` for the tests that drive it from outside: started and stopped by
``scheduler_core.bench.child`` (the one way to run it as a child process), in an environment that points at this
checkout, with the ``shoal`` CLI at hand and waits that show what it printed when they time out."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from scheduler_core.bench.child import ShoalUp, eventually, shoal_up
from scheduler_core.cli.state import executor_dir

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def child_env(*paths: Path, **variables: str) -> dict[str, str]:
    """This process's environment with this checkout (then ``paths``) first on ``PYTHONPATH``, without what would
    point a child's CLI, SDK or kernels at some other Shoal; ``variables`` added."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), *map(str, paths), os.environ.get("PYTHONPATH")]))}
    for name in ("SHOAL_URL", "SHOAL_TOKEN", "JUPYTERHUB_API_TOKEN"):
        env.pop(name, None)
    return {**env, **variables}


@dataclass
class Up(ShoalUp):
    """A running ``shoal up`` and the environment it runs in, which the ``shoal`` CLI run against it shares."""

    env: dict[str, str] = field(default_factory=dict)

    def tail(self, lines: int = 40) -> str:
        return "".join(self.output[-lines:])

    def eventually(self, check: Callable[[], T | None], what: str, timeout: float = 90.0) -> T:
        return eventually(check, what, timeout, self.output)

    def shoal(self, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env, SHOAL_URL=self.url)
        if token:
            env["SHOAL_TOKEN"] = token
        return subprocess.run([sys.executable, "-m", "scheduler_core.cli.main", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)

    def token(self, user: str, team: str, *, admin: bool = False) -> str:
        result = self.shoal("token", "create", "--user", user, "--team", team, *(["--admin"] if admin else []),
                            "--state-dir", str(self.state))
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def logs(self, job_id: str, rank: int = 0) -> list[str]:
        """Each attempt's log of pod ``rank``, oldest attempt first."""
        attempts = sorted((executor_dir(self.state) / "logs" / job_id).glob("*"), key=lambda p: int(p.name))
        return [(a / f"rank-{rank}.log").read_text() if (a / f"rank-{rank}.log").exists() else "" for a in attempts]

    def pods_started(self, job_id: str) -> bool:
        return (executor_dir(self.state) / "pods" / job_id).exists()


@contextmanager
def started(state: Path, *extra: str, env: dict[str, str] | None = None, cwd: Path = ROOT,
            hub: bool = False) -> Iterator[Up]:
    """``shoal up --state-dir STATE EXTRA…`` (see ``scheduler_core.bench.child.shoal_up``) in ``env``, by default
    ``child_env()``, until the block ends."""
    env = child_env() if env is None else env
    with shoal_up(state, *extra, env=env, cwd=cwd, hub=hub) as up:
        yield Up(up.proc, up.state, up.url, up.output, env)
