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


def cell_options(args: argparse.Namespace) -> CellOptions:
    push = names_list(args.push, "--push")
    pull = names_list(args.pull, "--pull")
    return CellOptions(push=push, pull=pull, ranks=parse_ranks(args.ranks), wait=bool(args.wait))


def build_spec(args: argparse.Namespace, *, team: str, command: Sequence[str], env: Mapping[str, str],
               default_name: str) -> JobSpec:
    """The ``JobSpec`` a ``%%gpujob`` line describes. ``env`` is the packaging's own (``--env`` overrides it).

    Every problem becomes a ``UsageError`` naming the flag, before anything reaches the scheduler.
    """
    if args.pods < 1:
        raise UsageError(f"--pods {args.pods}: give at least 1 pod")
    if args.gpus_per_pod < 1:
        raise UsageError(f"--gpus-per-pod {args.gpus_per_pod}: give at least 1")
    try:
        priority = PriorityClass(args.priority_class.strip().lower())
    except ValueError:
        raise UsageError(f"--priority-class {args.priority_class!r}: choose one of "
                         f"{', '.join(p.value for p in PriorityClass)}") from None
    flavours = tuple(f.strip().lower() for f in args.flavour.split(",") if f.strip())
    if not flavours:
        raise UsageError(f"--flavour {args.flavour!r}: name at least one of {', '.join(FLAVOURS)}")
    try:
        checkpoint = CheckpointPolicy(interval=args.checkpoint_interval.strip().lower())
    except ValidationError as exc:
        raise UsageError(f"--checkpoint-interval {args.checkpoint_interval!r}: {_first_message(exc)}") from None
    merged_env = {**env, **parse_env(args.env)}
    try:
        return JobSpec(
            name=unquote(args.name) if args.name else default_name,
            team=team,
            flavour=flavours,
            pods=args.pods,
            gpus_per_pod=args.gpus_per_pod,
            topology=parse_topology(args.topology),
            time_limit=args.time,
            priority_class=priority,
            preemptible=args.preemptible,
            checkpoint=checkpoint,
            env=merged_env,
            command=tuple(command),
        )
    except ValidationError as exc:
        raise UsageError(spec_error_message(exc, args)) from None


def spec_error_message(exc: ValidationError, args: argparse.Namespace) -> str:
    """One line per problem, each naming the flag and the value typed."""
    lines = []
    for error in exc.errors():
        loc = error.get("loc", ())
        field = str(loc[0]) if loc else ""
        flag = FIELD_FLAGS.get(field, "")
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
