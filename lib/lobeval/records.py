"""The records one stage hands the next (SPEC §4), and the JSONL files that hold them."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from lobeval.errors import RecordError


class Case(BaseModel):
    """One test case of `dataset.jsonl`: a filled scenario template."""

    model_config = ConfigDict(extra="allow")

    case_id: str
    scenario_name: str
    user_instructions: str
    task_completion: str = ""
    persona: str = ""
    user_style: str = "conversational"
    """How the scripted user talks: conversational, terse, one_fact or all_in_one."""
    user_mistakes: dict[str, Any] = {}
    """Argument values the user gives wrongly first, then corrects when the bot objects."""
    business_data: dict[str, dict[str, Any]] = {}
    """The sampled record of each entity the template names, by entity name."""
    expected_function_calls: list[dict[str, Any]] = []
    expected_outputs: list[str] = []
    allowed_function_calls: list[str] = []
    forbidden_function_calls: list[str] = []
    ordered: bool = False
    seed: int | None = None


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write all records or nothing: a temporary file in the same folder, renamed at the end."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                         prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            for record in records:
                handle.write(dumps(record) + "\n")
        os.replace(handle.name, path)
    except BaseException:
        os.unlink(handle.name)
        raise
    return path


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is an error."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(path, "file", None, "not found") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(path, f"line {number}", None, f"invalid JSON: {exc.msg}") from None
            if not isinstance(record, dict):
                raise RecordError(path, f"line {number}", None, "must be a JSON object")
            yield number, record


def read_cases(path: str | Path) -> list[Case]:
    cases, seen = [], set()
    for number, record in iter_jsonl(path):
        try:
            case = Case.model_validate(record)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])
            raise RecordError(path, f"line {number}", field, error["msg"]) from None
        if case.case_id in seen:
            raise RecordError(path, f"line {number}", "case_id", f"duplicate case_id {case.case_id!r}")
        seen.add(case.case_id)
        cases.append(case)
    return cases
