"""A warm process that forks single-user servers with their imports already done: ``python -m hub_spawner.zygote``.

Why: most of a notebook server's start is Python importing Jupyter Server, JupyterHub's extension (with its ORM,
SQLAlchemy and Alembic) and JupyterLab — about 2.5 s of CPU, paid while the user watches the spawn page (profile in
docs/BENCHMARKS.md). This process pays it once, before anyone presses Start (the spawner starts it: ``warm_start``),
then waits on a Unix socket. A notebook job's launcher (``hub_spawner.launch``, run by the scheduler's executor as
the pod's command) sends the server's argv, environment and working directory with its own stdin/stdout/stderr;
the zygote forks a *keeper*, which starts a new session and forks the server itself:

* the server gets exactly the launcher's environment (so the grant's ``CUDA_VISIBLE_DEVICES``, MIG UUIDs included,
  and the hub's token), its working directory and its log, as if the launcher had ``exec``'d it;
* the launcher stays the pod's command: it relays the signals the executor sends the pod (SIGTERM, SIGINT, SIGHUP)
  to the server, and exits with the server's exit code, a signal death re-raised as one, so the executor's
  tracking, grace periods and reaping see what they saw before;
* if the launcher dies (SIGKILL at the end of the grace period, or a node failure), the keeper sees its socket close
  and kills the server's process group, as the executor's kill of the pod's group did; if the keeper dies, the
  server gets SIGKILL from the kernel (``PR_SET_PDEATHSIG``). The zygote itself may stop or be restarted without
  touching running servers.

It only ever forks what a cold start would have run: the request's argv must be this interpreter running
``hub_spawner.singleuser``, its ``PYTHON*`` variables must be this process's own (they shaped its imports), and the
peer must be this user (``SO_PEERCRED``). Anything else is refused, and the launcher starts the server the usual
way; so does a launcher that finds no zygote, or one that does not answer in time. Forked servers share the zygote's
hash seed and address-space layout, as Android's zygote does; they run as the zygote's user, as local pods do.

It stops when the hub that started it goes (the pipe named by ``--watch-fd`` closes) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import importlib
import io
import os
import runpy
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Mapping

from . import server_defaults, singleuser
from .zygote_protocol import RELAYED, Exited, ProtocolError, Refused, Relay, Request, Started, receive, send

#: The module a request may run by default (``python -m hub_spawner.singleuser ARGS``).
ENTRY = "hub_spawner.singleuser"
#: Imported by a server only once it runs (its start, its first page), so a fork would still pay for them: IPython
#: (notebook_shim's nbextension paths), the HTTP client stack, the kernel spec and nbconvert handlers.
LAZY_IMPORTS = ("IPython.paths", "httpx", "httpcore", "anyio._backends._asyncio", "ipykernel.kernelspec",
                "jupyter_server.nbconvert.handlers", "jupyterlab_server.translation_utils")
#: ``PYTHONUNBUFFERED`` only changes how stdout is buffered, which a forked server can still set.
_EMULATED = frozenset({"PYTHONUNBUFFERED"})
_PR_SET_PDEATHSIG = 1


def log(message: str) -> None:
    print(f"[shoal-zygote {os.getpid()}] {message}", file=sys.stderr, flush=True)


# -- what to import ------------------------------------------------------------------------------------------------
def preload(entry: str = ENTRY) -> list[str]:
    """Import what a server's start imports: JupyterHub's single-user entry point and every server extension that
    is enabled, with the modules of its extension points. Returns the extensions; one that fails to import is
    skipped (the server will report it as a cold start would). Another ``entry`` (the tests') is imported alone."""
    if entry != ENTRY:
        importlib.import_module(entry)
        return []
    singleuser.prepare()
    importlib.import_module("jupyterhub.singleuser")
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    manager = ExtensionConfigManager(read_config_path=jupyter_config_path())
    enabled: dict[str, bool] = manager.get_jpserver_extensions()  # type: ignore[no-untyped-call]
    loaded = []
    for name, on in sorted(enabled.items()):
        if not on:
            continue
        try:
            module = importlib.import_module(name)
            points = getattr(module, "_jupyter_server_extension_points", None) or \
                getattr(module, "_jupyter_server_extension_paths", None)
            for point in (points() if points else []):
                importlib.import_module(point["module"])
        except Exception as exc:  # noqa: BLE001 - any extension's import error; the server reports it itself
            log(f"not preloading server extension {name}: {exc}")
            continue
        loaded.append(name)
    for name in LAZY_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - not installed, or broken: the server meets it as it would
            log(f"not preloading {name}: {exc}")
    server_defaults.config_dir()
    return loaded


# -- which requests it serves --------------------------------------------------------------------------------------
def refusal(request: Request, *, executable: str, own_env: Mapping[str, str], entry: str = ENTRY) -> str | None:
    """Why this process must not fork ``request`` (``None``: it may). Pure, so the rules are a table in the tests."""
    if request.argv[:3] != [executable, "-m", entry]:
        return f"it runs {request.argv[:3]!r}, not {[executable, '-m', entry]!r}"
    if not os.path.isabs(request.cwd):
        return f"its working directory {request.cwd!r} is not absolute"
    names = {k for k in (*request.env, *own_env) if k.startswith("PYTHON") and k not in _EMULATED}
    differing = sorted(k for k in names if request.env.get(k) != own_env.get(k))
    if differing:
        return f"its {', '.join(differing)} differ from the warm process's, which shaped its imports"
    return None


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


# -- the three processes: zygote, keeper, server --------------------------------------------------------------------
class Zygote:
    """The accept loop. ``own_env``: this process's environment as it started (what its imports saw)."""

    def __init__(self, listener: socket.socket, watch_fd: int | None, own_env: Mapping[str, str],
                 entry: str = ENTRY) -> None:
        self.listener = listener
        self.watch_fd = watch_fd
        self.own_env = dict(own_env)
        self.entry = entry
        self.stopping = False

    def serve(self) -> None:
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        if self.watch_fd is not None:
            poller.register(self.watch_fd, select.POLLIN)
        while not self.stopping:
            try:
                ready = poller.poll()
            except InterruptedError:
                continue
            for fd, _ in ready:
                if fd == self.watch_fd:
                    log("the hub that started this process is gone; stopping (running servers keep running)")
                    return
                self._accept()

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        fds: list[int] = []
        try:
            conn.settimeout(10)
            message, fds = receive(conn, max_fds=3)
            if message is None:
                return   # the launcher gave up waiting before this process was ready
            reason = self._refusal(conn, message, fds)
            if reason is not None:
                log(f"refused a server: {reason}")
                send(conn, Refused(reason))
                return
            assert isinstance(message, Request)
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:   # the keeper
                try:
                    self.listener.close()
                    if self.watch_fd is not None:
                        os.close(self.watch_fd)
                    keep(conn, message, fds)
                finally:
                    os._exit(70)
        except (OSError, ProtocolError) as exc:
            log(f"dropped a request: {exc}")
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()

    def _refusal(self, conn: socket.socket, message: object, fds: list[int]) -> str | None:
        if not isinstance(message, Request):
            return f"a {type(message).__name__} is not a request"
        if len(fds) != 3:
            return f"it came with {len(fds)} descriptors, not stdin, stdout and stderr"
        uid = _peer_uid(conn)
        if uid != os.getuid():
            return f"it came from uid {uid}; this process forks servers for uid {os.getuid()} only"
        return refusal(message, executable=sys.executable, own_env=self.own_env, entry=self.entry)


def keep(conn: socket.socket, request: Request, fds: list[int]) -> None:
    """The keeper: a new session whose leader waits for the server, relays signals to it, reports its exit and
    clears its process group after it, as the executor does for a pod's group."""
    os.setsid()
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    keeper = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            become_server(request, fds, keeper)
        finally:
            os._exit(70)
    for fd in fds:
        os.close(fd)
    fds.clear()
    try:
        _watch(conn, pid, keeper)
    finally:
        conn.close()
        os.killpg(keeper, signal.SIGKILL)   # the server, whatever it left in its group, and this keeper


def _watch(conn: socket.socket, pid: int, keeper: int) -> None:
    """Until the server exits (reported) or the launcher goes (the server is then killed with the group)."""
    conn.settimeout(None)
    pidfd = os.pidfd_open(pid)
    try:
        send(conn, Started(pid=pid, pgid=keeper))
    except OSError:
        return   # the launcher gave up waiting; nobody would watch this server
    poller = select.poll()
    poller.register(conn, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poller.poll()}
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
            try:
                send(conn, Exited(os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            return
        try:
            message, _ = receive(conn)
        except (OSError, ProtocolError):
            message = None
        if message is None:       # the launcher is gone (killed with its pod): so is the server
            return
        if isinstance(message, Relay) and message.signum in RELAYED:
            os.kill(pid, message.signum)


def become_server(request: Request, fds: list[int], keeper: int) -> None:
    """Turn this fork into the server as ``exec`` would have: descriptors, environment, directory, argv, signals."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != keeper:
        os._exit(70)   # the keeper died before the line above took effect
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(request.env)
    os.chdir(request.cwd)
    if not sys.flags.safe_path and sys.path:
        sys.path[0] = os.getcwd()    # what ``python -m`` puts first
    sys.argv = ["-m", *request.argv[3:]]   # runpy puts the module's file first, as ``python -m`` does
    if request.env.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=True)
    code = 1
    try:
        sys.modules.pop(request.argv[2], None)   # run as ``__main__`` only, as ``python -m`` does (no runpy warning)
        runpy.run_module(request.argv[2], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - printed as the interpreter would, then the process ends
        traceback.print_exc()
    finally:
        _finish(code)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _finish(code: int) -> None:
    """What the interpreter does at exit (join threads, run ``atexit``, flush), without unwinding the zygote's
    frames below this one (its ``finally`` blocks would remove the zygote's socket)."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - exiting regardless
        pass
    os._exit(code)


# -- the socket ----------------------------------------------------------------------------------------------------
def bind(path: str, *, wait_s: float = 10.0) -> socket.socket | None:
    """Listen at ``path``; a stale file (no one answers) is replaced. ``None`` if another zygote still answers there
    after ``wait_s`` (a hub restarting while the last one's zygote has not noticed yet)."""
    deadline = time.monotonic() + wait_s
    while True:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            probe.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            break
        finally:
            probe.close()
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o077)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def _unlink_if_ours(path: str, inode: int) -> None:
    """Remove the socket file unless a newer zygote has bound its own there since."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hub_spawner.zygote", description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, help="the Unix socket to listen on (its directory: mode 0700)")
    parser.add_argument("--watch-fd", type=int, default=None, help="stop when this descriptor reads EOF")
    parser.add_argument("--entry", default=ENTRY, help="the module requests run with -m (default: %(default)s)")
    args = parser.parse_args(argv)
    own_env = dict(os.environ)
    listener = bind(args.socket)
    if listener is None:
        log(f"another warm process answers at {args.socket}; leaving it to serve")
        return 0
    inode = os.stat(args.socket).st_ino
    zygote = Zygote(listener, args.watch_fd, own_env, args.entry)

    def on_term(signum: int, frame: object) -> None:
        zygote.stopping = True
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    try:
        started, cpu = time.monotonic(), time.process_time()
        extensions = preload(args.entry)
        log(f"ready at {args.socket}: preloaded the single-user server and {', '.join(extensions) or 'no'} "
            f"extensions in {time.monotonic() - started:.1f} s ({time.process_time() - cpu:.1f} s of CPU)")
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # keepers are reaped by the kernel
        zygote.serve()
    finally:
        _unlink_if_ours(args.socket, inode)
        listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
