"""A real HTTP server that exposes an in-process toy bot through the SPEC §5 HTTP protocol.

Test-only rules: an exception in the bot answers 500 with its message, `lobeval.TargetUnavailable`
503 and `Status(code)` that code; a bot reply that is a plain str is sent as-is (not JSON); a session
without `state` answers 404 to GET .../state, one without `apply` 404 to POST .../apply; any other GET (the
base URL, which lobeval's pre-flight asks) 404. `serve(bot, stop_after=N)` stops listening once N sessions were
closed: a bot that dies mid-run, every later connection refused.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lobeval import TargetUnavailable

BASE_PATH = "/v1"


class Status(Exception):
    """Raised by a bot behind `serve`: answer with this HTTP status."""

    def __init__(self, code: int):
        super().__init__(f"status {code}")
        self.code = code


class BotServer(ThreadingHTTPServer):
    """Holds the bot and its live sessions, keyed by session id."""

    daemon_threads = True

    def __init__(self, bot: Any, port: int = 0, stop_after: int | None = None):
        super().__init__(("127.0.0.1", port), _Handler)
        self.bot, self.sessions, self._ids = bot, {}, itertools.count(1)
        self.url = f"http://127.0.0.1:{self.server_address[1]}{BASE_PATH}"
        self.stop_after, self.closed = stop_after, 0

    def new_id(self) -> str:
        return f"s{next(self._ids)}"


@contextmanager
def serve(bot: Any, *, port: int = 0, stop_after: int | None = None) -> Iterator[BotServer]:
    """Run `bot` behind HTTP on 127.0.0.1 (`port`, by default a free one) for the duration of the block, or until
    `stop_after` sessions were closed."""
    server = BotServer(bot, port, stop_after)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Handler(BaseHTTPRequestHandler):
    server: BotServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = self._parts()
        if parts == ["sessions"]:
            self._answer(self._start, body["case"])
        elif len(parts) == 3 and parts[2] == "messages" and parts[1] in self.server.sessions:
            self._answer(self._send, self.server.sessions[parts[1]], body["message"])
        elif len(parts) == 3 and parts[2] == "apply" and hasattr(self.server.sessions.get(parts[1]), "apply"):
            session = self.server.sessions[parts[1]]
            self._answer(lambda: {"function_calls": asyncio.run(session.apply(body["function_calls"]))})
        else:
            self._write(404, "no such route")

    def do_GET(self) -> None:
        if not self.path.startswith(BASE_PATH + "/"):
            self._write(404, "no such route")
            return
        parts = self._parts()
        session = self.server.sessions.get(parts[1]) if len(parts) == 3 and parts[2] == "state" else None
        if session is None or not hasattr(session, "state"):
            self._write(404, "not supported")
        else:
            self._answer(lambda: asyncio.run(session.state()))

    def do_DELETE(self) -> None:
        parts = self._parts()
        if len(parts) == 2 and self.server.sessions.pop(parts[1], None) is not None:
            self.server.closed += 1
            if self.server.closed == self.server.stop_after:   # stop listening before the client hears back
                self.server.shutdown()
                self.server.server_close()
            self._write(204, "")
        else:
            self._write(404, "no such session")

    def _start(self, case: dict) -> dict:
        session = asyncio.run(self.server.bot.start(case))
        session_id = self.server.new_id()
        self.server.sessions[session_id] = session
        greeting = asyncio.run(session.greeting()) if hasattr(session, "greeting") else None
        return {"session_id": session_id, "greeting": greeting and greeting.text}

    def _send(self, session: Any, message: str) -> Any:
        reply = asyncio.run(session.send(message))
        return reply if isinstance(reply, str) else {"reply": reply.text, "function_calls": reply.function_calls,
                                                     "usage": reply.usage}

    def _answer(self, handle: Any, *args: Any) -> None:
        try:
            result = handle(*args)
        except Status as exc:
            self._write(exc.code, str(exc))
        except TargetUnavailable as exc:
            self._write(503, f"Service Unavailable\n{exc}")
        except Exception as exc:
            self._write(500, f"Internal Server Error\n{type(exc).__name__}: {exc}")
        else:
            self._write(200, result if isinstance(result, str) else json.dumps(result))

    def _parts(self) -> list[str]:
        assert self.path.startswith(BASE_PATH + "/"), self.path
        return self.path[len(BASE_PATH) + 1:].split("/")

    def _write(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""
