"""What this cluster and its teams could ever give a job, and the check of a spec against it.

A spec can be well formed (``JobSpec`` accepts it) and still impossible here: a flavour the cluster lacks, a team
without quota for it, 128 × 8 GPUs on a cluster of 24. Such a job would wait forever with a reason nobody can fix,
so the API rejects it before anything is stored. Health is ignored on purpose: a node in repair comes back.
Hot spares are left out: they run only gangs restarted after a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model.cluster import Node
from ..model.job import JobSpec, TopologyLevel
from ..model.team import TeamConfig


@dataclass(frozen=True, slots=True)
class _NodeUnits:
    name: str
    block: str
    leaf: str
    units: int


@dataclass(frozen=True)
class ClusterLimits:
    """The cluster's working nodes per flavour and the teams' quotas: the fixed facts a submission is checked on."""

    nodes_by_flavour: Mapping[str, tuple[_NodeUnits, ...]]
    teams: Mapping[str, TeamConfig]
    # Answers depend only on the fixed facts above; every submission asks again, so keep them.
    _fits: dict[tuple[str, int, TopologyLevel | None], int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, nodes: Iterable[Node], teams: Iterable[TeamConfig]) -> ClusterLimits:
        by_flavour: dict[str, list[_NodeUnits]] = {}
        for node in nodes:
            if node.spare:
                continue
            for flavour, units in node.capacity.items():
                by_flavour.setdefault(flavour, []).append(_NodeUnits(node.name, node.block, node.leaf, units))
        return cls({f: tuple(v) for f, v in by_flavour.items()}, {t.name: t for t in teams})

    def capacity(self, flavour: str) -> int:
        return sum(n.units for n in self.nodes_by_flavour.get(flavour, ()))

    def max_pods(self, flavour: str, units_per_pod: int, level: TopologyLevel | None) -> int:
        """The most pods of ``units_per_pod`` that fit at once on an empty cluster, inside one domain of ``level``
        (``None``: anywhere)."""
        key = (flavour, units_per_pod, level)
        known = self._fits.get(key)
        if known is not None:
            return known
        per_domain: dict[str, int] = {}
        for node in self.nodes_by_flavour.get(flavour, ()):
            fit = node.units // units_per_pod
            if level is TopologyLevel.NODE:
                domain = node.name
            elif level is TopologyLevel.LEAF:
                domain = node.leaf
            elif level is TopologyLevel.BLOCK:
                domain = node.block
            else:
                domain = ""
            per_domain[domain] = per_domain.get(domain, 0) + fit
        self._fits[key] = best = max(per_domain.values(), default=0)
        return best

    def team_ceiling(self, team: TeamConfig, flavour: str) -> int:
        """The most units of ``flavour`` the team may ever hold: its nominal quota plus what it may borrow from
        its cohort (bounded by its borrowing limit and by what the others may lend)."""
        quota = team.quotas.get(flavour)
        if quota is None:
            return 0
        lendable = 0
        for other in self.teams.values():
            if other.name == team.name or other.cohort != team.cohort:
                continue
            theirs = other.quotas.get(flavour)
            if theirs is not None:
                lendable += theirs.nominal if theirs.lending_limit is None else theirs.lending_limit
        borrow = lendable if quota.borrowing_limit is None else min(quota.borrowing_limit, lendable)
        return quota.nominal + borrow


def check_spec(spec: JobSpec, limits: ClusterLimits) -> dict[str, str]:
    """Field → message for every reason ``spec`` can never run here; empty when it can.

    The team must exist. With several flavours listed, the job is accepted if any one of them could hold it
    (the rest are preferences the policy skips); otherwise each flavour's obstacle is reported.
    """
    team = limits.teams.get(spec.team)
    if team is None:
        known = ", ".join(sorted(limits.teams)) or "none"
        return {"team": f"unknown team {spec.team!r}; teams here: {known}"}
    problems: list[tuple[str, str]] = []
    for flavour in spec.flavour:
        problem = _flavour_problem(spec, team, flavour, limits)
        if problem is None:
            return {}
        problems.append(problem)
    fields: dict[str, str] = {}
    for field, message in problems:
        fields[field] = f"{fields[field]}; {message}" if field in fields else message
    return fields


def _flavour_problem(spec: JobSpec, team: TeamConfig, flavour: str,
                     limits: ClusterLimits) -> tuple[str, str] | None:
    if flavour not in limits.nodes_by_flavour:
        here = ", ".join(sorted(limits.nodes_by_flavour)) or "none"
        return "flavour", f"this cluster has no {flavour!r} (it has {here})"
    quota = team.quotas.get(flavour)
    if quota is None or (quota.nominal == 0 and quota.borrowing_limit == 0):
        return "flavour", f"team {team.name!r} has no quota for {flavour!r} and may not borrow it"
    units = spec.total_units
    largest_node = max(n.units for n in limits.nodes_by_flavour[flavour])
    if spec.gpus_per_pod > largest_node:
        return "gpus_per_pod", (f"{spec.gpus_per_pod} {flavour} units per pod, but the largest {flavour} node "
                                f"here has {largest_node}")
    capacity = limits.capacity(flavour)
    if units > capacity:
        return "pods", (f"{spec.pods} × {spec.gpus_per_pod} = {units} {flavour} units, but this cluster has "
                        f"{capacity} (hot spares excluded)")
    level = spec.topology.level if spec.topology is not None and spec.topology.is_required else None
    fit = limits.max_pods(flavour, spec.gpus_per_pod, level)
    if spec.pods > fit:
        where = f"one {level.name.lower()}" if level is not None else "this cluster"
        return "pods", (f"{spec.pods} pods of {spec.gpus_per_pod} {flavour} units cannot fit in {where}: "
                        f"at most {fit} can")
    ceiling = limits.team_ceiling(team, flavour)
    if units > ceiling:
        return "pods", (f"{units} {flavour} units is more than team {team.name!r} may ever hold ({ceiling}: "
                        f"nominal {quota.nominal} plus what it may borrow from its cohort)")
    return None

