"""The one way lobeval talks to a model: configuration, retries, cache, usage and budget, and
validated answers (`LLMClient.ask_json`; `LLMClient.ask` for an answer produced another way).

Configuration comes from the environment (docs/models.md). The API key is read only when the SDK
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
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import diskcache
import filelock
import psutil
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from lobeval.core.errors import ConfigError, RecordError
from lobeval.workspace.runs import MIN_SECRET_LENGTH
from lobeval.core.tokens import count, prompt_tokens, reply_tokens

if TYPE_CHECKING:
    import openai   # imported where a model is called: a run with no model configured never loads the SDK

log = logging.getLogger(__name__)
T = TypeVar("T")

ROLES = ("user", "target", "judge", "embedding")
RETRY_STATUSES = {408, 409, 429}
MAX_RETRY_AFTER_S = 60.0
# Per request: below a target's 60 s deadline, so a bot's own model call can be retried within it.
DEFAULT_TIMEOUT_S = 20.0
DEADLINE_PER_TIMEOUT = 2.5   # a call's deadline, retries included: 50 s for a request timeout of 20 s
COMPLETION_CAP = 4096   # completion tokens reserved for a request that sets no max_tokens
MAX_TOKENS = {"user": 512, "target": 1024, "judge": COMPLETION_CAP}
"""Each role's completion cap by default: a user turn is a few sentences, the bot's turn a message or a few tool
calls, a judge's answer a JSON object with a reason per low score (the root causes ask the judge model too)."""
LEDGER_SCHEMA_VERSION = 1
REPLY_ATTEMPTS = 3
"""How many times a chat request is asked when its replies are unusable (empty, or a completion of the wrong shape)."""
RETRY_TEMPERATURE = 0.7
"""The least temperature of a request asked again after an unusable reply: at temperature 0 a server answers the same
request the same way, whatever the seed (llama-cpp-python's does)."""
NUDGE = "(Your last reply could not be used: {problem}. Answer again.)"
"""What a request asked again after an unusable reply tells the model, as a user message at its end."""
STREAM_MODES = ("auto", "on", "off")
TOOL_MODES = ("native", "prompted")
PROMPTED_TOOLS = """\
# Functions

You can call these functions. Each is given with what it does and its parameters as a JSON Schema.

{functions}

Answer in ONE of two ways:
- in words, to the user; or
- to call functions, with only this JSON object and nothing else:
{{"tool_calls": [{{"name": "<function name>", "arguments": {{<its parameters and their values>}}}}]}}
Each call's result then comes back to you in a message that begins "Result of"."""
"""The end of the system message of a request whose tools are described rather than offered (LOBEVAL_TOOLS=prompted)."""
PROMPTED_RESULT = "Result of {name} (call {id}): {content}"
JSON_TYPES = {str: "a string", list: "a list", int: "a number", float: "a number", bool: "true or false",
              type(None): "null", dict: "an object"}

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
    """The model endpoint gave up (after retries) or kept answering unusably: a machinery failure, not a score.
    `usage` is what the call used all the same, its failed attempts included (set by LLMClient)."""

    usage: Usage | None = None


class BudgetExceeded(LLMError):
    """The budget cannot cover a new model request, so it is not sent."""


BATCH_DISCOUNT = 0.5
"""The Batch API's price against a request sent alone (OpenAI and Azure OpenAI: half, input and output)."""


class Deferred(LLMError):
    """The request was noted for a batch (lobeval.models.batch) rather than sent."""


class ReplyError(LLMError):
    """The model answered every attempt, never usably: what was wrong with the last reply, and its raw text."""

    def __init__(self, problem: str, raw: str | None, attempts: int):
        super().__init__(f"the model's reply was unusable after {attempts} attempts: {problem}")
        self.problem, self.raw, self.attempts = problem, raw, attempts


class _Unusable(Exception):
    """A 200 response that cannot be used (no choices, empty reply, missing embeddings); `tokens` are
    those the server reported for it (else lobeval's estimate), paid for all the same. Not retried as it was: a
    server answers the same request the same way (LLMClient asks again only with a change, see `retried`)."""

    tokens: Mapping[str, int] = {}


class _TimedOut(Exception):
    """A request that did not finish within its time, its answer's body included."""


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


def named_model(role: str, env: Mapping[str, str] = os.environ) -> str | None:
    """The model the environment names for a role (LOBEVAL_<ROLE>_MODEL, else LOBEVAL_MODEL but for embeddings), None
    when none is named; whether it can be reached is `resolve_model`'s question (the estimate, which sends nothing,
    needs only the name)."""
    if role not in ROLES:
        raise ConfigError(f"unknown model role {role!r}; choose one of {', '.join(ROLES)}")
    named = env.get(f"LOBEVAL_{role.upper()}_MODEL") or (None if role == "embedding" else env.get("LOBEVAL_MODEL"))
    return named or None


def resolve_model(role: str, env: Mapping[str, str] = os.environ) -> ModelConfig | None:
    """The model for a role from the environment (docs/models.md); None when no model is named (offline)."""
    model = named_model(role, env)
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


@dataclass(frozen=True)
class Limits:
    """How long one request of a role may take (its answer's body included), and how many tokens its answer may
    have (None: no cap, as for embeddings)."""

    timeout_s: float
    max_tokens: int | None

    @property
    def deadline_s(self) -> float:
        """How long one call may take, its retries and the backoff between them included."""
        return self.timeout_s * DEADLINE_PER_TIMEOUT


def resolve_limits(role: str, env: Mapping[str, str] = os.environ) -> Limits:
    """A role's request timeout and completion cap: LOBEVAL_<ROLE>_TIMEOUT_S, else LOBEVAL_TIMEOUT_S, else 20 s;
    LOBEVAL_<ROLE>_MAX_TOKENS, else LOBEVAL_MAX_TOKENS, else the role's default (MAX_TOKENS)."""
    timeout = _setting(env, role, "TIMEOUT_S", float, DEFAULT_TIMEOUT_S, "a number of seconds > 0")
    if role == "embedding":
        return Limits(timeout, None)
    return Limits(timeout, _setting(env, role, "MAX_TOKENS", int, MAX_TOKENS[role], "a whole number of tokens > 0"))


def _setting(env: Mapping[str, str], role: str, name: str, kind: Callable[[str], T], default: T, expected: str) -> T:
    for variable in (f"LOBEVAL_{role.upper()}_{name}", f"LOBEVAL_{name}"):
        text = env.get(variable)
        if not text:
            continue
        try:
            value = kind(text)
            if not value > 0:   # also NaN
                raise ValueError(text)
        except ValueError:
            raise ConfigError(f"{variable}={text!r}: expected {expected}") from None
        return value
    return default


def cap_field(config: ModelConfig) -> str:
    """The request field of the completion cap: `max_tokens` for a compatible server (OPENAI_BASE_URL), which is the
    field llama.cpp, Ollama and vLLM read; `max_completion_tokens` for OpenAI and Azure OpenAI, where reasoning
    models refuse `max_tokens`."""
    return "max_tokens" if config.provider == "openai" and config.base_url else "max_completion_tokens"


def resolve_stream(config: ModelConfig, env: Mapping[str, str] = os.environ) -> Literal["all", "untooled", "none"]:
    """Which chat requests are streamed, from LOBEVAL_STREAM: "on" every one, "off" none; "auto" (the default) those
    without tools to a compatible server (OPENAI_BASE_URL). A streamed request lobeval hangs up on is stopped by the
    servers that keep generating a non-streamed one (llama-cpp-python); its tool calls are not streamed by default,
    because llama-cpp-python's function-calling format refuses to stream an answer that calls a function (with
    LOBEVAL_TOOLS=prompted a request describes its tools rather than offer them, and is streamed as one without)."""
    mode = env.get("LOBEVAL_STREAM") or "auto"
    if mode not in STREAM_MODES:
        raise ConfigError(f"LOBEVAL_STREAM={mode!r}: expected {', '.join(STREAM_MODES[:-1])} or {STREAM_MODES[-1]}")
    if mode == "auto":
        return "untooled" if config.provider == "openai" and config.base_url else "none"
    return "all" if mode == "on" else "none"


def resolve_tools(env: Mapping[str, str] = os.environ) -> Literal["native", "prompted"]:
    """How a request's tools reach the model, from LOBEVAL_TOOLS: "native" (the default) in the request's `tools`;
    "prompted" described in its system message, the calls read from the model's JSON answer (`prompted_messages`,
    `prompted_reply`), for servers whose native tool calling cannot be streamed or capped (llama-cpp-python's)."""
    mode = env.get("LOBEVAL_TOOLS") or "native"
    if mode not in TOOL_MODES:
        raise ConfigError(f"LOBEVAL_TOOLS={mode!r}: expected {' or '.join(TOOL_MODES)}")
    return mode


def prompted_messages(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history of a request with `tools` as a server that knows nothing of tools accepts it: the functions
    described at the end of the system message (PROMPTED_TOOLS; one is put first when there is none), an assistant
    turn that called functions as its calls' JSON, and the results of one turn's calls as one user message
    (PROMPTED_RESULT each), since strict chat templates refuse a `tool` role, or drop it (llama-cpp-python's chatml)."""
    names = {call.get("id"): call["function"]["name"]
             for message in messages for call in message.get("tool_calls") or []}
    rewritten: list[dict[str, Any]] = []
    results_at = -1   # where the results of the turn's calls so far went
    for message in messages:
        if message.get("role") == "tool":
            said = PROMPTED_RESULT.format(name=names.get(message.get("tool_call_id"), "a function"),
                                          id=message.get("tool_call_id"), content=message.get("content"))
            if results_at == len(rewritten) - 1 >= 0:
                said = f"{rewritten.pop()['content']}\n\n{said}"
            rewritten.append({"role": "user", "content": said})
            results_at = len(rewritten) - 1
        elif message.get("tool_calls"):
            said = json.dumps({"tool_calls": [{"name": call["function"]["name"],
                                               "arguments": _arguments(call["function"].get("arguments"))}
                                              for call in message["tool_calls"]]}, ensure_ascii=False)
            rewritten.append({"role": "assistant", "content": "\n".join(filter(None, [message.get("content"), said]))})
        else:
            rewritten.append(message)
    described = PROMPTED_TOOLS.format(functions="\n".join(_described(tool) for tool in tools))
    if rewritten and rewritten[0].get("role") == "system":
        return [{**rewritten[0], "content": f"{rewritten[0].get('content') or ''}\n\n{described}"}, *rewritten[1:]]
    return [{"role": "system", "content": described}, *rewritten]


def _described(tool: dict[str, Any]) -> str:
    function = tool["function"]
    schema = json.dumps(function.get("parameters") or {"type": "object", "properties": {}}, ensure_ascii=False)
    return f"- {function['name']}: {function.get('description') or ''}\n  parameters: {schema}"


def _arguments(text: Any) -> Any:
    """A call's arguments as a JSON value (they travel as a string), kept as they are when they do not parse."""
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def prompted_reply(message: dict[str, Any], names: frozenset[str], seed: str) -> dict[str, Any]:
    """The assistant message of a prompted-tools reply as a native one: its text, or, when it speaks of
    "tool_calls", the calls of its JSON object (inside a fence or with text around it, which is dropped), with ids
    drawn from `seed` and their order. ValueError, an unusable reply, for JSON that does not parse, a function not in
    `names`, or arguments that are not an object (missing ones are {})."""
    text = message.get("content") or ""
    if message.get("tool_calls") or "tool_calls" not in text:
        return message
    calls = _prompted_calls(text, names)
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_" + hashlib.sha256(f"{seed}:{index}".encode()).hexdigest()[:16], "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}
        for index, (name, arguments) in enumerate(calls)]}


def _prompted_calls(text: str, names: frozenset[str]) -> list[tuple[str, dict[str, Any]]]:
    decoder, failure = json.JSONDecoder(), None
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError as exc:
            failure = failure or str(exc)
            continue
        if isinstance(value, dict) and "tool_calls" in value:
            break
    else:
        raise ValueError(f"the JSON of the tool calls does not parse ({failure or 'no JSON object in it'})")
    calls = value["tool_calls"]
    if not isinstance(calls, list) or not calls:
        raise ValueError(f'"tool_calls" must be a list of one or more calls, not {json.dumps(calls)[:80]}')
    read = []
    for call in calls:
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str):
            raise ValueError(f'each call must be {{"name": "<function name>", "arguments": {{...}}}}, not '
                             f"{json.dumps(call)[:80]}")
        if name not in names:
            raise ValueError(f"unknown function {name!r}; the functions are {', '.join(sorted(names))}")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments of {name} must be a JSON object, not {JSON_TYPES[type(arguments)]}")
        read.append((name, arguments))
    return read


def _key_variable(config: ModelConfig) -> str:
    return "AZURE_OPENAI_API_KEY" if config.provider == "azure" else "OPENAI_API_KEY"


def api_key(config: ModelConfig, env: Mapping[str, str] = os.environ) -> str:
    """The key, read from the environment only when a client is built."""
    key = env.get(_key_variable(config))
    if not key:
        raise ConfigError(f"{_key_variable(config)} is not set")
    return key


def scrub_key(config: ModelConfig, text: str) -> str:
    """Server and SDK messages may quote the key (e.g. on a 401): remove it, as a whole token only, and anything
    key-shaped."""
    key = os.environ.get(_key_variable(config))
    if key and len(key) >= MIN_SECRET_LENGTH:   # a shorter one is a placeholder (OPENAI_API_KEY=x for a local server)
        text = re.sub(rf"(?<![\w-]){re.escape(key)}(?![\w-])", "***", text)
    return re.sub(r"sk-[\w*-]{6,}", "sk-***", text)


def build_client(config: ModelConfig, env: Mapping[str, str] = os.environ) -> openai.AsyncOpenAI:
    """The SDK client, without its own retries (LLMClient retries). Reads the key from `env`."""
    import openai
    key = api_key(config, env)
    # aiohttp, the SDK's documented choice for concurrency: it halved the client's CPU per call in
    # `lobeval bench simulate` against httpx's connection pool.
    common = {"api_key": key, "max_retries": 0, "http_client": openai.DefaultAioHttpClient()}
    if config.provider == "azure":
        return openai.AsyncAzureOpenAI(azure_endpoint=config.base_url, api_version=config.api_version, **common)
    return openai.AsyncOpenAI(base_url=config.base_url, **common)


def endpoint_url(config: ModelConfig) -> str:
    """Where a model's requests go, as a person would look for it: the base URL, or the Azure endpoint."""
    return (config.base_url or "https://api.openai.com/v1").rstrip("/")


async def probe(config: ModelConfig, timeout: float) -> str | None:
    """Why a model's endpoint does not answer, from one GET of its list of models (which OpenAI, Azure OpenAI,
    llama.cpp, Ollama and vLLM serve without generating anything) bounded by `timeout`: a connection that failed,
    no answer in time, the key refused (401, 403) or a server error (5xx); None when it answered otherwise (a
    server without the list answers 404: it is running)."""
    import openai
    sdk = build_client(config)
    try:
        async with asyncio.timeout(timeout):
            await sdk.get("/models", cast_to=object)
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403):
            return f"refused the key in {_key_variable(config)} ({scrub_key(config, _describe(exc))})"
        return f"answered {scrub_key(config, _describe(exc))}" if exc.status_code >= 500 else None
    except openai.APIConnectionError as exc:
        return f"cannot connect ({scrub_key(config, _connection_failure(exc))})"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    finally:
        await sdk.close()
    return None


def load_prices(env: Mapping[str, str] = os.environ) -> dict[str, dict[str, float]]:
    """PRICES, updated from the JSON file named in LOBEVAL_PRICES ({"model": {"input": x, "output": y}}, and
    optionally "cached_input": the price of prompt tokens read from the provider's prompt cache)."""
    path = env.get("LOBEVAL_PRICES")
    if not path:
        return dict(PRICES)
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
        extra = {model: {"input": float(p["input"]), "output": float(p["output"]),
                         **({"cached_input": float(p["cached_input"])} if "cached_input" in p else {})}
                 for model, p in table.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"LOBEVAL_PRICES={path}: expected a JSON file like "
                          f'{{"model": {{"input": 0.15, "output": 0.6}}}} ({type(exc).__name__}: {exc})') from None
    return {**PRICES, **extra}


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    return Path(env.get("LOBEVAL_CACHE_DIR") or Path.home() / ".cache" / "lobeval" / "llm")


@dataclass
class Usage:
    """What one role used. `calls` counts the answers asked for (`cached_calls` of them came from the
    cache); `requests` the HTTP requests sent for them, failed attempts and retries included. Tokens and
    cost are what the server reported for the requests sent, failed ones included. `cost_usd` is None,
    "unknown" (and `cost_known` False), once any of them went to a model without a known price."""

    calls: int = 0
    cached_calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    cost_known: bool = True
    cached_prompt_tokens: int = 0
    """Of the prompt tokens, those the provider read from its prompt cache (priced at `cached_input`)."""
    estimated_tokens: int = 0
    """Of the prompt and completion tokens, those lobeval counted itself (tiktoken) for requests the server reported
    no usage for: one lobeval hung up on (a deadline), a stream without usage, a reply without it."""

    def __post_init__(self) -> None:
        # Records written before cost_usd could be None say "unknown" with cost_known false and $0.
        if self.cost_usd is None or not self.cost_known:
            self.cost_usd, self.cost_known = None, False

    def add(self, *, prompt_tokens: int = 0, completion_tokens: int = 0, cost_usd: float | None = 0.0,
            cached: bool = False, requests: int = 0, cached_prompt_tokens: int = 0, estimated_tokens: int = 0) -> None:
        """Counts one call; a cached one used nothing. `cost_usd` None: its cost is unknown."""
        if cached:
            self.merge(Usage(calls=1, cached_calls=1))
        else:
            self.merge(Usage(calls=1, requests=requests, prompt_tokens=prompt_tokens,
                             completion_tokens=completion_tokens, cost_usd=cost_usd,
                             cached_prompt_tokens=cached_prompt_tokens, estimated_tokens=estimated_tokens))

    def merge(self, other: Usage) -> None:
        """Adds `other` into this one."""
        self.calls += other.calls
        self.cached_calls += other.cached_calls
        self.requests += other.requests
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.estimated_tokens += other.estimated_tokens
        self.cost_usd = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        self.cost_known = self.cost_usd is not None

    @classmethod
    def of(cls, numbers: Mapping[str, Any]) -> Usage:
        """The usage a record reports, ignoring fields that are not usage (records may carry more)."""
        return cls(**{key: value for key, value in numbers.items() if key in _USAGE_FIELDS})

    def __add__(self, other: Usage) -> Usage:
        total = replace(self)
        total.merge(other)
        return total

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_cost(cost_usd: float | None) -> str:
    """A cost for display: "unknown" when it is (never $0.00)."""
    return "unknown" if cost_usd is None else f"${cost_usd:.4f}"


def cost_of(prompt_tokens: int, completion_tokens: int, price: Mapping[str, float] | None,
            cached_tokens: int = 0) -> float | None:
    """USD at `price` (per 1M tokens); None when the price is not known. Of the prompt tokens, `cached_tokens`
    (read from the provider's prompt cache) cost `cached_input`, the input price when the price gives none."""
    if price is None:
        return None
    cached = min(cached_tokens, prompt_tokens)
    return _usd(prompt_tokens - cached, completion_tokens, price) + cached * price.get("cached_input",
                                                                                      price["input"]) / 1e6


def _usd(prompt_tokens: float, completion_tokens: float, price: Mapping[str, float]) -> float:
    return (prompt_tokens * price["input"] + completion_tokens * price["output"]) / 1e6


def worst_case_usd(request: Mapping[str, Any], price: Mapping[str, float]) -> float:
    """What a request may cost, estimated: its size in characters / 4 as prompt tokens, and its
    `max_completion_tokens` or `max_tokens` (else COMPLETION_CAP) as completion tokens."""
    prompt = len(json.dumps(request, ensure_ascii=False, default=str)) / 4
    completion = request.get("max_completion_tokens") or request.get("max_tokens") or COMPLETION_CAP
    return _usd(prompt, completion, price)


_USAGE_FIELDS = {field.name for field in fields(Usage)}


class Budget:
    """A spending limit for a run. Once a request has its concurrency slot, its worst-case cost is
    reserved; when the rest of the budget cannot cover that, BudgetExceeded is raised and nothing is
    sent. Its real cost replaces the reservation when it ends. So the limit is overshot at most by what
    requests in flight cost beyond their reservations (and by usage charged afterwards with `charge`).

    With `ledger` (a JSON file, in a folder that exists) the amounts live in that file under a
    cross-process lock, so all processes of a run keep one budget, each enforcing its own `limit_usd`;
    without it they live in this process. The ledger also counts, by role, the requests settled and the
    usages charged (`calls`), and what each running process holds reserved (`reservations`).
    """

    def __init__(self, limit_usd: float, ledger: str | Path | None = None):
        self.limit_usd = limit_usd
        self.ledger = Path(ledger) if ledger else None
        self._lock = threading.Lock()
        self._file_lock = filelock.FileLock(f"{self.ledger}.lock") if self.ledger else None
        self._memory = _new_ledger()

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Budget | None:
        """The budget in LOBEVAL_BUDGET_USD, kept in the file LOBEVAL_BUDGET_LEDGER names if it is set;
        None (unlimited) without LOBEVAL_BUDGET_USD."""
        value = env.get("LOBEVAL_BUDGET_USD")
        if not value:
            return None
        try:
            limit = float(value)
            if not limit >= 0:   # also NaN
                raise ValueError(value)
        except ValueError:
            raise ConfigError(f"LOBEVAL_BUDGET_USD={value!r} is not an amount of US dollars") from None
        return cls(limit, env.get("LOBEVAL_BUDGET_LEDGER") or None)

    @property
    def spent_usd(self) -> float:
        with self._state(write=False) as state:
            return state["spent_usd"]

    @property
    def reserved_usd(self) -> float:
        with self._state(write=False) as state:
            return sum(state["reservations"].values())

    def reserve(self, amount_usd: float) -> None:
        """Holds `amount_usd` for a request about to be sent; BudgetExceeded when the rest cannot cover it."""
        with self._state() as state:
            spent, reserved = state["spent_usd"], sum(state["reservations"].values())
            if spent + reserved + amount_usd > self.limit_usd:
                raise BudgetExceeded(f"budget of ${self.limit_usd:.2f} reached (${spent:.4f} spent, ${reserved:.4f} "
                                     f"reserved for calls in flight, this one may cost ${amount_usd:.4f}): "
                                     f"no new model calls are started")
            _hold(state["reservations"], amount_usd)

    def settle(self, reserved_usd: float, cost_usd: float | None, *, role: str) -> None:
        """Replaces a reservation by what the request cost (0 if it failed without reporting usage)."""
        with self._state() as state:
            _hold(state["reservations"], -reserved_usd)
            state["spent_usd"] += cost_usd or 0.0
            state["calls"][role] = state["calls"].get(role, 0) + 1

    def charge(self, cost_usd: float | None, *, role: str) -> None:
        """Charges usage lobeval did not reserve for, such as the cost a target reports for its own model
        calls. An unknown cost (None) is counted as a call but cannot be charged."""
        self.settle(0.0, cost_usd, role=role)

    @contextmanager
    def _state(self, *, write: bool = True) -> Iterator[dict[str, Any]]:
        with self._lock:
            if self._file_lock is None or self.ledger is None:
                yield self._memory
                return
            with self._file_lock:
                state = _read_ledger(self.ledger)
                yield state
                if write:
                    _write_ledger(self.ledger, state, self.limit_usd)


def _new_ledger() -> dict[str, Any]:
    return {"spent_usd": 0.0, "reservations": {}, "calls": {}}


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _hold(reservations: dict[str, float], amount_usd: float) -> None:
    """Adds `amount_usd` (released when negative) to this process's reservations."""
    owner = _owner()
    held = round(reservations.get(owner, 0.0) + amount_usd, 12)   # no float residue of settled reservations
    if held > 0:
        reservations[owner] = held
    else:
        reservations.pop(owner, None)


def _running(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    return host != socket.gethostname() or psutil.pid_exists(int(pid))


def _read_ledger(path: Path) -> dict[str, Any]:
    """The ledger's amounts, a new one if the file does not exist yet. Reservations held by processes of
    this host that have ended are dropped: a kernel that died could not release its own."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _new_ledger()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordError(path, "budget ledger", None, f"not JSON ({exc})") from None
    problem = _ledger_problem(data)
    if problem is not None:
        raise RecordError(path, "budget ledger", *problem)
    reservations = {owner: amount for owner, amount in data["reservations"].items() if _running(owner)}
    return {"spent_usd": data["spent_usd"], "reservations": reservations, "calls": data["calls"]}


def _ledger_problem(data: Any) -> tuple[str | None, str] | None:
    """(field, problem) of a damaged ledger; None when it is sound."""
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {type(data).__name__}"
    if data.get("schema_version") != LEDGER_SCHEMA_VERSION:
        return "schema_version", f"expected {LEDGER_SCHEMA_VERSION}, got {data.get('schema_version')!r}"
    for name in ("limit_usd", "spent_usd", "reserved_usd"):
        if not _amount(data.get(name)):
            return name, f"expected an amount of US dollars >= 0, got {data.get(name)!r}"
    reservations, calls = data.get("reservations"), data.get("calls")
    if not (isinstance(reservations, dict)
            and all(re.fullmatch(r".+:\d+", owner) and _amount(v) for owner, v in reservations.items())):
        return "reservations", f'expected {{"host:pid": amount >= 0, ...}}, got {reservations!r}'
    if not (isinstance(calls, dict) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                            for n in calls.values())):
        return "calls", f'expected {{"role": count >= 0, ...}}, got {calls!r}'
    return None


def _amount(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _write_ledger(path: Path, state: dict[str, Any], limit_usd: float) -> None:
    """Writes the ledger whole (a new file renamed over the old), so a reader never sees half of it."""
    data = {"schema_version": LEDGER_SCHEMA_VERSION, "limit_usd": limit_usd,
            "spent_usd": round(state["spent_usd"], 12),
            "reserved_usd": round(sum(state["reservations"].values()), 12),
            "reservations": state["reservations"], "calls": state["calls"]}
    temporary = path.with_name(f"{path.name}.tmp")
    temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, path)


@dataclass
class ChatResult:
    """One assistant message in OpenAI chat shape ("tool_calls" only when the model called tools), and
    what asking for it used: nothing when it came from the cache; failed attempts included otherwise.
    `cost_usd` is None when the model's price is not known; `usage` is all of it as a Usage (one call)."""

    message: dict[str, Any]
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    requests: int = 0
    cached_prompt_tokens: int = 0
    """Of the prompt tokens, those the provider read from its prompt cache."""
    usage: Usage = field(default_factory=Usage)


class LLMClient:
    """Calls one model for one role: bounded concurrency, deadlines, retries, persistent cache, usage and
    budget.

    Each request may take `timeout` seconds in all, its answer's body included; one that runs out is
    retried like a connection error, its connection closed (so the server may stop generating: a streamed request,
    see `resolve_stream`, is stopped by servers that finish a non-streamed one anyway). A call (its requests, the
    backoff between them, and the requests asked again after an unusable reply; waiting for a concurrency slot does
    not count) gives up with LLMError after `deadline` seconds. Every chat request caps its answer at `max_tokens`.
    All three default to the role's settings (`resolve_limits`).

    A failed request (HTTP 429 or 5xx, a timeout, a broken connection) is retried as it was, up to `max_attempts`
    times. An unusable reply (empty, not what `parse` reads, or a prompted tool call that cannot be read) is not: the
    request is asked again with the reply and what was wrong told to the model (NUDGE) and a temperature of at least
    RETRY_TEMPERATURE (`retried`).
    Every request's tokens are counted and charged, failed or not: as the server reported them, else estimated.
    """

    def __init__(self, config: ModelConfig, *, role: str, cache: bool, budget: Budget | None = None,
                 concurrency: int = 8, timeout: float | None = None, deadline: float | None = None,
                 max_tokens: int | None = None, max_attempts: int = 5, usage: Usage | None = None,
                 backoff: tuple[float, float] = (1.0, 30.0)):
        limits = resolve_limits(role)
        self.config, self.role, self.budget = config, role, budget
        self.concurrency, self.max_attempts = concurrency, max_attempts
        self.timeout = timeout or limits.timeout_s
        self.deadline = deadline or max(limits.deadline_s, self.timeout * DEADLINE_PER_TIMEOUT)
        self.max_tokens = max_tokens or limits.max_tokens
        self.stream = resolve_stream(config)
        self.tools_mode = resolve_tools()
        self.usage = usage if usage is not None else Usage()
        self._wait_backoff = wait_exponential_jitter(multiplier=backoff[0], max=backoff[1], jitter=backoff[0])
        self._sleep = asyncio.sleep   # between retries; a test records the waits instead
        self._cache = diskcache.Cache(str(cache_dir())) if cache else None
        self._price = load_prices().get(config.model)
        if budget is not None and self._price is None:
            # Refused before any work rather than call by call, which would end every conversation "budget_spent".
            raise ConfigError(f"model {config.model!r} (role {role}) has no known price, so the budget in "
                              f"LOBEVAL_BUDGET_USD cannot be kept: add its price in USD per 1M tokens to the JSON "
                              f'file named in LOBEVAL_PRICES ({{"{config.model}": {{"input": 0.15, "output": 0.6}}}}), '
                              f"or unset LOBEVAL_BUDGET_USD")
        self.unreachable = False
        """Whether the last call gave up on a connection that failed (refused, DNS, TLS, reset): the calls after it
        try once, not `max_attempts` times, so a stopped endpoint ends each conversation at once (llm_error) rather
        than after minutes of retries; the first call that gets through clears it."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncIterator[None] | None = None
        self.collecting: dict[str, dict[str, Any]] | None = None
        """lobeval.models.batch: a JSON-mode request is noted here (by its custom id) and not sent."""
        self.batch_answers: dict[str, dict[str, Any]] | None = None
        """lobeval.models.batch: the answers of a batch, by custom id, used instead of sending the request."""

    async def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                   response_format: dict[str, Any] | None = None, temperature: float | None = 0.0,
                   attempts: int = REPLY_ATTEMPTS, **params: Any) -> ChatResult:
        """One assistant reply. `temperature=None` leaves it out (reasoning models accept only their default).
        With `tools`, `tool_choice` is "auto": some servers (llama-cpp-python's function-calling format) leave the
        tools out of the prompt without it; with LOBEVAL_TOOLS=prompted the tools are described in the messages
        instead (`prompted_messages`) and the calls read from the reply (`prompted_reply`). An empty reply, or a
        prompted call that cannot be read, is asked again as `retried` says, `attempts` times in all; then
        ReplyError."""
        read: Callable[[dict[str, Any]], dict[str, Any]] = lambda stored: stored["message"]
        if tools and self.tools_mode == "prompted":
            names = frozenset(tool["function"]["name"] for tool in tools)
            messages, tools = prompted_messages(messages, tools), None
            read = lambda stored: prompted_reply(stored["message"], names, request_key(request))
        options = {"tools": tools, "tool_choice": "auto" if tools else None, "response_format": response_format,
                   "temperature": temperature}
        request = {"messages": messages, **{k: v for k, v in options.items() if v is not None}, **self._cap(), **params}
        deadline = _Deadline(self.deadline)

        async def answer(attempt: int, spent: Usage, problem: tuple[str, str | None]) -> dict[str, Any]:
            return await self._with_retries("chat", retried(request, attempt, problem), spent, deadline)

        used = Usage()
        message = await self._ask({"kind": "chat", **request}, answer, read, attempts, (used,))
        return ChatResult(message, used.cached_calls > 0, used.prompt_tokens, used.completion_tokens, used.cost_usd,
                          used.requests, used.cached_prompt_tokens, used)

    async def ask_json(self, messages: list[dict[str, Any]], parse: Callable[[str], T], *, attempts: int = 2,
                       usage: Sequence[Usage] = ()) -> T:
        """The model's JSON-mode reply as `parse` reads it; a ValueError from `parse` (or an empty reply) makes the
        reply unusable, and the next attempt asks again as `retried` says, with another seed. See `ask`."""
        request = {"messages": messages, "response_format": {"type": "json_object"}, "temperature": 0.0, **self._cap()}
        deadline = _Deadline(self.deadline)

        async def answer(attempt: int, spent: Usage, problem: tuple[str, str | None]) -> dict[str, Any]:
            body = {**retried(request, attempt, problem), "seed": attempt}
            if self.collecting is not None or self.batch_answers is not None:
                found = self._batched(body, spent)
                if found is not None:
                    return found
            stored = await self._with_retries("chat", body, spent, deadline)
            return {"content": stored["message"].get("content") or "", "prompt_tokens": stored["prompt_tokens"],
                    "completion_tokens": stored["completion_tokens"]}

        return await self._ask({"kind": "json", **request}, answer, lambda stored: parse(stored["content"]), attempts,
                               usage)

    def _cap(self) -> dict[str, int]:
        """The completion cap, in the field the endpoint reads."""
        return {cap_field(self.config): self.max_tokens} if self.max_tokens else {}

    def _batched(self, body: dict[str, Any], spent: Usage) -> dict[str, Any] | None:
        """With lobeval.models.batch: note the request (collecting), or its batch's answer, charged at the batch discount;
        None when the batch holds none (a retry after an unusable reply: sent live)."""
        custom = self.batch_key(body)
        if self.collecting is not None:
            self.collecting[custom] = body
            raise Deferred()
        found = self.batch_answers.get(custom)
        if found is None:
            return None
        if "error" in found:
            raise LLMError(f"model {self.config.model!r} (role {self.role}): {found['error']}")
        spent.merge(Usage(requests=1, prompt_tokens=found["prompt_tokens"], completion_tokens=found["completion_tokens"],
                          cost_usd=self.batch_cost(found), cached_prompt_tokens=found.get("cached_tokens", 0)))
        return found

    def batch_key(self, body: dict[str, Any]) -> str:
        """A chat request's custom id in a batch (`body` without the model): its cache key."""
        return self._key({"kind": "chat", **body})

    def batch_cost(self, found: dict[str, Any]) -> float | None:
        """What a batch's answer {"prompt_tokens", "completion_tokens", "cached_tokens"} costs at this model's
        price and the batch discount; None when the price is not known."""
        cost = cost_of(found["prompt_tokens"], found["completion_tokens"], self._price, found.get("cached_tokens", 0))
        return None if cost is None else cost * BATCH_DISCOUNT

    async def ask(self, request: dict[str, Any], answer: Callable[[int], Awaitable[dict[str, Any]]],
                  parse: Callable[[str], T], *, attempts: int = 2, usage: Sequence[Usage] = ()) -> T:
        """The one path for an answer that must be validated: `parse(content)` of attempt 0, 1, ... until one
        parses; ReplyError (with the last raw content) when none did, LLMError when the endpoint gave up.

        `request` names the question in the cache (with this client's model and the attempt number);
        `answer(attempt)` produces {"content", "prompt_tokens", "completion_tokens"} when the cache has
        none, or raises ValueError when it got nothing to parse; an attempt after the first must ask with a change
        that can change the answer. It runs in one of this client's
        concurrency slots with the budget reserved for the worst case of `request`, and is charged what
        its tokens cost; it is not cut off by `timeout` (it may run on a thread, which cannot be
        cancelled). Only an answer that parsed is cached, so a rerun asks again where a reply was
        unusable. Every attempt is counted on this client's usage and on each of `usage`."""

        async def in_slot(attempt: int, spent: Usage, problem: tuple[str, str | None]) -> dict[str, Any]:
            return await self._in_slot(request, spent, lambda: answer(attempt))

        return await self._ask(request, in_slot, lambda stored: parse(stored["content"]), attempts, usage)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order. A response with missing vectors is not asked again (it would be the same)."""
        if not texts:
            return []
        request = {"input": list(texts)}
        deadline = _Deadline(self.deadline)

        async def answer(attempt: int, spent: Usage, problem: tuple[str, str | None]) -> dict[str, Any]:
            return await self._with_retries("embeddings", request, spent, deadline)

        return await self._ask({"kind": "embeddings", **request}, answer, lambda stored: stored["vectors"], 1, ())

    async def _ask(self, request: dict[str, Any],
                   answer: Callable[[int, Usage, tuple[str, str | None]], Awaitable[dict[str, Any]]],
                   read: Callable[[dict[str, Any]], T], attempts: int, usage: Sequence[Usage]) -> T:
        """`read(stored)` of the first attempt whose answer it reads (ValueError: unusable); one call on this client's
        usage and each of `usage`, whatever happened. An LLMError raised carries the call's usage."""
        used = Usage(calls=1)
        try:
            return await self._attempts(request, answer, read, attempts, used)
        except LLMError as exc:
            exc.usage = used
            raise
        finally:
            self._count(used, usage)

    async def _attempts(self, request: dict[str, Any],
                        answer: Callable[[int, Usage, tuple[str, str | None]], Awaitable[dict[str, Any]]],
                        read: Callable[[dict[str, Any]], T], attempts: int, used: Usage) -> T:
        problem: tuple[str, str | None] = ("", None)
        for attempt in range(attempts):
            key = self._key({**request, "attempt": attempt})
            stored = self._recall(key)
            fresh = stored is None
            if fresh:
                spent = Usage()
                try:
                    stored = await answer(attempt, spent, problem)
                except (ValueError, _Unusable) as exc:
                    problem = (str(exc), None)
                    continue
                finally:
                    used.merge(spent)
            try:
                value = read(stored)
            except ValueError as exc:
                problem = (str(exc), stored["message"].get("content") if "message" in stored else stored.get("content"))
                continue
            if fresh:
                self._remember(key, stored)
            else:
                used.cached_calls = 1
            return value
        raise ReplyError(problem[0], problem[1], attempts)

    def _key(self, request: dict[str, Any]) -> str:
        return request_key({**self.config.describe(), **request})

    def _recall(self, key: str) -> dict[str, Any] | None:
        return self._cache.get(key) if self._cache is not None else None

    def _remember(self, key: str, stored: dict[str, Any]) -> None:
        if self._cache is not None:
            self._cache.set(key, stored)

    def _count(self, used: Usage, usage: Sequence[Usage] = ()) -> None:
        for into in (self.usage, *usage):
            into.merge(used)

    async def _with_retries(self, kind: str, request: dict[str, Any], spent: Usage, deadline: _Deadline
                            ) -> dict[str, Any]:
        """The stored answer of one request, sent again after a failure of the transport (never after an unusable
        answer: _Unusable is raised as it came)."""
        import openai
        sdk, _ = await self._bound()
        send = self._send_chat if kind == "chat" else self._send_embeddings
        attempts = 0

        async def attempt() -> dict[str, Any]:
            nonlocal attempts
            attempts += 1
            partial = _Chunks()
            return await self._in_slot(request, spent,
                                       lambda: deadline.run(lambda: send(sdk, request, partial), self.timeout),
                                       lambda exc: _lost(request, partial, exc))

        down = self.unreachable   # an earlier call could not connect: one attempt, until a call gets through
        retrying = AsyncRetrying(stop=stop_after_attempt(1 if down else self.max_attempts) | deadline.stop,
                                 wait=self._wait, sleep=lambda seconds: deadline.wait(seconds, self._sleep),
                                 retry=retry_if_exception(_retryable), before_sleep=self._log_retry, reraise=True)
        try:
            stored = await retrying(attempt)
        except _Unusable:   # the server answered: it is reachable
            self.unreachable = False
            raise
        except (openai.OpenAIError, _TimedOut, ValueError) as exc:
            self.unreachable = isinstance(exc, openai.APIConnectionError)
            cause = scrub_key(self.config, _describe(exc))
            if not _retryable(exc):
                verdict = f"not retried (attempt {attempts})"
            elif down:
                verdict = "not retried: its endpoint could not be reached on an earlier call either"
            elif deadline.reached:
                verdict = f"gave up after {attempts} attempts at the call's deadline ({self.deadline:g} s)"
            else:
                verdict = f"gave up after {attempts} attempts"
            raise LLMError(f"model {self.config.model!r} (role {self.role}) at {endpoint_url(self.config)}: "
                           f"{verdict}; last error: {cause}") from None
        self.unreachable = False
        return stored

    async def _in_slot(self, request: dict[str, Any], spent: Usage, send: Callable[[], Awaitable[dict[str, Any]]],
                       lost: Callable[[BaseException], Mapping[str, int]] = lambda exc: {}) -> dict[str, Any]:
        """`send()` in one of this client's concurrency slots, with the request's worst case reserved in the
        budget meanwhile. The request, and its tokens even when it failed (those the server reported, else
        `lost(exception)`: lobeval's estimate of what a request it hung up on used), are added to `spent` and replace
        the reservation."""
        _, semaphore = await self._bound()
        async with semaphore:
            held = self._reserve(request)
            tokens: Mapping[str, int] = {}
            try:
                stored = await send()
                tokens = stored
                return stored
            except _Unusable as exc:
                tokens = exc.tokens
                raise
            except (Exception, asyncio.CancelledError) as exc:
                tokens = lost(exc)
                raise
            finally:
                self._spend(spent, held, tokens)

    def _reserve(self, request: dict[str, Any]) -> float:
        if self.budget is None or self._price is None:
            return 0.0
        amount = worst_case_usd(request, self._price)
        self.budget.reserve(amount)
        return amount

    def _spend(self, spent: Usage, held: float, tokens: Mapping[str, Any]) -> None:
        """Charge what an answer's tokens cost; one a batch gave (`"batch": True`) at the batch's price, and not to
        the budget, which the whole batch was charged to (lobeval.models.batch.answer_in_batch)."""
        prompt, completion = tokens.get("prompt_tokens", 0), tokens.get("completion_tokens", 0)
        cached = tokens.get("cached_tokens", 0)
        cost = self.batch_cost(dict(tokens)) if tokens.get("batch") else cost_of(prompt, completion, self._price, cached)
        spent.merge(Usage(requests=1, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost,
                          cached_prompt_tokens=cached, estimated_tokens=tokens.get("estimated_tokens", 0)))
        if self.budget is not None:
            self.budget.settle(held, 0.0 if tokens.get("batch") else cost, role=self.role)

    async def _send_chat(self, sdk: openai.AsyncOpenAI, request: dict[str, Any], partial: _Chunks) -> dict[str, Any]:
        if self.stream == "all" or (self.stream == "untooled" and not request.get("tools")):
            completion = await self._streamed(sdk, request, partial)
        else:
            completion = await self._post(sdk, "/chat/completions", request)
        return _read(completion, lambda: {"message": _assistant_message(completion)}, request)

    async def _streamed(self, sdk: openai.AsyncOpenAI, request: dict[str, Any], partial: _Chunks) -> dict[str, Any]:
        """The completion of a streamed request, put together from its chunks in `partial` (with the usage the server
        sends last when asked, `stream_options.include_usage`). Cut off, it closes the connection, which tells a
        server that stops abandoned streams (llama-cpp-python's) to stop."""
        body = {**request, "stream": True, "stream_options": {"include_usage": True}}
        stream = await self._post(sdk, "/chat/completions", body, stream=True)
        async with stream:
            async for chunk in stream:
                partial.add(chunk)
        return partial.completion()

    async def _send_embeddings(self, sdk: openai.AsyncOpenAI, request: dict[str, Any],
                               partial: _Chunks) -> dict[str, Any]:
        response = await self._post(sdk, "/embeddings", {**request, "encoding_format": "float"})
        return _read(response, lambda: {"vectors": _vectors(response, len(request["input"]))}, request)

    async def _post(self, sdk: openai.AsyncOpenAI, path: str, body: dict[str, Any], stream: bool = False) -> Any:
        """The SDK's raw `post`, answering the JSON as it came (`stream`: an AsyncStream of its chunks' JSON). The
        typed `create` methods would walk every message and tool schema against TypedDicts, then build pydantic
        objects of the reply: most of the client's CPU in `lobeval bench simulate`, for requests that are plain JSON
        already. Its own timeout (between reads) is left at the SDK's default: `_Deadline.run` bounds the whole
        request."""
        import openai
        streamed = {"stream": True, "stream_cls": openai.AsyncStream[object]} if stream else {}
        return await sdk.post(path, cast_to=object, body={"model": self.config.model, **body}, **streamed)

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
                 state.upcoming_sleep, scrub_key(self.config, _describe(state.outcome.exception())))


def retried(request: dict[str, Any], attempt: int, problem: tuple[str, str | None]) -> dict[str, Any]:
    """The chat request of `attempt` after an unusable reply (`problem`: what was wrong, and the reply's text or None):
    the first attempt as it is; a later one with the reply and NUDGE after its messages, and a temperature of at least
    RETRY_TEMPERATURE (a temperature left out, the model's default, stays out). An empty reply is not put back:
    llama-cpp-python's function-calling template renders an assistant message without content as an unclosed turn."""
    if attempt == 0:
        return request
    what, raw = problem
    note = [*([{"role": "assistant", "content": raw}] if raw else []),
            {"role": "user", "content": NUDGE.format(problem=what)}]
    warmer = {"temperature": max(request["temperature"], RETRY_TEMPERATURE)} if "temperature" in request else {}
    return {**request, "messages": [*request["messages"], *note], **warmer}


class _Chunks:
    """A streamed chat completion as it arrives: its text, its tool calls (their arguments joined by the call's
    index), and the usage the server sent, if any."""

    def __init__(self) -> None:
        self.started = False
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None

    def add(self, chunk: Any) -> None:
        self.started = True
        if not isinstance(chunk, dict):
            raise _Unusable(f"a chunk of the stream is {type(chunk).__name__}, not a JSON object")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {} if isinstance(choice, dict) and choice.get("index", 0) == 0 else {}
            if isinstance(delta.get("content"), str):
                self.content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(call.get("index", 0), {"id": None, "name": "", "arguments": []})
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = function.get("name") or slot["name"]   # sent once (OpenAI) or with every chunk
                slot["arguments"].append(function.get("arguments") or "")

    def message(self) -> dict[str, Any]:
        """The assistant message so far."""
        calls = [{"id": slot["id"] or f"call_{index}", "type": "function",
                  "function": {"name": slot["name"], "arguments": "".join(slot["arguments"])}}
                 for index, slot in sorted(self.calls.items())]
        return {"role": "assistant", "content": "".join(self.content) or None, **({"tool_calls": calls} if calls else {})}

    def completion(self) -> dict[str, Any]:
        """The whole stream as a non-streamed completion's JSON."""
        return {"choices": [{"index": 0, "message": self.message()}], **({"usage": self.usage} if self.usage else {})}


def _lost(request: dict[str, Any], partial: _Chunks, exc: BaseException) -> dict[str, int]:
    """The estimated tokens of a request that failed without a usable answer: none when the server refused it or could
    not be reached (an HTTP error status, no connection: nothing was generated, nor billed by a provider); its prompt
    and what it streamed when lobeval hung up on it or the stream broke, since the server was working on it."""
    if isinstance(exc, (_TimedOut, asyncio.CancelledError)) or partial.started:
        return _estimated(request, partial.message())
    return {}


def _estimated(request: dict[str, Any], message: dict[str, Any] | None = None) -> dict[str, int]:
    """A request's tokens as lobeval counts them (lobeval.core.tokens), marked estimated: its prompt (messages and tools,
    or the texts to embed) and the reply so far."""
    if "input" in request:
        prompt = sum(count(text) for text in request["input"])
    else:
        prompt = prompt_tokens(request.get("messages") or [], request.get("tools"))
    completion = reply_tokens(message) if message and (message.get("content") or message.get("tool_calls")) else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "estimated_tokens": prompt + completion}


class _Deadline:
    """What is left of one call's deadline. Its requests and the backoff between them use it up; waiting
    for a concurrency slot does not (a long queue is load, not a failing endpoint)."""

    def __init__(self, seconds: float):
        self.left, self.reached = seconds, False

    async def run(self, send: Callable[[], Awaitable[T]], timeout: float) -> T:
        """`send()`, cut off with _TimedOut after `timeout` seconds or what is left, whichever is shorter."""
        limit = min(timeout, self.left)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(limit):
                return await send()
        except TimeoutError:
            raise _TimedOut(f"no complete answer within {limit:.3g} s") from None
        finally:
            self.left -= loop.time() - started

    async def wait(self, seconds: float, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.left -= seconds
        await sleep(seconds)

    def stop(self, state: RetryCallState) -> bool:
        """Tenacity's stop: no retry whose backoff would use up what is left."""
        self.reached = state.upcoming_sleep >= self.left
        return self.reached


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
    if not (content or "").strip() and not calls:
        raise _Unusable("an empty reply (no content, no tool calls)")
    # "" rather than null: the message goes back in the history, and some servers (llama-cpp-python) refuse null.
    return {"role": "assistant", "content": content or "", **({"tool_calls": calls} if calls else {})}


def _read(response: Any, read: Callable[[], dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    """`read()`'s parts of a response with the tokens the server reported for `request`, else lobeval's estimate; an
    unusable response keeps its tokens on the exception."""
    tokens = _tokens(response)
    try:
        part = read()
    except _Unusable as exc:
        exc.tokens = tokens or _estimated(request)
        raise
    return {**part, **(tokens or _estimated(request, part.get("message")))}


def _vectors(response: Any, expected: int) -> list[list[float]]:
    try:
        data = sorted(response.get("data") or [], key=lambda item: item["index"])
        vectors = [[float(x) for x in item["embedding"]] for item in data]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _Unusable(f"the embeddings response is malformed ({type(exc).__name__}: {exc})") from None
    if len(vectors) != expected:
        raise _Unusable(f"{len(vectors)} embeddings for {expected} texts")
    return vectors


def _tokens(response: Any) -> dict[str, int] | None:
    """The tokens a response reports; None when it reports no usage."""
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return {"prompt_tokens": usage.get("prompt_tokens") or 0, "completion_tokens": usage.get("completion_tokens") or 0,
            "cached_tokens": cached if isinstance(cached, int) and cached > 0 else 0}


def _retryable(exc: BaseException) -> bool:
    import openai
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    # ValueError: the SDK could not decode the body as JSON.
    return isinstance(exc, (openai.APIConnectionError, openai.APIResponseValidationError, _TimedOut, ValueError))


def _retry_after(exc: BaseException | None) -> float:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), capped; 0 if it did not say."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(float(headers[name]) * scale, MAX_RETRY_AFTER_S)
        except (KeyError, ValueError):
            continue
    return 0.0


def _describe(exc: BaseException | None) -> str:
    import openai
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        return f"HTTP {exc.status_code}: {body.get('message') or exc.message}"
    if isinstance(exc, _TimedOut):
        return f"timed out: {exc}"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {_connection_failure(exc)}"
    if isinstance(exc, _Unusable):
        return f"unusable response: {exc}"
    if isinstance(exc, ValueError):
        return f"unusable response: the body is not valid JSON ({exc})"
    return f"{type(exc).__name__}: {exc}"


def _connection_failure(exc: openai.APIConnectionError) -> str:
    """The first cause of a failed connection, in its own words: the SDK says "Request timed out." also for a
    refused connection (the aiohttp transport reports every failure to connect as a connect timeout)."""
    cause: BaseException = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return f"{type(cause).__name__}: {cause}"


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


SHUTDOWN_GRACE = 5.0
"""Seconds the tasks still running when `run_sync`'s coroutine is done get to end after being cancelled."""


def run_sync(coroutine: Awaitable[Any]) -> Any:
    """Run a coroutine to completion from synchronous code, also inside a notebook cell, where an
    event loop is already running (asyncio.run refuses that): there it runs on a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_run, coroutine).result()


def _run(coroutine: Awaitable[Any]) -> Any:
    """asyncio.run, but the tasks left running at the end are cancelled and given SHUTDOWN_GRACE seconds,
    not waited for without end: a target that swallows its cancellation (targets.abandonable) is left behind."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=SHUTDOWN_GRACE))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
