"""Cluster and team files: the shipped ones load and add up; a mistake names file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_core.config import load_cluster, load_teams
from scheduler_core.errors import ConfigError
from scheduler_core.model import capacity_by_flavour


def test_reference_cluster_matches_design() -> None:
    _, nodes = load_cluster("reference")
    assert len(nodes) == 512
    gpus = {"H100": 0, "A100": 0}
    for node in nodes:
        gpus[node.gpu_model] += node.gpus
    assert gpus == {"H100": 3072, "A100": 1024}
    assert len({n.block for n in nodes}) == 16
    assert sum(n.spare for n in nodes) == 16
    assert {n.block for n in nodes if n.spare} == {n.block for n in nodes}
    assert capacity_by_flavour(nodes, include_spares=True)["h100-mig-1g"] == 448
    assert any(n.small_jobs for n in nodes)


@pytest.mark.parametrize("name", ["reference", "demo"])
def test_team_quotas_add_up_to_the_cluster(name: str) -> None:
    _, nodes = load_cluster(name)
    teams = load_teams(name, nodes)
    assert teams.nominal_by_flavour() == capacity_by_flavour(nodes)


def test_reference_has_forty_teams_and_demo_has_the_named_ones() -> None:
    assert len(load_teams("reference").teams) == 40
    demo = {t.name for t in load_teams("demo").teams}
    assert {"fraud-ml", "search", "genai-core"} <= demo
    assert len({t.cohort for t in load_teams("demo").teams}) == 1


def test_demo_cluster_offers_every_notebook_profile() -> None:
    _, nodes = load_cluster("demo")
    capacity = capacity_by_flavour(nodes)
    assert {"h100", "a100", "h100-mig-1g", "h100-mig-2g", "h100-mig-3g"} <= set(capacity)
    assert sum(n.is_mig for n in nodes) == 1


def test_error_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nblocks:\n  - name: b0\n    nodes: 4\n    gpu: h200\n")
    with pytest.raises(ConfigError) as info:
        load_cluster(str(path))
    message = str(info.value)
    assert f"{path}:5" in message
    assert "blocks.0.gpu" in message
    assert "h200" in message


def test_team_error_points_at_the_quota(tmp_path: Path) -> None:
    path = tmp_path / "teams.yaml"
    path.write_text("teams:\n  - name: a\n    cohort: c\n    quotas:\n      h100: {nominal: 4, lending_limit: 9}\n")
    with pytest.raises(ConfigError) as info:
        load_teams(str(path))
    assert f"{path}:5" in str(info.value)
    assert "lending_limit 9 exceeds nominal 4" in str(info.value)


def test_unknown_builtin_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="built-in: demo, reference"):
        load_cluster("nosuch")


def test_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_cluster(str(path))
