"""``shoal logs``: the reading logic on a table of chunk sequences, and ``shoal logs -f`` against a real ``shoal up``
whose pods are real processes, printing a line written after it started, and following the job across a restart.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.cli.logs import Followed, follow
from scheduler_core.schemas import LogChunk
from tests.shoal_up import ROOT, Up, started


def chunk(text: str, *, attempt: int | None = 0, latest: int | None = 0, offset: int = 0,
          eof: bool = False) -> LogChunk:
    return LogChunk(job_id="job_x", rank=0, attempt=attempt, latest_attempt=latest, offset=offset,
                    next_offset=offset + len(text), text=text, eof=eof)


class Script:
    """A server's answers, in order; records each ``(offset, attempt)`` asked for."""

    def __init__(self, *answers: LogChunk) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[int, int | None]] = []

    def __call__(self, offset: int, attempt: int | None) -> LogChunk:
        self.asked.append((offset, attempt))
        return self.answers.pop(0)


CASES = [
    # name, answers, pinned attempt, -f, expected output, notes, reads asked, result
    ("prints what is there and stops", [chunk("a\n"), chunk("", offset=2)], None, False,
     "a\n", [], [(0, None), (2, 0)], Followed(0, finished=False)),
    ("never started", [chunk("", attempt=None, latest=None)], None, False, "", [], [(0, None)],
     Followed(None, finished=False)),
    ("follows until the job ends", [chunk("a\n"), chunk("", offset=2), chunk("b\n", offset=2),
                                    chunk("", offset=4, eof=True)], None, True,
     "a\nb\n", [], [(0, None), (2, 0), (2, 0), (4, 0)], Followed(0, finished=True)),
    ("reads the old attempt to its end, then the new one from 0",
     [chunk("a\n"), chunk("", offset=2, latest=1), chunk("last\n", offset=2, latest=1),
      chunk("", offset=7, latest=1, eof=True), chunk("again\n", attempt=1, latest=1),
      chunk("", attempt=1, latest=1, offset=6, eof=True)], None, True,
     "a\nlast\nagain\n", ["shoal: job job_x restarted: attempt 1 (rank 0)"],
     [(0, None), (2, 0), (2, 0), (7, 0), (0, 1), (6, 1)], Followed(1, finished=True)),
    ("a pinned attempt stays pinned", [chunk("a\n"), chunk("", offset=2, latest=3, eof=True)], 0, True,
     "a\n", [], [(0, 0), (2, 0)], Followed(0, finished=True)),
    ("ended without starting", [chunk("", attempt=None, latest=None, eof=True)], None, True, "", [],
     [(0, None)], Followed(None, finished=True)),
]


@pytest.mark.parametrize(("case", "answers", "attempt", "keep", "text", "notes", "asked", "result"), CASES,
                         ids=[c[0] for c in CASES])
def test_follow(case: str, answers: list[LogChunk], attempt: int | None, keep: bool, text: str, notes: list[str],
                asked: list[tuple[int, int | None]], result: Followed) -> None:
    script, printed, noted, waits = Script(*answers), [], [], []
    ended = follow(script, attempt=attempt, keep_following=keep, out=printed.append, note=noted.append,
                   wait=lambda: waits.append(1))
    assert ("".join(printed), noted, script.asked, ended) == (text, notes, asked, result)
    assert script.answers == []


# -- against a real shoal up ----------------------------------------------------------------------------------------

@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with started(tmp_path / "state", "--tick", "0.2", "--min-run-time", "0s") as up:
        yield up


class Follower:
    """``shoal logs -f`` as a child process, its stdout read line by line as it comes."""

    def __init__(self, up: Up, token: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler_core.cli.main", "logs", "-f", "--interval", "0.1", *args],
            env=dict(up.env, SHOAL_URL=up.url, SHOAL_TOKEN=token), cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line.rstrip("\n"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.mark.slow
def test_logs_follow_prints_what_is_written_after_it_started_and_across_a_restart(up: Up, tmp_path: Path) -> None:
    token = up.token("ana", "fraud-ml")
    go = tmp_path / "go"
    # Attempt 0 prints, waits for the test's signal, prints once more and fails; attempt 1 (a restart for the
    # job's own fault) prints and succeeds.
    script = (f'echo "attempt $SHOAL_ATTEMPT starts"; '
              f'if [ "$SHOAL_ATTEMPT" = 0 ]; then while [ ! -e {go} ]; do sleep 0.05; done; '
              f'echo "written after the follower started"; exit 3; fi; echo "attempt $SHOAL_ATTEMPT done"')
    submitted = up.shoal("submit", "--flavour", "h100", "--pods", "1", "--gpus", "1", "--max-restarts", "1",
                         "--name", "echoer", "--json", "--", "sh", "-c", script, token=token)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split('"job_id": "')[1].split('"')[0]
    follower = Follower(up, token, job_id)
    try:
        up.eventually(lambda: follower.lines == ["attempt 0 starts"] or None, "the follower printed attempt 0")
        go.touch()
        up.eventually(lambda: follower.proc.poll() is not None or None, "the follower ended with the job", 120)
        assert follower.proc.returncode == 0, follower.errors
        assert follower.lines == ["attempt 0 starts", "written after the follower started", "attempt 1 starts",
                                  "attempt 1 done"]
        assert follower.errors == [f"shoal: job {job_id} restarted: attempt 1 (rank 0)"]
    finally:
        follower.stop()
    assert up.logs(job_id) == ["attempt 0 starts\nwritten after the follower started\n",
                               "attempt 1 starts\nattempt 1 done\n"]
    rank1 = up.shoal("logs", job_id, "--rank", "1", token=token)
    assert rank1.returncode == 2 and "ranks 0 to 0, not 1" in rank1.stderr
    first = up.shoal("logs", job_id, "--attempt", "0", token=token)
    assert (first.returncode, first.stdout) == (0, "attempt 0 starts\nwritten after the follower started\n")
    shown = up.shoal("show", job_id, token=token)
    fields = dict(line.strip().split(": ", 1) for line in shown.stdout.splitlines())
    assert fields["state"] == "SUCCEEDED" and fields["restarts"].startswith("1 (own faults, of 1)")
    iso = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert re.fullmatch(rf"{iso} → {iso} OwnFault .*", fields["started"]), fields["started"]
    assert re.fullmatch(rf"{iso} → {iso} SUCCEEDED.*", fields["restart 1"]), fields["restart 1"]
