"""Scale a cluster (and its teams' quotas) so a workload offers a chosen load.

A trace comes from a cluster of unknown size; replayed on the reference cluster it may be idle or hopeless.
``scale_to_load`` keeps every block's shape (so topology still means something) and changes how many of the
plain, repeated blocks there are of each flavour, until the trace's offered load — the units its jobs would keep
busy on average over its window if none waited (each job counted from submission for its run time, clipped to the
window), divided by the working capacity (hot spares excluded) — is as close to the target as whole nodes allow.

What the trace cannot use goes first (``_trim``): a flavour no job asks for, the MIG nodes when no job asks for a
slice (else as many MIG nodes as the slices need, up to the pool's size), and a flavour's whole-GPU nodes in
small-job or mixed blocks when they alone would already hold more than the target needs (a trace that averages
ten GPUs gets one block of a few nodes, not the reference cluster's small-job block). Each flavour keeps at least
the nodes its largest job needs, so every job can run. Teams keep their share of each flavour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from ...model.cluster import BlockConfig, ClusterConfig, NodeGroup, capacity_by_flavour
from ...model.flavours import FLAVOURS, MIG_PROFILES
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


def _nearest_nodes(units: float, fixed: int, per_node: int) -> int:
    """Whole nodes beside ``fixed`` units whose capacity gives the load nearest to the one ``units`` would."""
    exact = max(units - fixed, 0.0) / per_node
    choices = {math.floor(exact), math.ceil(exact)}

    def miss(nodes: int) -> float:
        capacity = fixed + nodes * per_node
        return abs(1.0 / capacity - 1.0 / units) if capacity > 0 and units > 0 else math.inf

    return min(sorted(choices), key=miss)


def _slices_per_node(group: NodeGroup) -> dict[str, int]:
    out: dict[str, int] = {}
    for profile in group.mig_profiles():
        if profile is not None:
            flavour = MIG_PROFILES[profile]
            out[flavour] = out.get(flavour, 0) + FLAVOURS[flavour].units_per_gpu
    return out


def _trim(cluster: ClusterConfig, needed: Mapping[str, float]) -> ClusterConfig:
    """``cluster`` less what a workload needing ``needed`` units per flavour cannot use (module docstring): the
    blocks of flavours it does not ask for, MIG nodes beyond its slices, and whole-GPU nodes of small-job or
    mixed blocks when a flavour's target is below what those hold (its plain blocks then carry it alone)."""
    plain = {flavour for block in cluster.blocks if (flavour := _plain(block)) is not None}
    fixed: dict[str, int] = {}
    for block in cluster.blocks:
        if _plain(block) is None:
            for group in block.groups:
                if group.mig is None:
                    working = max(group.count - block.spares, 0) if group is block.groups[-1] else group.count
                    fixed[group.gpu] = fixed.get(group.gpu, 0) + working * group.gpus_per_node * block.repeat
    drop_fixed = {f for f in plain if needed.get(f, 0.0) < fixed.get(f, 0)}
    blocks: list[dict[str, object]] = []
    for block in cluster.blocks:
        flavour = _plain(block)
        if flavour is not None:
            if flavour in needed:
                blocks.append({**block.model_dump(), "gpu": None})
            continue
        groups: list[dict[str, object]] = []
        whole_left = False
        for group in block.groups:
            if group.mig is not None:
                slices = _slices_per_node(group)
                want = max((needed.get(f, 0.0) / per for f, per in slices.items() if per), default=0.0)
                if want > 0:
                    groups.append({**group.model_dump(), "count": min(group.count, max(1, math.ceil(want)))})
            elif group.gpu in needed and group.gpu not in drop_fixed:
                groups.append(group.model_dump())
                whole_left = True
        if groups:
            count = sum(int(g["count"]) for g in groups)  # type: ignore[call-overload]
            spares = min(block.spares, count - 1) if whole_left else 0
            blocks.append({**block.model_dump(), "gpu": None, "nodes": groups, "spares": spares})
    if not blocks:
        raise ValueError("the workload asks for no flavour this cluster has")
    return ClusterConfig.model_validate({"name": cluster.name, "description": cluster.description,
                                         "blocks": blocks})


def _plain(block: BlockConfig) -> str | None:
    """The flavour of a block that may be repeated freely: whole GPUs of one kind, not a small-job block."""
    if block.small_jobs:
        return None
    kinds = {group.gpu for group in block.groups}
    if len(kinds) != 1 or any(group.mig is not None for group in block.groups):
        return None
    return kinds.pop()


def scale_cluster(cluster: ClusterConfig, needed: Mapping[str, float], *,
                  at_least: Mapping[str, int] | None = None) -> tuple[ClusterConfig, dict[str, int]]:
    """A copy of ``cluster`` with the plain blocks of each flavour in ``needed`` repeated so the working capacity
    of that flavour is as near ``needed[flavour]`` units as whole nodes allow: whole blocks of the template's
    shape, then one smaller block for the remaining nodes (with the template's hot spares). The node count is the
    one whose load is nearest (whole nodes are coarse on a small cluster: 11 GPUs wanted gives 16, not 8), and
    never fewer than ``at_least[flavour]`` units (the largest job). At least one unit of each flavour remains.
    Returns the new config and each scaled flavour's working node count in plain blocks."""
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
        nodes = _nearest_nodes(units, fixed, per_node)
        floor = (at_least or {}).get(flavour, 0)
        nodes = max(nodes, math.ceil(max(floor - fixed, 0) / per_node), 1 if fixed == 0 else 0)
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


def scale_teams(teams: TeamsConfig, old: Mapping[str, int], new: Mapping[str, int], *,
                largest: Mapping[str, int] | None = None) -> TeamsConfig:
    """Each team keeps its share of each flavour: nominal quotas apportioned to the new capacity by largest
    remainder (so they still add up exactly), borrowing and lending limits scaled by the same factor — but a
    borrowing limit never below what the largest job of the flavour (``largest``) needs beyond the team's
    nominal quota, so a scaled-down cluster does not make a trace's jobs impossible. Quotas of a flavour the new
    cluster lacks are dropped."""
    scaled: dict[str, dict[str, Quota]] = {team.name: {f: q for f, q in team.quotas.items() if f in new}
                                           for team in teams.teams}
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
            need = (largest or {}).get(flavour, 0) - nominal
            borrow = None if quota.borrowing_limit is None else max(round(quota.borrowing_limit * factor), need, 0)
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
    """``workload`` on a cluster scaled so its offered load of each flavour it uses is about ``load``."""
    if not 0.05 <= load <= 2.0:
        raise ValueError(f"target load must be between 0.05 and 2.0, got {load}")
    old_capacity = capacity_by_flavour(workload.cluster.expand())
    workload, merged = _one_pool_if_small(workload, load)
    rates = demand_rate(workload)
    largest: dict[str, int] = {}
    for job in workload.jobs:
        flavour = job.spec.flavour[0]
        largest[flavour] = max(largest.get(flavour, 0), job.units)
    needed = {f: max(rates.get(f, 0.0) / load, float(largest[f])) for f in largest}
    trimmed = _trim(workload.cluster, needed)
    whole = {f: units for f, units in needed.items() if not FLAVOURS[f].is_mig}
    cluster, counts = scale_cluster(trimmed, whole, at_least=largest)
    new_capacity = capacity_by_flavour(cluster.expand())
    teams = scale_teams(workload.teams, old_capacity, new_capacity, largest=largest)
    achieved = offered_load(workload, new_capacity)
    nominal = {t.name: {f: q.nominal for f, q in t.quotas.items()} for t in teams.teams}
    jobs = tuple(_still_runnable(job, nominal) for job in workload.jobs)
    built = describe_cluster(replace(workload, cluster=cluster))
    note = (f"cluster scaled to a target offered load of {load:.2f}: {built['nodes']} nodes in {built['blocks']} "
            "blocks; "
            + ", ".join(f"{f}: {new_capacity.get(f, 0)} working units ({counts[f]} nodes in plain blocks), "
                        f"load {achieved.get(f, 0):.2f}" if f in counts else
                        f"{f}: {new_capacity.get(f, 0)} working units, load {achieved.get(f, 0):.2f}"
                        for f in sorted(needed))
            + (f"; dropped (no job asks for them): {', '.join(sorted(set(old_capacity) - set(new_capacity)))}"
               if set(old_capacity) - set(new_capacity) else "")
            + (f"; a small trace: the overlay's flavours merged into {merged}" if merged else "")
            + "; team quotas scaled in proportion")
    return Workload(name=workload.name, jobs=jobs, cluster=cluster, teams=teams, window=workload.window,
                    notes=workload.notes + (note,))


def _one_pool_if_small(workload: Workload, load: float) -> tuple[Workload, str | None]:
    """A trace whose whole-GPU demand at ``load`` is under one plain block of its busiest flavour gets that
    flavour for every job whose flavour the overlay drew (a trace's own ``flavour`` column is kept, and so is a
    job whose team has no quota of it): split over two flavours, a few nodes each, a small trace would leave one
    pool a single node that its biggest job empties and strict FIFO waits on."""
    rates = {f: d for f, d in demand_rate(workload).items() if not FLAVOURS[f].is_mig}
    if len(rates) < 2:
        return workload, None
    main = max(sorted(rates), key=lambda f: rates[f])
    blocks = [b for b in workload.cluster.blocks if _plain(b) == main]
    if not blocks:
        return workload, None
    block_units = max((b.node_count - b.spares) * b.groups[0].gpus_per_node for b in blocks)
    if sum(rates.values()) / load >= block_units:
        return workload, None
    quotas = {t.name: t.quotas for t in workload.teams.teams}
    jobs = tuple(replace(job, spec=job.spec.model_copy(update={"flavour": (main,)}))
                 if "flavour" in job.overlaid and job.spec.flavour[0] != main
                 and main in quotas.get(job.spec.team, {}) else job for job in workload.jobs)
    return replace(workload, jobs=jobs), main


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


def describe_cluster(workload: Workload) -> dict[str, object]:
    """The cluster a run used, as the report names it: name, nodes, blocks, units per flavour (spares included)
    and the workload's offered load of each flavour on it (working capacity, as ``--load`` counts it)."""
    nodes = workload.cluster.expand()
    load = offered_load(workload, capacity_by_flavour(nodes))
    return {"name": workload.cluster.name, "nodes": len(nodes), "blocks": len({node.block for node in nodes}),
            "units": dict(sorted(capacity_by_flavour(nodes, include_spares=True).items())),
            "offered_load": {flavour: round(value, 4) for flavour, value in sorted(load.items())}}
