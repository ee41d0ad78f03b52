"""tools.json from an MCP server, over stdio (the sample backend) and streamable HTTP on 127.0.0.1."""
from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import mcp_types as types
import pytest
import uvicorn
from mcp.server.lowlevel import Server

from lobeval.core.errors import ConfigError
from lobeval.targets.mcp_tools import tools_from_mcp, write_tools_json
from lobeval.samples.support_tickets.bot import TOOLS_PATH

SAMPLE_SERVER = "python -m lobeval.samples.support_tickets.mcp_server"
STOP_TIMEOUT_S = 30.0


def hinted(name: str, annotations: types.ToolAnnotations | None) -> types.Tool:
    return types.Tool(name=name, description=f"the {name} tool", annotations=annotations,
                      input_schema={"type": "object", "properties": {"id": {"type": "string"}}})


TOOLS = [hinted("lookup", types.ToolAnnotations(read_only_hint=True)),
         hinted("wipe", types.ToolAnnotations(destructive_hint=True)),
         hinted("append", types.ToolAnnotations(read_only_hint=False, destructive_hint=False)),
         hinted("mystery", None),
         hinted("titled", types.ToolAnnotations(title="Titled, nothing more")),
         hinted("state", types.ToolAnnotations(read_only_hint=True))]


def annotated_server() -> Server:
    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    return Server("annotations", on_list_tools=list_tools)


@contextlib.contextmanager
def serving(server: Server) -> Iterator[str]:
    """The server's streamable HTTP endpoint on 127.0.0.1, in a thread, for the duration."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()   # a client that connects before uvicorn serves waits in the backlog: nothing to poll for
    web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning"))
    thread = threading.Thread(target=web.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        web.should_exit = True
        thread.join(STOP_TIMEOUT_S)
        sock.close()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(annotated_server()) as address:
        yield address


def test_the_sample_server_over_stdio_gives_back_the_suites_tools_json():
    expected = json.loads(TOOLS_PATH.read_text(encoding="utf-8"))
    assert tools_from_mcp(SAMPLE_SERVER) == expected   # reset and state are the harness's, not the bot's


def test_annotations_give_the_effects_and_the_rest_is_asked(url):
    asked = []

    def ask(name: str) -> str:
        asked.append(name)
        return "write"

    tools = tools_from_mcp(url, ask=ask)
    assert asked == ["mystery", "titled"]
    assert {tool["function"]["name"]: tool["effect"] for tool in tools} == {
        "lookup": "read", "wipe": "write", "append": "write", "mystery": "write", "titled": "write"}
    assert tools[0] == {"type": "function", "effect": "read", "function": {
        "name": "lookup", "description": "the lookup tool",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}


def test_without_a_way_to_ask_the_tools_lacking_an_effect_are_named(url):
    with pytest.raises(ConfigError, match="no effect for 'mystery', 'titled'"):
        tools_from_mcp(url)


def test_overrides_come_first_and_leave_nothing_to_ask(url):
    tools = tools_from_mcp(url, effects={"mystery": "read", "titled": "read", "wipe": "read"},
                           ask=lambda name: pytest.fail(f"asked about {name}"))
    assert {tool["function"]["name"]: tool["effect"] for tool in tools}["wipe"] == "read"


@pytest.mark.parametrize("effects, ask, problem", [
    ({"teleport": "read"}, None, "has no tool 'teleport'"),
    ({"mystery": "delete"}, None, "effect 'delete', expected read or write"),
    ({"mystery": "read"}, lambda name: "maybe", "tool 'titled': effect 'maybe'"),
])
def test_bad_effects_are_refused(url, effects, ask, problem):
    with pytest.raises(ConfigError, match=problem):
        tools_from_mcp(url, effects=effects, ask=ask)


def test_a_server_that_cannot_be_reached_is_bad_input():
    with pytest.raises(ConfigError, match="cannot list the tools"):
        tools_from_mcp("python -c 'import sys; sys.exit(3)'")


def test_tools_json_is_written_whole(url, tmp_path):
    tools = tools_from_mcp(url, effects={"mystery": "read", "titled": "read"})
    out = write_tools_json(tools, tmp_path / "suite" / "tools.json")
    assert json.loads(out.read_text(encoding="utf-8")) == tools
    assert [path.name for path in out.parent.iterdir()] == ["tools.json"]
