"""The sample bot's model-driven policy, against the fake OpenAI server."""
from __future__ import annotations

import asyncio
import json
import sys

import pytest

from lobeval.core.errors import ConfigError, TargetUnavailable
from lobeval.models.llm import LLMClient, resolve_model
from lobeval.core.records import Case
from lobeval.samples.support_tickets import SupportTicketBot
from lobeval.samples.support_tickets.llm_policy import GAVE_UP, MAX_ROUNDS
from lobeval.simulation.simulate import converse
from lobeval.targets.targets import load_target
from lobeval.core.tokens import prompt_tokens
from lobeval.models.testing import FakeOpenAI, text, tool_calls
from lobeval.simulation.users import ScriptedUser

TICKET = {"title": "Badge reader broken", "description": "Door 2 ignores badges.", "department_code": "IT",
          "priority": "High", "workflow_type": "Standard", "expected_outcome": "Door 2 opens with a badge.",
          "customer_visible": False}


@pytest.fixture
def server(monkeypatch, tmp_path):
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("LOBEVAL_MODEL", "fake-model")
        monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path))
        monkeypatch.delenv("LOBEVAL_TARGET_MODEL", raising=False)
        monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
        yield fake


def after_tool(reply_to_tool):
    """A fake model that calls a tool first and, once it sees the tool's answer, replies in text."""
    def policy(request):
        last = request["messages"][-1]
        if last["role"] == "tool":
            return text(reply_to_tool(json.loads(last["content"])))
        return tool_calls([("create_support_ticket", TICKET)])
    return policy


def exchange(message: str):
    """(bot, greeting, reply, end state) of one user message to a bot configured from the environment."""
    bot = SupportTicketBot()

    async def run():
        session = await bot.start({})
        greeting = await session.greeting()
        reply = await session.send(message)
        return greeting, reply, await session.state()

    return (bot, *asyncio.run(run()))


def test_a_tool_call_is_executed_and_reported(server):
    server.policy = after_tool(lambda result: f"Done: created ticket {result['ticket_id']}.")
    bot, greeting, reply, state = exchange("Please open a ticket for the broken badge reader.")
    assert bot.policy == "llm"
    [call] = reply.function_calls
    assert (call["functionName"], call["arguments"], call["error"]) == ("create_support_ticket", TICKET, None)
    ticket_id = call["result"]["ticket_id"]
    assert reply.text == f"Done: created ticket {ticket_id}."
    assert state["tickets"][ticket_id]["title"] == "Badge reader broken"
    first = server.requests[0]
    assert first["messages"][0]["role"] == "system" and "confirm" in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "assistant", "content": greeting.text}
    assert all("effect" not in tool for tool in first["tools"])
    assert "create_support_ticket" in [tool["function"]["name"] for tool in first["tools"]]
    # Two model calls in the turn (the tool call, then the text), each billed for its messages and tools.
    prompt = sum(prompt_tokens(request["messages"], request["tools"]) for request in server.requests)
    assert len(server.requests) == 2 and reply.usage["prompt_tokens"] == prompt and reply.usage["completion_tokens"] > 0
    assert reply.usage["cost_usd"] is None   # fake-model has no price: unknown, never $0


def test_a_tool_error_is_fed_back_to_the_model(server):
    def policy(request):
        if request["messages"][-1]["role"] == "tool":
            return text("That department does not exist. Which one should I use?")
        return tool_calls([("create_support_ticket", {**TICKET, "department_code": "MKTG"})])

    server.policy = policy
    _, _, reply, state = exchange("Open a ticket for marketing.")
    [call] = reply.function_calls
    assert call["result"] is None and "'MKTG' is not a valid department code" in call["error"]
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"]
    assert json.loads(tool_message["content"]) == {"error": call["error"]}
    assert not any(t["title"] == "Badge reader broken" for t in state["tickets"].values())


def test_a_malformed_tool_call_is_recorded_with_its_error(server):
    server.policy = lambda request: text("Sorry, let me try that again.")
    server.fail_next("bad_tool_args")
    _, _, reply, _ = exchange("Open a ticket.")
    [call] = reply.function_calls
    assert call["functionName"] == "create_support_ticket" and call["arguments"] == {}
    assert call["error"].startswith("arguments are not valid JSON: ")
    assert json.loads(server.requests[1]["messages"][-1]["content"]) == {"error": call["error"]}
    assert reply.text == "Sorry, let me try that again."


def test_a_model_that_never_stops_calling_tools_is_cut_off(server):
    server.policy = lambda request: tool_calls([("get_departments", {})])
    _, _, reply, _ = exchange("What departments are there?")
    assert reply.text == GAVE_UP
    assert len(reply.function_calls) == MAX_ROUNDS == server.count


def test_an_endpoint_failure_is_raised_as_target_unavailable(server):
    server.fail_next("401")
    with pytest.raises(TargetUnavailable, match="^the bot's model endpoint gave up: .*HTTP 401"):
        exchange("Hello")


def test_a_conversation_whose_bot_model_gave_up_is_a_machinery_error(server, monkeypatch):
    bot = SupportTicketBot("llm")
    # Retries that exhaust quickly: two attempts, short waits.
    bot._client = LLMClient(resolve_model("target"), role="target", cache=False, max_attempts=2, backoff=(0.01, 0.02))
    monkeypatch.setattr(sys.modules[__name__], "the_bot", lambda: bot, raising=False)
    server.fail_next("500", times=2)
    case = Case(case_id="create-001", scenario_name="create_ticket", user_instructions="Open a ticket.")
    record = asyncio.run(converse(case, 0, load_target(f"{__name__}:the_bot"), ScriptedUser()))
    assert record["termination"]["reason"] == "target_unavailable"
    assert record["error"].startswith("send failed: TargetUnavailable: the bot's model endpoint gave up: ")
    assert "gave up after 2 attempts" in record["error"] and server.count == 2


def test_the_policy_is_chosen_from_the_argument_then_the_environment(server, monkeypatch):
    assert SupportTicketBot().policy == "llm"
    assert SupportTicketBot("rules").policy == "rules"
    with pytest.raises(ConfigError, match="unknown policy 'magic'"):
        SupportTicketBot("magic")
    monkeypatch.delenv("LOBEVAL_MODEL")
    assert SupportTicketBot().policy == "rules"
    with pytest.raises(ConfigError, match="policy 'llm' needs a target model"):
        SupportTicketBot("llm")
