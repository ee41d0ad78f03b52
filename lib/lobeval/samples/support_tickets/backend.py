"""The support desk's business state and rules: one in-memory copy per conversation.

Every function of tools.json is a method taking keyword arguments; `call` runs one by name and
returns the call record of docs/formats.md. Refusals are ToolError, with a message a user can act on.
"""
from __future__ import annotations

import copy
import csv
import functools
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dateutil import parser as dateparser

PRIORITIES = ("Low", "Medium", "High", "Critical")
WORKFLOWS = {"Standard": "The normal queue, worked in order of priority.",
             "Expedited": "Skips the queue, for work that cannot wait; needs a business reason."}
STATUSES = ("Open", "In Progress", "Blocked", "Completed", "Cancelled")
ENUMS = {"priority": PRIORITIES, "workflow_type": tuple(WORKFLOWS), "status": STATUSES}
SEARCH_LIMIT = 10
_TICKET_FIELDS = ("title", "description", "department_code", "priority", "workflow_type",
                  "expected_outcome", "customer_visible")


class ToolError(Exception):
    """A refused call; `field` names the argument at fault, when there is one."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


@functools.cache
def load_tools(path: Path) -> tuple[dict[str, Any], ...]:
    """The tool definitions of tools.json, read once per process."""
    return tuple(json.loads(path.read_text(encoding="utf-8")))


@functools.cache
def _load_tables(data_dir: Path) -> dict[str, Any]:
    """The CSVs of data_dir, read once per process; callers deep-copy before changing anything."""
    def rows(name: str) -> list[dict[str, str]]:
        with open(data_dir / f"{name}.csv", newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    return {"departments": {row["code"]: row for row in rows("departments")},
            "employees": {row["email"].lower(): row for row in rows("employees")},
            "tickets": {row["id"]: _typed(row) for row in rows("tickets")},
            "action_items": {row["id"]: dict(row) for row in rows("action_items")}}


def _copy_tables(tables: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Tables of records, copied down to the records: their values are scalars, so this is a deep copy
    (copy.deepcopy of the same took a tenth of the CPU of a simulation run)."""
    return {name: {key: dict(record) for key, record in table.items()} for name, table in tables.items()}


def _typed(ticket: dict[str, Any]) -> dict[str, Any]:
    """A ticket row with customer_visible as a boolean (CSV gives text)."""
    visible = ticket.get("customer_visible")
    if isinstance(visible, str):
        visible = visible.strip().lower() in ("true", "yes", "1")
    return {**ticket, "customer_visible": visible}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SupportBackend:
    """Tickets, action items and reference data for one conversation."""

    def __init__(self, data_dir: Path, tools_path: Path, business_data: dict[str, Any] | None = None):
        tables = _copy_tables(_load_tables(Path(data_dir)))
        self.departments: dict[str, dict[str, str]] = tables["departments"]
        self.employees: dict[str, dict[str, str]] = tables["employees"]
        self.tickets: dict[str, dict[str, Any]] = tables["tickets"]
        self.action_items: dict[str, dict[str, Any]] = tables["action_items"]
        tools = load_tools(Path(tools_path))
        self.schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
        self.effects = {tool["function"]["name"]: tool.get("effect") for tool in tools}
        self._upsert(business_data or {})

    def _upsert(self, business_data: dict[str, Any]) -> None:
        """Make the case's own records part of the state (they may be absent from the CSVs)."""
        if ticket := business_data.get("ticket"):
            self.tickets[ticket["id"]] = {**self.tickets.get(ticket["id"], {}), **_typed(ticket)}
        if action := business_data.get("action"):
            self.action_items[action["id"]] = {**self.action_items.get(action["id"], {}), **action}

    def state(self) -> dict[str, Any]:
        """The business state, for end-state checks (a copy: the conversation may go on)."""
        return _copy_tables({"tickets": self.tickets, "action_items": self.action_items})

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run one function by name; the record carries the result or the error, never raises."""
        record: dict[str, Any] = {"functionName": name, "arguments": copy.deepcopy(arguments),
                                  "result": None, "error": None}
        try:
            self._check_arguments(name, arguments)
            record["result"] = getattr(self, name)(**arguments)
        except ToolError as exc:
            record["error"] = str(exc)
        except Exception as exc:  # a bug in the bot is recorded on the call, as a real backend would answer 500
            record["error"] = f"internal error: {type(exc).__name__}: {exc}"
        return record

    def _check_arguments(self, name: str, arguments: Any) -> None:
        """Known function, arguments an object, required present, nothing unknown (from tools.json)."""
        if name not in self.schemas:
            raise ToolError(f"unknown function {name!r}; available: {', '.join(self.schemas)}")
        if not isinstance(arguments, dict):
            raise ToolError("arguments must be a JSON object")
        schema = self.schemas[name]
        unknown = [key for key in arguments if key not in schema["properties"]]
        if unknown:
            raise ToolError(f"unknown parameter {unknown[0]!r} for {name}; "
                            f"parameters are: {', '.join(schema['properties']) or 'none'}", unknown[0])
        missing = [key for key in schema.get("required", []) if arguments.get(key) in (None, "")]
        if missing:
            raise ToolError(f"missing required parameter {missing[0]!r} for {name}", missing[0])

    # --- validation, shared with the rules policy -------------------------------------------

    def check(self, field: str, value: Any) -> Any:
        """The canonical form of one argument value, or ToolError saying why it is not valid."""
        if field in ENUMS:
            return _enum(field, value)
        checks = {"department_code": self._department, "customer_visible": _boolean, "due_date": _date,
                  "assignee": self._assignee, "ticket_id": self._ticket_id,
                  "parent_ticket_id": lambda v: self._ticket_id(v, "parent_ticket_id"),
                  "action_item_id": self._action_id}
        if field in checks:
            return checks[field](value)
        if not isinstance(value, str) or not value.strip():
            raise ToolError(f"{field} must be a non-empty text", field)
        return value.strip()

    def _department(self, code: Any) -> str:
        match = next((known for known in self.departments if str(code).strip().upper() == known), None)
        if match is None:
            raise ToolError(f"{code!r} is not a valid department code; valid codes are "
                            f"{', '.join(self.departments)}", "department_code")
        return match

    def _assignee(self, email: Any) -> str:
        employee = self.employees.get(str(email).strip().lower())
        if employee is None:
            raise ToolError(f"{email!r} is not the email of an employee; the assignee must be one of: "
                            f"{', '.join(e['email'] for e in self.employees.values())}", "assignee")
        return employee["email"]

    def _ticket_id(self, ticket_id: Any, field: str = "ticket_id") -> str:
        key = str(ticket_id).strip().upper()
        if key not in self.tickets:
            raise ToolError(f"there is no ticket {ticket_id!r}; ticket ids look like TKT-1042", field)
        return key

    def _action_id(self, action_id: Any) -> str:
        key = str(action_id).strip().upper()
        if key not in self.action_items:
            raise ToolError(f"there is no action item {action_id!r}; action item ids look like ACT-5017",
                            "action_item_id")
        return key

    def _checked(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Every given (non-None) field in canonical form."""
        return {name: self.check(name, value) for name, value in fields.items() if value is not None}

    # --- tickets ----------------------------------------------------------------------------

    def create_support_ticket(self, **fields: Any) -> dict[str, Any]:
        ticket_id = _next_id("TKT", self.tickets)
        ticket = {"id": ticket_id, **self._checked(fields), "status": "Open", "created_at": _now()}
        ticket["updated_at"] = ticket["created_at"]
        self.tickets[ticket_id] = ticket
        return {"ticket_id": ticket_id, **ticket}

    def get_support_ticket(self, ticket_id: str) -> dict[str, Any]:
        return dict(self.tickets[self._ticket_id(ticket_id)])

    def update_support_ticket(self, ticket_id: str, **changes: Any) -> dict[str, Any]:
        ticket = self.tickets[self._ticket_id(ticket_id)]
        return _apply(ticket, self._checked(changes), "ticket")

    def search_support_tickets(self, query: str = "", department_code: str | None = None,
                               priority: str | None = None, status: str | None = None) -> dict[str, Any]:
        filters = self._checked({"department_code": department_code, "priority": priority, "status": status})
        words = str(query).lower().split()
        found = [ticket for ticket in self.tickets.values()
                 if all(ticket.get(key) == value for key, value in filters.items())
                 and all(word in f"{ticket.get('title', '')} {ticket.get('description', '')}".lower()
                         for word in words)]
        return {"tickets": [{key: ticket.get(key) for key in ("id", "title", "status", "priority")}
                            for ticket in found[:SEARCH_LIMIT]]}

    # --- action items -------------------------------------------------------------------------

    def create_action_item(self, parent_ticket_id: str, title: str, assignee: str, due_date: str,
                           description: str | None = None) -> dict[str, Any]:
        fields = self._checked({"parent_ticket_id": parent_ticket_id, "title": title, "assignee": assignee,
                                "due_date": due_date, "description": description})
        action_id = _next_id("ACT", self.action_items)
        action = {"id": action_id, "description": "", **fields, "status": "Open", "created_at": _now()}
        action["updated_at"] = action["created_at"]
        self.action_items[action_id] = action
        return {"action_item_id": action_id, **action}

    def get_action_item(self, action_item_id: str) -> dict[str, Any]:
        return dict(self.action_items[self._action_id(action_item_id)])

    def update_action_item(self, action_item_id: str, **changes: Any) -> dict[str, Any]:
        action = self.action_items[self._action_id(action_item_id)]
        return _apply(action, self._checked(changes), "action item")

    def list_action_items(self, ticket_id: str) -> dict[str, Any]:
        key = self._ticket_id(ticket_id)
        return {"action_items": [dict(a) for a in self.action_items.values() if a.get("parent_ticket_id") == key]}

    # --- reference data and utilities ---------------------------------------------------------

    def get_departments(self) -> dict[str, Any]:
        return {"departments": [dict(d) for d in self.departments.values()]}

    def get_priority_levels(self) -> dict[str, Any]:
        return {"priority_levels": list(PRIORITIES)}

    def get_workflow_types(self) -> dict[str, Any]:
        return {"workflow_types": [{"name": name, "description": text} for name, text in WORKFLOWS.items()]}

    def get_statuses(self) -> dict[str, Any]:
        return {"statuses": list(STATUSES)}

    def explain_workflow(self) -> dict[str, Any]:
        return {"capabilities": ["create and update support tickets", "create and update action items",
                                 "search tickets", "look up a ticket and list its action items"],
                "lifecycle": "A ticket starts Open, moves to In Progress, may be Blocked, and ends Completed "
                             "or Cancelled. Action items follow the same statuses."}

    def start_over(self) -> dict[str, Any]:
        return {"status": "ok", "message": "The current task was abandoned."}


def _apply(record: dict[str, Any], changes: dict[str, Any], kind: str) -> dict[str, Any]:
    if not changes:
        raise ToolError(f"nothing to change: give at least one field of the {kind} to update")
    record.update(changes, updated_at=_now())
    return dict(record)


def _next_id(prefix: str, records: dict[str, Any]) -> str:
    numbers = [int(m.group(1)) for key in records if (m := re.fullmatch(rf"{prefix}-(\d+)", key))]
    return f"{prefix}-{max(numbers, default=1000) + 1}"


def _enum(field: str, value: Any) -> str:
    options = ENUMS[field]
    match = next((option for option in options if str(value).strip().lower() == option.lower()), None)
    if match is None:
        raise ToolError(f"{value!r} is not a valid {field.replace('_', ' ')}; choose one of {', '.join(options)}",
                        field)
    return match


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ToolError(f"customer_visible must be true or false, not {value!r}", "customer_visible")
    return value


def _date(value: Any) -> str:
    text = str(value).strip()
    try:
        if not re.search(r"\d", text):
            raise ValueError
        return dateparser.parse(text).date().isoformat()
    except (ValueError, OverflowError):
        raise ToolError(f"{value!r} is not a calendar date; give it as YYYY-MM-DD", "due_date") from None
