"""The flags of ``%%gpujob`` and how they become a ``JobSpec``.

Flags are parsed by IPython's ``magic_arguments`` (argparse underneath, so ``%%gpujob?`` shows them all and a
malformed flag already raises ``UsageError``). What argparse cannot judge — a flavour that does not exist, a
duration like ``2 hours``, eight GPUs on a MIG slice — is judged by ``JobSpec`` itself, and its pydantic error is
turned back into a ``UsageError`` that names the *flag*, not the model field, so the message says what to type.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments
from pydantic import ValidationError

from scheduler_core.model import FLAVOURS, CheckpointPolicy, JobSpec, PriorityClass, Topology

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: JobSpec field (first part of pydantic's error location) → the flag a user types to set it.
FIELD_FLAGS: Mapping[str, str] = {
    "name": "--name",
    "flavour": "--flavour",
    "pods": "--pods",
    "gpus_per_pod": "--gpus-per-pod",
    "topology": "--topology",
    "time_limit": "--time",
    "priority_class": "--priority-class",
    "preemptible": "--preemptible",
    "checkpoint": "--checkpoint-interval",
    "env": "--env",
    "team": "the team of your token",
    "command": "the job's command",
}

DEFAULT_FLAVOUR = "h100"
DEFAULT_NAME = "gpujob"


def cell_arguments(func: F) -> F:
    """Decorate the ``%%gpujob`` cell magic with every flag it takes (the order here is the order in ``--help``)."""
    decorators = [
        magic_arguments(),
        argument("--pods", type=int, default=1, metavar="N", help="pods in the gang; all start together or none"),
        argument("--gpus-per-pod", type=int, default=1, metavar="G",
                 help="GPUs per pod (MIG slices per pod for a MIG flavour)"),
        argument("--flavour", "--flavor", default=DEFAULT_FLAVOUR, metavar="F[,F...]",
                 help=f"GPU flavour, or flavours in order of preference, comma-separated "
                      f"({', '.join(FLAVOURS)}); default {DEFAULT_FLAVOUR}"),
        argument("--topology", metavar="[required:|preferred:]LEVEL",
                 help="keep the gang inside one node, leaf or block: 'block' (= required:block) or "
                      "'preferred:leaf'"),
        argument("--time", default="24h", metavar="DURATION",
                 help="time limit, e.g. 30m, 2h, 1h30m (default 24h); the job is stopped or checkpointed at it"),
        argument("--name", default=None, help=f"job name (default {DEFAULT_NAME}-<cell number>)"),
        argument("--priority-class", default=PriorityClass.STANDARD.value,
                 help=f"one of {', '.join(p.value for p in PriorityClass)}"),
        argument("--preemptible", action=argparse.BooleanOptionalAction, default=True,
                 help="may be preempted to checkpoint (default); --no-preemptible for code that cannot resume"),
        argument("--checkpoint-interval", default="auto", metavar="auto|DURATION",
                 help="how often the job should checkpoint: 'auto' (Young-Daly) or a duration"),
        argument("--env", action="append", default=[], metavar="KEY=VALUE",
                 help="an environment variable for every pod (repeatable)"),
        argument("--push", action="append", default=[], metavar="NAME[,NAME...]",
                 help="send notebook variables to the job (pickled; repeatable)"),
        argument("--pull", action="append", default=[], metavar="NAME[,NAME...]",
                 help="bring variables rank 0 defines back into the notebook when the job succeeds (repeatable)"),
        argument("--ranks", default="0", metavar="0|all|R[,R...]",
                 help="whose output to stream into the cell (default rank 0)"),
        argument("--wait", action="store_true", help="block until the job ends, then pull its values"),
    ]
    for decorate in reversed(decorators):
        func = decorate(func)
    # "--gpus 8" must not quietly mean --gpus-per-pod: a typo'd flag is an error, not a guess.
    func.parser.allow_abbrev = False  # type: ignore[attr-defined]
    return func


def unquote(text: str) -> str:
    """IPython splits magic lines without removing quotes (``--env "A=x y"`` keeps them); take one pair off."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


@dataclass(frozen=True, slots=True)
class CellOptions:
    """What a ``%%gpujob`` line asks for beyond the spec: data to move and how to follow the job."""

    push: tuple[str, ...]
    pull: tuple[str, ...]
    ranks: tuple[int, ...] | None  # None: every rank
    wait: bool


def names_list(values: Sequence[str], flag: str) -> tuple[str, ...]:
    """``["a,b", "c"]`` → ``("a", "b", "c")``, every one a Python identifier, none twice."""
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name.isidentifier():
                raise UsageError(f"{flag} {name!r}: not a Python variable name")
            if name in names:
                raise UsageError(f"{flag} {name!r} is given twice")
            names.append(name)
    return tuple(names)


def parse_ranks(text: str) -> tuple[int, ...] | None:
    if text.strip().lower() == "all":
        return None
    try:
        ranks = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        raise UsageError(f"--ranks {text!r}: give 'all' or rank numbers such as 0 or 0,1") from None
    if any(r < 0 for r in ranks):
        raise UsageError(f"--ranks {text!r}: ranks start at 0")
    return ranks


def parse_topology(text: str | None) -> Topology | None:
    if text is None:
        return None
    kind, _, level = text.strip().lower().rpartition(":")
    kind = kind or "required"
    if kind not in ("required", "preferred") or level not in ("node", "leaf", "block"):
        raise UsageError(f"--topology {text!r}: give node, leaf or block, optionally prefixed by "
                         f"'required:' or 'preferred:' (e.g. --topology preferred:leaf)")
    return Topology(**{kind: level})


def parse_env(values: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        key, sep, value = unquote(item).partition("=")
        if not sep or not key:
            raise UsageError(f"--env {item!r}: write KEY=VALUE")
        env[key] = value
    return env


class Problems:
    """Every mistake on one ``%%gpujob`` line, so the user fixes them all at once rather than one per run."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.flags: set[str] = set()

    def check(self, flag: str, parse: Callable[[], T], fallback: T) -> T:
        """``parse()``, or ``fallback`` with its ``UsageError`` noted against ``flag``."""
        try:
            return parse()
        except UsageError as exc:
            self.add(flag, str(exc))
            return fallback

    def add(self, flag: str, message: str) -> None:
        self.flags.add(flag)
        self.lines.extend(line for line in message.splitlines() if line not in self.lines)

    def raise_any(self) -> None:
        if not self.lines:
            return
        if len(self.lines) == 1:
            raise UsageError(self.lines[0])
        raise UsageError(f"{len(self.lines)} problems with the flags:\n" + "\n".join(f"  {line}"
                                                                                       for line in self.lines))


def cell_options(args: argparse.Namespace, problems: Problems | None = None) -> CellOptions:
    """The line's data and following options; with ``problems``, mistakes are noted there instead of raised."""
    own = problems or Problems()
    none: tuple[str, ...] = ()
    rank_0: tuple[int, ...] | None = (0,)
    push = own.check("--push", lambda: names_list(args.push, "--push"), none)
    pull = own.check("--pull", lambda: names_list(args.pull, "--pull"), none)
    ranks = own.check("--ranks", lambda: parse_ranks(args.ranks), rank_0)
    if problems is None:
        own.raise_any()
    return CellOptions(push=push, pull=pull, ranks=ranks, wait=bool(args.wait))


def parse_cell(args: argparse.Namespace, *, team: str, command: Sequence[str], env: Mapping[str, str],
               default_name: str) -> tuple[JobSpec, CellOptions]:
    """The spec and the options of a ``%%gpujob`` line, or one ``UsageError`` naming every bad flag."""
    problems = Problems()
    options = cell_options(args, problems)
    spec = _spec(args, team=team, command=command, env=env, default_name=default_name, found=problems)
    problems.raise_any()
    assert spec is not None  # no problems: the spec was built
    return spec, options


def build_spec(args: argparse.Namespace, *, team: str, command: Sequence[str], env: Mapping[str, str],
               default_name: str) -> JobSpec:
    """The ``JobSpec`` a ``%%gpujob`` line describes. ``env`` is the packaging's own (``--env`` overrides it).

    Every problem becomes a line of one ``UsageError`` naming the flag, before anything reaches the scheduler.
    """
    found = Problems()
    spec = _spec(args, team=team, command=command, env=env, default_name=default_name, found=found)
    found.raise_any()
    assert spec is not None
    return spec


def _spec(args: argparse.Namespace, *, team: str, command: Sequence[str], env: Mapping[str, str],
          default_name: str, found: Problems) -> JobSpec | None:
    """The spec, noting each problem in ``found``: a flag found wrong here stands in with its default, so the
    spec's own checks still judge all the others (``--pods 0 --flavour tpu`` names both)."""
    if args.pods < 1:
        found.add("--pods", f"--pods {args.pods}: give at least 1 pod")
    if args.gpus_per_pod < 1:
        found.add("--gpus-per-pod", f"--gpus-per-pod {args.gpus_per_pod}: give at least 1")
    priority = found.check("--priority-class", lambda: _priority(args.priority_class), PriorityClass.STANDARD)
    flavours = tuple(f.strip().lower() for f in args.flavour.split(",") if f.strip())
    if not flavours:
        found.add("--flavour", f"--flavour {args.flavour!r}: name at least one of {', '.join(FLAVOURS)}")
    checkpoint = found.check("--checkpoint-interval", lambda: _checkpoint(args.checkpoint_interval),
                             CheckpointPolicy())
    topology = found.check("--topology", lambda: parse_topology(args.topology), None)
    merged_env = {**env, **found.check("--env", lambda: parse_env(args.env), {})}
    try:
        return JobSpec(
            name=unquote(args.name) if args.name else default_name,
            team=team,
            flavour=flavours or (DEFAULT_FLAVOUR,),
            pods=max(args.pods, 1) if "--pods" in found.flags else args.pods,
            gpus_per_pod=max(args.gpus_per_pod, 1) if "--gpus-per-pod" in found.flags else args.gpus_per_pod,
            topology=topology,
            time_limit=args.time,
            priority_class=priority,
            preemptible=args.preemptible,
            checkpoint=checkpoint,
            env=merged_env,
            command=tuple(command),
        )
    except ValidationError as exc:
        found.add("spec", spec_error_message(exc, args, skip=found.flags))
        return None


def _priority(text: str) -> PriorityClass:
    try:
        return PriorityClass(text.strip().lower())
    except ValueError:
        raise UsageError(f"--priority-class {text!r}: choose one of "
                         f"{', '.join(p.value for p in PriorityClass)}") from None


def _checkpoint(text: str) -> CheckpointPolicy:
    try:
        return CheckpointPolicy(interval=text.strip().lower())
    except ValidationError as exc:
        raise UsageError(f"--checkpoint-interval {text!r}: {_first_message(exc)}") from None


def spec_error_message(exc: ValidationError, args: argparse.Namespace, *,
                       skip: set[str] | frozenset[str] = frozenset()) -> str:
    """One line per problem, each naming the flag and the value typed (none for the flags in ``skip``, already
    reported)."""
    lines = []
    for error in exc.errors():
        loc = error.get("loc", ())
        field = str(loc[0]) if loc else ""
        flag = FIELD_FLAGS.get(field, "")
        if flag in skip:
            continue
        message = _clean(error.get("msg", ""))
        if field == "name" and error.get("type") == "string_pattern_mismatch":
            message = "use letters, digits, '.', '_' and '-', starting with a letter or digit"
        if not flag:
            lines.append(message)
            continue
        typed = _typed_value(args, field)
        lines.append(f"{flag} {typed}: {message}" if typed is not None else f"{flag}: {message}")
    return "\n".join(lines)


def _typed_value(args: argparse.Namespace, field: str) -> str | None:
    attr = {"time_limit": "time", "checkpoint": "checkpoint_interval"}.get(field, field)
    value = getattr(args, attr, None)
    if value is None or isinstance(value, (list, bool)):
        return None
    return repr(unquote(value)) if isinstance(value, str) else str(value)


def _first_message(exc: ValidationError) -> str:
    errors = exc.errors()
    return _clean(errors[0].get("msg", "")) if errors else str(exc)


def _clean(message: str) -> str:
    # pydantic prefixes messages of custom validators with "Value error, "; the user needs only the reason.
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message
