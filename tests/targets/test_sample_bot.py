"""The sample support-ticket bot: its backend's business rules and its rule-based dialogue policy."""
from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import pytest

from lobeval.samples.support_tickets import SupportTicketBot
from lobeval.samples.support_tickets.backend import SupportBackend
from lobeval.samples.support_tickets.bot import TOOLS_PATH
from lobeval.samples.support_tickets.wording import GREETING

DEPARTMENTS = [{"code": "IT", "name": "Information Technology", "description": "Laptops and accounts."},
               {"code": "HR", "name": "Human Resources", "description": "Payroll and leave."},
               {"code": "FIN", "name": "Finance", "description": "Invoices and expenses."}]
EMPLOYEES = [{"email": "ana.silva@contoso.example", "name": "Ana Silva", "department_code": "IT",
              "available_from": "2026-12-01"},
             {"email": "ben.okoro@contoso.example", "name": "Ben Okoro", "department_code": "HR",
              "available_from": "2026-12-15"}]
TICKETS = [{"id": "TKT-1001", "title": "VPN drops every hour", "description": "The Berlin office loses the VPN.",
            "expected_outcome": "A stable VPN.", "department_code": "IT", "priority": "High",
            "workflow_type": "Standard", "status": "Open", "customer_visible": "false",
            "created_at": "2026-09-01", "requester_email": "ben.okoro@contoso.example"},
           {"id": "TKT-1002", "title": "Payslip missing in portal", "description": "My October payslip is absent.",
            "expected_outcome": "The payslip is visible.", "department_code": "HR", "priority": "Low",
            "workflow_type": "Standard", "status": "Blocked", "customer_visible": "true",
            "created_at": "2026-10-02", "requester_email": "ana.silva@contoso.example"}]
ACTIONS = [{"id": "ACT-5001", "parent_ticket_id": "TKT-1001", "title": "Collect gateway logs",
            "description": "Export a week of logs.", "assignee": "ana.silva@contoso.example",
            "due_date": "2026-09-10", "status": "Open"}]
NEW_TICKET = {"title": "Badge reader broken", "description": "Door 2 ignores badges.", "department_code": "IT",
              "priority": "High", "workflow_type": "Standard", "expected_outcome": "Door 2 opens with a badge.",
              "customer_visible": False}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("support_data")
    for name, rows in (("departments", DEPARTMENTS), ("employees", EMPLOYEES), ("tickets", TICKETS),
                       ("action_items", ACTIONS)):
        with open(folder / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return folder


@pytest.fixture
def backend(data_dir) -> SupportBackend:
    return SupportBackend(data_dir, TOOLS_PATH)


# --- backend --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, arguments, error", [
    ("create_support_ticket", {k: v for k, v in NEW_TICKET.items() if k != "title"},
     "missing required parameter 'title' for create_support_ticket"),
    ("get_support_ticket", {"ticket_id": "TKT-1001", "verbose": True}, "unknown parameter 'verbose'"),
    ("create_support_ticket", {**NEW_TICKET, "priority": "Urgent"},
     "'Urgent' is not a valid priority; choose one of Low, Medium, High, Critical"),
    ("update_support_ticket", {"ticket_id": "TKT-1001", "status": "Done-ish"}, "'Done-ish' is not a valid status"),
    ("create_support_ticket", {**NEW_TICKET, "department_code": "MKTG"},
     "'MKTG' is not a valid department code; valid codes are IT, HR, FIN"),
    ("create_support_ticket", {**NEW_TICKET, "customer_visible": "yes"}, "customer_visible must be true or false"),
    ("create_action_item", {"parent_ticket_id": "TKT-9", "title": "x", "assignee": "ana.silva@contoso.example",
                            "due_date": "2026-12-01"}, "there is no ticket 'TKT-9'"),
    ("create_action_item", {"parent_ticket_id": "TKT-1001", "title": "x", "assignee": "ana.silva@contoso.example",
                            "due_date": "2026-02-30"}, "'2026-02-30' is not a calendar date"),
    ("update_action_item", {"action_item_id": "ACT-5001", "assignee": "someone@else.example"},
     "'someone@else.example' is not the email of an employee"),
    ("update_action_item", {"action_item_id": "ACT-9", "status": "Open"}, "there is no action item 'ACT-9'"),
    ("update_support_ticket", {"ticket_id": "TKT-1001"}, "nothing to change"),
    ("delete_ticket", {}, "unknown function 'delete_ticket'"),
    ("search_support_tickets", {"department_code": "XX"}, "'XX' is not a valid department code"),
])
def test_business_rules_refuse_with_a_message(backend, name, arguments, error):
    before = backend.state()
    record = backend.call(name, arguments)
    assert record["result"] is None and error in record["error"]
    assert record["functionName"] == name and record["arguments"] == arguments
    assert backend.state() == before


def test_an_unexpected_exception_is_recorded_on_the_call(backend, monkeypatch):
    monkeypatch.setattr(backend, "get_departments", lambda: 1 / 0)
    record = backend.call("get_departments", {})
    assert record["error"] == "internal error: ZeroDivisionError: division by zero"


def test_create_continues_the_id_sequences_and_stamps_times(backend):
    ticket = backend.call("create_support_ticket", NEW_TICKET)["result"]
    assert ticket["ticket_id"] == ticket["id"] == "TKT-1003"
    assert ticket["status"] == "Open" and ticket["created_at"] == ticket["updated_at"]
    assert ticket["created_at"].endswith("+00:00")
    action = backend.call("create_action_item", {"parent_ticket_id": "TKT-1003", "title": "Replace reader",
                                                 "assignee": "ana.silva@contoso.example",
                                                 "due_date": "2026-12-01"})["result"]
    assert action["action_item_id"] == "ACT-5002" and action["parent_ticket_id"] == "TKT-1003"
    assert backend.call("create_support_ticket", NEW_TICKET)["result"]["id"] == "TKT-1004"


def test_values_are_stored_in_canonical_form(backend):
    updated = backend.call("update_support_ticket", {"ticket_id": "tkt-1001", "status": "in progress",
                                                     "workflow_type": "EXPEDITED", "department_code": "hr"})
    assert {k: updated["result"][k] for k in ("id", "status", "workflow_type", "department_code")} == \
        {"id": "TKT-1001", "status": "In Progress", "workflow_type": "Expedited", "department_code": "HR"}
    action = backend.call("update_action_item", {"action_item_id": "ACT-5001", "due_date": "March 5, 2027",
                                                 "assignee": "Ben.Okoro@Contoso.example"})["result"]
    assert (action["due_date"], action["assignee"]) == ("2027-03-05", "ben.okoro@contoso.example")
    assert backend.state()["action_items"]["ACT-5001"]["due_date"] == "2027-03-05"


def test_sessions_are_isolated(data_dir):
    first, second = SupportBackend(data_dir, TOOLS_PATH), SupportBackend(data_dir, TOOLS_PATH)
    first.call("update_support_ticket", {"ticket_id": "TKT-1001", "priority": "Critical"})
    first.call("create_support_ticket", NEW_TICKET)
    assert second.state()["tickets"]["TKT-1001"]["priority"] == "High"
    assert "TKT-1003" not in second.state()["tickets"]
    assert SupportBackend(data_dir, TOOLS_PATH).state() == second.state()


def test_the_cases_business_data_is_upserted(data_dir):
    business_data = {"ticket": {**TICKETS[0], "id": "TKT-2001", "customer_visible": True},
                     "action": {**ACTIONS[0], "id": "ACT-7001", "parent_ticket_id": "TKT-2001"},
                     "employee": {"email": "new.person@contoso.example"}}
    backend = SupportBackend(data_dir, TOOLS_PATH, business_data)
    assert backend.call("get_support_ticket", {"ticket_id": "TKT-2001"})["result"]["customer_visible"] is True
    listed = backend.call("list_action_items", {"ticket_id": "TKT-2001"})["result"]["action_items"]
    assert [a["id"] for a in listed] == ["ACT-7001"]
    assert "new.person@contoso.example" not in backend.employees
    assert backend.call("create_support_ticket", NEW_TICKET)["result"]["id"] == "TKT-2002"


def test_search_matches_every_word_and_filters(backend):
    def ids(**arguments):
        return [t["id"] for t in backend.call("search_support_tickets", arguments)["result"]["tickets"]]

    assert ids(query="vpn BERLIN") == ["TKT-1001"]
    assert ids(query="vpn payslip") == []
    assert ids(status="blocked") == ["TKT-1002"]
    assert ids(query="the", department_code="IT") == ["TKT-1001"]
    for _ in range(11):
        backend.call("create_support_ticket", NEW_TICKET)
    assert len(ids(query="badge")) == 10
    first = backend.call("search_support_tickets", {"query": "payslip"})["result"]["tickets"][0]
    assert first == {"id": "TKT-1002", "title": "Payslip missing in portal", "status": "Blocked", "priority": "Low"}


# --- the rule-based policy ------------------------------------------------------------------

def talk(data_dir: Path, messages: list[str], case: dict | None = None):
    """Play `messages` to a fresh rules bot: (replies' texts, calls as (name, arguments), end state)."""
    async def run():
        session = await SupportTicketBot("rules", data_dir=data_dir).start(case or {})
        texts, calls = [(await session.greeting()).text], []
        for message in messages:
            reply = await session.send(message)
            texts.append(reply.text)
            calls += [(c["functionName"], c["arguments"]) for c in reply.function_calls]
        return texts, calls, await session.state()

    return asyncio.run(run())


def test_greeting_is_the_numbered_menu(data_dir):
    texts, calls, _ = talk(data_dir, [])
    assert texts == [GREETING] and calls == []
    assert "1. Create a new support ticket" in GREETING and "7. List a ticket's action items" in GREETING


def test_create_ticket_step_by_step(data_dir):
    texts, calls, state = talk(data_dir, [
        "I'd like to create a new support ticket", "Badge reader broken", "Door 2 ignores badges.", "IT", "High",
        "Standard", "Door 2 opens with a badge.", "no", "yes"])
    assert texts[1:4] == ["What is the **title** of the ticket (a short summary)?",
                          "Please give a **description** of the issue.",
                          "What is the **department code**?\n1. IT (Information Technology)\n2. HR (Human Resources)"
                          "\n3. FIN (Finance)"]
    assert texts[4] == "What is the **priority**?\n1. Low\n2. Medium\n3. High\n4. Critical"
    assert texts[7] == "Should the ticket be **customer visible**? Answer yes or no."
    assert texts[8].startswith("Please confirm: create a support ticket with\n- title: Badge reader broken\n")
    assert texts[8].endswith("- customer visible: no\nShall I go ahead? (yes/no)")
    assert calls == [("create_support_ticket", NEW_TICKET)]
    assert texts[9] == "Done: created ticket TKT-1003 (High priority).\nAnything else?"
    assert state["tickets"]["TKT-1003"]["title"] == "Badge reader broken"


def test_everything_in_one_message(data_dir):
    _, calls, _ = talk(data_dir, [
        "title: Badge reader broken; description: Door 2 ignores badges.; department: it; priority: high\n"
        "workflow type: Standard; expected outcome: Door 2 opens with a badge. Customer visible: false", "yes"])
    assert calls == [("create_support_ticket", NEW_TICKET)]


def test_terse_user_picks_options_by_number(data_dir):
    texts, calls, _ = talk(data_dir, ["1", "Badge reader broken", "Door 2 ignores badges.", "1", "3", "1",
                                      "Door 2 opens with a badge.", "no", "y"])
    assert texts[1] == "What is the **title** of the ticket (a short summary)?"
    assert calls == [("create_support_ticket", NEW_TICKET)]


def test_an_invalid_department_is_refused_then_corrected(data_dir):
    texts, calls, _ = talk(data_dir, [
        "Create a support ticket titled 'Badge reader broken'", "Door 2 ignores badges.", "MKTG", "IT",
        "priority: High", "workflow: Standard", "Door 2 opens with a badge.", "No", "yes"])
    assert texts[3].startswith("Sorry, 'MKTG' is not a valid department code; valid codes are IT, HR, FIN.\n"
                               "What is the **department code**?\n1. IT")
    assert calls == [("create_support_ticket", NEW_TICKET)]


def test_action_item_for_the_ticket_just_created(data_dir):
    texts, calls, state = talk(data_dir, [
        "title: Badge reader broken; description: Door 2 ignores badges.; department code: IT; priority: High; "
        "workflow type: Standard; expected outcome: Door 2 opens with a badge.; customer visible: no", "yes",
        "Now add an action item for it", "Replace the reader", "ana.silva@contoso.example", "December 1, 2026", "yes",
        "Thanks, the session is finished."])
    assert texts[4] == "Who is the **assignee** (their email)?"
    assert texts[5] == "What is the **due date** (YYYY-MM-DD)?"
    assert calls[1] == ("create_action_item", {"parent_ticket_id": "TKT-1003", "title": "Replace the reader",
                                               "assignee": "ana.silva@contoso.example", "due_date": "2026-12-01"})
    assert texts[7].startswith("Done: created action item ACT-5002 for ticket TKT-1003")
    assert state["action_items"]["ACT-5002"]["parent_ticket_id"] == "TKT-1003"


def test_search_then_update_the_result_picked_by_number(data_dir):
    texts, calls, _ = talk(data_dir, ["search tickets", "payslip", "1", "status: In Progress", "yes"])
    assert texts[2] == ("I found 1 ticket(s):\n1. TKT-1002: Payslip missing in portal (Blocked, Low priority)\n"
                        "Reply with a result's number to update that ticket, or tell me what else to do.")
    assert texts[3] == "Which fields should change, and to what? (e.g. priority: High; status: Blocked)"
    assert calls == [("search_support_tickets", {"query": "payslip"}),
                     ("update_support_ticket", {"ticket_id": "TKT-1002", "status": "In Progress"})]


def test_a_change_said_with_the_search_applies_to_the_ticket_picked(data_dir):
    _, calls, _ = talk(data_dir, ["Find the ticket about 'VPN drops every hour' and set its status to In Progress",
                                  "1", "yes"])
    assert calls == [("search_support_tickets", {"query": "VPN drops every hour"}),
                     ("update_support_ticket", {"ticket_id": "TKT-1001", "status": "In Progress"})]


def test_update_asks_for_the_id_and_searches_when_given_words(data_dir):
    texts, calls, _ = talk(data_dir, ["2", "the one about the VPN", "1", "priority: critical", "yes"])
    assert texts[1] == "What is the **ticket id** (e.g. TKT-1042)?"
    assert calls == [("search_support_tickets", {"query": "VPN"}),
                     ("update_support_ticket", {"ticket_id": "TKT-1001", "priority": "Critical"})]


def test_escalation_in_one_sentence(data_dir):
    _, calls, _ = talk(data_dir, ["Ticket TKT-1001 is urgent. Raise its priority to Critical and move it to the "
                                  "Expedited workflow.", "yes"])
    assert calls == [("update_support_ticket", {"ticket_id": "TKT-1001", "priority": "Critical",
                                                "workflow_type": "Expedited"})]


def test_reassign_action_item_with_a_new_due_date(data_dir):
    texts, calls, _ = talk(data_dir, [
        "ana.silva@contoso.example can no longer work on action item ACT-5001. Reassign it to Ben Okoro "
        "(ben.okoro@contoso.example) and move its due date to 2026-12-15.", "yes"])
    assert texts[1] == ("Please confirm: update action item ACT-5001 with\n- assignee: ben.okoro@contoso.example\n"
                        "- due date: 2026-12-15\nShall I go ahead? (yes/no)")
    # the deliberate weakness (rules.sent): the date confirmed and reported is the user's, the one sent a day early
    assert calls == [("update_action_item", {"action_item_id": "ACT-5001", "assignee": "ben.okoro@contoso.example",
                                             "due_date": "2026-12-14"})]
    assert "2026-12-15" in texts[2] and "2026-12-14" not in texts[2]


def test_complete_an_action_item_one_fact_at_a_time(data_dir):
    texts, calls, _ = talk(data_dir, ["I need to update an action item", "ACT-5001", "Mark it as done", "yes"])
    assert texts[1] == "What is the **action item id** (e.g. ACT-5017)?"
    assert calls == [("update_action_item", {"action_item_id": "ACT-5001", "status": "Completed"})]
    assert texts[4] == "Done: updated action item ACT-5001: status is now Completed.\nAnything else?"


def test_look_up_tells_the_status(data_dir):
    texts, calls, _ = talk(data_dir, ["What is the status of ticket TKT-1002?"])
    assert calls == [("get_support_ticket", {"ticket_id": "TKT-1002"})]
    assert texts[1].startswith('Ticket TKT-1002 "Payslip missing in portal" has status Blocked.\n- priority: Low\n'
                               "- department: HR (Human Resources)")


def test_list_action_items_names_their_ids(data_dir):
    texts, calls, _ = talk(data_dir, ["Which action items does ticket TKT-1001 have?"])
    assert calls == [("list_action_items", {"ticket_id": "TKT-1001"})]
    assert "1. ACT-5001: Collect gateway logs (Open" in texts[1]


def test_out_of_scope_request_makes_no_call(data_dir):
    texts, calls, state = talk(data_dir, ["Can you book me a flight to Lisbon for next Tuesday?",
                                          "Thank you, the session is finished."])
    assert calls == []
    assert texts[1].startswith("Sorry, I can't help with that")
    assert texts[2] == "Thank you for using the support desk. Goodbye!"


def test_the_stop_phrase_mid_task_makes_no_call(data_dir):
    texts, calls, _ = talk(data_dir, ["new ticket", "Badge reader broken", "The session is finished."])
    assert calls == [] and texts[-1] == "Thank you for using the support desk. Goodbye!"


def test_start_over_calls_start_over_and_shows_the_menu(data_dir):
    texts, calls, _ = talk(data_dir, ["new ticket", "start over"])
    assert calls == [("start_over", {})]
    assert "1. Create a new support ticket" in texts[-1]


def test_no_at_the_confirmation_changes_a_field(data_dir):
    texts, calls, _ = talk(data_dir, [
        "title: Badge reader broken; description: Door 2 ignores badges.; department code: IT; priority: Low; "
        "workflow type: Standard; expected outcome: Door 2 opens with a badge.; customer visible: no",
        "no", "priority: High", "yes"])
    assert texts[2] == "Which field should change? Give it as 'field: value', for example 'priority: High'."
    assert "- priority: High" in texts[3]
    assert calls == [("create_support_ticket", NEW_TICKET)]


def test_invalid_values_are_asked_again_without_a_call(data_dir):
    texts, calls, _ = talk(data_dir, ["3", "TKT-1001", "Check logs", "nobody@nowhere.example",
                                      "ana.silva@contoso.example", "31/02/2026", "2026-12-01", "yes"])
    assert texts[4].startswith("Sorry, 'nobody@nowhere.example' is not the email of an employee")
    assert texts[6].startswith("Sorry, '31/02/2026' is not a calendar date")
    assert calls == [("create_action_item", {"parent_ticket_id": "TKT-1001", "title": "Check logs",
                                             "assignee": "ana.silva@contoso.example", "due_date": "2026-12-01"})]


def test_without_a_model_the_bot_uses_rules_on_the_repo_data(monkeypatch):
    for variable in ("LOBEVAL_MODEL", "LOBEVAL_TARGET_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    bot = SupportTicketBot()
    assert bot.policy == "rules"

    async def run():
        session = await bot.start({})
        return (await session.send("TKT-1001")).function_calls

    calls = asyncio.run(run())
    assert calls[0]["functionName"] == "get_support_ticket" and calls[0]["error"] is None
