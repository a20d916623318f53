"""``shoal logs JOB [--rank N] [--attempt K] [-f]``: what a job's pods printed, over the API, as ``tail -f`` does.

Reads are the API's (``GET /v1/jobs/{id}/logs``: an offset in, the next offset out), so a follower needs no state
on the server and survives a server restart. Following, each attempt is read to its end before the next: a job
that restarts (a node failure, a preemption, its own crash) shows its new attempt's output after a marker line on
stderr, and stdout stays exactly what the pod printed. It ends when the job has finished and everything is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import click

from ..schemas import LogChunk
from .jobs import client


@dataclass(frozen=True, slots=True)
class Followed:
    """How a read or a follow ended: the last attempt read (``None``: the job never started) and whether the job
    is over (every attempt read to its end)."""

    attempt: int | None
    finished: bool


def follow(read: Callable[[int, int | None], LogChunk], *, attempt: int | None, keep_following: bool,
           out: Callable[[str], None], note: Callable[[str], None], wait: Callable[[], None]) -> Followed:
    """``read(offset, attempt)`` is ``ShoalClient.logs`` for one job and rank. Print one attempt's output (``attempt``, or the latest), and with ``keep_following`` go on until the job ends,
    moving to each newer attempt when the one read is over (unless ``attempt`` pins one). ``wait`` is called
    between empty reads; ``note`` gets the marker lines."""
    current, offset = attempt, 0
    while True:
        chunk = read(offset, current)
        if current is None and chunk.attempt is not None:
            current = chunk.attempt  # pin it: a restart mid-read must not splice two logs together
        if chunk.text:
            out(chunk.text)
            offset = chunk.next_offset
            continue
        newer = current is not None and chunk.latest_attempt is not None and chunk.latest_attempt > current
        if chunk.eof and newer and attempt is None and keep_following:
            assert current is not None
            current, offset = current + 1, 0
            note(f"shoal: job {chunk.job_id} restarted: attempt {current} (rank {chunk.rank})")
            continue
        if chunk.eof:
            return Followed(current, finished=True)
        if not keep_following:
            return Followed(current, finished=False)
        wait()


@click.command()
@click.argument("job_id")
@click.option("--rank", type=click.IntRange(min=0), default=0, show_default=True, help="Which pod of the gang.")
@click.option("--attempt", type=click.IntRange(min=0), default=None,
              help="Which launch (0 is the first; each restart is one more). Default: the latest.")
@click.option("-f", "--follow", "keep_following", is_flag=True,
              help="Keep printing as the pod writes, through restarts, until the job ends (Ctrl-C to stop).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True, hidden=True,
              help="Seconds between reads while nothing new is written.")
def logs(job_id: str, rank: int, attempt: int | None, keep_following: bool, interval: float) -> None:
    """What pod RANK of JOB_ID printed (stdout and stderr), as 'tail' would.

    \b
      shoal logs job_3f9e01              # rank 0, latest attempt, what is there now
      shoal logs job_3f9e01 -f           # and everything it prints next, across restarts
      shoal logs job_3f9e01 --rank 3 --attempt 0
    """
    def out(text: str) -> None:
        click.echo(text, nl=False)

    def note(text: str) -> None:
        click.echo(text, err=True)

    with client() as api:
        ended = follow(lambda offset, which: api.logs(job_id, rank=rank, offset=offset, attempt=which),
                       attempt=attempt, keep_following=keep_following, out=out, note=note,
                       wait=lambda: time.sleep(interval))
    if ended.attempt is None:
        note(f"shoal: job {job_id} has not started yet: no output" if not ended.finished
             else f"shoal: job {job_id} ended without starting: no output")
