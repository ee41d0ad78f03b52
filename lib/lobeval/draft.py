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
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from lobeval.errors import ConfigError, LobevalError
from lobeval.generate import check_case, check_template, fill_case, sample_records
from lobeval.operators import literals
from lobeval.records import check_output, write_json
from lobeval.regression import Summarise, regression_templates
from lobeval.schemas import made_up, validator
from lobeval.suite import Entity, Suite, Template, load_suite, write_functions
from lobeval.users import described, label, say
from lobeval.vocabulary import function_key

CASES = 3
"""Cases per scenario the gates prove: what `generate` and `lobeval run` build by default."""
NEAR_DUPLICATE = 90
"""Instructions at least this similar (rapidfuzz ratio), with the same expected calls, are one scenario."""
MATCH = 80
"""How well a column's name must match an argument's name or description to give its values."""
RECORD_WORDS = {"id", "number", "no", "ref", "reference", "key"}
FIT_SAMPLE = 500
"""Distinct values of a column checked against an argument's schema."""
OUT_OF_SCOPE = ("Ask the assistant to book you a flight to Lisbon for next Tuesday.",
                "Ask the assistant what the weather will be like tomorrow.",
                "Ask the assistant to recommend a restaurant for dinner tonight.")


@dataclass
class Draft:
    """A proposed scenario template and, once proven, the cases it gives."""

    template: dict[str, Any]
    kind: str   # "data", "ask" (a required value left out), "out_of_scope", "proposed", "regression"
    cases: list[dict[str, Any]] = field(default_factory=list)

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
    drafts (a model's, lobeval.draft_model) proven by the same gates. `summarise`: a model's summary of a
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
    from lobeval.llm import LLMError

    notes = []
    if conversations:
        try:
            templates = regression_templates(suite, conversations, summarise)
        except LLMError as exc:   # the machinery failed: said, and the user's own messages used instead
            notes.append(f"the model summarised nothing (the instructions are the user's messages): {exc}")
            templates = regression_templates(suite, conversations)
        proposed = [Draft(template, "regression") for template in templates]
    else:
        proposed = offline_drafts(suite, seed, target or suite.default_target)
    try:
        proposed += proposer(suite, [d.name for d in proposed]) if proposer else []
    except LLMError as exc:   # the machinery failed: said, and the other drafts still proven
        notes.append(f"the model proposed nothing: {exc}")
    accepted, rejected = prove(suite, proposed, seed, target or suite.default_target)
    accepted, merged = merge_duplicates(accepted)
    return DraftResult(None, accepted, rejected, merged, coverage(suite, accepted), notes)


# --- reading the tools and the data -----------------------------------------------------------

def _words(text: str) -> set[str]:
    """The words of a name, singular: `action_items` → {action, item}."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.split(r"[^a-z0-9]+", label(text)) if w}


def _properties(function: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return (function.get("parameters") or {}).get("properties") or {}


def _values(entity: Entity, column: str) -> list[Any]:
    return [record[column] for record in entity.records if record.get(column) not in (None, "")]


def _fits(schema: dict[str, Any], entity: Entity, column: str) -> bool:
    """The column has values and they fit the schema (its first FIT_SAMPLE distinct ones: bounded on big data)."""
    distinct = list(dict.fromkeys(map(json.dumps, _values(entity, column))))[:FIT_SAMPLE]
    check = validator(schema)
    return bool(distinct) and all(check.is_valid(json.loads(value)) for value in distinct)


def entity_of(suite: Suite, function: dict[str, Any]) -> Entity | None:
    """The entity a function acts on: the one its name says (entity or CSV file name), then the one whose
    columns its arguments name."""
    words, arguments = _words(function["name"]), set(_properties(function))

    def score(entity: Entity) -> tuple[int, int]:
        return len(words & (_words(entity.name) | _words(entity.csv.stem))), len(arguments & set(entity.fields))

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
    text = f"{_capital(described(function.get('description'), function['name']))}.\n" + "\n".join(lines)
    if left_out:
        text += (f"\nDo not say the {_phrase(left_out, properties[left_out])} until the assistant asks for it; "
                 f"then it is {say(arguments[left_out])}.")
    return text


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

def offline_drafts(suite: Suite, seed: int, target: str | None = None) -> list[Draft]:
    drafts: list[Draft] = []
    functions = write_functions(suite)
    for function in functions:
        drafts += function_drafts(suite, function, seed)
    drafts += chain_drafts(suite, seed, target)
    if functions:
        drafts.append(out_of_scope(suite, [function["name"] for function in functions]))
    return drafts


def function_drafts(suite: Suite, function: dict[str, Any], seed: int) -> list[Draft]:
    """A function's data scenarios and, beside the first, the variant that leaves a required value out."""
    entity = entity_of(suite, function)
    name = function["name"]
    if entity is None:
        return [_unfit(name, f"no entity of {suite.suite_file.name} matches '{name}' by name or arguments")]
    properties = _properties(function)
    records = {arg: record_named(suite, arg, schema) for arg, schema in properties.items()}
    own = next((arg for arg, named in records.items() if named is entity), None)
    if own is None and entity.id in RECORD_WORDS and entity.id in properties:   # a bare `id`: the acted-on entity's
        own = entity.id
    made = update_drafts(suite, function, entity, own, seed) if own else [create_draft(suite, function, entity, records)]
    first = next((d for d in made if "unfit" not in d.template), None)
    return made + ([ask_variant(first, function, own)] if first else [])


def _creates(suite: Suite) -> dict[str, tuple[dict[str, Any], dict[str, Entity | None]]]:
    """Per entity, the function that creates its records and the records each argument names."""
    found = {}
    for function in write_functions(suite):
        entity = entity_of(suite, function)
        records = {arg: record_named(suite, arg, schema) for arg, schema in _properties(function).items()}
        if entity is not None and entity not in records.values() and entity.name not in found:
            found[entity.name] = (function, records)
    return found


def chain_drafts(suite: Suite, seed: int, target: str | None) -> list[Draft]:
    """A record created, then one that names it created in the same conversation: the second call takes the
    new record's id by a `$ref` to the first call's result, where the target's apply() shows it."""
    creates, drafts = _creates(suite), []
    for entity_name, (function, records) in creates.items():
        for arg, named in records.items():
            if named is None or named.name not in creates or named.name == entity_name:
                continue
            parent_function, parent_records = creates[named.name]
            first = create_draft(suite, parent_function, named, parent_records)
            second = create_draft(suite, function, suite.entities[entity_name], records)
            name = f"{parent_function['name']}_then_{function['name']}"
            if "unfit" in first.template or "unfit" in second.template:
                continue
            path, reason = created_key(suite, first, _properties(function)[arg], seed, target)
            if path is None:
                drafts.append(_unfit(name, reason))
                continue
            [call] = second.template["expected_function_calls"]
            arguments = {**call["arguments"], arg: {"$ref": ".".join([parent_function["name"], "result", *path])}}
            rest = {k: v for k, v in arguments.items() if k != arg}
            text = (f"{first.template['user_instructions']}\nThen, in the same conversation: "
                    f"{instructions(function, rest)}\n- {_capital(_phrase(arg, _properties(function)[arg]))}: "
                    f"the one just created")
            template = _template(name, text, f"The new {named.name} exists, and the new {entity_name} under it.",
                                 [*first.template["expected_function_calls"],
                                  {"functionName": function["name"], "arguments": arguments}])
            drafts.append(Draft({**template, "ordered": True}, "data"))
    return drafts


def created_key(suite: Suite, first: Draft, schema: dict[str, Any], seed: int,
                target: str | None) -> tuple[list[str] | None, str]:
    """Where the result of the first call holds the new record's id (a value no record had, fitting `schema`),
    learnt by replaying the call on the target; else None and why not."""
    from lobeval.endstate import replay_cases
    from lobeval.llm import run_sync

    function = first.template["expected_function_calls"][0]["functionName"]
    if not target:
        return None, f"no target to learn where the result of {function} holds the new record's id"
    try:
        case = fill_case(first.template, sample_records(suite, first.template, 1, seed)[0], 0, seed)
    except LobevalError as exc:
        return None, str(exc)
    replay = run_sync(replay_cases({(target, case["case_id"]): case}))[target, case["case_id"]]
    if replay is None or "error" in replay or replay["calls"][0].get("error"):
        why = "offers no apply()" if replay is None else replay.get("error") or replay["calls"][0]["error"]
        return None, f"replaying {function} on {target} to learn where its result holds the new id: {why}"
    existing = {value for entity in suite.entities.values() for record in entity.records for value in record.values()}
    for path, value in _leaves(replay["calls"][0].get("result")):
        if value not in existing and validator(schema).is_valid(value):
            return path, ""
    return None, f"the result of {function} on {target} holds no new value that fits the argument naming it"


def _leaves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[list[str], Any]]:
    """(path, value) of every value in a JSON document that is neither an object nor a list."""
    if isinstance(node, dict):
        return [leaf for key, item in node.items() for leaf in _leaves(item, (*path, str(key)))]
    if isinstance(node, list):
        return [leaf for index, item in enumerate(node) for leaf in _leaves(item, (*path, str(index)))]
    return [(list(path), node)] if path else []


def _unfit(name: str, reason: str) -> Draft:
    """A draft that cannot be made: it carries its reason and fails the first gate."""
    return Draft({"scenario_name": name, "unfit": reason}, "data")


def _placeholder(entity: Entity, column: str) -> str:
    return f"{{{entity.name}.{column}}}"


def create_draft(suite: Suite, function: dict[str, Any], entity: Entity,
                 records: dict[str, Entity | None]) -> Draft:
    """A new record of `entity` made from a sampled one's values (a parent named by its id)."""
    name, properties = function["name"], _properties(function)
    required = set((function.get("parameters") or {}).get("required") or [])
    skip = {(entity.name, entity.id)}
    arguments: dict[str, Any] = {}
    for arg, schema in properties.items():
        named = records[arg]
        if named is not None:
            arguments[arg] = _placeholder(named, named.id)
            continue
        found = source_column(suite, entity, arg, schema, skip)
        if found:
            arguments[arg] = _placeholder(*found)
        elif arg in required:
            values = made_up(schema, [], arg)
            if not values:
                return _unfit(name, f"no column of the data fits the required argument '{arg}', and no value can be "
                                    f"made up for its schema")
            arguments[arg] = values[0]
    template = _template(name, instructions(function, arguments),
                         f"The assistant did it ({described(function.get('description'), name)}) with the values "
                         f"the user gave, and said so.",
                         [{"functionName": name, "arguments": arguments}])
    return Draft(template, "data")


def update_drafts(suite: Suite, function: dict[str, Any], entity: Entity, own: str, seed: int) -> list[Draft]:
    """One scenario with the required arguments alone (a cancel, an approval: the id alone), when it has
    required ones or no other, and one per optional argument with them: the record named by its id, each value
    one that differs from every sampled record's current one."""
    name, properties = function["name"], _properties(function)
    required = [arg for arg in (function.get("parameters") or {}).get("required") or [] if arg != own]
    optional = [arg for arg in properties if arg != own and arg not in required]
    ident = {own: _placeholder(entity, entity.id)}
    drafts = []
    for extra in ([None] if required or not optional else []) + optional:
        changed = required + ([extra] if extra else [])
        scenario = f"{name}_{extra}" if extra else name
        attempt = scenario
        found, failed = _new_values(suite, entity, function, changed, sampled(suite, attempt, ident, seed), {})
        # Each value of an enum no one value of which differs from every sampled record's, in a scenario of its
        # own: the records a scenario is filled from depend on its name.
        for value in properties[failed].get("enum") or [] if found is None else []:
            attempt = f"{scenario}_{_slug(value)}"
            found, _ = _new_values(suite, entity, function, changed, sampled(suite, attempt, ident, seed),
                                   {failed: value})
            if found is not None:
                break
        if found is None:
            drafts.append(_unfit(scenario, f"no value of '{failed}' differs from every sampled {entity.name}'s "
                                           f"current one and fits its schema"))
            continue
        arguments = {**ident, **found}
        who = f"the record with {_phrase(own, properties[own])} {_placeholder(entity, entity.id)}"
        done = (f"{_capital(who)} has " + ", ".join(f"{re.sub(r'^new ', '', _phrase(arg, properties[arg]))} "
                                                     f"{say(value)}" for arg, value in found.items()) + "."
                if found else f"Done ({described(function.get('description'), name)}) for {who}.")
        drafts.append(Draft(_template(attempt, instructions(function, arguments), done,
                                      [{"functionName": name, "arguments": arguments}]), "data"))
    return drafts


def _new_values(suite: Suite, entity: Entity, function: dict[str, Any], changed: list[str],
                picked: list[dict[str, dict]], only: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A new value for each changed argument (the one `only` gives, for an argument it names); else None and the
    argument that has none."""
    properties, found = _properties(function), {}
    for arg in changed:
        column = arg if arg in entity.fields else None
        value = _new_value(suite, entity, arg, properties[arg], column, picked, only.get(arg))
        if value is None:
            return None, arg
        found[arg] = value
    return found, None


def sampled(suite: Suite, scenario: str, arguments: dict[str, Any], seed: int) -> list[dict[str, dict]]:
    """The records `generate` fills the scenario's cases from, for this seed."""
    return sample_records(suite, {"scenario_name": scenario, "expected_function_calls": [{"arguments": arguments}]},
                          CASES, seed)


def _slug(value: Any) -> str:
    return re.sub(r"[^0-9a-z]+", "_", str(value).lower()).strip("_")


def _new_value(suite: Suite, entity: Entity, arg: str, schema: dict[str, Any], column: str | None,
               picked: list[dict[str, dict]], only: Any = None) -> Any:
    """The first value, most grounded first (the column's other values, then made-up ones; `only` when given),
    that fits the schema and differs from the current value of every sampled record."""
    if column is None:
        found = source_column(suite, entity, arg, schema, {(entity.name, entity.id)})
        values = [_placeholder(*found)] if found and found[0] is not entity else made_up(schema, [], arg)
        return values[0] if values else None
    seen = _values(entity, column)
    prose = sum(isinstance(v, str) and " " in v for v in seen) > len(seen) / 2
    plain = prose and schema.get("type") == "string" and not {"enum", "format", "pattern"} & set(schema)
    candidates = [v for v, _ in Counter(seen).most_common()] + made_up(schema, seen, arg)
    if plain:
        candidates.insert(0, f"{_placeholder(entity, column)} (revised)")
    if only is not None:
        candidates = [only]
    current = [records[entity.name][column] for records in picked]
    for value in candidates:
        literal = isinstance(value, str) and "{" in value
        if literal or (validator(schema).is_valid(value) and value not in current):
            return value
    return None


def ask_variant(base: Draft, function: dict[str, Any], own: str | None) -> Draft:
    """The same calls, the user leaving out a required value until the bot asks for it (`user_withholds`)."""
    required = (function.get("parameters") or {}).get("required") or []
    call = base.template["expected_function_calls"][0]
    left_out = own or next((arg for arg in required if arg in call["arguments"]), next(iter(call["arguments"])))
    phrase = _phrase(left_out, _properties(function)[left_out])
    template = {**base.template, "scenario_name": f"{base.name}_ask_{left_out}",
                "user_instructions": instructions(function, call["arguments"], left_out),
                "persona": f"Forgets to say the {phrase} until asked for it.", "user_withholds": [left_out]}
    return Draft(template, "ask")


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

def prove(suite: Suite, drafts: list[Draft], seed: int, target: str | None) -> tuple[list[Draft], list[tuple[str, str]]]:
    """The drafts that pass every gate, with their cases; (scenario, reason) for the others."""
    from lobeval.evaluate import make_rules
    from lobeval.lint import case_problems

    rules = make_rules(suite, [])
    passed, rejected, names = [], [], set()
    for item in drafts:
        reason = "is the name of an earlier draft" if item.name in names else _static_problem(suite, item, seed, rules,
                                                                                             case_problems)
        if reason:
            rejected.append((item.name, reason))
        else:
            names.add(item.name)
            passed.append(item)
    if target and passed:
        reasons = replay_problems(target, passed)
        rejected += [(d.name, reasons[d.name]) for d in passed if d.name in reasons]
        passed = [d for d in passed if d.name not in reasons]
    return passed, rejected


def _static_problem(suite: Suite, item: Draft, seed: int, rules: Any, case_problems: Any) -> str | None:
    if "unfit" in item.template:
        return item.template["unfit"]
    try:
        item.template = Template.model_validate(item.template).model_dump()
        check_template(suite, item.template)
        records = sample_records(suite, item.template, CASES, seed)
        item.cases = [fill_case(item.template, picked, index, seed) for index, picked in enumerate(records)]
        for case in item.cases:
            check_case(suite, case)
    except LobevalError as exc:
        return str(exc)
    except ValueError as exc:   # pydantic's ValidationError
        return f"not a template: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}" if hasattr(exc, "errors") else str(exc)
    for case in item.cases:
        problems = case_problems(case, rules)
        if problems:
            return f"lint, case {case['case_id']}: {problems[0][1]}"
        unchanged = unchanged_values(suite, case)
        if unchanged:
            return f"case {case['case_id']}: {unchanged}"
    return None


def unchanged_values(suite: Suite, case: dict[str, Any]) -> str | None:
    """What an update would set to the value its record already has (such a case proves nothing)."""
    for call in case["expected_function_calls"]:
        tool = suite.tool(call["functionName"])
        entity = entity_of(suite, tool["function"])
        record = case["business_data"].get(entity.name) if entity else None
        arguments = call.get("arguments") or {}
        if record is None or not any(v == record[entity.id] for v in arguments.values()):
            continue
        for arg, value in arguments.items():
            if arg in record and arg != entity.id and literals(value) and record[arg] in literals(value) \
                    and record_named(suite, arg, _properties(tool["function"])[arg]) is None:
                return f"{call['functionName']} sets {arg} to {record[arg]!r}, the value it already has"
    return None


def replay_problems(target: str, drafts: list[Draft]) -> dict[str, str]:
    """Per scenario, why its expected calls fail on the target or leave its state unchanged; nothing when the
    target offers no apply()."""
    from lobeval.endstate import replay_cases
    from lobeval.llm import run_sync

    wanted = {(target, case["case_id"]): case for d in drafts for case in d.cases}
    replays = run_sync(replay_cases(wanted))
    reasons: dict[str, str] = {}
    for d in drafts:
        for case in d.cases:
            replay = replays[target, case["case_id"]]
            if replay is None:
                continue
            if "error" in replay:
                reasons[d.name] = f"on {target}: {replay['error']}"
            elif replay["replay_errors"]:
                failed = replay["replay_errors"][0]
                reasons[d.name] = f"case {case['case_id']}: {failed['functionName']} fails on {target}: {failed['error']}"
            elif case["expected_function_calls"] and replay["expected"] == replay["initial"]:
                reasons[d.name] = f"case {case['case_id']}: replayed on {target}, the expected calls change nothing"
            if d.name in reasons:
                break
    return reasons


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
    """Each write function, argument and enum value, with the scenarios that exercise it."""
    rows = []
    for function in write_functions(suite):
        key = function_key(function["name"])
        calls = [(d.name, call) for d in drafts for case in d.cases for call in case["expected_function_calls"]
                 if function_key(call["functionName"]) == key]
        rows.append({"function": function["name"], "argument": "", "value": "",
                     "scenarios": sorted({name for name, _ in calls})})
        for arg, schema in _properties(function).items():
            rows.append({"function": function["name"], "argument": arg, "value": "",
                         "scenarios": sorted({name for name, call in calls if arg in call.get("arguments", {})})})
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
        scenarios = ", ".join(row["scenarios"]) or "NOT COVERED"
        lines.append(f"  {row['function']:<{widths[0]}}  {row['argument']:<{widths[1]}}  {row['value']:<{widths[2]}}  "
                     f"{scenarios}")
    uncovered = sum(1 for row in rows if not row["scenarios"])
    lines.append(f"  {len(rows) - uncovered} of {len(rows)} covered")
    return lines
