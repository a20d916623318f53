"""``shoal``: one command for users (submit, queue, show, logs, …), operators (up, nodes, token) and engineers
(bench, sim). A failure prints one ``shoal: error: ...`` line and exits with a code a script can act on
(``ExitCode``), in the habit of Slurm's commands: a usage error is not an auth error is not an unreachable API."""

from __future__ import annotations

import sys
from enum import IntEnum

import click

from ..errors import ConfigError, Forbidden, NotFound, ShoalError, Unauthorized, ValidationFailed
from .lazy import LazyGroup


class ExitCode(IntEnum):
    """What ``shoal`` exits with; ``shoal --help`` lists them (keep ``EXIT_CODES_HELP`` in step)."""

    OK = 0
    SERVER = 1       # the server failed, could not be reached, or the job's state does not allow the change
    USAGE = 2        # bad flags, a bad job file, a spec the server rejects as invalid
    AUTH = 3         # no token, an unknown or revoked one, or one that may not do this
    NOT_FOUND = 4    # no such job, sweep, node or team
    ABORTED = 130    # Ctrl-C


EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  the server failed or cannot be reached, or the job's state does not allow it
  2  usage: a bad flag, job file or spec
  3  authentication or permission: no token, a bad one, or not allowed
  4  not found: no such job, sweep, node or team
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("scheduler_core.cli.up:command", "Start the API, controller (and JupyterHub) on embedded defaults."),
    "submit": ("scheduler_core.cli.jobs:submit", "Submit a job from a YAML file or flags."),
    "queue": ("scheduler_core.cli.jobs:queue", "Pending and running jobs: reason, estimated start, time left."),
    "show": ("scheduler_core.cli.jobs:show", "One job: state, times, placement per rank, every start."),
    "logs": ("scheduler_core.cli.logs:logs", "A job's output, per rank and attempt; -f follows it."),
    "cancel": ("scheduler_core.cli.jobs:cancel", "Cancel a job."),
    "checkpoint": ("scheduler_core.cli.jobs:checkpoint", "Ask a running job to checkpoint now."),
    "usage": ("scheduler_core.cli.jobs:usage", "GPU-seconds by team and flavour, nominal vs borrowed."),
    "events": ("scheduler_core.cli.jobs:events", "Decisions and observations, for a job or all."),
    "nodes": ("scheduler_core.cli.nodes:nodes", "List nodes; fail or drain one (admin)."),
    "token": ("scheduler_core.cli.token:token", "Create API tokens (admin, on the store)."),
    "sweep": ("scheduler_core.cli.sweep:sweep", "Submit, list and show hyper-parameter sweeps."),
    "bench": ("scheduler_core.cli.bench:bench", "Benchmarks: the scheduling cycle, the API."),
    "sim": ("scheduler_core.sim.cli:command", "Replay a workload through a policy in virtual time."),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_CODES_HELP)
@click.version_option(package_name="shoal")
def cli() -> None:
    """Shoal: share one GPU cluster from Jupyter.

    \b
    The API and token are found in this order: SHOAL_URL / SHOAL_TOKEN, then (in a notebook server spawned by
    JupyterHub) the hub's JUPYTERHUB_API_TOKEN and services/shoal, then ~/.config/shoal/config.
    """


def exit_code(exc: ShoalError) -> ExitCode:
    """The exit code for an error (the client's errors are also the core's: ``JobNotFound`` is a ``NotFound``)."""
    if isinstance(exc, (Unauthorized, Forbidden)):
        return ExitCode.AUTH
    if isinstance(exc, NotFound):
        return ExitCode.NOT_FOUND
    if isinstance(exc, (ValidationFailed, ConfigError)):
        return ExitCode.USAGE
    return ExitCode.SERVER  # ServerError, ApiUnavailable, Conflict (the job's state), anything else


def main(argv: list[str] | None = None) -> int:
    """Run the CLI: one ``shoal: error: ...`` line on failure, and the ``ExitCode`` for it."""
    try:
        cli.main(args=argv, prog_name="shoal", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("shoal: aborted", err=True)
        return ExitCode.ABORTED
    except click.ClickException as exc:
        message = exc.format_message().replace("\n", " ")
        click.echo(f"shoal: error: {message}", err=True)
        return exc.exit_code  # a UsageError (bad flags) 2; a plain ClickException (a benchmark failed) 1
    except ShoalError as exc:
        click.echo(f"shoal: error: {str(exc).splitlines()[0] if str(exc) else exc.code}", err=True)
        return exit_code(exc)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
