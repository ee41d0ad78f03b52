"""The records one stage hands the next (SPEC §4), and the JSONL files that hold them."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from lobeval.errors import RecordError

SCHEMA_VERSION = 1
"""The version of every record and file a stage writes; readers accept it and files without one."""

TerminationReason = Literal["user_finished", "judged_complete", "max_turns", "target_error", "target_unavailable",
                            "llm_error", "budget_spent", "imported"]
"""Why a conversation ended: a closed set. `imported` marks a transcript recorded elsewhere."""
NORMAL_ENDINGS: tuple[str, ...] = ("user_finished", "judged_complete", "imported")
MACHINERY_ERRORS: tuple[str, ...] = ("llm_error", "target_unavailable", "budget_spent")
"""Failures of the machinery (lobeval's models, the target's own infrastructure, the budget): never scores."""


class Case(BaseModel):
    """One test case of `dataset.jsonl`: a filled scenario template."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    case_id: str
    scenario_name: str
    user_instructions: str
    task_completion: str = ""
    persona: str = ""
    user_style: Literal["conversational", "terse", "one_fact", "all_in_one"] = "conversational"
    """How the scripted user talks: conversational, terse, one_fact or all_in_one."""
    user_mistakes: dict[str, Any] = {}
    """Argument values the user gives wrongly first, then corrects when the bot objects."""
    business_data: dict[str, dict[str, Any]] = {}
    """The sampled record of each entity the template names, by entity name."""
    expected_function_calls: list[dict[str, Any]] = []
    expected_outputs: list[str] = []
    allowed_function_calls: list[str] = []
    forbidden_function_calls: list[str] = []
    ordered: StrictBool = False
    seed: int | None = None


class FunctionCall(BaseModel):
    """One function call the bot made; `error` set means attempted but not done."""

    model_config = ConfigDict(extra="allow")

    functionName: str
    arguments: dict[str, Any] = {}
    result: Any = None
    error: str | None = None
    turn: int | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _json_arguments(cls, value: Any) -> Any:
        """Logs often keep the arguments as the JSON string the model wrote."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("a string that is not JSON") from None
        return {} if value is None else value


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | None = ""
    function_calls: list[FunctionCall] | None = None


class Conversation(BaseModel):
    """One line of `conversations.jsonl`; imported logs need only case_id, messages, function_calls."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    case_id: str
    trial: int = Field(0, ge=0)
    messages: list[Message]
    function_calls: list[FunctionCall]


def _validated(model: type[BaseModel], record: dict[str, Any], path: Path, where: str) -> BaseModel:
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise RecordError(path, where, field, error["msg"]) from None


def read_conversations(paths: str | Path | list[str | Path]) -> list[tuple[Path, int, dict[str, Any]]]:
    """(file, line, record) of every conversation in one or more files; a (case, trial) pair twice is an error."""
    paths = [paths] if isinstance(paths, str | Path) else paths
    seen: dict[tuple[str, int], str] = {}
    found = []
    for path in map(Path, paths):
        for number, record in iter_jsonl(path):
            where = f"line {number}" + (f" (case {record['case_id']})" if isinstance(record.get("case_id"), str) else "")
            conversation = _validated(Conversation, record, path, where).model_dump(exclude_unset=False)
            key = (conversation["case_id"], conversation["trial"])
            if key in seen:
                raise RecordError(path, where, "trial", f"case {key[0]!r} trial {key[1]} is already in {seen[key]}")
            seen[key] = f"{path} line {number}"
            found.append((path, number, {**record, **conversation}))
    return found


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


def write_json(path: str | Path, value: Any) -> Path:
    """Write a JSON document whole or not at all (temporary file in the same folder, renamed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                         prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            json.dump(value, handle, ensure_ascii=False, indent=1, default=str, allow_nan=False)
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
        case = _validated(Case, record, Path(path), f"line {number}")
        if case.case_id in seen:
            raise RecordError(path, f"line {number}", "case_id", f"duplicate case_id {case.case_id!r}")
        seen.add(case.case_id)
        cases.append(case)
    return cases


LABEL_KINDS = ("allowed_extra_call", "allowed_extra_argument")


def label_problem(label: dict[str, Any]) -> tuple[str, str] | None:
    """(field, problem) of the first thing wrong with an analyst's label, or None. A wrong label would
    silently change scores, so every label is checked, on reading and before it is written."""
    if label.get("kind") not in LABEL_KINDS:
        return "kind", f"must be one of {', '.join(LABEL_KINDS)}, got {label.get('kind')!r}"
    if not isinstance(label.get("functionName"), str) or not label["functionName"]:
        return "functionName", "is required (a function name)"
    argument = label.get("argument")
    if label["kind"] == "allowed_extra_argument" and (not isinstance(argument, str) or not argument):
        return "argument", "is required for an allowed_extra_argument label"
    if label["kind"] == "allowed_extra_call" and argument is not None:
        return "argument", "is only for allowed_extra_argument labels"
    if label.get("scenario_name") is not None and not isinstance(label["scenario_name"], str):
        return "scenario_name", "must be a scenario name, or absent for the whole suite"
    return None


def read_labels(path: str | Path) -> list[dict[str, Any]]:
    """The analysts' labels (one JSON object a line), each checked with `label_problem`."""
    labels = []
    for number, label in iter_jsonl(path):
        problem = label_problem(label)
        if problem is not None:
            raise RecordError(path, f"line {number}", *problem)
        labels.append(label)
    return labels


# --- evaluation results ----------------------------------------------------------------------

METRICS = ("Reliability", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args", "Success")


class ResultRow(BaseModel):
    """One conversation's row of `evaluation_results.json`: its metrics and the evidence behind them."""

    model_config = ConfigDict(extra="allow")

    case_id: str
    trial: int = Field(ge=0)
    scenario_name: str | None = None
    status: Literal["scored", "error"]
    """"error": the machinery failed (lobeval's models, the target's infrastructure, the budget); not scored."""
    termination: TerminationReason | None = None
    turns: int | None = None
    error: str | None = None
    duration_s: float | None = None
    usage: dict[str, dict[str, Any]] = {}
    cost_usd: float | None = None
    Reliability: float | None = None
    Recall_fn: float | None = None
    Precision_fn: float | None = None
    Recall_args: float | None = None
    Precision_args: float | None = None
    Success: int | None = None
    checks: dict[str, bool] = {}
    """Each condition of Success, by name."""
    pairs: list[dict[str, Any]] = []
    unpaired_expected: list[dict[str, Any]] = []
    unpaired_actual: list[dict[str, Any]] = []
    wrong_arguments: list[dict[str, Any]] = []
    missing_arguments: list[dict[str, Any]] = []
    extra_arguments: list[dict[str, Any]] = []
    missing_outputs: list[Any] = []
    forbidden_calls: list[dict[str, Any]] = []
    claims: dict[str, list[dict[str, Any]]] | None = None
    state: dict[str, Any] | None = None
    """The end-state check: differences from the state the expected calls leave, or why it failed."""
    judges: dict[str, Any] = {}


class Counts(BaseModel):
    model_config = ConfigDict(extra="allow")

    conversations: int = Field(ge=0)
    scored: int = Field(0, ge=0)
    errors: int = Field(ge=0)
    """Machinery errors: left out of every mean."""
    target_errors: int = Field(0, ge=0)
    trials: int = Field(0, ge=0)


class RunResults(BaseModel):
    """`evaluation_results.json`: azure-ai-evaluation's result shape (metrics, rows, studio_url) and the
    run-level analysis (intervals, pass^k, per scenario, counts, errors, judges, claims, usage, config)."""

    model_config = ConfigDict(extra="allow")

    rows: list[ResultRow]
    schema_version: int = SCHEMA_VERSION
    metrics: dict[str, float | None]
    intervals: dict[str, list[float] | None] = {}
    pass_k: dict[str, dict[str, Any]] = {}
    scenarios: list[dict[str, Any]] = []
    counts: Counts
    errors: list[dict[str, Any]] = []
    judges: dict[str, Any] = {}
    claims: dict[str, int] = {}
    usage: dict[str, dict[str, Any]] = {}
    config: dict[str, Any] = {}
    studio_url: str | None = None


def read_json(path: str | Path) -> Any:
    """A whole JSON file; RecordError when it is missing or not JSON."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(path, "file", None, "not found") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise RecordError(path, "file", None, f"cannot be read as UTF-8 text ({type(exc).__name__})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(path, "file", None, f"invalid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise RecordError(path, "file", None, "nested too deeply") from None


def read_results(path: str | Path) -> dict[str, Any]:
    """`evaluation_results.json`, validated; every problem is a RecordError naming the file, row and field."""
    path = Path(path)
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise RecordError(path, "file", None, "must be a JSON object")
    try:
        RunResults.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = [str(part) for part in error["loc"]]
        where = f"row {location[1]}" if location[:1] == ["rows"] and len(location) > 1 else "file"
        field = ".".join(location[2:] if where != "file" else location)
        problem = "is required" if error["type"] == "missing" else error["msg"]
        raise RecordError(path, where, field, problem) from None
    return raw


def state_changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a conversation changed in a state of tables `{table: {id: record}}`: per table, each record
    added or changed (whole) or removed (None); a value that is not a table, whole when it changed.
    Conversations keep this rather than the whole end state, which may be the bot's whole database."""
    if before is None or after is None:
        return None
    changes: dict[str, Any] = {}
    for table in sorted(before.keys() | after.keys()):
        old, new = before.get(table), after.get(table)
        if isinstance(old, dict) and isinstance(new, dict):
            changed = {key: new.get(key) for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)}
            if changed:
                changes[table] = changed
        elif old != new:
            changes[table] = new
    return changes


def with_changes(state: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The state after `changes` (from state_changes) are applied to it."""
    result = dict(state)
    for table, changed in changes.items():
        old = state.get(table)
        if isinstance(old, dict) and isinstance(changed, dict):
            result[table] = {key: record for key, record in {**old, **changed}.items() if record is not None}
        else:
            result[table] = changed
    return result
