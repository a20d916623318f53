"""What the dashboard reads from ``ApiService`` beside the API's own bodies: a team's usage hour by hour, the
cluster's utilisation, the free shapes ``/metrics`` serves, and a job's checkpoints."""

from __future__ import annotations

import re

import pytest

from scheduler_core.api.metrics import FreeShape
from scheduler_core.errors import Forbidden
from scheduler_core.store.records import CheckpointRecord

from ..runtime_builders import make_spec, whole_nodes
from .harness import IDENTITIES, T0, Harness

pytestmark = pytest.mark.parametrize("api", ["memory", "sqlite"], indirect=True)
H = 3600.0


def test_usage_by_hour_and_utilisation_count_the_running_job_up_to_now(api: Harness) -> None:
    api.run(make_spec("eight").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    api.clock.advance(1.5 * H)
    series = api.service.usage_series(IDENTITIES["alice"], "fraud-ml", since=T0, until=T0 + 2 * H, step=H)
    assert series == {"h100": [8 * H, 4 * H]}
    assert api.service.usage_series(IDENTITIES["bob"], "search", since=T0, until=T0 + 2 * H, step=H) == {}
    with pytest.raises(Forbidden):
        api.service.usage_series(IDENTITIES["bob"], "fraud-ml", since=T0, until=T0 + 2 * H, step=H)
    h100 = sum(node.capacity.get("h100", 0) for node in api.service.node_by_name.values())
    # Half an hour into the second hour, that hour is judged on its half so far: all 8 GPUs held throughout.
    used = api.service.utilisation(since=T0, until=T0 + 2 * H, step=H)
    assert used["h100"] == pytest.approx([8 / h100, 8 / h100])
    assert all(not any(row) for flavour, row in used.items() if flavour != "h100")
    api.clock.advance(H)   # the job runs on: each hour, the last one's half so far included, fully held
    assert api.service.utilisation(since=T0, until=T0 + 3 * H, step=H)["h100"] == pytest.approx([8 / h100] * 3)

def test_free_shapes_are_the_figures_metrics_serves(api: Harness) -> None:
    api.run(make_spec("eight").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    shapes = api.service.free_shapes()
    metrics = api.http("GET", "/metrics", who=None).text
    for flavour, shape in shapes.items():
        served = {name: int(float(m.group(1))) for name in ("shoal_units_free", "shoal_largest_free_shape_units",
                                                            "shoal_largest_free_whole_nodes")
                  if (m := re.search(rf'^{name}{{flavour="{flavour}"}} (\S+)$', metrics, re.M))}
        assert FreeShape(served["shoal_units_free"], served["shoal_largest_free_shape_units"],
                         served["shoal_largest_free_whole_nodes"]) == shape, flavour


def test_checkpoints_oldest_first_for_the_team_only(api: Harness) -> None:
    job = api.run(make_spec("ckpt").pods(1, 8).build(), whole_nodes("h100-b0-n00"))
    for step, at in ((20, T0 + 200), (10, T0 + 100)):
        api.store.record_checkpoint(CheckpointRecord(job.id, step, f"file:///ckpt/{step}", 1 << 20, at, True))
    assert [c.step for c in api.service.checkpoints(IDENTITIES["alice"], job.id)] == [10, 20]
    with pytest.raises(Forbidden):
        api.service.checkpoints(IDENTITIES["bob"], job.id)
