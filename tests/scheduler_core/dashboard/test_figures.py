"""The dashboard's pure parts: usage split into hours, times in words, the MIG pool's slices, and SVG plots that
escape every text they draw."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from scheduler_core.api.accounting import Interval, usage_series
from scheduler_core.dashboard import figures, svg
from scheduler_core.model.allocation import AdmittedAs
from scheduler_core.schemas import NodeView

H = 3600.0


def _held(start: float, end: float, units: int = 1, flavour: str = "h100") -> Interval:
    return Interval("search", flavour, AdmittedAs.NOMINAL, start, end, units)


@pytest.mark.parametrize("case, intervals, since, until, expected", [
    ("inside one hour", [_held(600, 1200, 2)], 0, 3 * H, {"h100": [1200.0, 0.0, 0.0]}),
    ("across two hours", [_held(3000, 4200)], 0, 3 * H, {"h100": [600.0, 600.0, 0.0]}),
    ("clipped to the window", [_held(-H, 1.5 * H, 4)], 0, 2 * H, {"h100": [4 * H, 2 * H]}),
    ("a shorter last bucket", [_held(0, 2.5 * H)], 0, 2.5 * H, {"h100": [H, H, 0.5 * H]}),
    ("outside the window", [_held(5 * H, 6 * H)], 0, 2 * H, {}),
    ("two flavours", [_held(0, H, flavour="a100"), _held(H, 2 * H)], 0, 2 * H,
     {"a100": [H, 0.0], "h100": [0.0, H]}),
])
def test_usage_series(case: str, intervals: list[Interval], since: float, until: float,
                      expected: dict[str, list[float]]) -> None:
    assert usage_series(intervals, since=since, until=until, step=H) == expected, case


def test_usage_series_sums_to_what_was_held() -> None:
    intervals = [_held(123.4, 9876.5, 3), _held(7.7, 30000.0, 1)]  # the second clipped at 6 h
    series = usage_series(intervals, since=0, until=6 * H, step=H)
    assert sum(series["h100"]) == pytest.approx(3 * (9876.5 - 123.4) + (6 * H - 7.7))


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("offset, text", [
    (0, "12:00 UTC (now)"),
    (12 * 60, "12:12 UTC (in 12 min)"),
    (-(3 * H + 5 * 60), "08:55 UTC (3 h 05 min ago)"),
    (2 * 86400 + 4 * H, "2026-12-04 16:00 UTC (in 2 d 4 h)"),
    (45, "12:00 UTC (in 45 s)"),
])
def test_when(offset: float, text: str) -> None:
    assert figures.when(datetime.fromtimestamp(NOW + offset, tz=timezone.utc), NOW) == text


def test_when_without_a_time_is_a_dash() -> None:
    assert figures.when(None, NOW) == "—"


def _node(name: str, block: str, capacity: dict[str, int], allocated: dict[str, int],
          health: str = "ready") -> NodeView:
    return NodeView(name=name, block=block, leaf="l0", gpu_model="H100", health=health, health_reason="", spare=False,
                    small_jobs=False, capacity=capacity, allocated=allocated,
                    free={f: capacity[f] - allocated.get(f, 0) for f in capacity}, jobs=[], heartbeat_at=None,
                    gpu_utilization=None)


def test_the_mig_pool_is_the_nodes_with_slices_each_slice_held_or_free() -> None:
    nodes = [_node("b-n1", "b", {"h100": 8}, {"h100": 8}),
             _node("m-n2", "m", {"h100-mig-1g": 7}, {"h100-mig-1g": 3}, "suspect"),
             _node("m-n1", "m", {"h100-mig-3g": 2}, {})]
    pool = figures.mig_pool(nodes)
    assert [(n.name, n.health, n.slices) for n in pool] == [
        ("m-n1", "ready", {"h100-mig-3g": [False, False]}),
        ("m-n2", "suspect", {"h100-mig-1g": [True, True, True, False, False, False, False]}),
    ]
    assert [(b.name, [n.name for n in b.nodes], b.by_health) for b in figures.blocks(nodes)] == [
        ("b", ["b-n1"], {"ready": 1}), ("m", ["m-n1", "m-n2"], {"ready": 1, "suspect": 1})]


def test_plots_escape_their_text_and_draw_one_mark_per_value() -> None:
    chart = svg.bar_chart({"<script>x</script>": [1.0, 0.0, 2.5]}, ["a", "b", "c&d"], y_label="GPU-hours",
                          title='"quoted"')
    assert "<script>" not in chart and "&lt;script&gt;" in chart and "c&amp;d" in chart
    assert len(re.findall(r"<rect [^>]*fill=\"#2f6db5\"><title>", chart)) == 2   # no bar for the zero
    line = svg.line_chart({"h100": [0.5, 1.0]}, ["x", "y"], y_label="held", title="t", percent=True, top=1.0)
    assert line.count("<polyline") == 1 and "100%" in line
    scatter = svg.scatter_chart([(0, 3.0), (1, 1.0), (2, 2.0)], [(0, 3.0), (1, 1.0)], y_label="loss", title="t")
    assert scatter.count("<circle") == 3 and "best so far" in scatter
    assert svg.scatter_chart([], [], y_label="loss", title="t") == ""


def test_the_objective_plot_steps_down_at_each_new_best_when_minimising() -> None:
    from scheduler_core.schemas import TrialView

    def trial(number: int, value: float | None) -> TrialView:
        return TrialView.model_construct(number=number, value=value)   # the plot reads only these

    chart = figures.objective_plot([trial(0, 5.0), trial(1, 7.0), trial(2, 2.0), trial(3, None)], "minimize", "loss")
    assert chart.count("<circle") == 3
    assert "trial 2: 2" in chart


def test_the_cookie_secret_is_made_once_owner_only_and_read_back(tmp_path: Path) -> None:
    from scheduler_core.cli.up import _kept_secret

    path = tmp_path / "state" / "dashboard-cookie-secret"
    first = _kept_secret(path)
    assert _kept_secret(path) == first and len(first) == 64
    assert path.stat().st_mode & 0o777 == 0o600
