"""Scale a cluster (and its teams' quotas) so a workload offers a chosen load.

A trace comes from a cluster of unknown size; replayed on the reference cluster it may be idle or hopeless.
``scale_to_load`` keeps every block's shape (so topology still means something) and changes how many of the
plain, repeated blocks there are of each flavour, until the trace's offered load — the units its jobs would keep
busy on average over its window if none waited (each job counted from submission for its run time, clipped to the
window), divided by the working capacity (hot spares excluded) — is as close to the target as whole nodes allow.
Small-job and MIG blocks are kept as they are, except that a flavour whose plain blocks are all gone and whose
small-job block alone is still too big has that block shrunk. Teams keep their share of each flavour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ...model.cluster import BlockConfig, ClusterConfig, capacity_by_flavour
from ...model.flavours import FLAVOURS
from ...model.team import Quota, TeamConfig, TeamsConfig
from .types import Workload, WorkloadJob


def offered_load(workload: Workload, capacity: Mapping[str, int]) -> dict[str, float]:
    """Per flavour: the units the jobs would keep busy on average over the window, over ``capacity``."""
    demand = demand_rate(workload)
    return {f: demand[f] / capacity[f] for f in demand if capacity.get(f)}


def demand_rate(workload: Workload) -> dict[str, float]:
    """Units of each (first-listed) flavour the workload would keep busy on average over its window if no job
    waited: each job from its submission for its run time, clipped to the window."""
    start, end = workload.window
    span = max(end - start, 1.0)
    demand: dict[str, float] = {}
    for job in workload.jobs:
        flavour = job.spec.flavour[0]
        inside = min(job.submit_at + job.work_s, end) - max(job.submit_at, start)
        demand[flavour] = demand.get(flavour, 0.0) + job.units * max(inside, 0.0) / span
    return demand


def _shrink_small_blocks(cluster: ClusterConfig, blocks: list[dict[str, object]], flavour: str,
                         units: float) -> None:
    """When the plain blocks of ``flavour`` are gone and its small-job blocks alone are still too big, shrink
    those that hold nothing but whole GPUs of it (one group, not repeated), keeping their hot spares."""
    for i, block in enumerate(cluster.blocks):
        if not block.small_jobs or block.repeat != 1 or len(block.groups) != 1:
            continue
        group = block.groups[0]
        if group.gpu != flavour or group.mig is not None:
            continue
        working = max(1, round(units / group.gpus_per_node))
        if working < block.node_count - block.spares:
            blocks[i] = {**blocks[i], "nodes": [{**group.model_dump(), "count": working + block.spares}]}
        return


def _plain(block: BlockConfig) -> str | None:
    """The flavour of a block that may be repeated freely: whole GPUs of one kind, not a small-job block."""
    if block.small_jobs:
        return None
    kinds = {group.gpu for group in block.groups}
    if len(kinds) != 1 or any(group.mig is not None for group in block.groups):
        return None
    return kinds.pop()


def scale_cluster(cluster: ClusterConfig, needed: Mapping[str, float]) -> tuple[ClusterConfig, dict[str, int]]:
    """A copy of ``cluster`` with the plain blocks of each flavour in ``needed`` repeated so the working capacity
    of that flavour is as near ``needed[flavour]`` units as whole nodes allow: whole blocks of the template's
    shape, then one smaller block for the remaining nodes (with the template's hot spares). At least one unit of
    each flavour remains. Returns the new config and each scaled flavour's working node count in plain blocks."""
    blocks: list[dict[str, object]] = [{**b.model_dump(), "gpu": None} for b in cluster.blocks]
    counts: dict[str, int] = {}
    all_nodes = cluster.expand()
    for flavour, units in needed.items():
        templates = [i for i, b in enumerate(cluster.blocks) if _plain(b) == flavour]
        if not templates:
            continue
        main = max(templates, key=lambda i: cluster.blocks[i].repeat)
        template = cluster.blocks[main]
        own = set(template.block_names())
        fixed = capacity_by_flavour([n for n in all_nodes if n.block not in own]).get(flavour, 0)
        per_node = template.groups[0].gpus_per_node
        usable = template.node_count - template.spares
        nodes = max(0, round((units - fixed) / per_node))
        if nodes == 0 and fixed == 0:
            nodes = 1
        full, rest = divmod(nodes, usable)
        counts[flavour] = nodes
        names = template.block_names()
        pattern = template.name if "{i" in template.name else template.name + "-{i:02d}"
        others = {name for b in cluster.blocks if b is not template for name in b.block_names()}
        wanted = {pattern.format(i=template.start + k) for k in range(full + 1)}
        if wanted & others:
            pattern, names = f"{flavour}-scaled-{{i:02d}}", [f"{flavour}-scaled-{template.start:02d}"]
        replacement: list[dict[str, object]] = []
        if full:
            replacement.append({**blocks[main], "repeat": full, "name": pattern if full > 1 else names[0]})
        if rest:
            index = template.start + full
            name = pattern.format(i=index) if "{i" in pattern else f"{template.name}-{index}"
            group = {**template.groups[0].model_dump(), "count": rest + template.spares}
            replacement.append({**blocks[main], "repeat": 1, "start": 0, "name": name, "nodes": [group]})
        blocks[main:main + 1] = [{"_replaced": replacement}]
        if nodes == 0 and fixed > units:
            _shrink_small_blocks(cluster, blocks, flavour, units)
    flat: list[dict[str, object]] = []
    for block in blocks:
        flat.extend(block["_replaced"] if "_replaced" in block else [block])  # type: ignore[arg-type]
    scaled = ClusterConfig.model_validate({"name": f"{cluster.name}-scaled"[:63],
                                           "description": f"{cluster.name}, scaled", "blocks": flat})
    return scaled, counts


def scale_teams(teams: TeamsConfig, old: Mapping[str, int], new: Mapping[str, int]) -> TeamsConfig:
    """Each team keeps its share of each flavour: nominal quotas apportioned to the new capacity by largest
    remainder (so they still add up exactly), borrowing and lending limits scaled by the same factor."""
    scaled: dict[str, dict[str, Quota]] = {team.name: dict(team.quotas) for team in teams.teams}
    for flavour in new:
        holders = [t for t in teams.teams if flavour in t.quotas]
        total = sum(t.quotas[flavour].nominal for t in holders)
        if not holders or old.get(flavour, 0) == new[flavour]:
            continue
        factor = new[flavour] / max(old.get(flavour, 1), 1)
        shares = _apportion([t.quotas[flavour].nominal for t in holders], new[flavour]) if total else \
            [0] * len(holders)
        for team, nominal in zip(holders, shares):
            quota = team.quotas[flavour]
            lend = None if quota.lending_limit is None else min(nominal, round(quota.lending_limit * factor))
            borrow = None if quota.borrowing_limit is None else round(quota.borrowing_limit * factor)
            scaled[team.name][flavour] = Quota(nominal=nominal, borrowing_limit=borrow, lending_limit=lend)
    return TeamsConfig(teams=[TeamConfig(name=t.name, cohort=t.cohort, weight=t.weight, quotas=scaled[t.name])
                              for t in teams.teams])


def _apportion(weights: list[int], total: int) -> list[int]:
    whole = sum(weights)
    exact = [w * total / whole for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def scale_to_load(workload: Workload, load: float) -> Workload:
    """``workload`` on a cluster scaled so its offered load of each whole-GPU flavour is about ``load``."""
    if not 0.05 <= load <= 2.0:
        raise ValueError(f"target load must be between 0.05 and 2.0, got {load}")
    old_capacity = capacity_by_flavour(workload.cluster.expand())
    demand = {f: d for f, d in demand_rate(workload).items() if not FLAVOURS[f].is_mig}
    cluster, counts = scale_cluster(workload.cluster, {f: d / load for f, d in demand.items()})
    new_capacity = capacity_by_flavour(cluster.expand())
    teams = scale_teams(workload.teams, old_capacity, new_capacity)
    achieved = offered_load(workload, new_capacity)
    nominal = {t.name: {f: q.nominal for f, q in t.quotas.items()} for t in teams.teams}
    jobs = tuple(_still_runnable(job, nominal) for job in workload.jobs)
    note = (f"cluster scaled to a target offered load of {load:.2f}: "
            + ", ".join(f"{f}: {counts.get(f, 0)} working nodes in plain blocks, {new_capacity.get(f, 0)} units, "
                        f"load {achieved.get(f, 0):.2f}" for f in sorted(demand))
            + "; MIG pool unchanged; team quotas scaled in proportion")
    return Workload(name=workload.name, jobs=jobs, cluster=cluster, teams=teams, window=workload.window,
                    notes=workload.notes + (note,))


def _still_runnable(job: WorkloadJob, nominal: Mapping[str, Mapping[str, int]]) -> WorkloadJob:
    """The overlay makes a job non-preemptible only if it fits its team's nominal quota; scaled quotas are
    smaller, so check again (a trace's own ``preemptible`` column is left as it is)."""
    if job.spec.preemptible or "preemptible" not in job.overlaid:
        return job
    quota = min(nominal.get(job.spec.team, {}).get(f, 0) for f in job.spec.flavour)
    if job.units <= quota:
        return job
    spec = job.spec.model_copy(update={"preemptible": True})
    return replace(job, spec=spec)


def describe_cluster(cluster: ClusterConfig) -> dict[str, object]:
    """The cluster a run used, as the report names it: name, nodes, blocks and units per flavour (spares
    included)."""
    nodes = cluster.expand()
    return {"name": cluster.name, "nodes": len(nodes), "blocks": len({node.block for node in nodes}),
            "units": dict(sorted(capacity_by_flavour(nodes, include_spares=True).items()))}
