"""The one way lobeval talks to a model: configuration, retries, cache, usage and budget, and
validated answers (`LLMClient.ask_json`; `LLMClient.ask` for an answer produced another way).

Configuration comes from the environment (SPEC §6). The API key is read only when the SDK
client is built; it is never held in a config, a cache key, a log line or an exception.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import diskcache
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from lobeval.errors import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")

ROLES = ("user", "target", "judge", "embedding")
RETRY_STATUSES = {408, 409, 429}
MAX_RETRY_AFTER_S = 60.0

# USD per 1M tokens, public list prices (2025); extend or override with the JSON file in LOBEVAL_PRICES.
PRICES: dict[str, dict[str, float]] = {
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "gpt-5": {"input": 1.25, "output": 10.00},
    "gpt-5-mini": {"input": 0.25, "output": 2.00},
    "o4-mini": {"input": 1.10, "output": 4.40},
    "text-embedding-3-small": {"input": 0.02, "output": 0.0},
    "text-embedding-3-large": {"input": 0.13, "output": 0.0},
}


class LLMError(Exception):
    """The model endpoint gave up (after retries) or kept answering unusably: a machinery failure, not a score."""


class BudgetExceeded(LLMError):
    """The shared budget is spent, so no new model call is started."""


class ReplyError(LLMError):
    """The model answered every attempt, never usably: what was wrong with the last reply, and its raw text."""

    def __init__(self, problem: str, raw: str | None, attempts: int):
        super().__init__(f"the model's reply was unusable after {attempts} attempts: {problem}")
        self.problem, self.raw, self.attempts = problem, raw, attempts


class _Unusable(Exception):
    """A 200 response that cannot be used (no choices, empty reply, missing embeddings)."""


@dataclass(frozen=True)
class ModelConfig:
    """Where a model lives. Holds no key: the key is read from the environment by `build_client`."""

    provider: Literal["openai", "azure"]
    model: str                       # model name, or the Azure deployment
    base_url: str | None = None      # for azure: the endpoint
    api_version: str | None = None   # azure only

    def describe(self) -> dict[str, Any]:
        """A dict safe to write into runs/."""
        return asdict(self)


def resolve_model(role: str, env: Mapping[str, str] = os.environ) -> ModelConfig | None:
    """The model for a role from the environment (SPEC §6); None when no model is named (offline)."""
    if role not in ROLES:
        raise ConfigError(f"unknown model role {role!r}; choose one of {', '.join(ROLES)}")
    model = env.get(f"LOBEVAL_{role.upper()}_MODEL") or (None if role == "embedding" else env.get("LOBEVAL_MODEL"))
    if not model:
        return None
    if env.get("AZURE_OPENAI_ENDPOINT"):
        missing = [v for v in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION") if not env.get(v)]
        if missing:
            raise ConfigError(f"AZURE_OPENAI_ENDPOINT is set but not {' and '.join(missing)}: set "
                              f"{'them' if len(missing) > 1 else 'it'} too, or unset AZURE_OPENAI_ENDPOINT")
        return ModelConfig("azure", model, env["AZURE_OPENAI_ENDPOINT"], env["AZURE_OPENAI_API_VERSION"])
    if env.get("OPENAI_API_KEY"):
        return ModelConfig("openai", model, env.get("OPENAI_BASE_URL") or None)
    raise ConfigError(f"a model is named for role {role!r} ({model!r}) but no credentials are set: set "
                      f"OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server), or AZURE_OPENAI_ENDPOINT, "
                      f"AZURE_OPENAI_API_KEY and AZURE_OPENAI_API_VERSION")


def _key_variable(config: ModelConfig) -> str:
    return "AZURE_OPENAI_API_KEY" if config.provider == "azure" else "OPENAI_API_KEY"


def api_key(config: ModelConfig, env: Mapping[str, str] = os.environ) -> str:
    """The key, read from the environment only when a client is built."""
    key = env.get(_key_variable(config))
    if not key:
        raise ConfigError(f"{_key_variable(config)} is not set")
    return key


def scrub_key(config: ModelConfig, text: str) -> str:
    """Server and SDK messages may quote the key (e.g. on a 401): remove it and anything key-shaped."""
    key = os.environ.get(_key_variable(config))
    if key:
        text = text.replace(key, "***")
    return re.sub(r"sk-[\w*-]{6,}", "sk-***", text)


def build_client(config: ModelConfig, env: Mapping[str, str] = os.environ) -> openai.AsyncOpenAI:
    """The SDK client, without its own retries (LLMClient retries). Reads the key from `env`."""
    key = api_key(config, env)
    # aiohttp, the SDK's documented choice for concurrency: it halved the client's CPU per call in
    # `lobeval bench simulate` against httpx's connection pool.
    common = {"api_key": key, "max_retries": 0, "http_client": openai.DefaultAioHttpClient()}
    if config.provider == "azure":
        return openai.AsyncAzureOpenAI(azure_endpoint=config.base_url, api_version=config.api_version, **common)
    return openai.AsyncOpenAI(base_url=config.base_url, **common)


def load_prices(env: Mapping[str, str] = os.environ) -> dict[str, dict[str, float]]:
    """PRICES, updated from the JSON file named in LOBEVAL_PRICES ({"model": {"input": x, "output": y}})."""
    path = env.get("LOBEVAL_PRICES")
    if not path:
        return dict(PRICES)
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
        extra = {model: {"input": float(p["input"]), "output": float(p["output"])} for model, p in table.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"LOBEVAL_PRICES={path}: expected a JSON file like "
                          f'{{"model": {{"input": 0.15, "output": 0.6}}}} ({type(exc).__name__}: {exc})') from None
    return {**PRICES, **extra}


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    return Path(env.get("LOBEVAL_CACHE_DIR") or Path.home() / ".cache" / "lobeval" / "llm")


@dataclass
class Usage:
    """What one role used. `calls` includes cached calls; tokens and cost count only calls actually sent."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True   # False once a call was made to a model missing from the price table

    def add(self, *, prompt_tokens: int = 0, completion_tokens: int = 0, cost_usd: float = 0.0,
            cached: bool = False, cost_known: bool = True) -> None:
        self.calls += 1
        if cached:
            self.cached_calls += 1
            return
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cost_usd += cost_usd
        self.cost_known = self.cost_known and cost_known

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.calls + other.calls, self.cached_calls + other.cached_calls,
                     self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.cost_usd + other.cost_usd, self.cost_known and other.cost_known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Budget:
    """A spending limit shared by clients: once spent reaches it, no new call starts (calls in flight finish)."""

    def __init__(self, limit_usd: float):
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Budget | None:
        """The budget in LOBEVAL_BUDGET_USD, or None (unlimited)."""
        value = env.get("LOBEVAL_BUDGET_USD")
        if not value:
            return None
        try:
            return cls(float(value))
        except ValueError:
            raise ConfigError(f"LOBEVAL_BUDGET_USD={value!r} is not an amount of US dollars") from None

    def charge(self, cost_usd: float) -> None:
        with self._lock:
            self.spent_usd += cost_usd

    def check(self) -> None:
        if self.spent_usd >= self.limit_usd:
            raise BudgetExceeded(f"budget of ${self.limit_usd:.2f} spent (${self.spent_usd:.4f}): "
                                 f"no new model calls are started")


@dataclass
class ChatResult:
    """One assistant message in OpenAI chat shape ("tool_calls" only when the model called tools)."""

    message: dict[str, Any]
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class LLMClient:
    """Calls one model for one role: bounded concurrency, retries, persistent cache, usage and budget."""

    def __init__(self, config: ModelConfig, *, role: str, cache: bool, budget: Budget | None = None,
                 concurrency: int = 8, timeout: float = 60.0, max_attempts: int = 5, usage: Usage | None = None,
                 backoff: tuple[float, float] = (1.0, 30.0)):
        self.config, self.role, self.budget = config, role, budget
        self.concurrency, self.timeout, self.max_attempts = concurrency, timeout, max_attempts
        self.usage = usage if usage is not None else Usage()
        self._wait_backoff = wait_exponential_jitter(multiplier=backoff[0], max=backoff[1], jitter=backoff[0])
        self._sleep = asyncio.sleep   # between retries; a test records the waits instead
        self._cache = diskcache.Cache(str(cache_dir())) if cache else None
        self._price = load_prices().get(config.model)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncIterator[None] | None = None

    async def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                   response_format: dict[str, Any] | None = None, temperature: float | None = 0.0,
                   **params: Any) -> ChatResult:
        """One assistant reply. `temperature=None` leaves it out (reasoning models accept only their default)."""
        options = {"tools": tools, "response_format": response_format, "temperature": temperature}
        request = {"messages": messages, **{k: v for k, v in options.items() if v is not None}, **params}
        stored, cached, cost = await self._call("chat", request)
        return ChatResult(stored["message"], cached, stored["prompt_tokens"], stored["completion_tokens"], cost)

    async def ask_json(self, messages: list[dict[str, Any]], parse: Callable[[str], T], *, attempts: int = 2,
                       usage: Sequence[Usage] = ()) -> T:
        """The model's JSON-mode reply as `parse` reads it; a ValueError from `parse` makes the reply
        unusable and the next attempt asks again with another seed. See `ask`."""
        request = {"messages": messages, "response_format": {"type": "json_object"}, "temperature": 0.0}

        async def answer(seed: int) -> dict[str, Any]:
            stored = await self._with_retries(lambda sdk: self._send_chat(sdk, {**request, "seed": seed}))
            return {"content": stored["message"].get("content") or "", "prompt_tokens": stored["prompt_tokens"],
                    "completion_tokens": stored["completion_tokens"]}

        return await self.ask({"kind": "json", **request}, answer, parse, attempts=attempts, usage=usage)

    async def ask(self, request: dict[str, Any], answer: Callable[[int], Awaitable[dict[str, Any]]],
                  parse: Callable[[str], T], *, attempts: int = 2, usage: Sequence[Usage] = ()) -> T:
        """The one path for an answer that must be validated: `parse(content)` of attempt 0, 1, ... until one
        parses; ReplyError (with the last raw content) when none did, LLMError when the endpoint gave up.

        `request` names the question in the cache (with this client's model and the attempt number);
        `answer(attempt)` produces {"content", "prompt_tokens", "completion_tokens"} when the cache has
        none, or raises ValueError when it got nothing to parse. Only an answer that parsed is cached, so
        a rerun asks again where a reply was unusable. Every attempt is counted on this client's usage
        and on each of `usage`, cached ones as cached calls; sent ones are charged to the budget."""
        problem, raw = "", None
        for attempt in range(attempts):
            key = self._key({**request, "attempt": attempt})
            stored = self._recall(key)
            fresh = stored is None
            if fresh:
                self._check_budget()
                try:
                    stored = await answer(attempt)
                except ValueError as exc:
                    problem, raw = str(exc), None
                    continue
            self._count(stored if fresh else None, usage)
            try:
                value = parse(stored["content"])
            except ValueError as exc:
                problem, raw = str(exc), stored["content"]
                continue
            if fresh:
                self._remember(key, stored)
            return value
        raise ReplyError(problem, raw, attempts)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if not texts:
            return []
        stored, _, _ = await self._call("embeddings", {"input": list(texts)})
        return stored["vectors"]

    async def _call(self, kind: str, request: dict[str, Any]) -> tuple[dict[str, Any], bool, float]:
        key = self._key({"kind": kind, **request})
        stored = self._recall(key)
        if stored is not None:
            self._count(None)
            return stored, True, 0.0
        self._check_budget()
        send = self._send_chat if kind == "chat" else self._send_embeddings
        stored = await self._with_retries(lambda sdk: send(sdk, request))
        cost = self._count(stored)
        self._remember(key, stored)
        return stored, False, cost

    def _key(self, request: dict[str, Any]) -> str:
        return request_key({**self.config.describe(), **request})

    def _recall(self, key: str) -> dict[str, Any] | None:
        return self._cache.get(key) if self._cache is not None else None

    def _remember(self, key: str, stored: dict[str, Any]) -> None:
        if self._cache is not None:
            self._cache.set(key, stored)

    def _check_budget(self) -> None:
        if self.budget is not None:
            self.budget.check()

    def _count(self, sent: dict[str, Any] | None, usage: Sequence[Usage] = ()) -> float:
        """Counts one call on this client's usage and on each of `usage`: a cached one (`sent` None) costs
        nothing; a sent one's tokens are priced and charged to the budget. Returns the cost."""
        if sent is None:
            for into in (self.usage, *usage):
                into.add(cached=True)
            return 0.0
        cost = self._cost(sent["prompt_tokens"], sent["completion_tokens"])
        for into in (self.usage, *usage):
            into.add(prompt_tokens=sent["prompt_tokens"], completion_tokens=sent["completion_tokens"], cost_usd=cost,
                     cost_known=self._price is not None)
        if self.budget is not None:
            self.budget.charge(cost)
        return cost

    async def _send_chat(self, sdk: openai.AsyncOpenAI, request: dict[str, Any]) -> dict[str, Any]:
        completion = await self._post(sdk, "/chat/completions", request)
        return {"message": _assistant_message(completion), **_tokens(completion)}

    async def _send_embeddings(self, sdk: openai.AsyncOpenAI, request: dict[str, Any]) -> dict[str, Any]:
        response = await self._post(sdk, "/embeddings", {**request, "encoding_format": "float"})
        try:
            data = sorted(response.get("data") or [], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _Unusable(f"the embeddings response is malformed ({type(exc).__name__}: {exc})") from None
        if len(vectors) != len(request["input"]):
            raise _Unusable(f"{len(vectors)} embeddings for {len(request['input'])} texts")
        return {"vectors": vectors, **_tokens(response)}

    async def _post(self, sdk: openai.AsyncOpenAI, path: str, body: dict[str, Any]) -> Any:
        """The SDK's raw `post`, answering the JSON as it came. The typed `create` methods would walk every
        message and tool schema against TypedDicts, then build pydantic objects of the reply: most of the
        client's CPU in `lobeval bench simulate`, for requests that are plain JSON already."""
        return await sdk.post(path, cast_to=object, body={"model": self.config.model, **body},
                              options={"timeout": self.timeout})

    async def _with_retries(self, send: Callable[[openai.AsyncOpenAI], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        sdk, semaphore = await self._bound()
        attempts = 0

        async def attempt() -> dict[str, Any]:
            nonlocal attempts
            attempts += 1
            async with semaphore:
                return await send(sdk)

        retrying = AsyncRetrying(stop=stop_after_attempt(self.max_attempts), wait=self._wait, sleep=self._sleep,
                                 retry=retry_if_exception(_retryable), before_sleep=self._log_retry, reraise=True)
        try:
            return await retrying(attempt)
        except (openai.OpenAIError, _Unusable, ValueError) as exc:
            cause = scrub_key(self.config, _describe(exc, self.timeout))
            verdict = f"gave up after {attempts} attempts" if _retryable(exc) else f"not retried (attempt {attempts})"
            raise LLMError(f"model {self.config.model!r} (role {self.role}): {verdict}; last error: {cause}") from None

    async def _bound(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """The SDK client and semaphore of the running loop: both are tied to one event loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            sdk = build_client(self.config)
            self._loop, self._sdk, self._semaphore = loop, sdk, asyncio.Semaphore(self.concurrency)
            self._closer = _closed_with_loop(sdk)
            await anext(self._closer)
        return self._sdk, self._semaphore

    def _wait(self, state: RetryCallState) -> float:
        return max(self._wait_backoff(state), _retry_after(state.outcome.exception()))

    def _log_retry(self, state: RetryCallState) -> None:
        log.info("model %s (role %s): retrying in %.1f s after %s", self.config.model, self.role,
                 state.upcoming_sleep, scrub_key(self.config, _describe(state.outcome.exception(), self.timeout)))

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        if self._price is None:
            return 0.0
        return (prompt_tokens * self._price["input"] + completion_tokens * self._price["output"]) / 1e6


async def _closed_with_loop(sdk: openai.AsyncOpenAI) -> AsyncIterator[None]:
    """Closes `sdk` when its event loop shuts down: asyncio.run closes every suspended async generator
    before closing the loop (and one dropped earlier is closed on its loop), so no caller has to."""
    try:
        yield
    finally:
        await sdk.close()


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _assistant_message(completion: Any) -> dict[str, Any]:
    """The first choice's message of a chat completion's JSON, in the shape we store."""
    try:
        message = completion["choices"][0]["message"]
        content = message.get("content")
        calls = [{"id": call["id"], "type": "function",
                  "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}}
                 for call in message.get("tool_calls") or []]
    except (IndexError, KeyError, TypeError, AttributeError) as exc:
        raise _Unusable(f"the completion is malformed ({type(exc).__name__}: {exc})") from None
    if not content and not calls:
        raise _Unusable("an empty reply (no content, no tool calls)")
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


def _tokens(response: Any) -> dict[str, int]:
    usage = response.get("usage") if isinstance(response, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return {"prompt_tokens": usage.get("prompt_tokens") or 0, "completion_tokens": usage.get("completion_tokens") or 0}


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    # ValueError: the SDK could not decode the body as JSON.
    return isinstance(exc, (openai.APIConnectionError, openai.APIResponseValidationError, _Unusable, ValueError))


def _retry_after(exc: BaseException | None) -> float:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), capped; 0 if it did not say."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(float(headers[name]) * scale, MAX_RETRY_AFTER_S)
        except (KeyError, ValueError):
            continue
    return 0.0


def _describe(exc: BaseException | None, timeout: float) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        return f"HTTP {exc.status_code}: {body.get('message') or exc.message}"
    if isinstance(exc, openai.APITimeoutError):
        return f"timed out after {timeout} s"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {exc.__cause__ or exc}"
    if isinstance(exc, _Unusable):
        return f"unusable response: {exc}"
    if isinstance(exc, ValueError):
        return f"unusable response: the body is not valid JSON ({exc})"
    return f"{type(exc).__name__}: {exc}"


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`, which may be wrapped in ```json fences or prose."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError(f"no JSON object in the model's reply: {text[:200]!r}")


def run_sync(coroutine: Awaitable[Any]) -> Any:
    """Run a coroutine to completion from synchronous code, also inside a notebook cell, where an
    event loop is already running (asyncio.run refuses that): there it runs on a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
