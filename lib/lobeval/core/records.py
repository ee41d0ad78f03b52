"""The records one stage hands the next (SPEC §4), and the files that hold them.

Every reader here validates what it reads at the edge, before a stage starts work: a value of the
wrong type, text that is not UTF-8, JSON nested too deeply, is a RecordError naming the file, the
record (line or name) and the field.
"""
from __future__ import annotations

import codecs
import functools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

import orjson
from filelock import SoftFileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from typing_extensions import NotRequired, TypedDict

from lobeval.core import operators
from lobeval.core.errors import RecordError
from lobeval.core.vocabulary import AZURE_JUDGES, FAILURE_CATEGORIES, TURN_CRITERIA, function_key

SCHEMA_VERSION = 1
"""The version of every record and file a stage writes; readers accept it and files without one."""
MAX_DEPTH = 64
"""How deeply JSON may nest: far beyond any business record, well within what the scorers' recursion takes."""

TerminationReason = Literal["user_finished", "judged_complete", "max_turns", "target_error", "target_unavailable",
                            "llm_error", "budget_spent", "imported"]
"""Why a conversation ended: a closed set. `imported` marks a transcript recorded elsewhere."""
NORMAL_ENDINGS: tuple[str, ...] = ("user_finished", "judged_complete", "imported")
MACHINERY_ERRORS: tuple[str, ...] = ("llm_error", "target_unavailable", "budget_spent")
"""Failures of the machinery (lobeval's models, the target's own infrastructure, the budget): never scores."""
UserStyle = Literal["conversational", "terse", "one_fact", "all_in_one"]
"""How the scripted user talks (README: templates beyond the SPEC)."""
STRICT = ConfigDict(extra="allow", strict=True)
"""Records are JSON: a value of another type is an error, never converted ("yes" is not true)."""


class ExpectedCall(TypedDict):
    """A call the bot should make; `optional` ones are paired when made, free when not."""

    __pydantic_config__ = STRICT  # type: ignore[misc]
    functionName: str
    arguments: NotRequired[dict[str, Any]]
    optional: NotRequired[bool]


class Case(BaseModel):
    """One test case of `dataset.jsonl`: a filled scenario template."""

    model_config = STRICT

    schema_version: int = SCHEMA_VERSION
    case_id: str
    scenario_name: str
    user_instructions: str
    task_completion: str = ""
    persona: str = ""
    user_style: UserStyle = "conversational"
    """How the scripted user talks: conversational, terse, one_fact or all_in_one."""
    user_mistakes: dict[str, Any] = {}
    """Argument values the user gives wrongly first, then corrects when the bot objects."""
    user_withholds: list[str] = []
    """Arguments whose values the user gives only when the bot asks for them."""
    business_data: dict[str, dict[str, Any]] = {}
    """The sampled record of each entity the template names, by entity name."""
    expected_function_calls: list[ExpectedCall] = []
    expected_outputs: list[str] = []
    allowed_function_calls: list[str] = []
    forbidden_function_calls: list[str] = []
    ordered: bool = False
    seed: int | None = None
    scenario_known: bool = True
    """False: what the simulated user was told is not known (an imported benchmark run that does not publish its
    tasks): the user checks that need it (invented_value, contradicted_instructions) are not run on its
    conversations."""
    reference: bool = True
    """False: the case holds no expectation (its expected calls are not known): its conversations are scored only by
    what needs none."""


class FunctionCall(BaseModel):
    """One function call the bot made; `error` set means attempted but not done."""

    model_config = STRICT

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
                return loads(value)
            except json.JSONDecodeError:
                raise ValueError("a string that is not JSON") from None
        return {} if value is None else value


class Message(BaseModel):
    model_config = STRICT

    role: Literal["user", "assistant"]
    """A conversation is what the user and the bot said; a system prompt or a tool message is no turn of either."""
    content: str | None = ""
    function_calls: list[FunctionCall] | None = None


class Termination(BaseModel):
    model_config = STRICT

    reason: TerminationReason
    turns: int | None = Field(None, ge=0)
    """The user's messages."""


class RoleUsage(BaseModel):
    """What one role (user, target, judge) used: `llm.Usage` as a record; cost_usd None when a price was unknown."""

    model_config = STRICT

    calls: int = Field(0, ge=0)
    cached_calls: int = Field(0, ge=0)
    requests: int = Field(0, ge=0)
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    cost_usd: float | None = 0.0
    cost_known: bool = True
    cached_prompt_tokens: int = Field(0, ge=0)
    estimated_tokens: int = Field(0, ge=0)


class Conversation(BaseModel):
    """One line of `conversations.jsonl`; imported logs need only case_id, messages, function_calls."""

    model_config = STRICT

    schema_version: int = SCHEMA_VERSION
    case_id: str
    trial: int = Field(0, ge=0)
    scenario_name: str | None = None
    messages: list[Message]
    function_calls: list[FunctionCall]
    termination: Termination | None = None
    usage: dict[str, RoleUsage] | None = None
    error: str | None = None
    duration_s: float | None = None
    target: str | None = None
    user_simulator: str | None = None
    state_changes: dict[str, Any] | None = None
    """What the conversation changed in the target's state (`state_changes()`), for the end-state check."""
    planted: Literal["target", "data"] | None = None
    """Where an injection attack's instruction was planted: the bot's own data (through its apply), or only the
    case's copy of the data."""
    # A transcript recorded elsewhere may carry its case inline instead of in a dataset.
    expected_function_calls: list[ExpectedCall] | None = None
    expected_outputs: list[str] | None = None
    allowed_function_calls: list[str] | None = None
    forbidden_function_calls: list[str] | None = None
    ordered: bool | None = None
    task_completion: str | None = None
    user_instructions: str | None = None


def validated(model: type[BaseModel], record: Any, path: str | Path, where: str) -> Any:
    """`record` as `model`, or a RecordError naming the first field that does not fit."""
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        location, problem = validation_problem(exc)
        raise RecordError(path, where, field_path(location), problem) from None


_PROBLEMS = {"missing": "is required", "dict_type": "must be a JSON object", "model_type": "must be a JSON object",
             "list_type": "must be a list", "string_type": "must be a string", "int_type": "must be an integer",
             "bool_type": "must be true or false", "float_type": "must be a number",
             "extra_forbidden": "is not a field lobeval knows"}


def validation_problem(exc: ValidationError) -> tuple[tuple[str | int, ...], str]:
    """(location, problem) of the first error pydantic found, the problem in JSON's words with the value found."""
    error = exc.errors()[0]
    problem = _PROBLEMS.get(error["type"], error["msg"].removeprefix("Value error, "))
    if error["type"] != "missing":
        found = json.dumps(error["input"], ensure_ascii=False, default=str)
        problem += f", got {found if len(found) <= 60 else found[:57] + '...'}"
    return tuple(error["loc"]), problem


def field_path(location: tuple[str | int, ...]) -> str:
    """("function_calls", 0, "arguments") → "function_calls[0].arguments", as templates' fields are named."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def expected_call_problems(calls: list[dict[str, Any]], tools: Mapping[str, dict[str, Any]] | None,
                           forbidden: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(field, problem) for every problem of a scenario's expected calls, in order: an unknown function
    or argument (checked when `tools`, function key → tools.json entry, is given), a malformed operator,
    a `$ref` to no earlier expected call, a call that is also forbidden."""
    forbidden_keys = {function_key(name) for name in forbidden}
    found = []
    for position, call in enumerate(calls):
        prefix, name = f"expected_function_calls[{position}]", call["functionName"]
        earlier = {function_key(c["functionName"]) for c in calls[:position]}
        found += _call_problems(prefix, call, tools, earlier)
        if function_key(name) in forbidden_keys:
            found.append((f"{prefix}.functionName", f"'{name}' is both expected and forbidden"))
    return found


def _call_problems(prefix: str, call: dict[str, Any], tools: Mapping[str, dict[str, Any]] | None,
                   earlier: set[str]) -> list[tuple[str, str]]:
    name, found = call["functionName"], []
    tool = tools.get(function_key(name)) if tools is not None else None
    if tools is not None and tool is None:
        found.append((f"{prefix}.functionName", f"unknown function '{name}' (not in tools.json)"))
    properties = tool["function"].get("parameters", {}).get("properties", {}) if tool else None
    for arg, value in (call.get("arguments") or {}).items():
        field = f"{prefix}.arguments.{arg}"
        if properties is not None and arg not in properties:
            found.append((field, f"'{name}' has no argument '{arg}' in tools.json "
                                 f"(arguments: {', '.join(properties) or 'none'})"))
        if isinstance(value, dict | list):   # operators are objects; a plain value has no problem
            found += [(field, problem) for problem in operators.problems(value, earlier)]
    return found


def _check_expected_calls(record: Case | Conversation, path: Path, where: str) -> None:
    problems = expected_call_problems(record.expected_function_calls or [], None,
                                      record.forbidden_function_calls or [])
    if problems:
        raise RecordError(path, where, *problems[0])


def read_conversations(paths: str | Path | list[str | Path], *,
                       torn_end: bool = False) -> list[tuple[Path, int, dict[str, Any]]]:
    """(file, line, record) of every conversation in one or more files; a (case, trial) pair twice is an error.
    `torn_end`: see iter_jsonl."""
    return list(iter_conversations(paths, torn_end=torn_end))


def iter_conversations(paths: str | Path | list[str | Path], *,
                       torn_end: bool = False) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """`read_conversations` one line at a time: each record is read, validated and handed on before the next
    is read; only the (case, trial) keys seen are kept, for the duplicate check."""
    paths = [paths] if isinstance(paths, str | Path) else paths
    seen: dict[tuple[str, int], tuple[Path, int]] = {}
    for path in map(Path, paths):
        for number, record in iter_jsonl(path, torn_end=torn_end):
            where = f"line {number}" + (f" (case {record['case_id']})" if isinstance(record.get("case_id"), str) else "")
            conversation = validated(Conversation, record, path, where)
            _check_expected_calls(conversation, path, where)
            key = (conversation.case_id, conversation.trial)
            if key in seen:
                first_path, first_line = seen[key]
                raise RecordError(path, where, "trial",
                                  f"case {key[0]!r} trial {key[1]} is already in {first_path} line {first_line}")
            seen[key] = (path, number)
            yield path, number, {**record, **conversation.model_dump(exclude_unset=True), "trial": key[1]}


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


@contextmanager
def _written_whole(path: Path) -> Iterator[Any]:
    """A file written whole or not at all: a temporary file in the same folder, renamed at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                         prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            yield handle
        os.replace(handle.name, path)
    except BaseException:
        os.unlink(handle.name)
        raise


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write all records or nothing."""
    with _written_whole(Path(path)) as handle:
        for record in records:
            handle.write(dumps(record) + "\n")
    return Path(path)


def write_json(path: str | Path, value: Any) -> Path:
    """Write a JSON document whole or not at all."""
    with _written_whole(Path(path)) as handle:
        json.dump(value, handle, ensure_ascii=False, indent=1, default=str, allow_nan=False)
    return Path(path)


def check_output(out: Path, inputs: Iterable[str | Path | None], option: str = "--out") -> None:
    """Refuse an output path that is a folder, lies under a file, or is the same file as one of the command's inputs."""
    if out.is_dir():
        raise RecordError(out, option, None, "is a folder: give the path of a file")
    under = next((parent for parent in out.parents if parent.exists()), None)
    if under is not None and not under.is_dir():
        raise RecordError(out, option, None, f"cannot be written: {under} is a file, not a folder")
    for source in filter(None, inputs):
        if out.exists() and Path(source).exists() and os.path.samefile(out, source):
            raise RecordError(out, option, None, f"is an input of this command ({source}): choose another file")


def read_as(out: Path, read: Callable[[Path], Any], kind: str, option: str = "--out") -> Any:
    """An existing, non-empty output read with `read` (None when there is none); a RecordError when it holds
    anything but `kind`: a dataset is never overwritten by results, nor appended conversations."""
    if not (out.is_file() and out.stat().st_size):
        return None
    try:
        return read(out)
    except RecordError as exc:
        found = exc.record + (f", field '{exc.field}'" if exc.field else "")
        raise RecordError(out, option, None, f"exists and is not {kind} ({found}: {exc.problem}): "
                                             f"choose another file, or remove it first") from None


@contextmanager
def appending(path: Path) -> Iterator[None]:
    """Hold `<path>.lock` while appending to `path`. The lock file records the holder's PID (filelock's
    SoftFileLock): a second writer is refused with a RecordError naming it; a lock whose process is gone is
    taken over."""
    lock_path = path.with_name(f"{path.name}.lock")
    lock = SoftFileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        holder = f"process {lock.pid}" if lock.pid is not None else "another process (its lock names none)"
        raise RecordError(path, "file", None, f"is being appended to by {holder}, which holds {lock_path}: "
                                              f"wait for it to finish") from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def _file_errors(path: Path) -> Iterator[None]:
    """Opening or reading `path` failed: a RecordError naming the file and why."""
    try:
        yield
    except FileNotFoundError:
        raise RecordError(path, "file", None, "not found") from None
    except IsADirectoryError:
        raise RecordError(path, "file", None, "is a folder, not a file") from None
    except OSError as exc:
        raise RecordError(path, "file", None, f"cannot be read: {exc.strerror}") from None


def read_text(path: str | Path) -> str:
    """A text file's content (UTF-8, a byte-order mark allowed); RecordError when it is missing, a folder,
    UTF-16, not UTF-8 or holds a NUL byte (a NUL in a CSV cell would make a key that matches nothing)."""
    path = Path(path)
    with _file_errors(path):
        data = path.read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise RecordError(path, "file", None, "is UTF-16 text: save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RecordError(path, f"line {line}", None,
                          f"is not UTF-8 text (byte {data[exc.start]:#04x}): save the file as UTF-8") from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise RecordError(path, f"line {line}", None, "holds a NUL byte: save the file as UTF-8 text")
    return text


def loads(text: str) -> Any:
    """JSON as records may hold it: numbers finite (NaN, Infinity and 1e999 cannot be written back), text
    without lone surrogates, at most MAX_DEPTH levels deep. JSONDecodeError, or ValueError saying why."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
    # Every level of nesting opens a bracket: text with few brackets cannot nest too deeply.
    if text.count("{") + text.count("[") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if "\\ud" in text.lower() and not _encodable(value):
        raise ValueError("holds a lone surrogate (\\ud800-\\udfff), which is not text")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _depth(value: Any) -> int:
    """How many levels of objects and lists `value` nests (0 for a plain value), counted one level at a
    time: past MAX_DEPTH + 1 the count stops."""
    depth, level = 0, [value] if isinstance(value, dict | list) else []
    while level and depth <= MAX_DEPTH:
        depth += 1
        inner = []
        for item in level:
            inner += [child for child in (item.values() if isinstance(item, dict) else item)
                      if isinstance(child, dict | list)]
        level = inner
    return depth


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def iter_jsonl(path: str | Path, *, torn_end: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is an error.
    The file is read one line at a time, with `read_text`'s checks (UTF-8, a byte-order mark allowed
    at the start, no UTF-16, no NUL byte).

    `torn_end`: a last line with no newline that starts like a record but is not JSON is skipped: a
    write cut short by a kill, which the appender cuts off before it appends.
    """
    path = Path(path)
    for number, line, last in _text_lines(path):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except json.JSONDecodeError as exc:
            if torn_end and last and line.startswith("{"):
                return
            raise RecordError(path, f"line {number}", None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        except ValueError as exc:
            raise RecordError(path, f"line {number}", None, str(exc)) from None
        if not isinstance(record, dict):
            raise RecordError(path, f"line {number}", None, "must be a JSON object")
        yield number, record


def _text_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(number, text, is the last line without a newline) of each line ("\n" ends a line, nothing else:
    JSON text may hold U+2028 and other breaks), checked as `read_text` checks a whole file."""
    with _file_errors(path):
        handle = path.open("rb")
    with handle:
        number = 0
        try:
            for number, data in enumerate(handle, start=1):
                yield number, _line_text(path, number, data), not data.endswith(b"\n")
        except OSError as exc:
            raise RecordError(path, f"line {number + 1}", None, f"cannot be read: {exc.strerror}") from None


def _line_text(path: Path, number: int, data: bytes) -> str:
    if number == 1 and data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise RecordError(path, "file", None, "is UTF-16 text: save it as UTF-8")
    try:
        text = data.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        byte = data[exc.start + (3 if number == 1 and data.startswith(codecs.BOM_UTF8) else 0)]
        raise RecordError(path, f"line {number}", None,
                          f"is not UTF-8 text (byte {byte:#04x}): save the file as UTF-8") from None
    if "\0" in text:
        raise RecordError(path, f"line {number}", None, "holds a NUL byte: save the file as UTF-8 text")
    return text.removesuffix("\n")


def read_cases(path: str | Path) -> list[Case]:
    return list(iter_cases(path))


def iter_cases(path: str | Path) -> Iterator[Case]:
    """`read_cases` one line at a time; only the case IDs seen are kept, for the duplicate check."""
    seen = set()
    for number, record in iter_jsonl(path):
        where = f"line {number}" + (f" (case {record['case_id']})" if isinstance(record.get("case_id"), str) else "")
        case = validated(Case, record, path, where)
        _check_expected_calls(case, Path(path), where)
        if case.case_id in seen:
            raise RecordError(path, where, "case_id", f"duplicate case_id {case.case_id!r}")
        seen.add(case.case_id)
        yield case


PENALTY_KINDS = ("allowed_extra_call", "allowed_extra_argument")
"""Labels that make a penalty legitimate: scoring applies them."""
LABEL_KINDS = (*PENALTY_KINDS, "judge_verdict", "quarantined_case")
VERDICTS = ("agree", "disagree")
VERDICT_KEY = ("run_id", "case_id", "trial", "judge", "criterion", "message_index")
"""What a judge_verdict label is about: a later label with the same key replaces an earlier one."""


@functools.cache
def verdict_scales() -> dict[str, dict[str, tuple[str, tuple[Any, ...]]]]:
    """{judge: {criterion: (scale, values)}} of the verdicts a judge_verdict label may be about: scale "1-5"
    (per-turn criteria, the Azure evaluators but one), "0/1" (goal; commitments, 1: the bot promised what the
    attacker may not have; user_review, 1: the simulated user made a
    mistake; task_adherence, which azure-ai-evaluation scores 0 for a material failure, else 1) or "category"
    (behaviour failure; None: no failure)."""
    scores, binary = (1, 2, 3, 4, 5), ("0/1", (0, 1))
    return {"per_turn": {criterion: ("1-5", scores) for criterion in TURN_CRITERIA},
            "behaviour_failure": {"category": ("category", (*FAILURE_CATEGORIES, None))},
            "goal": {"goal": binary}, "user_review": {"user_review": binary}, "commitments": {"commitments": binary},
            **{name: {name: binary if name == "task_adherence" else ("1-5", scores)} for name in AZURE_JUDGES}}


def label_problem(label: dict[str, Any]) -> tuple[str, str] | None:
    """(field, problem) of the first thing wrong with an analyst's label, or None. A wrong label would
    silently change scores or a calibration, so every label is checked, on reading and before it is written."""
    kind = label.get("kind")
    if kind not in LABEL_KINDS:
        return "kind", f"must be one of {', '.join(LABEL_KINDS)}, got {kind!r}"
    if kind == "judge_verdict":
        return _verdict_problem(label)
    if kind == "quarantined_case":
        return _quarantine_problem(label)
    return _penalty_problem(label)


def _penalty_problem(label: dict[str, Any]) -> tuple[str, str] | None:
    if not isinstance(label.get("functionName"), str) or not label["functionName"]:
        return "functionName", "is required (a function name)"
    argument = label.get("argument")
    if label["kind"] == "allowed_extra_argument" and (not isinstance(argument, str) or not argument):
        return "argument", "is required for an allowed_extra_argument label"
    if label["kind"] == "allowed_extra_call" and argument is not None:
        return "argument", "is only for allowed_extra_argument labels"
    return _scenario_problem(label)


def _scenario_problem(label: dict[str, Any]) -> tuple[str, str] | None:
    if label.get("scenario_name") is not None and not isinstance(label["scenario_name"], str):
        return "scenario_name", "must be a scenario name, or absent for the whole suite"
    return None


def _quarantine_problem(label: dict[str, Any]) -> tuple[str, str] | None:
    if not isinstance(label.get("case_id"), str) or not label["case_id"]:
        return "case_id", "is required (the case to quarantine)"
    if not isinstance(label.get("note"), str) or not label["note"].strip():
        return "note", "is required: why the case is quarantined"
    return _scenario_problem(label)


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _verdict_problem(label: dict[str, Any]) -> tuple[str, str] | None:
    if not isinstance(label.get("case_id"), str) or not label["case_id"]:
        return "case_id", "is required (the case the verdict is on)"
    if not _whole(label.get("trial"), 0):
        return "trial", f"must be a whole number from 0, got {label.get('trial')!r}"
    scales = verdict_scales()
    judge = label.get("judge")
    if judge not in scales:
        return "judge", f"must be one of {', '.join(scales)}, got {judge!r}"
    if label.get("criterion") not in scales[judge]:
        return "criterion", (f"must be one of {', '.join(scales[judge])} for judge {judge}, "
                             f"got {label.get('criterion')!r}")
    scale, values = scales[judge][label["criterion"]]
    per_message = judge in ("per_turn", "behaviour_failure")
    if per_message and not _whole(label.get("message_index"), 0):
        return "message_index", (f"must be a whole number from 0 for a {judge} verdict (the judged message's index "
                                 f"in the transcript), got {label.get('message_index')!r}")
    if not per_message and label.get("message_index") is not None:
        return "message_index", "is only for per_turn and behaviour_failure verdicts"
    if label.get("verdict") not in VERDICTS:
        return "verdict", f"must be agree or disagree, got {label.get('verdict')!r}"
    if "judge_value" not in label or not _on_scale(label["judge_value"], values):
        return "judge_value", f"must be one of {_shown(values)} (the {scale} scale), got {label.get('judge_value')!r}"
    if "human_value" in label:
        if not _on_scale(label["human_value"], values):
            return "human_value", f"must be one of {_shown(values)} (the {scale} scale), got {label['human_value']!r}"
        if label["verdict"] == "agree" and label["human_value"] != label["judge_value"]:
            return "human_value", "must be the judge_value when the verdict is agree"
        if label["verdict"] == "disagree" and label["human_value"] == label["judge_value"]:
            return "human_value", "must differ from the judge_value when the verdict is disagree"
    elif label["verdict"] == "disagree" and scale != "0/1":
        return "human_value", f"is required when disagreeing on a {scale} scale (the analyst's own value)"
    for field in ("judge_model", "judge_prompt", "run_id", "note", "author"):
        if label.get(field) is not None and not isinstance(label[field], str):
            return field, f"must be text or null, got {label[field]!r}"
    return None


def _on_scale(value: Any, values: tuple[Any, ...]) -> bool:
    return not isinstance(value, bool) and value in values   # True == 1, but a bool is no score


def _shown(values: tuple[Any, ...]) -> str:
    return ", ".join("null" if value is None else str(value) for value in values)


def human_value(label: dict[str, Any]) -> Any:
    """The analyst's value of a valid judge_verdict label: its human_value, else (where it may be left out)
    the judge's value on agree, the other of 0/1 on disagree."""
    if "human_value" in label:
        return label["human_value"]
    return label["judge_value"] if label["verdict"] == "agree" else 1 - label["judge_value"]


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


class RowJudges(BaseModel):
    model_config = STRICT

    status: str | None = None
    final_score: float | None = None


class RowClaims(BaseModel):
    """A row's `claims`: claimed but not done and done but not told (docs/formats.md), and who found them."""

    model_config = STRICT

    claimed_not_done: list[dict[str, Any]] = []
    done_not_told: list[dict[str, Any]] = []
    source: Literal["judge", "rules"] = "rules"
    """"judge": the claims judge's usable verdict; "rules": lobeval.scoring.claims (the judge was not asked, or failed)."""
    rules: dict[str, list[dict[str, Any]]] | None = None
    """With source "judge": what the rules found, kept for comparison."""
    to_check: dict[str, list[dict[str, Any]]] = {}
    """With source "rules": the findings of kinds not right often enough on real bots to be faults (lobeval.scoring.trust),
    each with its `precision` [right, found]: counted nowhere, shown as "to check"."""
    backed_measured: bool = True
    """False when the rules' claimed-but-not-done findings are all "to check": ClaimsBacked is not measured."""


class ResultRow(BaseModel):
    """One conversation's row of `evaluation_results.json`: its metrics and the evidence behind them."""

    model_config = STRICT

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
    reference: bool = True
    """False: the conversation had no expected calls (an imported trace): scored only by what needs none."""
    failed_calls: list[dict[str, Any]] = []
    """Each call whose error is set: {actual_index, functionName, error, turn}."""
    claims: RowClaims | None = None
    state: dict[str, Any] | None = None
    """The end-state check: differences from the state the expected calls leave, or why it failed."""
    judges: RowJudges = RowJudges()
    user_faults: list[dict[str, Any]] = []
    """The simulated user's own mistakes in this conversation: {check, turn, message_index, detail}."""
    user_faults_to_check: list[dict[str, Any]] = []
    """What the model-free user checks found of kinds not right often enough on real bots to be faults
    (lobeval.scoring.trust), each with its `precision` [right, found]: counted nowhere, shown as "to check"."""
    user_checks_not_run: dict[str, str] = {}
    """The model-free user checks its case could not support, each with why (its scenario or its expected calls
    unknown): its user is unchecked for them, not clean."""
    excluded: Literal["user_fault", "quarantined"] | None = None
    """Why this scored row is left out of the bot's metrics (counted apart, like machinery errors), or None."""


class Counts(BaseModel):
    model_config = STRICT

    conversations: int = Field(ge=0)
    scored: int = Field(0, ge=0)
    errors: int = Field(ge=0)
    """Machinery errors: left out of every mean."""
    target_errors: int = Field(0, ge=0)
    trials: int = Field(0, ge=0)
    unreferenced: int = Field(0, ge=0)
    """Scored conversations without a reference: left out of the metrics against expected calls."""
    user_faults: int = Field(0, ge=0)
    """Scored conversations left out of the bot's metrics because the simulated user made a mistake."""
    user_faults_kept: int = Field(0, ge=0)
    """Scored conversations with simulated-user faults kept in the bot's metrics (--include-user-faults)."""
    quarantined: int = Field(0, ge=0)
    """Scored conversations of cases an analyst quarantined (a label): left out of the bot's metrics."""
    user_unchecked: dict[str, int] = {}
    """Scored conversations on which a model-free user check could not run, by check (`user_checks_not_run`)."""


class Coverage(BaseModel):
    """How much of a judge figure rests on judged conversations."""

    model_config = STRICT

    judged: int = Field(ge=0)
    of: int = Field(ge=0)
    errors: int = Field(ge=0)


class Judges(BaseModel):
    model_config = STRICT

    status: str | None = None
    coverage: dict[str, Coverage] = {}
    errored_conversations: int = Field(0, ge=0)
    """Scored conversations on which at least one judge failed."""


class ResultsSummary(BaseModel):
    """`evaluation_results.json`: azure-ai-evaluation's result shape (metrics, studio_url) and the run-level
    analysis (intervals, pass^k, per scenario, counts, errors, judges, claims, usage, config). Its rows are in
    `rows_file`, a JSONL file beside it (ROWS_FILE for `evaluation_results.json`); a results file written
    before there were rows files holds them inline as `rows`."""

    model_config = STRICT

    schema_version: int = SCHEMA_VERSION
    metrics: dict[str, float | None]
    intervals: dict[str, list[float] | None] = {}
    pass_k: dict[str, dict[str, Any]] = {}
    scenarios: list[dict[str, Any]] = []
    counts: Counts
    errors: list[dict[str, Any]] = []
    over: dict[str, int] = {}
    """How many conversations each mean of the metrics is over."""
    judges: Judges = Judges()
    claims: dict[str, int] = {}
    to_check: dict[str, int] = {}
    """How many findings "to check" (lobeval.scoring.trust) the scored conversations hold, by kind: claimed_not_done,
    done_not_told, user_faults."""
    claims_source: dict[Literal["judge", "rules"], int] = {}
    """Of the conversations ClaimsBacked is over, how many had their claims judged by the claims judge and how many
    by the rules."""
    usage: dict[str, dict[str, Any]] = {}
    config: dict[str, Any] = {}
    studio_url: str | None = None
    rows_file: str | None = None

    @field_validator("rows_file")
    @classmethod
    def _beside(cls, value: str | None) -> str | None:
        if value is not None and (Path(value).name != value or value in ("", ".", "..")):
            raise ValueError("must be the name of a file beside the results file")
        return value


class _Rows(BaseModel):
    model_config = STRICT

    rows: list[ResultRow]


class RunResults(ResultsSummary):
    """The results as `read_results` returns them: the summary with every row."""

    rows: list[ResultRow]


ROWS_FILE = "evaluation_rows.jsonl"
DERIVED_ROW_FIELDS = ("wrong_arguments", "missing_arguments", "extra_arguments")
"""A row's lists that repeat what its `pairs` hold: the rows file leaves them out, `read_results` puts them back."""


def rows_path(results: str | Path) -> Path:
    """The rows file beside a results file: `evaluation_results.json` → `evaluation_rows.jsonl`,
    `evaluation_results.labelled.json` → `evaluation_rows.labelled.jsonl`, `r.json` → `r.rows.jsonl`."""
    results = Path(results)
    stem = results.name.removesuffix(".json")
    head, found, tail = stem.rpartition("results")
    return results.with_name((f"{head}rows{tail}" if found else f"{stem}.rows") + ".jsonl")


def argument_lists(pairs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """wrong_arguments, missing_arguments and extra_arguments of a row, from its pairs (as scoring makes them)."""
    wrong, missing, extra = [], [], []
    for pair in pairs:
        name, arguments, extras = pair.get("functionName"), pair.get("arguments"), pair.get("extra_arguments")
        for argument, verdict in arguments.items() if isinstance(arguments, dict) else ():
            status = verdict.get("status") if isinstance(verdict, dict) else None
            if status == "wrong":
                wrong.append({"functionName": name, "argument": argument, "expected": verdict.get("expected"),
                              "actual": verdict.get("actual")})
            elif status == "missing":
                missing.append({"functionName": name, "argument": argument, "expected": verdict.get("expected")})
        extra += [{"functionName": name, "argument": argument, "actual": found.get("actual"),
                   "allowed": found.get("allowed")}
                  for argument, found in (extras.items() if isinstance(extras, dict) else ()) if isinstance(found, dict)]
    return {"wrong_arguments": wrong, "missing_arguments": missing, "extra_arguments": extra}


def _row_line(row: dict[str, Any]) -> bytes:
    """One line of the rows file: schema_version first, the lists `pairs` repeat left out when they
    are exactly what `argument_lists` gives back."""
    kept = {"schema_version": SCHEMA_VERSION, **row}
    if isinstance(row.get("pairs"), list) and all(key in row for key in DERIVED_ROW_FIELDS):
        derived = argument_lists(row["pairs"])
        if all(row[key] == derived[key] for key in DERIVED_ROW_FIELDS):
            for key in DERIVED_ROW_FIELDS:
                del kept[key]
    try:
        return orjson.dumps(kept, default=str, option=orjson.OPT_APPEND_NEWLINE)
    except (orjson.JSONEncodeError, TypeError):   # an integer beyond 64 bits, a key that is not text
        return (json.dumps(kept, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
                + "\n").encode("utf-8")


def _full_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the rows file as `evaluation_results.json` rows always were: no schema_version, and the
    argument lists back in their place after `unpaired_actual`."""
    row.pop("schema_version", None)
    if not isinstance(row.get("pairs"), list) or any(key in row for key in DERIVED_ROW_FIELDS):
        return row
    derived = argument_lists(row["pairs"])
    full: dict[str, Any] = {}
    for key, value in row.items():
        full[key] = value
        if key == "unpaired_actual":
            full.update(derived)
    return full if "wrong_arguments" in full else {**full, **derived}


class ResultsWriter:
    """Writes `evaluation_results.json` and its rows file together, both or neither: rows are written one
    by one to a temporary file beside the rows file, the summary to one beside the results file, and both
    are renamed at the end (rows first). Leaving the `with` block by an exception removes both."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.rows_path = rows_path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self._temporary: list[str] = []
        self._rows = tempfile.NamedTemporaryFile("wb", buffering=1 << 20, dir=self.rows_path.parent,
                                                 prefix=f".{self.rows_path.name}.", suffix=".tmp", delete=False)
        self._temporary.append(self._rows.name)

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        if kind is not None:
            self.abort()

    def write(self, row: dict[str, Any]) -> None:
        self._rows.write(_row_line(row))
        self.count += 1

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write the summary (checked against ResultsSummary) naming the rows file, then rename both into
        place; the summary as written."""
        document = {**summary, "rows_file": self.rows_path.name}
        ResultsSummary.model_validate(document)
        self._rows.close()
        handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=self.path.parent,
                                             prefix=f".{self.path.name}.", suffix=".tmp", delete=False)
        self._temporary.append(handle.name)
        with handle:
            json.dump(document, handle, ensure_ascii=False, indent=1, default=str, allow_nan=False)
        os.replace(self._rows.name, self.rows_path)
        os.replace(handle.name, self.path)
        self._temporary = []
        return document

    def abort(self) -> None:
        self._rows.close()
        for name in self._temporary:
            with suppress(FileNotFoundError):
                os.unlink(name)
        self._temporary = []


def read_json(path: str | Path) -> Any:
    """A whole JSON file; RecordError when it is missing, not UTF-8 text or not JSON (see `loads`)."""
    path = Path(path)
    text = read_text(path)
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"line {exc.lineno}", None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:
        raise RecordError(path, "file", None, str(exc)) from None


def read_results(path: str | Path, *, rows: bool = True) -> dict[str, Any]:
    """`evaluation_results.json` with its rows (read from its rows file, or inline in an older file), validated:
    every problem is a RecordError naming the file, the row (or the rows file's line) and the field.
    `rows=False`: the summary alone, without reading the rows file."""
    path = Path(path)
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise RecordError(path, "file", None, "must be a JSON object")
    rows_file = raw.get("rows_file")
    try:
        if rows_file is None or "rows" in raw:
            _Rows.model_validate(raw)   # first: what a results file without its rows lacks is its rows
        ResultsSummary.model_validate(raw)
    except ValidationError as exc:
        location, problem = validation_problem(exc)
        row = location[:1] == ("rows",) and len(location) > 1
        raise RecordError(path, f"row {location[1]}" if row else "file", field_path(location[2:] if row else location),
                          problem) from None
    if rows_file is None or "rows" in raw:
        raw.pop("rows_file", None)
        if not rows:
            raw.pop("rows")
        return raw
    del raw["rows_file"]
    if rows:
        raw["rows"] = read_rows(path.parent / rows_file, raw["counts"]["conversations"], path)
    return raw


_LONG_INTEGER = re.compile(r"\d{19}")


def _row_json(text: str) -> Any:
    """orjson where it reads exactly what the stdlib reads (it turns integers beyond 64 bits into floats)."""
    if not _LONG_INTEGER.search(text):
        with suppress(orjson.JSONDecodeError):
            return orjson.loads(text)
    return loads(text)   # its error says what is wrong


def json_line(line: str, path: Path, number: int, decode: Callable[[str], Any] = loads) -> Any:
    """One line of a JSONL file, decoded; RecordError naming the file and the line when it is not JSON."""
    try:
        return decode(line)
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"line {number}", None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:
        raise RecordError(path, f"line {number}", None, str(exc)) from None


def read_rows(path: str | Path, expected: int | None = None, results: Path | None = None) -> list[dict[str, Any]]:
    """The rows of a rows file, each validated as a ResultRow; `expected`: how many the results file counts."""
    path = Path(path)
    found = []
    for number, line, _ in _text_lines(path):
        if not line.strip():
            continue
        record = json_line(line, path, number, _row_json)
        if not isinstance(record, dict):
            raise RecordError(path, f"line {number}", None, "must be a JSON object")
        validated(ResultRow, record, path, f"line {number}")   # pairs are objects before the lists come from them
        found.append(_full_row(record))
    if expected is not None and len(found) != expected:
        raise RecordError(path, "file", None, f"holds {len(found)} rows where {results or 'the results file'} counts "
                                              f"{expected} conversations: the two files are not of one run")
    return found


def first_row(path: str | Path) -> dict[str, Any] | None:
    """The first row of a rows file, validated (None for an empty file): what tells a rows file from another."""
    path = Path(path)
    for number, record in iter_jsonl(path):
        return validated(ResultRow, record, path, f"line {number}").model_dump()
    return None


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


class ClaimsExpected(BaseModel):
    model_config = STRICT

    claimed_not_done: list[str] = []
    """Each sentence of the bot's that claims what no call did (or states a value the call did not send)."""
    done_not_told: list[int] = []
    """The index (in the conversation's calls, in order) of each successful write the user was never told about."""
    disputed: list[str] = []
    """Sentences only some of the labellers called claimed but not done: found or not, they count neither way."""
    done_not_told_disputed: list[int] = []
    """Writes only some of the labellers called never told: found or not, they count neither way."""


class LabelledUserFault(BaseModel):
    model_config = STRICT

    check: str
    """invented_value, ended_early, contradicted_instructions, or `other` (no check of lobeval's)."""
    message_index: int
    """The user's message, as lobeval numbers a transcript's messages (from 0)."""
    detail: str = ""


class LabelledClaims(Conversation):
    """One line of a claims benchmark file (`lobeval bench claims FILE`): a conversation, the tools.json entries
    of its functions, and the truth a person wrote down."""

    tools: list[dict[str, Any]] = []
    expected: ClaimsExpected
    kind: str = "claims"
    """What the conversation tests, to count false alarms by (e.g. "other_agent", "future", "quoted")."""
    user_faults: list[LabelledUserFault] | None = None
    """The simulated user's faults a person found, or null when they were not labelled (no scenario known)."""
    user_faults_disputed: list[LabelledUserFault] = []
    """Faults only some of the labellers found: flagged or not, they count neither way."""
    case: dict[str, Any] | None = None
    """The case the conversation was played from (as in dataset.jsonl): what its simulated user was told."""
