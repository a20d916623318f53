"""The few messages between a notebook job's launcher and the warm server process (``hub_spawner.zygote``).

One ``SOCK_SEQPACKET`` Unix socket per server: message boundaries are kept and a closed end reads as EOF, so
"the other side is gone" needs no heartbeat. Each message is one JSON object; the request carries the launcher's
stdin, stdout and stderr as file descriptors (``SCM_RIGHTS``), so the server writes to the pod's own log.

    launcher → zygote    Request(argv, env, cwd)  + fds 0, 1, 2
    zygote   → launcher  Refused(reason)          the launcher starts the server itself
    keeper   → launcher  Started(pid, pgid)       the server runs (pgid: its process group, the keeper's)
    launcher → keeper    Relay(signum)            a signal the pod got, for the server
    keeper   → launcher  Exited(code)             the server's exit code (negative: killed by that signal)

Standard library only: the launcher imports this before the server starts, and every import is time the user
waits on the spawn page.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from dataclasses import asdict, dataclass
from typing import Union

#: The signals the launcher relays to the server and the keeper passes on (anything else that reaches the pod,
#: SIGKILL, ends the launcher and so the server).
RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Larger than any request (a server's environment is a few KiB); a longer message is refused, not cut.
MAX_MESSAGE = 1 << 20


@dataclass(frozen=True, slots=True)
class Request:
    argv: list[str]
    env: dict[str, str]
    cwd: str


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str


@dataclass(frozen=True, slots=True)
class Started:
    pid: int
    pgid: int


@dataclass(frozen=True, slots=True)
class Relay:
    signum: int


@dataclass(frozen=True, slots=True)
class Exited:
    code: int


Message = Union[Request, Refused, Started, Relay, Exited]
_KINDS: dict[str, type[Message]] = {cls.__name__: cls for cls in (Request, Refused, Started, Relay, Exited)}


class ProtocolError(Exception):
    """A message that is not one of ours (or was cut): the connection is dropped."""


def send(sock: socket.socket, message: Message, fds: tuple[int, ...] = ()) -> None:
    data = json.dumps({"kind": type(message).__name__, **asdict(message)}).encode()
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"a {type(message).__name__} of {len(data)} bytes is over {MAX_MESSAGE}")
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def receive(sock: socket.socket, *, max_fds: int = 0) -> tuple[Message | None, list[int]]:
    """The next message and the descriptors that came with it; ``(None, [])`` when the other side has closed."""
    data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE + 1, max(max_fds, 1))
    if not data:
        _close_all(fds)
        return None, []
    if max_fds == 0 and fds:
        _close_all(fds)
        raise ProtocolError("descriptors came where none were expected")
    if flags & socket.MSG_CTRUNC or len(data) > MAX_MESSAGE:
        _close_all(fds)
        raise ProtocolError("a message (or its descriptors) was cut")
    try:
        fields = json.loads(data)
        cls = _KINDS[fields.pop("kind")]
        return cls(**fields), fds
    except (ValueError, KeyError, TypeError) as exc:
        _close_all(fds)
        raise ProtocolError(f"not a message: {data[:200]!r} ({exc})") from None


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
