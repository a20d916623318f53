"""``GpuJob``: the notebook's handle on one submitted cell — its id, its bundle, its widget, and what to do next.

The magic leaves the latest one in the notebook as ``_gpujob`` (and every one in ``%gpujob``'s own registry), so
code can wait on it, cancel it or pull its values without parsing what the magic printed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, MutableMapping

from scheduler_core.model import JobSpec
from scheduler_core.schemas import FINISHED_STATES, JobView

from .bundle import BundleError, load_pulled
from .client import JobsClient
from .follow import Follower, Sink, read_log
from .widget import JobWidget

#: Consecutive failed polls (server restarting, network blip) tolerated before a background follower gives up.
MAX_POLL_FAILURES = 30


class JobFailed(Exception):
    """A ``--wait`` job ended without succeeding. IPython shows just the message (no magic internals)."""

    def __init__(self, view: JobView) -> None:
        detail = view.message or view.reason_message or view.reason or ""
        code = f", exit code {view.exit_code}" if view.exit_code is not None else ""
        super().__init__(f"job {view.job_id} ({view.name}) ended {view.state}{code}"
                         + (f": {detail}" if detail else ""))
        self.view = view

    def _render_traceback_(self) -> list[str]:
        return [f"JobFailed: {self}", f"(the pods' output: %gpujob logs {self.view.job_id} --rank R)"]


class GpuJob:
    def __init__(self, client: JobsClient, job_id: str, spec: JobSpec, bundle: Path, pull: tuple[str, ...],
                 ui: JobWidget | None, sink: Sink, ranks: tuple[int, ...] | None,
                 namespace: MutableMapping[str, Any]) -> None:
        self.client = client
        self.id = job_id
        self.spec = spec
        self.bundle = bundle
        self.pull_names = pull
        self.ui = ui
        self.follower = Follower(client, job_id, sink, ranks=ranks, world_size=spec.pods)
        self._namespace = namespace
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pulled: dict[str, Any] | None = None
        self.pull_error: str | None = None

    def __repr__(self) -> str:
        state = self.view.state if self.view is not None else "SUBMITTED"
        return f"<GpuJob {self.id} {self.spec.name!r} {state}>"

    @property
    def view(self) -> JobView | None:
        return self.follower.last_view

    @property
    def state(self) -> str | None:
        return None if self.view is None else self.view.state

    # -- acting on the job ---------------------------------------------------------------------------------------

    def status(self) -> JobView:
        return self.client.job(self.id)

    def cancel(self) -> JobView:
        return self.client.cancel(self.id)

    def logs(self, rank: int = 0) -> str:
        """Everything rank ``rank`` printed in its latest attempt so far."""
        return read_log(self.client, self.id, rank)

    def wait(self, timeout: float | None = None, *, until: str = "finished", poll_interval: float = 0.5) -> JobView:
        """Block until the job has finished (``until="finished"``) or started (``"running"``); ``TimeoutError``
        after ``timeout`` seconds. Reads the server directly, so it works with or without a follower running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = threading.Event()
        while True:
            view = self.client.job(self.id)
            if view.state in FINISHED_STATES or (until == "running" and view.state in ("RUNNING", "TERMINATING")):
                if self._thread is not None and view.state in FINISHED_STATES:
                    # Let the follower show the end state and last output before the caller looks at the widget.
                    self._thread.join(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} is still {view.state} after {timeout}s")
            pause.wait(poll_interval)

    def wait_for_output(self, text: str, *, rank: int = 0, timeout: float | None = None,
                        poll_interval: float = 0.5) -> str:
        """Block until rank ``rank`` has printed ``text`` (its log so far is returned); ``TimeoutError`` after
        ``timeout`` seconds, and ``RuntimeError`` if the job ends without printing it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = threading.Event()
        while True:
            finished = self.client.job(self.id).state in FINISHED_STATES
            log = self.logs(rank)
            if text in log:
                return log
            if finished:
                raise RuntimeError(f"job {self.id} ended without rank {rank} printing {text!r}")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"rank {rank} of job {self.id} has not printed {text!r} after {timeout}s")
            pause.wait(poll_interval)

    def pull(self) -> dict[str, Any]:
        """The ``--pull`` values rank 0 sent back (``BundleError`` says which is missing and why)."""
        return load_pulled(self.bundle, self.pull_names)

    # -- following -----------------------------------------------------------------------------------------------

    def follow(self, poll_interval: float) -> JobView | None:
        """Follow in the foreground until the job ends (``KeyboardInterrupt`` propagates to the caller)."""
        view = self.follower.follow(poll_interval=poll_interval, stop=self._stop)
        if view is not None and view.state in FINISHED_STATES:
            self._finished(view)
        return view

    def follow_in_background(self, poll_interval: float, on_error: Callable[[str], None]) -> None:
        """Keep the widget live while the notebook runs other cells; pull values into the notebook on success."""
        def loop() -> None:
            failures = 0
            while not self._stop.is_set():
                try:
                    view = self.follower.follow(poll_interval=poll_interval, stop=self._stop)
                except Exception as exc:  # the server restarting must not kill the widget: retry a while
                    failures += 1
                    if failures == 1 or failures >= MAX_POLL_FAILURES:
                        on_error(f"cannot reach the scheduler ({exc})"
                                 + ("; still trying" if failures < MAX_POLL_FAILURES else "; stopped following"))
                    if failures >= MAX_POLL_FAILURES:
                        return
                    self._stop.wait(poll_interval)
                    continue
                if view is not None and view.state in FINISHED_STATES:
                    self._finished(view)
                return

        self._thread = threading.Thread(target=loop, name=f"gpujob-{self.id}", daemon=True)
        self._thread.start()

    def stop_following(self) -> None:
        self._stop.set()

    def _finished(self, view: JobView) -> None:
        if not self.pull_names or view.state != "SUCCEEDED" or self.pulled is not None:
            return
        try:
            values = self.pull()
        except BundleError as exc:
            self.pull_error = str(exc)
            if self.ui is not None:
                self.ui.note(str(exc), error=True)
            return
        self._namespace.update(values)
        self.pulled = values
        if self.ui is not None:
            self.ui.note(f"pulled into the notebook: {', '.join(values)}")
