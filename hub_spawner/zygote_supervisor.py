"""The hub's side of warm starts: keep one warm process (``hub_spawner.zygote``) per socket running.

The spawner calls ``warm_process(path).ensure()`` when a spawn page is shown and when a spawn starts, so the imports
are paid while the user is still choosing a profile, and a zygote that died is replaced for the next spawn (the spawn
that finds none starts its server cold; one that finds it still importing waits for it, which is sooner).

The zygote is a child of the hub in its own session. It holds the read end of a pipe whose write end only the hub
holds, so it stops when the hub does, however the hub ends; the servers it forked run on. Its environment is the
hub's without the hub's secrets (a forked server gets its whole environment from the request anyway).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

#: Substrings of variable names the zygote is not given (the hub's proxy token, cookie secret, service tokens...).
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "CRYPT_KEY", "COOKIE")
#: A Unix socket's path must fit in ``sun_path`` (108 bytes on Linux, with the NUL).
_MAX_SOCKET_PATH = 100


def socket_path(secrets_dir: str | os.PathLike[str], hub_pid: int | None = None) -> str:
    """Where this hub's zygote listens: in ``secrets_dir`` (shared by every hub of this user on the machine, so
    the name carries the hub's pid), or, for a path too long for a socket, in a 0700 directory of its own under the
    temp dir, named after it."""
    name = f"zygote-{os.getpid() if hub_pid is None else hub_pid}.sock"
    path = os.path.join(os.fspath(secrets_dir), name)
    if len(path.encode()) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fspath(secrets_dir).encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"shoal-zygote-{os.getuid()}-{digest}"
    directory.mkdir(mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    return str(directory / name)


def zygote_environment(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not any(marker in k.upper() for marker in SECRET_MARKERS)}


class WarmProcess:
    """One zygote, started on demand and again after it died."""

    def __init__(self, path: str, entry: str | None = None) -> None:
        self.path = path
        self.entry = entry   # the module servers run (``zygote.ENTRY`` unless a test says otherwise)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    def ensure(self) -> None:
        """Start the zygote unless it runs; never raises (a spawn without one starts its server cold)."""
        if self.running:
            return
        self._close_lifeline()
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            read_end, write_end = os.pipe()
            try:
                entry = ["--entry", self.entry] if self.entry else []
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "hub_spawner.zygote", "--socket", self.path, "--watch-fd", str(read_end),
                     *entry],
                    pass_fds=(read_end,), env=zygote_environment(dict(os.environ)), cwd=directory,
                    stdin=subprocess.DEVNULL, start_new_session=True)
            except BaseException:
                os.close(write_end)
                raise
            finally:
                os.close(read_end)
        except OSError as exc:
            log.warning("could not start the warm notebook-server process at %s: %s", self.path, exc)
            return
        self._lifeline = write_end
        log.info("started the warm notebook-server process %d at %s", self._proc.pid, self.path)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the zygote (running servers are not its to stop)."""
        self._close_lifeline()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout_s)
        self._proc = None

    def _close_lifeline(self) -> None:
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None


_processes: dict[str, WarmProcess] = {}


def warm_process(path: str) -> WarmProcess:
    """The hub's one ``WarmProcess`` for ``path``."""
    if path not in _processes:
        _processes[path] = WarmProcess(path)
    return _processes[path]
