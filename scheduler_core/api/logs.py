"""Pod output for ``GET /v1/jobs/{id}/logs``: read the files the local executor writes, from a byte offset on.

The local executor writes each pod's stdout and stderr to ``<state_dir>/logs/<job_id>/<attempt>/rank-<r>.log``;
this reader knows only that layout, so the API serves logs without importing the executor. Reads are stateless
(offset in, next offset out): any number of notebooks can follow one job, and a restarted server loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: The most bytes one read returns; a follower simply reads again from ``next_offset``.
MAX_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class LogRead:
    attempt: int | None   # the attempt read (None: none yet, or not the asked one)
    text: str
    next_offset: int
    at_end: bool          # nothing more in the file now
    latest: int | None = None  # the job's newest attempt


class LogReader(Protocol):
    """Where ``GET /v1/jobs/{id}/logs`` reads pod output: this module's files, or Kubernetes (``kube.logs``)."""

    def read(self, job_id: str, rank: int, offset: int, *, limit: int = MAX_CHUNK,
             attempt: int | None = None) -> LogRead:
        """What ``rank`` wrote from ``offset`` on, in ``attempt`` (default: the latest)."""
        ...


class PodLogReader:
    def __init__(self, root: Path) -> None:
        self.root = root

    def latest_attempt(self, job_id: str) -> int | None:
        try:
            attempts = [int(p.name) for p in (self.root / job_id).iterdir() if p.is_dir() and p.name.isdigit()]
        except FileNotFoundError:
            return None
        return max(attempts) if attempts else None

    def read(self, job_id: str, rank: int, offset: int, *, limit: int = MAX_CHUNK,
             attempt: int | None = None) -> LogRead:
        """What rank ``rank`` of ``attempt`` (default: the job's latest) wrote from byte ``offset`` on (at most
        ``limit``)."""
        latest = self.latest_attempt(job_id)
        if latest is None or (attempt is not None and attempt > latest):
            return LogRead(attempt=None, text="", next_offset=offset, at_end=True, latest=latest)
        attempt = latest if attempt is None else attempt
        path = self.root / job_id / str(attempt) / f"rank-{rank}.log"
        try:
            with open(path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                start = min(offset, size)
                fh.seek(start)
                data = fh.read(limit)
        except FileNotFoundError:
            return LogRead(attempt=attempt, text="", next_offset=offset, at_end=True, latest=latest)
        data = whole_characters(data)
        end = start + len(data)
        return LogRead(attempt=attempt, text=data.decode("utf-8", errors="replace"), next_offset=end,
                       at_end=end >= size, latest=latest)


def whole_characters(data: bytes) -> bytes:
    """Drop a UTF-8 character cut in half at the end of a read; the next read starts with it whole."""
    for cut in range(0, min(4, len(data) + 1)):
        head = data[:len(data) - cut] if cut else data
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 3:  # invalid bytes inside, not a cut character: keep them (shown as �)
                return data
            continue
        return head
    return data
