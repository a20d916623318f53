"""``%%gpujob`` flags → ``JobSpec``: good lines give the spec they say; each bad one a ``UsageError`` naming the flag."""

from __future__ import annotations

import argparse

import pytest
from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

from magics.magic import GpuJobMagics
from magics.options import build_spec, cell_options, parse_cell
from scheduler_core.model import JobSpec, PriorityClass

COMMAND = ("python", "-m", "magics.runner", "/tmp/bundle")


def parse(line: str) -> argparse.Namespace:
    return parse_argstring(GpuJobMagics.gpujob, line)


def spec(line: str, **env: str) -> JobSpec:
    return build_spec(parse(line), team="fraud-ml", command=COMMAND, env=env, default_name="gpujob-3")


def test_defaults_are_one_h100_pod_for_a_day() -> None:
    s = spec("")
    assert (s.name, s.team, s.flavour, s.pods, s.gpus_per_pod) == ("gpujob-3", "fraud-ml", ("h100",), 1, 1)
    assert s.time_limit == 86400 and s.preemptible and s.topology is None
    assert s.priority_class is PriorityClass.STANDARD and s.checkpoint.interval == "auto"
    assert s.command == COMMAND


@pytest.mark.parametrize(("line", "expected"), [
    ("--pods 4 --gpus-per-pod 8", {"pods": 4, "gpus_per_pod": 8}),
    ("--flavour h100,a100", {"flavour": ("h100", "a100")}),
    ("--flavor A100", {"flavour": ("a100",)}),
    ("--flavour h100-mig-1g", {"flavour": ("h100-mig-1g",)}),
    ("--time 1h30m", {"time_limit": 5400.0}),
    ("--name risk-7b --priority-class HIGH", {"name": "risk-7b", "priority_class": PriorityClass.HIGH}),
    ("--no-preemptible", {"preemptible": False}),
    ("--preemptible", {"preemptible": True}),
])
def test_flags_set_the_spec(line: str, expected: dict[str, object]) -> None:
    s = spec(line)
    assert {k: getattr(s, k) for k in expected} == expected


@pytest.mark.parametrize(("line", "level", "required"), [
    ("--topology block", "block", True),
    ("--topology required:leaf", "leaf", True),
    ("--topology preferred:node", "node", False),
])
def test_topology(line: str, level: str, required: bool) -> None:
    topology = spec(line).topology
    assert topology is not None
    assert topology.level.name.lower() == level and topology.is_required is required


def test_checkpoint_interval_and_env_merge_over_packaging_env() -> None:
    s = spec("--checkpoint-interval 15m --env A=1 --env PYTHONUNBUFFERED=0 --env URL=http://x?a=b", PYTHONUNBUFFERED="1")
    assert s.checkpoint.interval == 900
    assert s.env == {"PYTHONUNBUFFERED": "0", "A": "1", "URL": "http://x?a=b"}


@pytest.mark.parametrize(("line", "words"), [
    ("--pods x", "argument --pods: invalid int value: 'x'"),
    ("--pods 0", "--pods 0: give at least 1 pod"),
    ("--pods 5000", "--pods 5000: Input should be less than or equal to 1024"),
    ("--gpus-per-pod 0", "--gpus-per-pod 0: give at least 1"),
    ("--gpus-per-pod 16", "gpus_per_pod is 16, but a node has at most 8 GPUs"),
    ("--flavour tpu", "--flavour 'tpu': unknown flavour 'tpu'"),
    ("--flavour h100,h100-mig-1g", "do not mix MIG slices and whole GPUs"),
    ("--flavour ,", "--flavour ',': name at least one"),
    ("--flavour h100-mig-1g --pods 2", "MIG slices are for single-pod work"),
    ("--time 2hours", "--time '2hours': expected a duration"),
    ("--time 10s", "--time '10s': time_limit must be between 1m and 60d"),
    ("--name 'bad name'", "--name 'bad name': use letters, digits"),
    ("--priority-class urgent", "--priority-class 'urgent': choose one of critical, high"),
    ("--topology rack", "--topology 'rack': give node, leaf or block"),
    ("--topology sometimes:block", "--topology 'sometimes:block'"),
    ("--checkpoint-interval 1s", "--checkpoint-interval '1s': interval must be at least 10s"),
    ("--checkpoint-interval often", "--checkpoint-interval 'often'"),
    ("--env NOEQUALS", "--env 'NOEQUALS': write KEY=VALUE"),
    ("--env 1X=2", "--env: invalid environment variable name '1X'"),
    ("--gpus 8", "unrecognized arguments: --gpus 8"),
    ("--preemptible=no", "ignored explicit argument 'no'"),
])
def test_bad_flags_raise_usage_error_naming_the_flag(line: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        spec(line)
    assert words in str(info.value)


@pytest.mark.parametrize(("line", "problems"), [
    ("--pods 0 --flavour tpu", ["--pods 0: give at least 1 pod", "--flavour 'tpu': unknown flavour 'tpu'"]),
    ("--gpus-per-pod 0 --priority-class urgent --time 2hours --topology rack",
     ["--gpus-per-pod 0: give at least 1", "--priority-class 'urgent': choose one of", "--topology 'rack'",
      "--time '2hours': expected a duration"]),
    ("--env NOEQUALS --checkpoint-interval often --ranks some --push 1x",
     ["--push '1x'", "--ranks 'some'", "--checkpoint-interval 'often'", "--env 'NOEQUALS'"]),
])
def test_every_bad_flag_is_named_at_once(line: str, problems: list[str]) -> None:
    with pytest.raises(UsageError) as info:
        parse_cell(parse(line), team="fraud-ml", command=COMMAND, env={}, default_name="gpujob-3")
    head, *lines = str(info.value).splitlines()
    assert head == f"{len(problems)} problems with the flags:"
    assert len(lines) == len(problems)
    assert all(any(words in line for line in lines) for words in problems), lines


def test_one_good_line_parses_into_spec_and_options() -> None:
    spec, options = parse_cell(parse("--pods 2 --gpus-per-pod 8 --ranks all --wait"), team="fraud-ml",
                               command=COMMAND, env={}, default_name="gpujob-3")
    assert (spec.pods, spec.gpus_per_pod, options.ranks, options.wait) == (2, 8, None, True)


@pytest.mark.parametrize(("line", "push", "pull", "ranks", "wait"), [
    ("", (), (), (0,), False),
    ("--push a,b --push c --pull loss --wait", ("a", "b", "c"), ("loss",), (0,), True),
    ("--ranks all", (), (), None, False),
    ("--ranks 1,0,1", (), (), (0, 1), False),
])
def test_cell_options(line: str, push: tuple[str, ...], pull: tuple[str, ...], ranks: tuple[int, ...] | None,
                      wait: bool) -> None:
    opts = cell_options(parse(line))
    assert (opts.push, opts.pull, opts.ranks, opts.wait) == (push, pull, ranks, wait)


@pytest.mark.parametrize(("line", "words"), [
    ("--push 1x", "--push '1x': not a Python variable name"),
    ("--pull a --pull a", "--pull 'a' is given twice"),
    ("--push a,", "--push '': not a Python variable name"),
    ("--ranks some", "--ranks 'some': give 'all' or rank numbers"),
    ("--ranks -1", "--ranks '-1': ranks start at 0"),
])
def test_bad_cell_options(line: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        cell_options(parse(line))
    assert words in str(info.value)
