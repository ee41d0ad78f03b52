"""A suite on disk (docs/formats.md): suite.json, tools.json, templates.json and the business data.

Loading checks everything that can be checked without filling a template, and every problem
is a RecordError naming the file, the record and the field.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field

from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import STRICT, ExpectedCall, UserStyle, read_json, read_text, validated
from lobeval.core.vocabulary import function_key

# The seeds' field names are accepted on input and mapped to ours.
TEMPLATE_ALIASES = {"scenarioType": "scenario_name", "instructions": "user_instructions",
                    "task_completion_condition": "task_completion"}
EFFECTS = ("read", "write")
Ask = Callable[[str], str]
"""Asks a person a tool's effect: the tool's name in, "read" or "write" out."""


def settle_effects(source: str, found: dict[str, str | None], overrides: dict[str, str], ask: Ask | None,
                   why: str) -> dict[str, str]:
    """Every tool's effect: from `overrides` (`--effect NAME=read|write`), else as `found` in its source, else
    from `ask(name)`; without `ask`, the tools left without one are a ConfigError naming them (`why` says why
    the source did not tell)."""
    unknown = sorted(set(overrides) - set(found))
    if unknown:
        raise ConfigError(f"{source} has no tool {', '.join(map(repr, unknown))} (it has {', '.join(found) or 'none'})")
    for name, effect in overrides.items():
        _checked_effect(source, name, effect)
    settled = {name: overrides.get(name) or effect for name, effect in found.items()}
    missing = [name for name, effect in settled.items() if effect is None]
    if missing and ask is None:
        raise ConfigError(f"{source}: no effect for {', '.join(map(repr, missing))}: {why}; give each one's effect "
                          f"(read or write)")
    settled.update({name: _checked_effect(source, name, ask(name)) for name in missing if ask is not None})
    return settled


def _checked_effect(source: str, name: str, effect: str) -> str:
    if effect not in EFFECTS:
        raise ConfigError(f"{source}: tool {name!r}: effect {effect!r}, expected read or write")
    return effect


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


def _check_row(path: Path, number: int, row: list[str], header: list[str]) -> None:
    """A row has the header's cells, and no cell swallowed whole rows: a quote opened by mistake runs on to the
    next quote, lines later, and the rows between become one cell (their records then seem to be missing)."""
    for column, cell in zip(header, row):
        swallowed = [line for line in cell.split("\n")[1:] if line.count(",") >= len(header) - 1]
        if swallowed:
            raise RecordError(path, f"line {number}", column,
                              f"a quoted cell runs over {cell.count(chr(10)) + 1} lines and holds what looks like a "
                              f"row ({swallowed[0][:60]!r}): a stray quote?")
    if len(row) != len(header):
        raise RecordError(path, f"line {number}", None, f"has {len(row)} cells, the header has {len(header)}")


def read_csv_typed(path: Path) -> list[dict[str, Any]]:
    """Rows with snake_case keys; a column is bool, int or float when every value is, else text.

    Typing by whole column (not by cell) keeps an ID column such as "00123" or "A7" text.
    """
    return parse_csv_typed(read_text(path), path)


def parse_csv_typed(text: str, path: Path | str) -> list[dict[str, Any]]:
    """`read_csv_typed` of CSV text; problems name `path`."""
    reader = csv.reader(io.StringIO(text, newline=""))
    numbered = []   # (the line the row starts on, the row)
    try:
        header = [snake_case(h) for h in next(reader, [])]
        while True:
            start = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                break
            if any(cell.strip() for cell in row):
                numbered.append((start, row))
    except csv.Error as exc:
        raise RecordError(path, f"line {reader.line_num}", None, f"is not CSV: {exc}") from None
    for column in header:
        if header.count(column) > 1:
            raise RecordError(path, "header", column, "names two columns (after mapping headers to snake_case)")
    for number, row in numbered:
        _check_row(path, number, row, header)
    rows = [row for _, row in numbered]
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

    @property
    def files(self) -> list[Path]:
        """Every file the suite is read from (labels.jsonl when there is one): no output may overwrite them."""
        return [self.suite_file, self.tools_file, self.templates_file, self.dir / "labels.jsonl",
                *(entity.csv for entity in self.entities.values())]

    def tool(self, name: str) -> dict[str, Any] | None:
        return self.tools.get(function_key(name))


def write_functions(suite: Suite) -> list[dict[str, Any]]:
    """The definitions of the suite's write functions, those it ignores left out."""
    ignored = set(map(function_key, suite.ignored_functions))
    return [tool["function"] for key, tool in suite.tools.items() if tool["effect"] == "write" and key not in ignored]


def repo_root(suite_dir: Path) -> Path:
    """Paths in suite.json are relative to the repository: the folder holding `scenarios/`."""
    return suite_dir.parent.parent if suite_dir.parent.name == "scenarios" else suite_dir


class _Parent(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    entity: str
    key: str


class _EntitySpec(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    csv: str
    id: str
    parent: _Parent | None = None


class _SuiteSpec(BaseModel):
    """suite.json; each entity is checked on its own (`_EntitySpec`) so that errors name it."""

    model_config = STRICT

    name: str | None = None
    entities: dict[str, dict[str, Any]] = {}
    ignored_functions: list[str] = []
    optional_effects: list[Literal["read", "write"]] = []
    allowed_function_calls: list[str] = []
    default_target: str | None = None


class Template(BaseModel):
    """One scenario of templates.json (docs/formats.md), after the seed's field names are mapped to ours."""

    model_config = STRICT

    scenario_name: str = Field(min_length=1)
    user_instructions: str
    task_completion: str
    persona: str = ""
    user_style: UserStyle = "conversational"
    user_mistakes: dict[str, Any] = {}
    user_withholds: list[str] = []
    expected_function_calls: list[ExpectedCall]
    expected_outputs: list[str] = []
    allowed_function_calls: list[str] = []
    forbidden_function_calls: list[str] = []
    ordered: bool = False


def load_suite(suite_dir: str | Path, *, templates: bool = True) -> Suite:
    """The suite; `templates=False` leaves templates.json unread (a suite being drafted may have none)."""
    suite_dir = Path(suite_dir).resolve()
    if not suite_dir.is_dir():
        raise RecordError(suite_dir, "suite", None, "is not a directory")
    file = suite_dir / "suite.json"
    spec = read_json(file)
    if not isinstance(spec, dict):
        raise RecordError(file, "suite", None, "must be a JSON object")
    checked = validated(_SuiteSpec, spec, file, "suite")
    return Suite(dir=suite_dir, name=checked.name or suite_dir.name,
                 entities=_entities(suite_dir, checked.entities), tools=_tools(suite_dir / "tools.json"),
                 templates=_templates(suite_dir / "templates.json") if templates else [],
                 ignored_functions=checked.ignored_functions, optional_effects=checked.optional_effects,
                 allowed_function_calls=checked.allowed_function_calls, default_target=checked.default_target)


def _entities(suite_dir: Path, specs: dict[str, dict[str, Any]]) -> dict[str, Entity]:
    file, root = suite_dir / "suite.json", repo_root(suite_dir)
    entities = {}
    for name, entry in specs.items():
        spec = validated(_EntitySpec, entry, file, f"entities.{name}")
        csv_path = Path(spec.csv)
        entities[name] = Entity(name=name, csv=csv_path if csv_path.is_absolute() else root / csv_path, id=spec.id,
                                parent=spec.parent and spec.parent.entity, parent_key=spec.parent and spec.parent.key)
    for name, entity in entities.items():
        if entity.parent and entity.parent not in entities:
            raise RecordError(file, f"entities.{name}", "parent.entity",
                              f"unknown entity '{entity.parent}' (entities: {', '.join(entities)})")
    return entities


def _tools(path: Path) -> dict[str, dict[str, Any]]:
    return check_tools(read_json(path), path)


def check_tools(tools: Any, path: Path | str) -> dict[str, dict[str, Any]]:
    """tools.json's entries by function_key, each checked: a name defined once, an effect, valid JSON Schema
    parameters; a problem is a RecordError naming `path` (the file, or where the tools came from)."""
    if not isinstance(tools, list):
        raise RecordError(path, "tools", None, "must be a list of tool definitions")
    by_key: dict[str, dict[str, Any]] = {}
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise RecordError(path, f"tool {index}", "function.name", "is required (a string)")
        where = f"tool '{function['name']}'"
        if function_key(function["name"]) in by_key:
            raise RecordError(path, where, "function.name", "is defined by an earlier tool too")
        if tool.get("effect") not in EFFECTS:
            raise RecordError(path, where, "effect", f"must be one of {', '.join(EFFECTS)}")
        parameters = function.get("parameters", {})
        if not isinstance(parameters, dict):
            raise RecordError(path, where, "function.parameters", "must be a JSON Schema object")
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as exc:
            field = ".".join(["function.parameters", *map(str, exc.absolute_path)])
            raise RecordError(path, where, field, f"is not valid JSON Schema: {exc.message}") from None
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
        where = f"scenario '{name}'" if isinstance(name, str) and name else f"template {index}"
        template = validated(Template, template, path, where).model_dump()
        if name in names:
            raise RecordError(path, where, "scenario_name", "is used by an earlier template too")
        names.add(name)
        templates.append(template)
    return templates
