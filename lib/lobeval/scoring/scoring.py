"""Scoring one conversation's function calls against its case (SPEC §8).

Pure functions over plain data: `score_conversation(conversation, case, rules)` returns one row
of `evaluation_results.json` — the metrics and the evidence behind them (pairs, unpaired calls,
wrong, missing and extra arguments), so the analysis can say *why*.
"""
from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

import numpy as np
from dateutil import parser as dateparser
from rapidfuzz import fuzz
from scipy.optimize import linear_sum_assignment

from lobeval.core import operators
from lobeval.core.operators import DEFAULT_THRESHOLD, MISSING
from lobeval.core.protocol import reply_text
from lobeval.core.records import MACHINERY_ERRORS, METRICS, NORMAL_ENDINGS
from lobeval.simulation.users import declines
from lobeval.core.vocabulary import function_key, normal_text


_BOOL_WORDS = {"true": True, "yes": True, "false": False, "no": False}
_DATE_LIKE = re.compile(
    r"^\d{4}-\d{1,2}-\d{1,2}([ T].*)?$|^\d{1,2}[/.]\d{1,2}[/.]\d{2,4}$"
    r"|^(?=.*\d)(?=.*(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)).{3,40}$", re.IGNORECASE)


Similar = Callable[[str, str, str, float], bool]
"""similar(expected, actual, mode, threshold): whether two normalised texts agree."""


def fuzzy_similar(expected: str, actual: str, mode: str = "fuzzy", threshold: float = DEFAULT_THRESHOLD) -> bool:
    return fuzz.ratio(expected, actual) / 100 >= threshold


@dataclass(frozen=True)
class Rules:
    """What holds for every conversation of a run: the suite's settings and the analysts' labels."""

    ignored: frozenset[str] = frozenset()
    """Function keys dropped from both sides before matching."""
    optional_effects: frozenset[str] = frozenset()
    allowed_calls: frozenset[str] = frozenset()
    """Function keys whose extra calls the whole suite allows."""
    tools: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Function key → tools.json entry (schema and effect); empty when no suite is given."""
    labels: tuple[dict[str, Any], ...] = ()
    text_mode: str = "fuzzy"
    """How free text of several words is compared: fuzzy, or semantic with an embedding model."""
    similar: Similar = fuzzy_similar

    def effect(self, name: str) -> str | None:
        tool = self.tools.get(function_key(name))
        return tool.get("effect") if tool else None

    def properties(self, name: str) -> dict[str, Any]:
        """The JSON Schema of each parameter of a function, by name ({} when unknown)."""
        tool = self.tools.get(function_key(name)) or {}
        return tool.get("function", {}).get("parameters", {}).get("properties", {})

    def call_allowed(self, scenario: str, name: str, template_allowed: list[str]) -> bool:
        key = function_key(name)
        return (key in self.allowed_calls or key in {function_key(n) for n in template_allowed}
                or any(label["kind"] == "allowed_extra_call" and _label_applies(label, scenario, key)
                       for label in self.labels))

    def quarantined(self, case_id: str, scenario: str) -> bool:
        """Whether an analyst quarantined the case (a `quarantined_case` label, for one scenario or any): its
        conversations are left out of the bot's metrics."""
        return any(label.get("kind") == "quarantined_case" and label.get("case_id") == case_id
                   and label.get("scenario_name") in (None, "", scenario) for label in self.labels)

    def argument_allowed(self, scenario: str, name: str, argument: str) -> bool:
        key = function_key(name)
        return any(label["kind"] == "allowed_extra_argument" and label.get("argument") == argument
                   and _label_applies(label, scenario, key) for label in self.labels)


def _label_applies(label: dict[str, Any], scenario: str, key: str) -> bool:
    """A label without a scenario_name holds for the whole suite."""
    return function_key(label["functionName"]) == key and label.get("scenario_name") in (None, "", scenario)


# --- argument agreement ---------------------------------------------------------------------

def truth(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        # A word of _BOOL_WORDS is one token of at most 5 characters (case folding never shortens one).
        if len(value) > 5 and len(value.strip()) > 5:
            return None
        return _BOOL_WORDS.get(normal_text(value))
    return None


def number(value: Any) -> Decimal | None:
    """The exact number a value states ("4", 4, 4.0 are one number; 2**64 + 1 stays itself), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | str):
        try:
            found = Decimal(value.strip() if isinstance(value, str) else value)
        except (InvalidOperation, ValueError):
            return None
        return found if found.is_finite() else None
    return None


def numbers_agree(expected: Decimal, actual: Decimal) -> bool:
    """Whole numbers agree only when equal; others within a relative 1e-9 (a float's rounding of a decimal)."""
    if expected == actual or (expected == expected.to_integral_value() and actual == actual.to_integral_value()):
        return expected == actual
    return math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-9)


def calendar_dates(value: Any) -> frozenset[date]:
    """Every calendar date a value can mean: "05/01/2024" is 1 May or 5 January."""
    if isinstance(value, datetime):
        return frozenset({value.date()})
    if isinstance(value, date):
        return frozenset({value})
    return _text_dates(value) if isinstance(value, str) else frozenset()


# What a date leaves out is filled from this, never from today: "May 2024" is 1 May 2024 on any day the scorer
# runs, and "5 May" (no year) is a day of year 1, which no full date equals.
_NO_DEFAULT = datetime(1, 1, 1)


@lru_cache(maxsize=65536)
def _text_dates(text: str) -> frozenset[date]:
    text = text.strip()
    if len(text) == 10 or text[10:11] in ("T", " "):
        with contextlib.suppress(ValueError):
            return frozenset({date.fromisoformat(text[:10])})
    found = set()
    for dayfirst in (False, True):
        with contextlib.suppress(ValueError, OverflowError):
            found.add(dateparser.parse(text, dayfirst=dayfirst, default=_NO_DEFAULT).date())
    return frozenset(found)


def _is_date(expected: Any, schema: dict[str, Any]) -> bool:
    return schema.get("format") in ("date", "date-time") or (isinstance(expected, str) and _may_be_date(expected)
                                                             and _date_like(expected))


def _may_be_date(text: str) -> bool:
    """False for text _DATE_LIKE cannot match, without the cache: past 40 characters only the ISO form can."""
    return len(text) <= 40 or len(text := text.strip()) <= 40 or (text[:4].isdecimal() and text[4:5] == "-")


@lru_cache(maxsize=65536)
def _date_like(text: str) -> bool:
    return bool(_DATE_LIKE.match(text.strip()))


def _texts_agree(expected: Any, actual: Any, rules: Rules, mode: str | None = None,
                 threshold: float = DEFAULT_THRESHOLD) -> bool:
    want, got = normal_text(expected), normal_text(actual)
    if want == got:
        return True
    mode = mode or ("exact" if len(want.split()) <= 1 else rules.text_mode)
    if mode == "exact":
        return False
    if mode == "semantic" and rules.text_mode != "semantic":
        mode = "fuzzy"  # no embedding model configured: the closest comparison there is
    return rules.similar(want, got, mode, threshold)


def agrees(expected: Any, actual: Any, rules: Rules, schema: dict[str, Any] | None = None,
           resolve: operators.Resolve = lambda ref: MISSING) -> bool:
    """Whether an actual argument value agrees with the expected one (SPEC §8).

    `resolve(ref)` gives the result value a `$ref` points at, or MISSING when there is none.
    """
    schema = schema if isinstance(schema, dict) else {}   # `true` is a valid JSON Schema too
    if isinstance(expected, dict):   # operators are objects
        alternatives = operators.options(expected, resolve)
        if alternatives is not None:
            return any(agrees(option, actual, rules, schema, resolve) for option in alternatives)
        match = operators.text_match(expected)
        if match is not None:
            mode, value, threshold = match
            return mode == "any" or _texts_agree(value, actual, rules, mode, threshold)
        properties = schema.get("properties", {})
        return isinstance(actual, dict) and all(
            key in actual and agrees(value, actual[key], rules, properties.get(key), resolve)
            for key, value in expected.items())
    if isinstance(expected, list):
        items = schema.get("items") or {}
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            agrees(want, got, rules, items, resolve) for want, got in zip(expected, actual))
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(actual, dict | list):
        return False
    if _same(expected, actual):   # equal values agree before any clever comparison is tried
        return True
    kind = schema.get("type")
    if isinstance(expected, bool) or kind == "boolean" or (isinstance(expected, str) and truth(expected) is not None
                                                           and truth(actual) is not None):
        return truth(expected) is not None and truth(expected) == truth(actual)
    if (isinstance(expected, int | float) or kind in ("number", "integer")) and number(expected) is not None:
        got = number(actual)
        return got is not None and numbers_agree(number(expected), got)
    if _is_date(expected, schema):
        wanted, given = calendar_dates(expected), calendar_dates(actual)
        if wanted and given:   # dates only when both sides are one: "john_may_1987" is no date
            return bool(wanted & given)
    return _texts_agree(expected, actual, rules)


def _same(expected: Any, actual: Any) -> bool:
    """Equal as values, or as text once trimmed and case-folded ("Open" and "open ")."""
    if type(expected) is type(actual) and expected == actual:
        return True
    return isinstance(expected, str) and isinstance(actual, str) and normal_text(expected) == normal_text(actual)


# --- one conversation -----------------------------------------------------------------------

def _expected_calls(case: dict[str, Any], rules: Rules) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(case.get("expected_function_calls") or []):
        if function_key(call["functionName"]) in rules.ignored:
            continue
        optional = bool(call.get("optional")) or rules.effect(call["functionName"]) in rules.optional_effects
        calls.append({"index": index, "name": call["functionName"], "key": function_key(call["functionName"]),
                      "arguments": call.get("arguments") or {}, "optional": optional})
    return calls


def _actual_calls(conversation: dict[str, Any], rules: Rules) -> list[dict[str, Any]]:
    return [{"index": index, "name": call["functionName"], "key": function_key(call["functionName"]),
             "arguments": call.get("arguments") or {}, "failed": bool(call.get("error")),
             "turn": call.get("turn"), "raw": call}
            for index, call in enumerate(conversation.get("function_calls") or [])
            if function_key(call["functionName"]) not in rules.ignored]


def _shown(want: Any, resolve: operators.Resolve) -> Any:
    """An expected value as a row shows it: a `$ref` with the value it resolved to."""
    if isinstance(want, dict) and "$ref" in want:
        target = resolve(want["$ref"])
        return {**want, "resolved": None if target is MISSING else target}
    return want


def check_arguments(expected: dict[str, Any], actual: dict[str, Any], conversation_calls: list[dict[str, Any]],
                    rules: Rules, scenario: str) -> dict[str, Any]:
    """The argument-by-argument verdict of one (expected, actual) pair."""
    resolve = operators.resolver(conversation_calls, actual["index"])
    properties = rules.properties(expected["name"])
    arguments = {}
    for name, want in expected["arguments"].items():
        if name not in actual["arguments"]:
            arguments[name] = {"expected": _shown(want, resolve), "actual": None, "status": "missing"}
            continue
        got = actual["arguments"][name]
        ok = agrees(want, got, rules, properties.get(name), resolve)
        arguments[name] = {"expected": _shown(want, resolve), "actual": got, "status": "correct" if ok else "wrong"}
    extra = {name: {"actual": value, "allowed": rules.argument_allowed(scenario, actual["name"], name)}
             for name, value in actual["arguments"].items() if name not in expected["arguments"]}
    return {"arguments": arguments, "extra_arguments": extra,
            "correct": sum(a["status"] == "correct" for a in arguments.values())}


# Pair weights, lexicographic: as many pairs as possible, required calls first, then correct
# arguments, then calls that did not fail.
_PAIR, _REQUIRED, _ARGUMENT, _SUCCEEDED = 1e9, 1e6, 1e2, 1.0


def pair_calls(weights: np.ndarray, ordered: bool) -> list[tuple[int, int]]:
    """One-to-one pairs (expected row, actual column) maximising the total weight; 0 = cannot pair.

    Unordered: an assignment problem. Ordered: the best common subsequence, so pairs keep the
    expected order in the actual calls too.
    """
    rows, cols = weights.shape
    if rows == 0 or cols == 0:
        return []
    if not ordered:
        chosen = linear_sum_assignment(weights, maximize=True)
        return [(int(i), int(j)) for i, j in zip(*chosen) if weights[i, j] > 0]
    best = np.zeros((rows + 1, cols + 1))
    for i in range(1, rows + 1):
        for j in range(1, cols + 1):
            take = best[i - 1, j - 1] + weights[i - 1, j - 1] if weights[i - 1, j - 1] > 0 else -1
            best[i, j] = max(best[i - 1, j], best[i, j - 1], take)
    pairs, i, j = [], rows, cols
    while i > 0 and j > 0:
        if weights[i - 1, j - 1] > 0 and best[i, j] == best[i - 1, j - 1] + weights[i - 1, j - 1]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif best[i, j] == best[i - 1, j]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def ratio(numerator: float, denominator: float, *, empty: float = 1.0) -> float:
    return numerator / denominator if denominator else empty


def assistant_text(conversation: dict[str, Any]) -> str:
    """Everything the bot said, each reply as `reply_text` reads it."""
    return "\n".join(reply_text(m.get("content")) for m in conversation.get("messages") or []
                     if m.get("role") == "assistant")


def missing_outputs(expected_outputs: list[str], text: str) -> list[str]:
    """Facts the bot had to say: case-insensitive substrings, commas ignored."""
    said = text.replace(",", "").casefold()
    return [fact for fact in expected_outputs if str(fact).replace(",", "").casefold() not in said]


def expects_nothing(case: dict[str, Any]) -> bool:
    """Whether a case is a request the bot must decline (out of scope): calls it forbids, and no expected call,
    no expected output, no allowed call, no attack (an attack's verdict is security's)."""
    return bool(case.get("forbidden_function_calls")) and not (
        case.get("expected_function_calls") or case.get("expected_outputs") or case.get("allowed_function_calls")
        or case.get("attack"))


def declined(conversation: dict[str, Any]) -> bool:
    """Whether the bot, after the user's first message, said it cannot or will not do it (users.declines: "I
    can't", "I'm unable to", "I only handle ...", "outside my scope")."""
    messages = conversation.get("messages") or []
    first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages))
    return any(m.get("role") == "assistant" and declines(str(m.get("content") or "")) for m in messages[first:])


def total_cost(usage: dict[str, dict[str, Any]]) -> float | None:
    """The conversation's cost over its roles; None (unknown) when any role used a model without a price."""
    costs = [(numbers or {}).get("cost_usd", 0.0) for numbers in usage.values()]
    if any(cost is None for cost in costs) or any((numbers or {}).get("cost_known") is False for numbers in usage.values()):
        return None
    return sum(costs)


def score_conversation(conversation: dict[str, Any], case: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """One row of evaluation_results.json (see the README's "Results" section)."""
    scenario = case.get("scenario_name") or conversation.get("scenario_name") or ""
    termination = (conversation.get("termination") or {}).get("reason", "imported")
    row: dict[str, Any] = {
        "case_id": conversation["case_id"], "trial": conversation.get("trial", 0), "scenario_name": scenario,
        "status": "error" if termination in MACHINERY_ERRORS else "scored", "termination": termination,
        "turns": (conversation.get("termination") or {}).get("turns"), "error": conversation.get("error"),
        "duration_s": conversation.get("duration_s"), "usage": conversation.get("usage") or {},
        "cost_usd": total_cost(conversation.get("usage") or {})}
    referenced = case.get("reference", True) is not False
    row["reference"] = referenced
    if row["status"] == "error":
        return {**row, **{metric: None for metric in METRICS}, "failed_calls": []}

    expected, actual = _expected_calls(case, rules), _actual_calls(conversation, rules)
    failed_calls = [{"actual_index": call["index"], "functionName": call["name"], "error": call["raw"].get("error"),
                     "turn": call["turn"]} for call in actual if call["failed"]]
    if not referenced:
        return {**row, **_unreferenced(case, actual, failed_calls, termination, rules, scenario)}
    all_calls = conversation.get("function_calls") or []
    checks: dict[tuple[int, int], dict[str, Any]] = {}
    weights = np.zeros((len(expected), len(actual)))
    for i, want in enumerate(expected):
        for j, got in enumerate(actual):
            if want["key"] == got["key"]:
                checks[i, j] = check_arguments(want, got, all_calls, rules, scenario)
                weights[i, j] = (_PAIR + _REQUIRED * (not want["optional"]) + _ARGUMENT * checks[i, j]["correct"]
                                 + _SUCCEEDED * (not got["failed"]))
    pairs = pair_calls(weights, bool(case.get("ordered")))
    paired_expected, paired_actual = {i for i, _ in pairs}, {j for _, j in pairs}

    pair_rows = []
    for i, j in pairs:
        check = checks[i, j]
        pair_rows.append({"expected_index": expected[i]["index"], "actual_index": actual[j]["index"],
                          "functionName": expected[i]["name"], "optional": expected[i]["optional"],
                          "failed": actual[j]["failed"], "arguments": check["arguments"],
                          "extra_arguments": check["extra_arguments"]})
    unpaired_expected = [{"expected_index": call["index"], "functionName": call["name"], "optional": call["optional"]}
                         for i, call in enumerate(expected) if i not in paired_expected]
    template_allowed = case.get("allowed_function_calls") or []
    unpaired_actual = [{"actual_index": call["index"], "functionName": call["name"], "effect": rules.effect(call["name"]),
                        "allowed": rules.call_allowed(scenario, call["name"], template_allowed),
                        "failed": call["failed"], "turn": call["turn"]}
                       for j, call in enumerate(actual) if j not in paired_actual]
    forbidden = {function_key(name) for name in case.get("forbidden_function_calls") or []}
    forbidden_calls = [{"actual_index": call["index"], "functionName": call["name"]}
                       for call in actual if call["key"] in forbidden]

    counted_expected = sum(1 for i, call in enumerate(expected) if i in paired_expected or not call["optional"])
    required = sum(not call["optional"] for call in expected)
    expected_args = sum(len(p["arguments"]) for p in pair_rows)
    correct_args = sum(a["status"] == "correct" for p in pair_rows for a in p["arguments"].values())
    actual_args = sum(len(actual[j]["arguments"]) for _, j in pairs)
    allowed_extra = sum(e["allowed"] for p in pair_rows for e in p["extra_arguments"].values())
    none_paired = required > 0 and not pairs
    metrics = {
        "Recall_fn": ratio(len(pairs), counted_expected),
        "Precision_fn": ratio(len(pairs), len(pairs) + sum(not u["allowed"] for u in unpaired_actual)),
        "Recall_args": 0.0 if none_paired else ratio(correct_args, expected_args),
        "Precision_args": 0.0 if none_paired else ratio(correct_args, actual_args - allowed_extra),
    }
    metrics["Reliability"] = (metrics["Recall_fn"] + metrics["Recall_args"]) / 2

    outputs_missing = missing_outputs(case.get("expected_outputs") or [], assistant_text(conversation))
    required_ok = {i for i, j in pairs if not actual[j]["failed"]
                   and all(a["status"] == "correct" for a in checks[i, j]["arguments"].values())}
    success_checks = {
        "calls_correct": all(i in required_ok for i, call in enumerate(expected) if not call["optional"]),
        "outputs_said": not outputs_missing,
        "no_forbidden_calls": not forbidden_calls,
        "no_unallowed_writes": not any(u["effect"] == "write" and not u["allowed"] and not u["failed"]
                                       for u in unpaired_actual),
        "ended_normally": termination in NORMAL_ENDINGS,
    }
    if expects_nothing(case):   # nothing to do is passed only by saying so (docs/metrics.md, section 4)
        success_checks["declined"] = declined(conversation)
    metrics["Success"] = int(all(success_checks.values()))
    return {
        **row, **metrics, "checks": success_checks, "pairs": pair_rows,
        "unpaired_expected": unpaired_expected, "unpaired_actual": unpaired_actual,
        "wrong_arguments": [{"functionName": p["functionName"], "argument": name, "expected": a["expected"],
                             "actual": a["actual"]}
                            for p in pair_rows for name, a in p["arguments"].items() if a["status"] == "wrong"],
        "missing_arguments": [{"functionName": p["functionName"], "argument": name, "expected": a["expected"]}
                              for p in pair_rows for name, a in p["arguments"].items() if a["status"] == "missing"],
        "extra_arguments": [{"functionName": p["functionName"], "argument": name, "actual": e["actual"],
                             "allowed": e["allowed"]}
                            for p in pair_rows for name, e in p["extra_arguments"].items()],
        "missing_outputs": outputs_missing, "forbidden_calls": forbidden_calls, "failed_calls": failed_calls,
    }


def _unreferenced(case: dict[str, Any], actual: list[dict[str, Any]], failed_calls: list[dict[str, Any]],
                  termination: str, rules: Rules, scenario: str) -> dict[str, Any]:
    """What a conversation without a reference (no expected calls: an imported production trace) is scored by:
    the checks that need none. Every metric against expected calls is None, never 1.0 from an empty
    denominator; the unallowed-write check only when an allow-list applies (inline or the suite's)."""
    forbidden = {function_key(name) for name in case.get("forbidden_function_calls") or []}
    forbidden_calls = [{"actual_index": call["index"], "functionName": call["name"]}
                       for call in actual if call["key"] in forbidden]
    checks = {"no_failed_calls": not failed_calls, "no_forbidden_calls": not forbidden_calls}
    evidence: dict[str, Any] = {}
    template_allowed = case.get("allowed_function_calls")
    if template_allowed is not None or rules.allowed_calls:
        writes = [{"actual_index": call["index"], "functionName": call["name"], "turn": call["turn"]}
                  for call in actual if rules.effect(call["name"]) == "write" and not call["failed"]
                  and not rules.call_allowed(scenario, call["name"], template_allowed or [])]
        checks["no_unallowed_writes"] = not writes
        evidence["unallowed_writes"] = writes
    checks["ended_normally"] = termination in NORMAL_ENDINGS
    return {**{metric: None for metric in METRICS}, "checks": checks, "pairs": [], "unpaired_expected": [],
            "unpaired_actual": [], "wrong_arguments": [], "missing_arguments": [], "extra_arguments": [],
            "missing_outputs": [], "forbidden_calls": forbidden_calls, "failed_calls": failed_calls, **evidence}
