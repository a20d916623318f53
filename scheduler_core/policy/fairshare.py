"""Fair share: decayed usage and weighted dominant shares (Slurm's half-life decay, DRF over GPU/CPU/memory).

The controller and the simulator keep ``TeamState.decayed_usage`` up to date with :func:`decay` and
:func:`accumulate`; the cycle turns it, plus current allocations, into one number per team with
:func:`dominant_share`. Lower share goes first.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from ..model.flavours import FLAVOURS
from .snapshot import RESOURCES, JobRequest, NodeState, RunningJob

LN2 = math.log(2.0)


def decay(value: float, elapsed_s: float, half_life_s: float) -> float:
    """``value`` after ``elapsed_s`` of exponential decay with ``half_life_s`` (``<= 0``: no memory at all)."""
    if half_life_s <= 0:
        return 0.0
    if elapsed_s <= 0:
        return value
    return float(value * 0.5 ** (elapsed_s / half_life_s))


def accumulate(decayed: Mapping[str, float], rates: Mapping[str, float], elapsed_s: float,
               half_life_s: float) -> dict[str, float]:
    """Advance decayed usage by ``elapsed_s`` during which the team held ``rates`` (GPUs, CPUs, GB) steadily.

    Exact for a constant rate: ``old·d + rate·∫₀ᵗ 2^(-(t-s)/h) ds`` with ``d = 2^(-t/h)``, so calling it every
    cycle or once an hour gives the same answer. Returns a new dict over :data:`RESOURCES` and any extra keys.
    """
    out: dict[str, float] = {}
    keys = sorted(set(RESOURCES) | set(decayed) | set(rates))
    if half_life_s <= 0:
        return {key: 0.0 for key in keys}
    if elapsed_s <= 0:
        return {key: float(decayed.get(key, 0.0)) for key in keys}
    factor = float(0.5 ** (elapsed_s / half_life_s))
    gained = half_life_s / LN2 * (1.0 - factor)
    for key in keys:
        out[key] = decayed.get(key, 0.0) * factor + rates.get(key, 0.0) * gained
    return out


def request_rates(request: JobRequest, flavour: str) -> tuple[float, float, float]:
    """(GPUs normalised by flavour speed, CPUs, GB of memory) that ``request`` holds on ``flavour``.

    A MIG slice's speed is its share of a whole H100, so seven 1g slices count as one GPU."""
    speed = FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0
    return (request.units * speed, float(request.pods * request.cpus_per_pod),
            float(request.pods * request.memory_gb_per_pod))


def usage_rates(running: Iterable[RunningJob], team: str) -> dict[str, float]:
    """What ``team`` holds right now, per resource: feed it to :func:`accumulate`."""
    gpu = cpu = mem = 0.0
    for job in running:
        if job.request.team != team:
            continue
        g, c, m = request_rates(job.request, job.placement.flavour)
        gpu += g
        cpu += c
        mem += m
    return {"gpu": gpu, "cpu": cpu, "memory": mem}


def cluster_capacity(nodes: Iterable[NodeState]) -> tuple[float, float, float]:
    """Totals that shares are measured against: speed-weighted GPUs, CPUs and GB over every node."""
    gpu = cpu = mem = 0.0
    for node in nodes:
        for flavour, count in node.capacity.items():
            gpu += count * (FLAVOURS[flavour].speed if flavour in FLAVOURS else 1.0)
        cpu += node.cpus
        mem += node.memory_gb
    return gpu, cpu, mem


def dominant_share(alloc: tuple[float, float, float], decayed: Mapping[str, float],
                   capacity: tuple[float, float, float], weight: float, half_life_s: float) -> float:
    """Weighted dominant share: ``max_r (alloc_r + history_r) / capacity_r / weight``.

    ``history_r`` is the decayed usage expressed as the steady allocation that would have produced it
    (``decayed · ln2 / half_life``), so a team that ran 100 GPUs all last week looks like it holds 100 more
    now, and the memory fades with the half-life. Twice the weight, half the share.
    """
    scale = LN2 / half_life_s if half_life_s > 0 else 0.0
    share = 0.0
    for index, resource in enumerate(RESOURCES):
        cap = capacity[index]
        if cap <= 0:
            continue
        value = (alloc[index] + decayed.get(resource, 0.0) * scale) / cap
        if value > share:
            share = value
    return share / weight if weight > 0 else math.inf
