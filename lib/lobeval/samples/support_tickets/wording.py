"""Everything the rule-based policy says: menu, questions, confirmations and results.

Scripted users are written against this wording, so change it with care: questions name the
argument in bold, options are numbered, writes are confirmed with "(yes/no)" (and nothing else
says that), and results start with "Done:" and give the id.
"""
from __future__ import annotations

from typing import Any

from lobeval.samples.support_tickets.backend import ENUMS
from lobeval.samples.support_tickets.parsing import label

MENU = ("Create a new support ticket", "Update a support ticket", "Create an action item for a ticket",
        "Update an action item", "Search tickets", "Look up a ticket", "List a ticket's action items")
MENU_LINES = "\n".join(f"{n}. {line}" for n, line in enumerate(MENU, 1))
GREETING = f"Hello! I'm the support desk assistant. I can:\n{MENU_LINES}\nWhat would you like to do?"
START_OVER = f"All right, let's start over. I can:\n{MENU_LINES}\nWhat would you like to do?"
OUT_OF_SCOPE = ("Sorry, I can't help with that: I only handle support tickets and their action items. "
                f"I can:\n{MENU_LINES}\nWhat would you like to do?")
WHAT_NEXT = f"What would you like to do? I can:\n{MENU_LINES}"
WELCOME = "You're welcome! Tell me if there is anything else I can do."
GOODBYE = "Thank you for using the support desk. Goodbye!"
ANYTHING_ELSE = "\nAnything else?"
WHICH_FIELD = "Which field should change? Give it as 'field: value', for example 'priority: High'."
YES_OR_NO = "Please answer yes or no."
EXAMPLES = {"update_support_ticket": "priority: High; status: Blocked",
            "update_action_item": "assignee: name@contoso.example; due date: 2026-12-01; status: Completed"}
_HINTS = {"due_date": "YYYY-MM-DD", "ticket_id": "e.g. TKT-1042", "parent_ticket_id": "e.g. TKT-1042",
          "action_item_id": "e.g. ACT-5017"}
_ACTIONS = {"create_support_ticket": "create a support ticket", "update_support_ticket": "update ticket {}",
            "create_action_item": "create an action item", "update_action_item": "update action item {}"}


def show(value: Any) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else str(value)


def numbered(lines: list[str]) -> str:
    return "\n".join(f"{n}. {line}" for n, line in enumerate(lines, 1))


def question(name: str, function: str, departments: dict[str, dict[str, str]], last_ticket: str | None) -> str:
    """The one question that asks for argument `name` of `function`."""
    bold = f"**{label(name)}**"
    thing = "ticket" if function.endswith("ticket") else "action item"
    if name in ENUMS:
        return f"What is the {bold}?\n{numbered(list(ENUMS[name]))}"
    if name == "department_code":
        options = numbered([f"{code} ({department['name']})" for code, department in departments.items()])
        return f"What is the {bold}?\n{options}"
    special = {
        "title": f"What is the {bold} of the {thing} (a short summary)?",
        "description": f"Please give a {bold} of the {'issue' if thing == 'ticket' else 'work'}.",
        "expected_outcome": f"What is the {bold} (what should be true once the ticket is resolved)?",
        "customer_visible": f"Should the ticket be {bold}? Answer yes or no.",
        "assignee": f"Who is the {bold} (their email)?",
        "query": f"What should I search for? Give me a few {bold} words from the ticket's title or description.",
    }
    if name == "parent_ticket_id" and last_ticket:
        return f"What is the {bold} (e.g. {last_ticket}, the ticket just created)?"
    return special.get(name) or f"What is the {bold}" + (f" ({_HINTS[name]})?" if name in _HINTS else "?")


def invalid(problem: str, ask: str) -> str:
    return f"Sorry, {problem}.\n{ask}"


def which_changes(function: str) -> str:
    return f"Which fields should change, and to what? (e.g. {EXAMPLES[function]})"


def not_understood(fields: list[str], function: str) -> str:
    return (f"Sorry, I didn't catch a change. You can change: {', '.join(map(label, fields))}. "
            f"(e.g. {EXAMPLES.get(function, 'priority: High')})")


def summary(function: str, arguments: dict[str, Any], key: str | None) -> str:
    """The confirmation asked before a write."""
    action = _ACTIONS[function].format(arguments.get(key, ""))
    lines = "\n".join(f"- {label(name)}: {show(value)}" for name, value in arguments.items() if name != key)
    return f"Please confirm: {action} with\n{lines}\nShall I go ahead? (yes/no)"


def done(function: str, arguments: dict[str, Any], result: dict[str, Any],
         departments: dict[str, dict[str, str]]) -> str:
    """What the user is told after a successful call."""
    changes = "; ".join(f"{label(name)} is now {show(value)}" for name, value in arguments.items()
                        if name not in ("ticket_id", "action_item_id"))
    if function == "create_support_ticket":
        return f"Done: created ticket {result['ticket_id']} ({result['priority']} priority)."
    if function == "update_support_ticket":
        return f"Done: updated ticket {result['id']}: {changes}."
    if function == "create_action_item":
        return (f"Done: created action item {result['action_item_id']} for ticket {result['parent_ticket_id']} "
                f"(assigned to {result['assignee']}, due {result['due_date']}).")
    if function == "update_action_item":
        return f"Done: updated action item {result['id']}: {changes}."
    if function == "get_support_ticket":
        department = departments.get(result.get("department_code"), {}).get("name", "")
        return (f"Ticket {result['id']} \"{result['title']}\" has status {result['status']}.\n"
                f"- priority: {result['priority']}\n- department: {result['department_code']} ({department})\n"
                f"- workflow type: {result['workflow_type']}\n- customer visible: {show(result['customer_visible'])}")
    if function == "list_action_items":
        items = result["action_items"]
        if not items:
            return f"Ticket {arguments['ticket_id']} has no action items."
        lines = numbered([f"{a['id']}: {a['title']} ({a['status']}, assigned to {a['assignee']}, due {a['due_date']})"
                          for a in items])
        return f"Ticket {arguments['ticket_id']} has {len(items)} action item(s):\n{lines}"
    return "Done."


def results(tickets: list[dict[str, Any]]) -> str:
    lines = numbered([f"{t['id']}: {t['title']} ({t['status']}, {t['priority']} priority)" for t in tickets])
    return (f"I found {len(tickets)} ticket(s):\n{lines}\n"
            "Reply with a result's number to update that ticket, or tell me what else to do.")


def no_results(query: str, then_update: bool) -> str:
    if then_update:
        return (f"I found no tickets matching '{query}'. What is the **ticket id** (e.g. TKT-1042)? "
                "You can also give other words from its title.")
    return f"I found no tickets matching '{query}'. What should I search for? Give me other **query** words."
