"""Stage 1: fill scenario templates from sampled business records into `dataset.jsonl`.

generate() reads as its steps: load the suite, check the templates against the tools and the
data, sample records, fill, check the filled calls against the tool schemas, write atomically.
The same suite, seed and N give byte-identical output whatever the process's hash seed.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from lobeval.core import operators
from lobeval.generation.attacks import attack_cases
from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import (
    SCHEMA_VERSION, check_output, expected_call_problems, read_as, read_cases, write_jsonl,
)
from lobeval.workspace.security import POLICY_FILE, load_policy
from lobeval.workspace.suite import Entity, Suite, load_suite

PLACEHOLDER = re.compile(r"\{([^{}\s\"]+)\}")
TEXT_FIELDS = ("user_instructions", "task_completion", "persona")


@dataclass(frozen=True)
class GenerateResult:
    path: Path
    cases_per_scenario: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.cases_per_scenario.values())


def generate(suite_dir: str | Path, out: str | Path, *, cases_per_scenario: int = 3,
             seed: int = 42, attacks: str | None = None, attack_roles: list[str] | None = None) -> GenerateResult:
    """The suite's cases (`attacks` "with": then its attack cases, `cases_per_scenario` per category and per role
    of `attack_roles` (default: the policy's role); "only": its attack cases alone), checked, written whole to
    `out`."""
    if cases_per_scenario < 1:
        raise RecordError("--cases-per-scenario", "option", None, "must be at least 1")
    suite, out = load_suite(suite_dir), Path(out)
    check_output(out, suite.files)
    read_as(out, read_cases, "a dataset")
    cases = build_cases(suite, cases_per_scenario, seed, attacks, attack_roles)
    path = write_jsonl(out, cases)
    return GenerateResult(path, dict(Counter(case["scenario_name"] for case in cases)))


def build_cases(suite: Suite, cases_per_scenario: int, seed: int, attacks: str | None = None,
                attack_roles: list[str] | None = None) -> list[dict[str, Any]]:
    """Every case of the suite, checked, in memory: what `generate` writes, and what `lobeval run`'s pre-flight
    builds to find a bad template or data file before anything is written. `attacks`: see `generate`."""
    if attacks not in (None, "with", "only"):
        raise ConfigError(f"--attacks {attacks!r}: give --attacks alone (with the suite's cases) or --attacks only")
    if attack_roles and not attacks:
        raise ConfigError("--attack-roles: give --attacks too (the roles the attack cases are played as)")
    cases = []
    for template in suite.templates if attacks != "only" else []:
        check_template(suite, template)
        for index, records in enumerate(sample_records(suite, template, cases_per_scenario, seed)):
            case = fill_case(template, records, index, seed)
            check_case(suite, case)
            cases.append(case)
    if attacks:
        policy = load_policy(suite)
        if policy is None:
            raise ConfigError(f"--attacks: the suite {suite.dir} has no {POLICY_FILE} saying who may do what "
                              f"(docs/formats.md)")
        cases += attack_cases(suite, policy, per_category=cases_per_scenario, seed=seed, roles=attack_roles)
    return cases


# --- checks before filling -------------------------------------------------------------------

def _where(template: dict[str, Any]) -> str:
    return f"scenario '{template['scenario_name']}'"


def placeholders(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(field path, placeholder text) for every `{...}` in a template value, in order."""
    if isinstance(value, str):
        return [(path, match.group(1)) for match in PLACEHOLDER.finditer(value)]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in placeholders(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in placeholders(item, f"{path}[{i}]")]
    return []


def referenced_entities(suite: Suite, template: dict[str, Any]) -> list[str]:
    """The entities the template names, with their parents, parents before children."""
    names = {text.split(".", 1)[0] for _, text in placeholders(template)}
    for name in list(names):
        while suite.entities[name].parent:
            name = suite.entities[name].parent
            names.add(name)

    def depth(name: str) -> int:
        parent = suite.entities[name].parent
        return 0 if parent is None else 1 + depth(parent)

    return sorted(names, key=lambda name: (depth(name), name))


def check_template(suite: Suite, template: dict[str, Any]) -> None:
    file, where = suite.templates_file, _where(template)
    for path, text in placeholders(template):
        entity_name, _, field_name = text.partition(".")
        if entity_name not in suite.entities or not field_name:
            raise RecordError(file, where, path.lstrip("."),
                              f"unknown placeholder {{{text}}}: use {{entity.field}} with an entity of "
                              f"{suite.suite_file.name} ({', '.join(suite.entities)})")
        entity = suite.entities[entity_name]
        if field_name not in entity.fields:
            raise RecordError(file, where, path.lstrip("."),
                              f"unknown field in {{{text}}}: {entity.csv} has no column '{field_name}' "
                              f"(columns: {', '.join(entity.fields)})")
    problems = expected_call_problems(template["expected_function_calls"], suite.tools,
                                      template["forbidden_function_calls"])
    if problems:
        raise RecordError(file, where, *problems[0])
    for key in ("allowed_function_calls", "forbidden_function_calls"):
        for name in template[key]:
            if suite.tool(name) is None:
                raise RecordError(file, where, key, f"unknown function '{name}' (not in {suite.tools_file.name})")
    expected_args = {arg for call in template["expected_function_calls"] for arg in call.get("arguments", {})}
    for arg in template["user_mistakes"]:
        if arg not in expected_args:
            raise RecordError(file, where, f"user_mistakes.{arg}", "is not an argument of any expected call")
    for index, arg in enumerate(template["user_withholds"]):
        if arg not in expected_args:
            raise RecordError(file, where, f"user_withholds[{index}]", f"'{arg}' is not an argument of any expected call")


# --- sampling and filling --------------------------------------------------------------------

def _children_index(entity: Entity, parent: Entity) -> dict[Any, list[dict[str, Any]]]:
    parent_ids = {record[parent.id] for record in parent.records}
    children: dict[Any, list[dict[str, Any]]] = {}
    for number, record in enumerate(entity.records, start=2):
        key = record[entity.parent_key]
        if key not in parent_ids:
            raise RecordError(entity.csv, f"line {number} ({entity.id} {record[entity.id]!r})", entity.parent_key,
                              f"child without a parent: no {parent.name} with {parent.id} {key!r} in {parent.csv}")
        children.setdefault(key, []).append(record)
    return children


def check_data(suite: Suite) -> None:
    """Every entity's records as sampling reads them (columns, unique ids) and every child's parent found, for
    the whole suite at once (`lobeval init` checks what it inferred so)."""
    for entity in suite.entities.values():
        if entity.parent:
            _children_index(entity, suite.entities[entity.parent])   # reads the records of both
        else:
            entity.records   # reading them checks the columns and the ids


def sample_records(suite: Suite, template: dict[str, Any], n: int, seed: int) -> list[dict[str, dict]]:
    """n picks of one record per referenced entity; a child is picked among its parent's children.

    Roots are drawn without replacement (cycling when n exceeds the data), so cases differ. The
    generator is seeded with a string, which `random` hashes with SHA-512, not with hash().
    """
    rng = random.Random(f"{seed}/{template['scenario_name']}")
    names = referenced_entities(suite, template)
    children = {name: _children_index(suite.entities[name], suite.entities[suite.entities[name].parent])
                for name in names if suite.entities[name].parent}

    def viable(name: str, record: dict[str, Any]) -> bool:
        """The record has, for each referenced child entity, a child that is viable itself (grandchildren too)."""
        key = record[suite.entities[name].id]
        return all(any(viable(child, r) for r in children[child].get(key, []))
                   for child in children if suite.entities[child].parent == name)

    draws: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        entity = suite.entities[name]
        if entity.parent:
            continue
        candidates = [r for r in entity.records if viable(name, r)]
        if not candidates:
            raise RecordError(entity.csv, "records", None,
                              f"no {name} record to sample for {_where(template)} (none has the needed children)")
        order = rng.sample(candidates, len(candidates))
        draws[name] = [order[i % len(order)] for i in range(n)]
    picks = []
    for i in range(n):
        chosen = {name: draws[name][i] for name in draws}
        for name in names:
            entity = suite.entities[name]
            if entity.parent:
                parent = suite.entities[entity.parent]
                chosen[name] = rng.choice([r for r in children[name][chosen[entity.parent][parent.id]]
                                           if viable(name, r)])
        picks.append({name: chosen[name] for name in names})
    return picks


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def fill(value: Any, records: dict[str, dict[str, Any]]) -> Any:
    """Replace placeholders: a string that is exactly one placeholder keeps the field's type."""
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if whole:
            entity, _, field = whole.group(1).partition(".")
            return records[entity][field]
        return PLACEHOLDER.sub(lambda m: _render(records[m.group(1).split(".")[0]][m.group(1).split(".")[1]]),
                               value)
    if isinstance(value, dict):
        return {key: fill(item, records) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, records) for item in value]
    return value


def fill_case(template: dict[str, Any], records: dict[str, dict[str, Any]], index: int, seed: int) -> dict:
    filled = {key: fill(template[key], records) for key in TEXT_FIELDS}
    return {
        "schema_version": SCHEMA_VERSION,
        "case_id": f"{template['scenario_name']}-{index + 1:03d}",
        "scenario_name": template["scenario_name"],
        **filled,
        "user_style": template["user_style"],
        "user_mistakes": fill(template["user_mistakes"], records),
        **({"user_withholds": list(template["user_withholds"])} if template.get("user_withholds") else {}),
        "business_data": records,
        "expected_function_calls": fill(template["expected_function_calls"], records),
        "expected_outputs": [_render(output) for output in fill(template["expected_outputs"], records)],
        "allowed_function_calls": list(template["allowed_function_calls"]),
        "forbidden_function_calls": list(template["forbidden_function_calls"]),
        "ordered": template["ordered"],
        "seed": seed,
    }


# --- checks after filling --------------------------------------------------------------------

def check_case(suite: Suite, case: dict[str, Any]) -> None:
    sources = ", ".join(f"{name} {record[suite.entities[name].id]!r}" for name, record in case["business_data"].items())
    where = f"scenario '{case['scenario_name']}', case {case['case_id']}" + (f" (from {sources})" if sources else "")
    for position, call in enumerate(case["expected_function_calls"]):
        schema = suite.tool(call["functionName"])["function"].get("parameters", {}).get("properties", {})
        for arg, value in call.get("arguments", {}).items():
            validator = Draft202012Validator(schema[arg], format_checker=Draft202012Validator.FORMAT_CHECKER)
            for literal in operators.literals(value):
                error = next(iter(validator.iter_errors(literal)), None)
                if error is not None:
                    raise RecordError(suite.templates_file, where,
                                      f"expected_function_calls[{position}].arguments.{arg}",
                                      f"value {literal!r} does not fit the schema of '{call['functionName']}' "
                                      f"in {suite.tools_file.name}: {error.message}")


def overview(dataset: str | Path) -> "pd.DataFrame":
    """One row per scenario: how many cases, and what each expects of the bot."""
    import pandas as pd

    rows = [{"scenario": case.scenario_name, "user style": case.user_style,
             "expected calls": len(case.expected_function_calls),
             "expected outputs": len(case.expected_outputs),
             "forbidden calls": len(case.forbidden_function_calls)}
            for case in read_cases(dataset)]
    table = pd.DataFrame(rows)
    return (table.groupby(["scenario", "user style"], sort=False)
            .agg(cases=("scenario", "size"), **{c: (c, "max") for c in table.columns[2:]})
            .reset_index())
