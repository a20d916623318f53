"""``shoal sim --seeds … --against FILE``: which way each figure moved against an earlier run, seed by seed, and
the clear one-line refusal of a file that is not such a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler_core.cli.main import main
from scheduler_core.sim.against import AgainstError, against_markdown, compare, load_before, sign_test

from . import tiny
from .test_cli import trace


def row(policy: str, seed: int, **figures: float | None) -> dict[str, Any]:
    return {"workload": "w", "policy": policy, "seed": seed, **figures}


def test_each_figure_moves_the_way_its_name_says_is_better() -> None:
    before = [row("shoal", 0, utilization_while_waiting=0.90, idle_gpu_hours_while_waiting=100.0),
              row("shoal", 1, utilization_while_waiting=0.80, idle_gpu_hours_while_waiting=300.0),
              row("shoal", 2, utilization_while_waiting=0.95, idle_gpu_hours_while_waiting=50.0)]
    after = [row("shoal", 0, utilization_while_waiting=0.92, idle_gpu_hours_while_waiting=120.0),
             row("shoal", 1, utilization_while_waiting=0.80, idle_gpu_hours_while_waiting=200.0),
             row("shoal", 2, utilization_while_waiting=0.91, idle_gpu_hours_while_waiting=50.0)]
    result = compare(before, after, "before.json")
    util, idle = result.moved["shoal"]
    assert (util.figure, util.better, util.worse, util.equal) == ("utilization_while_waiting", 1, 1, 1)
    assert util.before == pytest.approx(0.8833, abs=1e-4) and util.after == pytest.approx(0.8767, abs=1e-4)
    assert (util.worst_before, util.worst_after) == ((1, 0.80), (1, 0.80))      # higher is better: the lowest
    assert (idle.better, idle.worse, idle.equal) == (1, 1, 1)                    # lower is better
    assert (idle.worst_before, idle.worst_after) == ((1, 300.0), (1, 200.0))
    assert result.pairs == 3 and result.unmatched == []
    table = against_markdown(result)
    assert "| utilization_while_waiting | 0.8833 | 0.8767 | 1 / 1 / 1 | 1 | 0.8 (s1) → 0.8 (s1) |" in table


@pytest.mark.parametrize("better, worse, p", [
    (0, 0, 1.0),            # nothing moved
    (1, 1, 1.0),
    (12, 8, 0.5034),        # a lean that even odds give half the time: not a result
    (15, 5, 0.0414),
    (16, 4, 0.011818),
    (5, 15, 0.0414),        # two-sided: the same either way
    (20, 0, 1.9073e-06),
    (3, 0, 0.25),           # three seeds can never show it
])
def test_the_sign_test_says_how_often_even_odds_split_the_seeds_that_unevenly(better: int, worse: int,
                                                                               p: float) -> None:
    assert sign_test(better, worse) == pytest.approx(p, rel=1e-3)


def test_only_the_pairs_both_runs_have_are_compared_and_the_rest_are_named() -> None:
    before = [row("shoal", 0, mean_jct_s=10.0), row("fifo", 0, mean_jct_s=20.0), row("shoal", 1, mean_jct_s=5.0)]
    before += [row("shoal", s, mean_jct_s=1.0) for s in (3, 4, 5, 7)]
    after = [row("shoal", 0, mean_jct_s=9.0), row("shoal", 2, mean_jct_s=1.0)]
    result = compare(before, after, "b.json")
    assert result.pairs == 1 and list(result.moved) == ["shoal"]
    assert [(m.figure, m.before, m.after, m.better) for m in result.moved["shoal"]] == [("mean_jct_s", 10.0, 9.0, 1)]
    assert result.unmatched == ["seed 0 `fifo` (only before)", "seeds 1, 3-5, 7 `shoal` (only before)",
                                "seed 2 `shoal` (only after)"]


def test_a_figure_undefined_on_a_seed_is_left_out_there() -> None:
    result = compare([row("shoal", 0, big_job_start_s=None), row("shoal", 1, big_job_start_s=30.0)],
                     [row("shoal", 0, big_job_start_s=5.0), row("shoal", 1, big_job_start_s=60.0)], "b.json")
    (big,) = result.moved["shoal"]
    assert (big.before, big.after, big.worse, big.better + big.equal) == (30.0, 60.0, 1, 0)


@pytest.mark.parametrize("content, message", [
    (b"not json", "not the JSON of a --seeds --json run (JSONDecodeError)"),
    (b"\x00\x00", "not the JSON of a --seeds --json run"),
    (b"\xff\xfe\xfa", "not the JSON of a --seeds --json run (UnicodeDecodeError)"),
    (b"[" * 100_000 + b"]" * 100_000, "not the JSON of a --seeds --json run (RecursionError)"),
    (b"[]", "no per_seed rows"),
    (b'{"workload": "w", "per_seed": []}', "no per_seed rows"),
    (b'{"workload": "w", "per_seed": [{"seed": true, "policy": "shoal"}]}', "no per_seed rows"),
    (b'{"workload": "w", "per_seed": [{"seed": 1}]}', "no per_seed rows"),
    (b'{"workload": "festive", "per_seed": [{"seed": 1, "policy": "shoal"}]}',
     "a run of workload 'festive', this one is 'w'"),
])
def test_a_file_that_is_not_an_earlier_run_is_one_readable_error(tmp_path: Path, content: bytes,
                                                                 message: str) -> None:
    path = tmp_path / "before.json"
    path.write_bytes(content)
    with pytest.raises(AgainstError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        load_before(path, "w")
    assert str(caught.value).startswith("--against before.json: ") and "\n" not in str(caught.value)


def test_a_run_against_itself_moves_nothing_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replays are deterministic: the same seeds against their own earlier output are equal on every figure."""
    cluster, teams = tiny.write_config(tmp_path)
    base = ["sim", "--workload", str(trace(tmp_path)), "--cluster", str(cluster), "--teams", str(teams),
            "--policy", "fifo", "--jobs", "1"]
    assert main([*base, "--seeds", "0-1", "--json"]) == 0
    before = tmp_path / "before.json"
    before.write_text(capsys.readouterr().out)
    assert main([*base, "--seeds", "0-2", "--json", "--against", str(before)]) == 0
    against = json.loads(capsys.readouterr().out)["against"]
    assert against["pairs"] == 2 and against["unmatched"] == ["seed 2 `fifo` (only after)"]
    moved = against["policies"]["fifo"]
    assert moved["utilization_while_waiting"]["equal"] == 2 and moved["utilization_while_waiting"]["sign_p"] == 1
    assert all(m["better"] == m["worse"] == 0 for name, m in moved.items() if name != "wall_s")
    assert main([*base, "--seeds", "0-1", "--against", str(before)]) == 0
    assert "## Against before.json (2 (seed, policy) pairs both runs have)" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--seed", "1"], "--jobs and --against are for many seeds: give them with --seeds"),
    (["--seeds", "0-1"], "--against before.json: not the JSON of a --seeds --json run"),
])
def test_bad_against_options_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  args: list[str], message: str) -> None:
    bad = tmp_path / "before.json"
    bad.write_text("{")
    assert main(["sim", "--workload", "tuesday", "--against", str(bad), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("shoal: error: ")
