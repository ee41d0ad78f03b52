"""Conversations recorded elsewhere (production logs, traces), imported as conversations.jsonl records.

`import_traces(path, fmt, out)` reads one file in one of FORMATS and writes one record per conversation:
its user and assistant messages (one assistant message per user turn, holding that turn's calls), its
function calls with their arguments (parsed from the JSON text a model wrote), result, error and turn,
and `termination: {"reason": "imported"}`. The records carry no expected calls: they are scored against
a dataset by case_id, or by what needs no reference.

- "openai-chat": JSONL of chat-completions logs, `{"messages": [...], "metadata": {"conversation_id":
  ...}}` (or `session_id`). Lines with the same id are one conversation, whether each repeats the
  history so far or carries only what is new; a line without one is a conversation of its own
  ("line-N"). An assistant message's `tool_calls` are the calls, answered by the `tool` messages.
- "openai-agents": the OpenAI Agents SDK's trace export: `{"data": [...]}` as its exporter posts it, a
  JSON list, or one object a line, of traces (`"object": "trace"`) and spans (`"trace.span"`). A trace's
  `group_id`, else its id, names the conversation. Generation spans give the messages (their input and
  output, in chat-completions shape), function spans the calls (`input`, `output`, `error.message`). The
  SDK's default model (the Responses API) exports response spans, which carry only an id: a conversation
  with no text is refused, saying so (NO_TEXT).
- "otel-genai": OTLP JSON (`{"resourceSpans": ...}`, one document or one a line as the collector's file
  exporter writes) following the GenAI semantic conventions. Spans of `gen_ai.operation.name` chat,
  text_completion or generate_content give the messages (`gen_ai.input.messages`, `gen_ai.output.messages`),
  execute_tool spans the calls (`gen_ai.tool.name`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`;
  status ERROR is a failed call); an attribute may also sit on one of the span's events. The
  `gen_ai.conversation.id` of any span of a trace names its conversation, else the trace id.

A tool result that is the JSON object `{"error": "<message>"}` alone is a failed call: that is how a tool
loop tells its model that a call failed. Anything malformed is a RecordError naming the file, the line or
span, and the field.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import SCHEMA_VERSION, check_output, iter_jsonl, loads, read_text, write_jsonl

FORMATS = ("openai-chat", "openai-agents", "otel-genai")
NO_TEXT = ("the messages are read from generation spans, and the Agents SDK's default model (the Responses API) "
           "exports response spans, which carry only the response's id. Export generation spans: run the agent "
           "with OpenAIChatCompletionsModel, or export OpenTelemetry GenAI spans and import them with --format "
           "otel-genai")
MODEL_OPERATIONS = ("chat", "text_completion", "generate_content")
OTEL_STATUS_ERROR = (2, "STATUS_CODE_ERROR")

Event = tuple[str, Any]
"""("user", text), ("assistant", text) or ("call", {functionName, arguments, result, error}), in order."""
Where = tuple[Path, str]
"""The file and the record (line or span) a value comes from, for RecordError."""


def import_traces(path: str | Path, fmt: str, out: str | Path) -> int:
    """Read the traces at `path` in format `fmt`, write the conversations to `out` (whole or not at all),
    return how many were written."""
    readers = {"openai-chat": openai_chat, "openai-agents": openai_agents, "otel-genai": otel_genai}
    if fmt not in readers:
        raise ConfigError(f"unknown trace format {fmt!r}; choose one of {', '.join(FORMATS)}")
    path, out = Path(path), Path(out)
    check_output(out, [path])
    conversations = readers[fmt](path)
    if not conversations:
        raise RecordError(path, "file", None, f"holds no conversation in the {fmt} format")
    write_jsonl(out, [conversation_record(case_id, events) for case_id, events in conversations.items()])
    return len(conversations)


def conversation_record(case_id: str, events: list[Event]) -> dict[str, Any]:
    """A conversations.jsonl record: what the assistant said and did after each user message is one
    assistant message; each call's turn is the number of user messages before it."""
    messages: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    turn = 0
    for kind, value in events:
        if kind == "user":
            turn += 1
            messages.append({"role": "user", "content": value})
            continue
        if not messages or messages[-1]["role"] != "assistant":
            messages.append({"role": "assistant", "content": "", "function_calls": []})
        reply = messages[-1]
        if kind == "assistant":
            reply["content"] = "\n".join(filter(None, [reply["content"], value]))
        else:
            reply["function_calls"].append(value)
            calls.append({**value, "turn": turn})
    return {"schema_version": SCHEMA_VERSION, "case_id": case_id, "trial": 0, "messages": messages,
            "function_calls": calls, "termination": {"reason": "imported", "turns": turn}}


# --- chat messages, in the chat-completions shape or the GenAI conventions' parts --------------------

def chat_message(raw: Any, where: Where, field: str) -> dict[str, Any]:
    """A message reduced to what conversations compare and keep: role, text, the calls it makes
    [(id, name, arguments)], and the call a tool message answers with its content."""
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        raise RecordError(*where, field, "must be a message object with a role")
    if "parts" in raw:
        return _parts_message(raw, where, field)
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise RecordError(*where, f"{field}.tool_calls", "must be a list")
    answered = raw.get("tool_call_id")
    if raw["role"] == "tool" and not isinstance(answered, str):
        raise RecordError(*where, f"{field}.tool_call_id", "is required (a string) in a tool message")
    text = _text(raw.get("content"), where, f"{field}.content")
    return {"role": raw["role"], "text": text,
            "calls": [_chat_call(call, where, f"{field}.tool_calls[{i}]") for i, call in enumerate(calls)],
            "answers": answered, "answer": text if raw["role"] == "tool" else None}


def _chat_call(raw: Any, where: Where, field: str) -> tuple[str, str, dict[str, Any]]:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RecordError(*where, f"{field}.function.name", "is required (a string)")
    if not isinstance(raw.get("id"), str):
        raise RecordError(*where, f"{field}.id", "is required (a string)")
    return raw["id"], function["name"], arguments(function.get("arguments"), where, f"{field}.function.arguments")


def _parts_message(raw: dict[str, Any], where: Where, field: str) -> dict[str, Any]:
    """A message of the GenAI conventions: {"role", "parts": [{"type": "text" | "tool_call" |
    "tool_call_response", ...}]}."""
    parts = raw["parts"]
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        raise RecordError(*where, f"{field}.parts", "must be a list of objects")
    text = "\n".join(str(part.get("content") or "") for part in parts if part.get("type") == "text")
    calls = []
    for i, part in enumerate(parts):
        if part.get("type") == "tool_call":
            if not isinstance(part.get("name"), str):
                raise RecordError(*where, f"{field}.parts[{i}].name", "is required (a string) in a tool_call")
            calls.append((str(part.get("id")), part["name"], arguments(part.get("arguments"), where,
                                                                        f"{field}.parts[{i}].arguments")))
    responses = [part for part in parts if part.get("type") == "tool_call_response"]
    return {"role": raw["role"], "text": text, "calls": calls,
            "answers": str(responses[0].get("id")) if responses else None,
            "answer": responses[0].get("response") if responses else None}


def _text(content: Any, where: Where, field: str) -> str:
    """A message's content as text: a string, or the text of a list of parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "\n".join(str(part.get("text") or part.get("content") or "") for part in content
                         if part.get("type") in ("text", "input_text", "output_text"))
    raise RecordError(*where, field, "must be text or a list of content parts")


def arguments(value: Any, where: Where, field: str) -> dict[str, Any]:
    """A call's arguments: an object, or the JSON text of one (empty: none)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = loads(value)
        except ValueError as exc:
            raise RecordError(*where, field, f"is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise RecordError(*where, field, "must be a JSON object (the call's arguments)")
    return value


def outcome(value: Any) -> tuple[Any, str | None]:
    """(result, error) of what a tool answered: JSON text is parsed; {"error": message} alone is a failure."""
    if isinstance(value, str):
        try:
            value = loads(value)
        except ValueError:
            pass
    if isinstance(value, dict) and list(value) == ["error"] and isinstance(value["error"], str):
        return None, value["error"]
    return value, None


def merged(history: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history after a log entry: the entry when it repeats the history and goes on, the history
    when the entry repeats only part of it, else the history followed by the entry."""
    if messages[:len(history)] == history:
        return messages
    return history if history[:len(messages)] == messages else history + messages


def grown(history: list[dict[str, Any]], messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Event]]:
    """The history after a model call's messages, and what they add that the user or assistant said."""
    after = merged(history, messages)
    return after, text_events(after[len(history):])


def text_events(messages: list[dict[str, Any]]) -> list[Event]:
    """What the user and the assistant said (the calls come from elsewhere)."""
    return [(message["role"], message["text"]) for message in messages
            if message["role"] == "user" or (message["role"] == "assistant" and message["text"])]


# --- openai-chat ---------------------------------------------------------------------------------------

def openai_chat(path: Path) -> dict[str, list[Event]]:
    histories: dict[str, list[dict[str, Any]]] = {}
    for number, line in iter_jsonl(path):
        where = (path, f"line {number}")
        raw = line.get("messages")
        if not isinstance(raw, list):
            raise RecordError(*where, "messages", "must be a list of chat messages")
        messages = [chat_message(message, where, f"messages[{i}]") for i, message in enumerate(raw)]
        case_id = _conversation_id(line.get("metadata"), where) or f"line-{number}"
        histories[case_id] = merged(histories.get(case_id, []), messages)
        _check_answers(histories[case_id], messages, where)
    return {case_id: chat_events(history) for case_id, history in histories.items()}


def _conversation_id(metadata: Any, where: Where) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise RecordError(*where, "metadata", "must be an object")
    for key in ("conversation_id", "session_id"):
        if metadata.get(key) is not None:
            if not isinstance(metadata[key], str | int) or isinstance(metadata[key], bool):
                raise RecordError(*where, f"metadata.{key}", "must be a string")
            return str(metadata[key])
    return None


def _check_answers(history: list[dict[str, Any]], messages: list[dict[str, Any]], where: Where) -> None:
    """Every tool message of a log entry answers a call of the conversation."""
    made = {call[0] for message in history for call in message["calls"]}
    for i, message in enumerate(messages):
        if message["role"] == "tool" and message["answers"] not in made:
            raise RecordError(*where, f"messages[{i}].tool_call_id", f"{message['answers']!r} answers no tool call")


def chat_events(history: list[dict[str, Any]]) -> list[Event]:
    """Messages and calls of a chat history, each call with the tool message that answered it."""
    answers = {message["answers"]: message["answer"] for message in history if message["role"] == "tool"}
    events: list[Event] = []
    for message in history:
        events += text_events([message])
        for call_id, name, args in message["calls"] if message["role"] == "assistant" else []:
            result, error = outcome(answers.get(call_id))
            events.append(("call", {"functionName": name, "arguments": args, "result": result, "error": error}))
    return events


# --- openai-agents ---------------------------------------------------------------------------------------

def openai_agents(path: Path) -> dict[str, list[Event]]:
    items = list(_agents_items(path))
    groups = {item["id"]: item.get("group_id") or item["id"] for _, item in items
              if item.get("object") == "trace" and isinstance(item.get("id"), str)}
    spans: dict[str, list[tuple[str, int, Where, dict[str, Any]]]] = {}
    responses: dict[str, Where] = {}   # a response span of each conversation: its text is not exported
    for index, (where, item) in enumerate(items):
        if item.get("object") != "trace.span":
            continue
        data = item.get("span_data")
        if not isinstance(data, dict) or not isinstance(item.get("trace_id"), str):
            raise RecordError(*where, "span_data" if not isinstance(data, dict) else "trace_id", "is required")
        case_id = str(groups.get(item["trace_id"], item["trace_id"]))
        if data.get("type") in ("generation", "function"):
            spans.setdefault(case_id, []).append((str(item.get("started_at") or ""), index, where, item))
        elif data.get("type") == "response":
            responses.setdefault(case_id, where)
    conversations = {case_id: _agents_events(sorted(found, key=lambda span: span[:2]))
                     for case_id, found in spans.items()}
    for case_id in dict.fromkeys([*responses, *conversations]):
        if not any(kind in ("user", "assistant") for kind, _ in conversations.get(case_id, [])):
            where = responses.get(case_id) or spans[case_id][0][2]
            raise RecordError(*where, "span_data.type", f"conversation {case_id!r} has no text: {NO_TEXT}")
    return conversations


def _agents_items(path: Path) -> Iterator[tuple[Where, dict[str, Any]]]:
    """Each trace or span object, with where it is: the span's id, or its place in the file."""
    for document_where, document in documents(path):
        items = document.get("data", document) if isinstance(document, dict) else document
        for i, item in enumerate(items if isinstance(items, list) else [items]):
            place = f"{document_where} item {i}" if isinstance(items, list) else document_where
            if not isinstance(item, dict):
                raise RecordError(path, place, None, "must be a trace or span object")
            kind = "trace" if item.get("object") == "trace" else "span"
            yield (path, f"{kind} {item['id']}" if isinstance(item.get("id"), str) else place), item


def _agents_events(spans: list[tuple[str, int, Where, dict[str, Any]]]) -> list[Event]:
    history: list[dict[str, Any]] = []
    events: list[Event] = []
    for _, _, where, span in spans:
        data = span["span_data"]
        if data["type"] == "function":
            events.append(("call", _function_call(span, where)))
            continue
        messages = [chat_message(message, where, f"span_data.{side}[{i}]")
                    for side in ("input", "output") for i, message in enumerate(_list(data.get(side), where, side))]
        history, said = grown(history, messages)
        events += said
    return events


def _list(value: Any, where: Where, side: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(*where, f"span_data.{side}", "must be a list of chat messages")
    return value


def _function_call(span: dict[str, Any], where: Where) -> dict[str, Any]:
    data, error = span["span_data"], span.get("error")
    if not isinstance(data.get("name"), str):
        raise RecordError(*where, "span_data.name", "is required (a string) in a function span")
    if error is not None and not (isinstance(error, dict) and isinstance(error.get("message"), str)):
        raise RecordError(*where, "error", 'must be {"message": "...", "data": ...} or null')
    result, failure = (None, _span_error(error)) if error else outcome(data.get("output"))
    return {"functionName": data["name"], "arguments": arguments(data.get("input"), where, "span_data.input"),
            "result": result, "error": failure}


def _span_error(error: dict[str, Any]) -> str:
    """The span error's message, with the tool's own message the SDK keeps in its data."""
    detail = error.get("data").get("error") if isinstance(error.get("data"), dict) else None
    return f"{error['message']}: {detail}" if isinstance(detail, str) else error["message"]


# --- otel-genai ------------------------------------------------------------------------------------------

def otel_genai(path: Path) -> dict[str, list[Event]]:
    spans = list(_otel_spans(path))
    conversations = {span["traceId"]: str(value) for span, attributes, _ in spans
                     if (value := attributes.get("gen_ai.conversation.id")) is not None}
    found: dict[str, list[tuple[int, int, dict[str, Any], dict[str, Any], Where]]] = {}
    for index, (span, attributes, where) in enumerate(spans):
        if attributes.get("gen_ai.operation.name") in (*MODEL_OPERATIONS, "execute_tool"):
            case_id = conversations.get(span["traceId"], span["traceId"])
            found.setdefault(case_id, []).append((_start(span, where), index, span, attributes, where))
    return {case_id: _otel_events(sorted(group, key=lambda item: item[:2])) for case_id, group in found.items()}


def _otel_spans(path: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any], Where]]:
    """Each span with its attributes (the span's own, then its events' ones where the span has none)."""
    for place, span in _otlp_spans(path):
        if not isinstance(span, dict) or not isinstance(span.get("spanId"), str) \
                or not isinstance(span.get("traceId"), str):
            raise RecordError(path, place, None, "must be a span with traceId and spanId")
        where = (path, f"span {span['spanId']}")
        yield span, _span_attributes(span, where), where


def _otlp_spans(path: Path) -> Iterator[tuple[str, Any]]:
    """Each span of the file's OTLP documents, with its place in the file."""
    for document_where, document in documents(path):
        for r, resource in enumerate(_field_list(document, "resourceSpans", (path, document_where))):
            resource_where = f"{document_where} resourceSpans[{r}]"
            for s, scope in enumerate(_field_list(resource, "scopeSpans", (path, resource_where))):
                place = f"{resource_where}.scopeSpans[{s}]"
                for i, span in enumerate(_field_list(scope, "spans", (path, place))):
                    yield f"{place}.spans[{i}]", span


def _field_list(container: Any, key: str, where: Where) -> list[Any]:
    value = container.get(key, []) if isinstance(container, dict) else None
    if not isinstance(value, list):
        raise RecordError(*where, key, "must be a list")
    return value


def _span_attributes(span: dict[str, Any], where: Where) -> dict[str, Any]:
    events = _field_list(span, "events", where)
    found: dict[str, Any] = {}
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise RecordError(*where, f"events[{i}]", "must be an object")
        found.update(attributes(event.get("attributes"), where, f"events[{i}].attributes"))
    return {**found, **attributes(span.get("attributes"), where, "attributes")}


def attributes(raw: Any, where: Where, field: str) -> dict[str, Any]:
    """OTLP JSON key-value pairs as a dict of plain values."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise RecordError(*where, field, "must be a list of {key, value}")
    found = {}
    for i, pair in enumerate(raw):
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise RecordError(*where, f"{field}[{i}]", "must be {key, value}")
        found[pair["key"]] = any_value(pair.get("value"), where, f"{field}[{i}].value")
    return found


def any_value(value: Any, where: Where, field: str) -> Any:
    """An OTLP AnyValue ({"stringValue": ...}, {"intValue": "5"}, {"arrayValue": {"values": [...]}}, ...)."""
    if not isinstance(value, dict) or len(value) > 1:
        raise RecordError(*where, field, "must be an OTLP value such as {\"stringValue\": ...}")
    kind, inner = next(iter(value.items()), ("", None))
    if kind in ("stringValue", "boolValue", "doubleValue", "bytesValue", ""):
        return inner
    if kind == "intValue" and str(inner).lstrip("-").isdigit():
        return int(inner)
    if kind == "arrayValue" and isinstance(inner, dict):
        return [any_value(item, where, f"{field}.values[{i}]") for i, item in enumerate(inner.get("values", []))]
    if kind == "kvlistValue" and isinstance(inner, dict):
        return attributes(inner.get("values", []), where, f"{field}.values")
    raise RecordError(*where, field, f"is not an OTLP value: {kind} {inner!r}")


def _start(span: dict[str, Any], where: Where) -> int:
    try:
        return int(span.get("startTimeUnixNano") or 0)
    except (TypeError, ValueError):
        raise RecordError(*where, "startTimeUnixNano", "must be an integer (nanoseconds)") from None


def _otel_events(spans: list[tuple[int, int, dict[str, Any], dict[str, Any], Where]]) -> list[Event]:
    history: list[dict[str, Any]] = []
    events: list[Event] = []
    for _, _, span, found, where in spans:
        if found["gen_ai.operation.name"] == "execute_tool":
            events.append(("call", _tool_call(span, found, where)))
            continue
        messages = [chat_message(message, where, f"attributes.{key}[{i}]")
                    for key in ("gen_ai.input.messages", "gen_ai.output.messages")
                    for i, message in enumerate(_messages_attribute(found.get(key), where, key))]
        history, said = grown(history, messages)
        events += said
    return events


def _messages_attribute(value: Any, where: Where, key: str) -> list[Any]:
    """gen_ai.input.messages or gen_ai.output.messages: JSON text, or structured values."""
    if isinstance(value, str):
        try:
            value = loads(value)
        except ValueError as exc:
            raise RecordError(*where, f"attributes.{key}", f"is not JSON ({exc})") from None
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(*where, f"attributes.{key}", "must be a list of messages")
    return value


def _tool_call(span: dict[str, Any], found: dict[str, Any], where: Where) -> dict[str, Any]:
    name = found.get("gen_ai.tool.name")
    if not isinstance(name, str) or not name:
        raise RecordError(*where, "attributes.gen_ai.tool.name", "is required (a string) in an execute_tool span")
    status = span.get("status") or {}
    if not isinstance(status, dict):
        raise RecordError(*where, "status", "must be an object")
    failed = status.get("code") in OTEL_STATUS_ERROR
    failure = (status.get("message") or found.get("error.type") or "the tool failed") if failed else None
    result, error = (None, str(failure)) if failed else outcome(found.get("gen_ai.tool.call.result"))
    args = arguments(found.get("gen_ai.tool.call.arguments"), where, "attributes.gen_ai.tool.call.arguments")
    return {"functionName": name, "arguments": args, "result": result, "error": error}


# --- files -----------------------------------------------------------------------------------------------

def documents(path: Path) -> list[tuple[str, Any]]:
    """The file as one JSON document, or its lines as one document each; with where each is."""
    text = read_text(path)
    try:
        return [("document", loads(text))]
    except ValueError:
        return [(f"line {number}", record) for number, record in iter_jsonl(path)]

