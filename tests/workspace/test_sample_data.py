"""Invariants of the sample suite's business data (data/support_tickets/*.csv).

Scenario generation samples records from these files and fills templates with them, so a
broken reference or a stray enum value here turns into a wrong expected call later.
"""
import csv
import re
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

DATA = Path(__file__).parents[2] / "data" / "support_tickets"

PRIORITIES = {"Low", "Medium", "High", "Critical"}
WORKFLOWS = {"Standard", "Expedited"}
STATUSES = {"Open", "In Progress", "Blocked", "Completed", "Cancelled"}
BOOLS = {"true", "false"}
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

COLUMNS = {
    "departments.csv": ["code", "name", "description"],
    "employees.csv": ["email", "name", "department_code", "available_from"],
    "tickets.csv": ["id", "title", "description", "expected_outcome", "department_code", "priority",
                    "workflow_type", "status", "customer_visible", "created_at", "requester_email"],
    "action_items.csv": ["id", "parent_ticket_id", "title", "description", "assignee", "due_date", "status"],
}


def read(name):
    with open(DATA / name, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = list(reader)
    return header, rows


@pytest.fixture(scope="module")
def tables():
    return {name: read(name)[1] for name in COLUMNS}


def iso(value):
    assert ISO_DATE.match(value), f"not YYYY-MM-DD: {value!r}"
    return date.fromisoformat(value)


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_header_and_no_empty_cells(name):
    header, rows = read(name)
    assert header == COLUMNS[name]
    assert rows, f"{name} has no rows"
    for i, row in enumerate(rows, start=2):
        assert None not in row, f"{name} line {i}: more cells than columns"
        for col in header:
            value = row[col]
            assert value is not None, f"{name} line {i}: missing cell {col}"
            assert value.strip(), f"{name} line {i}: empty cell {col}"
            assert value == value.strip(), f"{name} line {i}: padded cell {col}"


@pytest.mark.parametrize("name,key", [("departments.csv", "code"), ("employees.csv", "email"),
                                      ("tickets.csv", "id"), ("action_items.csv", "id")])
def test_ids_are_unique(tables, name, key):
    dupes = [k for k, n in Counter(r[key] for r in tables[name]).items() if n > 1]
    assert not dupes, f"duplicate {key} in {name}: {dupes}"


def test_id_formats(tables):
    assert all(re.fullmatch(r"TKT-\d{4}", t["id"]) for t in tables["tickets.csv"])
    assert all(re.fullmatch(r"ACT-\d{4}", a["id"]) for a in tables["action_items.csv"])
    assert all(re.fullmatch(r"[A-Z]{2,5}", d["code"]) for d in tables["departments.csv"])
    assert all(re.fullmatch(r"[a-z]+\.[a-z]+@contoso\.example", e["email"]) for e in tables["employees.csv"])


def test_counts(tables):
    assert 8 <= len(tables["departments.csv"]) <= 10
    assert len(tables["employees.csv"]) >= 25
    assert len(tables["tickets.csv"]) >= 50
    assert len(tables["action_items.csv"]) >= 150


def test_enum_values(tables):
    for t in tables["tickets.csv"]:
        assert t["priority"] in PRIORITIES, t["id"]
        assert t["workflow_type"] in WORKFLOWS, t["id"]
        assert t["status"] in STATUSES, t["id"]
        assert t["customer_visible"] in BOOLS, t["id"]
    for a in tables["action_items.csv"]:
        assert a["status"] in STATUSES, a["id"]


def test_every_priority_is_used(tables):
    assert {t["priority"] for t in tables["tickets.csv"]} == PRIORITIES
    assert {t["workflow_type"] for t in tables["tickets.csv"]} == WORKFLOWS


def test_department_codes_exist(tables):
    codes = {d["code"] for d in tables["departments.csv"]}
    for e in tables["employees.csv"]:
        assert e["department_code"] in codes, e["email"]
    for t in tables["tickets.csv"]:
        assert t["department_code"] in codes, t["id"]


def test_people_exist(tables):
    emails = {e["email"] for e in tables["employees.csv"]}
    for t in tables["tickets.csv"]:
        assert t["requester_email"] in emails, t["id"]
    for a in tables["action_items.csv"]:
        assert a["assignee"] in emails, a["id"]


def test_every_parent_exists_and_every_ticket_has_2_to_5_actions(tables):
    ticket_ids = {t["id"] for t in tables["tickets.csv"]}
    per_ticket = Counter(a["parent_ticket_id"] for a in tables["action_items.csv"])
    orphans = set(per_ticket) - ticket_ids
    assert not orphans, f"action items point at unknown tickets: {sorted(orphans)}"
    for tid in ticket_ids:
        assert 2 <= per_ticket[tid] <= 5, f"{tid} has {per_ticket[tid]} action items"


def test_dates(tables):
    created = {}
    for t in tables["tickets.csv"]:
        d = iso(t["created_at"])
        assert date(2026, 8, 1) <= d <= date(2026, 11, 15), t["id"]
        created[t["id"]] = d
    for e in tables["employees.csv"]:
        d = iso(e["available_from"])
        assert date(2026, 12, 1) <= d <= date(2027, 2, 28), e["email"]
    for a in tables["action_items.csv"]:
        d = iso(a["due_date"])
        assert date(2026, 9, 1) <= d <= date(2027, 3, 31), a["id"]
        assert d >= created[a["parent_ticket_id"]], f"{a['id']} is due before its ticket was created"


def test_titles_are_unique_and_distinct(tables):
    titles = [t["title"] for t in tables["tickets.csv"]]
    assert len({t.casefold() for t in titles}) == len(titles)
    firsts = Counter(" ".join(t.casefold().split()[:3]) for t in titles)
    shared = [k for k, n in firsts.items() if n > 1]
    assert not shared, f"ticket titles share their first three words: {shared}"
    for t in titles:
        assert 4 <= len(t.split()) <= 9, t
    actions = [a["title"].casefold() for a in tables["action_items.csv"]]
    assert len(set(actions)) == len(actions), "action item titles repeat"
