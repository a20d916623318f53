"""The job contract's environment and the "auto" checkpoint interval: pure functions, checked case by case."""

from __future__ import annotations

import math
import re

import pytest

from scheduler_core.executor.base import LaunchRequest
from scheduler_core.job_env import (
    default_checkpoint_uri, gang_env, master_port, mig_uuid, nodes_of, pod_env, visible_devices,
)
from scheduler_core.young_daly import DEFAULT_CHECKPOINT_COST_S, checkpoint_interval_s, gang_mtbf_s

from .runtime_builders import cluster_nodes, make_spec, place

NODES = {node.name: node for node in cluster_nodes()}
MIG = "mig-a-n00"


def request(spec_env: dict[str, str] | None = None) -> LaunchRequest:
    spec = make_spec("train").pods(3, 4).env(**(spec_env or {})).build()
    placement = place("h100", ("h100-b0-n01", (4, 5, 6, 7)), ("h100-b0-n01", (0, 1, 2, 3)),
                      ("h100-b0-n02", (0, 1, 2, 3)))
    env = gang_env("job_abc123", spec, placement, checkpoint_uri="s3://ckpt/x/", checkpoint_interval_s=1635.4)
    return LaunchRequest("job_abc123", spec, placement, nodes_of(placement, NODES), env)


def test_gang_env_carries_the_contract_over_the_specs_own_env() -> None:
    env = request({"MASTER_PORT": "1", "DATASET": "s3://data"}).env
    assert env == {
        "DATASET": "s3://data", "SHOAL_JOB_ID": "job_abc123", "WORLD_SIZE": "3", "MASTER_ADDR": "h100-b0-n01",
        "MASTER_PORT": str(master_port("job_abc123")), "SHOAL_CHECKPOINT_URI": "s3://ckpt/x/",
        "SHOAL_CHECKPOINT_INTERVAL": "1635",
    }


@pytest.mark.parametrize(("rank", "local_rank", "devices"), [(0, "0", "4,5,6,7"), (1, "1", "0,1,2,3"),
                                                              (2, "0", "0,1,2,3")])
def test_pod_env_numbers_ranks_and_devices(rank: int, local_rank: str, devices: str) -> None:
    env = pod_env(request(), rank)
    assert (env["RANK"], env["LOCAL_RANK"], env["CUDA_VISIBLE_DEVICES"]) == (str(rank), local_rank, devices)
    assert env["SHOAL_JOB_ID"] == "job_abc123"


def test_mig_slices_are_named_by_stable_distinct_uuids() -> None:
    node = NODES[MIG]
    devices = visible_devices(node, "h100-mig-1g", (0, 1, 7))
    names = devices.split(",")
    assert all(re.fullmatch(r"MIG-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", n) for n in names)
    assert len(set(names)) == 3
    # unit 7 is GPU 1, slice 0 (seven 1g slices per GPU)
    assert names[2] == mig_uuid(MIG, 1, 0) and names[0] == mig_uuid(MIG, 0, 0)
    assert visible_devices(node, "h100-mig-1g", (0, 1, 7)) == devices
    assert mig_uuid("mig-b-n00", 0, 0) != mig_uuid(MIG, 0, 0)


def test_master_port_is_fixed_per_job_and_in_range() -> None:
    ports = {master_port(f"job_{i:06x}") for i in range(200)}
    assert master_port("job_abc123") == master_port("job_abc123")
    assert len(ports) > 150 and all(29500 <= p < 49500 for p in ports)


def test_default_checkpoint_uri() -> None:
    assert default_checkpoint_uri("/var/lib/shoal/ckpt/", "search", "job_1") == "file:///var/lib/shoal/ckpt/search/job_1/"


@pytest.mark.parametrize(("interval", "units", "measured", "declared", "expected"), [
    (900.0, 8192, 12.0, None, 900.0),                                               # explicit wins
    ("auto", 8192, 60.0, 5.0, math.sqrt(2 * 60 * 50_700 * 3600 / 8192)),            # measured over declared
    ("auto", 8192, None, 120.0, math.sqrt(2 * 120 * 50_700 * 3600 / 8192)),         # declared
    ("auto", 8, None, None, math.sqrt(2 * DEFAULT_CHECKPOINT_COST_S * 50_700 * 3600 / 8)),
    ("auto", 8192, 0.0, None, 10.0),                                                # never below 10 s
])
def test_checkpoint_interval(interval: float | str, units: int, measured: float | None, declared: float | None,
                             expected: float) -> None:
    assert checkpoint_interval_s(interval, units=units, measured_cost_s=measured, spec_cost_s=declared) == \
        pytest.approx(expected)


def test_a_1024_gpu_gang_fails_about_every_two_days() -> None:
    assert gang_mtbf_s(1024) / 3600 == pytest.approx(49.5, abs=0.1)
