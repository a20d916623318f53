"""``shoal``: one command for users (submit, queue, show, …), operators (up, nodes, token) and engineers
(bench, sim). Bad input exits 2 with one readable line, as ``sbatch`` users expect."""

from __future__ import annotations

import sys

import click

from ..errors import ShoalError
from .lazy import LazyGroup

COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("scheduler_core.cli.up:command", "Start the API, controller (and JupyterHub) on embedded defaults."),
    "submit": ("scheduler_core.cli.jobs:submit", "Submit a job from a YAML file or flags."),
    "queue": ("scheduler_core.cli.jobs:queue", "Pending and running jobs, with reason and estimated start."),
    "show": ("scheduler_core.cli.jobs:show", "One job: state, placement, restarts, last checkpoint."),
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


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shoal")
def cli() -> None:
    """Shoal: share one GPU cluster from Jupyter."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. User mistakes print ``shoal: error: ...`` on one line and exit 2."""
    try:
        cli.main(args=argv, prog_name="shoal", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("shoal: aborted", err=True)
        return 130
    except click.ClickException as exc:
        message = exc.format_message().replace("\n", " ")
        click.echo(f"shoal: error: {message}", err=True)
        return exc.exit_code
    except ShoalError as exc:
        click.echo(f"shoal: error: {str(exc).splitlines()[0] if str(exc) else exc.code}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
