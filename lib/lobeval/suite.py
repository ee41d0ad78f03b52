"""A suite on disk (SPEC §3): suite.json, tools.json, templates.json and the business data.

Loading checks everything that can be checked without filling a template, and every problem
is a RecordError naming the file, the record and the field.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from lobeval.errors import RecordError
from lobeval.records import read_json

# The seeds' field names are accepted on input and mapped to ours.
TEMPLATE_ALIASES = {"scenarioType": "scenario_name", "instructions": "user_instructions",
                    "task_completion_condition": "task_completion"}
TEMPLATE_DEFAULTS: dict[str, Any] = {"persona": "", "user_style": "conversational", "user_mistakes": {},
                                     "expected_outputs": [], "allowed_function_calls": [],
                                     "forbidden_function_calls": [], "ordered": False}
TEMPLATE_REQUIRED = ("scenario_name", "user_instructions", "task_completion", "expected_function_calls")
USER_STYLES = ("conversational", "terse", "one_fact", "all_in_one")
EFFECTS = ("read", "write")
_PLUGIN_PREFIX = re.compile(r"^[A-Za-z0-9_]*Plugin-", re.IGNORECASE)


def strip_plugin_prefix(name: str) -> str:
    """`TicketPlugin-create_ticket` → `create_ticket` (the seeds' naming)."""
    return _PLUGIN_PREFIX.sub("", name)


@lru_cache(maxsize=4096)
def function_key(name: str) -> str:
    """The name functions are compared by: case-insensitive, without a `...Plugin-` prefix."""
    return strip_plugin_prefix(name).lower()


def snake_case(header: str) -> str:
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", header.strip())
    return re.sub(r"[^0-9a-zA-Z]+", "_", words).strip("_").lower()


@dataclass(frozen=True)
class Entity:
    """One kind of business record, read from a CSV file."""

    name: str
    csv: Path
    id: str
    parent: str | None = None
    parent_key: str | None = None

    @cached_property
    def records(self) -> list[dict[str, Any]]:
        rows = read_csv_typed(self.csv)
        required = [self.id] + ([self.parent_key] if self.parent_key else [])
        columns = rows[0].keys() if rows else []
        for column in required:
            if column not in columns:
                raise RecordError(self.csv, "header", column,
                                  f"missing CSV column (entity '{self.name}' needs it; columns are: "
                                  f"{', '.join(columns)})")
        seen: set[Any] = set()
        for number, row in enumerate(rows, start=2):
            if row[self.id] in seen:
                raise RecordError(self.csv, f"line {number}", self.id, f"duplicate id {row[self.id]!r}")
            seen.add(row[self.id])
        return rows

    @property
    def fields(self) -> list[str]:
        return list(self.records[0]) if self.records else []


def _column_type(values: list[str]):
    present = [v for v in values if v != ""]
    if present and all(v.lower() in ("true", "false") for v in present):
        return lambda v: None if v == "" else v.lower() == "true"
    if present and all(re.fullmatch(r"-?\d+", v) and not re.fullmatch(r"-?0\d+", v) for v in present):
        return lambda v: None if v == "" else int(v)
    if present and all(re.fullmatch(r"-?\d+\.\d+", v) for v in present):
        return lambda v: None if v == "" else float(v)
    return lambda v: v


def read_csv_typed(path: Path) -> list[dict[str, Any]]:
    """Rows with snake_case keys; a column is bool, int or float when every value is, else text.

    Typing by whole column (not by cell) keeps an ID column such as "00123" or "A7" text.
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = [snake_case(h) for h in next(reader, [])]
            rows = [row for row in reader if any(cell.strip() for cell in row)]
    except FileNotFoundError:
        raise RecordError(path, "file", None, "CSV file not found") from None
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise RecordError(path, f"line {number}", None,
                              f"has {len(row)} cells, the header has {len(header)}")
    converters = [_column_type([row[i].strip() for row in rows]) for i in range(len(header))]
    return [{name: convert(cell.strip()) for name, convert, cell in zip(header, converters, row)}
            for row in rows]


@dataclass(frozen=True)
class Suite:
    dir: Path
    name: str
    entities: dict[str, Entity]
    tools: dict[str, dict[str, Any]]  # function_key -> tool definition
    templates: list[dict[str, Any]]
    ignored_functions: list[str] = field(default_factory=list)
    optional_effects: list[str] = field(default_factory=list)
    allowed_function_calls: list[str] = field(default_factory=list)
    """Functions whose extra calls every scenario of the suite allows."""
    default_target: str | None = None

    @property
    def suite_file(self) -> Path:
        return self.dir / "suite.json"

    @property
    def tools_file(self) -> Path:
        return self.dir / "tools.json"

    @property
    def templates_file(self) -> Path:
        return self.dir / "templates.json"

    def tool(self, name: str) -> dict[str, Any] | None:
        return self.tools.get(function_key(name))


def repo_root(suite_dir: Path) -> Path:
    """Paths in suite.json are relative to the repository: the folder holding `scenarios/`."""
    return suite_dir.parent.parent if suite_dir.parent.name == "scenarios" else suite_dir


def load_suite(suite_dir: str | Path) -> Suite:
    suite_dir = Path(suite_dir).resolve()
    if not suite_dir.is_dir():
        raise RecordError(suite_dir, "suite", None, "is not a directory")
    spec = read_json(suite_dir / "suite.json")
    if not isinstance(spec, dict):
        raise RecordError(suite_dir / "suite.json", "suite", None, "must be a JSON object")
    return Suite(dir=suite_dir, name=spec.get("name") or suite_dir.name,
                 entities=_entities(suite_dir, spec), tools=_tools(suite_dir / "tools.json"),
                 templates=_templates(suite_dir / "templates.json"),
                 ignored_functions=list(spec.get("ignored_functions", [])),
                 optional_effects=list(spec.get("optional_effects", [])),
                 allowed_function_calls=list(spec.get("allowed_function_calls", [])),
                 default_target=spec.get("default_target"))


def _entities(suite_dir: Path, spec: dict[str, Any]) -> dict[str, Entity]:
    file, root = suite_dir / "suite.json", repo_root(suite_dir)
    entities = {}
    for name, entry in (spec.get("entities") or {}).items():
        where = f"entities.{name}"
        for key in ("csv", "id"):
            if not isinstance(entry.get(key), str):
                raise RecordError(file, where, key, "is required (a string)")
        parent = entry.get("parent")
        if parent is not None and not (isinstance(parent, dict) and {"entity", "key"} <= parent.keys()):
            raise RecordError(file, where, "parent", 'must be {"entity": ..., "key": ...}')
        csv_path = Path(entry["csv"])
        entities[name] = Entity(name=name, csv=csv_path if csv_path.is_absolute() else root / csv_path,
                                id=entry["id"], parent=parent and parent["entity"],
                                parent_key=parent and parent["key"])
    for name, entity in entities.items():
        if entity.parent and entity.parent not in entities:
            raise RecordError(file, f"entities.{name}", "parent.entity",
                              f"unknown entity '{entity.parent}' (entities: {', '.join(entities)})")
    return entities


def _tools(path: Path) -> dict[str, dict[str, Any]]:
    tools = read_json(path)
    if not isinstance(tools, list):
        raise RecordError(path, "tools", None, "must be a list of tool definitions")
    by_key = {}
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RecordError(path, f"tool {index}", "function.name", "is required")
        where = f"tool '{function['name']}'"
        if tool.get("effect") not in EFFECTS:
            raise RecordError(path, where, "effect", f"must be one of {', '.join(EFFECTS)}")
        if not isinstance(function.get("parameters", {}), dict):
            raise RecordError(path, where, "function.parameters", "must be a JSON Schema object")
        by_key[function_key(function["name"])] = tool
    return by_key


def _templates(path: Path) -> list[dict[str, Any]]:
    raw = read_json(path)
    if not isinstance(raw, list):
        raise RecordError(path, "templates", None, "must be a list of scenario templates")
    templates, names = [], set()
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise RecordError(path, f"template {index}", None, "must be a JSON object")
        template = {TEMPLATE_ALIASES.get(k, k): v for k, v in entry.items()}
        name = template.get("scenario_name")
        where = f"scenario '{name}'" if name else f"template {index}"
        for key in TEMPLATE_REQUIRED:
            if key not in template:
                raise RecordError(path, where, key, "is required")
        if name in names:
            raise RecordError(path, where, "scenario_name", "is used by an earlier template too")
        names.add(name)
        template = {**TEMPLATE_DEFAULTS, **template}
        if template["user_style"] not in USER_STYLES:
            raise RecordError(path, where, "user_style", f"must be one of {', '.join(USER_STYLES)}")
        if not isinstance(template["expected_function_calls"], list):
            raise RecordError(path, where, "expected_function_calls", "must be a list")
        for position, call in enumerate(template["expected_function_calls"]):
            if not isinstance(call, dict) or not isinstance(call.get("functionName"), str):
                raise RecordError(path, where, f"expected_function_calls[{position}].functionName", "is required")
            if not isinstance(call.get("arguments", {}), dict):
                raise RecordError(path, where, f"expected_function_calls[{position}].arguments",
                                  "must be an object")
        templates.append(template)
    return templates
