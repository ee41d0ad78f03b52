"""A fake OpenAI-compatible server for tests and benchmarks: real HTTP on 127.0.0.1, no network.

    with FakeOpenAI(lambda request: tool_calls([("lookup", {"id": "T-1"})])) as server:
        ...  # point a client at server.base_url (OpenAI) or server.azure_endpoint (Azure)

It never logs requests or headers: they may carry keys.
"""
from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import json
import math
import re
import select
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lobeval.core.tokens import PER_REPLY, cacheable, count, prompt_tokens, reply_tokens

Reply = str | dict[str, Any]
Policy = Callable[[dict[str, Any]], Reply]
# Besides these, a fault may be any HTTP error status as a string: "429", "500", "401", ...
FAULTS = ("timeout", "drip", "malformed", "empty", "bad_tool_args", "hang", "endless")
EMBEDDING_DIMS = 64
_ROUTE = re.compile(r"/v1/(?P<v1>chat/completions|embeddings)|/openai/deployments/(?P<deployment>[^/]+)/"
                    r"(?P<azure>chat/completions|embeddings)")


def text(content: str) -> dict[str, Any]:
    """A plain assistant message."""
    return {"content": content}


def tool_calls(calls: list[tuple[str, dict[str, Any]]], content: str | None = None) -> dict[str, Any]:
    """An assistant message calling tools: [(name, arguments), ...]."""
    return {"content": content, "tool_calls": [
        {"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}} for name, args in calls]}


def json_reply(obj: Any) -> dict[str, Any]:
    """A JSON-mode reply: the content is the object as JSON."""
    return text(json.dumps(obj))


def echo_last_user(request: dict[str, Any]) -> str:
    """The default policy: answer with the last user message."""
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else json.dumps(content)


class Fault(Exception):
    """Raised by a policy to make the request it is answering fail, as `fail_next(kind, **kw)` would make
    the next one: e.g. `raise Fault("500")` for the requests of one role only."""

    def __init__(self, kind: str, **kw: Any):
        _check_fault(kind)
        super().__init__(kind)
        self.kind, self.kw = kind, kw


def _check_fault(kind: str) -> None:
    if kind not in FAULTS and not (kind.isdigit() and 400 <= int(kind) < 600):
        raise ValueError(f"unknown fault {kind!r}; choose one of {', '.join(FAULTS)} or an HTTP error status")


def embed_text(text: str) -> list[float]:
    """Hashed bag of words, L2-normalised: texts sharing words are close."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % EMBEDDING_DIMS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class FakeOpenAI:
    """Serves /v1/chat/completions, /v1/embeddings and their Azure deployment paths, and the Batch API's
    /v1/files and /v1/batches (GET /v1/batches lists the last one) (a batch is done on its `batch_polls`-th look, or ends as `batch_fault` says).

    `policy(request_body)` gives each chat reply (a str, or a dict from `text`, `tool_calls`,
    `json_reply`), or raises `Fault` to fail that request; `fail_next` queues faults; `requests` holds
    every JSON body received; `gets` the path (with its query) of every GET request (the Batch API's looks);
    `answers` one entry per request answered, {"request", "status", "usage", "billed"}
    (usage as the answer reported it, None when it reported none; billed: the prompt and completion tokens its model
    read and wrote, reported or not), in the order answered (`bill()` adds them up); `count` is the
    number of chat completion requests; `latency` is slept before every answer.

    A chat request with `"stream": true` is answered as server-sent events, as OpenAI streams: the reply's text
    and each tool call's arguments in pieces, then, when `stream_options.include_usage` asks for it and
    `stream_usage` is on (a server that sends no usage: off), a last chunk with the usage and no choices. The
    "endless" fault (and, with `local`, a streamed request without a cap) streams text without end, until the client
    closes the connection: the fake notices at its next piece and stops producing (`hangups`, `hung_up`, `stopped`
    counts the streams it stopped so), as llama-cpp-python's server does with a stream.

    GET /v1/models (and Azure's /openai/models) lists one model, "fake". With `key`, every request that does not
    carry it (`Authorization: Bearer`, or Azure's `api-key` header) is answered HTTP 401, as a provider answers a
    wrong key.

    `local=True` behaves as the OpenAI-compatible servers teams run themselves do (llama-cpp-python's, and Ollama or
    vLLM in part): no Batch API (/v1/files and /v1/batches answer 404); a history with an assistant message whose
    content is null is refused with HTTP 500 (llama-cpp-python's message, LOCAL_NULL_CONTENT); `tools` sent without
    `tool_choice` are left out of the prompt (the policy sees a request without them), and so are the messages of role
    `tool` of a request without tools (llama-cpp-python's `chatml` format drops them); and a model that never stops:
    a chat request without `max_tokens` (or `max_completion_tokens`) is never answered, until the client closes the
    connection, which `hangups` counts and `hung_up` signals.
    """

    def __init__(self, policy: Policy = echo_last_user, *, latency: float = 0.0, prompt_cache: bool = False,
                 local: bool = False, key: str | None = None):
        self.policy, self.latency, self.prompt_cache, self.local = policy, latency, prompt_cache, local
        self.key = key
        self.hangups = 0
        self.hung_up = threading.Event()
        self.stopped = 0
        self.stream_usage = True
        self._prefixes: set[str] = set()   # with prompt_cache: every leading run of messages a request has sent
        self.requests: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.count = 0
        self._faults: deque[tuple[str, dict[str, Any]]] = deque()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_polls = 1   # how many times a batch is looked at before it is done
        self.batch_fault: str | None = None   # "failed" or "expired": the next batch ends so

    @property
    def port(self) -> int:
        assert self._server is not None, "the server is not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def azure_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOpenAI:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},  # quick stop()
                         name="FakeOpenAI", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def bill(self) -> dict[str, int]:
        """What the fake's model read and wrote for every request answered: {"requests", "prompt_tokens",
        "completion_tokens"}."""
        with self._lock:
            billed = [answer["billed"] for answer in self.answers if answer.get("billed")]
        return {"requests": len(billed), "prompt_tokens": sum(b["prompt_tokens"] for b in billed),
                "completion_tokens": sum(b["completion_tokens"] for b in billed)}

    def fail_next(self, kind: str, times: int = 1, **kw: Any) -> None:
        """Make the next `times` requests fail. "hang": never answered until the client closes the connection
        (`hangups`, `hung_up`). "endless": a streamed answer without end, until the client hangs up. kw: retry_after (for "429"), seconds (for "timeout": the answer comes after them), interval (for "drip": the answer's body comes one byte per interval,
        0.05 s by default, so no single read waits long), message (for an HTTP status)."""
        _check_fault(kind)
        with self._lock:
            self._faults.extend([(kind, kw)] * times)

    # --- the Batch API: /v1/files, /v1/batches ------------------------------------------------------------

    def upload(self, content: bytes, purpose: str) -> _Answer:
        file_id = f"file-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self.files[file_id] = content
        return _Answer(200, {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                             "filename": "batch.jsonl", "purpose": purpose, "status": "processed"})

    def create_batch(self, body: dict[str, Any]) -> _Answer:
        if body.get("input_file_id") not in self.files:
            return _error(400, f"no such file: {body.get('input_file_id')}")
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines() if line.strip()]
        batch = {"id": f"batch_{uuid.uuid4().hex[:12]}", "object": "batch", "endpoint": body.get("endpoint"),
                 "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window"),
                 "status": "validating", "created_at": int(time.time()), "output_file_id": None,
                 "error_file_id": None, "errors": None,
                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
        with self._lock:
            self.batches[batch["id"]] = {**batch, "_lines": lines, "_polls": 0, "_fault": self.batch_fault}
            self.batch_fault = None
        return _Answer(200, batch)

    def retrieve_batch(self, batch_id: str) -> _Answer:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return _error(404, f"no such batch: {batch_id}")
            batch["_polls"] += 1
            due = batch["status"] in ("validating", "in_progress") and batch["_polls"] >= self.batch_polls
        if due:
            self._finish(batch)
        elif batch["status"] == "validating":
            batch["status"] = "in_progress"
        return _Answer(200, {k: v for k, v in batch.items() if not k.startswith("_")})

    def _finish(self, batch: dict[str, Any]) -> None:
        """Answer every request of the batch with the policy (noted in `answers`, marked "batch"), or end it as
        its fault says."""
        if batch["_fault"]:
            batch["status"] = batch["_fault"]
            batch["errors"] = {"object": "list", "data": [{"code": batch["_fault"], "message": f"injected {batch['_fault']}"}]}
            return
        out = []
        for line in batch["_lines"]:
            answer = self._answer("/v1/chat/completions", line["body"])
            usage = answer.payload.get("usage") if isinstance(answer.payload, dict) else None
            with self._lock:
                self.answers.append({"request": line["body"], "status": answer.status, "usage": usage, "batch": True})
            out.append({"id": f"batch_req_{uuid.uuid4().hex[:12]}", "custom_id": line["custom_id"],
                        "response": {"status_code": answer.status, "request_id": uuid.uuid4().hex,
                                     "body": answer.payload}, "error": None})
        output = f"file-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self.files[output] = "\n".join(json.dumps(line) for line in out).encode()
            batch.update(status="completed", output_file_id=output,
                         request_counts={"total": len(out), "completed": len(out), "failed": 0})

    def _get(self, path: str) -> _Answer:
        url = urlsplit(path).path
        if url in ("/v1/models", "/openai/models"):
            return _Answer(200, {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "lobeval"}]})
        if url == "/v1/batches":
            with self._lock:
                listed = [{k: v for k, v in batch.items() if not k.startswith("_")} for batch in self.batches.values()]
            return _Answer(200, {"object": "list", "data": listed[-1:], "has_more": len(listed) > 1})
        if match := re.fullmatch(r"/v1/batches/([\w-]+)", url):
            return self.retrieve_batch(match[1])
        if (match := re.fullmatch(r"/v1/files/([\w-]+)/content", url)) and match[1] in self.files:
            return _Answer(200, self.files[match[1]])
        return _error(404, f"no such endpoint: {url}")

    def _respond(self, path: str, body: dict[str, Any]) -> _Answer:
        """The answer to one request, noted in `answers`."""
        answer = self._answer(path, body)
        if answer.payload is HANG or answer.endless:
            return answer
        usage = answer.payload.get("usage") if isinstance(answer.payload, dict) else None
        billed = {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]} \
            if usage else None
        if answer.stream and not (self.stream_usage and (body.get("stream_options") or {}).get("include_usage")):
            answer = replace(answer, payload={key: value for key, value in answer.payload.items() if key != "usage"})
            usage = None
        with self._lock:
            self.answers.append({"request": body, "status": answer.status, "usage": usage, "billed": billed})
        return answer

    def _answer(self, path: str, body: dict[str, Any]) -> _Answer:
        url = urlsplit(path)
        route = _ROUTE.fullmatch(url.path)
        if route is None:
            return _error(404, f"no such endpoint: {url.path}")
        if route["deployment"] and "api-version" not in parse_qs(url.query):
            return _error(400, "the api-version query parameter is required")
        chat = (route["v1"] or route["azure"]) == "chat/completions"
        with self._lock:
            self.requests.append(body)
            self.count += chat
            kind, kw = self._faults.popleft() if self._faults else ("", {})
        if chat and self.local:
            refused = _local_refusal(body)
            if refused is not None:
                return refused
            if "tool_choice" not in body:
                body = {key: value for key, value in body.items() if key != "tools"}
            if not body.get("tools"):   # as llama-cpp-python's chatml format does (its _map_roles)
                body = {**body, "messages": [m for m in body.get("messages") or [] if m.get("role") != "tool"]}
        reply: Reply | None = None
        if chat and not kind:   # the policy answers now, so that it may fail this request with a Fault
            try:
                reply = self.policy(body)
            except Fault as fault:
                kind, kw = fault.kind, fault.kw
            except Exception as exc:  # a bug in a test's policy must be visible, not a hang
                return _error(500, f"fake policy failed: {type(exc).__name__}: {exc}")
        time.sleep(self.latency)
        streamed = chat and bool(body.get("stream"))
        if kind == "endless" or (streamed and self.local and _uncapped(body)):
            return _Answer(200, {"model": body.get("model", "fake")}, endless=True, stream=True)
        if kind == "hang":
            return _Answer(200, HANG)
        if kind == "timeout":
            time.sleep(kw.get("seconds", 5.0))
        elif kind == "malformed":
            return _Answer(200, b'{"id": "chatcmpl-broken", "choices": [', stream=streamed)
        elif kind.isdigit():
            return _error(int(kind), kw.get("message", f"injected fault {kind}"), kw.get("retry_after", 1))
        try:
            payload = (self._completion(body, kind, route["deployment"], reply) if chat
                       else self._embeddings(body, kind))
        except Exception as exc:  # a bug in a test's policy must be visible, not a hang
            return _error(500, f"fake policy failed: {type(exc).__name__}: {exc}")
        return _Answer(200, payload, drip_s=kw.get("interval", 0.05) if kind == "drip" else 0.0, stream=streamed)

    def _completion(self, body: dict[str, Any], kind: str, deployment: str | None,
                    reply: Reply | None = None) -> dict[str, Any]:
        if kind == "empty":
            reply = text("")
        elif kind == "bad_tool_args":
            name = ((body.get("tools") or [{}])[0].get("function") or {}).get("name", "tool")
            reply = {"content": None, "tool_calls": [
                {"id": "call_bad", "type": "function", "function": {"name": name, "arguments": '{"id": "T-1",'}}]}
        elif reply is None:
            reply = self.policy(body)
        message = {"role": "assistant", "content": None, **(text(reply) if isinstance(reply, str) else reply)}
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion", "created": int(time.time()),
                "model": deployment or body.get("model", "fake"),
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {**_usage(prompt_tokens(body.get("messages") or [], body.get("tools")), reply_tokens(message)),
                          **self._cached(body)}}

    def _cached(self, body: dict[str, Any]) -> dict[str, Any]:
        """With prompt_cache, as a provider's automatic prompt caching reports it: of the longest leading run of
        whole messages (the tool definitions first) an earlier request sent, what `tokens.cacheable` allows (no
        expiry)."""
        if not self.prompt_cache:
            return {}
        messages, tools = body.get("messages") or [], body.get("tools")
        prefixes = [json.dumps([tools, messages[:k]]) for k in range(1, len(messages) + 1)]
        with self._lock:
            seen = [prompt_tokens(messages[:k], tools) - PER_REPLY for k, prefix in enumerate(prefixes, 1)
                    if prefix in self._prefixes]
            self._prefixes.update(prefixes)
        return {"prompt_tokens_details": {"cached_tokens": cacheable(max(seen, default=0))}}

    def _embeddings(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        vectors = [] if kind in ("empty", "bad_tool_args") else [embed_text(t) for t in texts]
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v}
                for i, v in enumerate(vectors)]
        return {"object": "list", "data": data, "model": body.get("model", "fake"),
                "usage": _usage(sum(count(text) for text in texts), 0)}


LOCAL_NULL_CONTENT = ("7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
                      "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', "
                      "'input': None} (the rest of this message is the part a clipped error would lose)")
"""How llama-cpp-python's server (0.3) answers a history with a null content: HTTP 500, the request's validation."""
HANG = b"(never answered)"
"""The payload of a request a local server's model answers without end: see FakeOpenAI(local=True)."""
HANG_LIMIT_S = 60.0
"""How long the fake waits for a client to hang up on a request it never answers."""
ENDLESS_PIECE_S = 0.01
"""Between two pieces of an endless stream."""


def _local_refusal(body: dict[str, Any]) -> _Answer | None:
    """What a local server answers instead of the model: HTTP 500 for a null content in the history, a request
    never answered without a completion cap; None when the model answers."""
    if any(message.get("role") == "assistant" and message.get("content") is None for message in body["messages"]):
        return _error(500, LOCAL_NULL_CONTENT)
    if _uncapped(body) and not body.get("stream"):
        return _Answer(200, HANG)
    return None


def _uncapped(body: dict[str, Any]) -> bool:
    return not (body.get("max_tokens") or body.get("max_completion_tokens"))


def stream_events(completion: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A chat completion's JSON as the chunks OpenAI streams it in: a first chunk with the role, the text in two pieces
    (its first word, the rest: a real server sends a token a chunk, which would only cost the tests time), each tool
    call (its id and name, then its arguments in pieces of 8 characters), the finish reason, and the usage (when the
    completion has it) in a last chunk without choices."""
    head = {key: completion.get(key) for key in ("id", "created", "model")}
    message = completion["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in re.fullmatch(r"(\s*\S*\s*)(.*)", message.get("content") or "", re.DOTALL).groups():
        if piece:
            yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": ""}}]})
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), 8):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[start:start + 8]}}]})
    yield chunk({}, completion["choices"][0].get("finish_reason") or "stop")
    if completion.get("usage"):
        yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]}


def endless_events(model: str) -> Iterator[dict[str, Any]]:
    """The chunks of a model that never stops."""
    while True:
        yield {"id": "chatcmpl-endless", "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": {"content": "and on "}, "logprobs": None, "finish_reason": None}]}


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


@dataclass(frozen=True)
class _Answer:
    status: int
    payload: dict[str, Any] | bytes   # JSON, or raw bytes
    headers: dict[str, str] = field(default_factory=dict)
    drip_s: float = 0.0   # seconds between the body's bytes; 0 sends it at once
    stream: bool = False   # a chat completion sent as server-sent events (stream_events)
    endless: bool = False   # a stream without end (endless_events)


def _error(status: int, message: str, retry_after: float = 1) -> _Answer:
    headers = {"Retry-After": str(retry_after)} if status == 429 else {}
    return _Answer(status, {"error": {"message": message, "type": "fake_error", "code": str(status)}}, headers)


def _batch_api(path: str) -> bool:
    return re.match(r"/v1/(files|batches)\b", urlsplit(path).path) is not None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive; every answer carries Content-Length
    server: _Server

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fake = self.server.fake
        if self._refused():
            return
        if fake.local and _batch_api(self.path):
            self._send(_error(404, f"no such endpoint: {urlsplit(self.path).path}"))
            return
        if urlsplit(self.path).path == "/v1/files":
            parts = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + raw)
            fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                      for part in parts.iter_parts()}
            self._send(fake.upload(fields.get("file") or b"", (fields.get("purpose") or b"").decode()))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            answer = _error(400, "the request body is not JSON")
        else:
            answer = fake.create_batch(body) if urlsplit(self.path).path == "/v1/batches" else fake._respond(self.path, body)
        self._send(answer)

    def do_GET(self) -> None:
        fake = self.server.fake
        with fake._lock:
            fake.gets.append(self.path)
        if self._refused():
            return
        if fake.local and _batch_api(self.path):
            self._send(_error(404, f"no such endpoint: {urlsplit(self.path).path}"))
            return
        self._send(fake._get(self.path))

    def _refused(self) -> bool:
        """Whether the request lacks the fake's key (it is then answered 401, its body unread by the fake)."""
        key = self.server.fake.key
        given = self.headers.get("api-key") or self.headers.get("Authorization", "").removeprefix("Bearer ")
        if key is None or given == key:
            return False
        self._send(_error(401, "Incorrect API key provided."))
        return True

    def _send(self, answer: _Answer) -> None:
        if answer.payload is HANG:
            self._wait_for_hangup()
            return
        if answer.stream and answer.status == 200:
            self._stream(answer)
            return
        data = answer.payload if isinstance(answer.payload, bytes) else json.dumps(answer.payload).encode()
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if answer.drip_s:
                self._drip(data, answer.drip_s)
            else:
                self.wfile.write(data)
        except ConnectionError:   # the client gave up (its timeout): nothing to answer
            self.close_connection = True

    def _stream(self, answer: _Answer) -> None:
        """Server-sent events, in HTTP/1.1 chunks; an endless stream goes on, a piece every ENDLESS_PIECE_S, until the
        client hangs up (at most HANG_LIMIT_S), and stops then."""
        if isinstance(answer.payload, bytes):   # a malformed answer: one event that is not JSON
            events: Iterator[Any] = iter([answer.payload.decode()])
        else:
            events = endless_events(answer.payload["model"]) if answer.endless else stream_events(answer.payload)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            ends = time.monotonic() + HANG_LIMIT_S
            for event in events:
                self._chunk(f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode(),
                            answer.drip_s)
                if answer.endless:
                    if self._client_left():
                        raise ConnectionResetError("the client hung up")
                    if time.monotonic() > ends:   # nobody hung up within the limit: end it, as a test's bound
                        break
                    time.sleep(ENDLESS_PIECE_S)
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
        except ConnectionError:   # the client hung up: stop producing, as a server that stops abandoned streams does
            self.close_connection = True
            if answer.endless:
                fake = self.server.fake
                with fake._lock:
                    fake.hangups += 1
                    fake.stopped += 1
                fake.hung_up.set()

    def _chunk(self, data: bytes, drip_s: float = 0.0) -> None:
        framed = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        if drip_s:
            self._drip(framed, drip_s)
        else:
            self.wfile.write(framed)
        self.wfile.flush()

    def _client_left(self) -> bool:
        """Whether the client closed its end (a read would find the end of the stream)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _wait_for_hangup(self) -> None:
        """Answer nothing until the client closes the connection (at most HANG_LIMIT_S), and note that it did."""
        self.close_connection = True
        self.connection.settimeout(HANG_LIMIT_S)
        try:
            closed = self.connection.recv(1) == b""
        except OSError:   # the limit passed, or the connection was reset
            closed = False
        if closed:
            fake = self.server.fake
            with fake._lock:
                fake.hangups += 1
            fake.hung_up.set()

    def _drip(self, data: bytes, interval: float) -> None:
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            time.sleep(interval)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: requests and headers may carry keys."""
