"""The launcher's side of a warm start: ask the zygote (``hub_spawner.zygote``) for the server, then stand in for it.

The launcher is the pod's command, the process the scheduler's executor watches and signals. After a warm start it
stays so: it relays the signals a pod gets to the server (``RELAYED``), and ends as the server ended — its exit
code, or a death by the same signal — so the executor records exactly what a cold start would have. If it is killed
outright, the zygote's keeper sees the socket close and kills the server.

``start_warm`` returns ``None`` whenever the server was not started (no zygote, a refusal, no answer within the
timeout); the caller then starts it cold, as before. A signal that arrived meanwhile is then the caller's to honour
(``WarmStart.pending``).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from types import FrameType

from .zygote_protocol import RELAYED, Exited, ProtocolError, Refused, Relay, Request, Started, receive, send



@dataclass
class WarmStart:
    """One attempt: ``pending`` holds signals that came before the server existed (or instead of it)."""

    socket_path: str
    timeout_s: float
    pending: list[int] = field(default_factory=list)
    why_not: str = ""

    def run(self, argv: list[str], env: dict[str, str], cwd: str) -> int | None:
        """The server's exit code once it has run warm; ``None`` (``why_not`` says why) if it was not started."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(self.timeout_s)
        try:
            sock.connect(self.socket_path)
        except OSError as exc:
            sock.close()
            self.why_not = f"no warm process answers at {self.socket_path} ({exc.strerror or exc})"
            return None
        previous = {signum: signal.getsignal(signum) for signum in RELAYED}
        started: Started | None = None

        def relay(signum: int, frame: FrameType | None) -> None:
            if started is None:
                self.pending.append(signum)
            try:
                send(sock, Relay(signum))
            except OSError:
                pass

        for signum in RELAYED:
            signal.signal(signum, relay)
        try:
            send(sock, Request(argv=argv, env=env, cwd=cwd), fds=(0, 1, 2))
            reply, _ = receive(sock)
            if isinstance(reply, Refused):
                self.why_not = f"the warm process refused: {reply.reason}"
                return None
            if not isinstance(reply, Started):
                self.why_not = "the warm process closed the connection without starting the server"
                return None
            started = reply
            self.pending.clear()   # relayed from here on: the keeper forwards what it already read
            sock.settimeout(None)
            return self._until_exit(sock, started)
        except (TimeoutError, socket.timeout):
            self.why_not = f"the warm process did not answer within {self.timeout_s:g} s"
            return None
        except (OSError, ProtocolError) as exc:
            if started is not None:
                raise
            self.why_not = f"the warm process failed: {exc}"
            return None
        finally:
            sock.close()
            if started is None:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    @staticmethod
    def _until_exit(sock: socket.socket, started: Started) -> int:
        while True:
            try:
                message, _ = receive(sock)
            except ProtocolError:
                continue
            if isinstance(message, Exited):
                return message.code
            if message is None:
                # The keeper died without a word: take its group (the server) with it, as a pod's end would.
                try:
                    os.killpg(started.pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                print("hub_spawner.launch: the warm server's keeper vanished; the server was killed",
                      file=sys.stderr, flush=True)
                return 1


def end_as(code: int) -> int:
    """Exit as the server did: a death by signal is re-raised on this process (the executor reads -SIGTERM so),
    anything else is returned as the exit code."""
    if code < 0:
        signum = -code
        signal.signal(signum, signal.SIG_DFL)
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signum)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        return 128 + signum   # not reached for a deadly signal
    return code
