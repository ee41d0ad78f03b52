"""The simulated user's own mistakes in a conversation, found without a model.

A conversation the user spoiled says nothing about the bot: `user_faults(conversation, case, tools)` lists
each mistake as {check, turn, message_index, detail}, where `turn` is the user turn (the k-th user message,
as lobeval numbers turns everywhere) and `message_index` the message's place in the transcript. The checks
(docs/metrics.md, "Simulated-user faults") are built to miss rather than to accuse: a fault found here
takes the conversation out of the bot's metrics, so a false one would hide a real failure of the bot.

- invented_value: the user states an identifier-like value (an ID such as TKT-1042, an e-mail address, a
  number of 3 digits or more, a date) that is neither in its case nor said by the bot before, nor (a number) the
  sum of two or three values of its case and one message of the bot's;
- ended_early: the user ends the conversation while the bot is asking something and no expected write was
  attempted, unless the user turned down the bot's yes/no proposal ("Shall I proceed?" .. "No, thanks");
- contradicted_instructions: the user gives an argument another value of its enum than the one its
  instructions hold;
- not_understood: the user gave up because it could not tell what the bot asked (its last message carries the
  scripted user's mark, users.NOT_UNDERSTOOD).

A case that does not know what its user was told (`scenario_known` false) or what it expected (`reference`
false) cannot be checked for what needs it: `checks_not_run` names those checks, which find nothing there.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Iterator, Mapping
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from dateutil import parser as dateparser

from lobeval.core.vocabulary import function_key
from lobeval.simulation.users import CLOSING_OFFER, NOT_UNDERSTOOD, STOP_PHRASE, asking, label, says_stop_phrase, texts

CHECKS = ("invented_value", "ended_early", "contradicted_instructions", "not_understood")
MARK_ONLY = ("not_understood",)
"""The checks that read a mark lobeval's scripted user leaves, not the conversation: alone they check no user."""
NEEDS_SCENARIO = ("invented_value", "contradicted_instructions")
"""The checks that read what the user was told: they cannot run when the case does not know it."""

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATE = re.compile(rf"\b(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|"
                   rf"{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}|\d{{1,2}}(?:st|nd|rd|th)? {_MONTH},? \d{{4}})\b",
                   re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_ID = re.compile(r"\b(?:[A-Za-z]{2,}-\d+|[A-Z]{2,}\d+)\b")
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
_SENTENCE = re.compile(r"[^.!?\n]*\?")
_OPTION_LINE = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•])\s")
_TRAILING_NOTE = re.compile(r"\s*\([^()\n]*\)\s*$")   # "Shall I go ahead? (yes/no)"


def user_faults(conversation: dict[str, Any], case: dict[str, Any],
                tools: Mapping[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every fault of the three checks, in transcript order. `tools`: function key → tools.json entry (the
    effect of each function and its parameters' JSON Schema); without them every required expected call
    counts as a write and no argument has an enum."""
    tools = tools or {}
    skipped = checks_not_run(case)
    found = [*(invented_values(conversation, case) if "invented_value" not in skipped else []),
             *(ended_early(conversation, case, tools) if "ended_early" not in skipped else []),
             *(contradicted_instructions(conversation, case, tools)
               if "contradicted_instructions" not in skipped else []),
             *not_understood(conversation)]
    return sorted(found, key=lambda fault: (fault["message_index"], CHECKS.index(fault["check"])))


def checks_not_run(case: dict[str, Any]) -> dict[str, str]:
    """The checks that cannot run on a case's conversations, each with why: those that read what the user was
    told when the case does not know it (`scenario_known` false: an imported run that publishes no tasks), and
    ended_early when the case knows no expected call (`reference` false). Their user is unchecked, not clean."""
    skipped = dict.fromkeys(NEEDS_SCENARIO, "the user's scenario is unknown") \
        if case.get("scenario_known") is False else {}
    if case.get("reference") is False:
        skipped["ended_early"] = "the expected calls are unknown"
    return {check: skipped[check] for check in CHECKS if check in skipped}


def user_turns(messages: list[dict[str, Any]]) -> Iterator[tuple[int, int, str]]:
    """(turn, message_index, text) of each user message: turn k is the k-th user message."""
    turn = 0
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            turn += 1
            yield turn, index, str(message.get("content") or "")


def _fault(check: str, turn: int, index: int, detail: str) -> dict[str, Any]:
    return {"check": check, "turn": turn, "message_index": index, "detail": detail}


# --- invented_value -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=65536)   # a case's texts come back with each of its trials
def stated_values(text: str) -> tuple[tuple[str, str, Any], ...]:
    """The identifier-like values of a text in order, each (kind, as written, key to compare by): dates
    (key: the calendar dates it may mean), e-mail addresses, IDs and numbers of 3 digits or more."""
    found, taken = [], []
    for kind, pattern in (("date", _DATE), ("email", _EMAIL), ("id", _ID), ("number", _NUMBER)):
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            taken.append(match.span())
            written = match.group()
            key = _key(kind, written)
            if key:
                found.append((match.start(), kind, written, key))
    return tuple((kind, written, key) for _, kind, written, key in sorted(found, key=lambda item: item[0]))


def _key(kind: str, written: str) -> Any:
    if kind == "date":
        return _dates(written)
    if kind == "email":
        return written.casefold()
    if kind == "id":
        return written.replace("-", "").casefold()
    digits = written.replace(",", "")
    # a number of fewer than 3 digits (an option's number, a count) names nothing
    return digits if sum(c.isdigit() for c in digits.split(".")[0]) >= 3 else None


@functools.lru_cache(maxsize=16384)
def _dates(text: str) -> frozenset[date]:
    """Every calendar date a date as written may mean ("05/01/2024": 1 May or 5 January)."""
    found = set()
    for dayfirst in (False, True):
        with contextlib.suppress(ValueError, OverflowError):
            found.add(dateparser.parse(text, dayfirst=dayfirst).date())
    return frozenset(found)


class Known:
    """The values a text (the case, what the bot said) holds, by kind, to look a stated value up in. A number
    is also known as any run of digits in the text (1042 of TKT-1042), an ID also without its separator."""

    def __init__(self) -> None:
        self.values: dict[str, set[Any]] = {"date": set(), "email": set(), "id": set(), "number": set()}

    def add(self, text: str) -> None:
        for kind, _, key in stated_values(text):
            if kind == "date":
                self.values["date"] |= key
            else:
                self.values[kind].add(key)
        self.values["number"].update(digits.replace(",", "") for digits in re.findall(r"\d[\d,]*(?:\.\d+)?", text))
        self.values["id"].update(m.replace("-", "").casefold() for m in _ID.findall(text))

    def holds(self, kind: str, key: Any) -> bool:
        if kind == "date":
            return bool(key & self.values["date"])
        return key in self.values[kind] or (kind == "id" and key in self.values["number"])


def invented_values(conversation: dict[str, Any], case: dict[str, Any]) -> list[dict[str, Any]]:
    """The first time the user states each value that neither its case (any field) nor anything said before
    it by the bot (its messages, its calls' arguments and results) holds."""
    messages = conversation.get("messages") or []
    if not any(stated_values(text) for _, _, text in user_turns(messages)):
        return []
    known = Known()
    for text in texts(case):
        known.add(text)
    calls_by_turn: dict[int, list[dict[str, Any]]] = {}
    for call in conversation.get("function_calls") or []:
        if isinstance(call.get("turn"), int):
            calls_by_turn.setdefault(call["turn"], []).append(call)
    addends = [_amounts(" ".join(texts(case)))]   # what a total the user works out may be the sum of
    faults, flagged, turn = [], set(), 0
    for index, message in enumerate(messages):
        content = str(message.get("content") or "")
        if message.get("role") != "user":
            known.add(content)
            addends.append(_amounts(content))
            for text in texts(message.get("function_calls") or []):
                known.add(text)
            continue
        for text in texts(calls_by_turn.pop(turn, [])):   # calls recorded apart from the messages (imports)
            known.add(text)
        turn += 1
        for kind, written, key in stated_values(content):
            shown = (kind, written.casefold())
            if not known.holds(kind, key) and shown not in flagged and not (kind == "number" and _a_sum(key, addends)):
                flagged.add(shown)
                faults.append(_fault("invented_value", turn, index,
                                     f"the user said {kind} {written!r}, which is neither in its case nor said "
                                     f"by the bot before"))
    return faults


ADDENDS = 3
"""The most values a total the user works out adds up (bounded: more would make any number a sum)."""
_AMOUNT = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")


def _amounts(text: str) -> tuple[Decimal, ...]:
    """The numbers a text states, each once, in order: what a total may add up (the case's, a bot message's)."""
    found = []
    for written in _AMOUNT.findall(text):
        with contextlib.suppress(InvalidOperation):
            found.append(Decimal(written.replace(",", "")))
    return tuple(dict.fromkeys(found))


def _a_sum(key: str, addends: list[tuple[Decimal, ...]]) -> bool:
    """Whether a number the user states is the sum of two to ADDENDS values of its case and one message of the bot's
    (`addends`: the case's values, then each bot message's): "the card would hold $696" when the case says $129 and
    the bot a refund of $567 is worked out, not invented. Each text's first MOST_ADDENDS values are tried (bounded)."""
    with contextlib.suppress(InvalidOperation):
        total = Decimal(key)
        case, *replies = [[value for value in values if 0 < value < total][:MOST_ADDENDS] for values in addends]
        return any(sum(chosen) == total for values in (case, *([*case, *reply] for reply in replies))
                   for size in range(2, ADDENDS + 1) for chosen in itertools.combinations(values, size))
    return False


MOST_ADDENDS = 40


# --- ended_early ----------------------------------------------------------------------------------

def expected_writes(case: dict[str, Any], tools: Mapping[str, dict[str, Any]]) -> list[str]:
    """The function keys of the case's required expected calls that change something: of effect "write"
    in `tools`, or every one when the function is not in `tools`."""
    keys = []
    for call in case.get("expected_function_calls") or []:
        key = function_key(call["functionName"])
        tool = tools.get(key)
        if not call.get("optional") and (tool is None or tool.get("effect") == "write"):
            keys.append(key)
    return list(dict.fromkeys(keys))


def open_question(text: str) -> str | None:
    """The question a bot message ends on, when it asks the user for something: its last sentence, before
    any list of options and a closing note in brackets, ends with a question mark and is no closing offer
    ("Anything else?")."""
    lines = text.strip().splitlines()
    while lines and (not lines[-1].strip() or _OPTION_LINE.match(lines[-1])):
        lines.pop()
    end = _TRAILING_NOTE.sub("", "\n".join(lines)).rstrip(" *_")
    if not end.endswith("?"):
        return None
    question = _SENTENCE.findall(end)[-1].strip()
    return None if CLOSING_OFFER.search(question) else question


_YES_NO = re.compile(r"\b(?:would you like|do you want|shall i|should i|may i|can i|want me to|is (?:it|that) (?:ok|okay|"
                     r"alright|fine)|do you wish|are you sure|would you prefer|(?:do you|would you) (?:agree|accept|"
                     r"confirm)|(?:proceed|go ahead)\b)", re.IGNORECASE)
_DECLINE = re.compile(r"^\W*(?:no\b|nope\b|nah\b|not (?:now|today|right now)\b|never ?mind\b|don't\b|do not\b|"
                      r"i(?:'d| would) rather not\b|i(?:'ll| will) (?:pass|keep|leave)\b|let's not\b|"
                      r"(?:that's|that is) (?:ok|okay|fine|alright)[,.!]?\s*(?:i|we)(?:'ll| will) (?:keep|leave)\b)",
                      re.IGNORECASE)


def declined(question: str, reply: str) -> bool:
    """Whether the user's reply turns down the bot's yes/no proposal ("Would you like me to proceed?" .. "No,
    thanks"): ending the conversation then is the user's choice, no fault."""
    return bool(_YES_NO.search(question) and _DECLINE.search(reply))


def ended_early(conversation: dict[str, Any], case: dict[str, Any],
                tools: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's closing message, when the user ended the conversation (user_finished, or a transcript whose
    last message is the user's with the stop phrase) while the bot's last message asked something and
    before any of the case's expected writes was attempted (a call that failed was attempted)."""
    messages = conversation.get("messages") or []
    reason = (conversation.get("termination") or {}).get("reason")
    last = messages[-1] if messages else {}
    if last.get("role") != "user" or not (reason == "user_finished"
                                          or says_stop_phrase(str(last.get("content") or ""), STOP_PHRASE)):
        return []
    if last.get(NOT_UNDERSTOOD):   # the user gave up not understanding: not_understood says so
        return []
    writes = expected_writes(case, tools)
    attempted = {function_key(call["functionName"]) for call in conversation.get("function_calls") or []}
    if not writes or attempted & set(writes):
        return []
    bot = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    question = open_question(str(bot.get("content") or "")) if bot else None
    if question is None or declined(question, str(last.get("content") or "")):
        return []
    turn, index, _ = list(user_turns(messages))[-1]
    return [_fault("ended_early", turn, index,
                   f"the user ended the conversation while the bot asked {question!r}, before any of "
                   f"{', '.join(writes)} was attempted")]


# --- not_understood -------------------------------------------------------------------------------

def not_understood(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The user's closing message when it gave up because it could not tell what the bot asked: the last message
    is the user's and carries the mark users.NOT_UNDERSTOOD. The detail names the bot's last request and how many
    of the user's messages in a row said it could not tell."""
    messages = conversation.get("messages") or []
    if not messages or messages[-1].get("role") != "user" or not messages[-1].get(NOT_UNDERSTOOD):
        return []
    turns = list(user_turns(messages))
    in_a_row = next((n for n, (_, index, _) in enumerate(reversed(turns)) if not messages[index].get(NOT_UNDERSTOOD)),
                    len(turns))
    bot = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    asked = asking(str(bot.get("content") or ""))[-1:] if bot else []
    turn, index, _ = turns[-1]
    what = f"the bot's {asked[0]!r}" if asked else "the bot's last message"
    return [_fault("not_understood", turn, index,
                   f"the simulated user could not tell what {what} asked for ({in_a_row} messages in a row) and "
                   f"ended the conversation")]


# --- contradicted_instructions --------------------------------------------------------------------

def instructed_values(case: dict[str, Any], tools: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """By argument name, for each argument of an expected call that the tool's schema gives an enum and whose
    expected value (a literal of that enum) the user was told (in its instructions or business data):
    {"wanted": the values the case expects or plans as a mistake (by their case-folded text), "enum": the
    enum's values}."""
    told = " ".join(" ".join(texts(value)) for value in (case.get("user_instructions"), case.get("business_data")))
    told = " ".join(told.split()).casefold()
    found: dict[str, dict[str, Any]] = {}
    for call in case.get("expected_function_calls") or []:
        properties = ((tools.get(function_key(call["functionName"])) or {}).get("function") or {}).get(
            "parameters", {}).get("properties") or {}
        for name, value in (call.get("arguments") or {}).items():
            enum = (properties.get(name) or {}).get("enum") if isinstance(properties.get(name), dict) else None
            if not isinstance(value, str) or not enum or value.casefold() not in {str(v).casefold() for v in enum}:
                continue
            if not re.search(rf"\b{re.escape(value.casefold())}\b", told):
                continue
            entry = found.setdefault(name, {"wanted": {}, "enum": set()})
            entry["wanted"][value.casefold()] = value
            entry["enum"] |= {str(v) for v in enum}
    for name, mistake in (case.get("user_mistakes") or {}).items():
        if name in found:
            found[name]["wanted"][str(mistake).casefold()] = str(mistake)
    return found


def stated_for(argument: str, values: set[str], text: str) -> list[str]:
    """The values of `values` the text states for the argument: "priority: Low", "the priority is Low",
    "priority Low", "Low priority" (the argument named by its label or the label's first word)."""
    names = "|".join(re.escape(name) for name in dict.fromkeys([label(argument), label(argument).split()[0]]))
    found = []
    for value in sorted(values, key=len, reverse=True):
        said = re.escape(value)
        if re.search(rf"\b(?:{names})\b\s*(?::|=|is|to|should be|of)?\s*\b{said}\b|\b{said}\s+(?:{names})\b",
                     text, re.IGNORECASE):
            found.append(value)
    return found


def contradicted_instructions(conversation: dict[str, Any], case: dict[str, Any],
                              tools: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each user message that states, for an argument with an enum, another value of the enum than the one
    its instructions hold, and does not state that one (nor a mistake the case plans) in the same message."""
    instructed = instructed_values(case, tools)
    faults = []
    for turn, index, text in user_turns(conversation.get("messages") or []):
        for argument, entry in instructed.items():
            stated = stated_for(argument, entry["enum"] | set(entry["wanted"].values()), text)
            if not stated or any(value.casefold() in entry["wanted"] for value in stated):
                continue
            wanted = " or ".join(sorted(repr(value) for value in entry["wanted"].values()))
            faults.append(_fault("contradicted_instructions", turn, index,
                                 f"the user asked for {label(argument)} {stated[0]!r} although its instructions "
                                 f"say {wanted}"))
    return faults


# --- the user-review judge ------------------------------------------------------------------------

def review_failed(row: dict[str, Any]) -> bool:
    """Whether the user-review judge was asked about a conversation and gave no verdict (its part of the judges'
    answer stayed unusable, or their request failed): its user is then unchecked for what only that judge sees,
    which is not the same as clean."""
    verdict = row.get("judges") or {}
    return verdict.get("status") == "run" and "user_review" in verdict and verdict["user_review"] is None


def judged_faults(review: dict[str, Any] | None, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user-review judge's verdict (`judges.parse_user_review`) as a fault, {check: "user_review:<check>",
    turn, message_index, detail: its reason}; none when it found none or could not judge."""
    if not review or not review.get("fault"):
        return []
    turn = review.get("turn")
    index = next((index for number, index, _ in user_turns(messages) if number == turn), None)
    return [_fault(f"user_review:{review['check']}", turn, index, review["reason"])]
