"""lobeval against the OpenAI-compatible servers teams run themselves (llama-cpp-python, Ollama, vLLM), played by
FakeOpenAI(local=True): no Batch API, null content refused, tools ignored without tool_choice (and `tool` messages
without tools), a model that never stops unless capped, a stream stopped when its client hangs up; and the bot's tools
prompted (LOBEVAL_TOOLS=prompted) for such a server. Each rule of issues 35 and 47 against it; waits are
events, never measured time."""
from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from lobeval.workflow import pipeline, roles
from lobeval.core.errors import ConfigError, TargetUnavailable
from lobeval.evaluation.evaluate import JUDGES_OFF
from lobeval.judges.judges import CompletionJudge
from lobeval.models.llm import (
    Budget, LLMClient, LLMError, ModelConfig, ReplyError, cap_field, prompted_messages, prompted_reply, request_key,
    resolve_limits, resolve_stream, resolve_tools, scrub_key,
)
from lobeval.targets.prompt_target import load_prompt_target
from lobeval.core.records import Case
from lobeval.analysis.report import user_faults_html
from lobeval.analysis.root_causes import run_root_causes
from lobeval.simulation.simulate import converse
from lobeval.targets.targets import load_target
from lobeval.models.testing import LOCAL_NULL_CONTENT, FakeOpenAI, Fault, text, tool_calls
from lobeval.core.tokens import prompt_tokens, reply_tokens
from lobeval.simulation.users import LLMUser, ScriptedUser
from helpers import REPO, case

NOTES_MODULE = '''
NOTES = {}

def add_note(text):
    NOTES[f"N-{len(NOTES) + 1}"] = text
    return {"id": f"N-{len(NOTES)}"}
'''
NOTES_TOOLS = [{"type": "function", "effect": "write", "function": {"name": "add_note", "description": "Adds a note.",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]
ENV_OFF = ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL", "AZURE_OPENAI_ENDPOINT",
           "LOBEVAL_BUDGET_USD", "LOBEVAL_PRICES", "LOBEVAL_TIMEOUT_S", "LOBEVAL_MAX_TOKENS", "LOBEVAL_USER_MAX_TOKENS",
           "LOBEVAL_JUDGE_TIMEOUT_S", "LOBEVAL_TARGET_TIMEOUT_S", "LOBEVAL_STREAM", "LOBEVAL_TOOLS")
PRICE = {"input": 0.15, "output": 0.6}   # smollm2 priced, so that the budget can be kept


@pytest.fixture
def local(monkeypatch, tmp_path):
    """A local server, and this process configured for it as its docs say (a placeholder key)."""
    with FakeOpenAI(local=True) as fake:
        for name in ENV_OFF:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", "x")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
        yield fake


@pytest.fixture
def notes_target(tmp_path, monkeypatch):
    """A model-and-prompt target whose one tool (a write) is a module's function."""
    (tmp_path / "desk_notes_35.py").write_text(NOTES_MODULE)
    (tmp_path / "notes_tools.json").write_text(json.dumps(NOTES_TOOLS))
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "prompt_target.json"
    path.write_text(json.dumps({"model": "smollm2", "system_prompt": "You keep notes.",
                                "tools": {"python": "desk_notes_35"}, "tools_file": "notes_tools.json"}))
    return path


def client(server: FakeOpenAI, role: str = "judge", **kw) -> LLMClient:
    return LLMClient(ModelConfig("openai", "smollm2", server.base_url), role=role, cache=False,
                     **{"max_attempts": 1, **kw})


# --- deadlines and lengths ---------------------------------------------------------------------------

def test_each_role_has_its_request_timeout_and_completion_cap_from_the_environment():
    env = {"LOBEVAL_TIMEOUT_S": "300", "LOBEVAL_JUDGE_TIMEOUT_S": "900", "LOBEVAL_USER_MAX_TOKENS": "64"}
    assert resolve_limits("user", env).timeout_s == 300 and resolve_limits("user", env).max_tokens == 64
    assert resolve_limits("judge", env).timeout_s == 900 and resolve_limits("judge", env).deadline_s == 2250
    assert resolve_limits("target", {}).timeout_s == 20 and resolve_limits("target", {}).max_tokens == 1024
    assert resolve_limits("judge", {}).max_tokens == 4096 and resolve_limits("embedding", env).max_tokens is None
    with pytest.raises(ConfigError, match=r"^LOBEVAL_USER_MAX_TOKENS='lots': expected a whole number of tokens > 0$"):
        resolve_limits("user", {"LOBEVAL_USER_MAX_TOKENS": "lots"})
    with pytest.raises(ConfigError, match=r"^LOBEVAL_TIMEOUT_S='0': expected a number of seconds > 0$"):
        resolve_limits("judge", {"LOBEVAL_TIMEOUT_S": "0"})


def test_every_request_carries_its_roles_cap_in_the_field_the_endpoint_reads(local, monkeypatch):
    monkeypatch.setenv("LOBEVAL_USER_MAX_TOKENS", "64")
    asyncio.run(client(local, "user").chat([{"role": "user", "content": "hi"}]))
    asyncio.run(client(local, "judge").ask_json([{"role": "user", "content": '{"a": 1}'}], json.loads))
    assert [request["max_tokens"] for request in local.requests] == [64, 4096]
    assert cap_field(ModelConfig("openai", "gpt-5")) == "max_completion_tokens"   # OpenAI's reasoning models
    assert cap_field(ModelConfig("azure", "d", "https://x", "2025-01-01")) == "max_completion_tokens"


def test_a_request_lobeval_abandons_is_closed_on_the_wire(local):
    local.fail_next("hang")
    with pytest.raises(LLMError, match="timed out"):
        asyncio.run(client(local, timeout=0.2).chat([{"role": "user", "content": "hi"}]))
    assert local.hung_up.wait(30) and local.hangups == 1


def test_a_model_that_never_stops_answers_once_capped(local):
    # Without a cap this server's model would generate until the client hangs up; lobeval always caps.
    reply = asyncio.run(client(local, "user", timeout=30).chat([{"role": "user", "content": "hello there"}]))
    assert reply.message["content"] == "hello there" and local.hangups == 0


# --- the tool loop ------------------------------------------------------------------------------------

def notes_policy(request):
    """Calls add_note when it is offered the tool and has not called it yet; answers in words after."""
    if request["messages"][-1]["role"] == "tool":
        return text("Noted.")
    return tool_calls([("add_note", {"text": "call back"})]) if request.get("tools") else text("I have no tools.")


def note_turn(target):
    """One session of `target` asked "Note: call back.": (its reply, the session's messages)."""
    async def turn():
        session = await target.start({})
        try:
            return await session.send("Note: call back."), session.messages
        finally:
            await session.close()

    return asyncio.run(turn())


def test_the_tool_loop_works_against_a_local_server(local, notes_target):
    local.policy = notes_policy
    target = load_prompt_target(notes_target)

    reply, history = note_turn(target)
    assert reply.text == "Noted." and [call["functionName"] for call in reply.function_calls] == ["add_note"]
    assert local.requests[0]["tool_choice"] == "auto"
    assert history[2]["content"] == "" and history[2]["tool_calls"]   # "" where the model said null


def test_calls_run_before_a_machinery_error_stay_in_the_record_with_the_cause_whole(local, notes_target):
    def policy(request):
        if request["messages"][-1]["role"] == "tool":
            raise Fault("500", message=LOCAL_NULL_CONTENT)
        return notes_policy(request)

    local.policy = policy
    target = load_target(str(notes_target), timeout=30)
    record = asyncio.run(converse(Case.model_validate(case()), 0, target, ScriptedUser(), max_turns=2))
    assert record["termination"]["reason"] == "target_unavailable"
    assert [call["functionName"] for call in record["function_calls"]] == ["add_note"]   # the write is kept
    assert record["function_calls"][0]["error"] is None and "id" in record["function_calls"][0]["result"]
    assert LOCAL_NULL_CONTENT in record["error"]


def test_a_null_content_in_the_history_is_what_the_local_server_refuses(local):
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]
    with pytest.raises(LLMError, match="HTTP 500: 7 validation errors"):
        asyncio.run(client(local).chat(history))


# --- --batch ------------------------------------------------------------------------------------------

def test_batch_against_a_server_without_a_batch_api_is_refused_before_anything_runs(local, monkeypatch, tmp_path,
                                                                                      capsys):
    from lobeval.cli import main

    monkeypatch.setenv("LOBEVAL_MODEL", "smollm2")
    monkeypatch.setattr("lobeval.workspace.runs.RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    expected = (f"--batch: the judge model's endpoint ({local.base_url}) has no Batch API (GET /batches answered "
                f"HTTP 404): run without --batch")
    with pytest.raises(ConfigError, match=f"^{expected.replace('(', '[(]').replace(')', '[)]')}$"):
        roles.check(judges=None, batch=True)
    assert main(["run", "--batch", "--run-id", "b", "--cases-per-scenario", "1"]) == 2
    assert capsys.readouterr().err.strip().endswith(expected)
    assert not (tmp_path / "runs" / "b").exists() and local.count == 0


# --- what a run says about itself ---------------------------------------------------------------------

def test_judges_none_sends_nothing_to_the_judge_model_not_even_the_root_causes(local, tmp_path):
    import pandas as pd

    found = asyncio.run(run_root_causes(pd.DataFrame(), {"judges": {"status": JUDGES_OFF}}, {}, tmp_path / "rc.json",
                                        client(local)))
    assert found["status"] == JUDGES_OFF and local.requests == [] and not (tmp_path / "rc.json").exists()


def test_a_failed_user_review_leaves_the_user_unchecked_not_clean():
    rows = [{"case_id": "c1", "trial": 0, "scenario_name": "s", "status": "scored", "user_faults": [],
             "judges": {"status": "run", "user_review": None}},
            {"case_id": "c2", "trial": 0, "scenario_name": "s", "status": "scored", "user_faults": [],
             "judges": {"status": "run", "user_review": {"fault": False}}}]
    page = user_faults_html({"rows": rows, "counts": {}, "metrics": {}})
    assert "No mistake of the simulated user was found by the checks that ran on the 2 scored conversations" in page
    assert "The user-review judge failed on 1 of them: their user is unchecked" in page and "not clean" in page


def test_the_run_says_which_target_policy_user_and_judges_ran(monkeypatch):
    monkeypatch.delenv("LOBEVAL_TOOLS", raising=False)
    models = {"user": {"model": "smollm2", "base_url": "http://127.0.0.1:8000/v1", "provider": "openai"},
              "target": {"model": "smollm2", "base_url": "http://127.0.0.1:8000/v1", "provider": "openai"},
              "judge": None}
    config = {"target": None, "user": "llm", "judges": None}
    assert pipeline.what_ran(config, models) == [
        f"target {roles.DEFAULT_TARGET}: its llm policy, smollm2 at http://127.0.0.1:8000/v1",
        "simulated user: smollm2 at http://127.0.0.1:8000/v1", "judges: not run (no judge model)"]
    offline = pipeline.what_ran({**config, "user": "scripted", "judges": ["none"]}, {"judge": models["user"]})
    assert offline == [f"target {roles.DEFAULT_TARGET}: its rules policy (no target model)",
                       "simulated user: scripted", "judges: switched off (--judges none)"]
    monkeypatch.setenv("LOBEVAL_TOOLS", "prompted")
    monkeypatch.setenv("LOBEVAL_MODEL", "smollm2")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    recorded = pipeline.resolved_models()
    assert recorded["target"]["tools"] == "prompted" and "tools" not in recorded["user"]
    models = {**models, "target": {**models["target"], "tools": "prompted"}}   # as config.json records it
    assert pipeline.what_ran(config, models)[0] == (f"target {roles.DEFAULT_TARGET}: its llm policy, smollm2 at "
                                                    f"http://127.0.0.1:8000/v1, its functions described in the prompt "
                                                    f"(LOBEVAL_TOOLS=prompted)")


# --- resuming with other options ------------------------------------------------------------------------

def test_a_run_resumed_with_other_judge_options_judges_again_and_says_what_it_kept(tmp_path):
    from test_degenerate import glued

    run_dir = tmp_path / "x"
    first = {"run_id": "x", "suite_name": "s", "user": "llm", "judges": None, "batch": True}
    pipeline.start_or_resume(run_dir, first, {})
    glued(run_dir / "01_generate.ipynb", dataset_path="d.jsonl")
    glued(run_dir / "02_simulate.ipynb", conversations_path="c.jsonl", terminations={})
    again = pipeline.start_or_resume(run_dir, {**{k: v for k, v in first.items() if k != "batch"}, "judges": ["goal"]},
                                     {})
    assert again.again == "03_evaluate"
    assert again.notes == ["resuming run x with other options: judges: None then, ['goal'] now; batch: True then, "
                           "False now", "kept: 01_generate, 02_simulate; run again from 03_evaluate with the new options"]
    assert "batch" not in json.loads((run_dir / "config.json").read_text())   # no longer silently kept
    with pytest.raises(ConfigError, match=r"^run x exists with another configuration \(user: 'llm' then, 'scripted' "
                                          r"now\); resume it with the same options \(only judges, batch"):
        pipeline.start_or_resume(run_dir, {**first, "user": "scripted"}, {})


def test_options_absent_from_an_older_config_are_at_their_default():
    assert pipeline.changed_options({"seed": 1}, {"seed": 1, "max_turns": 20}) == []
    assert pipeline.changed_options({"seed": 1}, {"seed": 1, "max_turns": 3, "batch": True}) == ["max_turns", "batch"]


def test_lobeval_run_on_a_folder_begun_with_other_options_exits_2_before_any_notebook_is_written(tmp_path, monkeypatch,
                                                                                                 capsys):
    from test_degenerate import glued
    from lobeval.cli import main

    for name in ENV_OFF:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)
    monkeypatch.setattr("lobeval.workspace.runs.RUNS", tmp_path / "runs")
    run_dir = tmp_path / "runs" / "r"
    pipeline.start_or_resume(run_dir, {"run_id": "r", "suite_name": "support_tickets", "seed": 42,
                                       "suite": str(REPO / "scenarios" / "support_tickets")}, {})
    glued(run_dir / "01_generate.ipynb", dataset_path="d.jsonl")
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    assert main(["run", "--run-id", "r", "--cases-per-scenario", "1", "--seed", "7"]) == 2
    assert "seed: 42 then, 7 now" in capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.name != ".lock"} == before


# --- secrets, estimate, completion judge ----------------------------------------------------------------

def test_a_placeholder_key_is_not_scrubbed_out_of_messages_and_a_real_one_only_as_a_whole_token(monkeypatch):
    config = ModelConfig("openai", "smollm2", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    assert scrub_key(config, "maximum context length exceeded") == "maximum context length exceeded"
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-1234")
    assert scrub_key(config, "bad key local-key-1234; not local-key-12345") == "bad key ***; not local-key-12345"


def test_the_estimate_says_unknown_when_a_role_has_no_price(local, monkeypatch):
    from lobeval.workflow.estimate import estimate, format_estimate

    monkeypatch.setenv("LOBEVAL_MODEL", "smollm2")
    lines = format_estimate(estimate(REPO / "scenarios" / "support_tickets", cases_per_scenario=1, user="llm"))
    total = next(line for line in lines if line.strip().startswith("total"))
    assert "unknown  (no price for: " in total and "0.0000" not in total


def test_a_completion_judge_that_times_out_at_max_turns_keeps_the_conversation(local):
    local.fail_next("hang")
    target = load_target(roles.DEFAULT_TARGET)
    judge = CompletionJudge(client(local, timeout=0.2))
    record = asyncio.run(converse(Case.model_validate(case()), 0, target, ScriptedUser(), judge=judge, max_turns=1))
    assert record["termination"]["reason"] == "max_turns" and record["error"] is None
    assert record["termination"]["judge_reason"].startswith("no verdict: model 'smollm2' (role judge)")
    assert record["termination"]["turns"] == 1 and len(record["messages"]) >= 2


# --- every attempt billed, none repeated as it was (issue 47) --------------------------------------------

def usd(billed):
    return (billed["prompt_tokens"] * PRICE["input"] + billed["completion_tokens"] * PRICE["output"]) / 1e6


@pytest.fixture
def priced(local, monkeypatch, tmp_path):
    (tmp_path / "prices.json").write_text(json.dumps({"smollm2": PRICE}))
    monkeypatch.setenv("LOBEVAL_PRICES", str(tmp_path / "prices.json"))
    monkeypatch.setenv("LOBEVAL_MODEL", "smollm2")
    return local


def bill_of(server, tooled):
    """What the endpoint billed for the requests with tools (the bot's) or without (the user's)."""
    billed = [answer["billed"] for answer in server.answers if bool(answer["request"].get("tools")) == tooled]
    return {"requests": len(billed), "prompt_tokens": sum(b["prompt_tokens"] for b in billed),
            "completion_tokens": sum(b["completion_tokens"] for b in billed)}


@pytest.mark.parametrize("bot", ["sample", "prompt"])
def test_five_empty_replies_are_all_in_the_records_usage_and_the_budget_as_the_endpoint_billed_them(
        priced, notes_target, bot):
    # The user's model answers empty twice, then speaks; the bot's answers empty three times: its turn is given up.
    empty_for_user = iter([True, True])

    def policy(request):
        if request.get("tools") or next(empty_for_user, False):
            raise Fault("empty")
        return text("I need a ticket for a broken badge reader.")

    priced.policy = policy
    budget = Budget(1.0)
    user = LLMUser(LLMClient(ModelConfig("openai", "smollm2", priced.base_url), role="user", cache=False, budget=budget))
    target = load_target(roles.DEFAULT_TARGET if bot == "sample" else str(notes_target), timeout=30)
    record = asyncio.run(converse(Case.model_validate(case()), 0, target, user, budget=budget, max_turns=2))
    assert record["termination"]["reason"] == "target_unavailable"
    assert record["error"].endswith("the model's reply was unusable after 3 attempts: an empty reply (no content, no "
                                    "tool calls)")
    for role, tooled in (("user", False), ("target", True)):
        billed, usage = bill_of(priced, tooled), record["usage"][role]
        assert (usage["requests"], usage["prompt_tokens"], usage["completion_tokens"]) == \
            (3, billed["prompt_tokens"], billed["completion_tokens"]) == (billed["requests"], *list(billed.values())[1:])
        assert usage["cost_usd"] == pytest.approx(usd(billed)) and usage["estimated_tokens"] == 0
    assert budget.spent_usd == pytest.approx(usd(priced.bill())) and priced.bill()["requests"] == 6


def test_no_retry_of_an_unusable_reply_is_the_same_request(priced, notes_target):
    priced.fail_next("empty", times=3)
    target = load_target(str(notes_target), timeout=30)
    record = asyncio.run(converse(Case.model_validate(case()), 0, target, ScriptedUser(), max_turns=2))
    first, second, third = priced.requests
    assert record["termination"]["reason"] == "target_unavailable"
    assert (first["temperature"], second["temperature"], third["temperature"]) == (0.0, 0.7, 0.7)
    nudge = {"role": "user", "content": "(Your last reply could not be used: an empty reply (no content, no tool "
                                        "calls). Answer again.)"}
    assert second["messages"] == third["messages"] == [*first["messages"], nudge]


# --- streamed requests: assembled as one answer, stopped when lobeval hangs up ----------------------------------------

def test_what_is_streamed_by_default_and_by_setting():
    local_server, hosted = ModelConfig("openai", "m", "http://127.0.0.1:8000/v1"), ModelConfig("openai", "gpt-4o-mini")
    assert (resolve_stream(local_server, {}), resolve_stream(hosted, {})) == ("untooled", "none")
    assert resolve_stream(hosted, {"LOBEVAL_STREAM": "on"}) == "all"
    assert resolve_stream(local_server, {"LOBEVAL_STREAM": "off"}) == "none"
    with pytest.raises(ConfigError, match=r"^LOBEVAL_STREAM='yes': expected auto, on or off$"):
        resolve_stream(local_server, {"LOBEVAL_STREAM": "yes"})


def test_a_streamed_answer_is_put_together_as_the_same_result(local, monkeypatch):
    local.policy = lambda request: (tool_calls([("add_note", {"text": "call back " * 5})], content="Noting.")
                                    if request.get("tools") else text("Hello there, how can I help?"))
    said = asyncio.run(client(local, "user").chat([{"role": "user", "content": "hi"}]))
    called = asyncio.run(client(local, "target").chat([{"role": "user", "content": "note"}], tools=NOTES_TOOLS))
    monkeypatch.setenv("LOBEVAL_STREAM", "on")
    streamed = asyncio.run(client(local, "target").chat([{"role": "user", "content": "note"}], tools=NOTES_TOOLS))
    asked = [(bool(request.get("stream")), request.get("stream_options")) for request in local.requests]
    assert asked == [(True, {"include_usage": True}), (False, None), (True, {"include_usage": True})]
    assert said.message == {"role": "assistant", "content": "Hello there, how can I help?"}
    assert streamed.message["content"] == called.message["content"] == "Noting."
    [call] = streamed.message["tool_calls"]
    assert call["function"] == {"name": "add_note", "arguments": json.dumps({"text": "call back " * 5})}
    assert call["id"].startswith("call_")
    billed = [answer["billed"] for answer in local.answers]
    assert [(r.prompt_tokens, r.completion_tokens) for r in (said, called, streamed)] == \
        [(b["prompt_tokens"], b["completion_tokens"]) for b in billed]
    assert said.usage.estimated_tokens == 0 and said.requests == 1


def test_a_stream_without_usage_is_counted_by_lobeval_and_marked_estimated(local):
    local.stream_usage = False   # a server that does not send stream_options' usage chunk
    messages = [{"role": "user", "content": "hello there"}]
    result = asyncio.run(client(local, "user").chat(messages))
    [answer] = local.answers
    assert answer["usage"] is None and result.message["content"] == "hello there"
    expected = (prompt_tokens(messages), reply_tokens(result.message))
    assert (result.prompt_tokens, result.completion_tokens) == expected == tuple(answer["billed"].values())
    assert result.usage.estimated_tokens == sum(expected)


def test_a_stream_lobeval_gives_up_on_mid_way_is_stopped_by_the_server_and_estimated_and_charged(priced):
    local = priced
    local.fail_next("endless")   # a model that writes on and on, until its client hangs up
    budget = Budget(1.0)
    llm = client(local, "judge", timeout=0.5, budget=budget)
    messages = [{"role": "user", "content": "Tell me everything."}]
    with pytest.raises(LLMError, match=r"gave up after 1 attempts; last error: timed out") as caught:
        asyncio.run(llm.chat(messages, attempts=1))
    assert local.hung_up.wait(30) and (local.hangups, local.stopped) == (1, 1)
    used = caught.value.usage
    assert used.requests == 1 and used.prompt_tokens == prompt_tokens(messages)
    assert used.estimated_tokens == used.prompt_tokens + used.completion_tokens   # what it wrote before, counted here
    assert budget.spent_usd > 0 and budget.spent_usd == pytest.approx(usd({"prompt_tokens": used.prompt_tokens,
                                                                           "completion_tokens": used.completion_tokens}))


# --- prompted tools: described in the system message, read from the reply, streamed ---------------------------------

NOTE_CALL = '{"tool_calls": [{"name": "add_note", "arguments": {"text": "call back"}}]}'
DESCRIBED = """\
# Functions

You can call these functions. Each is given with what it does and its parameters as a JSON Schema.

- add_note: Adds a note.
  parameters: {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

Answer in ONE of two ways:
- in words, to the user; or
- to call functions, with only this JSON object and nothing else:
{"tool_calls": [{"name": "<function name>", "arguments": {<its parameters and their values>}}]}
Each call's result then comes back to you in a message that begins "Result of"."""


def test_the_tools_setting_is_native_by_default_and_refuses_what_it_does_not_know():
    assert (resolve_tools({}), resolve_tools({"LOBEVAL_TOOLS": "prompted"})) == ("native", "prompted")
    with pytest.raises(ConfigError, match=r"^LOBEVAL_TOOLS='auto': expected native or prompted$"):
        resolve_tools({"LOBEVAL_TOOLS": "auto"})


def test_a_history_with_calls_is_rewritten_for_a_server_that_knows_nothing_of_tools():
    history = [{"role": "user", "content": "Two notes."},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "add_note", "arguments": '{"text": "a"}'}},
                   {"id": "c2", "type": "function", "function": {"name": "add_note", "arguments": '{"text": "b"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": '{"id": "N-1"}'},
               {"role": "tool", "tool_call_id": "c2", "content": '{"error": "full"}'}]
    assert prompted_messages(history, NOTES_TOOLS) == [
        {"role": "system", "content": DESCRIBED},   # none was there: one is put first
        {"role": "user", "content": "Two notes."},
        {"role": "assistant", "content": '{"tool_calls": [{"name": "add_note", "arguments": {"text": "a"}}, '
                                         '{"name": "add_note", "arguments": {"text": "b"}}]}'},
        {"role": "user", "content": 'Result of add_note (call c1): {"id": "N-1"}\n\n'
                                    'Result of add_note (call c2): {"error": "full"}'}]


@pytest.mark.parametrize("said", [NOTE_CALL, f"Sure, I will note it.\n```json\n{NOTE_CALL}\n```\nDone soon."])
def test_a_prompted_call_is_read_bare_in_a_fence_or_with_text_around_as_a_native_call(said):
    seed = "the request's key"
    expected_id = "call_" + hashlib.sha256(b"the request's key:0").hexdigest()[:16]
    assert prompted_reply({"role": "assistant", "content": said}, frozenset({"add_note"}), seed) == {
        "role": "assistant", "content": "", "tool_calls": [
            {"id": expected_id, "type": "function",
             "function": {"name": "add_note", "arguments": '{"text": "call back"}'}}]}
    words = {"role": "assistant", "content": "I noted {it}."}
    assert prompted_reply(words, frozenset({"add_note"}), seed) is words   # no "tool_calls": an answer in words


@pytest.mark.parametrize("said, problem", [
    ('{"tool_calls": [{"name": "add_note", "arguments": {"text": "call back"}]}',
     "the JSON of the tool calls does not parse (Expecting ',' delimiter: line 1 column 72 (char 71))"),
    ('{"tool_calls": [{"name": "add_notes", "arguments": {}}]}',
     "unknown function 'add_notes'; the functions are add_note"),
    ('{"tool_calls": [{"name": "add_note", "arguments": "call back"}]}',
     "the arguments of add_note must be a JSON object, not a string"),
    ('{"tool_calls": []}', '"tool_calls" must be a list of one or more calls, not []'),
])
def test_a_prompted_call_that_cannot_be_read_is_an_unusable_reply(said, problem):
    with pytest.raises(ValueError) as caught:
        prompted_reply({"role": "assistant", "content": said}, frozenset({"add_note"}), "k")
    assert str(caught.value) == problem


def prompted_notes_policy(request):
    """A model told of add_note in words: calls it (in a fence, with text around) until its result comes back."""
    if request["messages"][-1]["content"].startswith("Result of add_note"):
        return text("Noted.")
    return text(f"Let me note that.\n```json\n{NOTE_CALL}\n```") if "# Functions" in request["messages"][0]["content"] \
        else text("I have no tools.")


def test_a_prompted_call_is_recorded_and_its_result_goes_back_as_a_user_message(local, notes_target, monkeypatch):
    monkeypatch.setenv("LOBEVAL_TOOLS", "prompted")
    local.policy = prompted_notes_policy
    target = load_prompt_target(notes_target)

    reply, history = note_turn(target)
    [call] = reply.function_calls
    assert reply.text == "Noted." and call["functionName"] == "add_note" and call["arguments"] == {"text": "call back"}
    assert call["error"] is None and "id" in call["result"]
    first, second = local.requests
    for request in (first, second):   # nothing of tools on the wire; streamed and capped like every streamed request
        assert "tools" not in request and "tool_choice" not in request
        assert (request["stream"], request["max_tokens"]) == (True, 1024)
    assert first["messages"] == [{"role": "system", "content": f"You keep notes.\n\n{DESCRIBED}"},
                                 {"role": "user", "content": "Note: call back."}]
    call_id = history[2]["tool_calls"][0]["id"]   # drawn from the request it answers
    asked = {"messages": first["messages"], "temperature": 0.0, "max_tokens": 1024}
    assert call_id == "call_" + hashlib.sha256(f"{request_key(asked)}:0".encode()).hexdigest()[:16]
    assert second["messages"][2:] == [{"role": "assistant", "content": NOTE_CALL},
                                      {"role": "user",
                                       "content": f"Result of add_note (call {call_id}): {json.dumps(call['result'])}"}]


@pytest.mark.parametrize("said, problem", [
    ('{"tool_calls": [{"name": "add_note", "arguments": {"text": "call back"}]}',
     "the JSON of the tool calls does not parse (Expecting ',' delimiter: line 1 column 72 (char 71))"),
    ('{"tool_calls": [{"name": "delete_all", "arguments": {}}]}',
     "unknown function 'delete_all'; the functions are add_note"),
])
def test_an_unreadable_prompted_call_is_asked_again_with_a_nudge_then_a_machinery_error_every_attempt_billed(
        priced, notes_target, monkeypatch, said, problem):
    monkeypatch.setenv("LOBEVAL_TOOLS", "prompted")
    priced.policy = lambda request: text(said)
    budget = Budget(1.0)
    target = load_target(str(notes_target), timeout=30)
    record = asyncio.run(converse(Case.model_validate(case()), 0, target, ScriptedUser(), budget=budget, max_turns=2))
    assert record["termination"]["reason"] == "target_unavailable" and record["function_calls"] == []
    assert record["error"].endswith(f"the model's reply was unusable after 3 attempts: {problem}")
    first, second, third = priced.requests
    nudge = {"role": "user", "content": f"(Your last reply could not be used: {problem}. Answer again.)"}
    asked_again = [*first["messages"], {"role": "assistant", "content": said}, nudge]
    assert second["messages"] == third["messages"] == asked_again
    assert (first["temperature"], second["temperature"], third["temperature"]) == (0.0, 0.7, 0.7)
    billed, usage = priced.bill(), record["usage"]["target"]
    assert (usage["requests"], usage["prompt_tokens"], usage["completion_tokens"]) == tuple(billed.values())
    assert billed["requests"] == 3
    assert usage["cost_usd"] == pytest.approx(usd(billed)) == pytest.approx(budget.spent_usd)


def test_a_prompted_bot_reply_that_never_stops_is_hung_up_at_its_deadline_and_the_server_stops_it(
        local, notes_target, monkeypatch):
    monkeypatch.setenv("LOBEVAL_TOOLS", "prompted")
    monkeypatch.setenv("LOBEVAL_TARGET_TIMEOUT_S", "0.5")
    local.fail_next("endless")   # the bot's model writes on and on, until its client hangs up
    target = load_prompt_target(notes_target)
    target.client.max_attempts = 1

    with pytest.raises(TargetUnavailable, match=r"gave up after 1 attempts; last error: timed out") as caught:
        note_turn(target)
    assert local.hung_up.wait(30) and (local.hangups, local.stopped) == (1, 1)   # the server is free again
    [request] = local.requests
    assert "tools" not in request and request["stream"] is True and request["max_tokens"] == 1024
    usage = caught.value.usage
    assert usage["requests"] == 1 and usage["prompt_tokens"] == prompt_tokens(request["messages"])
    assert usage["estimated_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_the_sample_bots_model_policy_calls_its_functions_prompted_too(priced, monkeypatch):
    monkeypatch.setenv("LOBEVAL_TOOLS", "prompted")
    lookup = '{"tool_calls": [{"name": "get_support_ticket", "arguments": {"ticket_id": "TKT-1036"}}]}'

    def policy(request):
        said = request["messages"][-1]["content"]
        return text("It is open.") if said.startswith("Result of get_support_ticket") else text(lookup)

    priced.policy = policy
    target = load_target(roles.DEFAULT_TARGET, timeout=30)
    record = asyncio.run(converse(Case.model_validate(case()), 0, target, ScriptedUser(), max_turns=1))
    [call] = record["function_calls"]
    assert (call["functionName"], call["arguments"]) == ("get_support_ticket", {"ticket_id": "TKT-1036"})
    assert [m["content"] for m in record["messages"] if m["role"] == "assistant"][-1] == "It is open."
    assert all("tools" not in request and request["stream"] for request in priced.requests)
    assert len(priced.requests) == record["usage"]["target"]["requests"] == 2
