"""Following one job: poll its view and its pods' output, and hand both to a sink (the widget, or text).

The same ``Follower`` runs in the foreground (``--wait``: the cell blocks) and in a background thread (the cell
returns at once and the widget keeps updating). It only reads through the client; what it shows is the sink's
business. Polling, not push, because the API is plain REST and a poll a second per followed job is negligible
next to a scheduler cycle.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Protocol, TextIO

from scheduler_core.schemas import FINISHED_STATES, JobView

from .client import JobsClient
from .fields import describe, utcnow
from .text import state_line
from .widget import JobWidget

#: After the job ends, how many more reads of each rank's log may come back non-empty before we stop waiting for
#: the executor to flush it (each read returns everything available, so this only matters if writes lag).
DRAIN_READS = 50


def read_log(client: JobsClient, job_id: str, rank: int) -> str:
    """Everything rank ``rank`` has printed in its latest attempt so far."""
    parts, offset = [], 0
    while True:
        chunk = client.logs(job_id, rank=rank, offset=offset)
        parts.append(chunk.text)
        if chunk.eof or chunk.next_offset == offset:
            return "".join(parts)
        offset = chunk.next_offset


class Sink(Protocol):
    def refresh(self, view: JobView) -> None: ...

    def output(self, rank: int, text: str) -> None: ...

    def attempt_changed(self, attempt: int) -> None: ...


class Follower:
    """Reads ``job_id``'s view and the logs of ``ranks`` (``None``: every rank), remembering where it left off."""

    def __init__(self, client: JobsClient, job_id: str, sink: Sink, *, ranks: tuple[int, ...] | None,
                 world_size: int) -> None:
        self.client = client
        self.job_id = job_id
        self.sink = sink
        self.ranks = tuple(range(world_size)) if ranks is None else tuple(r for r in ranks if r < world_size)
        self.offsets = {rank: 0 for rank in self.ranks}
        self.attempt: int | None = None
        self.last_view: JobView | None = None

    def step(self) -> JobView:
        """One poll: the job's view, then whatever its pods printed since the last poll."""
        view = self.client.job(self.job_id)
        self.last_view = view
        self.sink.refresh(view)
        if view.started_at is not None or view.state in FINISHED_STATES:
            self._read_logs(drain=False)
        return view

    def follow(self, *, poll_interval: float, stop: threading.Event) -> JobView | None:
        """Poll until the job ends (then read the logs to their end) or ``stop`` is set; the last view seen."""
        while not stop.is_set():
            view = self.step()
            if view.state in FINISHED_STATES:
                self._read_logs(drain=True)
                return view
            stop.wait(poll_interval)
        return self.last_view

    def _read_logs(self, *, drain: bool) -> None:
        for rank in self.ranks:
            for _ in range(DRAIN_READS if drain else 1):
                chunk = self.client.logs(self.job_id, rank=rank, offset=self.offsets[rank])
                if chunk.attempt != self.attempt and chunk.attempt is not None:
                    if self.attempt is not None:
                        # A restart: the new attempt's log starts from its beginning.
                        self.offsets = {r: 0 for r in self.ranks}
                        self.sink.attempt_changed(chunk.attempt)
                        chunk = self.client.logs(self.job_id, rank=rank, offset=0)
                    self.attempt = chunk.attempt
                self.offsets[rank] = chunk.next_offset
                self.sink.output(rank, chunk.text)
                if chunk.eof or not drain:
                    break


class _RankPrefixer:
    """With several ranks streamed into one place, start each of their lines with ``[rank R] ``."""

    def __init__(self, prefix: bool) -> None:
        self.prefix = prefix
        self.at_line_start: dict[int, bool] = {}

    def __call__(self, rank: int, text: str) -> str:
        if not self.prefix or not text:
            return text
        tag = f"[rank {rank}] "
        out = []
        start = self.at_line_start.get(rank, True)
        for line in text.splitlines(keepends=True):
            out.append(tag + line if start else line)
            start = line.endswith("\n")
        self.at_line_start[rank] = start
        return "".join(out)


class TextSink:
    """For a terminal (and ``--wait`` without widgets): a line per change of state, pod output as it comes."""

    def __init__(self, *, prefix_ranks: bool, stream: Callable[[], TextIO] = lambda: sys.stdout) -> None:
        self._stream = stream
        self._last = ""
        self._prefix = _RankPrefixer(prefix_ranks)

    def refresh(self, view: JobView) -> None:
        line = state_line(describe(view, utcnow()))
        if line != self._last:
            self._last = line
            print(line, file=self._stream(), flush=True)

    def output(self, rank: int, text: str) -> None:
        if text:
            out = self._stream()
            out.write(self._prefix(rank, text))
            out.flush()

    def attempt_changed(self, attempt: int) -> None:
        print(f"[shoal] --- the job restarted: attempt {attempt} ---", file=self._stream(), flush=True)


class WidgetSink:
    """The widget shows the state; pod output goes into the cell while it runs (``--wait``: ``print`` lands in the
    cell's own output, where it stays with the notebook) or, once the cell has returned, into the widget's log."""

    def __init__(self, ui: JobWidget, *, prefix_ranks: bool, into_cell: bool) -> None:
        self.ui = ui
        self.into_cell = into_cell
        self._prefix = _RankPrefixer(prefix_ranks)

    def refresh(self, view: JobView) -> None:
        self.ui.refresh(view)

    def output(self, rank: int, text: str) -> None:
        if not text:
            return
        self._emit(self._prefix(rank, text))

    def _emit(self, text: str) -> None:
        if self.into_cell:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            self.ui.append_log(text)

    def attempt_changed(self, attempt: int) -> None:
        self._emit(f"--- the job restarted: attempt {attempt} ---\n")
