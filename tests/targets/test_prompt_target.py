"""The model-and-prompt target: FakeOpenAI plays the model, the sample backend serves the tools over MCP
(or a module's functions do)."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psutil
import pytest

from lobeval.core.errors import ConfigError, RecordError, RoleError, TargetUnavailable
from lobeval.models.llm import PRICES
from lobeval.targets.prompt_target import NO_REPLY, load_prompt_target
from lobeval.samples.support_tickets.bot import TOOLS_PATH
from lobeval.core.protocol import Reply
from lobeval.targets.targets import check_target, load_target
from lobeval.models.testing import FakeOpenAI, text, tool_calls
from lobeval.cli import main
from helpers import REPO

SHIPPED = Path(__file__).resolve().parents[2] / "scenarios" / "support_tickets" / "prompt_target.json"
SAMPLE_SERVER = "python -m lobeval.samples.support_tickets.mcp_server"
WAIT_S = 10.0
TICKET = {"title": "Badge reader broken", "description": "Door 2 ignores badges.", "department_code": "IT",
          "priority": "High", "workflow_type": "Standard", "expected_outcome": "Door 2 opens with a badge.",
          "customer_visible": False}
CASE = {"business_data": {"ticket": {"id": "TKT-9001", "title": "Seeded by the case", "priority": "Low"}}}
NOTES_MODULE = '''
NOTES = {}

def add_note(text):
    NOTES[f"N-{len(NOTES) + 1}"] = text
    return {"id": f"N-{len(NOTES)}"}

async def explode(reason):
    raise ValueError(f"the disk is full ({reason})")

def reset(business_data):
    NOTES.clear()
    NOTES.update(business_data.get("notes", {}))

def state():
    return {"notes": dict(NOTES)}
'''
NOTES_TOOLS = [{"type": "function", "effect": "write", "function": {"name": name, "description": name, "parameters": {
    "type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]}}}
    for name, argument in (("add_note", "text"), ("explode", "reason"))]


@pytest.fixture
def model(monkeypatch, tmp_path):
    """The fake model endpoint; its policy is set by each test."""
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
        for name in ("LOBEVAL_MODEL", "LOBEVAL_TARGET_MODEL", "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD",
                     "LOBEVAL_PRICES"):
            monkeypatch.delenv(name, raising=False)
        yield fake


def spec(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "prompt_target.json"
    path.write_text(json.dumps({"model": "gpt-4o-mini", "system_prompt": "You run the support desk.",
                                "tools": {"mcp": SAMPLE_SERVER}, "tools_file": str(TOOLS_PATH), **changes}))
    return path


@pytest.fixture
def notes(tmp_path, monkeypatch):
    """A prompt target whose tools are the functions of a module."""
    (tmp_path / "desk_notes.py").write_text(NOTES_MODULE)
    (tmp_path / "notes_tools.json").write_text(json.dumps(NOTES_TOOLS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return spec(tmp_path, tools={"python": "desk_notes"}, tools_file="notes_tools.json")


def after_tools(calls, reply=lambda result: f"Done: {result}"):
    """A model that makes `calls` when the user speaks and answers in text once it reads the last result."""
    def policy(request):
        last = request["messages"][-1]
        if last["role"] == "tool":
            return text(reply(json.loads(last["content"])))
        return tool_calls(calls)
    return policy


def run(coroutine):
    return asyncio.run(coroutine)


async def exchange(target, *messages: str, case=CASE):
    """The replies to `messages` in one conversation, and its state at the end (None when not offered)."""
    session = await target.start(case)
    try:
        replies = [await session.send(message) for message in messages]
        return replies, await session.state() if hasattr(session, "state") else None
    finally:
        await session.close()


def test_calls_go_to_the_mcp_server_and_are_recorded_with_their_results(model, tmp_path):
    model.policy = after_tools([("create_support_ticket", TICKET), ("get_support_ticket", {"ticket_id": "TKT-9001"})],
                               lambda result: f"Created; TKT-9001 is {result['title']}.")
    (reply,), state = run(exchange(load_prompt_target(spec(tmp_path)), "Open a ticket for the badge reader."))
    assert isinstance(reply, Reply)
    assert reply.text == "Created; TKT-9001 is Seeded by the case."
    created, looked_up = reply.function_calls
    assert (created["functionName"], created["arguments"], created["error"]) == ("create_support_ticket", TICKET, None)
    new_id = created["result"]["ticket_id"]
    assert created["result"]["title"] == TICKET["title"]
    assert looked_up["result"]["title"] == "Seeded by the case" and looked_up["error"] is None
    assert state["tickets"][new_id]["title"] == TICKET["title"]   # the session exposes the server's state tool
    assert state["tickets"]["TKT-9001"]["title"] == "Seeded by the case"   # reset seeded the case's records


def test_the_end_state_check_can_replay_expected_calls_on_the_server(model, tmp_path):
    target = load_prompt_target(spec(tmp_path))

    async def replay():
        session = await target.start(CASE)
        try:
            done = await session.apply([{"functionName": "create_support_ticket", "arguments": TICKET},
                                        {"functionName": "delete_everything", "arguments": {}}])
            return done, await session.state()
        finally:
            await session.close()

    (created, unknown), state = run(replay())
    assert state["tickets"][created["result"]["ticket_id"]]["title"] == TICKET["title"]
    assert unknown["error"].startswith("unknown function 'delete_everything'")
    assert model.count == 0


def test_a_refused_tool_call_is_a_failed_call_the_model_reads(model, tmp_path):
    model.policy = after_tools([("create_support_ticket", {**TICKET, "department_code": "MOON"})],
                               lambda result: f"Sorry: {result['error']}")
    (reply,), state = run(exchange(load_prompt_target(spec(tmp_path)), "Open a ticket in MOON."))
    (call,) = reply.function_calls
    assert call["result"] is None and "'MOON' is not a valid department code" in call["error"]
    assert reply.text.startswith("Sorry: 'MOON' is not a valid department code")
    assert not any(ticket["title"] == TICKET["title"] for ticket in state["tickets"].values())


def test_a_function_that_raises_is_a_failed_call(model, notes):
    model.policy = after_tools([("add_note", {"text": "call Bo"}), ("explode", {"reason": "test"})],
                               lambda result: f"Failed: {result['error']}")
    (reply,), state = run(exchange(load_prompt_target(notes), "Note it down.", case={}))
    added, exploded = reply.function_calls
    assert (added["result"], added["error"]) == ({"id": "N-1"}, None)
    assert (exploded["result"], exploded["error"]) == (None, "ValueError: the disk is full (test)")
    assert reply.text == "Failed: ValueError: the disk is full (test)"
    assert state == {"notes": {"N-1": "call Bo"}}


def test_bad_arguments_and_functions_not_offered_fail_without_running(model, notes):
    model.policy = after_tools([("add_note", {"text": "x"}), ("reset", {"business_data": {}}), ("state", {})])
    model.fail_next("bad_tool_args")   # the first request calls add_note with arguments cut short
    replies, state = run(exchange(load_prompt_target(notes), "Go.", "Again.",
                                  case={"business_data": {"notes": {"N-7": "y"}}}))
    (cut_short,) = replies[0].function_calls
    assert (cut_short["functionName"], cut_short["arguments"]) == ("add_note", {})
    assert cut_short["error"].startswith("the arguments are not JSON")
    assert [call["error"] for call in replies[1].function_calls] == [
        None, "unknown function 'reset'; available: add_note, explode",
        "unknown function 'state'; available: add_note, explode"]
    assert state == {"notes": {"N-7": "y", "N-2": "x"}}


def test_usage_is_every_model_call_of_the_turn(model, tmp_path):
    model.policy = after_tools([("get_statuses", {})])
    (reply,), _ = run(exchange(load_prompt_target(spec(tmp_path)), "Which statuses are there?"))
    assert model.count == 2
    usage = reply.usage
    assert usage["requests"] == 2 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    price = PRICES["gpt-4o-mini"]
    expected = (usage["prompt_tokens"] * price["input"] + usage["completion_tokens"] * price["output"]) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected)


def test_the_prompt_tokens_the_endpoint_read_from_its_cache_are_the_targets_and_priced_so(model, tmp_path,
                                                                                          monkeypatch):
    price = {"input": 5.0, "output": 15.0, "cached_input": 2.5}
    (tmp_path / "prices.json").write_text(json.dumps({"gpt-4o-mini": price}))
    monkeypatch.setenv("LOBEVAL_PRICES", str(tmp_path / "prices.json"))
    model.prompt_cache = True   # the endpoint caches a repeated prefix of 1,024 tokens or more, as OpenAI does
    model.policy = lambda request: text("Noted.")
    long_prompt = "You run the support desk. " * 300
    target = load_prompt_target(spec(tmp_path, system_prompt=long_prompt))
    (first, second), _ = run(exchange(target, "Hello.", "Anything else?"))
    assert first.usage["cached_prompt_tokens"] == 0
    cached = second.usage["cached_prompt_tokens"]
    assert 1024 <= cached < second.usage["prompt_tokens"] and cached % 128 == 0
    expected = ((second.usage["prompt_tokens"] - cached) * price["input"] + cached * price["cached_input"]
                + second.usage["completion_tokens"] * price["output"]) / 1e6
    assert second.usage["cost_usd"] == pytest.approx(expected)


def test_a_model_still_calling_tools_when_its_rounds_run_out(model, notes):
    model.policy = lambda request: tool_calls([("add_note", {"text": "again"})])
    target = load_prompt_target(spec(notes.parent, tools={"python": "desk_notes"}, tools_file="notes_tools.json",
                                     max_tool_rounds=3))
    (reply,), _ = run(exchange(target, "Loop."))
    assert (reply.text, len(reply.function_calls), model.count) == (NO_REPLY, 3, 3)


def test_a_model_endpoint_that_gives_up_is_target_unavailable(model, notes):
    model.fail_next("401")
    with pytest.raises(TargetUnavailable, match="the model endpoint gave up"):
        run(exchange(load_prompt_target(notes), "Hello?"))


def server_processes() -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True)
            if "lobeval.samples.support_tickets.mcp_server" in " ".join(child.cmdline())]


def test_a_server_that_dies_mid_conversation_is_target_unavailable(model, tmp_path):
    model.policy = after_tools([("get_statuses", {})])
    target = load_prompt_target(spec(tmp_path))

    async def conversation():
        session = await target.start(CASE)
        try:
            await session.send("Statuses?")
            (server,) = server_processes()
            server.kill()
            server.wait(WAIT_S)
            await session.send("And again?")
        finally:
            await session.close()

    with pytest.raises(TargetUnavailable, match="MCP server went away") as raised:
        run(conversation())
    # the turn's model request (the tool call the dead server could not run) is still counted
    assert raised.value.usage["requests"] == 1 and model.count == 3
    assert raised.value.usage["prompt_tokens"] > 0 and raised.value.usage["cost_usd"] > 0


def test_a_shared_server_serves_every_conversation_until_closed(model, tmp_path):
    model.policy = after_tools([("create_support_ticket", TICKET)])
    target = load_prompt_target(spec(tmp_path, tools={"mcp": SAMPLE_SERVER, "per_conversation": False}))

    async def two_conversations():
        (_,), first = await exchange(target, "Create it.")
        (_,), second = await exchange(target, "Create it.")
        servers = server_processes()
        await target.aclose()
        return first, second, servers

    first, second, servers = run(two_conversations())
    assert len(servers) == 1
    assert set(first["tickets"]) == set(second["tickets"])   # reset gave the second conversation a fresh state
    _, alive = psutil.wait_procs(servers, timeout=WAIT_S)
    assert not alive


def test_the_shipped_target_uses_the_environments_model(model, monkeypatch):
    monkeypatch.setenv("LOBEVAL_TARGET_MODEL", "gpt-4o-mini")
    model.policy = after_tools([("get_priority_levels", {})], lambda result: ", ".join(result["priority_levels"]))
    (reply,), state = run(exchange(load_prompt_target(SHIPPED), "Which priorities?"))
    assert reply.text == "Low, Medium, High, Critical"
    assert model.requests[0]["model"] == "gpt-4o-mini"
    assert model.requests[0]["messages"][0]["content"].startswith("You are the support desk assistant")
    assert {tool["function"]["name"] for tool in model.requests[0]["tools"]} >= {"create_support_ticket", "start_over"}
    assert "effect" not in model.requests[0]["tools"][0]
    assert set(state) == {"tickets", "action_items"}


@pytest.mark.parametrize("changes, field", [
    ({"tools": {"mcp": 3}}, "tools.mcp"),
    ({"tools": {"mcp": SAMPLE_SERVER, "python": "x"}}, "tools"),
    ({"tools": {"mcp": SAMPLE_SERVER, "per_conversation": "yes"}}, "tools.per_conversation"),
    ({"tools": {"python": "desk_notes", "per_conversation": True}}, "tools.per_conversation"),
    ({"max_tool_rounds": 0}, "max_tool_rounds"),
    ({"temperature": 0}, "temperature"),
])
def test_a_malformed_spec_names_the_field(model, tmp_path, changes, field):
    with pytest.raises(RecordError) as caught:
        load_prompt_target(spec(tmp_path, **changes))
    assert caught.value.field == field


def test_functions_the_tools_do_not_define_are_refused_at_load(model, tmp_path):
    tools = json.loads(TOOLS_PATH.read_text()) + [{"type": "function", "effect": "write",
                                                   "function": {"name": "teleport", "parameters": {"type": "object"}}}]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    with pytest.raises(RoleError, match="define no teleport"):
        load_prompt_target(spec(tmp_path, tools_file="tools.json"))


def test_no_model_anywhere_is_a_configuration_error(model, notes):
    with pytest.raises(ConfigError, match="no target model is configured"):
        load_prompt_target(spec(notes.parent, model=None, tools={"python": "desk_notes"},
                                tools_file="notes_tools.json"))


@pytest.mark.parametrize("tools, shared", [
    ({"mcp": SAMPLE_SERVER, "per_conversation": False}, "one MCP server shared by all conversations"),
    ({"python": "desk_notes"}, "the module 'desk_notes'"),
])
def test_tools_with_one_state_for_all_conversations_are_refused_at_concurrency_above_1(
        model, notes, tmp_path, monkeypatch, capsys, tools, shared):
    target = spec(tmp_path, tools=tools, tools_file="notes_tools.json" if "python" in tools else str(TOOLS_PATH))
    with pytest.raises(RoleError, match=f"its tools are {shared}.*--concurrency 2 would run 2 conversations"):
        load_target(str(target), concurrency=2)
    check_target(str(target), 1)   # one conversation at a time is fine
    monkeypatch.setattr("lobeval.workspace.runs.RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    assert main(["run", "--target", str(target), "--concurrency", "2", "--run-id", "shared"]) == 2
    assert "use --concurrency 1, or an MCP server started per conversation" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()   # refused before anything was written


def test_a_server_per_conversation_runs_at_any_concurrency(model, tmp_path):
    check_target(str(spec(tmp_path)), 8)
