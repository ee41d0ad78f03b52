"""Claimed but not done, and done but not told: a deterministic check of what the bot said
against the calls it made. No model is needed.

A claim is a statement (not a question) in an assistant message with an action verb in the past
tense ("created", "has been updated", "I've cancelled") and no negation, or an identifier such as
TKT-1042 that neither the user nor any earlier call produced. A claim is backed when a successful
write call of the same action family was made in that message or before it.
"""
from __future__ import annotations

import json
import re
from typing import Any

from lobeval.suite import function_key, strip_plugin_prefix

# Past-tense claim words by action family, and the words a function name of that family contains.
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "create": (r"created|logged|raised|filed|submitted|registered|added|booked|scheduled|placed",
               ("create", "add", "new", "open", "log", "raise", "file", "submit", "register", "book", "schedule",
                "place", "insert")),
    "update": (r"updated|changed|modified|edited|moved|escalated|reassigned|renamed",
               ("update", "set", "change", "modify", "edit", "patch", "move", "escalate", "assign", "rename",
                "mark", "resolve")),
    "cancel": (r"cancell?ed|deleted|removed|revoked|withdrawn|refunded",
               ("cancel", "delete", "remove", "close", "revoke", "withdraw", "refund")),
}
_CLAIM = {family: re.compile(rf"\b(?:{words})\b", re.IGNORECASE) for family, (words, _) in FAMILIES.items()}
_NEGATION = re.compile(r"\b(?:not|never|no|unable|failed|fail|cannot|couldn't|can't|wasn't|weren't|didn't|hasn't|"
                       r"haven't|won't|error)\b", re.IGNORECASE)
_IDENTIFIER = re.compile(r"\b[A-Z]{2,6}-\d+\b")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_READ_PREFIXES = ("get", "list", "search", "find", "lookup", "read", "fetch", "query", "check")


def find_claims(conversation: dict[str, Any], tools: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The row's `claims`: claimed_not_done [{message_index, claim, text}] and
    done_not_told [{actual_index, functionName, turn}]. `tools` maps function keys to tools.json
    entries, for effects; without an entry, a name that starts with get/list/search/... is a read."""
    calls = _calls_by_message(conversation)
    claimed_not_done, told = [], set()
    said = ""    # everything the user said so far
    known = ""   # ... and every call returned, for identifiers
    writes: list[dict[str, Any]] = []
    for index, message in enumerate(conversation.get("messages") or []):
        text = message.get("content") or ""
        if message.get("role") != "assistant":
            said, known = f"{said} {text}", f"{known} {text}"
            continue
        made = [call for call in calls.get(index, []) if not call["call"].get("error")]
        known += " " + " ".join(json.dumps([c["call"].get("arguments"), c["call"].get("result")], default=str)
                                for c in calls.get(index, []))
        writes += [call for call in made if is_write(call["call"]["functionName"], tools)]
        for claim, sentence in claims_in(text, said, known):
            if claim in FAMILIES:
                backing = [call for call in writes if family_of(call["call"]["functionName"]) == claim]
                if backing:
                    told.update(call["actual_index"] for call in backing)
                    continue
            elif claim in known:
                continue
            claimed_not_done.append({"message_index": index, "claim": claim, "text": sentence[:200]})
        told.update(call["actual_index"] for call in writes if _mentions_result(text, call["call"]))
    done_not_told = [{"actual_index": call["actual_index"], "functionName": call["call"]["functionName"],
                      "turn": call["call"].get("turn")}
                     for call in writes if call["actual_index"] not in told]
    return {"claimed_not_done": claimed_not_done, "done_not_told": done_not_told}


def claims_in(text: str, said: str = "", known: str = "") -> list[tuple[str, str]]:
    """(claim, sentence) for each action family or identifier a statement claims. A claim word the
    bot repeats from the user's words ("our registered trademark ...") or from data it read (a status
    "Cancelled") is not a claim."""
    found = []
    for sentence in (s.strip() for s in _SENTENCE.findall(text)):
        if not sentence or sentence.endswith("?") or _NEGATION.search(sentence):
            continue
        found += [(family, sentence) for family, pattern in _CLAIM.items()
                  if any(not _quoted(sentence, match, said, known) for match in pattern.finditer(sentence))]
        found += [(identifier, sentence) for identifier in _IDENTIFIER.findall(sentence)]
    return found


def _quoted(sentence: str, match: re.Match, said: str, known: str) -> bool:
    if f'"{match.group().lower()}"' in known.lower():
        return True
    words = [match.group(), *re.findall(r"\w+", sentence[match.end():])[:2]]
    return " ".join(words).lower() in " ".join(re.findall(r"\w+", said)).lower()


def family_of(function_name: str) -> str | None:
    """The action family a function name belongs to, from its first word that names one."""
    for word in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", strip_plugin_prefix(function_name)):
        for family, (_, stems) in FAMILIES.items():
            if word.lower() in stems:
                return family
    return None


def is_write(function_name: str, tools: dict[str, dict[str, Any]]) -> bool:
    tool = tools.get(function_key(function_name))
    if tool and tool.get("effect"):
        return tool["effect"] == "write"
    return not function_key(function_name).startswith(_READ_PREFIXES)


def _calls_by_message(conversation: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Each assistant message's calls with their index in the conversation's `function_calls` list.
    An imported transcript may carry calls only at the top level: each goes to the first assistant
    message after its `turn`-th user message."""
    messages = conversation.get("messages") or []
    by_message: dict[int, list[dict[str, Any]]] = {}
    if any(message.get("function_calls") for message in messages):
        actual = 0
        for index, message in enumerate(messages):
            for call in message.get("function_calls") or []:
                by_message.setdefault(index, []).append({"actual_index": actual, "call": call})
                actual += 1
        return by_message
    for actual, call in enumerate(conversation.get("function_calls") or []):
        users = 0
        for index, message in enumerate(messages):
            users += message.get("role") == "user"
            if message.get("role") == "assistant" and users >= (call.get("turn") or 0):
                by_message.setdefault(index, []).append({"actual_index": actual, "call": call})
                break
    return by_message


def _mentions_result(text: str, call: dict[str, Any]) -> bool:
    """The message names an identifier the call returned (e.g. "TKT-1042 is now High priority")."""
    identifiers = set(_IDENTIFIER.findall(json.dumps(call.get("result"), default=str)))
    return any(identifier in text for identifier in identifiers)
