"""Small builders for test inputs: a suite on disk in a temporary folder, and a good record of each kind
(case, conversation, label, results row and file, run folder) for tests to break one field of."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE_SUITE = REPO / "scenarios" / "support_tickets"

TICKETS = [
    {"id": "TKT-1", "title": "Printer jams", "priority": "High", "customer_visible": "true", "estimate_hours": "4"},
    {"id": "TKT-2", "title": "VPN drops", "priority": "Low", "customer_visible": "false", "estimate_hours": "12"},
    {"id": "TKT-3", "title": "No children here", "priority": "Medium", "customer_visible": "true", "estimate_hours": "1"},
]
ACTIONS = [
    {"id": "ACT-1", "parent_ticket_id": "TKT-1", "title": "Clear tray"},
    {"id": "ACT-2", "parent_ticket_id": "TKT-1", "title": "Order rollers"},
    {"id": "ACT-3", "parent_ticket_id": "TKT-2", "title": "Update client"},
]
TOOLS = [
    {"type": "function", "effect": "write",
     "function": {"name": "create_ticket", "parameters": {"type": "object", "properties": {
         "title": {"type": "string"}, "priority": {"type": "string", "enum": ["Low", "Medium", "High"]},
         "customer_visible": {"type": "boolean"}, "estimate_hours": {"type": "integer"}}}}},
    {"type": "function", "effect": "write",
     "function": {"name": "create_action", "parameters": {"type": "object", "properties": {
         "ticket_id": {"type": "string"}, "title": {"type": "string"}}}}},
    {"type": "function", "effect": "read",
     "function": {"name": "get_ticket", "parameters": {"type": "object", "properties": {
         "ticket_id": {"type": "string"}}}}},
]
TEMPLATE = {
    "scenario_name": "ticket_and_action",
    "user_instructions": "Create '{ticket.title}' (visible: {ticket.customer_visible}), then '{action.title}'.",
    "task_completion": "Both exist.",
    "expected_function_calls": [
        {"functionName": "create_ticket",
         "arguments": {"title": "{ticket.title}", "priority": "{ticket.priority}",
                       "customer_visible": "{ticket.customer_visible}", "estimate_hours": "{ticket.estimate_hours}"}},
        {"functionName": "create_action",
         "arguments": {"ticket_id": {"$ref": "create_ticket.result.ticket_id"}, "title": "{action.title}"}}],
    "expected_outputs": ["{ticket.priority}"],
}


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def make_suite(root: Path, *, templates: list[dict] | None = None, tickets: list[dict] | None = None,
               actions: list[dict] | None = None, tools: list[dict] | None = None,
               suite: dict | None = None) -> Path:
    """A two-entity suite (ticket → action) under root/scenarios/toy with data under root/data/toy."""
    suite_dir, data_dir = root / "scenarios" / "toy", root / "data" / "toy"
    suite_dir.mkdir(parents=True)
    data_dir.mkdir(parents=True)
    write_csv(data_dir / "tickets.csv", tickets or TICKETS)
    write_csv(data_dir / "actions.csv", actions or ACTIONS)
    spec = suite or {"name": "toy", "entities": {
        "ticket": {"csv": "data/toy/tickets.csv", "id": "id"},
        "action": {"csv": "data/toy/actions.csv", "id": "id",
                   "parent": {"entity": "ticket", "key": "parent_ticket_id"}}}}
    (suite_dir / "suite.json").write_text(json.dumps(spec))
    (suite_dir / "tools.json").write_text(json.dumps(tools or TOOLS))
    (suite_dir / "templates.json").write_text(json.dumps(templates if templates is not None else [TEMPLATE]))
    return suite_dir


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- records of each kind, good ones: tests change one field to make them bad ---------------------

CASE = {
    "schema_version": 1, "case_id": "ticket_and_action-001", "scenario_name": "ticket_and_action",
    "user_instructions": "Create 'Printer jams', then 'Clear tray'.", "task_completion": "Both exist.", "persona": "",
    "user_style": "conversational", "user_mistakes": {},
    "business_data": {"ticket": {"id": "TKT-1", "title": "Printer jams", "priority": "High"}},
    "expected_function_calls": [
        {"functionName": "create_ticket", "arguments": {"title": "Printer jams", "priority": "High"}},
        {"functionName": "create_action", "arguments": {"ticket_id": {"$ref": "create_ticket.result.ticket_id"},
                                                        "title": "Clear tray"}}],
    "expected_outputs": ["High"], "allowed_function_calls": ["get_ticket"], "forbidden_function_calls": [],
    "ordered": False, "seed": 1,
}
CALL = {"functionName": "create_ticket", "arguments": {"title": "Printer jams", "priority": "High"},
        "result": {"ticket_id": "TKT-9"}, "error": None, "turn": 1}
CONVERSATION = {
    "schema_version": 1, "case_id": "ticket_and_action-001", "trial": 0, "scenario_name": "ticket_and_action",
    "messages": [{"role": "user", "content": "Create a ticket"},
                 {"role": "assistant", "content": "Created TKT-9 with priority High.", "function_calls": [dict(CALL)]}],
    "function_calls": [CALL],
    "termination": {"reason": "user_finished", "turns": 2},
    "usage": {"user": {"calls": 2, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
              "target": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.001}},
    "error": None, "duration_s": 0.5, "target": "lobeval.samples.support_tickets:SupportTicketBot",
    "user_simulator": "scripted", "state_changes": None,
}
LABEL = {"schema_version": 1, "id": "a1", "scenario_name": "ticket_and_action", "functionName": "get_ticket",
         "kind": "allowed_extra_call", "note": "looking first is fine", "author": "ana", "created_at": "2026-01-01"}
ROW = {"case_id": "ticket_and_action-001", "trial": 0, "scenario_name": "ticket_and_action", "status": "scored",
       "termination": "user_finished", "turns": 2, "Reliability": 0.75, "Recall_fn": 0.5, "Precision_fn": 1.0,
       "Recall_args": 1.0, "Precision_args": 1.0, "Success": 0, "judges": {"status": "not run"}}
RESULTS = {"schema_version": 1, "metrics": {"Reliability": 0.75, "Success": 0.0},
           "intervals": {"Reliability": [0.75, 0.75]},
           "counts": {"conversations": 1, "scored": 1, "errors": 0, "target_errors": 0, "trials": 1},
           "judges": {"status": "not run: no judge model configured"}, "rows": [ROW], "studio_url": None}


def case(**changes: Any) -> dict[str, Any]:
    return {**CASE, **changes}


def conversation(**changes: Any) -> dict[str, Any]:
    return {**CONVERSATION, **changes}


def write_lines(path: Path, records: list[Any]) -> Path:
    """One JSON value a line, as given (records need not be objects: tests write bad ones)."""
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def make_run(root: Path, name: str, results: dict[str, Any] | None = None) -> Path:
    """A run folder runs/<name> with its config.json and evaluation_results.json."""
    run_dir = root / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"schema_version": 1, "run_id": name, "suite_name": "toy"}))
    (run_dir / "evaluation_results.json").write_text(json.dumps(results or RESULTS, indent=1))
    return run_dir
