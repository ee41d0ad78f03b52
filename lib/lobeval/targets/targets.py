"""The target protocol (docs/targets.md): the chatbot under test, reached in-process or over HTTP.

A conversation talks to a target only through `load_target(spec)`, `Target` and `Session`;
`check_target(spec)` finds a spec's mistakes without starting the bot.
everything a target does wrong (raises, answers nonsense) surfaces as `TargetError`, which the
simulation records on the conversation instead of crashing the run. When the target's own
infrastructure failed (it raised `lobeval.TargetUnavailable`, answered HTTP 429/502/503/504, or
missed the deadline) the error is a `TargetUnavailableError`: machinery, not the bot's failure.

Every call is bounded by the target's deadline. A Python target's synchronous methods run on daemon
threads the Target owns; a call that misses its deadline is abandoned with its thread, which is
replaced, so a bot that hangs neither starves the other conversations nor keeps the process alive.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import difflib
import importlib
import inspect
import json
import logging
import queue
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

import httpx

from lobeval.core.errors import RoleError, TargetUnavailable, import_failure
from lobeval.core.protocol import USAGE_FIELDS, Reply
from lobeval.core.records import TerminationReason


UNAVAILABLE_STATUSES = (429, 502, 503, 504)
"""HTTP statuses by which a target says its own infrastructure failed (docs/targets.md)."""
MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest response body an HTTP target may send (after decompression): a reply is text and a few calls."""
MAX_STUCK_CALLS = 64
"""Synchronous calls abandoned at their deadline and still running: past it, a synchronous call fails
at once (target_unavailable) rather than start yet another thread."""


class TargetError(Exception):
    """The target failed: raised, or returned something outside the protocol. `reason` is how the
    conversation ends."""

    reason: TerminationReason = "target_error"


class TargetUnavailableError(TargetError):
    """The target's infrastructure failed or it missed the deadline: a machinery error, never a score.
    `usage`: what the failed turn's own model calls had used, `function_calls` the calls it had made (from
    `lobeval.TargetUnavailable`)."""

    reason: TerminationReason = "target_unavailable"
    usage: dict[str, float | None] | None = None
    function_calls: list[dict[str, Any]] | tuple[()] = ()


log = logging.getLogger(__name__)

_PYTHON_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_SPEC_FORMS = ("'module:attr' (a Python class or factory), an http:// or https:// base URL, or the path of a "
               "model-and-prompt target's .json file (docs/targets.md)")
_IMPORT_HINT = ("; the stage notebooks' kernel must import it too (and JupyterLab's, to run them by hand): install "
                "its package into .venv, or add its folder to PYTHONPATH before running lobeval or starting JupyterLab")
_CLIP = 200
_MISSING = object()
_KINDS = {type(None): "null", bool: "a boolean", str: "a string", int: "a number", float: "a number",
          list: "a list", dict: "an object"}


def load_target(spec: str, *, timeout: float = 60.0, workers: int = 8, concurrency: int = 1) -> Target:
    """Resolve a target spec (docs/targets.md); a Python target's class or factory is called here, once.

    Raises RoleError when the spec cannot be resolved. `timeout` (seconds) bounds every later
    call; a call that misses it is a TargetUnavailableError. `workers` is how many synchronous
    calls of a Python target run at once: give it the number of conversations run at once.
    `concurrency`: the conversations that will run at once (a target whose tools keep one state for
    all conversations is refused above 1).
    """
    if workers < 1:
        raise RoleError(f"target {spec!r}: workers must be at least 1, not {workers}")
    return Target(spec, _backend_maker(spec, concurrency)(workers), timeout)


def check_target(spec: str, concurrency: int = 1) -> None:
    """Raise the RoleError `load_target` would raise for the spec itself: its form, a malformed URL, a
    module that cannot be imported, a missing attribute, tools shared by conversations run at once.
    Nothing of the bot is called, so `lobeval run` checks its target before the first stage and the
    bot is still built only once, by the stage."""
    _backend_maker(spec, concurrency)


async def probe(spec: str, timeout: float) -> str | None:
    """Why an HTTP target does not answer, from one GET of its base URL bounded by `timeout`: a connection that
    failed (refused, DNS, TLS, reset), no answer in time, or 502/503/504 (a proxy in front of a bot that is down);
    None when it answered with any other status (the protocol names no route for GET, so a 404 answers too), and
    for any other kind of target (built in-process, by the stage)."""
    if not spec.startswith(("http://", "https://")):
        return None
    try:
        async with asyncio.timeout(timeout), httpx.AsyncClient(timeout=None) as client, \
                client.stream("GET", spec) as response:
            status = response.status_code
    except httpx.TransportError as exc:
        return f"cannot connect ({transport_failure(exc)})"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    return f"answered HTTP {status}" if status in (502, 503, 504) else None


def where_it_runs(spec: str | None) -> str | None:
    """`spec` as a process in another folder reads it: a model-and-prompt target's file that exists here, made
    absolute (the stage kernels run in the run folder); any other spec (or none) as it is."""
    if spec and spec.endswith(".json") and not spec.startswith(("http://", "https://")) and Path(spec).is_file():
        return str(Path(spec).resolve())
    return spec


def _backend_maker(spec: str, concurrency: int) -> Callable[[int], _PythonBackend | _HttpBackend]:
    """Check the spec and return how to build its backend with a number of worker threads."""
    if spec.startswith(("http://", "https://")):
        problem = _url_problem(spec)
        if problem:
            raise RoleError(f"target {spec!r}: not a well-formed base URL ({problem}), e.g. http://localhost:8000/v1")
        return lambda workers: _HttpBackend(spec)
    if _PYTHON_SPEC.fullmatch(spec):
        factory = _factory(spec)
        return lambda workers: _PythonBackend(_instantiate(spec, factory), _Workers(workers))
    if spec.endswith(".json"):
        if not Path(spec).is_file():
            raise RoleError(f"target {spec!r}: no such file (a model-and-prompt target is a JSON file; "
                            f"paths are relative to the folder lobeval runs in)")
        _prompt_target_module().check_concurrency(spec, concurrency)
        return lambda workers: _PythonBackend(_prompt_target_module().load_prompt_target(spec), _Workers(workers))
    raise RoleError(f"target {spec!r}: expected {_SPEC_FORMS}")


def _prompt_target_module() -> ModuleType:
    # Imported when used: it brings the MCP client, which only this kind of target needs.
    from lobeval.targets import prompt_target

    return prompt_target


def _url_problem(url: str) -> str | None:
    """What keeps `url` from being an http(s) base URL, or None."""
    if any(char.isspace() for char in url):
        return "it contains white space"
    try:
        parts = urlsplit(url)
        parts.port   # raises ValueError for a port that is not a number from 0 to 65535
    except ValueError as exc:
        return str(exc)
    if not parts.hostname:
        return "it names no host"
    if parts.query or parts.fragment:
        return "a base URL has no ?query or #fragment"
    return None


class Target:
    """A loaded target: `start` opens one isolated Session per conversation.

    An HTTP target keeps one client, bound to the event loop it was first used in: use a
    Target within one loop and `aclose()` it there. `aclose()` never waits for a call that missed
    its deadline.
    """

    def __init__(self, name: str, backend: _PythonBackend | _HttpBackend, timeout: float):
        self.name, self.timeout, self._backend = name, timeout, backend

    async def start(self, case: dict) -> Session:
        """Open a conversation about `case` (a dataset record)."""
        async with _guard("start", self.timeout):
            return Session(self, await self._backend.start(copy.deepcopy(case)))

    async def aclose(self) -> None:
        """Release the HTTP client or the idle worker threads."""
        await self._backend.aclose()


class Session:
    """One conversation with a target; every failure surfaces as TargetError."""

    def __init__(self, target: Target, handle: Any):
        self._target, self._handle = target, handle

    async def greeting(self) -> Reply | None:
        """What the target says before the user speaks, or None when it waits."""
        async with _guard("greeting", self._target.timeout):
            raw = await self._target._backend.greeting(self._handle)
            return None if raw is None else _reply({"text": raw} if isinstance(raw, str) else raw)

    async def send(self, message: str) -> Reply:
        """Send one user message and return the target's reply."""
        async with _guard("send", self._target.timeout):
            return _reply(await self._target._backend.send(self._handle, message))

    async def state(self) -> dict | None:
        """The backend's state now, for state checks; None when the target does not expose it."""
        async with _guard("state", self._target.timeout):
            raw = await self._target._backend.state(self._handle)
            if raw is not None and not isinstance(raw, dict):
                raise _malformed(f"state: {_describe(raw)}, not an object")
            return None if raw is None else _json_copy(raw, "state: the object")

    async def apply(self, function_calls: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Run function calls directly on the session's backend, as a perfect agent would (optional in
        the protocol: None when the target does not offer it). Each call comes back with result and error."""
        async with _guard("apply", self._target.timeout):
            raw = await self._target._backend.apply(self._handle, function_calls)
            if raw is None:
                return None
            if not isinstance(raw, list):
                raise _malformed(f"apply: {_describe(raw)}, not a list of function calls")
            return [_function_call(f"apply: [{i}]", call) for i, call in enumerate(raw)]

    async def close(self) -> None:
        """End the conversation at the target; never raises, a failure is only logged."""
        try:
            async with _guard("close", self._target.timeout):
                await self._target._backend.close(self._handle)
        except TargetError as exc:
            log.debug("target %s: %s", self._target.name, exc)


@contextlib.asynccontextmanager
async def _guard(operation: str, timeout: float) -> AsyncIterator[None]:
    """Bound one call into the target by `timeout` and turn any failure into a TargetError,
    a TargetUnavailableError when the target's infrastructure failed or the deadline passed.
    A bot raising SystemExit or KeyboardInterrupt fails its conversation, not the whole run."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            yield
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:
        if isinstance(exc, TargetError):
            kind, cause = type(exc), str(exc)
        elif isinstance(exc, TimeoutError) and deadline.expired():
            kind, cause = TargetUnavailableError, f"timed out after {timeout:g} s"
        elif isinstance(exc, TargetUnavailable):   # the target's own words on its infrastructure: kept whole
            kind, cause = TargetUnavailableError, f"{type(exc).__name__}: {exc}"
        else:
            kind, cause = TargetError, _clip(f"{type(exc).__name__}: {exc}")
        failure = kind(f"{operation} failed: {cause}")
        if isinstance(exc, TargetUnavailable):
            failure.function_calls = [_function_call(f"{operation}: function_calls[{i}]", call)
                                      for i, call in enumerate(exc.function_calls)]
            if exc.usage is not None:
                failure.usage = _usage(exc.usage)
        raise failure from exc


def _factory(spec: str) -> Callable[[], Any]:
    """Import `module:attr` and find attr, the target's class or factory, without calling it."""
    module_name, attr = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:   # user code: an exit on import is bad input, not lobeval's exit
        hint = _IMPORT_HINT if isinstance(exc, ImportError) else ""
        raise RoleError(f"target {spec!r}: cannot import module {module_name!r}: {import_failure(exc)}{hint}") from exc
    if not hasattr(module, attr):
        raise RoleError(f"target {spec!r}: module {module_name!r} has no attribute {attr!r}{_offer(module, attr)}")
    factory = getattr(module, attr)
    if not callable(factory):
        raise RoleError(f"target {spec!r}: {attr} is {_describe(factory)}, not a class or factory")
    return factory


def _offer(module: ModuleType, attr: str) -> str:
    """The close names among the classes and functions `module` defines (or re-exports from its own
    submodules), and its classes: "; did you mean EchoBot? The classes it defines: EchoBot, SyncBot"."""
    defined = {name: value for name, value in vars(module).items()
               if not name.startswith("_") and callable(value) and _defined_in(value, module.__name__)}
    by_lower = {name.lower(): name for name in defined}
    close = [by_lower[name] for name in difflib.get_close_matches(attr.lower(), by_lower)]
    classes = [name for name, value in defined.items() if inspect.isclass(value)]
    listed = f"the classes it defines: {', '.join(classes)}" if classes else "it defines no classes"
    return f"; did you mean {' or '.join(close)}? {listed[0].upper()}{listed[1:]}" if close else f"; {listed}"


def _defined_in(value: Any, module_name: str) -> bool:
    """Whether `value` comes from the module `module_name` or one of its submodules."""
    origin = getattr(value, "__module__", None) or ""
    return origin == module_name or origin.startswith(f"{module_name}.")


def _instantiate(spec: str, factory: Callable[[], Any]) -> Any:
    """Call the target's class or factory to get the target object."""
    attr = spec.split(":")[1]
    try:
        bot = factory()
    except Exception as exc:
        raise RoleError(f"target {spec!r}: {attr}() raised {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(bot, "start", None)):
        raise RoleError(f"target {spec!r}: {attr}() gave {_describe(bot)}, which has no start(case) method")
    return bot


class _Job:
    """One synchronous call, from the event loop that awaits it to a worker thread and back."""

    def __init__(self, method: Callable[..., Any], args: tuple[Any, ...]):
        self.method, self.args = method, args
        self.loop = asyncio.get_running_loop()
        self.future = self.loop.create_future()
        self.state = "queued"   # then "running", and "done" or "abandoned"

    def call(self) -> tuple[Any, BaseException | None]:
        try:
            return self.method(*self.args), None
        except BaseException as exc:   # SystemExit too: the bot's failure, for the caller to report
            return None, exc

    def settle(self, result: Any, error: BaseException | None) -> None:
        """Hand the outcome to the awaiting coroutine, unless it stopped waiting or its loop is gone."""
        with contextlib.suppress(RuntimeError):   # the loop is closed
            self.loop.call_soon_threadsafe(self._set, result, error)

    def _set(self, result: Any, error: BaseException | None) -> None:
        if self.future.done():
            return
        if error is None:
            self.future.set_result(result)
        else:
            self.future.set_exception(error)


class _Workers:
    """Daemon threads that run a Python target's synchronous methods, at most `size` at a time.

    A call abandoned at its deadline keeps its thread until it returns: that thread leaves the pool
    and a fresh one takes its place, so a stuck call never blocks the others, and daemon threads
    never keep the process alive.
    """

    def __init__(self, size: int):
        self.size = size
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0   # in the pool: not holding an abandoned call
        self._free = 0      # pool threads not running a job, less the jobs waiting for one
        self._stuck = 0

    async def run(self, method: Callable[..., Any], *args: Any) -> Any:
        job = _Job(method, args)
        with self._lock:
            if self._stuck >= MAX_STUCK_CALLS:
                raise TargetUnavailableError(f"too many calls stuck: {self._stuck} missed their deadline and never "
                                             "returned")
            self._free -= 1
            self._jobs.put(job)
            self._grow()
        try:
            return await job.future
        except asyncio.CancelledError:
            self._abandon(job)
            raise

    def close(self) -> None:
        """End the idle threads now and the busy ones after their call, waiting for none of them; the
        pool is not used again."""
        with self._lock:
            for _ in range(self._threads):
                self._jobs.put(None)

    def _grow(self) -> None:
        """Start a thread when a job waits and the pool is not full (the lock is held)."""
        if self._free < 0 and self._threads < self.size:
            self._threads += 1
            self._free += 1
            threading.Thread(target=self._work, name="lobeval-target", daemon=True).start()

    def _abandon(self, job: _Job) -> None:
        with self._lock:
            if job.state == "running":
                self._threads -= 1
                self._stuck += 1
                self._grow()
            if job.state != "done":
                job.state = "abandoned"

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                if job.state == "abandoned":   # it missed its deadline while it waited
                    self._free += 1
                    continue
                job.state = "running"
            result, error = job.call()
            with self._lock:
                if job.state == "abandoned":   # this thread has left the pool
                    self._stuck -= 1
                    return
                job.state = "done"
                self._free += 1
            job.settle(result, error)


class _PythonBackend:
    """Calls an in-process target object; its sessions are the objects its start() returns."""

    def __init__(self, bot: Any, workers: _Workers):
        self._bot, self._workers = bot, workers

    async def start(self, case: dict) -> Any:
        return await self._invoke(self._bot.start, case)

    async def greeting(self, session: Any) -> Any:
        return await self._invoke(session.greeting) if hasattr(session, "greeting") else None

    async def send(self, session: Any, message: str) -> Any:
        return await self._invoke(session.send, message)

    async def state(self, session: Any) -> Any:
        return await self._invoke(session.state) if hasattr(session, "state") else None

    async def apply(self, session: Any, function_calls: list[dict[str, Any]]) -> Any:
        return await self._invoke(session.apply, function_calls) if hasattr(session, "apply") else None

    async def close(self, session: Any) -> None:
        if hasattr(session, "close"):
            await self._invoke(session.close)

    async def aclose(self) -> None:
        if callable(getattr(self._bot, "aclose", None)):   # e.g. a model-and-prompt target's shared MCP server
            await self._bot.aclose()
        self._workers.close()
        self._workers = _Workers(self._workers.size)

    async def _invoke(self, method: Callable[..., Any], *args: Any) -> Any:
        """Call a target method that may be async or sync; sync ones run on the worker threads."""
        if inspect.iscoroutinefunction(method):
            return await abandonable(method(*args))
        result = await self._workers.run(method, *args)
        return await abandonable(result) if inspect.isawaitable(result) else result


async def abandonable(awaitable: Awaitable[Any]) -> Any:
    """Await a target's coroutine as a task of its own, so that a deadline ends the wait even when the target
    swallows its cancellation: the task is asked to stop and left behind, never waited for."""
    task = asyncio.ensure_future(_boxed(awaitable))
    try:
        failed, value = await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(lambda done: done.cancelled() or done.exception())   # nobody awaits it now
        raise
    if failed:
        raise value
    return value


async def _boxed(awaitable: Awaitable[Any]) -> tuple[bool, Any]:
    """(False, the result), or (True, the SystemExit or KeyboardInterrupt raised): a task that raises one of
    those stops the whole event loop instead of failing its call."""
    try:
        return False, await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        return True, exc


class _Remote(NamedTuple):
    """An HTTP session: its id, and the greeting that came with it."""

    session_id: str
    greeting: Any


class _HttpBackend:
    """Speaks the HTTP form of the protocol (docs/targets.md) to a base URL."""

    def __init__(self, base: str):
        self._base = base.rstrip("/")
        self._client: httpx.AsyncClient | None = None

    async def start(self, case: dict) -> _Remote:
        body = _json(await self._request("POST", "/sessions", {"case": case}))
        session_id = body.get("session_id", _MISSING) if isinstance(body, dict) else _MISSING
        if not isinstance(session_id, str):
            raise _malformed(f"session: session_id is {_describe(session_id)}")
        return _Remote(session_id, body.get("greeting"))

    async def greeting(self, remote: _Remote) -> Any:
        return remote.greeting

    async def send(self, remote: _Remote, message: str) -> Any:
        return _json(await self._request("POST", f"{_path(remote)}/messages", {"message": message}))

    async def state(self, remote: _Remote) -> Any:
        response = await self._request("GET", f"{_path(remote)}/state")
        return None if response.status_code == 404 else _json(response)

    async def apply(self, remote: _Remote, function_calls: list[dict[str, Any]]) -> Any:
        response = await self._request("POST", f"{_path(remote)}/apply", {"function_calls": function_calls})
        if response.status_code in (404, 405):
            return None
        body = _json(response)
        return body.get("function_calls") if isinstance(body, dict) else body

    async def close(self, remote: _Remote) -> None:
        response = await self._request("DELETE", _path(remote))
        if response.status_code not in (404, 405):  # DELETE is optional in the protocol
            _check(response)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """The response, its body read whole but never past MAX_BODY_BYTES (decompressed): a bigger body is a
        TargetError, found before more of it is read."""
        if self._client is None:
            # No httpx timeout: _guard's deadline applies, so both kinds of target time out alike.
            self._client = httpx.AsyncClient(timeout=None)
        try:
            async with self._client.stream(method, self._base + path, json=body) as response:
                declared = response.headers.get("content-length", "")
                if declared.isdecimal() and int(declared) > MAX_BODY_BYTES:
                    raise _too_big(method, path, f"{int(declared):,} bytes declared")
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise _too_big(method, path, f"more than {MAX_BODY_BYTES:,} bytes sent")
                    chunks.append(chunk)
        except httpx.TransportError as exc:   # refused, DNS, TLS, reset, closed without an answer: not the bot's reply
            raise TargetUnavailableError(f"{method} {self._base + path}: {transport_failure(exc)}") from exc
        headers = [(name, value) for name, value in response.headers.multi_items()
                   if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks),
                              request=response.request)


def transport_failure(exc: httpx.TransportError) -> str:
    """What an HTTP request met instead of an answer: "ConnectError: All connection attempts failed"; the cause
    when httpx gives no message (a reset read)."""
    message = str(exc) or str(exc.__cause__ or exc.__context__ or "") or "no message"
    return _clip(f"{type(exc).__name__}: {message}")


def _too_big(method: str, path: str, found: str) -> TargetError:
    return TargetError(f"{method} {path}: the response body is too large ({found}; at most "
                       f"{MAX_BODY_BYTES:,} bytes, MAX_BODY_BYTES)")


def _path(remote: _Remote) -> str:
    return f"/sessions/{quote(remote.session_id, safe='')}"


def _check(response: httpx.Response) -> None:
    if response.status_code >= 400:
        kind = TargetUnavailableError if response.status_code in UNAVAILABLE_STATUSES else TargetError
        raise kind(f"HTTP {response.status_code}: {_clip(response.text)}")


def _json(response: httpx.Response) -> Any:
    _check(response)
    try:
        return response.json()
    except ValueError:
        raise TargetError(f"response is not JSON: {_clip(response.text)}") from None


def _reply(raw: Any) -> Reply:
    """Normalise a target's answer (Reply-like object, or dict with text/reply) into a Reply."""
    if isinstance(raw, dict):
        text, calls = raw.get("text", raw.get("reply", _MISSING)), raw.get("function_calls", [])
        usage = raw.get("usage")
    elif hasattr(raw, "text"):
        text, calls, usage = raw.text, getattr(raw, "function_calls", []), getattr(raw, "usage", None)
    else:
        raise _malformed(f"reply: got {_describe(raw)}")
    if not isinstance(text, str):
        raise _malformed(f"reply: text is {_describe(text)}")
    if not isinstance(calls, list):
        raise _malformed(f"reply: function_calls is {_describe(calls)}")
    return Reply(text, [_function_call(f"reply: function_calls[{i}]", call) for i, call in enumerate(calls)],
                 _usage(usage))


def _usage(usage: Any) -> dict[str, float] | None:
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise _malformed(f"reply: usage is {_describe(usage)}")
    details = usage.get("prompt_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise _malformed(f"reply: usage.prompt_tokens_details is {_describe(details)}")
    if details and "cached_tokens" in details and "cached_prompt_tokens" not in usage:   # as OpenAI reports them
        usage = {**usage, "cached_prompt_tokens": details["cached_tokens"]}
    for name in USAGE_FIELDS:
        value = usage.get(name, 0)
        unknown_cost = name == "cost_usd" and value is None   # the bot's model has no known price
        if not unknown_cost and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise _malformed(f"reply: usage.{name} is {_describe(value)}, expected a number >= 0"
                             + (" or null (unknown)" if name == "cost_usd" else ""))
    return {name: usage.get(name, 0) for name in USAGE_FIELDS}


def _function_call(where: str, call: Any) -> dict[str, Any]:
    """Validate one function call and return it in the record shape (a fresh copy)."""
    if not isinstance(call, dict):
        raise _malformed(f"{where} is {_describe(call)}")
    name, arguments = call.get("functionName", _MISSING), call.get("arguments", _MISSING)
    error = call.get("error")
    if not isinstance(name, str):
        raise _malformed(f"{where}.functionName is {_describe(name)}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise _malformed(f"{where}.arguments is a string that is not JSON") from None
    if not isinstance(arguments, dict):
        raise _malformed(f"{where}.arguments is {_describe(arguments)}")
    if error is not None and not isinstance(error, str):
        raise _malformed(f"{where}.error is {_describe(error)}")
    return {"functionName": name, "arguments": _json_copy(arguments, f"{where}.arguments"),
            "result": _json_copy(call.get("result"), f"{where}.result"), "error": error}


def _json_copy(value: Any, where: str) -> Any:
    """A deep copy through JSON, so a record never shares or holds non-JSON values."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise _malformed(f"{where} is not JSON") from None


def _malformed(problem: str) -> TargetError:
    """`problem` starts with what was malformed: "reply: text is a number"."""
    return TargetError(f"malformed {problem}")


def _describe(value: Any) -> str:
    """Name a value's kind the way the JSON protocol does, for error messages."""
    if value is _MISSING:
        return "missing"
    return _KINDS.get(type(value), f"a {type(value).__name__}")


def _clip(text: str) -> str:
    """One line, at most _CLIP characters."""
    line = " ".join(text.split())
    return line if len(line) <= _CLIP else line[:_CLIP] + "…"
