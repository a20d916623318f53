"""Free TCP ports for servers the tests start.

A port from ``bind(0)`` lies in the kernel's ephemeral range, which the same kernel also hands to outgoing
connections: between picking it and the server binding it, a client socket can take it ("Address already in use").
So pick below that range, at random, and check the port can be bound now.
"""

from __future__ import annotations

import random
import socket

_LOW, _HIGH = 20000, 32000  # below Linux's default ephemeral range (32768–60999)
_given: set[int] = set()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and no earlier call in this process returned."""
    for _ in range(200):
        port = random.randrange(_LOW, _HIGH)
        if port in _given:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port found between {_LOW} and {_HIGH}")
