"""The job contract, for training code: stop on SIGTERM, checkpoint safely, resume from the newest good checkpoint.

Standard library only, so any training script can ``from scheduler_core import jobkit`` without pulling in the
scheduler (or an ML framework)::

    from scheduler_core import jobkit

    ckpt = jobkit.resume()                      # newest *verified* checkpoint, or None
    step = ckpt.step + 1 if ckpt else 0
    state = load(ckpt.read("model.pt")) if ckpt else init()
    while step < total:
        t0 = time.monotonic(); train_one_step(state); jobkit.report_step_time(time.monotonic() - t0)
        if jobkit.should_checkpoint():          # SIGUSR1, SIGTERM, or the interval ("auto": Young–Daly)
            jobkit.save(step, {"model.pt": dump(state)})
        if jobkit.should_stop():                # SIGTERM: we just saved; leave within the grace period
            sys.exit(0)
        step += 1

Why this shape (DESIGN §3.3): a preempted job gets SIGTERM and a grace period sized to its checkpoint cost; it
finishes its step, checkpoints and exits 0, and the scheduler restarts it later from that checkpoint. A checkpoint
is written in two phases — every data file first (fsync'd), then a small manifest naming the step, the files, their
sizes and SHA-256, published by an atomic rename. A crash at any instant leaves either the old newest manifest or
the new one, never a manifest pointing at half-written data; ``resume`` re-verifies sizes and hashes anyway, so a
truncated or corrupted file (a bad disk, a copy gone wrong) makes that checkpoint skipped, never loaded.

Storage: ``file://`` URIs (a local or shared POSIX file system) are implemented here. An object store (S3, GCS)
plugs in behind the same two-phase write — upload the data objects, then put the manifest object, whose
appearance is atomic on those stores — by implementing the small ``_Storage`` surface below.

Environment (set by the executor, DESIGN §3.3): ``SHOAL_CHECKPOINT_URI``, ``SHOAL_CHECKPOINT_INTERVAL`` (seconds or
``auto``), ``SHOAL_CHECKPOINT_COST`` (expected seconds per save, until measured), ``SHOAL_GANG_GPUS``, ``RANK``,
``SHOAL_JOB_ID`` and ``SHOAL_REPORT_FILE`` (where checkpoints and step times are reported to the scheduler).
Where the scheduler cannot signal a process (a Kubernetes pod), it asks for a checkpoint by raising a counter in
``SHOAL_CONTROL_FILE`` instead of sending SIGUSR1; ``should_checkpoint`` reads it at most every
``control_poll_s`` (0.5 s), so a step loop pays one ``stat`` per half second.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from urllib.parse import unquote, urlparse

# Standard library only, like this module (it must stay cheap to import into any training script).
from .young_daly import DEFAULT_CHECKPOINT_COST_S, GPU_HOURS_PER_INTERRUPTION, gang_mtbf_s, young_daly_interval_s

__all__ = [
    "Checkpoint", "CheckpointError", "JobContext", "MTBF_GPU_HOURS", "context", "report_step_time", "resume",
    "save", "should_checkpoint", "should_stop", "young_daly_interval",
]

#: One interruption per ~50,700 GPU-hours: the per-GPU failure rate of the Llama 3 report (DESIGN §3.3).
MTBF_GPU_HOURS = GPU_HOURS_PER_INTERRUPTION
#: Until a save has been timed, "auto" assumes a checkpoint costs this many seconds.
DEFAULT_COST_S = DEFAULT_CHECKPOINT_COST_S
MANIFEST_FORMAT = 1
_MANIFEST = re.compile(r"^manifest-(\d+)\.json$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._\-]+$")
_CHUNK = 1 << 20

#: Produces a data file's bytes in chunks, so a large file is never held in memory twice.
_Writer = Callable[[], Iterator[bytes]]


class CheckpointError(Exception):
    """A checkpoint cannot be written (bad URI, bad file name, unreadable input). Never raised for a bad
    checkpoint found by ``resume``: those are skipped."""


def young_daly_interval(cost_s: float, gang_gpus: int, *, mtbf_gpu_hours: float = MTBF_GPU_HOURS) -> float:
    """Young–Daly optimal checkpoint interval τ = √(2·C·M) in seconds (``scheduler_core.young_daly``).

    ``C`` is the cost of one checkpoint, ``M`` the gang's mean time between failures: a per-GPU MTBF divided by
    the number of GPUs, since any one of them failing interrupts the whole gang. A 1,024-GPU gang with C = 60 s
    checkpoints about every 77 minutes; an 8-GPU job about every 14 hours.
    """
    if gang_gpus < 1:
        raise ValueError(f"gang_gpus must be at least 1, got {gang_gpus}")
    return young_daly_interval_s(cost_s, gang_mtbf_s(gang_gpus, mtbf_gpu_hours))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A verified checkpoint: every file named by its manifest exists with the recorded size and SHA-256."""

    step: int
    directory: Path
    files: Mapping[str, Path]
    manifest: Mapping[str, object]

    def path(self, name: str) -> Path:
        try:
            return self.files[name]
        except KeyError:
            raise KeyError(f"checkpoint of step {self.step} has no file {name!r}; "
                           f"it has: {', '.join(sorted(self.files))}") from None

    def read(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    @property
    def bytes(self) -> int:
        return sum(path.stat().st_size for path in self.files.values())


# -- storage ---------------------------------------------------------------------------------------------------

def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class _Storage:
    """Where checkpoints live. Two phases: ``put_data`` for every file, then ``publish_manifest``.

    This is the surface an object store implements: data objects first, the manifest object last.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def from_uri(cls, uri: str) -> _Storage:
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            if parsed.netloc not in ("", "localhost"):
                raise CheckpointError(f"file URI {uri!r} names host {parsed.netloc!r}; use file:///absolute/path")
            return cls(Path(unquote(parsed.path)))
        raise CheckpointError(f"checkpoint URI {uri!r}: scheme {parsed.scheme!r} is not supported here "
                              f"(only file://); object stores plug in behind the same two-phase write")

    def step_dir(self, step: int) -> Path:
        return self.root / f"step-{step:010d}"

    def put_data(self, step: int, name: str, write: _Writer) -> tuple[int, str]:
        """Write one data file durably; return its size and SHA-256."""
        directory = self.step_dir(step)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / name
        digest = hashlib.sha256()
        size = 0
        with target.open("wb") as handle:
            for chunk in write():
                handle.write(chunk)
                digest.update(chunk)
                size += len(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        return size, digest.hexdigest()

    def publish_manifest(self, step: int, manifest: Mapping[str, object]) -> None:
        """Write the manifest to a temporary name, fsync, then rename it into place: it appears whole or not."""
        _fsync_dir(self.step_dir(step))
        final = self.root / f"manifest-{step:010d}.json"
        temp = self.root / f".manifest-{step:010d}.json.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        with temp.open("w") as handle:
            json.dump(manifest, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, final)
        _fsync_dir(self.root)

    def manifests(self) -> list[tuple[int, Path]]:
        """Published manifests, newest step first. Temporary (half-written) ones never match the pattern."""
        if not self.root.is_dir():
            return []
        found = []
        for entry in self.root.iterdir():
            match = _MANIFEST.match(entry.name)
            if match:
                found.append((int(match.group(1)), entry))
        return sorted(found, reverse=True)

    def verify(self, step: int, manifest_path: Path) -> Checkpoint | None:
        """The checkpoint of ``manifest_path`` if every file it names checks out, else ``None``."""
        try:
            manifest = json.loads(manifest_path.read_text())
            if not isinstance(manifest, dict) or manifest.get("step") != step:
                return None
            entries = manifest["files"]
            if not isinstance(entries, list) or not entries:
                return None
            directory = self.step_dir(step)
            files: dict[str, Path] = {}
            for entry in entries:
                name, size, sha = entry["name"], entry["bytes"], entry["sha256"]
                if not isinstance(name, str) or not _SAFE_NAME.match(name):
                    return None
                path = directory / name
                if path.stat().st_size != size or _sha256_file(path) != sha:
                    return None
                files[name] = path
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return Checkpoint(step=step, directory=directory, files=files, manifest=manifest)

    def remove(self, step: int, manifest_path: Path) -> None:
        """Delete an old checkpoint: the manifest first, so no reader ever sees a manifest without its data."""
        manifest_path.unlink(missing_ok=True)
        shutil.rmtree(self.step_dir(step), ignore_errors=True)


def _bytes_writer(data: bytes) -> _Writer:
    def chunks() -> Iterator[bytes]:
        view = memoryview(data)
        for start in range(0, len(view), _CHUNK):
            yield bytes(view[start:start + _CHUNK])
        if not data:
            yield b""
    return chunks


def _file_writer(path: Path) -> _Writer:
    def chunks() -> Iterator[bytes]:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                yield chunk
    return chunks


# -- the job's side of the contract ----------------------------------------------------------------------------

class JobContext:
    """The job contract for one process. Module-level functions use one shared instance (``context()``).

    Signals: SIGTERM sets ``should_stop`` (and asks for a checkpoint); SIGUSR1 asks for a checkpoint now.
    Handlers are installed by ``install_signal_handlers`` (done on first use of the module functions, from the
    main thread), chaining to any handler the program had installed before.
    """

    def __init__(self, *, checkpoint_uri: str | None = None, interval: str | float | None = None,
                 rank: int | None = None, gang_gpus: int | None = None, cost_s: float | None = None,
                 report_file: str | None = None, keep: int = 3, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time, control_file: str | None = None,
                 control_poll_s: float = 0.5) -> None:
        env = os.environ if environ is None else environ
        self.checkpoint_uri = checkpoint_uri if checkpoint_uri is not None else env.get("SHOAL_CHECKPOINT_URI")
        raw_interval = interval if interval is not None else env.get("SHOAL_CHECKPOINT_INTERVAL", "auto")
        self._interval_setting: float | None = None if str(raw_interval).strip() == "auto" else float(raw_interval)
        if self._interval_setting is not None and self._interval_setting <= 0:
            raise ValueError(f"checkpoint interval must be positive or 'auto', got {raw_interval!r}")
        self.rank = rank if rank is not None else int(env.get("RANK", "0"))
        self.gang_gpus = gang_gpus if gang_gpus is not None else _gang_gpus(env)
        self.cost_s = cost_s if cost_s is not None else float(env.get("SHOAL_CHECKPOINT_COST", DEFAULT_COST_S))
        self.report_file = report_file if report_file is not None else env.get("SHOAL_REPORT_FILE")
        self.job_id = env.get("SHOAL_JOB_ID", "")
        self.control_file = control_file if control_file is not None else env.get("SHOAL_CONTROL_FILE")
        self.control_poll_s = control_poll_s
        self._control_seen = 0
        self._control_read_at = float("-inf")
        self.keep = keep
        self._verified: dict[tuple[int, int, tuple[tuple[str, int, int], ...]], bool] = {}
        self._clock = clock
        self._wall_clock = wall_clock
        self._stop = threading.Event()
        self._checkpoint_now = threading.Event()
        self._last_save = clock()
        self._measured_cost: float | None = None
        self._lock = threading.Lock()

    # signals ------------------------------------------------------------------------------------------------
    def install_signal_handlers(self) -> bool:
        """Catch SIGTERM and SIGUSR1. Only possible from the main thread; returns whether it was done."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum, flag in ((signal.SIGTERM, self._stop), (signal.SIGUSR1, self._checkpoint_now)):
            previous = signal.getsignal(signum)
            signal.signal(signum, _handler(flag, self._checkpoint_now, previous))
        # Tells an executor that cannot see signal handlers (Kubernetes) that a SIGTERM now means "checkpoint and
        # exit 0", so it need not hold a preemption back any longer.
        self._report({"kind": "ready", "at": self._wall_clock()})
        return True

    def request_stop(self) -> None:
        self._stop.set()
        self._checkpoint_now.set()

    def should_stop(self) -> bool:
        """True once SIGTERM arrived: checkpoint (``should_checkpoint`` says so too) and exit 0."""
        return self._stop.is_set()

    # checkpoints --------------------------------------------------------------------------------------------
    @property
    def interval_s(self) -> float:
        """The configured interval, or Young–Daly from the measured (else expected) cost and the gang's MTBF."""
        if self._interval_setting is not None:
            return self._interval_setting
        cost = self._measured_cost if self._measured_cost is not None else self.cost_s
        return young_daly_interval(cost, self.gang_gpus)

    def should_checkpoint(self) -> bool:
        """True on SIGUSR1 or SIGTERM since the last save, or when the interval has elapsed."""
        if self._control_requested():
            self._checkpoint_now.set()
        if self._checkpoint_now.is_set() or self._stop.is_set():
            return True
        return self._clock() - self._last_save >= self.interval_s

    def save(self, step: int, data: bytes | Mapping[str, bytes] | Sequence[str | os.PathLike[str]], *,
             all_ranks: bool = False) -> Checkpoint | None:
        """Write a checkpoint of ``step``: data files first, then the manifest, atomically.

        ``data`` is raw bytes (stored as ``state.bin``), a mapping of file name to bytes, or a list of paths to copy.
        Data-parallel ranks hold the same state, so by default only rank 0 writes and the others return ``None``
        at once (a distributed job keeps its ranks together with its own barrier, as it does for every step).
        Pass ``all_ranks=True`` when every rank writes its own state to its own ``checkpoint_uri``.
        """
        if step < 0:
            raise CheckpointError(f"step must not be negative, got {step}")
        if self.rank != 0 and not all_ranks:
            self._after_save()
            return None
        if not self.checkpoint_uri:
            raise CheckpointError("no checkpoint URI: set SHOAL_CHECKPOINT_URI or pass checkpoint_uri")
        writers = _writers(data)
        storage = _Storage.from_uri(self.checkpoint_uri)
        with self._lock:
            started = self._clock()
            entries: list[dict[str, object]] = []
            total = 0
            for name, writer in writers.items():
                size, sha = storage.put_data(step, name, writer)
                entries.append({"name": name, "bytes": size, "sha256": sha})
                total += size
            written_at = self._wall_clock()
            cost = self._clock() - started
            manifest: dict[str, object] = {
                "format": MANIFEST_FORMAT, "job_id": self.job_id, "step": step, "written_at": written_at,
                "cost_s": cost, "files": entries,
            }
            storage.publish_manifest(step, manifest)
            self._measured_cost = cost
            self._prune(storage, keep_step=step)
        checkpoint = storage.verify(step, storage.root / f"manifest-{step:010d}.json")
        self._report({"kind": "checkpoint", "step": step, "uri": _step_uri(self.checkpoint_uri, step),
                      "bytes": total, "written_at": written_at, "cost_s": cost, "verified": checkpoint is not None})
        self._after_save()
        return checkpoint

    def resume(self) -> Checkpoint | None:
        """The newest checkpoint whose every file verifies; corrupt, truncated or half-written ones are skipped."""
        if not self.checkpoint_uri:
            return None
        storage = _Storage.from_uri(self.checkpoint_uri)
        for step, manifest_path in storage.manifests():
            checkpoint = storage.verify(step, manifest_path)
            if checkpoint is not None:
                self._last_save = self._clock()
                return checkpoint
        return None

    # step times ---------------------------------------------------------------------------------------------
    def report_step_time(self, seconds: float, step: int | None = None) -> None:
        """Tell the scheduler how long this rank's last step took; a rank consistently ≥ 20 % slower than the
        gang's median marks its node suspect, and the gang moves off it at its next checkpoint."""
        if seconds < 0 or not math.isfinite(seconds):
            raise ValueError(f"step time must be a non-negative number of seconds, got {seconds!r}")
        record: dict[str, object] = {"kind": "step_time", "step_time_s": float(seconds), "at": self._wall_clock()}
        if step is not None:
            record["step"] = int(step)
        self._report(record)

    # internals ----------------------------------------------------------------------------------------------
    def _control_requested(self) -> bool:
        """A new checkpoint request in the control file (a counter the scheduler raises), read at most every
        ``control_poll_s``. A missing or half-written file is no request."""
        if not self.control_file:
            return False
        now = self._clock()
        if now - self._control_read_at < self.control_poll_s:
            return False
        self._control_read_at = now
        try:
            with open(self.control_file, "rb") as handle:
                count = int(handle.read(32).strip() or b"0")
        except (OSError, ValueError):
            return False
        if count <= self._control_seen:
            return False
        self._control_seen = count
        return True

    def _after_save(self) -> None:
        self._checkpoint_now.clear()
        self._last_save = self._clock()

    def _prune(self, storage: _Storage, keep_step: int) -> None:
        """Keep the newest ``keep`` checkpoints that verify (the one just written among them); remove the rest,
        and every corrupt one: a corrupt manifest is no checkpoint, so it never takes a good one's place."""
        if self.keep <= 0:
            return
        good = 0
        for step, path in storage.manifests():
            if step == keep_step:
                good += 1
            elif good >= self.keep or not self._verifies(storage, step, path):
                storage.remove(step, path)
            else:
                good += 1

    def _verifies(self, storage: _Storage, step: int, path: Path) -> bool:
        """Whether a published checkpoint verifies. Each is hashed once per process while its files stay as they
        were (same sizes and mtimes), so pruning after every save does not re-read ``keep`` checkpoints' data."""
        try:
            directory = storage.step_dir(step)
            files = sorted((entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
                           for entry in directory.iterdir()) if directory.is_dir() else []
            key = (step, path.stat().st_mtime_ns, tuple(files))
        except OSError:
            return False
        known = self._verified.get(key)
        if known is None:
            known = self._verified[key] = storage.verify(step, path) is not None
        return known

    def _report(self, record: Mapping[str, object]) -> None:
        """Append one JSON line to the report file; a single ``write`` of a short line under O_APPEND is atomic."""
        if not self.report_file:
            return
        line = (json.dumps({"rank": self.rank, **record}, sort_keys=True) + "\n").encode()
        fd = os.open(self.report_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _handler(flag: threading.Event, checkpoint_now: threading.Event, previous: object
             ) -> Callable[[int, FrameType | None], None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        flag.set()
        checkpoint_now.set()
        if callable(previous):
            previous(signum, frame)
    return handle


def _gang_gpus(env: Mapping[str, str]) -> int:
    if env.get("SHOAL_GANG_GPUS"):
        return max(1, int(env["SHOAL_GANG_GPUS"]))
    devices = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return max(1, int(env.get("WORLD_SIZE", "1")) * max(1, len(devices)))


def _writers(data: bytes | Mapping[str, bytes] | Sequence[str | os.PathLike[str]]) -> dict[str, _Writer]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return {"state.bin": _bytes_writer(bytes(data))}
    writers: dict[str, _Writer] = {}
    if isinstance(data, Mapping):
        for name, blob in data.items():
            if not isinstance(blob, (bytes, bytearray, memoryview)):
                raise CheckpointError(f"file {name!r}: expected bytes, got {type(blob).__name__}")
            writers[_check_name(name)] = _bytes_writer(bytes(blob))
    else:
        for item in data:
            path = Path(item)
            if not path.is_file():
                raise CheckpointError(f"cannot checkpoint {str(path)!r}: not a readable file")
            name = _check_name(path.name)
            if name in writers:
                raise CheckpointError(f"two files are named {name!r}; checkpoint file names must be unique")
            writers[name] = _file_writer(path)
    if not writers:
        raise CheckpointError("nothing to save: give bytes, a mapping of names to bytes, or a list of files")
    return writers


def _check_name(name: str) -> str:
    if not _SAFE_NAME.match(name) or name in (".", ".."):
        raise CheckpointError(f"bad checkpoint file name {name!r}: use letters, digits, '.', '_' and '-' only")
    return name


def _step_uri(uri: str, step: int) -> str:
    return uri.rstrip("/") + f"/manifest-{step:010d}.json"


# -- module-level convenience: one context per process ---------------------------------------------------------

_context: JobContext | None = None
_context_lock = threading.Lock()


def context() -> JobContext:
    """The process's job context, built from the environment on first use (installing signal handlers)."""
    global _context
    with _context_lock:
        if _context is None:
            _context = JobContext()
            _context.install_signal_handlers()
        return _context


def should_stop() -> bool:
    return context().should_stop()


def should_checkpoint() -> bool:
    return context().should_checkpoint()


def save(step: int, data: bytes | Mapping[str, bytes] | Sequence[str | os.PathLike[str]]) -> Checkpoint | None:
    return context().save(step, data)


def resume() -> Checkpoint | None:
    return context().resume()


def report_step_time(seconds: float, step: int | None = None) -> None:
    context().report_step_time(seconds, step)
