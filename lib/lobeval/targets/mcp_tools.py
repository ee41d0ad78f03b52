"""MCP servers, as lobeval meets them: a suite's tools.json made from a server's tools, and the
connection a target calls its tools through.

A server is named by a string: a streamable HTTP URL (`http://127.0.0.1:8765/mcp`) or a command line
that starts it on stdio (`python -m pkg.server --flag`; a leading `python` or `python3` is the
interpreter running lobeval, so the server sees the same installed packages). A stdio server gets the
MCP SDK's default environment (PATH, HOME, ... but no keys): give it more through the command line.

Two tool names belong to lobeval, not to the bot: `reset` (start from a fresh state, seeded with a
case's `business_data`) and `state` (the backend's state, for the end-state check). A server may offer
them; they are never written to tools.json nor offered to a model.
"""
from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters

from lobeval.core.errors import ConfigError
from lobeval.models.llm import run_sync
from lobeval.core.records import write_json
from lobeval.workspace.suite import Ask, settle_effects

HARNESS_TOOLS = ("reset", "state")
CONNECT_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 10.0
MAX_PAGES = 100
"""tools/list pages read at most: a server whose cursor never ends cannot hang lobeval."""


class ConnectionLost(Exception):
    """The MCP server could not be reached, or the connection to it ended."""


def server_parameters(server: str) -> str | StdioServerParameters:
    """A URL for streamable HTTP, or the command line to start a stdio server."""
    if server.startswith(("http://", "https://")):
        return server
    try:
        words = shlex.split(server)
    except ValueError as exc:
        raise ConfigError(f"MCP server {server!r}: not a command line ({exc})") from None
    if not words:
        raise ConfigError("MCP server: empty; give a command line or an http:// URL")
    command = sys.executable if words[0] in ("python", "python3") else words[0]
    return StdioServerParameters(command=command, args=words[1:])


class McpConnection:
    """One connection to an MCP server, held open by a task of its own: any task of the event loop may
    call through it or close it (the SDK's transports must be closed by the task that opened them)."""

    def __init__(self, server: str, client: Client, tools: list[types.Tool], task: asyncio.Task[None],
                 stop: asyncio.Event):
        self.server, self.tools = server, tools
        self.names = frozenset(tool.name for tool in tools)
        self._client, self._task, self._stop = client, task, stop

    @property
    def lost(self) -> bool:
        return self._task.done()

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str | None]:
        """(result, error) of one tool call; error is the tool's message when it failed. ConnectionLost
        when the server is gone."""
        if self.lost:
            raise ConnectionLost(f"MCP server {self.server!r}: the connection has ended")
        try:
            result = await self._client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise ConnectionLost(f"MCP server {self.server!r}: {exc.message}") from exc
            return None, f"MCP error {exc.code}: {exc.message}"
        return outcome(result)

    async def aclose(self) -> None:
        """End the connection (a stdio server is stopped); waits at most CLOSE_TIMEOUT_S."""
        self._stop.set()
        _, pending = await asyncio.wait({self._task}, timeout=CLOSE_TIMEOUT_S)
        for task in pending:
            task.cancel()


async def connect(server: str) -> McpConnection:
    """Open a connection and list the server's tools; ConnectionLost when that fails or takes longer
    than CONNECT_TIMEOUT_S."""
    parameters = server_parameters(server)
    ready: asyncio.Future[tuple[Client, list[types.Tool]]] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(_hold(parameters, ready, stop), name=f"mcp {server}")
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            client, tools = await ready
    except TimeoutError:
        task.cancel()
        raise ConnectionLost(f"MCP server {server!r}: no answer within {CONNECT_TIMEOUT_S:g} s") from None
    except ConnectionLost as exc:
        raise ConnectionLost(f"MCP server {server!r}: {exc}") from None
    except BaseException:
        task.cancel()
        raise
    return McpConnection(server, client, tools, task, stop)


async def _hold(parameters: str | StdioServerParameters, ready: asyncio.Future, stop: asyncio.Event) -> None:
    """The connection's own task: open it, hand over the client and tools, keep it until `stop`."""
    try:
        async with Client(parameters) as client:
            ready.set_result((client, await _list_tools(client)))
            await stop.wait()
    except Exception as exc:   # an ExceptionGroup from a transport that failed, OSError from a command
        if not ready.done():
            ready.set_exception(ConnectionLost(_cause(exc)))


async def _list_tools(client: Client) -> list[types.Tool]:
    tools, cursor = [], None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _cause(exc: BaseException) -> str:
    """The first real error inside nested exception groups, in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def outcome(result: types.CallToolResult) -> tuple[Any, str | None]:
    """(result, error) of a tool's answer: its structured content, else its text (as JSON when it is
    JSON); a tool error's text as the error."""
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    if result.is_error:
        return None, text or "the tool failed without a message"
    if result.structured_content is not None:
        return result.structured_content, None
    try:
        return json.loads(text), None
    except ValueError:
        return text or None, None


def effect_from_annotations(tool: types.Tool) -> str | None:
    """read when readOnlyHint is true; write when destructiveHint is true or readOnlyHint false; else None."""
    hints = tool.annotations
    if hints is None:
        return None
    if hints.read_only_hint is True:
        return "read"
    if hints.destructive_hint is True or hints.read_only_hint is False:
        return "write"
    return None


def tools_from_mcp(server: str, *, effects: dict[str, str] | None = None, ask: Ask | None = None) -> list[dict]:
    """The server's tools as tools.json entries, the harness's own `reset` and `state` left out.

    Each tool's effect is taken from `effects` (name → "read" | "write"), else from its annotations,
    else from `ask(name)`; without `ask`, tools left without an effect are a ConfigError naming them.
    A server that cannot be reached is a ConfigError too.
    """
    listed = [tool for tool in run_sync(_listed(server)) if tool.name not in HARNESS_TOOLS]
    found = settle_effects(f"MCP server {server!r}", {tool.name: effect_from_annotations(tool) for tool in listed},
                           dict(effects or {}), ask, "their annotations set neither readOnlyHint nor destructiveHint")
    return [tool_entry(tool, found[tool.name]) for tool in listed]


async def _listed(server: str) -> list[types.Tool]:
    try:
        connection = await connect(server)
    except ConnectionLost as exc:
        raise ConfigError(f"cannot list the tools: {exc}") from None
    await connection.aclose()
    return connection.tools


def tool_entry(tool: types.Tool, effect: str) -> dict[str, Any]:
    """One tools.json entry."""
    return {"type": "function", "effect": effect,
            "function": {"name": tool.name, "description": tool.description or "", "parameters": tool.input_schema}}


def write_tools_json(tools: list[dict[str, Any]], out: str | Path) -> Path:
    """Write tools.json whole or not at all."""
    return write_json(out, tools)
