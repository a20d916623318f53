"""The notebook job a spawn submits: a pure function of the user, the profile and the launch command.

Notebooks are non-preemptible (a human is typing in them) but reclaimable when idle, by the reaper; they are never
restarted by the scheduler (a dead kernel server is the hub's to report), and a stop is quick: a short grace.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from scheduler_core.model import CheckpointPolicy, JobKind, JobSpec

from .profiles import Profile

#: Labels on every notebook job, so the reaper, the CLI and the usage report can tell notebooks apart.
LABEL_HUB_USER = "shoal.io/hub-user"
LABEL_HUB_SERVER = "shoal.io/hub-server"
LABEL_PROFILE = "shoal.io/profile"

_UNSAFE = re.compile(r"[^A-Za-z0-9._\-]+")


def job_name(user: str, server_name: str) -> str:
    """A valid job name from a hub user name (which may hold '@' and other characters a job name may not)."""
    base = _UNSAFE.sub("-", f"{user}-{server_name}" if server_name else user).strip("-._") or "user"
    return f"notebook-{base}"[:128]


def notebook_spec(*, user: str, server_name: str, team: str, profile: Profile, command: Sequence[str],
                  env: Mapping[str, str] | None = None, time_limit: float = 7 * 86400,
                  grace_period: float = 10.0, image: str | None = None) -> JobSpec:
    """The ``kind: notebook`` job for one single-user server. ``env`` must hold no secrets: the job's spec is
    readable by the whole team (the hub token travels by a private file, see ``hub_spawner.launch``)."""
    return JobSpec(
        name=job_name(user, server_name),
        team=team,
        kind=JobKind.NOTEBOOK,
        flavour=(profile.flavour,),
        pods=1,
        gpus_per_pod=profile.units,
        command=tuple(command),
        env=dict(env or {}),
        image=image,
        time_limit=time_limit,
        preemptible=False,
        max_restarts=0,
        checkpoint=CheckpointPolicy(grace_period=grace_period),
        labels={LABEL_HUB_USER: _UNSAFE.sub("-", user)[:63], LABEL_HUB_SERVER: server_name or "default",
                LABEL_PROFILE: profile.slug},
    )
