"""Serve the API on a socket: in the foreground for ``shoal up``, or on its own thread and event loop for tests,
the benchmark and anything else that must keep its own thread (``ServerThread``)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Callable

import tornado.httpserver
import tornado.netutil
import tornado.web


#: The GIL hand-over interval for a serving process (Python's default is 5 ms).
SWITCH_INTERVAL_S = 0.001


def favour_latency() -> None:
    """Shorten the GIL's switch interval, process-wide. The event loop hands every store call to a worker thread;
    with the default 5 ms a busy worker keeps the loop from even writing a finished answer to its socket for up to
    5 ms per hand-over, which under load is most of a request's latency. Called by the composition roots
    (``shoal up``, the API benchmark's server), never by a library function."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def listen(app: tornado.web.Application, host: str, port: int) -> tuple[tornado.httpserver.HTTPServer, int]:
    """Bind ``host:port`` (``port`` 0 picks a free one) on the running event loop; returns the server and port."""
    sockets = tornado.netutil.bind_sockets(port, address=host, family=socket.AF_INET)
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets(sockets)
    return server, sockets[0].getsockname()[1]


class ServerThread:
    """The API on a background thread with its own event loop. ``url`` is ready when ``start`` returns."""

    def __init__(self, make_app: Callable[[], tornado.web.Application], host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self._make_app = make_app
        self._host = host
        self._port = port
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="shoal-api-server", daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise RuntimeError("the API server did not start within 30 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to the thread that called start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server, self.port = listen(self._make_app(), self._host, self._port)
        self._ready.set()
        await self._stop.wait()
        server.stop()
        await server.close_all_connections()
