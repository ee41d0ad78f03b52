"""`lobeval draft`: scenario templates drafted from a suite's tools and business data, each proven before it
is written (docs/formats.md, "Drafting templates").

draft() reads as its steps: load the suite (templates.json may be missing), propose scenarios for every
write function, prove each (the gates), merge near-duplicates, write what passed, and say why the rest
did not. Deterministic for a seed: the records a scenario's cases are filled from are sampled exactly as
`generate` samples them with that seed.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from lobeval.core.errors import ConfigError, LobevalError
from lobeval.generation.generate import check_case, check_template, fill_case, sample_records
from lobeval.core.operators import literals
from lobeval.core.records import check_output, write_json
from lobeval.drafting.regression import Summarise, regression_templates
from lobeval.workspace.schemas import is_date, made_up, validator
from lobeval.workspace.suite import Entity, Suite, Template, load_suite, write_functions
from lobeval.simulation.users import described, label, say
from lobeval.core.vocabulary import function_key

CASES = 3
"""Cases per scenario the gates prove: what `generate` and `lobeval run` build by default."""
NEAR_DUPLICATE = 90
"""Instructions at least this similar (rapidfuzz ratio), with the same expected calls, are one scenario."""
MATCH = 80
"""How well a column's name must match an argument's name or description to give its values."""
RECORD_WORDS = {"id", "number", "no", "ref", "reference", "key"}
FIT_SAMPLE = 500
"""Distinct values of a column checked against an argument's schema."""
PROSE = re.compile(r"[^\W\d_]{2,}\s+[^\W\d_]{2,}")
"""Text of words (two of letters in a row), not a code or a phone number with spaces."""
ATTEMPTS = 8
"""How many times a draft is tried, on other records and with other values, before it is given up."""
NAMES = 100
"""Scenario names (records sampled) a retry looks through for records the target has not refused."""
MOVED = 3
"""Records whose dates, moved past the latest date seen, give made-up values for several arguments at once."""
START_WORDS = {"start", "from", "begin", "first", "since", "earliest", "min", "pickup", "departure"}
END_WORDS = {"end", "to", "until", "return", "due", "last", "latest", "max", "dropoff", "arrival"}
"""The words that name a range's two ends (`startDate`, `returnDate`)."""
OUT_OF_SCOPE = ("Ask the assistant to book you a flight to Lisbon for next Tuesday.",
                "Ask the assistant what the weather will be like tomorrow.",
                "Ask the assistant to recommend a restaurant for dinner tonight.")


@dataclass
class Draft:
    """A proposed scenario template and, once proven, the cases it gives."""

    template: dict[str, Any]
    kind: str   # "data", "ask" (a required value left out), "out_of_scope", "proposed", "regression"
    cases: list[dict[str, Any]] = field(default_factory=list)
    remake: Callable[[str, int], Draft] | None = None
    """How to make it again under another name with a try's values (an offline draft), for prove to retry."""

    @property
    def name(self) -> str:
        return self.template["scenario_name"]


Proposer = Callable[[Suite, list[str]], list[Draft]]


@dataclass
class DraftResult:
    path: Path | None
    accepted: list[Draft]
    rejected: list[tuple[str, str]]   # (scenario, reason)
    merged: list[tuple[str, str]]     # (scenario, the one it duplicates)
    coverage: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        lines = list(self.notes) + [f"rejected {name}: {reason}" for name, reason in self.rejected]
        lines += [f"merged {name} into {kept} (same expected calls, near-identical instructions)"
                  for name, kept in self.merged]
        lines += coverage_lines(self.coverage)
        where = f"to {self.path}" if self.path else "(nothing written: no draft passed its gates)"
        lines.append(f"wrote {len(self.accepted)} scenarios {where}; {len(self.rejected)} rejected, "
                     f"{len(self.merged)} merged")
        return lines


def _holds_no_template(path: Path) -> bool:
    """The empty templates list `lobeval init` writes: drafting into it loses nothing."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) == []
    except (OSError, ValueError):
        return False


def check_out(suite: Suite, out: str | Path | None, force: bool) -> Path:
    """Where drafts may be written (`out`, default the suite's templates.json): never over a file holding
    templates unless `force`, nor over one of the suite's own files."""
    out = Path(out) if out else suite.templates_file
    if out.exists() and not force and not _holds_no_template(out):
        raise ConfigError(f"{out} exists: give --force to overwrite it, or --out another file")
    check_output(out, [entity.csv for entity in suite.entities.values()] + [suite.suite_file, suite.tools_file])
    return out


def draft(suite_dir: str | Path, out: str | Path | None = None, *, force: bool = False, seed: int = 42,
          target: str | None = None, conversations: str | Path | None = None,
          proposer: Proposer | None = None, summarise: Summarise | None = None) -> DraftResult:
    """Draft, prove and write `out` (default: the suite's templates.json). `target` (default: the suite's
    default_target) replays each case's expected calls when it offers apply(). `conversations`: draft regression
    cases from these recorded conversations instead of from the data. `proposer(suite, names drafted)`: further
    drafts (a model's, lobeval.drafting.draft_model) proven by the same gates. `summarise`: a model's summary of a
    conversation's user messages, the regression case's instructions (offline: the messages themselves)."""
    suite = load_suite(suite_dir, templates=False)
    out = check_out(suite, out, force)
    result = propose(suite, seed=seed, target=target, conversations=conversations, proposer=proposer,
                     summarise=summarise)
    if result.accepted:
        result.path = write_json(out, [d.template for d in result.accepted])
    return result


def propose(suite: Suite, *, seed: int = 42, target: str | None = None, conversations: str | Path | None = None,
            proposer: Proposer | None = None, summarise: Summarise | None = None) -> DraftResult:
    """The drafts proven and merged, nothing written (see `draft`)."""
    from lobeval.models.llm import LLMError

    notes = []
    if conversations:
        try:
            templates = regression_templates(suite, conversations, summarise)
        except LLMError as exc:   # the machinery failed: said, and the user's own messages used instead
            notes.append(f"the model summarised nothing (the instructions are the user's messages): {exc}")
            templates = regression_templates(suite, conversations)
        proposed = [Draft(template, "regression") for template in templates]
    else:
        proposed, left_out = offline_drafts(suite, seed, target or suite.default_target)
        notes += left_out
    try:
        proposed += proposer(suite, [d.name for d in proposed]) if proposer else []
    except LLMError as exc:   # the machinery failed: said, and the other drafts still proven
        notes.append(f"the model proposed nothing: {exc}")
    accepted, rejected = prove(suite, proposed, seed, target or suite.default_target, notes)
    accepted, merged = merge_duplicates(accepted)
    return DraftResult(None, accepted, rejected, merged, coverage(suite, accepted), notes)


# --- reading the tools and the data -----------------------------------------------------------

def _words(text: str) -> set[str]:
    """The words of a name, singular: `action_items` → {action, item}."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.split(r"[^a-z0-9]+", label(text)) if w}


def _properties(function: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return (function.get("parameters") or {}).get("properties") or {}


def _required(function: dict[str, Any]) -> list[str]:
    return (function.get("parameters") or {}).get("required") or []


def _values(entity: Entity, column: str) -> list[Any]:
    return [record[column] for record in entity.records if record.get(column) not in (None, "")]


def _fits(schema: dict[str, Any], entity: Entity, column: str) -> bool:
    """The column has values and they fit the schema (its first FIT_SAMPLE distinct ones: bounded on big data)."""
    distinct = list(dict.fromkeys(map(json.dumps, _values(entity, column))))[:FIT_SAMPLE]
    check = validator(schema)
    return bool(distinct) and all(check.is_valid(json.loads(value)) for value in distinct)


def column_named(entity: Entity, argument: str) -> str | None:
    """The entity's column an argument names, in whichever style: `start_date` for `startDate`."""
    if argument in entity.fields:
        return argument
    return next((column for column in entity.fields if label(column) == label(argument)), None)


def entity_of(suite: Suite, function: dict[str, Any]) -> Entity | None:
    """The entity a function acts on: the one its name says (entity or CSV file name), then the one whose
    columns its arguments name."""
    words, arguments = _words(function["name"]), list(_properties(function))

    def score(entity: Entity) -> tuple[int, int]:
        return (len(words & (_words(entity.name) | _words(entity.csv.stem))),
                sum(column_named(entity, argument) is not None for argument in arguments))

    best = max(suite.entities.values(), key=score, default=None)
    return best if best is not None and score(best) != (0, 0) else None


def record_named(suite: Suite, argument: str, schema: dict[str, Any]) -> Entity | None:
    """The entity whose record an argument names: its name is the entity's id column, a child's key to the
    entity, the entity's name, or a record word (id, number, ...) with the entity's name; and every id of the
    entity fits its schema."""
    words = _words(argument)
    for entity in suite.entities.values():
        keys = {child.parent_key for child in suite.entities.values() if child.parent == entity.name}
        keys |= {entity.id} - RECORD_WORDS   # `email`, `sku`; a bare `id` could be any entity's
        names = _words(entity.name) | _words(entity.csv.stem)
        rest = words - RECORD_WORDS
        named = argument in keys or (rest and rest <= names and (words & RECORD_WORDS or rest == _words(entity.name)))
        if named and _fits(schema, entity, entity.id):
            return entity
    return None


def own_column(suite: Suite, entity: Entity, argument: str, schema: dict[str, Any]) -> str | None:
    """The column of the acted-on entity an argument of an update sets: the one it names, else the entity's own
    column whose values it takes (`reason` → `discount_reason`)."""
    named = column_named(entity, argument)
    if named is not None and named != entity.id:
        return named
    found = source_column(suite, entity, argument, schema, {(entity.name, entity.id)})
    return found[1] if found and found[0] is entity else None


def _ordered(argument: str, schema: dict[str, Any]) -> bool:
    """A date or a number: what a range's ends are."""
    return schema.get("type") in ("integer", "number") or schema.get("format") in ("date", "date-time") \
        or "date" in _words(argument)


def ranges(properties: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(start, end) of each pair of arguments that are a range's two ends: dates or numbers named alike but for
    a start word and an end word (`startDate` and `returnDate`, `date_from` and `date_to`, `min_price` and
    `max_price`). A draft gives them values with start ≤ end."""
    return [(start, end) for start in properties for end in properties
            if _words(start) & START_WORDS and _words(end) & END_WORDS
            and _words(start) - START_WORDS == _words(end) - END_WORDS
            and _ordered(start, properties[start]) and _ordered(end, properties[end])]


def _in_order(start: Any, end: Any) -> bool:
    """Whether a range's values hold start ≤ end (ISO dates compare as text); a placeholder, or values of two
    kinds, is not checked."""
    if _is_placeholder(start) or _is_placeholder(end):
        return True
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end))
    return start <= end if numbers or all(isinstance(v, str) for v in (start, end)) else True


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and "{" in value


def _thing(entity: Entity) -> str:
    """An entity's record in words: `damage_reports` → `damage report`."""
    words = label(entity.name).split()
    last = words[-1]
    return " ".join([*words[:-1], last[:-1] if len(last) > 3 and last.endswith("s") and not last.endswith("ss")
                     else last])


def _phrase(argument: str, schema: dict[str, Any]) -> str:
    """How a person names an argument: its description's first clause, without examples, function names or a
    leading article; else its name in words (also when the description starts by listing its values)."""
    text = re.split(r"(?<=[.;])\s|,?\s*\(?e\.g\.", schema.get("description") or "")[0].strip().rstrip(".;")
    text = re.sub(r"\s+(?:from|via|see|with)\s+\w+_\w+\b", "", text)
    text = re.sub(r"^(?:the|a|an)\s+", "", text, flags=re.I)
    if not text or any(text.lower().startswith(str(v).lower()) for v in schema.get("enum") or []):
        return label(argument)
    return text[0].lower() + text[1:]


def instructions(function: dict[str, Any], arguments: dict[str, Any], left_out: str | None = None) -> str:
    """What the person wants, in the words of the function's and its arguments' descriptions: one line per
    value they give; `left_out` is said only when the assistant asks."""
    properties = _properties(function)
    lines = [f"- {_capital(_phrase(arg, properties[arg]))}: {say(value)}" for arg, value in arguments.items()
             if arg != left_out]
    if left_out:
        lines.append(f"Do not say the {_phrase(left_out, properties[left_out])} until the assistant asks for it; "
                     f"then it is {say(arguments[left_out])}.")
    return "\n".join([f"{_capital(described(function.get('description'), function['name']))}.", *lines])


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def source_column(suite: Suite, entity: Entity, argument: str, schema: dict[str, Any],
                  skip: set[tuple[str, str]]) -> tuple[Entity, str] | None:
    """The column whose values an argument takes: every value fits the argument's schema, and its name
    matches the argument's name or description (the acted-on entity's own columns first)."""
    description = (schema.get("description") or "").lower()
    scored = []
    for order, other in enumerate([entity] + [e for e in suite.entities.values() if e is not entity]):
        for column in other.fields:
            by_name = 100 if column == argument else fuzz.token_set_ratio(label(argument), label(column))
            by_description = fuzz.partial_ratio(label(column), description) * 0.9 if description else 0
            score = max(by_name, by_description) + (5 if order == 0 else 0)
            if score >= MATCH and (other.name, column) not in skip and _fits(schema, other, column):
                scored.append((score, -order, other, column))
    best = max(scored, key=lambda s: s[:2], default=None)
    return (best[2], best[3]) if best and best[0] >= MATCH else None


# --- the offline drafts -----------------------------------------------------------------------
# A draft is made by a maker, make(scenario name, try): the name picks the records its cases are filled from (as
# `generate` samples them), the try the values among those that fit. A draft the gates reject is made again under
# another name with the next try's values (prove).

Maker = Callable[[str, int], Draft]


def _made(scenario: str, make: Maker, kind: str = "data") -> Draft:
    """The first try of a draft, which the gates may ask to make again."""
    first = make(scenario, 0)
    first.kind, first.remake = kind, make
    return first


def offline_drafts(suite: Suite, seed: int, target: str | None = None) -> tuple[list[Draft], list[str]]:
    """The drafts, and what was left out and why."""
    drafts: list[Draft] = []
    left_out: dict[str, list[str]] = {}
    functions = write_functions(suite)
    for function in functions:
        drafts += function_drafts(suite, function, seed)
        for arg in unheld_arguments(suite, function):
            left_out.setdefault(arg, []).append(function["name"])
    drafts += chain_drafts(suite, seed, target)
    if functions:
        drafts.append(out_of_scope(suite, [function["name"] for function in functions]))
    notes = [f"left out {arg} (of {', '.join(names)}): optional, and no column of the data holds its values"
             for arg, names in left_out.items()]
    return drafts, notes


def unheld_arguments(suite: Suite, function: dict[str, Any]) -> list[str]:
    """The optional arguments a draft leaves out: no column of the data holds their values (a request id, an
    idempotency key, a free-text note no record keeps)."""
    entity = entity_of(suite, function)
    if entity is None:
        return []
    required, properties = _required(function), _properties(function)
    own = _own_argument(suite, function, entity)
    return [arg for arg, schema in properties.items() if arg not in required and arg != own
            and record_named(suite, arg, schema) is None and column_named(entity, arg) is None
            and source_column(suite, entity, arg, schema, {(entity.name, entity.id)}) is None]


def _own_argument(suite: Suite, function: dict[str, Any], entity: Entity) -> str | None:
    """The argument naming the record the function acts on (an update), if any."""
    properties = _properties(function)
    own = next((arg for arg, schema in properties.items() if record_named(suite, arg, schema) is entity), None)
    if own is None and entity.id in RECORD_WORDS and entity.id in properties:   # a bare `id`: the acted-on entity's
        own = entity.id
    return own


def function_drafts(suite: Suite, function: dict[str, Any], seed: int) -> list[Draft]:
    """A function's data scenarios and, beside the first, the variant that leaves a required value out."""
    entity = entity_of(suite, function)
    name = function["name"]
    if entity is None:
        return [_unfit(name, f"no entity of {suite.suite_file.name} matches '{name}' by name or arguments")]
    properties = _properties(function)
    own = _own_argument(suite, function, entity)
    makers = update_makers(suite, function, entity, own, seed) if own else \
        [(name, create_maker(suite, function, entity))]
    made = [_made(scenario, make) for scenario, make in makers]
    first = next((d for d in made if "unfit" not in d.template or d.template.get("again")), None)
    if first is None or not properties:
        return made
    left_out = own or next((arg for arg in _required(function) if arg in properties), next(iter(properties)))
    return made + [_made(f"{first.name}_ask_{left_out}", ask_maker(first.remake, function, left_out), "ask")]


def _records(suite: Suite, function: dict[str, Any]) -> dict[str, Entity | None]:
    """The entity whose record each argument names, if any."""
    return {arg: record_named(suite, arg, schema) for arg, schema in _properties(function).items()}


def _creates(suite: Suite) -> dict[str, dict[str, Any]]:
    """Per entity, the function that creates its records."""
    found = {}
    for function in write_functions(suite):
        entity = entity_of(suite, function)
        if entity is not None and entity not in _records(suite, function).values() and entity.name not in found:
            found[entity.name] = function
    return found


def chain_drafts(suite: Suite, seed: int, target: str | None) -> list[Draft]:
    """A record created, then one that names it created in the same conversation: the second call takes the
    new record's id by a `$ref` to the first call's result, where the target's apply() shows it."""
    creates, drafts = _creates(suite), []
    for entity_name, function in creates.items():
        for arg, named in _records(suite, function).items():
            if named is None or named.name not in creates or named.name == entity_name:
                continue
            name = f"{creates[named.name]['name']}_then_{function['name']}"
            first = create_maker(suite, creates[named.name], named)
            second = create_maker(suite, function, suite.entities[entity_name])
            if "unfit" in first(name, 0).template or "unfit" in second(name, 0).template:
                continue
            path, reason = created_key(suite, first, name, _properties(function)[arg], seed, target)
            if path is None:
                drafts.append(_unfit(name, reason))
                continue
            drafts.append(_made(name, chain_maker(suite, first, second, function, arg, path)))
    return drafts


def chain_maker(suite: Suite, first: Maker, second: Maker, function: dict[str, Any], arg: str,
                path: list[str]) -> Maker:
    """The first create's call, then the second's with `arg` a `$ref` to where the first's result holds the id."""
    def make(scenario: str, attempt: int) -> Draft:
        made = [first(scenario, attempt), second(scenario, attempt)]
        unfit = next((part for part in made if "unfit" in part.template), None)
        if unfit is not None:
            return unfit
        [parent_call], [call] = (part.template["expected_function_calls"] for part in made)
        arguments = {**call["arguments"], arg: {"$ref": ".".join([parent_call["functionName"], "result", *path])}}
        rest = {k: v for k, v in arguments.items() if k != arg}
        said = instructions(function, rest)
        text = (f"{made[0].template['user_instructions']}\nThen, in the same conversation: {said[:1].lower()}"
                f"{said[1:]}\n- {_capital(_phrase(arg, _properties(function)[arg]))}: the one just created")
        parent, child = (entity_of(suite, suite.tool(c["functionName"])["function"]) for c in (parent_call, call))
        template = _template(scenario, text, f"The new {_thing(parent)} exists, and the new {_thing(child)} that "
                                             f"names it.", [parent_call, {"functionName": call["functionName"],
                                                                          "arguments": arguments}])
        return Draft({**template, "ordered": True}, "data")
    return make


def created_key(suite: Suite, first: Maker, name: str, schema: dict[str, Any], seed: int,
                target: str | None) -> tuple[list[str] | None, str]:
    """Where the result of the first call holds the new record's id (a value no record had, fitting `schema`),
    learnt by replaying the call on the target (tried again on other records, ATTEMPTS times at most, while the
    target refuses it); else None and why not."""
    from lobeval.targets.endstate import replay_cases
    from lobeval.models.llm import run_sync

    why = ""
    for attempt in range(ATTEMPTS):
        draft = first(name if attempt == 0 else f"{name}_{attempt + 1}", attempt)
        function = draft.template["expected_function_calls"][0]["functionName"]
        if not target:
            return None, f"no target to learn where the result of {function} holds the new record's id"
        try:
            case = fill_case(draft.template, sample_records(suite, draft.template, 1, seed)[0], 0, seed)
        except LobevalError as exc:
            return None, str(exc)
        replay = run_sync(replay_cases({(target, case["case_id"]): case}))[target, case["case_id"]]
        if replay is None or "error" in replay:
            why = "offers no apply()" if replay is None else replay["error"]
            break
        if replay["calls"][0].get("error"):
            why = replay["calls"][0]["error"]
            continue
        existing = {value for entity in suite.entities.values() for record in entity.records
                    for value in record.values()}
        for path, value in _leaves(replay["calls"][0].get("result")):
            if value not in existing and validator(schema).is_valid(value):
                return path, ""
        return None, f"the result of {function} on {target} holds no new value that fits the argument naming it"
    return None, f"replaying {function} on {target} to learn where its result holds the new id: {why}"


def _leaves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[list[str], Any]]:
    """(path, value) of every value in a JSON document that is neither an object nor a list."""
    if isinstance(node, dict):
        return [leaf for key, item in node.items() for leaf in _leaves(item, (*path, str(key)))]
    if isinstance(node, list):
        return [leaf for index, item in enumerate(node) for leaf in _leaves(item, (*path, str(index)))]
    return [(list(path), node)] if path else []


def _unfit(name: str, reason: str, again: bool = False) -> Draft:
    """A draft that cannot be made: it carries its reason and fails the first gate; `again`: made under another
    name (other records) it may be."""
    return Draft({"scenario_name": name, "unfit": reason, **({"again": True} if again else {})}, "data")


def _placeholder(entity: Entity, column: str) -> str:
    return f"{{{entity.name}.{column}}}"


def _nth(values: list[Any], attempt: int) -> Any:
    """The try's value of a list: the first, then the next on each try, round again past the last."""
    return values[attempt % len(values)] if values else None


def create_maker(suite: Suite, function: dict[str, Any], entity: Entity) -> Maker:
    """A new record of `entity` made from a sampled one's values (a parent named by its id; a range's two ends
    from one record, so that its start is not after its end); a required value no column holds made up (the
    try's)."""
    name, properties = function["name"], _properties(function)
    required, records = set(_required(function)), _records(suite, function)
    arguments: dict[str, Any] = {}
    sources: dict[str, tuple[Entity, str]] = {}
    made: dict[str, list[Any]] = {}
    reason = None
    for arg, schema in properties.items():
        named = records[arg]
        found = None if named else source_column(suite, entity, arg, schema, {(entity.name, entity.id)})
        if named is not None or found:
            sources[arg] = (named, named.id) if named else found
            arguments[arg] = _placeholder(*sources[arg])
        elif arg in required:
            arguments[arg] = None
            made[arg] = made_up(schema, [], arg)
            if not made[arg]:
                reason = reason or (f"no column of the data fits the required argument '{arg}', and no value can be "
                                    f"made up for its schema")
    for start, end in ranges(properties):
        if start in sources and end in sources and sources[start][0] is not sources[end][0]:
            reason = reason or (f"'{start}' and '{end}' are a range's two ends, but no one record holds both: "
                                f"{_placeholder(*sources[start])}, {_placeholder(*sources[end])}")
    completion = (f"The assistant did what was asked ({described(function.get('description'), name)}) with the "
                  f"values the user gave, and said so.")

    def make(scenario: str, attempt: int) -> Draft:
        if reason:
            return _unfit(scenario, reason)
        values = {arg: _nth(made[arg], attempt) if arg in made else value for arg, value in arguments.items()}
        return Draft(_template(scenario, instructions(function, values), completion,
                               [{"functionName": name, "arguments": values}]), "data")
    return make


def update_makers(suite: Suite, function: dict[str, Any], entity: Entity, own: str,
                  seed: int) -> list[tuple[str, Maker]]:
    """One scenario with the required arguments alone (a cancel, an approval: the id alone), when it has
    required ones or sets no column otherwise, and one per optional argument that sets a column of the record
    (the two ends of a range together): the record named by its id, the values ones that differ from every
    sampled record's current ones."""
    name, properties = function["name"], _properties(function)
    required = [arg for arg in _required(function) if arg != own]
    unheld = set(unheld_arguments(suite, function))
    optional = [arg for arg in properties if arg != own and arg not in required and arg not in unheld]
    groups = [[start, end] for start, end in ranges({arg: properties[arg] for arg in optional})]
    groups += [[arg] for arg in optional if not any(arg in group for group in groups)]
    groups.sort(key=lambda group: optional.index(group[0]))
    return [("_".join([name, *extra]), update_maker(suite, function, entity, own, required + extra, seed))
            for extra in ([[]] if required or not groups else []) + groups]


def update_maker(suite: Suite, function: dict[str, Any], entity: Entity, own: str, changed: list[str],
                 seed: int) -> Maker:
    """The record named by its id and the changed arguments' values for the records the scenario's name samples:
    those that set the record's columns drawn together (Choices), each other from another entity's column or
    made up (the try's)."""
    name, properties = function["name"], _properties(function)
    ident = {own: _placeholder(entity, entity.id)}
    columns = {arg: own_column(suite, entity, arg, properties[arg]) for arg in changed}
    setting = [arg for arg in changed if columns[arg]]
    choices = Choices(entity, setting, [columns[arg] for arg in setting], properties)
    others: dict[str, list[Any]] = {}
    for arg in changed:
        if not columns[arg]:
            source = source_column(suite, entity, arg, properties[arg], {(entity.name, entity.id)})
            others[arg] = [_placeholder(*source)] if source else made_up(properties[arg], [], arg)
    who = f"the {_thing(entity)} with {_phrase(own, properties[own])} {_placeholder(entity, entity.id)}"
    owner = f"every sampled {_thing(entity)}'s current"

    def make(scenario: str, attempt: int) -> Draft:
        found = choices.pick(sampled(suite, scenario, ident, seed), attempt) if setting else {}
        if found is None:
            return _unfit(scenario, f"no value of '{setting[0]}' differs from {owner} one and fits its schema"
                          if len(setting) == 1 else
                          f"no values of {', '.join(map(repr, setting))} from one record, or moved together, differ "
                          f"from {owner} ones and fit their schemas", again=True)
        for arg, values in others.items():
            found[arg] = _nth(values, attempt)
            if found[arg] is None:
                return _unfit(scenario, f"no column of the data fits the required argument '{arg}', and no value can "
                                        f"be made up for its schema")
        found = {arg: found[arg] for arg in changed}
        said = "; ".join(f"{re.sub(r'^new ', '', _phrase(arg, properties[arg]))}: {say(value)}"
                         for arg, value in found.items())
        done = (f"{_capital(who)} was changed as asked ({said}), and the assistant said so." if found else
                f"The assistant did what was asked ({described(function.get('description'), name)}) for {who}, "
                f"and said so.")
        return Draft(_template(scenario, instructions(function, {**ident, **found}), done,
                               [{"functionName": name, "arguments": {**ident, **found}}]), "data")
    return make


def sampled(suite: Suite, scenario: str, arguments: dict[str, Any], seed: int) -> list[dict[str, dict]]:
    """The records `generate` fills the scenario's cases from, for this seed."""
    return sample_records(suite, {"scenario_name": scenario, "expected_function_calls": [{"arguments": arguments}]},
                          CASES, seed)


class Choices:
    """Values for arguments that set the record's columns, drawn together: one record's values of those columns
    (most common first; for one column of prose, first the record's own text " (revised)"), or made up (one
    argument: an enum value, a date a week past the latest date of the table, a number past the largest; several:
    a record's values with every date moved by whole weeks past that date). Of those that fit the schemas, keep each
    range's start ≤ end and differ from every sampled record's current values (several arguments: when none
    differs in all, those that differ in one at least), the first try takes the first grounded one, the next
    the first made-up one, then the second of each, and so on (the other kind when one has none)."""

    def __init__(self, entity: Entity, args: list[str], columns: list[str], properties: dict[str, dict[str, Any]]):
        self.entity, self.args, self.columns = entity, args, columns
        seen = [_values(entity, column) for column in columns]
        dates = [v for column in entity.fields for v in _values(entity, column) if is_date(v)]
        rows = Counter(tuple(record[c] for c in columns) for record in entity.records
                       if all(record.get(c) not in (None, "") for c in columns))
        self.grounded = [row for row, _ in rows.most_common()]
        if len(args) == 1:
            schema = properties[args[0]]
            self.made = [(value,) for value in made_up(schema, seen[0] + dates, args[0])]
            prose = sum(isinstance(v, str) and PROSE.search(v) is not None for v in seen[0]) > len(seen[0]) / 2
            if prose and schema.get("type") == "string" and not {"enum", "format", "pattern"} & set(schema):
                self.grounded.insert(0, (f"{_placeholder(entity, columns[0])} (revised)",))
        else:
            self.made = _moved(self.grounded, dates) + list(zip(*(made_up(properties[arg], values + dates, arg)
                                                                   for arg, values in zip(args, seen))))
        checks = [validator(properties[arg]) for arg in args]
        pairs = [(args.index(start), args.index(end)) for start, end in ranges({a: properties[a] for a in args})]
        self.grounded, self.made = ([row for row in rows if all(_is_placeholder(v) or check.is_valid(v)
                                                                for v, check in zip(row, checks))
                                     and all(_in_order(row[s], row[e]) for s, e in pairs)]
                                    for rows in (self.grounded, self.made))

    def pick(self, picked: list[dict[str, dict]], attempt: int) -> dict[str, Any] | None:
        current = [[records[self.entity.name][column] for column in self.columns] for records in picked]

        def differs(row: tuple, every: bool) -> bool:
            return all((all if every else any)(_is_placeholder(v) or v != now[i] for i, v in enumerate(row))
                       for now in current)

        for rows in (self.grounded, self.made) if attempt % 2 == 0 else (self.made, self.grounded):
            for every in (True, False) if len(self.args) > 1 else (True,):
                fitting = list(islice((row for row in rows if differs(row, every)), attempt // 2 + 1))
                if fitting:
                    return dict(zip(self.args, _nth(fitting, attempt // 2)))
        return None


def _moved(rows: list[tuple], dates: list[str]) -> list[tuple]:
    """The first MOVED records' values with every date moved by the same whole weeks, past the latest of `dates`."""
    moved = []
    for row in rows[:MOVED] if dates else []:
        first = min((date.fromisoformat(v) for v in row if is_date(v)), default=None)
        if first is not None:
            weeks = (date.fromisoformat(max(dates)) - first).days // 7 + 1
            moved.append(tuple((date.fromisoformat(v) + timedelta(weeks=weeks)).isoformat() if is_date(v) else v
                               for v in row))
    return moved


def ask_maker(make: Maker, function: dict[str, Any], left_out: str) -> Maker:
    """The same calls, the values drawn for its own records, the user leaving out a required value until the bot
    asks for it (`user_withholds`)."""
    phrase = _phrase(left_out, _properties(function)[left_out])

    def ask(scenario: str, attempt: int) -> Draft:
        base = make(scenario, attempt)
        if "unfit" in base.template:
            return base
        call = base.template["expected_function_calls"][0]
        return Draft({**base.template, "user_instructions": instructions(function, call["arguments"], left_out),
                      "persona": f"Forgets to say the {phrase} until asked for it.", "user_withholds": [left_out]},
                     "ask")
    return ask


def out_of_scope(suite: Suite, writes: list[str]) -> Draft:
    """A request no function serves: the one least like anything the tools describe. No write may happen."""
    told = " ".join(f"{t['function']['name']} {t['function'].get('description', '')}" for t in suite.tools.values())
    request = min(OUT_OF_SCOPE, key=lambda text: fuzz.token_set_ratio(text.lower(), label(told)))
    template = _template("out_of_scope_request", f"{request} When it says it cannot help with that, thank it and "
                                                 f"end the session.",
                         "The assistant declined and created or changed nothing.", [])
    template["forbidden_function_calls"] = writes
    return Draft(template, "out_of_scope")


def _template(name: str, instructions: str, completion: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"scenario_name": name, "user_instructions": instructions, "task_completion": completion, "persona": "",
            "user_style": "conversational", "user_mistakes": {}, "expected_function_calls": calls,
            "expected_outputs": [], "allowed_function_calls": [], "forbidden_function_calls": [], "ordered": False}


# --- the gates --------------------------------------------------------------------------------

@dataclass
class _Known:
    """What the tries of the drafts calling the same functions have learnt of the records: those the target
    refused while taking others in the same try (bad), refused with all others (suspect), and took (good)."""

    bad: set[tuple[str, Any]] = field(default_factory=set)
    suspect: set[tuple[str, Any]] = field(default_factory=set)
    good: set[tuple[str, Any]] = field(default_factory=set)


@dataclass
class _Tries:
    """The tries of one draft: how many, the values the next one takes, the names left to sample records by."""

    family: str
    known: _Known
    count: int = 0
    values: int = 0
    next_name: int = 2

    def learn(self, failed: list[dict[str, Any]], passed: list[dict[str, Any]], suite: Suite) -> None:
        """Cases that failed beside cases that passed fail by their records: the values are kept. Otherwise
        either may be at fault: the next values are tried, and the records avoided where others can be."""
        self.count += 1
        refused = {r for case in failed for r in _named_records(suite, case)}
        self.known.good |= {r for case in passed for r in _named_records(suite, case)}
        if passed:
            self.known.bad |= refused
        else:
            self.known.suspect |= refused
            self.values += 1


def prove(suite: Suite, drafts: list[Draft], seed: int, target: str | None,
          notes: list[str] | None = None) -> tuple[list[Draft], list[tuple[str, str]]]:
    """The drafts that pass every gate, with their cases; (scenario, reason) for the others. A draft made by a
    maker is tried again when it fails, ATTEMPTS times at most in all: under another name (other records, never
    one the target refused it on while taking it on others) and, unless some of its cases passed, with the next
    values; it is given up with its last reason. The drafts that passed so are said in `notes`."""
    from lobeval.evaluation.evaluate import make_rules
    from lobeval.drafting.lint import case_problems

    rules = make_rules(suite, [])
    known: dict[tuple[str, ...], _Known] = {}
    tries = {index: _Tries(item.name, known.setdefault(_calls(item), _Known())) for index, item in enumerate(drafts)}
    passed: dict[int, Draft] = {}
    rejected, names = [], set()
    current = list(enumerate(drafts))
    while current:
        failures, checked = [], []
        for index, item in current:
            if item.name in names:
                failures.append((index, "is the name of an earlier draft", None, []))
                continue
            reason, failed = _static_problem(suite, item, seed, rules, case_problems)
            if reason:
                failures.append((index, reason, failed, []))
            else:
                names.add(item.name)
                checked.append((index, item))
        verdicts = replay_verdicts(target, [item for _, item in checked]) if target and checked else {}
        for index, item in checked:
            verdict = verdicts.get(item.name) or []
            reasons = [reason for _, reason in verdict if reason]
            if not reasons:
                passed[index] = item
            elif any(case is None for case, _ in verdict):   # the target failed, not the draft: not tried again
                failures.append((index, reasons[0], None, []))
            else:
                failures.append((index, reasons[0], [case for case, why in verdict if why],
                                 [case for case, why in verdict if not why]))
        current = []
        for index, reason, failed, took in failures:
            state = tries[index]
            state.learn(failed or [], took, suite)
            again = None
            if drafts[index].remake and failed is not None and state.count < ATTEMPTS:
                again = _retry(suite, drafts[index].remake, state, seed)
            if again is None:
                rejected.append((state.family, reason if state.count == 1 else
                                 f"{reason} (the last of {state.count} tries, each on other records)"))
            else:
                current.append((index, again))
    again = [f"{tries[index].family} as {item.name} (try {tries[index].count + 1})"
             for index, item in sorted(passed.items()) if tries[index].count]
    if again and notes is not None:
        notes.append(f"passed when tried again on other records: {', '.join(again)}")
    return [passed[index] for index in sorted(passed)], rejected


def _retry(suite: Suite, make: Maker, state: _Tries, seed: int) -> Draft | None:
    """The draft made again with the next values, under the first of the next NAMES names whose cases name no
    record the target refused it on while taking it on others, and the fewest suspect and most good ones (all
    good: taken at once); an unfit draft when every name gives one."""
    best: tuple[int, Draft, int] | None = None
    unfit: tuple[Draft, int] | None = None
    known = state.known
    for number in range(state.next_name, state.next_name + NAMES):
        candidate = make(f"{state.family}_{number}", state.values)
        touched = None if "unfit" in candidate.template else _touched(suite, candidate.template, seed)
        if touched is None:
            unfit = unfit or (candidate, number)
            continue
        if touched & known.bad:
            continue
        score = len(touched & known.good) - len(touched & known.suspect)
        if best is None or score > best[0]:
            best = (score, candidate, number)
        if touched <= known.good or not (known.good or touched & known.suspect):
            break
    chosen = best[1:] if best else unfit
    if chosen is None:
        return None
    state.next_name = chosen[1] + 1
    return chosen[0]


def _calls(item: Draft) -> tuple[str, ...]:
    """The functions a draft calls, in order (its name when it has none): drafts that call the same functions
    share what their tries learn of the records."""
    calls = item.template.get("expected_function_calls")
    return tuple(call["functionName"] for call in calls) if calls else (item.name,)


def _touched(suite: Suite, template: dict[str, Any], seed: int) -> set[tuple[str, Any]] | None:
    """The records the cases of a template name; None when they cannot be filled."""
    try:
        picks = sample_records(suite, template, CASES, seed)
        return {r for index, picked in enumerate(picks) for r in _named_records(suite, fill_case(template, picked,
                                                                                                  index, seed))}
    except (LobevalError, KeyError):
        return None


def _named_records(suite: Suite, case: dict[str, Any]) -> set[tuple[str, Any]]:
    """(entity, id) of the records a case's expected calls name by their ids; of all its records when none."""
    values = [value for call in case["expected_function_calls"] for value in (call.get("arguments") or {}).values()]
    every = {(name, record.get(suite.entities[name].id)) for name, record in case["business_data"].items()}
    return {(name, key) for name, key in every if key in values} or every


def _static_problem(suite: Suite, item: Draft, seed: int, rules: Any,
                    case_problems: Any) -> tuple[str | None, list[dict[str, Any]] | None]:
    """Why the draft fails a gate before any replay, and the cases that fail it (none for the template's; None
    when other records cannot help: it is not tried again)."""
    if "unfit" in item.template:
        return item.template["unfit"], [] if item.template.get("again") else None
    try:
        item.template = Template.model_validate(item.template).model_dump()
        check_template(suite, item.template)
        records = sample_records(suite, item.template, CASES, seed)
        item.cases = [fill_case(item.template, picked, index, seed) for index, picked in enumerate(records)]
        for case in item.cases:
            check_case(suite, case)
    except LobevalError as exc:
        return str(exc), []
    except ValueError as exc:   # pydantic's ValidationError
        return (f"not a template: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}" if hasattr(exc, "errors")
                else str(exc)), []
    for case in item.cases:
        problems = case_problems(case, rules)
        if problems:
            return f"lint, case {case['case_id']}: {problems[0][1]}", [case]
        unchanged = unchanged_values(suite, case)
        if unchanged:
            return f"case {case['case_id']}: {unchanged}", [case]
    return None, []


def unchanged_values(suite: Suite, case: dict[str, Any]) -> str | None:
    """What an update would set to the values its record already has: every column it sets (such a case proves
    nothing)."""
    for call in case["expected_function_calls"]:
        tool = suite.tool(call["functionName"])
        entity = entity_of(suite, tool["function"])
        record = case["business_data"].get(entity.name) if entity else None
        arguments = call.get("arguments") or {}
        if record is None or not any(v == record[entity.id] for v in arguments.values()):
            continue
        properties = _properties(tool["function"])
        setting = {arg: column for arg in arguments if record_named(suite, arg, properties[arg]) is None
                   and (column := own_column(suite, entity, arg, properties[arg])) is not None}
        same = [arg for arg, column in setting.items()
                if literals(arguments[arg]) and record[column] in literals(arguments[arg])]
        if same and len(same) == len(setting):
            said = " and ".join(f"{arg} to {record[setting[arg]]!r}" for arg in same)
            return f"{call['functionName']} sets {said}, the value{'s' if len(same) > 1 else ''} it already has"
    return None


def replay_verdicts(target: str, drafts: list[Draft]) -> dict[str, list[tuple[dict[str, Any] | None, str | None]]]:
    """Per scenario, each case and why its expected calls fail on the target or leave its state unchanged (None
    when they pass); (None, why) when the target failed to replay; nothing when it offers no apply()."""
    from lobeval.targets.endstate import replay_cases
    from lobeval.models.llm import run_sync

    wanted = {(target, case["case_id"]): case for d in drafts for case in d.cases}
    replays = run_sync(replay_cases(wanted))
    verdicts: dict[str, list[tuple[dict[str, Any] | None, str | None]]] = {}
    for d in drafts:
        for case in d.cases:
            replay = replays[target, case["case_id"]]
            if replay is None:
                continue
            if "error" in replay:
                verdicts[d.name] = [(None, f"on {target}: {replay['error']}")]
                break
            why = None
            if replay["replay_errors"]:
                failed = replay["replay_errors"][0]
                why = f"case {case['case_id']}: {failed['functionName']} fails on {target}: {failed['error']}"
            elif case["expected_function_calls"] and replay["expected"] == replay["initial"]:
                why = f"case {case['case_id']}: replayed on {target}, the expected calls change nothing"
            verdicts.setdefault(d.name, []).append((case, why))
    return verdicts


def merge_duplicates(drafts: list[Draft]) -> tuple[list[Draft], list[tuple[str, str]]]:
    """The first of each group with the same expected calls and near-identical instructions."""
    kept: list[Draft] = []
    merged = []
    for item in drafts:
        calls = json.dumps(item.template["expected_function_calls"], sort_keys=True)
        twin = next((k for k in kept if json.dumps(k.template["expected_function_calls"], sort_keys=True) == calls
                     and fuzz.ratio(k.template["user_instructions"], item.template["user_instructions"]) >= NEAR_DUPLICATE),
                    None)
        if twin is None:
            kept.append(item)
        else:
            merged.append((item.name, twin.name))
    return kept, merged


# --- coverage ---------------------------------------------------------------------------------

def coverage(suite: Suite, drafts: list[Draft]) -> list[dict[str, Any]]:
    """Each write function, argument and enum value, with the scenarios that exercise it; an argument left out
    (unheld_arguments) says so."""
    rows = []
    for function in write_functions(suite):
        key, unheld = function_key(function["name"]), unheld_arguments(suite, function)
        calls = [(d.name, call) for d in drafts for case in d.cases for call in case["expected_function_calls"]
                 if function_key(call["functionName"]) == key]
        rows.append({"function": function["name"], "argument": "", "value": "",
                     "scenarios": sorted({name for name, _ in calls})})
        for arg, schema in _properties(function).items():
            rows.append({"function": function["name"], "argument": arg, "value": "",
                         "scenarios": sorted({name for name, call in calls if arg in call.get("arguments", {})}),
                         **({"left_out": True} if arg in unheld else {})})
            for option in schema.get("enum") or []:
                rows.append({"function": function["name"], "argument": arg, "value": say(option),
                             "scenarios": sorted({name for name, call in calls
                                                  if option in literals(call.get("arguments", {}).get(arg))})})
    return rows


def coverage_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["coverage: the suite has no write function"]
    widths = [max(len(str(row[key])) for row in rows + [{"function": "function", "argument": "argument",
                                                          "value": "value"}]) for key in ("function", "argument", "value")]
    lines = ["coverage:", f"  {'function':<{widths[0]}}  {'argument':<{widths[1]}}  {'value':<{widths[2]}}  scenarios"]
    for row in rows:
        scenarios = ", ".join(row["scenarios"]) or ("left out: optional, no data holds it" if row.get("left_out")
                                                    else "NOT COVERED")
        lines.append(f"  {row['function']:<{widths[0]}}  {row['argument']:<{widths[1]}}  {row['value']:<{widths[2]}}  "
                     f"{scenarios}")
    counted = [row for row in rows if not (row.get("left_out") and not row["scenarios"])]
    covered = sum(1 for row in counted if row["scenarios"])
    left_out = len(rows) - len(counted)
    lines.append(f"  {covered} of {len(counted)} covered" + (f"; {left_out} left out" if left_out else ""))
    return lines
