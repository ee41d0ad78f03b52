"""Small builders for test inputs: a suite on disk in a temporary folder."""
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
