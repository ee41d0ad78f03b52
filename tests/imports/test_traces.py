"""Importing conversations recorded elsewhere: OpenAI chat logs, OpenAI Agents SDK traces, OTLP GenAI spans."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import read_conversations
from lobeval.imports.traces import import_traces

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
CHAT, AGENTS, OTEL = FIXTURES / "openai_chat.jsonl", FIXTURES / "openai_agents.json", FIXTURES / "otel_genai.json"


def imported(source: Path, fmt: str, tmp_path: Path) -> dict[str, dict]:
    """The records written, by case_id, read back the way evaluate reads conversations."""
    out = tmp_path / "conversations.jsonl"
    count = import_traces(source, fmt, out)
    records = {record["case_id"]: record for _, _, record in read_conversations(out)}
    assert count == len(records)
    return records


def calls(record: dict) -> list[tuple]:
    return [(c["functionName"], c["arguments"], c["result"], c["error"], c["turn"]) for c in record["function_calls"]]


def test_openai_chat_lines_of_one_conversation_are_merged_and_a_line_without_id_stands_alone(tmp_path):
    records = imported(CHAT, "openai-chat", tmp_path)
    assert set(records) == {"conv-1", "line-3"}
    conversation = records["conv-1"]
    assert [(m["role"], m["content"]) for m in conversation["messages"]] == [
        ("user", "What is the status of TKT-1001?"), ("assistant", "TKT-1001 is Open, priority High."),
        ("user", "Raise it to Critical."), ("assistant", "Updating it now.\nDone: TKT-1001 is now Critical.")]
    assert calls(conversation) == [
        ("get_support_ticket", {"ticket_id": "TKT-1001"}, {"id": "TKT-1001", "status": "Open", "priority": "High"},
         None, 1),
        ("update_support_ticket", {"ticket_id": "TKT-1001", "priority": "Urgent"}, None,
         "'Urgent' is not a valid priority; choose one of Low, Medium, High, Critical", 2)]
    assert conversation["messages"][3]["function_calls"][0]["functionName"] == "update_support_ticket"
    assert conversation["termination"] == {"reason": "imported", "turns": 2}
    assert conversation["schema_version"] == 1
    assert records["line-3"]["function_calls"] == []


def test_openai_chat_lines_may_carry_only_what_is_new(tmp_path):
    lines = [json.loads(line) for line in CHAT.read_text().splitlines()]
    first, second = lines[0], lines[1]
    second["messages"] = second["messages"][len(first["messages"]):]
    source = tmp_path / "incremental.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in (first, second)) + "\n")
    incremental = imported(source, "openai-chat", tmp_path)["conv-1"]
    assert incremental == imported(CHAT, "openai-chat", tmp_path)["conv-1"]


def test_openai_agents_traces_of_one_group_make_one_conversation(tmp_path):
    records = imported(AGENTS, "openai-agents", tmp_path)
    assert set(records) == {"thread-7"}
    conversation = records["thread-7"]
    assert [(m["role"], m["content"]) for m in conversation["messages"]] == [
        ("user", "Open a ticket: the VPN drops every hour."), ("assistant", "Created TKT-1043."),
        ("user", "Assign it to ana@contoso.com."),
        ("assistant", "Sorry, tickets cannot be assigned; action items can.")]
    assert calls(conversation) == [
        ("create_support_ticket", {"title": "VPN drops hourly", "priority": "High"},
         {"ticket_id": "TKT-1043", "status": "Open"}, None, 1),
        ("update_support_ticket", {"ticket_id": "TKT-1043", "assignee": "ana@contoso.com"}, None,
         "Error running tool: unknown parameter 'assignee'", 2)]


def test_otel_genai_spans_grouped_by_conversation_id_else_trace(tmp_path):
    records = imported(OTEL, "otel-genai", tmp_path)
    assert set(records) == {"conv-otel-1", "a1b2c3d4e5f60718293a4b5c6d7e8f90"}
    conversation = records["conv-otel-1"]
    assert [(m["role"], m["content"]) for m in conversation["messages"]] == [
        ("user", "Create an action item for TKT-1001: replace the toner, due 2025-07-01."),
        ("assistant", "Created ACT-5018, due 2025-07-01.")]
    assert calls(conversation) == [
        ("create_action_item", {"parent_ticket_id": "TKT-1001", "title": "Replace the toner",
                                "assignee": "bo@contoso.com", "due_date": "2025-07-01"},
         {"action_item_id": "ACT-5018"}, None, 1),
        ("get_action_item", {"action_item_id": "ACT-9"}, None, "there is no action item 'ACT-9'", 1)]
    other = records["a1b2c3d4e5f60718293a4b5c6d7e8f90"]
    assert [m["content"] for m in other["messages"]] == ["What can you do?",
                                                         "I manage support tickets and action items."]


def break_chat(tmp_path: Path, change) -> Path:
    lines = [json.loads(line) for line in CHAT.read_text().splitlines()]
    change(lines)
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def set_arguments(lines):
    lines[1]["messages"][6]["tool_calls"][0]["function"]["arguments"] = '{"ticket_id": '


def set_tool_call_id(lines):
    lines[1]["messages"][7]["tool_call_id"] = "call_zz"


def drop_role(lines):
    del lines[2]["messages"][0]["role"]


def set_messages(lines):
    lines[2]["messages"] = "hello"


@pytest.mark.parametrize("change, record, field, problem", [
    (set_arguments, "line 2", "messages[6].tool_calls[0].function.arguments", "is not JSON"),
    (set_tool_call_id, "line 2", "messages[7].tool_call_id", "'call_zz' answers no tool call"),
    (drop_role, "line 3", "messages[0]", "must be a message object with a role"),
    (set_messages, "line 3", "messages", "must be a list"),
])
def test_a_malformed_chat_message_is_named(tmp_path, change, record, field, problem):
    source = break_chat(tmp_path, change)
    with pytest.raises(RecordError) as caught:
        import_traces(source, "openai-chat", tmp_path / "out.jsonl")
    assert (caught.value.record, caught.value.field) == (record, field)
    assert problem in caught.value.problem
    assert not (tmp_path / "out.jsonl").exists()


def break_document(source: Path, tmp_path: Path, change) -> Path:
    document = json.loads(source.read_text())
    change(document)
    path = tmp_path / source.name
    path.write_text(json.dumps(document))
    return path


def agents_span(document, span_id):
    return next(item for item in document["data"] if item.get("id") == span_id)


@pytest.mark.parametrize("span_id, change, field", [
    ("span_fn1", lambda span: span["span_data"].update(input="{not json"), "span_data.input"),
    ("span_fn1", lambda span: span["span_data"].update(input="[1, 2]"), "span_data.input"),
    ("span_fn2", lambda span: span["span_data"].pop("name"), "span_data.name"),
    ("span_fn2", lambda span: span.update(error="boom"), "error"),
    ("span_gen1", lambda span: span["span_data"].update(output={"role": "assistant"}), "span_data.output"),
    ("span_gen3", lambda span: span["span_data"]["input"][5].update(content=42), "span_data.input[5].content"),
    ("span_gen3", lambda span: span["span_data"]["output"][0]["tool_calls"][0]["function"].pop("name"),
     "span_data.output[0].tool_calls[0].function.name"),
    ("span_gen1", lambda span: span.pop("span_data"), "span_data"),
])
def test_a_malformed_agents_span_is_named(tmp_path, span_id, change, field):
    source = break_document(AGENTS, tmp_path, lambda document: change(agents_span(document, span_id)))
    with pytest.raises(RecordError) as caught:
        import_traces(source, "openai-agents", tmp_path / "out.jsonl")
    assert (caught.value.record, caught.value.field) == (f"span {span_id}", field)


def otel_span(document, span_id):
    return next(span for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"] if span["spanId"] == span_id)


def set_attribute(key, value):
    def change(span):
        next(pair for pair in span["attributes"] if pair["key"] == key)["value"] = value
    return change


@pytest.mark.parametrize("span_id, change, field", [
    ("2b3c4d5e6f708192", set_attribute("gen_ai.tool.call.arguments", {"stringValue": "{oops"}),
     "attributes.gen_ai.tool.call.arguments"),
    ("2b3c4d5e6f708192", set_attribute("gen_ai.tool.name", {"intValue": "7"}), "attributes.gen_ai.tool.name"),
    ("1a2b3c4d5e6f7081", set_attribute("gen_ai.input.messages", {"stringValue": "[{"}),
     "attributes.gen_ai.input.messages"),
    ("1a2b3c4d5e6f7081", set_attribute("gen_ai.output.messages", {"stringValue": '[{"parts": []}]'}),
     "attributes.gen_ai.output.messages[0]"),
    ("1a2b3c4d5e6f7081", set_attribute("gen_ai.usage.input_tokens", {"intValue": "many"}), "attributes[2].value"),
    ("4d5e6f7081920314", lambda span: span["events"][0].update(attributes="x"), "events[0].attributes"),
    ("4d5e6f7081920314", lambda span: span.update(startTimeUnixNano="soon"), "startTimeUnixNano"),
])
def test_a_malformed_otel_span_is_named(tmp_path, span_id, change, field):
    source = break_document(OTEL, tmp_path, lambda document: change(otel_span(document, span_id)))
    with pytest.raises(RecordError) as caught:
        import_traces(source, "otel-genai", tmp_path / "out.jsonl")
    assert (caught.value.record, caught.value.field) == (f"span {span_id}", field)


def test_a_span_without_ids_is_named_by_its_place(tmp_path):
    source = break_document(OTEL, tmp_path, lambda document: otel_span(document, "1a2b3c4d5e6f7081").pop("traceId"))
    with pytest.raises(RecordError, match=r"resourceSpans\[0\].scopeSpans\[0\].spans\[1\]"):
        import_traces(source, "otel-genai", tmp_path / "out.jsonl")


def test_otlp_file_exporter_lines_are_read_one_document_a_line(tmp_path):
    document = json.loads(OTEL.read_text())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    halves = [{"resourceSpans": [{"scopeSpans": [{"spans": part}]}]} for part in (spans[:3], spans[3:])]
    source = tmp_path / "traces.jsonl"
    source.write_text("\n".join(json.dumps(half) for half in halves) + "\n")
    assert imported(source, "otel-genai", tmp_path) == imported(OTEL, "otel-genai", tmp_path)


def test_an_unknown_format_or_a_file_without_conversations_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="openai-chat, openai-agents, otel-genai"):
        import_traces(CHAT, "langsmith", tmp_path / "out.jsonl")
    with pytest.raises(RecordError, match="holds no conversation"):
        import_traces(OTEL, "openai-agents", tmp_path / "out.jsonl")


def test_agents_traces_of_the_default_responses_model_are_refused_saying_which_exports_carry_text(tmp_path):
    """The SDK's default model exports response spans (only the response id): the conversation has no text."""
    document = {"object": "list", "data": [
        {"object": "trace", "id": "trace_1", "workflow_name": "Agent workflow", "group_id": "chat-7"},
        {"object": "trace.span", "id": "span_agent", "trace_id": "trace_1", "parent_id": None,
         "started_at": "2026-11-20T10:00:00Z", "span_data": {"type": "agent", "name": "Support"}},
        {"object": "trace.span", "id": "span_resp1", "trace_id": "trace_1", "parent_id": "span_agent",
         "started_at": "2026-11-20T10:00:01Z", "span_data": {"type": "response", "response_id": "resp_123"}},
        {"object": "trace.span", "id": "span_fn", "trace_id": "trace_1", "parent_id": "span_agent",
         "started_at": "2026-11-20T10:00:02Z", "error": None,
         "span_data": {"type": "function", "name": "get_ticket", "input": "{\"id\": \"TKT-1\"}", "output": "{}"}},
    ]}
    source = tmp_path / "responses.json"
    source.write_text(json.dumps(document))
    out = tmp_path / "out.jsonl"
    with pytest.raises(RecordError) as caught:
        import_traces(source, "openai-agents", out)
    assert (caught.value.record, caught.value.field) == ("span span_resp1", "span_data.type")
    assert "conversation 'chat-7' has no text" in str(caught.value)
    assert "OpenAIChatCompletionsModel" in str(caught.value) and "--format otel-genai" in str(caught.value)
    assert not out.exists()
