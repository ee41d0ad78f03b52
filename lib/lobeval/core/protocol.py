"""What a target hands back for one turn, below both kinds of target (a Python or HTTP bot in `targets`,
a model and a prompt in `prompt_target`) and the sample bots: docs/targets.md; and how what a bot said is read
wherever lobeval reads it (`reply_text`: docs/formats.md, "A reply written as JSON")."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """One turn of the target: what it said and the function calls it made, in order.

    Each call is `{"functionName", "arguments", "result"}` plus `"error"` (a message, or None)
    when the backend refused or raised: such a call was attempted but not done. `usage`, optional,
    is what the turn cost the target in its own model calls: any of USAGE_FIELDS, numbers.
    """

    text: str
    function_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, float] | None = None


USAGE_FIELDS = ("requests", "prompt_tokens", "completion_tokens", "cost_usd", "cached_prompt_tokens",
                "estimated_tokens")
"""What a reply may report of the turn's own model calls (all optional): requests sent, tokens, cost, of the
prompt tokens those the provider read from its prompt cache (also read as OpenAI reports them:
`prompt_tokens_details.cached_tokens`), and of all tokens those counted by the bot rather than reported by its
model's server."""



TEXT_FIELDS = ("message", "reply", "response", "text", "content", "answer")
"""The fields that hold the text of a reply written as a JSON object, in the order one is taken as its text."""


def reply_text(content: Any) -> str:
    """What a bot said, as lobeval reads it. A reply written as a JSON object is read as its text: the first field
    of TEXT_FIELDS that holds a string, then each other value on a line of its own after its key in words
    ("total fare usd: 255"); an object nested in it is a line with its key ("refund:") and its own values below,
    indented; each item of a list is read under the list's key; true and false are yes and no; null and empty
    strings are left out. A sentence inside it so stays a sentence. Anything else (plain text, JSON that is not
    an object, text that is not JSON) is read as written."""
    if content is None:
        return ""
    if not isinstance(content, str):
        return json.dumps(content, ensure_ascii=False, default=str)
    written = content.strip()
    if not (written.startswith("{") and written.endswith("}")):
        return content
    try:
        value = json.loads(written)
    except ValueError:
        return content
    if not isinstance(value, dict):
        return content
    primary = next((key for key in TEXT_FIELDS if isinstance(value.get(key), str)), None)
    lines = [value[primary]] if primary is not None else []
    for key, item in value.items():
        if key != primary:
            lines += _field_lines(_words(key), item, 0)
    return "\n".join(line for line in lines if line.strip())


def _words(key: Any) -> str:
    return " ".join(str(key).replace("_", " ").split())


def _field_lines(label: str, value: Any, depth: int) -> list[str]:
    indent = "  " * depth
    if value is None or value == "":
        return []
    if isinstance(value, dict):
        inner = [line for key, item in value.items() for line in _field_lines(_words(key), item, depth + 1)]
        return [f"{indent}{label}:", *inner] if inner else []
    if isinstance(value, list):
        return [line for item in value for line in _field_lines(label, item, depth)]
    if isinstance(value, bool):
        return [f"{indent}{label}: {'yes' if value else 'no'}"]
    return [f"{indent}{label}: {value}"]


def read_replies(conversation: dict[str, Any]) -> dict[str, Any]:
    """The conversation with each assistant message's content read as `reply_text` reads it (a copy: the record
    keeps what the bot wrote)."""
    messages = conversation.get("messages")
    if not messages:
        return conversation
    return {**conversation, "messages": [
        {**message, "content": reply_text(message.get("content"))} if message.get("role") == "assistant" else message
        for message in messages]}
