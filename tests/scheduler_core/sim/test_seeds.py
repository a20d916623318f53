"""``shoal sim --seeds``: parsing, the aggregation across seeds (generic over whatever figures a run reports), the
JSON shape, and a two-seed, two-policy run end to end in worker processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler_core.cli.main import main
from scheduler_core.sim.seeds import MAX_SEEDS, SeedsError, aggregate, higher_is_better, parse_seeds, seeds_document

from . import tiny
from .test_cli import trace


@pytest.mark.parametrize("text, seeds", [
    ("0-19", tuple(range(20))),
    ("0,3,7", (0, 3, 7)),
    ("7", (7,)),
    ("0-2,9, 4 - 5", (0, 1, 2, 9, 4, 5)),
    ("3,0-4", (3, 0, 1, 2, 4)),          # each seed once, in the order first given
    ("5-5", (5,)),
])
def test_seeds_parse(text: str, seeds: tuple[int, ...]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text, message", [
    ("5-2", "runs backwards: write 2-5"),
    ("a", "'a' is not a seed"),
    ("", "--seeds is empty"),
    ("  ", "--seeds is empty"),
    ("1,,2", "'' is not a seed"),
    ("-3", "'-3' is not a seed"),
    ("1.5", "'1.5' is not a seed"),
    (f"0-{MAX_SEEDS}", f"more than {MAX_SEEDS:,} seeds"),
    ("0-99999999999", "more than"),
])
def test_bad_seeds_are_one_readable_error(text: str, message: str) -> None:
    with pytest.raises(SeedsError, match=message.replace("(", r"\(")):
        parse_seeds(text)


@pytest.mark.parametrize("args, message", [
    (["--seeds", "5-2"], "shoal: error: --seeds range 5-2 runs backwards: write 2-5"),
    (["--seeds", "a"], "is not a seed"),
    (["--seeds", ""], "--seeds is empty"),
    (["--seeds", "0-5000000"], "more than 1,000 seeds"),
    (["--seeds", "0-1", "--seed", "3"], "drop --seed"),
    (["--jobs", "2"], "give them with --seeds"),
])
def test_bad_seed_options_exit_2_with_one_line(args: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--workload", "tuesday", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("shoal: error: ")


def row(policy: str, seed: int, **figures: Any) -> dict[str, Any]:
    return {"workload": "w", "policy": policy, "seed": seed, "cluster": {"name": "c", "nodes": 4}, **figures}


def test_aggregate_gives_mean_min_max_and_the_worst_seed_in_the_right_direction() -> None:
    rows = [row("shoal", 0, utilization=0.9, wait_p99_s=100.0, jobs=10, big_job_start_s=None),
            row("shoal", 1, utilization=0.7, wait_p99_s=300.0, jobs=10, big_job_start_s=50.0),
            row("shoal", 2, utilization=0.8, wait_p99_s=200.0, jobs=10, big_job_start_s=None),
            row("fifo", 0, utilization=0.5, wait_p99_s=900.0, jobs=10, big_job_start_s=None)]
    spreads = aggregate(rows)
    assert list(spreads) == ["shoal", "fifo"]
    util = spreads["shoal"]["utilization"]
    assert util is not None
    assert (round(util.mean, 6), util.min, util.max, util.worst, util.worst_seed, util.seeds) == \
        (0.8, 0.7, 0.9, 0.7, 1, 3)                                   # higher is better: the worst is the least
    wait = spreads["shoal"]["wait_p99_s"]
    assert wait is not None and (wait.worst, wait.worst_seed) == (300.0, 1)   # lower is better: the most
    jobs = spreads["shoal"]["jobs"]
    assert jobs is not None and jobs.worst_seed is None and jobs.mean == 10   # describes the input
    big = spreads["shoal"]["big_job_start_s"]
    assert big is not None and big.seeds == 1 and big.worst_seed == 1         # undefined seeds left out
    assert spreads["fifo"]["big_job_start_s"] is None
    assert "cluster" not in spreads["shoal"] and "seed" not in spreads["shoal"]


def test_aggregate_takes_new_figures_and_dicts_without_being_told() -> None:
    """A figure the simulator starts reporting (eta's estimate error, say) aggregates as it is."""
    rows = [row("shoal", 0, eta_error_p50_s=30.0, eta_error_p90_s=120.0, signals_by_reason={"Reclaim": 3}),
            row("shoal", 1, eta_error_p50_s=10.0, eta_error_p90_s=240.0, signals_by_reason={"Gang": 2}),
            row("shoal", 2, flag=True, name="text", eta_error_p50_s=20.0, signals_by_reason={})]
    spreads = aggregate(rows)["shoal"]
    p50, p90 = spreads["eta_error_p50_s"], spreads["eta_error_p90_s"]
    assert p50 is not None and (p50.mean, p50.worst_seed) == (20.0, 0)
    assert p90 is not None and (p90.seeds, p90.max, p90.worst_seed) == (2, 240.0, 1)
    reclaim = spreads["signals_by_reason.Reclaim"]
    assert reclaim is not None and (reclaim.mean, reclaim.min, reclaim.seeds) == (1.0, 0.0, 3)   # missing: none
    assert "flag" not in spreads and "name" not in spreads


@pytest.mark.parametrize("name, higher", [
    ("utilization_while_waiting", True), ("fairness_jain", True), ("jobs_finished", True),
    ("wait_p99_s", False), ("preemptions", False), ("eta_error_p90_s", False), ("gpu_hours_lost", False),
    ("jobs", None), ("simulated_s", None), ("signals_by_reason.Reclaim", False),
])
def test_which_way_a_figure_is_worse(name: str, higher: bool | None) -> None:
    assert higher_is_better(name) is higher


def test_the_document_has_per_seed_rows_and_an_aggregate() -> None:
    rows = [row("shoal", s, utilization=0.5 + s / 10) for s in (4, 2)]
    document = seeds_document(rows, (4, 2))
    assert document["seeds"] == [4, 2] and document["policies"] == ["shoal"]
    assert document["per_seed"] == rows and document["cluster"] == {"name": "c", "nodes": 4}
    assert document["aggregate"]["shoal"]["utilization"] == {"mean": 0.8, "min": 0.7, "max": 0.9, "worst": 0.7,
                                                             "worst_seed": 2, "seeds": 2}
    json.dumps(document)


def test_two_seeds_two_policies_end_to_end_in_processes(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The same pairs, run in two worker processes, give the figures of the single-seed runs, row for row."""
    cluster, teams = tiny.write_config(tmp_path)
    base = ["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams)]
    out_dir = tmp_path / "seeds"
    assert main([*base, "--seeds", "3,5", "--policy", "all", "--jobs", "2", "--json", "--report", str(out_dir)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(r["seed"], r["policy"]) for r in document["per_seed"]] == \
        [(s, p) for s in (3, 5) for p in ("shoal", "fifo", "kueue", "easy")]
    assert document["cluster"]["name"] == "tiny" and document["cluster"]["units"] == {"h100": 64}
    for policy in ("shoal", "fifo"):
        mine = [r for r in document["per_seed"] if r["policy"] == policy]
        spread = document["aggregate"][policy]["wait_p99_s"]
        assert spread["min"] == min(r["wait_p99_s"] for r in mine) and spread["seeds"] == 2
        assert spread["worst_seed"] == max(mine, key=lambda r: r["wait_p99_s"])["seed"]
    assert main([*base, "--seed", "5", "--policy", "kueue", "--json"]) == 0
    single = json.loads(capsys.readouterr().out)
    many = next(r for r in document["per_seed"] if (r["seed"], r["policy"]) == (5, "kueue"))
    assert {k: v for k, v in single.items() if k != "wall_s"} == {k: v for k, v in many.items() if k != "wall_s"}
    assert (out_dir / "boxplots.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out_dir / "summary.json").read_text())["seeds"] == [3, 5]
    report = (out_dir / "report.md").read_text()
    assert "## Across seeds" in report and "| 5 | `easy` |" in report and "worst s" in report


def test_many_seeds_as_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, teams = tiny.write_config(tmp_path)
    assert main(["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
                 "--seeds", "0-1", "--policy", "fifo", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cluster: tiny — 8 nodes in 2 blocks; units h100 64")
    assert "| 0 | `fifo` |" in out and "| 1 | `fifo` |" in out
    assert "| utilization_while_waiting |" in out and "`fifo` mean (min–max; worst seed)" in out


def test_a_workload_built_by_one_process_is_read_back_by_the_others(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_all``'s worker processes share each seed's workload through the run's directory: the first builds
    and writes it whole, the next reads it instead of building it again."""
    from scheduler_core.sim import seeds
    from scheduler_core.sim.inputs import WorkloadArgs

    cluster, teams = tiny.write_config(tmp_path)
    args = WorkloadArgs(str(trace(tmp_path)), str(cluster), str(teams))
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    built = seeds._workload.__wrapped__(args, 0, shelf)
    assert [p.name for p in shelf.iterdir()] == ["0.pickle"]

    def no_second_build(*_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(seeds, "load_workload", no_second_build)
    again = seeds._workload.__wrapped__(args, 0, shelf)
    assert again == built and again is not built
