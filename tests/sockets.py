"""Real sockets that fail the way a stopped or broken server does: a port nothing listens on, a server that
accepts and resets, one that accepts and never answers."""
from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on: one the system just gave and took back (a connection is refused)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        return listener.getsockname()[1]


class Resetting:
    """Accepts every connection, reads what the client sends, then resets it (RST, no answer): `accepted` counts
    the connections."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)   # how often the loop looks whether to stop
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="resetting", daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:   # the 0.05 s look, or the listener closed
                continue
            self.accepted += 1
            with connection:
                connection.settimeout(5)
                try:
                    connection.recv(65536)
                except OSError:
                    pass
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@contextmanager
def resetting() -> Iterator[Resetting]:
    server = Resetting()
    server._thread.start()
    try:
        yield server
    finally:
        server._stop.set()
        server._thread.join()
        server.listener.close()


@contextmanager
def silent() -> Iterator[int]:
    """A port whose server takes connections (the system's backlog) and never answers: the port."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]
