"""Values for a function's arguments from their JSON schemas, where the data gives none: what `lobeval draft`
and the attack cases both make up."""
from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from jsonschema import Draft202012Validator

from lobeval.workspace.security import number

FIRST_DATE = date(2030, 1, 14)
"""A date's value when none is seen: the date made up is a week after it."""


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def is_date(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is not None


def made_up(schema: dict[str, Any], seen: list[Any], name: str = "") -> list[Any]:
    """Values made to fit the schema of an argument (`name`), beside the values `seen` (a column's, or a record's
    current one): every enum value, both booleans, a date a week past the latest seen (for a date: its format,
    a value seen or its name says so), a number past the largest seen (below the maximum); those the schema
    accepts."""
    found: list[Any] = list(schema.get("enum") or [])
    kind = schema.get("type")
    if kind == "boolean":
        found += [True, False]
    dates = sorted(v for v in seen if is_date(v))
    if schema.get("format") == "date" or dates or "date" in name:
        latest = date.fromisoformat(dates[-1]) if dates else FIRST_DATE
        found.append((latest + timedelta(days=7)).isoformat())
    if kind in ("integer", "number"):
        numbers = [v if isinstance(v, int | float) else number(v) for v in seen if number(v) is not None]
        value = max(numbers, default=schema.get("minimum", 0)) + 1
        value = int(value) if kind == "integer" else value
        found.append(value if schema.get("maximum") is None or value <= schema["maximum"] else schema["maximum"] - 1)
    check = validator(schema)
    return [v for v in found if check.is_valid(v)]
