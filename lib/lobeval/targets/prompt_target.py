"""A target made of a model, a system prompt and tools: lobeval itself runs the bot's tool loop.

A small JSON file in the suite describes it (its path is the target spec):

    {"model": "gpt-4o-mini",               (null: the target role's model from the environment)
     "system_prompt": "You are the support desk assistant ...",
     "tools": {"mcp": "python -m pkg.server", "per_conversation": true},    or {"python": "pkg.tools"}
     "tools_file": "tools.json",            (relative to this file: the functions the model is offered)
     "max_tool_rounds": 8}

Each user message runs the loop: the model sees the history and the functions of `tools_file`; every
tool call it makes is executed (on the MCP server, or by the module's function of that name) and its
result or error fed back, until it answers in text or has asked for tools `max_tool_rounds` times.
Every call is reported with its arguments, result and error (a tool error, or a function that raised,
is a failed call), and the turn's model usage with the reply.

An MCP server is started for each conversation (`per_conversation`, the default), or one connection is
shared by all conversations run in one event loop; either way, when the server offers `reset` it is
called at the start of each conversation with the case's `business_data`, and when it offers `state`
the session offers `state()` and `apply(function_calls)` for the end-state check. A module may define `reset(business_data)` and
`state()` alike. A model endpoint that gave up, or an MCP server that cannot be reached or went away,
raises lobeval.TargetUnavailable: a machinery error, not the bot's failure.
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lobeval.core.errors import ConfigError, RecordError, RoleError, TargetUnavailable, import_failure
from lobeval.models.llm import LLMClient, LLMError, ModelConfig, Usage, resolve_model, run_sync
from lobeval.targets.mcp_tools import ConnectionLost, McpConnection, connect
from lobeval.core.records import read_json, validated
from lobeval.core.protocol import USAGE_FIELDS, Reply

WHERE = "prompt target"
NO_REPLY = "(no reply: the model was still calling tools when its rounds ran out)"
TOOLS_FORMS = '{"mcp": "<command line or http:// URL>", "per_conversation": true} or {"python": "<module>"}'


class PromptTargetConfig(BaseModel):
    """The JSON file of a prompt target."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = None
    system_prompt: str
    tools: dict[str, Any]
    tools_file: str = "tools.json"
    max_tool_rounds: int = Field(8, ge=1)


def read_config(path: Path) -> PromptTargetConfig:
    """A prompt target's JSON file, checked (RecordError naming the file and the field)."""
    return validated(PromptTargetConfig, read_json(path), path, WHERE)


def load_prompt_target(path: str | Path) -> PromptTarget:
    """The target the JSON file at `path` describes. Bad input (the file, the model's configuration, tools
    the server or module does not define) is a LobevalError, raised here rather than in a conversation."""
    path = Path(path)
    config = read_config(path)
    offered = offered_tools(path.parent / config.tools_file)
    model = target_model(config.model, path)
    source = tool_source(config.tools, path)
    missing = sorted({tool["function"]["name"] for tool in offered} - source.check())
    if missing:
        raise RoleError(f"target {str(path)!r}: its tools define no {', '.join(missing)} (from {config.tools_file})")
    # A deployed bot serves many users at once: its own limit must not throttle the simulation.
    return PromptTarget(config, LLMClient(model, role="target", cache=False, concurrency=64), offered, source)


def check_concurrency(path: str | Path, concurrency: int) -> None:
    """RoleError when the target's tools keep one state for every conversation (a shared MCP server, a Python
    module) and `concurrency` conversations would run on it at once: each would read and change the others'
    records, and a `reset` at the start of one would wipe the others' mid-conversation."""
    if concurrency <= 1:
        return
    path = Path(path)
    tools = read_config(path).tools
    if "python" in tools:
        shared = f"the module {tools['python']!r}"
    elif tools.get("per_conversation", True) is False:
        shared = "one MCP server shared by all conversations (\"per_conversation\": false)"
    else:
        return
    raise RoleError(f"target {str(path)!r}: its tools are {shared}, one state for every conversation, and "
                    f"--concurrency {concurrency} would run {concurrency} conversations on it at once: use "
                    f"--concurrency 1, or an MCP server started per conversation (\"per_conversation\": true)")


def offered_tools(path: Path) -> list[dict[str, Any]]:
    """The functions of a tools.json as the model is offered them (without lobeval's `effect`)."""
    tools = read_json(path)
    if not isinstance(tools, list):
        raise RecordError(path, "tools", None, "must be a list of tool definitions")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise RecordError(path, f"tool {index}", "function.name", "is required (a string)")
    return [{key: value for key, value in tool.items() if key != "effect"} for tool in tools]


def target_model(name: str | None, path: Path) -> ModelConfig:
    """The named model with the environment's credentials, or the target role's model when `name` is None."""
    env = os.environ if name is None else {**os.environ, "LOBEVAL_TARGET_MODEL": name}
    config = resolve_model("target", env)
    if config is None:
        raise ConfigError(f"{path}: model is null and no target model is configured: name one in the file, "
                          f"or set LOBEVAL_TARGET_MODEL or LOBEVAL_MODEL")
    return config


def tool_source(tools: dict[str, Any], path: Path) -> McpTools | ModuleTools:
    """The `tools` object of the file, checked."""
    kinds = [kind for kind in ("mcp", "python") if kind in tools]
    if len(kinds) != 1:
        raise RecordError(path, WHERE, "tools", f"expected {TOOLS_FORMS}")
    kind = kinds[0]
    unknown = sorted(set(tools) - ({"mcp", "per_conversation"} if kind == "mcp" else {"python"}))
    if unknown:
        raise RecordError(path, WHERE, f"tools.{unknown[0]}", f"is not a field lobeval knows; expected {TOOLS_FORMS}")
    if not isinstance(tools[kind], str) or not tools[kind].strip():
        raise RecordError(path, WHERE, f"tools.{kind}", "must be a non-empty string")
    if kind == "python":
        return ModuleTools(tools["python"])
    if not isinstance(tools.get("per_conversation", True), bool):
        raise RecordError(path, WHERE, "tools.per_conversation", "must be true or false")
    return McpTools(tools["mcp"], tools.get("per_conversation", True))


class McpTools:
    """The tools of an MCP server: a connection (a server, on stdio) per conversation, or one shared by
    all conversations of an event loop."""

    def __init__(self, server: str, per_conversation: bool):
        self.server, self.per_conversation = server, per_conversation
        self._shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[McpConnection]] = \
            weakref.WeakKeyDictionary()

    def check(self) -> frozenset[str]:
        """The server's tool names, from a connection opened for the purpose; RoleError when unreachable."""
        try:
            return run_sync(_names_of(self.server))
        except ConnectionLost as exc:
            raise RoleError(f"cannot reach the tools: {exc}") from None

    async def open(self) -> McpConnection:
        if self.per_conversation:
            return await connect(self.server)
        loop = asyncio.get_running_loop()
        opening = self._shared.get(loop)
        if opening is None or _unusable(opening):
            opening = self._shared[loop] = loop.create_task(connect(self.server))
        return await asyncio.shield(opening)

    async def release(self, connection: Toolbox) -> None:
        if self.per_conversation:
            await connection.aclose()

    async def aclose(self) -> None:
        """Close the shared connection of the running event loop."""
        opening = self._shared.pop(asyncio.get_running_loop(), None)
        if opening is not None and not _unusable(opening):
            await (await opening).aclose()


async def _names_of(server: str) -> frozenset[str]:
    connection = await connect(server)
    await connection.aclose()
    return connection.names


def _unusable(opening: asyncio.Task[McpConnection]) -> bool:
    """Whether a shared connection failed to open or has ended (one still opening is usable)."""
    return opening.done() and (opening.cancelled() or opening.exception() is not None or opening.result().lost)


class ModuleTools:
    """The tools of a Python module: its public functions, by name. A synchronous one runs on a thread."""

    def __init__(self, module_name: str):
        try:
            module = importlib.import_module(module_name)
        except (Exception, SystemExit) as exc:   # user code: an exit on import is bad input, not lobeval's exit
            raise RoleError(f"tools: cannot import module {module_name!r}: {import_failure(exc)}") from exc
        self.functions: dict[str, Callable[..., Any]] = {
            name: value for name, value in vars(module).items() if callable(value) and not name.startswith("_")}
        self.names = frozenset(self.functions)

    def check(self) -> frozenset[str]:
        return self.names

    async def open(self) -> ModuleTools:
        return self

    async def release(self, toolbox: Toolbox) -> None:
        """Nothing to release: the module lives as long as the process."""

    async def aclose(self) -> None:
        """Nothing to close."""

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str | None]:
        function = self.functions[name]
        try:
            if inspect.iscoroutinefunction(function):
                return await function(**arguments), None
            return await asyncio.to_thread(function, **arguments), None
        except TargetUnavailable:
            raise
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"


Toolbox = McpConnection | ModuleTools
"""What a conversation calls its tools through."""


class PromptTarget:
    """The bot object of the target protocol: `start(case)` opens a conversation."""

    def __init__(self, config: PromptTargetConfig, client: LLMClient, offered: list[dict[str, Any]],
                 source: McpTools | ModuleTools):
        self.system_prompt, self.max_tool_rounds = config.system_prompt, config.max_tool_rounds
        self.client, self.offered, self.source = client, offered, source
        self.offered_names = frozenset(tool["function"]["name"] for tool in offered)

    async def start(self, case: dict[str, Any]) -> PromptSession:
        try:
            tools = await self.source.open()
        except ConnectionLost as exc:
            raise TargetUnavailable(f"the tools' MCP server cannot be reached: {exc}") from exc
        try:
            if "reset" in tools.names:
                await harness_call(tools, "reset", {"business_data": case.get("business_data") or {}})
        except BaseException:
            await self.source.release(tools)
            raise
        return (StatefulPromptSession if "state" in tools.names else PromptSession)(self, tools)

    async def aclose(self) -> None:
        """Close what conversations of the running event loop share (a shared MCP connection)."""
        await self.source.aclose()


class PromptSession:
    """One conversation: the chat history, and the tools its calls run on."""

    def __init__(self, target: PromptTarget, tools: Toolbox):
        self._target, self._tools = target, tools
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": target.system_prompt}]

    async def send(self, message: str) -> Reply:
        self.messages.append({"role": "user", "content": message})
        usage, calls = Usage(), []
        try:
            return await self._turn(usage, calls)
        except TargetUnavailable as exc:   # the turn's model requests and calls so far happened all the same
            raise TargetUnavailable(str(exc), usage=reported(usage), function_calls=calls) from exc

    async def _turn(self, usage: Usage, calls: list[dict[str, Any]]) -> Reply:
        """Model requests and tool calls until the model answers in words; what they use is added to `usage`, the
        calls to `calls`."""
        for _ in range(self._target.max_tool_rounds):
            answer = await self._ask(usage)
            self.messages.append(answer)
            if not answer.get("tool_calls"):
                return Reply(answer.get("content") or "", calls, reported(usage))
            for tool_call in answer["tool_calls"]:
                record = await self._run(tool_call["function"])
                calls.append(record)
                self.messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": tool_message(record)})
        self.messages.append({"role": "assistant", "content": NO_REPLY})
        return Reply(NO_REPLY, calls, reported(usage))

    async def close(self) -> None:
        await self._target.source.release(self._tools)

    async def _ask(self, usage: Usage) -> dict[str, Any]:
        """The model's next message; what asking used, its failed attempts included, is added to `usage`."""
        try:
            result = await self._target.client.chat(self.messages, tools=self._target.offered)
        except LLMError as exc:
            usage.merge(exc.usage or Usage())
            raise TargetUnavailable(f"the model endpoint gave up: {exc}") from exc
        usage.merge(result.usage)
        return result.message

    async def _run(self, function: dict[str, Any]) -> dict[str, Any]:
        """One tool call as a record; arguments that are not a JSON object, or a function the model was
        not offered, make a failed call."""
        name = function.get("name", "")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError as exc:
            return failed(name, {}, f"the arguments are not JSON: {exc}")
        if not isinstance(arguments, dict):
            return failed(name, {}, f"the arguments are {type(arguments).__name__}, not a JSON object")
        return await self._execute(name, arguments)

    async def _execute(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run one call of an offered function; another one is a failed call."""
        if name not in self._target.offered_names:
            return failed(name, arguments, f"unknown function {name!r}; available: "
                                           f"{', '.join(sorted(self._target.offered_names))}")
        result, error = await tool_call(self._tools, name, arguments)
        return {"functionName": name, "arguments": arguments, "result": result, "error": error}


class StatefulPromptSession(PromptSession):
    """A conversation whose tools offer `state`, for the end-state check: the backend's state, and calls
    run straight on the tools (the expected calls, replayed as a perfect agent would make them)."""

    async def state(self) -> Any:
        return await harness_call(self._tools, "state", {})

    async def apply(self, function_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [await self._execute(call["functionName"], call.get("arguments") or {}) for call in function_calls]


async def tool_call(tools: Toolbox, name: str, arguments: dict[str, Any]) -> tuple[Any, str | None]:
    """(result, error) of one call; TargetUnavailable when the MCP server went away."""
    try:
        return await tools.call(name, arguments)
    except ConnectionLost as exc:
        raise TargetUnavailable(f"the tools' MCP server went away: {exc}") from exc


async def harness_call(tools: Toolbox, name: str, arguments: dict[str, Any]) -> Any:
    """A call of one of lobeval's own tools (`reset`, `state`); a RuntimeError when it failed."""
    result, error = await tool_call(tools, name, arguments)
    if error is not None:
        raise RuntimeError(f"the {name} tool failed: {error}")
    return result


def failed(name: str, arguments: dict[str, Any], error: str) -> dict[str, Any]:
    return {"functionName": name, "arguments": arguments, "result": None, "error": error}


def tool_message(record: dict[str, Any]) -> str:
    """What the model reads back: the result, or {"error": message}."""
    outcome = record["result"] if record["error"] is None else {"error": record["error"]}
    return json.dumps(outcome, ensure_ascii=False, default=str)


def reported(usage: Usage) -> dict[str, float | None]:
    """The reply's usage: requests sent, tokens (those read from the provider's prompt cache too), and cost (None
    when the model's price is unknown)."""
    return {name: getattr(usage, name) for name in USAGE_FIELDS}
