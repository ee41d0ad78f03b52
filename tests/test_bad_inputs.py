"""Bad input, one row each, over every command and every kind of file it reads.

Every row starts from a good world (a suite, its data, a dataset, conversations, labels, two run
folders), breaks one thing with a small mutator, runs the command and checks the contract: exit
status 2, one line on standard error naming the file, the record and the field, and nothing created
or changed. A new file format adds its rows here.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lobeval.cli import main
from helpers import (
    ACTIONS, CASE, CONVERSATION, LABEL, RESULTS, ROW, TEMPLATE, TICKETS, TOOLS, case, conversation, make_run,
    make_suite, write_csv, write_lines,
)


@dataclass
class World:
    root: Path
    suite: Path

    def __getattr__(self, name: str) -> Path:
        if name not in FILES:
            raise AttributeError(name)
        return self.root / FILES[name]


FILES = {"suite_json": "scenarios/toy/suite.json", "tools": "scenarios/toy/tools.json",
         "templates": "scenarios/toy/templates.json", "suite_labels": "scenarios/toy/labels.jsonl",
         "tickets": "data/toy/tickets.csv", "actions": "data/toy/actions.csv", "dataset": "dataset.jsonl",
         "conversations": "conversations.jsonl", "labels": "labels.jsonl", "results": "results.json",
         "base": "runs/base", "cand": "runs/cand", "cand_results": "runs/cand/evaluation_results.json",
         "new_out": "out/new.jsonl", "other": "other.jsonl"}


def make_world(root: Path) -> World:
    world = World(root, make_suite(root))
    write_lines(world.dataset, [CASE, case(case_id="ticket_and_action-002")])
    write_lines(world.conversations, [CONVERSATION, conversation(case_id="ticket_and_action-002")])
    write_lines(world.labels, [LABEL])
    world.results.write_text(json.dumps(RESULTS, indent=1))
    make_run(root, "base")
    make_run(root, "cand")
    (root / "notebooks").mkdir()   # a checkout: its runs/ is root's
    (root / "notebooks" / "01_generate.ipynb").write_text("{}")
    (root / "out").mkdir()
    return world


def argv(command: str, world: World, changes: dict[str, Any]) -> list[str]:
    """The command's good options, with `changes` (a value None drops the option)."""
    options = {
        "generate": {"--suite": world.suite, "--out": world.new_out},
        "simulate": {"--dataset": world.dataset, "--out": world.new_out, "--target": "toy_leave_bot:LeaveBot"},
        "evaluate": {"--dataset": world.dataset, "--conversations": world.conversations, "--labels": world.labels,
                     "--out": world.root / "out" / "r.json"},
        "gate": {"--run": world.cand, "--min": "Reliability=0.5"},
        "compare": {"BASELINE": world.base, "CANDIDATE": world.cand},
        "run": {"--suite": world.suite, "--run-id": "nightly"},
        "calibrate": {"--labels": world.labels},
        "quarantine": {"CASE_ID": "ticket_and_action-002", "--suite": world.suite, "--note": "flaky: 2 of 4 trials"},
        "chat": {"--target": "toy_leave_bot:LeaveBot"},
    }[command]
    options.update(changes)
    words = [command]
    for option, value in options.items():
        if value is not None:
            words += [str(value)] if option.isupper() else [option, str(value)]
    return words


def fingerprint(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for path in sorted(root.rglob("*"))}


# --- mutators: each breaks one thing and may change the command's options ------------------------

Mutate = Callable[[World], dict[str, Any] | None]


def text(name: str, content: str | bytes) -> Mutate:
    def mutate(world: World) -> None:
        path = getattr(world, name)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return mutate


def document(name: str, value: Any) -> Mutate:
    return text(name, json.dumps(value))


def lines(name: str, *records: Any) -> Mutate:
    """Replace a JSONL file by the given records, each a JSON value or a raw line (str)."""
    return text(name, "".join((record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records))


def folder(name: str) -> Mutate:
    def mutate(world: World) -> None:
        path = getattr(world, name)
        path.unlink()
        path.mkdir()
    return mutate


def removed(name: str) -> Mutate:
    return lambda world: getattr(world, name).unlink()


def options(**changes: Any) -> Mutate:
    """Change options; a value naming a world file ("=dataset") is that file's path."""
    def mutate(world: World) -> dict[str, Any]:
        return {f"--{key.replace('_', '-')}" if not key.isupper() else key:
                getattr(world, value[1:]) if isinstance(value, str) and value.startswith("=") else value
                for key, value in changes.items()}
    return mutate


def both(*mutators: Mutate) -> Mutate:
    def mutate(world: World) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for one in mutators:
            changes.update(one(world) or {})
        return changes
    return mutate


def without(record: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != key}


VERDICT_LABEL = {"schema_version": 1, "id": "v1", "kind": "judge_verdict", "case_id": "ticket_and_action-001",
                 "trial": 0, "judge": "per_turn", "criterion": "helpfulness", "message_index": 1, "judge_value": 4,
                 "verdict": "disagree", "human_value": 2, "judge_model": None, "run_id": None, "note": "",
                 "author": "ana", "created_at": "2026-01-01"}
QUARANTINE_LABEL = {"schema_version": 1, "id": "q1", "kind": "quarantined_case", "case_id": "ticket_and_action-001",
                    "note": "flaky", "author": "ana", "created_at": "2026-01-01"}


def suite_spec(**changes: Any) -> Mutate:
    spec = {"name": "toy", "entities": {
        "ticket": {"csv": "data/toy/tickets.csv", "id": "id"},
        "action": {"csv": "data/toy/actions.csv", "id": "id", "parent": {"entity": "ticket", "key": "parent_ticket_id"}}}}
    return document("suite_json", {**spec, **changes})


def entity(**changes: Any) -> Mutate:
    spec = {"csv": "data/toy/tickets.csv", "id": "id", **changes}
    return suite_spec(entities={"ticket": {key: value for key, value in spec.items() if value is not None}})


def template(**changes: Any) -> Mutate:
    return document("templates", [{key: value for key, value in {**TEMPLATE, **changes}.items() if value is not None}])


def expected_call(**changes: Any) -> Mutate:
    call = {**TEMPLATE["expected_function_calls"][0], **changes}
    return template(expected_function_calls=[{k: v for k, v in call.items() if v is not None}])


def tool(**function_changes: Any) -> Mutate:
    first = {**TOOLS[0], "function": {**TOOLS[0]["function"], **function_changes}}
    return document("tools", [first, *TOOLS[1:]])


def parameter(schema: Any) -> Mutate:
    return tool(parameters={"type": "object", "properties": {"title": schema, "priority": {"type": "string"},
                                                             "customer_visible": {"type": "boolean"},
                                                             "estimate_hours": {"type": "integer"}}})


def tickets(rows: list[dict[str, Any]]) -> Mutate:
    return lambda world: write_csv(world.tickets, rows)


def dataset(*records: Any) -> Mutate:
    return lines("dataset", *records)


def conversations(*records: Any) -> Mutate:
    return lines("conversations", *records)


def results(**changes: Any) -> Mutate:
    return text("cand_results", json.dumps({**RESULTS, **changes}, indent=1))


def row(**changes: Any) -> Mutate:
    return results(rows=[{**ROW, **changes}])


DEEP = "[" * 100_000 + "]" * 100_000
NESTED = {"a": json.loads("[" * 70 + "]" * 70)}


def r(id_: str, command: str, mutate: Mutate, file: str, record: str | None, field: str | None):
    return pytest.param(command, mutate, file, record, field, id=f"{command}: {id_}")


ROWS = [
    # --- generate: suite.json
    r("suite.json not JSON", "generate", text("suite_json", "{oops"), "suite_json", "line 1", None),
    r("suite.json a list", "generate", document("suite_json", []), "suite_json", "suite", None),
    r("suite.json UTF-16", "generate", text("suite_json", '{"name": "toy"}'.encode("utf-16")), "suite_json", "file", None),
    r("suite.json Latin-1", "generate", text("suite_json", '{"name": "caf\xe9"}'.encode("latin-1")), "suite_json",
      "line 1", None),
    r("suite.json nested deeply", "generate", text("suite_json", DEEP), "suite_json", "file", None),
    r("suite.json a folder", "generate", folder("suite_json"), "suite_json", "file", None),
    r("suite.json missing", "generate", removed("suite_json"), "suite_json", "file", None),
    r("name a number", "generate", suite_spec(name=5), "suite_json", "suite", "name"),
    r("entities a list", "generate", suite_spec(entities=[]), "suite_json", "suite", "entities"),
    r("an entity a string", "generate", suite_spec(entities={"ticket": "tickets.csv"}), "suite_json", "suite",
      "entities.ticket"),
    r("entity without csv", "generate", entity(csv=None), "suite_json", "entities.ticket", "csv"),
    r("entity csv a number", "generate", entity(csv=7), "suite_json", "entities.ticket", "csv"),
    r("entity without id", "generate", suite_spec(entities={"ticket": {"csv": "data/toy/tickets.csv"}}),
      "suite_json", "entities.ticket", "id"),
    r("entity with an unknown key", "generate", entity(key_column="id"), "suite_json", "entities.ticket", "key_column"),
    r("parent a string", "generate", entity(parent="ticket"), "suite_json", "entities.ticket", "parent"),
    r("parent without key", "generate", entity(parent={"entity": "ticket"}), "suite_json", "entities.ticket",
      "parent.key"),
    r("parent unknown", "generate", entity(parent={"entity": "order", "key": "id"}), "suite_json", "entities.ticket",
      "parent.entity"),
    r("ignored_functions a string", "generate", suite_spec(ignored_functions="start_over"), "suite_json", "suite",
      "ignored_functions"),
    r("ignored_functions of numbers", "generate", suite_spec(ignored_functions=[1]), "suite_json", "suite",
      "ignored_functions[0]"),
    r("optional_effects a string", "generate", suite_spec(optional_effects="read"), "suite_json", "suite",
      "optional_effects"),
    r("optional_effects unknown", "generate", suite_spec(optional_effects=["delete"]), "suite_json", "suite",
      "optional_effects[0]"),
    r("allowed_function_calls a string", "generate", suite_spec(allowed_function_calls="get_ticket"), "suite_json",
      "suite", "allowed_function_calls"),
    r("default_target a list", "generate", suite_spec(default_target=["x"]), "suite_json", "suite", "default_target"),
    # --- generate: tools.json
    r("tools.json an object", "generate", document("tools", {}), "tools", "tools", None),
    r("tools.json not JSON", "generate", text("tools", "[{]"), "tools", "line 1", None),
    r("tools.json UTF-16", "generate", text("tools", "[]".encode("utf-16")), "tools", "file", None),
    r("tool a string", "generate", document("tools", ["create_ticket"]), "tools", "tool 0", "function.name"),
    r("tool without name", "generate", document("tools", [{"type": "function", "effect": "read", "function": {}}]),
      "tools", "tool 0", "function.name"),
    r("tool name a number", "generate", tool(name=5), "tools", "tool 0", "function.name"),
    r("tool name twice", "generate", document("tools", [TOOLS[0], TOOLS[0], *TOOLS[1:]]), "tools",
      "tool 'create_ticket'", "function.name"),
    r("effect missing", "generate", document("tools", [without(TOOLS[0], "effect"), *TOOLS[1:]]), "tools",
      "tool 'create_ticket'", "effect"),
    r("effect unknown", "generate", document("tools", [{**TOOLS[0], "effect": "delete"}, *TOOLS[1:]]), "tools",
      "tool 'create_ticket'", "effect"),
    r("parameters a list", "generate", tool(parameters=[]), "tools", "tool 'create_ticket'", "function.parameters"),
    r("parameter type misspelt", "generate", parameter({"type": "strng"}), "tools", "tool 'create_ticket'",
      "function.parameters.properties.title.type"),
    r("parameter pattern broken", "generate", parameter({"type": "string", "pattern": "[A-"}), "tools",
      "tool 'create_ticket'", "function.parameters.properties.title.pattern"),
    r("parameter enum not a list", "generate", parameter({"type": "string", "enum": "Low"}), "tools",
      "tool 'create_ticket'", "function.parameters.properties.title.enum"),
    r("properties a list", "generate", tool(parameters={"type": "object", "properties": []}), "tools",
      "tool 'create_ticket'", "function.parameters.properties"),
    r("required not a list", "generate", tool(parameters={"type": "object", "required": "title"}), "tools",
      "tool 'create_ticket'", "function.parameters.required"),
    # --- generate: templates.json
    r("templates.json an object", "generate", document("templates", {}), "templates", "templates", None),
    r("templates.json not JSON", "generate", text("templates", "[\n{,}]"), "templates", "line 2", None),
    r("templates.json Latin-1", "generate", text("templates", "[\n\xe9]".encode("latin-1")), "templates", "line 2",
      None),
    r("templates.json NaN", "generate", text("templates", "[NaN]"), "templates", "file", None),
    r("template a string", "generate", document("templates", ["x"]), "templates", "template 0", None),
    r("scenario_name missing", "generate", template(scenario_name=None), "templates", "template 0", "scenario_name"),
    r("scenario_name a number", "generate", template(scenario_name=123), "templates", "template 0", "scenario_name"),
    r("scenario_name empty", "generate", template(scenario_name=""), "templates", "template 0", "scenario_name"),
    r("scenario_name twice", "generate", document("templates", [TEMPLATE, TEMPLATE]), "templates",
      "scenario 'ticket_and_action'", "scenario_name"),
    r("user_instructions missing", "generate", template(user_instructions=None), "templates",
      "scenario 'ticket_and_action'", "user_instructions"),
    r("task_completion a list", "generate", template(task_completion=["done"]), "templates",
      "scenario 'ticket_and_action'", "task_completion"),
    r("persona a number", "generate", template(persona=3), "templates", "scenario 'ticket_and_action'", "persona"),
    r("user_style unknown", "generate", template(user_style="shouty"), "templates", "scenario 'ticket_and_action'",
      "user_style"),
    r("user_mistakes a list", "generate", template(user_mistakes=["title"]), "templates",
      "scenario 'ticket_and_action'", "user_mistakes"),
    r("user_mistakes of no argument", "generate", template(user_mistakes={"colour": "red"}), "templates",
      "scenario 'ticket_and_action'", "user_mistakes.colour"),
    r("expected_outputs a string", "generate", template(expected_outputs="{ticket.priority}"), "templates",
      "scenario 'ticket_and_action'", "expected_outputs"),
    r("expected_outputs of objects", "generate", template(expected_outputs=[{"a": 1}]), "templates",
      "scenario 'ticket_and_action'", "expected_outputs[0]"),
    r("ordered 'yes'", "generate", template(ordered="yes"), "templates", "scenario 'ticket_and_action'", "ordered"),
    r("ordered 1", "generate", template(ordered=1), "templates", "scenario 'ticket_and_action'", "ordered"),
    r("forbidden_function_calls a string", "generate", template(forbidden_function_calls="get_ticket"), "templates",
      "scenario 'ticket_and_action'", "forbidden_function_calls"),
    r("allowed_function_calls a string", "generate", template(allowed_function_calls="get_ticket"), "templates",
      "scenario 'ticket_and_action'", "allowed_function_calls"),
    r("allowed function unknown", "generate", template(allowed_function_calls=["drop_tables"]), "templates",
      "scenario 'ticket_and_action'", "allowed_function_calls"),
    r("forbidden and expected", "generate", template(forbidden_function_calls=["create_ticket"]), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].functionName"),
    r("expected_function_calls missing", "generate", template(expected_function_calls=None), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls"),
    r("expected_function_calls an object", "generate", template(expected_function_calls={"functionName": "x"}),
      "templates", "scenario 'ticket_and_action'", "expected_function_calls"),
    r("expected call a string", "generate", template(expected_function_calls=["create_ticket"]), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0]"),
    r("expected call without functionName", "generate", expected_call(functionName=None), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].functionName"),
    r("expected call functionName a number", "generate", expected_call(functionName=5), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].functionName"),
    r("expected call unknown function", "generate", expected_call(functionName="create_tiket"), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].functionName"),
    r("expected call arguments a list", "generate", expected_call(arguments=["title"]), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].arguments"),
    r("expected call arguments a JSON string", "generate", expected_call(arguments='{"title": "x"}'), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].arguments"),
    r("expected call optional 'yes'", "generate", expected_call(optional="yes"), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].optional"),
    r("expected call unknown argument", "generate", expected_call(arguments={"titel": "x"}), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].arguments.titel"),
    r("$ref a number", "generate", expected_call(arguments={"title": {"$ref": 5}}), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].arguments.title"),
    r("$oneOf empty", "generate", expected_call(arguments={"title": {"$oneOf": []}}), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].arguments.title"),
    r("$match threshold 2", "generate", expected_call(arguments={"title": {"$match": "fuzzy", "value": "x",
                                                                          "threshold": 2}}),
      "templates", "scenario 'ticket_and_action'", "expected_function_calls[0].arguments.title"),
    r("placeholder of an unknown entity", "generate", template(user_instructions="{order.id}"), "templates",
      "scenario 'ticket_and_action'", "user_instructions"),
    r("placeholder of an unknown column", "generate", template(task_completion="{ticket.colour}"), "templates",
      "scenario 'ticket_and_action'", "task_completion"),
    r("literal outside the enum", "generate", expected_call(arguments={"priority": "Urgent"}), "templates",
      "scenario 'ticket_and_action'", "expected_function_calls[0].arguments.priority"),
    # --- generate: the CSV data
    r("tickets.csv UTF-16", "generate", text("tickets", "id,title\nTKT-1,x\n".encode("utf-16")), "tickets", "file",
      None),
    r("tickets.csv UTF-16 without BOM", "generate", text("tickets", "id,title\nTKT-1,x\n".encode("utf-16-le")),
      "tickets", "line 1", None),
    r("tickets.csv Latin-1", "generate", text("tickets", "id,title\nTKT-1,caf\xe9\n".encode("latin-1")), "tickets",
      "line 2", None),
    r("tickets.csv a NUL byte in an id", "generate",
      tickets([{**TICKETS[0], "id": "TKT-1\x00"}, *TICKETS[1:]]), "tickets", "line 2", None),
    r("tickets.csv a folder", "generate", folder("tickets"), "tickets", "file", None),
    r("tickets.csv missing", "generate", removed("tickets"), "tickets", "file", None),
    r("tickets.csv empty", "generate", text("tickets", ""), "tickets", "header", "id"),
    r("tickets.csv without the id column", "generate", tickets([without(t, "id") for t in TICKETS]), "tickets",
      "header", "id"),
    r("tickets.csv a column twice", "generate", text("tickets", "id,Title,title\nTKT-1,a,b\n"), "tickets", "header",
      "title"),
    r("tickets.csv a short row", "generate", text("tickets", "id,title\nTKT-1,a\nTKT-2\n"), "tickets", "line 3",
      None),
    r("tickets.csv an id twice", "generate", tickets([*TICKETS, TICKETS[0]]), "tickets", "line 5", "id"),
    r("actions.csv a child without parent", "generate",
      lambda world: write_csv(world.actions, [*ACTIONS, {"id": "ACT-9", "parent_ticket_id": "TKT-404", "title": "x"}]),
      "actions", "ACT-9", "parent_ticket_id"),
    r("a data value of the wrong type", "generate",
      tickets([{**t, "estimate_hours": "soon" if t["id"] == "TKT-2" else t["estimate_hours"]} for t in TICKETS]),
      "templates", "scenario 'ticket_and_action', case ticket_and_action-00", "expected_function_calls[0].arguments.estimate_hours"),
    # --- generate: options
    r("--out a folder", "generate", options(out="=root"), "root", "--out", None),
    r("--out the templates", "generate", options(out="=templates"), "templates", "--out", None),
    r("--out the suite.json", "generate", options(out="=suite_json"), "suite_json", "--out", None),
    r("--out a data file", "generate", options(out="=tickets"), "tickets", "--out", None),
    r("--out the suite's labels", "generate", both(lines("suite_labels", LABEL), options(out="=suite_labels")),
      "suite_labels", "--out", None),
    r("--out a conversations file", "generate", options(out="=conversations"), "conversations", "--out",
      "user_instructions"),
    r("--out a results file", "generate", options(out="=results"), "results", "--out", None),
    r("--cases-per-scenario 0", "generate", options(cases_per_scenario=0), "--cases-per-scenario", None, None),
    r("--suite a file", "generate", options(suite="=dataset"), "dataset", "suite", None),
    # --- simulate: the dataset
    r("dataset not JSON", "simulate", dataset(CASE, "{oops"), "dataset", "line 2", None),
    r("dataset a line not an object", "simulate", dataset(CASE, [CASE]), "dataset", "line 2", None),
    r("dataset UTF-16", "simulate", text("dataset", json.dumps(CASE).encode("utf-16")), "dataset", "file", None),
    r("dataset Latin-1", "simulate", text("dataset", (json.dumps(CASE) + '\n{"case_id": "caf\xe9"}\n').encode("latin-1")),
      "dataset", "line 2", None),
    r("dataset nested deeply", "simulate", dataset(CASE, DEEP), "dataset", "line 2", None),
    r("dataset nested too deeply for scoring", "simulate", dataset(case(user_mistakes=NESTED)), "dataset", "line 1",
      None),
    r("dataset Infinity", "simulate", dataset(CASE, '{"case_id": "x", "seed": Infinity}'), "dataset", "line 2", None),
    r("dataset a folder", "simulate", folder("dataset"), "dataset", "file", None),
    r("dataset missing", "simulate", removed("dataset"), "dataset", "file", None),
    r("case_id missing", "simulate", dataset(without(CASE, "case_id")), "dataset", "line 1", "case_id"),
    r("case_id a number", "simulate", dataset(case(case_id=7)), "dataset", "line 1", "case_id"),
    r("case_id twice", "simulate", dataset(CASE, CASE), "dataset", "line 2", "case_id"),
    r("scenario_name a number", "simulate", dataset(case(scenario_name=123)), "dataset", "line 1", "scenario_name"),
    r("user_style unknown", "simulate", dataset(case(user_style="shouty")), "dataset", "line 1", "user_style"),
    r("business_data a list", "simulate", dataset(case(business_data=[])), "dataset", "line 1", "business_data"),
    r("business record a string", "simulate", dataset(case(business_data={"ticket": "TKT-1"})), "dataset", "line 1",
      "business_data.ticket"),
    r("expected_function_calls a string", "simulate", dataset(case(expected_function_calls="create_ticket")),
      "dataset", "line 1", "expected_function_calls"),
    r("expected call functionName a number", "simulate",
      dataset(case(expected_function_calls=[{"functionName": 5}])), "dataset", "line 1",
      "expected_function_calls[0].functionName"),
    r("expected call $oneOf a number", "simulate",
      dataset(case(expected_function_calls=[{"functionName": "f", "arguments": {"a": {"$oneOf": 3}}}])), "dataset",
      "line 1", "expected_function_calls[0].arguments.a"),
    r("expected_outputs a string", "simulate", dataset(case(expected_outputs="High")), "dataset", "line 1",
      "expected_outputs"),
    r("ordered 'yes'", "simulate", dataset(case(ordered="yes")), "dataset", "line 1", "ordered"),
    r("seed a string", "simulate", dataset(case(seed="1")), "dataset", "line 1", "seed"),
    r("--dataset is --out", "simulate", options(out="=dataset"), "dataset", "--out", None),
    # --- simulate: --out
    r("--out a folder", "simulate", options(out="=root"), "root", "--out", None),
    r("--out a dataset", "simulate", both(dataset(CASE), options(out="=conversations"), lines("conversations", CASE)),
      "conversations", "--out", "messages"),
    r("--out a results file", "simulate", options(out="=results"), "results", "--out", None),
    r("--out a notebook", "simulate", both(text("conversations", json.dumps({"cells": [], "nbformat": 4}, indent=1)),
                                           options(out="=conversations")), "conversations", "--out", None),
    r("--out a line without case_id", "simulate",
      both(conversations(CONVERSATION, without(CONVERSATION, "case_id")), options(out="=conversations")),
      "conversations", "line 2", "case_id"),
    r("--out one JSON line of another kind, unended", "simulate",
      both(text("conversations", '{"rows": []}'), options(out="=conversations")), "conversations", "line 1",
      "case_id"),
    r("--out plain text", "simulate", both(text("conversations", "hello\n"), options(out="=conversations")),
      "conversations", "line 1", None),
    r("--out UTF-16", "simulate", both(text("conversations", json.dumps(CONVERSATION).encode("utf-16")),
                                       options(out="=conversations")), "conversations", "file", None),
    r("--out a line with a bad termination", "simulate",
      both(conversations(conversation(termination="done")), options(out="=conversations")), "conversations",
      "line 1", "termination"),
    r("--trials 0", "simulate", options(trials=0), "--trials", None, None),
    r("--shard 4/3", "simulate", options(shard="4/3"), "--shard", None, None),
    # --- evaluate: conversations
    r("conversation not JSON", "evaluate", conversations(CONVERSATION, '{"case_id": '), "conversations", "line 2",
      None),
    r("conversation Latin-1", "evaluate", text("conversations", b'{"case_id": "caf\xe9"}\n'), "conversations",
      "line 1", None),
    r("conversation UTF-16", "evaluate", text("conversations", json.dumps(CONVERSATION).encode("utf-16")),
      "conversations", "file", None),
    r("conversation nested deeply", "evaluate", conversations(DEEP), "conversations", "line 1", None),
    r("conversation nested too deeply for scoring", "evaluate",
      conversations(conversation(function_calls=[{**CONVERSATION["function_calls"][0], "arguments": NESTED}])),
      "conversations", "line 1", None),
    r("conversation a lone surrogate", "evaluate",
      conversations(CONVERSATION, json.dumps(conversation(case_id="ticket_and_action-002", error="\ud800"))),
      "conversations", "line 2", None),
    r("conversations a folder", "evaluate", folder("conversations"), "conversations", "file", None),
    r("conversations missing", "evaluate", removed("conversations"), "conversations", "file", None),
    r("messages missing", "evaluate", conversations(without(CONVERSATION, "messages")), "conversations", "line 1",
      "messages"),
    r("messages an object", "evaluate", conversations(conversation(messages={})), "conversations", "line 1",
      "messages"),
    r("message role missing", "evaluate", conversations(conversation(messages=[{"content": "hi"}])), "conversations",
      "line 1", "messages[0].role"),
    r("message content a number", "evaluate", conversations(conversation(messages=[{"role": "user", "content": 5}])),
      "conversations", "line 1", "messages[0].content"),
    r("function_calls missing", "evaluate", conversations(without(CONVERSATION, "function_calls")), "conversations",
      "line 1", "function_calls"),
    r("function call without functionName", "evaluate",
      conversations(conversation(function_calls=[{"arguments": {}}])), "conversations", "line 1",
      "function_calls[0].functionName"),
    r("function call arguments broken JSON", "evaluate",
      conversations(conversation(function_calls=[{"functionName": "f", "arguments": "{oops"}])), "conversations",
      "line 1", "function_calls[0].arguments"),
    r("function call arguments a JSON list", "evaluate",
      conversations(conversation(function_calls=[{"functionName": "f", "arguments": "[1]"}])), "conversations",
      "line 1", "function_calls[0].arguments"),
    r("function call error an object", "evaluate",
      conversations(conversation(function_calls=[{"functionName": "f", "error": {"code": 1}}])), "conversations",
      "line 1", "function_calls[0].error"),
    r("function call turn a string", "evaluate",
      conversations(conversation(function_calls=[{"functionName": "f", "turn": "1"}])), "conversations", "line 1",
      "function_calls[0].turn"),
    r("trial negative", "evaluate", conversations(conversation(trial=-1)), "conversations", "line 1", "trial"),
    r("trial a string", "evaluate", conversations(conversation(trial="0")), "conversations", "line 1", "trial"),
    r("trial true", "evaluate", conversations(conversation(trial=True)), "conversations", "line 1", "trial"),
    r("a (case, trial) twice", "evaluate", conversations(CONVERSATION, CONVERSATION), "conversations", "line 2",
      "trial"),
    r("termination a string", "evaluate", conversations(conversation(termination="user_finished")), "conversations",
      "line 1", "termination"),
    r("termination reason unknown", "evaluate", conversations(conversation(termination={"reason": "tired"})),
      "conversations", "line 1", "termination.reason"),
    r("termination without reason", "evaluate", conversations(conversation(termination={"turns": 2})),
      "conversations", "line 1", "termination.reason"),
    r("termination turns a string", "evaluate",
      conversations(conversation(termination={"reason": "user_finished", "turns": "2"})), "conversations", "line 1",
      "termination.turns"),
    r("usage a list", "evaluate", conversations(conversation(usage=[])), "conversations", "line 1", "usage"),
    r("usage of a role a number", "evaluate", conversations(conversation(usage={"user": 3})), "conversations",
      "line 1", "usage.user"),
    r("usage cost a string", "evaluate", conversations(conversation(usage={"user": {"cost_usd": "0.1"}})),
      "conversations", "line 1", "usage.user.cost_usd"),
    r("usage calls negative", "evaluate", conversations(conversation(usage={"user": {"calls": -1}})),
      "conversations", "line 1", "usage.user.calls"),
    r("state_changes a list", "evaluate", conversations(conversation(state_changes=[])), "conversations", "line 1",
      "state_changes"),
    r("error a number", "evaluate", conversations(conversation(error=5)), "conversations", "line 1", "error"),
    r("duration_s a string", "evaluate", conversations(conversation(duration_s="1s")), "conversations", "line 1",
      "duration_s"),
    r("target a number", "evaluate", conversations(conversation(target=1)), "conversations", "line 1", "target"),
    r("scenario_name a list", "evaluate", conversations(conversation(scenario_name=["a"])), "conversations", "line 1",
      "scenario_name"),
    r("inline expected calls a string", "evaluate",
      conversations(conversation(expected_function_calls="create_ticket")), "conversations", "line 1",
      "expected_function_calls"),
    r("inline expected call functionName a number", "evaluate",
      conversations(conversation(expected_function_calls=[{"functionName": 5}])), "conversations", "line 1",
      "expected_function_calls[0].functionName"),
    r("inline expected call arguments a list", "evaluate",
      conversations(conversation(expected_function_calls=[{"functionName": "f", "arguments": []}])), "conversations",
      "line 1", "expected_function_calls[0].arguments"),
    r("inline expected call optional 'yes'", "evaluate",
      conversations(conversation(expected_function_calls=[{"functionName": "f", "optional": "yes"}])),
      "conversations", "line 1", "expected_function_calls[0].optional"),
    r("inline expected call $ref a number", "evaluate",
      conversations(conversation(expected_function_calls=[{"functionName": "f", "arguments": {"a": {"$ref": 5}}}])),
      "conversations", "line 1", "expected_function_calls[0].arguments.a"),
    r("inline expected_outputs a string", "evaluate",
      conversations(conversation(expected_function_calls=[], expected_outputs="TKT-9")), "conversations", "line 1",
      "expected_outputs"),
    r("inline ordered 'yes'", "evaluate", conversations(conversation(expected_function_calls=[], ordered="yes")),
      "conversations", "line 1", "ordered"),
    r("a case not in the dataset", "evaluate", conversations(conversation(case_id="nope-001")), "conversations",
      "line 1", "case_id"),
    # --- evaluate: the dataset, the labels, the options
    r("dataset ordered 'yes'", "evaluate", dataset(case(ordered="yes")), "dataset", "line 1", "ordered"),
    r("dataset forbidden a string", "evaluate", dataset(case(forbidden_function_calls="f")), "dataset", "line 1",
      "forbidden_function_calls"),
    r("dataset a NUL byte", "evaluate", text("dataset", json.dumps(CASE) + "\n\x00\n"), "dataset", "line 2", None),
    r("--labels missing", "evaluate", removed("labels"), "labels", "file", None),
    r("--labels a folder", "evaluate", folder("labels"), "labels", "file", None),
    r("label kind unknown", "evaluate", lines("labels", {**LABEL, "kind": "fine"}), "labels", "line 1", "kind"),
    r("label without functionName", "evaluate", lines("labels", without(LABEL, "functionName")), "labels", "line 1",
      "functionName"),
    r("label argument missing", "evaluate", lines("labels", {**LABEL, "kind": "allowed_extra_argument"}), "labels",
      "line 1", "argument"),
    r("label scenario_name a number", "evaluate", lines("labels", {**LABEL, "scenario_name": 3}), "labels", "line 1",
      "scenario_name"),
    r("labels not JSON", "evaluate", lines("labels", "{"), "labels", "line 1", None),
    r("verdict label judge unknown", "evaluate", lines("labels", LABEL, {**VERDICT_LABEL, "judge": "tone"}), "labels",
      "line 2", "judge"),
    r("verdict label without message_index", "evaluate", lines("labels", without(VERDICT_LABEL, "message_index")),
      "labels", "line 1", "message_index"),
    r("verdict label human_value off the scale", "evaluate", lines("labels", {**VERDICT_LABEL, "human_value": 7}),
      "labels", "line 1", "human_value"),
    r("verdict label agree with another value", "evaluate", lines("labels", {**VERDICT_LABEL, "verdict": "agree"}),
      "labels", "line 1", "human_value"),
    r("verdict label trial a string", "evaluate", lines("labels", {**VERDICT_LABEL, "trial": "0"}), "labels",
      "line 1", "trial"),
    r("quarantine label without a note", "evaluate", lines("labels", without(QUARANTINE_LABEL, "note")), "labels",
      "line 1", "note"),
    r("quarantine label without case_id", "evaluate", lines("labels", without(QUARANTINE_LABEL, "case_id")), "labels",
      "line 1", "case_id"),
    r("--out a folder", "evaluate", options(out="=root"), "root", "--out", None),
    r("--out the conversations", "evaluate", options(out="=conversations"), "conversations", "--out", None),
    r("--out the dataset", "evaluate", options(out="=dataset"), "dataset", "--out", None),
    r("--out the labels", "evaluate", options(out="=labels"), "labels", "--out", None),
    r("--out another conversations file", "evaluate", both(lines("other", CONVERSATION), options(out="=other")),
      "other", "--out", "rows"),
    r("--out a dataset", "evaluate", both(lines("other", CASE, CASE), options(out="=other")), "other", "--out", None),
    r("--suite a missing folder", "evaluate", options(suite="=new_out"), "new_out", "suite", None),
    # --- gate and compare: results files and run folders
    r("results not JSON", "gate", text("cand_results", "{\n oops"), "cand_results", "line 2", None),
    r("results a list", "gate", text("cand_results", "[]"), "cand_results", "file", None),
    r("results UTF-16", "gate", text("cand_results", json.dumps(RESULTS).encode("utf-16")), "cand_results", "file",
      None),
    r("results NaN", "gate", text("cand_results", json.dumps(RESULTS).replace("0.75", "NaN")), "cand_results",
      "file", None),
    r("results missing", "gate", removed("cand_results"), "cand_results", "file", None),
    r("results a folder", "gate", folder("cand_results"), "cand_results", "file", None),
    r("rows missing", "gate", text("cand_results", json.dumps(without(RESULTS, "rows"))), "cand_results", "file",
      "rows"),
    r("metrics a list", "gate", results(metrics=[]), "cand_results", "file", "metrics"),
    r("a metric a string", "gate", results(metrics={"Reliability": "0.75"}), "cand_results", "file",
      "metrics.Reliability"),
    r("counts without conversations", "gate", results(counts={"errors": 0}), "cand_results", "file",
      "counts.conversations"),
    r("judges coverage a number", "gate", results(judges={"coverage": 1}), "cand_results", "file", "judges.coverage"),
    r("judges errored_conversations a string", "gate", results(judges={"errored_conversations": "2"}),
      "cand_results", "file", "judges.errored_conversations"),
    r("row status unknown", "gate", row(status="done"), "cand_results", "row 0", "status"),
    r("row trial negative", "gate", row(trial=-1), "cand_results", "row 0", "trial"),
    r("row Reliability a string", "gate", row(Reliability="high"), "cand_results", "row 0", "Reliability"),
    r("row judges final_score a string", "gate", row(judges={"final_score": "good"}), "cand_results", "row 0",
      "judges.final_score"),
    r("rows an object", "gate", results(rows={}), "cand_results", "file", "rows"),
    r("--run a missing folder", "gate", options(run="=new_out"), "new_out", None, None),
    r("baseline results broken", "compare", text("cand_results", "{"), "cand_results", "line 1", None),
    r("candidate folder missing", "compare", options(CANDIDATE="=new_out"), "new_out", None, None),
    r("candidate row case_id a number", "compare", row(case_id=1), "cand_results", "row 0", "case_id"),
    # --- calibrate: the labels and the run it reads
    r("calibrate: verdict label with a judge value off its scale", "calibrate",
      lines("labels", {**VERDICT_LABEL, "judge_value": 7}), "labels", "line 1", "judge_value"),
    r("calibrate: verdict label of an unknown judge", "calibrate", lines("labels", {**VERDICT_LABEL, "judge": "vibes"}),
      "labels", "line 1", "judge"),
    r("calibrate: labels not JSON", "calibrate", text("labels", "{oops\n"), "labels", "line 1", None),
    r("calibrate: labels missing", "calibrate", removed("labels"), "labels", None, None),
    r("calibrate: --run without results", "calibrate", both(removed("cand_results"), options(labels=None, run="=cand")),
      "cand_results", "file", None),
    r("calibrate: --run with results broken", "calibrate", both(text("cand_results", "{"), options(run="=cand")),
      "cand_results", "line 1", None),
    # --- quarantine: the suite's labels and the note
    r("quarantine: the suite's labels damaged", "quarantine", lines("suite_labels", {**QUARANTINE_LABEL, "case_id": 3}),
      "suite_labels", "line 1", "case_id"),
    r("quarantine: an empty note", "quarantine", options(note=""), "suite_labels", "new label", "note"),
    r("quarantine: a case already quarantined", "quarantine", lines("suite_labels",
      {**QUARANTINE_LABEL, "case_id": "ticket_and_action-002"}), "ticket_and_action-002", None, None),
    r("quarantine: --suite a missing folder", "quarantine", options(suite="=new_out"), "new_out", None, None),
    # --- run: the run id
    r("--run-id with a slash", "run", options(run_id="a/b"), "--run-id", "'a/b'", None),
    r("--run-id ..", "run", options(run_id=".."), "--run-id", "'..'", None),
    r("--run-id hidden", "run", options(run_id=".hidden"), "--run-id", "'.hidden'", None),
    r("--run-id with a space", "run", options(run_id="my run"), "--run-id", "'my run'", None),
    r("--run-id too long", "run", options(run_id="x" * 200), "--run-id", "'xxx", None),
    # --- issue 27.9: options out of their range, and inputs that were taken silently
    r("--limit -1", "simulate", options(limit="-1"), "--limit", None, None),
    r("--stop-phrase empty", "simulate", options(stop_phrase=""), "--stop-phrase", None, None),
    r("--max-turns 0", "simulate", options(max_turns="0"), "--max-turns", None, None),
    r("--attack-roles naming none", "generate", options(attacks="with", attack_roles=","), "--attack-roles", None, None),
    r("--target-timeout inf", "simulate", options(target_timeout="inf"), "--target-timeout", None, None),
    r("--min above the metric's scale", "gate", options(min="Reliability=1.5"), "--min", "'Reliability=1.5'", None),
    r("--min infinite", "gate", options(min="Success=inf"), "--min", "'Success=inf'", None),
    r("--min of a 1-5 judge figure below 1", "gate", options(min="judge.helpfulness=0.5"), "--min", None, None),
    r("--max-error-rate above 1", "gate", options(max_error_rate="1.5"), "--max-error-rate", None, None),
    r("--min-judge-coverage negative", "gate", options(min_judge_coverage="-0.1"), "--min-judge-coverage", None, None),
    r("--target-difference 0", "compare", options(target_difference="0"), "--target-difference", None, None),
    r("run: --min above the scale, before any folder", "run", options(min="Reliability=1.5"), "--min", None, None),
    r("run: --max-user-fault-rate above 1", "run", options(max_user_fault_rate="2"), "--max-user-fault-rate", None,
      None),
    r("run: --trials 0", "run", options(trials="0"), "--trials", None, None),
    r("a message of role robot", "evaluate",
      lines("conversations", {**CONVERSATION, "messages": [{"role": "robot", "content": "beep"}]}), "conversations",
      "line 1", "messages[0].role"),
    r("a label naming a function not in tools.json", "evaluate",
      both(lines("labels", {**LABEL, "functionName": "delete_everything"}), options(suite="=suite")), "labels",
      "line 1", "functionName"),
    r("run: a Latin-1 CSV, found before config.json", "run",
      text("tickets", "id,title\nTKT-1,caf\xe9\n".encode("latin-1")), "tickets", "line 2", None),
    r("a stray quote swallowing rows of tickets.csv", "generate",
      text("tickets", "id,title,priority,customer_visible,estimate_hours\nTKT-1,\"Printer jams,High,true,4\n"
                      "TKT-2,VPN drops,Low,false,12\nTKT-3,\"No, children\",Medium,true,1\n"), "tickets", "line 2",
      "title"),
    r("generate --out under a file", "generate", lambda world: {"--out": world.dataset / "new.jsonl"}, "--out",
      "is a file, not a folder", None),
    r("a target module that exits on import: simulate", "simulate", options(target="exits_on_import:Bot"),
      "exits_on_import", None, None),
    r("a target module that exits on import: chat", "chat", options(target="exits_on_import:Bot"),
      "exits_on_import", None, None),
]


@pytest.mark.parametrize("command, mutate, file, record, field", ROWS)
def test_bad_input_exits_2_naming_file_record_and_field_and_changes_nothing(
        tmp_path, monkeypatch, capsys, command, mutate, file, record, field):
    world = make_world(tmp_path)
    changes = mutate(world) or {}
    monkeypatch.chdir(tmp_path)
    before = fingerprint(tmp_path)
    try:
        status = main(argv(command, world, changes))
    except SystemExit as exc:   # an option argparse refuses exits from the parser, as `lobeval --help` does
        status = exc.code
    out, err = capsys.readouterr()
    named = str(getattr(world, file, file))   # a world file's path, or an option's name
    assert status == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert named in err, err
    assert record is None or record in err, err
    assert field is None or f"field '{field}'" in err, err
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("command", ["generate", "evaluate", "gate", "compare", "calibrate", "quarantine"])
def test_the_good_world_passes(tmp_path, monkeypatch, capsys, command):
    world = make_world(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(argv(command, world, {})) == 0, capsys.readouterr().err


def test_the_table_covers_every_command_and_enough_inputs():
    commands = {param.values[0] for param in ROWS}
    assert commands == {"generate", "simulate", "evaluate", "gate", "compare", "run", "calibrate", "quarantine",
                        "chat"}
    assert len(ROWS) >= 100
