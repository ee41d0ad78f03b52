"""Regression drafts from recorded conversations (`lobeval draft --from-conversations`): each conversation whose
writes all succeeded becomes a scenario that expects those writes again, its reads allowed.

A value an earlier write returned (a new record's id) becomes a `$ref` to that result; a value the user said is
kept as it was (or one the bot offered, which the user may have picked by number); a value found only in an earlier read's result becomes a `$ref` to it. A value from nowhere (the
bot made it up, or changed what the user said) cannot be replayed by a user who says the expected values, so the
draft is rejected with that reason. The instructions are the user's goal as a model summarises it from the user's
messages (`summarise`), or offline the user's messages themselves, one a line.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lobeval.core.records import read_conversations
from lobeval.core.render import said
from lobeval.workspace.suite import Suite, write_functions
from lobeval.simulation.users import say
from lobeval.core.vocabulary import function_key


Summarise = Callable[[list[str]], str]
"""The user's goal in a few sentences, from the user's messages (a model's summary)."""


def regression_templates(suite: Suite, path: str | Path, summarise: Summarise | None = None) -> list[dict[str, Any]]:
    """One template per conversation whose writes all succeeded; one that cannot be replayed carries `unfit`,
    its reason."""
    writes = {function_key(function["name"]) for function in write_functions(suite)}
    drafts = []
    for _, _, conversation in read_conversations(path):
        calls = conversation.get("function_calls") or []
        written = [c for c in calls if function_key(c["functionName"]) in writes]
        if any(c.get("error") for c in written):
            continue
        drafts.append(regression_template(conversation, calls, writes, suite, summarise))
    return drafts


def _text(conversation: dict[str, Any], role: str) -> list[str]:
    return [said(m) for m in conversation.get("messages") or [] if m.get("role") == role]


def regression_template(conversation: dict[str, Any], calls: list[dict[str, Any]], writes: set[str],
                        suite: Suite, summarise: Summarise | None = None) -> dict[str, Any]:
    said = _text(conversation, "user")
    heard = " ".join(said + _text(conversation, "assistant"))   # a value the bot offered, the user may have picked
    name = re.sub(r"[^0-9A-Za-z_]+", "_", f"regression_{conversation['case_id']}_{conversation.get('trial', 0)}")
    expected, problem = [], None
    for position, call in enumerate(calls):
        if function_key(call["functionName"]) not in writes:
            continue
        arguments = {}
        for arg, value in (call.get("arguments") or {}).items():
            arguments[arg] = linked(value, calls[:position], writes, heard)
            if arguments[arg] is None:
                problem = problem or (f"{call['functionName']} sent {arg} {value!r}, which no one said and no earlier "
                                      f"call returned: a simulated user cannot replay it")
        expected.append({"functionName": call["functionName"], "arguments": arguments})
    reads = sorted({c["functionName"] for c in calls if function_key(c["functionName"]) not in writes})
    if summarise and said:
        goal = summarise(said)
    else:
        goal = "\n".join(said) if expected else (said[0] if said else "")
    template = {"scenario_name": name,
                "user_instructions": goal,
                "task_completion": f"The writes of conversation {conversation['case_id']} were made again, "
                                   f"with the same values." if expected else "Nothing was created or changed.",
                "persona": "", "user_style": "conversational", "user_mistakes": {},
                "expected_function_calls": expected, "expected_outputs": [], "allowed_function_calls": reads,
                "forbidden_function_calls": [] if expected else sorted(suite.tool(key)["function"]["name"]
                                                                      for key in writes),
                "ordered": True}
    if problem:
        template["unfit"] = problem
    return template


def linked(value: Any, earlier: list[dict[str, Any]], writes: set[str], said: str) -> Any:
    """The expected value for an argument: a `$ref` to an earlier write's result, the value as said in the
    conversation, a `$ref` to an earlier read's result; None when it comes from none of them."""
    done = [c for c in earlier if not c.get("error")]
    for calls in ([c for c in done if function_key(c["functionName"]) in writes], None,
                  [c for c in done if function_key(c["functionName"]) not in writes]):
        if calls is None:
            if isinstance(value, bool) or say(value).lower() in said.lower():
                return value
            continue
        for call in reversed(calls):
            path = _path_to(call.get("result"), value)
            if path:
                return {"$ref": ".".join([call["functionName"], "result", *path])}
    return None


def _path_to(node: Any, value: Any) -> list[str] | None:
    """The keys (and list indices) under which `value` sits in `node`, first found; None when it is not there."""
    if node == value and not isinstance(node, dict | list):
        return []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, item in items:
        found = _path_to(item, value)
        if found is not None:
            return [str(key), *found]
    return None
