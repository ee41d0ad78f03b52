"""The sample support desk's backend served over MCP: the functions of tools.json, run by SupportBackend.

    python -m lobeval.samples.support_tickets.mcp_server                  # stdio
    python -m lobeval.samples.support_tickets.mcp_server --port 8765      # streamable HTTP, http://127.0.0.1:8765/mcp

Each tool is listed with tools.json's description and JSON Schema, and annotated from its effect
(`readOnlyHint` true for a read, false for a write); a call runs `SupportBackend.call`, so the
arguments are checked and the business rules applied exactly as in the in-process bot, and a refused
call is a tool error (`isError`) carrying the backend's message. Two more tools serve lobeval, not the
bot: `reset` (a fresh state, seeded with a case's `business_data`: for a server shared between
conversations) and `state` (the tickets and action items, for the end-state check).

The server is MCP's low-level `Server` rather than `MCPServer` (FastMCP before mcp 2): MCPServer
derives each schema from a Python signature and validates, coerces and drops arguments with pydantic
before the function runs, so the model would neither see tools.json's schemas nor meet the backend's
own refusals.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from lobeval.samples.support_tickets.backend import SupportBackend, load_tools
from lobeval.samples.support_tickets.bot import DATA_DIR, TOOLS_PATH

NAME = "lobeval-support-tickets"
RESET = types.Tool(
    name="reset", description="Start from a fresh state: the CSV data plus the case's own records.",
    input_schema={"type": "object", "properties": {"business_data": {
        "type": "object", "description": "The case's records by entity (ticket, action), as in dataset.jsonl."}}},
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
STATE = types.Tool(
    name="state", description="The business state: tickets and action items by id.",
    input_schema={"type": "object", "properties": {}},
    annotations=types.ToolAnnotations(read_only_hint=True))


class Desk:
    """The one backend a server process holds; `reset` replaces it."""

    def __init__(self, data_dir: Path, tools_path: Path):
        self.data_dir, self.tools_path = data_dir, tools_path
        self.backend = SupportBackend(data_dir, tools_path)

    def reset(self, business_data: dict[str, Any] | None = None) -> dict[str, Any]:
        self.backend = SupportBackend(self.data_dir, self.tools_path, business_data)
        return {"status": "reset"}

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name == RESET.name:
            return _result(self.reset(arguments.get("business_data")))
        if name == STATE.name:
            return _result(self.backend.state())
        record = self.backend.call(name, arguments)
        if record["error"] is not None:
            return types.CallToolResult(content=[types.TextContent(text=record["error"])], is_error=True)
        return _result(record["result"])


def _result(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value, ensure_ascii=False))],
                                structured_content=value)


def listed_tools(tools_path: Path) -> list[types.Tool]:
    """tools.json's functions as MCP tools annotated with their effect, then `reset` and `state`."""
    return [types.Tool(name=tool["function"]["name"], description=tool["function"].get("description"),
                       input_schema=tool["function"]["parameters"],
                       annotations=types.ToolAnnotations(read_only_hint=tool["effect"] == "read"))
            for tool in load_tools(tools_path)] + [RESET, STATE]


def build_server(data_dir: Path = DATA_DIR, tools_path: Path = TOOLS_PATH) -> Server:
    desk, tools = Desk(data_dir, tools_path), listed_tools(tools_path)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return desk.call(params.name, params.arguments or {})

    return Server(NAME, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT/mcp (default: stdio)")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--tools", type=Path, default=TOOLS_PATH)
    args = parser.parse_args(argv)
    server = build_server(args.data_dir, args.tools)
    if args.port is None:
        anyio.run(serve_stdio, server)
    else:
        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
