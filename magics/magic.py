"""``%%gpujob`` and ``%gpujob``: submit a cell as a gang job of your team, and look after it from the notebook.

Cell magic::

    %%gpujob --pods 2 --gpus-per-pod 8 --flavour h100 --time 2h --push lr --pull loss --wait
    import os
    print(os.environ["RANK"], os.environ["WORLD_SIZE"])
    loss = train(lr)

Line magics::

    %gpujob queue                  your team's pending and running jobs
    %gpujob status ID              one job: state, queue position, reason, placement, restarts, checkpoint
    %gpujob logs ID [--rank R]     what a pod printed (rank 0 unless --rank)
    %gpujob cancel ID              stop a job (its pods get SIGTERM, then a kill after the grace period)
    %gpujob pull ID                load a finished job's --pull values into the notebook again
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, cast

from IPython.core.error import UsageError
from IPython.core.inputtransformer2 import TransformerManager
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser, parse_argstring
from IPython.display import display
from traitlets import Enum, Float, Unicode

from scheduler_core.client import ApiError, ApiUnavailable, InvalidRequest
from scheduler_core.schemas import FINISHED_STATES

from .bundle import BundleError, new_key, runner_command, runner_env, write_bundle
from .client import JobsClient, connect
from .fields import describe, utcnow
from .follow import Sink, TextSink, WidgetSink, read_log
from .job import GpuJob, JobFailed
from .options import FIELD_FLAGS, cell_arguments, parse_cell
from .text import job_block, queue_table
from .widget import JobWidget

SUBCOMMANDS = ("queue", "status", "logs", "cancel", "pull")


@magics_class
class GpuJobMagics(Magics):
    display_mode = Enum(["auto", "widget", "text"], default_value="auto",
                        help="how to show a submitted job: a live ipywidget (in a kernel with a frontend), plain "
                             "text (terminal IPython), or 'auto' to choose").tag(config=True)
    poll_interval = Float(1.0, help="seconds between polls of a followed job's state and output").tag(config=True)
    bundle_dir = Unicode(".shoal/jobs", help="where job bundles (cell source, pushed and pulled values) are "
                                             "written, relative to the working directory").tag(config=True)

    def __init__(self, shell: Any = None, *, client_factory: Callable[[], JobsClient] = connect,
                 **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._client_factory = client_factory
        self._client: JobsClient | None = None
        self._team: str | None = None
        #: Every job submitted from this kernel, by id.
        self.jobs: dict[str, GpuJob] = {}

    @property
    def user_ns(self) -> dict[str, Any]:
        """The notebook's namespace: where --push values come from and --pull values go."""
        if self.shell is None:
            raise UsageError("%gpujob needs a running IPython shell")
        return cast(dict[str, Any], self.shell.user_ns)

    # -- connection ----------------------------------------------------------------------------------------------

    @property
    def client(self) -> JobsClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def team(self) -> str:
        if self._team is None:
            self._team = self._call(lambda: self.client.whoami()).team
        return self._team

    def _call(self, fn: Callable[[], Any], refused: str = "the scheduler refused") -> Any:
        """Run a client call; the scheduler's refusals become ``UsageError``s naming what to change."""
        try:
            return fn()
        except InvalidRequest as exc:
            details = "; ".join(f"{_flag_for(field)}: {msg}" for field, msg in exc.fields.items())
            raise UsageError(f"{refused}: {exc.message}" + (f" ({details})" if details else "")) from None
        except (ApiError, ApiUnavailable) as exc:
            raise UsageError(str(exc)) from None

    # -- the magic -----------------------------------------------------------------------------------------------

    @cell_arguments
    @line_cell_magic
    def gpujob(self, line: str, cell: str | None = None) -> Any:
        """%%gpujob: run the cell as a gang job of your team on the cluster (docs/gpujob.md).

        Every pod runs the cell with your kernel's Python, in your working directory, with the job contract's
        environment (RANK, WORLD_SIZE, ...). Kernel variables are not visible: send them with --push, bring
        results back with --pull. The latest job is ``_gpujob`` in the notebook.

        Line forms:
          %gpujob queue [--team T]       your team's pending and running jobs
          %gpujob status ID              one job: state, position, reason, placement, restarts, checkpoint
          %gpujob logs ID [--rank R]     what a pod printed (rank 0 unless --rank)
          %gpujob cancel ID              stop a job
          %gpujob pull ID                load a finished job's --pull values into the notebook
        """
        if cell is None:
            return self._line(line)
        return self._submit(line, cell)

    def _submit(self, line: str, cell: str) -> GpuJob | None:
        # getattr: IPython types @line_cell_magic loosely, and the parser lives on the decorated function.
        args = parse_argstring(getattr(self, "gpujob"), line)
        check_source(cell)
        count = getattr(self.shell, "execution_count", None)
        key = new_key()
        root = Path(os.getcwd()) / self.bundle_dir
        bundle_path = root / key
        spec, opts = parse_cell(args, team=self.team(), command=runner_command(bundle_path), env=runner_env(),
                                default_name=f"gpujob-{count}" if count else "gpujob")
        pushed = self._pushed_values(opts.push)
        try:
            bundle = write_bundle(root, key, source=cell, push=pushed, pull=opts.pull)
        except BundleError as exc:
            raise UsageError(str(exc)) from None
        try:
            submitted = self._call(lambda: self.client.submit(spec, idempotency_key=key),
                                   refused="the scheduler rejected the job")
        except BaseException:
            shutil.rmtree(bundle, ignore_errors=True)  # nothing was submitted: leave nothing behind
            raise
        job_id = submitted.job_id
        widgets = self._use_widgets()
        prefix = opts.ranks is None or len(opts.ranks) > 1
        ui: JobWidget | None = None
        sink: Sink
        if widgets:
            ui = JobWidget(job_id, spec.name, spec.team, on_cancel=lambda: self._call(lambda: self.client.cancel(job_id)))
            ui.set_log_title(_log_title(opts.ranks, opts.wait))
            sink = WidgetSink(ui, prefix_ranks=prefix, into_cell=opts.wait)
        else:
            sink = TextSink(prefix_ranks=prefix)
        job = GpuJob(self.client, job_id, spec, bundle, opts.pull, ui, sink, opts.ranks, self.user_ns)
        self.jobs[job_id] = job
        self.user_ns["_gpujob"] = job
        if ui is not None:
            display(ui.widget)
        else:
            print(f"[shoal] submitted job {job_id} ({spec.name}) to {spec.team}'s queue: "
                  f"{spec.pods} × {spec.gpus_per_pod} {','.join(spec.flavour)}")
        if opts.wait:
            self._wait(job, ui)
            return None
        if ui is not None:
            job.follow_in_background(self.poll_interval, on_error=lambda msg: ui.note(msg, error=True))
        else:
            job.follower.step()
            print(f"[shoal] not waiting: %gpujob status {job_id} · %gpujob logs {job_id} · %gpujob cancel {job_id}"
                  + (f" · %gpujob pull {job_id} once it succeeds" if opts.pull else ""))
        return None

    def _wait(self, job: GpuJob, ui: JobWidget | None) -> None:
        try:
            view = job.follow(self.poll_interval)
        except KeyboardInterrupt:
            message = (f"stopped waiting; job {job.id} goes on (%gpujob cancel {job.id} stops it)")
            if ui is not None:
                ui.note(message)
                job.follow_in_background(self.poll_interval, on_error=lambda msg: ui.note(msg, error=True))
            else:
                print(f"[shoal] {message}")
            return None
        assert view is not None and view.state in FINISHED_STATES
        if view.state != "SUCCEEDED":
            raise JobFailed(view)
        if job.pull_error is not None:
            raise UsageError(job.pull_error)
        if job.pulled and ui is None:
            print(f"[shoal] pulled into the notebook: {', '.join(job.pulled)}")
        return None

    def _pushed_values(self, names: tuple[str, ...]) -> dict[str, Any]:
        missing = [n for n in names if n not in self.user_ns]
        if missing:
            raise UsageError(f"--push {missing[0]}: no variable {missing[0]!r} in the notebook")
        return {name: self.user_ns[name] for name in names}

    def _use_widgets(self) -> bool:
        if self.display_mode != "auto":
            return self.display_mode == "widget"
        # A kernel talks to a frontend that can render widgets; a terminal IPython has no kernel.
        return getattr(self.shell, "kernel", None) is not None

    # -- line magics ---------------------------------------------------------------------------------------------

    def _line(self, line: str) -> Any:
        words = line.split(None, 1)
        if not words:
            raise UsageError(f"%gpujob needs a subcommand ({', '.join(SUBCOMMANDS)}), or use %%gpujob on a cell")
        sub, rest = words[0], (words[1] if len(words) > 1 else "")
        if sub not in SUBCOMMANDS:
            raise UsageError(f"%gpujob {sub!r}: unknown subcommand; choose one of {', '.join(SUBCOMMANDS)} "
                             f"(flags such as --pods belong on a %%gpujob cell)")
        args = _line_parser(sub).parse_argstring(rest)
        return getattr(self, f"_line_{sub}")(args)

    def _line_queue(self, args: argparse.Namespace) -> None:
        team = args.team or self.team()
        queue = self._call(lambda: self.client.queue(team))
        print(queue_table(queue, utcnow()))

    def _line_status(self, args: argparse.Namespace) -> None:
        view = self._call(lambda: self.client.job(args.job_id))
        print(job_block(describe(view, utcnow())))

    def _line_logs(self, args: argparse.Namespace) -> None:
        job = self.jobs.get(args.job_id)
        if job is None:
            view = self._call(lambda: self.client.job(args.job_id))
            pods = view.spec.pods
        else:
            pods = job.spec.pods
        if not 0 <= args.rank < pods:
            raise UsageError(f"--rank {args.rank}: job {args.job_id} has ranks 0 to {pods - 1}")
        text = self._call(lambda: read_log(self.client, args.job_id, args.rank))
        sys.stdout.write(text if text else f"(rank {args.rank} of job {args.job_id} has printed nothing yet)\n")

    def _line_cancel(self, args: argparse.Namespace) -> None:
        view = self._call(lambda: self.client.cancel(args.job_id))
        print(f"[shoal] cancel requested for job {view.job_id} ({view.name}); it was {view.state}")

    def _line_pull(self, args: argparse.Namespace) -> None:
        job = self.jobs.get(args.job_id)
        if job is None:
            raise UsageError(f"job {args.job_id} was not submitted from this notebook session; only its own "
                             f"jobs' --pull values can be loaded")
        if not job.pull_names:
            raise UsageError(f"job {args.job_id} was submitted without --pull")
        try:
            values = job.pull()
        except BundleError as exc:
            raise UsageError(str(exc)) from None
        self.user_ns.update(values)
        print(f"[shoal] pulled into the notebook: {', '.join(values)}")

    def close(self) -> None:
        """Stop following every job (the jobs themselves go on)."""
        for job in self.jobs.values():
            job.stop_following()


def check_source(cell: str) -> None:
    """A cell runs as plain Python in its pods: refuse IPython syntax and syntax errors before submitting."""
    if not cell.strip():
        raise UsageError("%%gpujob: the cell is empty; put the code the job should run below the magic line")
    transformed = TransformerManager().transform_cell(cell)
    if transformed.rstrip("\n") != cell.rstrip("\n"):
        for number, (a, b) in enumerate(zip(cell.splitlines(), transformed.splitlines()), start=1):
            if a != b:
                raise UsageError(f"%%gpujob: line {number} ({a.strip()!r}) uses IPython syntax (magics, !shell, ?); "
                                 f"a job runs plain Python: use subprocess or os instead")
        raise UsageError("%%gpujob: the cell uses IPython syntax (magics, !shell, ?); a job runs plain Python")
    try:
        compile(cell, "<%%gpujob cell>", "exec")
    except SyntaxError as exc:
        raise UsageError(f"%%gpujob: syntax error in the cell, line {exc.lineno}: {exc.msg}") from None


def _line_parser(sub: str) -> MagicArgumentParser:
    parser = MagicArgumentParser(prog=f"%gpujob {sub}", add_help=False)
    if sub == "queue":
        parser.add_argument("--team", default=None, help="another team's queue (admins)")
    else:
        parser.add_argument("job_id", metavar="ID")
    if sub == "logs":
        parser.add_argument("--rank", type=int, default=0)
    return parser


def _log_title(ranks: tuple[int, ...] | None, wait: bool) -> str:
    who = "every rank" if ranks is None else ", ".join(f"rank {r}" for r in ranks)
    return f"{who}: output below the widget" if wait else f"{who}: output"


def _flag_for(field: str) -> str:
    top = field.split(".")[0]
    return FIELD_FLAGS.get(top, field)
