"""Judges: language models that read a conversation. A reply that cannot be parsed is never a score."""
from __future__ import annotations

import json
from typing import Any

from lobeval.llm import LLMClient, Usage, parse_json_object
from lobeval.records import Case

COMPLETION_PROMPT = """You decide whether a conversation between a user and a business chatbot has
reached its goal, so that the simulation can stop.

The goal: {task_completion}

Read the transcript below. Function calls the assistant made are shown with their results; a
call with an error did not take effect. The goal is reached only if what it describes has
actually happened (a successful call, or the information given to the user) — an assistant that
merely says it will do something has not done it.

Answer with a JSON object and nothing else: {{"reason": "<one or two sentences>", "complete": true|false}}"""


def render_transcript(messages: list[dict[str, Any]]) -> str:
    """The conversation as plain text, calls and results included, for a judge to read."""
    lines = []
    for message in messages:
        lines.append(f"{message['role'].upper()}: {message['content']}")
        for call in message.get("function_calls") or []:
            outcome = f"ERROR {call['error']}" if call.get("error") else json.dumps(call.get("result"), default=str)
            lines.append(f"  [call {call['functionName']}({json.dumps(call['arguments'], ensure_ascii=False)})"
                         f" -> {outcome}]")
    return "\n".join(lines)


def parse_verdict(text: str) -> tuple[bool, str]:
    """(complete, reason) from a judge reply; ValueError when it holds no usable verdict."""
    data = parse_json_object(text)
    value = data.get("complete")
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        value = value.strip().lower() in ("true", "yes")
    if not isinstance(value, bool):
        raise ValueError(f"'complete' must be true or false, got {value!r}")
    return value, str(data.get("reason", "")).strip()


class CompletionJudge:
    """Asks after each bot turn whether the case's `task_completion` is met (yes/no with a reason)."""

    attempts = 2

    def __init__(self, client: LLMClient):
        self.client = client

    async def is_complete(self, case: Case, messages: list[dict[str, Any]], usage: Usage) -> tuple[bool, str]:
        """An unparseable verdict after two tries counts as "not yet": the conversation goes on."""
        prompt = [{"role": "system", "content": COMPLETION_PROMPT.format(task_completion=case.task_completion)},
                  {"role": "user", "content": render_transcript(messages)}]
        for attempt in range(self.attempts):
            # A different seed makes the retry a different request, so the cache does not replay the bad reply.
            result = await self.client.chat(prompt, response_format={"type": "json_object"},
                                            temperature=0.0, seed=attempt)
            usage.add(prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                      cost_usd=result.cost_usd, cached=result.cached)
            try:
                return parse_verdict(result.message.get("content") or "")
            except ValueError as exc:
                problem = str(exc)
        return False, f"judge reply unusable: {problem}"
