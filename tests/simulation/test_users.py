"""The scripted user: its reading of bot text, and whole conversations with a bot it has never seen."""
import asyncio

import pytest

from lobeval.core.records import Case
from lobeval.simulation.simulate import converse
from lobeval.targets.targets import load_target
from lobeval.simulation.users import (ScriptedUser, agenda, asked_field, asks_confirmation, label, numbered_options, read_end,
                           reports_problem, says_stop_phrase)

BOOKING = {"employee_email": "ana@example.org", "start_date": "2026-12-21", "end_date": "2026-12-24",
           "leave_type": "Vacation"}


def leave_case(style="conversational", calls=None, **extra):
    return Case(case_id="leave-001", scenario_name="book_leave",
                user_instructions="Book vacation from 21 to 24 December.", user_style=style,
                expected_function_calls=calls if calls is not None else [{"functionName": "book_leave", "arguments": BOOKING}], **extra)


def talk(case, max_turns=12):
    target = load_target("toy_leave_bot:LeaveBot")
    return asyncio.run(converse(case, 0, target, ScriptedUser(), max_turns=max_turns))


@pytest.mark.parametrize("style", ["conversational", "terse", "one_fact", "all_in_one"])
def test_scripted_user_books_leave_with_an_unseen_bot_in_every_style(style):
    record = talk(leave_case(style))
    assert record["termination"]["reason"] == "user_finished"
    assert [(c["functionName"], c["arguments"]) for c in record["function_calls"]] == [("book_leave", BOOKING)]
    assert says_stop_phrase(record["messages"][-1]["content"])


def test_terse_user_picks_menu_options_by_number():
    record = talk(leave_case("terse"))
    user_lines = [m["content"] for m in record["messages"] if m["role"] == "user"]
    assert user_lines[0] == "1"          # "1) Book leave"
    assert "1" in user_lines[1:]         # "1) Vacation" for the leave type


def test_all_in_one_user_gives_everything_in_its_first_message():
    record = talk(leave_case("all_in_one"))
    first = record["messages"][1]["content"]
    assert all(value in first for value in BOOKING.values())
    assert sum(m["role"] == "user" for m in record["messages"]) == 3   # everything, "yes", stop phrase


def test_user_with_two_items_moves_on_after_the_first_succeeds():
    calls = [{"functionName": "book_leave", "arguments": BOOKING},
             {"functionName": "cancel_leave", "arguments": {"booking_id": "LV-7"}}]
    record = talk(leave_case(calls=calls))
    assert [c["functionName"] for c in record["function_calls"]] == ["book_leave", "cancel_leave"]
    assert record["function_calls"][1]["error"] is None
    changes = record["state_changes"]["bookings"]      # LV-101 booked, LV-7 cancelled (removed)
    assert changes.keys() == {"LV-101", "LV-7"} and changes["LV-7"] is None


def test_planned_mistake_is_given_first_then_corrected_when_the_bot_objects():
    record = talk(leave_case(user_mistakes={"employee_email": "ana at example"}))
    user_lines = [m["content"] for m in record["messages"] if m["role"] == "user"]
    wrong = next(i for i, line in enumerate(user_lines) if "ana at example" in line)
    assert "ana@example.org" in user_lines[wrong + 1]
    assert record["function_calls"][0]["arguments"]["employee_email"] == "ana@example.org"


def test_user_with_nothing_to_do_asks_for_it_in_its_own_words_then_ends():
    record = talk(leave_case(calls=[]))
    assert record["messages"][1]["content"] == "Could you book vacation from 21 to 24 December?"
    assert record["termination"] == {"reason": "user_finished", "turns": 2}
    assert record["function_calls"] == []


def test_max_turns_stops_a_conversation_that_goes_nowhere():
    record = talk(leave_case(), max_turns=2)
    assert record["termination"] == {"reason": "max_turns", "turns": 2}


def test_agenda_knows_the_first_literal_of_each_argument_and_which_call_gives_a_reference():
    arguments = {"booking_id": {"$ref": "book_leave.result.booking_id"}, "note": {"$match": "any"},
                 "reason": {"$oneOf": [{"$match": "fuzzy", "value": "ill"}, "sick"]}, "email": "ana@example.org"}
    item = agenda(leave_case(calls=[{"functionName": "LeavePlugin-cancel_leave", "arguments": arguments}]))[0]
    assert (item.function, item.values, item.refs) == ("cancel_leave", {"reason": "ill", "email": "ana@example.org"},
                                                       {"booking_id": "book_leave"})


@pytest.mark.parametrize("text, expected", [
    ("What is the **due date** (YYYY-MM-DD)?", "due_date"),
    ("Which start date should the leave begin on?", "start_date"),
    ("And the end date?", "end_date"),
    ("What is the ticket number?", "ticket_id"),
    ("Great, thanks. Anything else?", None),
])
def test_asked_field_finds_the_field_in_bold_or_in_the_question(text, expected):
    assert asked_field(text, ["title", "due_date", "start_date", "end_date", "ticket_id"]) == expected


def test_reading_helpers():
    assert numbered_options("Pick:\n1. Low\n2) High  \r\n  10. Very high\n2026. no\nthanks") == \
        {1: "Low", 2: "High", 10: "Very high"}
    assert asks_confirmation("Shall I go ahead (y/n)?") and not asks_confirmation("What is the title?")
    assert reports_problem("'MKTG' is not a valid department code.") and not reports_problem("Done!")
    assert label("departmentCode") == label("department_code") == "department code"
    assert says_stop_phrase("Thanks, The Session Is Finished.") and not says_stop_phrase("the session is")


SIZE = 10_000_000
PATHOLOGICAL = {   # each repeated to SIZE characters
    "no punctuation": ("", "a", ""),
    "question marks": ("", "?", ""),
    "bold markers": ("", "**", ""),
    "an open bold": ("**", "a", ""),
    "bold on every line": ("", "**a\n", ""),
    "blank lines": ("", "\n", ""),
    "spaces": ("1. a", " ", "b"),
    "tabs after a number": ("1.", "\t", ""),
    "digits": ("", "1", ". Vacation"),
    "capitals": ("", "A", "-1"),
}


def pathological(name, size):
    head, unit, tail = PATHOLOGICAL[name]
    return head + unit * (size // len(unit)) + tail


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_a_huge_reply_of_pathological_text_gets_an_answer(name):
    session = ScriptedUser().start(leave_case())
    asyncio.run(session.reply(None))   # the user states its request
    reply = asyncio.run(session.reply(pathological(name, SIZE) + "\nWhat is your employee email?"))
    assert reply == "The employee email is ana@example.org."


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [name for name in PATHOLOGICAL if name not in ("question marks", "bold markers")])
def test_reading_helpers_are_linear_in_the_text(name):
    # A quadratic pattern would take hours on a megabyte; the helpers read every character of it.
    text = pathological(name, 1_000_000)
    asked_field(text, ["employee_email", "start_date"])
    numbered_options(text)
    asks_confirmation(text)
    reports_problem(text)


def test_the_user_reads_the_end_of_a_long_reply_from_the_start_of_a_line():
    options = "".join(f"{n}. {'Sick' if n == 10 else 'Other'} {'x' * 2000}\n" for n in range(1, 11))
    assert read_end(options, 2100).startswith("10. Sick")
    assert read_end("a" * 50, 10) == "a" * 10 and read_end("short", 10) == "short"
