"""The operators an expected value may use instead of a literal (docs/formats.md), in one place.

- `{"$ref": "<function>.result.<path>"}`: the result of the earlier actual call of that function;
- `{"$oneOf": [v1, v2, ...]}`: any of the options;
- `{"$match": "exact|fuzzy|semantic|any", "value": v, "threshold": 0.8}`: text compared that way.

Anything else is a literal; operators may sit inside one (an object's field, a list's item) and
inside each other (a `$oneOf` option). Kept free of heavy imports: the scripted user needs it.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from lobeval.core.vocabulary import function_key

MATCH_MODES = ("exact", "fuzzy", "semantic", "any")
DEFAULT_THRESHOLD = 0.8
MISSING: Any = object()
"""What resolving gives for a reference that points at nothing."""

Resolve = Callable[[str], Any]
"""resolve(ref): the value a `$ref` points at, or MISSING."""


def _is(value: Any, operator: str) -> bool:
    return isinstance(value, dict) and operator in value


def problems(value: Any, earlier: Collection[str]) -> list[str]:
    """What is wrong with the operators in an expected value, outermost first.

    `earlier` holds the function keys of the expected calls made before: a `$ref` may only point there.
    """
    if _is(value, "$ref"):
        return _ref_problems(value["$ref"], earlier)
    if _is(value, "$oneOf"):
        options = value["$oneOf"]
        if not isinstance(options, list) or not options:
            return ["$oneOf must be a non-empty list of values"]
        return [problem for option in options for problem in problems(option, earlier)]
    if _is(value, "$match"):
        return _match_problems(value)
    if isinstance(value, dict):
        return [problem for item in value.values() for problem in problems(item, earlier)]
    if isinstance(value, list):
        return [problem for item in value for problem in problems(item, earlier)]
    return []


def _ref_problems(ref: Any, earlier: Collection[str]) -> list[str]:
    parts = ref.split(".") if isinstance(ref, str) else []
    if len(parts) < 3 or parts[1] != "result":
        return [f"$ref {ref!r} must look like '<function>.result.<path>'"]
    if function_key(parts[0]) not in earlier:
        return [f"$ref to '{parts[0]}', which is not an earlier expected call of this scenario"]
    return []


def _match_problems(value: dict[str, Any]) -> list[str]:
    found = []
    if value["$match"] not in MATCH_MODES:
        found.append(f"$match must be one of {', '.join(MATCH_MODES)}")
    if value["$match"] != "any" and "value" not in value:
        found.append("$match needs a 'value'")
    threshold = value.get("threshold", DEFAULT_THRESHOLD)
    if not isinstance(threshold, int | float) or not 0 < threshold <= 1:
        found.append("$match threshold must be a number in (0, 1]")
    return found


def literals(value: Any) -> list[Any]:
    """The literal values an expected value stands for: none for a `$ref` (known only at run time)
    or `$match: any`, each option's for a `$oneOf`."""
    if _is(value, "$ref"):
        return []
    if _is(value, "$oneOf"):
        return [literal for option in value["$oneOf"] for literal in literals(option)]
    if _is(value, "$match"):
        return [] if value["$match"] == "any" else literals(value.get("value"))
    return [value]


def first_literal(value: Any) -> Any:
    """The literal a user would say for an expected value; None when it stands for none."""
    return next(iter(literals(value)), None)


def refs(value: Any) -> list[str]:
    """Every `$ref` inside an expected value, in order."""
    if _is(value, "$ref"):
        return [value["$ref"]]
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in refs(item)]
    return []


def split_ref(ref: str) -> tuple[str, list[str]]:
    """`create_ticket.result.ticket.id` → ("create_ticket", ["ticket", "id"])."""
    function, _, path = ref.partition(".result")
    return function, [part for part in path.split(".") if part]


def follow(value: Any, path: Sequence[str]) -> Any:
    """The value at `path` (object keys, list indices) inside `value`, or MISSING."""
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def resolver(calls: Sequence[dict[str, Any]], before: int | None = None) -> Resolve:
    """Resolve references against the latest successful call of their function among `calls[:before]`
    (every call by default)."""
    def resolve(ref: str) -> Any:
        function, path = split_ref(ref)
        key = function_key(function)
        made = [call for call in calls[:before] if function_key(call["functionName"]) == key and not call.get("error")]
        return follow(made[-1].get("result"), path) if made else MISSING
    return resolve


def options(value: Any, resolve: Resolve) -> list[Any] | None:
    """The values an actual value may agree with instead of a `$ref` (its target; none when it points
    at nothing) or a `$oneOf` (its options); None for any other value."""
    if _is(value, "$ref"):
        target = resolve(value["$ref"])
        return [] if target is MISSING else [target]
    if _is(value, "$oneOf"):
        return list(value["$oneOf"])
    return None


def text_match(value: Any) -> tuple[str, Any, float] | None:
    """(mode, value, threshold) of a `$match`; None for any other value."""
    if not _is(value, "$match"):
        return None
    return value["$match"], value.get("value"), float(value.get("threshold", DEFAULT_THRESHOLD))


def concrete(value: Any, resolve: Resolve) -> Any:
    """An expected value as a perfect agent would send it: a `$ref` resolved (its own text when it
    points at nothing), the first `$oneOf` option, a `$match`'s value."""
    if _is(value, "$ref"):
        target = resolve(value["$ref"])
        return f"<{value['$ref']}>" if target is MISSING else target
    if _is(value, "$oneOf"):
        return concrete(value["$oneOf"][0], resolve) if value["$oneOf"] else None
    if _is(value, "$match"):
        return concrete(value.get("value"), resolve)
    if isinstance(value, dict):
        return {key: concrete(item, resolve) for key, item in value.items()}
    if isinstance(value, list):
        return [concrete(item, resolve) for item in value]
    return value
