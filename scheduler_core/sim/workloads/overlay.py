"""The documented, deterministic overlay: what a trace lacks, filled in from a hash of each job's id.

Real traces (ITP among them) carry a job's size, submission and run time, but not its team, time limit,
preemptibility or checkpoint cost. A replay must assign them; it does so here, from ``blake2b(field:job_id)``,
so the same file always gives the same jobs, on every machine, independent of order or of the seed. A column of
the file, where present, always wins over the overlay. ``OVERLAY_RULES`` is the text the report repeats.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

from ...model.flavours import FLAVOURS
from ...model.job import Topology
from ...model.team import TeamConfig

OVERLAY_RULES: tuple[str, ...] = (
    "Every overlay value is drawn from u = blake2b('<field>:<job_id>') / 2^64, uniform in [0, 1): "
    "the same job always gets the same values.",
    "team: the `team` column, else `vc_or_team` when it names a configured team, else a configured team drawn "
    "with probability proportional to its nominal quota (GPU-equivalents, all flavours). ITP's `vc_or_team` "
    "values are separate clusters (cluster01..cluster10), not teams, so they are not used as teams.",
    "flavour: the `flavour` column (several separated by '|', in order of preference), else one whole-GPU "
    "flavour the team has a quota for, drawn with probability proportional to the cluster's capacity of it.",
    "run time: `duration_s`, on the job's first flavour, whatever that flavour is (the trace's hardware is "
    "unknown).",
    "shape: up to 8 GPUs is one pod; more is ceil(n/8) pods of n/pods GPUs (a row that does not divide evenly "
    "is rejected). Multi-pod jobs get topology preferred: block unless the `topology` column says otherwise.",
    "time_limit: the `time_limit_s` column, else the run time × (1.25 + 1.75u) + 600 s, rounded up to a whole "
    "hour (users over-estimate, as Slurm's backfill expects; no job is stopped by its own limit), kept within the "
    "60-day maximum a user may ask for when the run × 1.25 + 600 s fits in it; a job that ran longer gets exactly "
    "that, past the maximum (it is real work, replayed whole and preemptible as drawn). A `time_limit_s` column "
    "past 60 days is kept as it is.",
    "preemptible: the `preemptible` column, else true for 90 % of jobs (u < 0.9) — except that a job is made "
    "non-preemptible only if it fits its team's nominal quota of its flavour (re-checked after scaling): "
    "non-preemptible work may not borrow, so a bigger one could never run, and nobody would submit it.",
    "checkpoint cost: the `checkpoint_cost_s` column, else 5 s + 8 s × √GPUs × (0.5 + u), at most 120 s; "
    "interval 'auto' (Young–Daly at the Llama 3 failure rate); grace period 300 s.",
    "priority_class: the `priority_class` column, else standard; kind: the `kind` column, else batch.",
)


def unit(job_id: str, field: str) -> float:
    """A uniform number in [0, 1) that depends only on ``field`` and ``job_id``."""
    digest = hashlib.blake2b(f"{field}:{job_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def pick_weighted(u: float, choices: Sequence[tuple[str, float]]) -> str:
    """The choice whose cumulative-weight interval holds ``u``; choices keep their given order."""
    total = sum(weight for _, weight in choices)
    if total <= 0:
        raise ValueError("no choice has a positive weight")
    target, acc = u * total, 0.0
    for name, weight in choices:
        acc += weight
        if target < acc:
            return name
    return choices[-1][0]


def team_weights(teams: Sequence[TeamConfig]) -> list[tuple[str, float]]:
    """Each team's nominal quota in GPU-equivalents (a MIG slice counts as its fraction of a GPU)."""
    out = []
    for team in teams:
        gpus = sum(q.nominal / FLAVOURS[f].units_per_gpu for f, q in team.quotas.items())
        out.append((team.name, gpus))
    if not any(w > 0 for _, w in out):
        out = [(team.name, 1.0) for team in teams]
    return out


def overlay_team(job_id: str, weights: Sequence[tuple[str, float]]) -> str:
    return pick_weighted(unit(job_id, "team"), weights)


def overlay_flavour(job_id: str, team: TeamConfig, capacity: Mapping[str, int]) -> str | None:
    """A whole-GPU flavour the cluster has and the team holds a quota of; ``None`` if there is none."""
    choices = [(f, float(capacity[f])) for f in capacity
               if not FLAVOURS[f].is_mig and capacity[f] > 0 and f in team.quotas]
    if not choices:
        return None
    return pick_weighted(unit(job_id, "flavour"), choices)


#: The longest time limit a user may ask for (``JobSpec``); the overlay's limits stay within it where they can.
MAX_TIME_LIMIT_S = 60 * 86400.0


def overlay_time_limit(job_id: str, run_s: float) -> float:
    """The run × (1.25 + 1.75u) + 600 s, up to the hour; kept within the 60-day maximum when the run × 1.25 + 600 s
    fits in it, and otherwise exactly that, past the maximum: a job that really ran longer (a long pre-training
    run, a pod that never stopped) is replayed whole, never stopped by a limit the overlay made up."""
    factor = 1.25 + 1.75 * unit(job_id, "time_limit")
    limit = float(math.ceil((run_s * factor + 600.0) / 3600.0) * 3600)
    if limit <= MAX_TIME_LIMIT_S:
        return limit
    return max(MAX_TIME_LIMIT_S, float(math.ceil((run_s * 1.25 + 600.0) / 3600.0) * 3600))


def overlay_preemptible(job_id: str, units: int, nominal: int) -> bool:
    return unit(job_id, "preemptible") < 0.9 or units > nominal


def overlay_checkpoint_cost(job_id: str, gpus: float) -> float:
    return min(120.0, 5.0 + 8.0 * math.sqrt(max(gpus, 0.0)) * (0.5 + unit(job_id, "checkpoint_cost")))


def overlay_topology(pods: int) -> Topology | None:
    return Topology(preferred="block") if pods > 1 else None
