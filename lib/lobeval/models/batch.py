"""The judges' requests through the provider's Batch API (`--batch`): a file of requests, one batch, polled
with a progress bar, at the batch discount (OpenAI and Azure OpenAI: half the price of input and output).

The judges are first run with a client that only collects the requests they would send (`collect`); those go
in one batch (`answer_in_batch`), whose id is written to the run's batches.json before the first poll, so a run
killed while it waits polls the same batch again instead of submitting another. The judges then run once more
and find their answers there (LLMClient.batch_answers). A request the batch did not answer (it failed or
expired) is a judge error, a machinery failure of the conversation it belongs to, never a score; a reply that
cannot be used is asked again live, as any unusable reply is.
"""
from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import secrets
import threading
import time
import weakref
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import openai
from tqdm.auto import tqdm

from lobeval.core.errors import ConfigError
from lobeval.models.llm import (BATCH_DISCOUNT, LLMClient, ModelConfig, Usage, build_client, resolve_limits, run_sync,
                         scrub_key, worst_case_usd)
from lobeval.core.records import read_json, write_json

BATCH_FILE = "batches.json"
WINDOW = "24h"
MAX_WAIT_S = 25 * 3600   # the provider ends a batch at its 24 h window; a little more, then lobeval stops waiting
DONE = ("completed", "failed", "expired", "cancelled")


def poll_seconds() -> float:
    """How long to wait between looks at a batch: LOBEVAL_BATCH_POLL_S, 30 s by default."""
    text = os.environ.get("LOBEVAL_BATCH_POLL_S", "30")
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise ConfigError(f"LOBEVAL_BATCH_POLL_S={text!r}: expected seconds from 0 to 3600")
    return seconds


def check_batch_api(config: ModelConfig) -> None:
    """Refuse --batch before anything runs (ConfigError, exit 2) when the judge model's endpoint has no Batch API,
    as local servers (llama.cpp, Ollama, vLLM) have none, or cannot be reached: one look at its list of batches."""
    where = config.base_url or "OpenAI"

    async def look() -> None:
        sdk = build_client(config)
        try:
            async with asyncio.timeout(resolve_limits("judge").timeout_s):
                await sdk.batches.list(limit=1)
        finally:
            await sdk.close()

    try:
        run_sync(look())
    except openai.APIStatusError as exc:
        if exc.status_code in (404, 405, 501):
            raise ConfigError(f"--batch: the judge model's endpoint ({where}) has no Batch API (GET /batches answered "
                              f"HTTP {exc.status_code}): run without --batch") from None
        raise ConfigError(f"--batch: the judge model's endpoint ({where}) refused to list batches: "
                          f"{scrub_key(config, f'HTTP {exc.status_code}: {exc.message}')}") from None
    except (openai.APIConnectionError, TimeoutError) as exc:
        raise ConfigError(f"--batch: cannot reach the judge model's endpoint ({where}) to check its Batch API "
                          f"({type(exc).__name__}): start it, or run without --batch") from None


def collect(judges: Any, work: list[tuple[dict, dict]]) -> dict[str, dict[str, Any]]:
    """The requests (by custom id) the conversation judges and Azure evaluators would send for `work` and have no
    cached answer for, found by running them on a copy of their client that sends nothing (the evaluators' requests
    reach it through the `Relay`)."""
    client = copy.copy(judges.client)
    client.usage, client.collecting, client.batch_answers = Usage(), {}, None
    collector = type(judges)(client, judges.selection, judges.tools, batch=True)

    async def everything() -> None:
        await asyncio.gather(*(collector.judge(conversation, case) for conversation, case in work))

    run_sync(everything())
    return client.collecting


def answer_in_batch(client: LLMClient, requests: dict[str, dict[str, Any]], state: Path, *,
                    progress: bool = True) -> dict[str, dict[str, Any]]:
    """Each request's answer {"content", "prompt_tokens", "completion_tokens", "cached_tokens"} or {"error"}, from
    one batch: the one `state` records for these requests, else a new one (recorded before it is polled). The
    budget holds the batch's worst case until its answers are in."""
    if not requests:
        return {}
    digest = hashlib.sha256("\n".join(sorted(requests)).encode()).hexdigest()[:16]
    recorded = _read_state(state)
    held = sum(worst_case_usd(body, client._price) for body in requests.values()) * BATCH_DISCOUNT \
        if client.budget is not None and client._price is not None else 0.0
    if held:
        client.budget.reserve(held)
    spent = 0.0
    try:
        answers, spent = run_sync(_answers(client, requests, digest, recorded, state, progress))
    finally:
        if held:
            client.budget.settle(held, spent, role=client.role)
    return answers


async def _answers(client: LLMClient, requests: dict[str, dict[str, Any]], digest: str, recorded: dict[str, Any],
                   state: Path, progress: bool) -> tuple[dict[str, dict[str, Any]], float]:
    sdk, _ = await client._bound()
    batch_id = recorded.get(digest, {}).get("batch_id")
    if batch_id is None:
        url = "/chat/completions" if client.config.provider == "azure" else "/v1/chat/completions"
        lines = "\n".join(json.dumps({"custom_id": custom, "method": "POST", "url": url,
                                      "body": {"model": client.config.model, **body}})
                          for custom, body in requests.items())
        uploaded = await sdk.files.create(file=("lobeval-judges.jsonl", lines.encode()), purpose="batch")
        batch = await sdk.batches.create(input_file_id=uploaded.id, endpoint=url, completion_window=WINDOW)
        batch_id = batch.id
        recorded[digest] = {"batch_id": batch_id, "requests": len(requests), "submitted": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        write_json(state, recorded)
    batch = await _wait(sdk, batch_id, len(requests), progress)
    recorded[digest] = {**recorded[digest], "status": batch.status}
    write_json(state, recorded)
    answers = {item["custom_id"]: _answer(item) for item in await _items(sdk, batch.output_file_id)}
    for item in await _items(sdk, batch.error_file_id):
        answers.setdefault(item["custom_id"], {"error": f"batch {batch_id}: {_problem(item)}"})
    reason = f"batch {batch_id} {batch.status}" + (f": {batch.errors.data[0].message}" if getattr(batch, "errors", None)
                                                    and batch.errors.data else "")
    for custom in requests:
        answers.setdefault(custom, {"error": f"{reason}; this request got no answer"})
    spent = sum(client.batch_cost(found) or 0.0 for found in answers.values() if "error" not in found)
    return answers, spent


async def _items(sdk: Any, file_id: str | None) -> list[dict[str, Any]]:
    """The lines of a batch's output or error file (none when the batch has no such file)."""
    if not file_id:
        return []
    return [json.loads(line) for line in (await sdk.files.content(file_id)).text.splitlines() if line.strip()]


async def _wait(sdk: Any, batch_id: str, total: int, progress: bool) -> Any:
    """The batch once it is done, polled every poll_seconds() with a progress bar, for at most MAX_WAIT_S."""
    interval, started = poll_seconds(), time.monotonic()
    with tqdm(total=total, desc=f"batch {batch_id}", unit="req", disable=not progress) as bar:
        while True:
            batch = await sdk.batches.retrieve(batch_id)
            counts = batch.request_counts
            if counts is not None:
                bar.update(max(0, counts.completed + counts.failed - bar.n))
            if batch.status in DONE or time.monotonic() - started > MAX_WAIT_S:
                return batch
            await asyncio.sleep(interval)


def _answer(item: dict[str, Any]) -> dict[str, Any]:
    response = item.get("response") or {}
    body = response.get("body") or {}
    if item.get("error") or response.get("status_code") != 200:
        return {"error": f"the batch could not answer this request: {_problem(item)}"}
    usage = body.get("usage") or {}
    message = ((body.get("choices") or [{}])[0]).get("message") or {}
    return {"content": message.get("content") or "", "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)}


def _problem(item: dict[str, Any]) -> str:
    error = item.get("error") or ((item.get("response") or {}).get("body") or {}).get("error") or {}
    return str(error.get("message") if isinstance(error, dict) else error)[:300] or "no reason given"


def _read_state(path: Path) -> dict[str, Any]:
    return read_json(path) if path.exists() else {}


# --- azure-ai-evaluation's evaluators through the batch ------------------------------------------------------

COLLECTED, UNANSWERED, MISSING = "lobeval_collected", "lobeval_batch_unanswered", "lobeval_not_in_batch"
"""The relay's error codes: a request noted for the batch (collecting), one the batch did not answer, one it never
held (the evaluator asked something it did not ask while collecting)."""


class Relay:
    """A local OpenAI-compatible endpoint (one per process, on 127.0.0.1) that azure-ai-evaluation's evaluators are
    pointed at under --batch: the evaluators send their own requests, so this is where lobeval can note them for the
    batch and answer them from it. Each judge client gets its own path (`url`); a request is keyed as the client keys
    its own batched requests (LLMClient.batch_key), so one batch holds both and `collect` finds both."""

    _lock = threading.Lock()
    _server: ClassVar[ThreadingHTTPServer | None] = None
    _clients: ClassVar[weakref.WeakValueDictionary[str, LLMClient]] = weakref.WeakValueDictionary()

    @classmethod
    def url(cls, client: LLMClient) -> str:
        """The base URL under which the relay answers for `client` (its collecting or its batch's answers)."""
        with cls._lock:
            if cls._server is None:
                cls._server = ThreadingHTTPServer(("127.0.0.1", 0), _RelayHandler)
                cls._server.daemon_threads = True
                threading.Thread(target=cls._server.serve_forever, name="lobeval-relay", daemon=True).start()
            token = next((token for token, known in cls._clients.items() if known is client), None)
            if token is None:
                token = secrets.token_hex(8)
                cls._clients[token] = client
            return f"http://127.0.0.1:{cls._server.server_address[1]}/{token}/v1"

    @classmethod
    def answer(cls, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        client = cls._clients.get(token)
        if client is None:
            return 404, _relay_error("no such judge client", MISSING)
        body = {key: value for key, value in body.items() if key not in ("model", "stream")}
        custom = client.batch_key(body)
        if client.collecting is not None:
            client.collecting[custom] = body
            return 400, _relay_error("noted for the batch", COLLECTED)
        found = (client.batch_answers or {}).get(custom)
        if found is None:
            return 400, _relay_error("the batch holds no such request", MISSING)
        if "error" in found:
            return 400, _relay_error(found["error"], UNANSWERED)
        return 200, {"id": f"chatcmpl-{custom[:16]}", "object": "chat.completion", "created": int(time.time()),
                     "model": client.config.model,
                     "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                  "message": {"role": "assistant", "content": found["content"]}}],
                     "usage": {"prompt_tokens": found["prompt_tokens"], "completion_tokens": found["completion_tokens"],
                               "total_tokens": found["prompt_tokens"] + found["completion_tokens"],
                               "prompt_tokens_details": {"cached_tokens": found.get("cached_tokens", 0)}}}


def relay_code(exc: BaseException) -> tuple[str, str] | None:
    """(code, message) of the relay's error behind an evaluator's exception; None for any other failure."""
    seen: BaseException | None = exc
    for _ in range(8):   # the SDK wraps the model client's error in one or two of its own
        if seen is None:
            return None
        body = getattr(seen, "body", None)
        error = body.get("error", body) if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("code") in (COLLECTED, UNANSWERED, MISSING):
            return error["code"], str(error.get("message"))
        seen = seen.__cause__ or seen.__context__
    return None


def _relay_error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


class _RelayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = self.path.strip("/").split("/")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if len(parts) < 3 or parts[1:] != ["v1", "chat", "completions"] or not isinstance(body, dict):
            status, payload = 404, _relay_error(f"the relay answers chat completions only, not {self.path}", MISSING)
        else:
            status, payload = Relay.answer(parts[0], body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""
