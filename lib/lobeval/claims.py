"""Claimed but not done, and done but not told: a deterministic check of what the bot said
against the calls it made. No model is needed.

A claim is a statement in an assistant message with an action verb in the past tense ("created",
"has been updated", "I've cancelled") and no negation, or an identifier such as TKT-1042 that neither
the user nor any earlier call produced. Questions, examples ("e.g. ACT-5017", "such as") and requests
("Please give its id") claim nothing.

A sentence that states a new state ("TKT-1001 is now Critical") with a value that a failed write tried to
set is a claim of that write's family, backed only by a successful write that set the same value.

A claim is backed by a successful write call of the same action family, made in that message or
before it, that fits what was claimed: when the sentence names an entity (a word of a function name
other than its verb, as "action item" in create_action_item), the call's name has it; when the
sentence gives identifiers, one of them is in the call's arguments or result. A write is told only by
a claim it backs: reading out its identifier alone does not tell the user what was done.
"""
from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

from lobeval.vocabulary import function_key, strip_plugin_prefix

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
_NEW_STATE = re.compile(r"\b(?:is|are)\s+now\b|\bnow\s+(?:is|are|has|have|shows?|reads?)\b", re.IGNORECASE)
# A sentence ends at . ! ? before a space, but not at the abbreviations "e.g." and "i.e.".
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)\s+|\n+")
# "like" only before a quote or an identifier: "ids look like TKT-1042", not "I'd like to confirm ...".
_EXAMPLE = re.compile(r"\be\.g\b|\bfor (?:example|instance)\b|\bsuch as\b|\blike\s+(?:[\"'“‘(]|[A-Z]{2,6}-\d)",
                      re.IGNORECASE)
_CLAUSE = re.compile(r"[,;]")
_WORD = re.compile(r"\w+")
_ASK = r"(?:give|provide|enter|send|share|tell|type|confirm|specify|choose|select|pick|reply|supply|paste|describe|" \
       r"let me know)\b"
_REQUEST = re.compile(rf"^\W*(?:(?:ok(?:ay)?|sure|great|alright|now|next|then|so|and|also|finally)\W+)*"
                      rf"(?:please\s+|kindly\s+)?{_ASK}|\bplease\s+{_ASK}|^\W*(?:can|could|would|will)\s+you\b",
                      re.IGNORECASE)
_READ_PREFIXES = ("get", "list", "search", "find", "lookup", "read", "fetch", "query", "check")
_VERBS = {stem for _, stems in FAMILIES.values() for stem in stems} | set(_READ_PREFIXES)
_NOT_ENTITIES = _VERBS | {"a", "an", "the", "by", "for", "to", "of", "in", "on", "with", "from", "and", "or", "all",
                          "my", "over", "id", "ids", "info", "details", "data"}


def find_claims(conversation: dict[str, Any], tools: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The row's `claims`: claimed_not_done [{message_index, claim, text}] and
    done_not_told [{actual_index, functionName, turn}]. `tools` maps function keys to tools.json
    entries, for effects; without an entry, a name that starts with get/list/search/... is a read."""
    calls = _calls_by_message(conversation)
    entities = _entity_vocabulary(conversation, tools)
    claimed_not_done, told = [], set()
    said = ""    # everything the user said so far
    known = ""   # ... and every call returned
    known_ids: set[str] = set()   # the identifiers in `known`
    writes: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []   # the write calls that failed so far
    for index, message in enumerate(conversation.get("messages") or []):
        text = message.get("content") or ""
        if message.get("role") != "assistant":
            said, known = f"{said} {text}", f"{known} {text}"
            known_ids.update(_IDENTIFIER.findall(text))
            continue
        made = [call for call in calls.get(index, []) if not call["call"].get("error")]
        returned = " ".join(json.dumps([c["call"].get("arguments"), c["call"].get("result")], default=str)
                            for c in calls.get(index, []))
        known += " " + returned
        known_ids.update(_IDENTIFIER.findall(returned))
        writes += [call for call in made if is_write(call["call"]["functionName"], tools)]
        failed += [call["call"] for call in calls.get(index, [])
                   if call["call"].get("error") and is_write(call["call"]["functionName"], tools)]
        for claim, sentence in [*claims_in(text, said, known), *state_claims(text, failed, writes)]:
            if claim in FAMILIES:
                backing = [call for call in writes if family_of(call["call"]["functionName"]) == claim
                           and fits(call["call"], sentence, entities)]
                if backing:
                    told.update(call["actual_index"] for call in backing)
                    continue
            elif claim in known_ids:
                continue
            claimed_not_done.append({"message_index": index, "claim": claim, "text": sentence[:200]})
    done_not_told = [{"actual_index": call["actual_index"], "functionName": call["call"]["functionName"],
                      "turn": call["call"].get("turn")}
                     for call in writes if call["actual_index"] not in told]
    return {"claimed_not_done": claimed_not_done, "done_not_told": done_not_told}


def claims_in(text: str, said: str = "", known: str = "") -> list[tuple[str, str]]:
    """(claim, sentence) for each action family or identifier a statement claims. A claim word the
    bot repeats from the user's words ("our registered trademark ...") or from data it read (a status
    "Cancelled") is not a claim."""
    found = []
    said_words, known = " ".join(_WORD.findall(said)).lower(), known.lower()
    quoted_in_known = functools.cache(lambda word: f'"{word}"' in known)   # a few claim words, many matches
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not sentence or sentence.endswith("?") or _NEGATION.search(sentence) or _EXAMPLE.search(sentence):
            continue
        # "Ticket TKT-5 has been created, please tell me ...": the request alone claims nothing.
        stated = "; ".join(clause.strip() for clause in _CLAUSE.split(sentence) if not _REQUEST.search(clause))
        found += [(family, sentence) for family, pattern in _CLAIM.items()
                  if any(not _quoted(stated, match, said_words, quoted_in_known) for match in pattern.finditer(stated))]
        found += [(identifier, sentence) for identifier in dict.fromkeys(_IDENTIFIER.findall(stated))]
    return found


def state_claims(text: str, failed: list[dict[str, Any]], writes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(family, sentence) for each statement of a new state ("TKT-1001 is now Critical") that names a value a
    failed write tried to set and no successful write of that family set."""
    found = []
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not _NEW_STATE.search(sentence) or sentence.endswith("?") or _NEGATION.search(sentence):
            continue
        words = _words(sentence)
        for call in failed:
            family = family_of(call["functionName"])
            values = {value.lower() for value in _argument_texts(call) if not _IDENTIFIER.fullmatch(value)}
            if family is None or not any(_words(value) <= words for value in values):
                continue
            done = {value.lower() for made in writes if family_of(made["call"]["functionName"]) == family
                    for value in _argument_texts(made["call"])}
            if not any(_words(value) <= words for value in values - done):
                continue
            found.append((family, sentence))
            break
    return found


def _argument_texts(call: dict[str, Any]) -> list[str]:
    """The call's argument values that are text with a word in it."""
    return [value for value in (call.get("arguments") or {}).values() if isinstance(value, str) and _words(value)]


def _quoted(sentence: str, match: re.Match, said_words: str, quoted_in_known: Callable[[str], bool]) -> bool:
    """`said_words`: the user's words, lowercase, one space apart."""
    if quoted_in_known(match.group().lower()):
        return True
    words = [match.group(), *(word.group() for word in itertools.islice(_WORD.finditer(sentence, match.end()), 2))]
    return " ".join(words).lower() in said_words


def fits(call: dict[str, Any], sentence: str, entities: set[str]) -> bool:
    """Whether the claim in `sentence` can be about `call`: the entities it names (of `entities`,
    the known ones) include one of the call's, and the identifiers it gives one of the call's."""
    named = _words(sentence) & entities
    if named and not named & entity_words(call["functionName"]):
        return False
    identifiers = set(_IDENTIFIER.findall(sentence))
    return not identifiers or bool(identifiers & set(_IDENTIFIER.findall(
        json.dumps([call.get("arguments"), call.get("result")], default=str))))


def family_of(function_name: str) -> str | None:
    """The action family a function name belongs to, from its first word that names one."""
    for word in _name_words(function_name):
        for family, (_, stems) in FAMILIES.items():
            if word in stems:
                return family
    return None


@functools.lru_cache(maxsize=4096)
def entity_words(function_name: str) -> frozenset[str]:
    """What a function acts on: the words of its name but its verbs ("create_action_item" → action, item)."""
    return frozenset(_singular(word) for word in _name_words(function_name) if word not in _NOT_ENTITIES)


def _entity_vocabulary(conversation: dict[str, Any], tools: dict[str, dict[str, Any]]) -> set[str]:
    """The entity words of every function the suite or the conversation names."""
    names = [(tool.get("function") or {}).get("name") or key for key, tool in tools.items()]
    names += [call.get("functionName") or "" for call in conversation.get("function_calls") or []]
    names += [call.get("functionName") or "" for message in conversation.get("messages") or []
              for call in message.get("function_calls") or []]
    return {word for name in names for word in entity_words(name)}


def _name_words(function_name: str) -> list[str]:
    return [word.lower() for word in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", strip_plugin_prefix(function_name))
            if word]


def _words(text: str) -> set[str]:
    return {_singular(word.lower()) for word in re.findall(r"[A-Za-z]+", text)}


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


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
