"""The scripted user talks and understands like a person on a suite it was never written against: one `lobeval init`
makes from an OpenAPI document with camelCase operation ids and path, header and body parameters
(tests/domains/hire_desk), with a bot that asks in its own words (desk_bot.py), and on the orders and
HR domains."""
from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from lobeval.cli import main
from lobeval.evaluation.evaluate import evaluate
from lobeval.generation.generate import generate
from lobeval.drafting.lint import case_problems
from lobeval.core.records import Case
from lobeval.workflow.roles import make_user
from lobeval.scoring.scoring import Rules, score_conversation
from lobeval.simulation.simulate import converse, simulate_async
from lobeval.workspace.suite import load_suite
from lobeval.targets.targets import load_target
from lobeval.simulation.user_faults import user_faults
from lobeval.simulation.users import (
    GIVE_UP, NOT_UNDERSTOOD, UNSURE, UNSURE_TURNS, ScriptedUser, asked_field, declines, own_words, wanted,
)
from helpers import REPO, SAMPLE_SUITE, read_jsonl

HIRE = REPO / "tests" / "domains" / "hire_desk"
ORDERS = REPO / "tests" / "domains" / "orders"
OPERATIONS = ("createBooking", "getBooking", "changeBookingDates", "cancelBooking", "getCustomer")


@pytest.fixture(scope="module")
def hire(tmp_path_factory) -> Path:
    """The suite a user makes: `lobeval init` from the OpenAPI document and the CSV files, then their templates."""
    suite = tmp_path_factory.mktemp("made") / "hire"
    assert main(["init", str(suite), "--tools", str(HIRE / "openapi.yaml"), "--data", str(HIRE / "data")]) == 0
    shutil.copy(HIRE / "templates.json", suite / "templates.json")
    return suite


@pytest.fixture
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HIRE))
    monkeypatch.syspath_prepend(str(ORDERS))


def run(suite: Path, target: str, folder: Path, per: int = 4) -> tuple[list[dict], dict]:
    dataset = generate(suite, folder / "d.jsonl", cases_per_scenario=per, seed=3).path
    asyncio.run(simulate_async(dataset, folder / "c.jsonl", target=load_target(target),
                               user=make_user("scripted", suite=suite), progress=False))
    results = evaluate(dataset, folder / "c.jsonl", folder / "r.json", suite=suite, progress=False).results
    return read_jsonl(folder / "c.jsonl"), results


def said(conversation: dict, role: str = "user") -> list[str]:
    return [m["content"] for m in conversation["messages"] if m["role"] == role]


def test_on_a_suite_init_made_from_openapi_the_user_never_says_an_operation_id_and_every_case_succeeds(
        hire, on_path, tmp_path):
    conversations, results = run(hire, "desk_bot:HireBot", tmp_path)
    arguments = {name for tool in load_suite(hire).tools.values()
                 for name in tool["function"]["parameters"]["properties"]}   # customerId, X-Request-Id, ...
    for conversation in conversations:
        for text in said(conversation):
            assert not [name for name in (*OPERATIONS, *arguments) if name in text], text
            assert not re.search(r"\b(create|change|cancel|get)[ _]?(booking|customer)", text, re.I), text
    assert results["counts"]["user_faults"] == 0
    assert {row["case_id"]: row["Success"] for row in results["rows"]} == {c["case_id"]: 1 for c in conversations}


def test_the_user_opens_with_what_it_wants_in_words_of_the_description_and_each_value_with_what_it_is(
        hire, on_path, tmp_path):
    conversations, _ = run(hire, "desk_bot:HireBot", tmp_path, per=1)
    first = {c["scenario_name"]: said(c)[0] for c in conversations}
    assert re.fullmatch(r"I'd like to book a piece of equipment\. The customer id is CUS-\d+\. "
                        r"The equipment id is EQ-\d+\.", first["book_equipment"])
    assert first["move_booking_ask_reference"] == "I'd like to move a booking to other dates."   # withheld
    assert first["out_of_scope_request"] == "Could you order me a pizza for lunch?"   # not its instructions


def test_the_user_answers_the_bots_questions_however_worded(hire, on_path, tmp_path):
    conversations, _ = run(hire, "desk_bot:HireBot", tmp_path, per=6)
    answers = {}
    for conversation in conversations:
        messages = conversation["messages"]
        for question, answer in zip(messages, messages[1:]):
            if question["role"] == "assistant" and answer["role"] == "user":
                answers.setdefault(question["content"], set()).add(re.sub(r"[A-Z]+-\d+|\d{4}-\d\d-\d\d", "X",
                                                                          answer["content"]))
    assert answers["What is the booking reference?"] == {"The booking id is X."}
    assert answers["Which booking would you like to change?"] == {"The booking id is X."}
    assert answers["Please give me the booking id."] == {"The booking id is X."}
    assert answers["Could you give me your customer account number?"] == {"The customer id is X."}
    assert answers["When does the hire start?"] == {"The start date is X."}
    assert answers["When will the equipment come back?"] == {"The return date is X."}


def test_in_a_chain_the_user_gives_the_id_the_bot_returned_for_that_record_and_no_other(hire, on_path, tmp_path):
    conversations, _ = run(hire, "desk_bot:HireBot", tmp_path)
    chains = [c for c in conversations if c["scenario_name"] == "book_then_move"]
    assert chains
    for conversation in chains:
        booked, moved = conversation["function_calls"]
        assert moved["arguments"]["bookingId"] == booked["result"]["bookingId"]
        assert not [text for text in said(conversation) if booked["result"]["invoiceId"] in text]
        assert [text for text in said(conversation) if text.endswith(
            f"It's for the booking you just created, {booked['result']['bookingId']}.")]


def session(case: dict, tools=None):
    user = ScriptedUser(tools=tools or {}).start(Case.model_validate({
        "case_id": "c-1", "scenario_name": "s", "user_instructions": "...", **case}))
    asyncio.run(user.reply("Hello, how can I help?"))
    return user


MOVE = {"expected_function_calls": [{"functionName": "changeBookingDates", "arguments": {
    "bookingId": "BK-4102", "startDate": "2026-12-07", "returnDate": "2026-12-10"}}], "user_withholds": ["bookingId"]}


@pytest.mark.parametrize("question", [
    "What is the booking reference?", "Please give me the booking id.", "Which booking would you like to change?",
    "Could you tell me the booking number?", "What's the booking ref?", "Booking #?",
    "Thanks. I'll need the reference of the booking, please.",
])
@pytest.mark.parametrize("with_tools", [True, False])
def test_a_question_for_a_value_is_answered_whatever_its_words(question, with_tools, hire):
    user = session(MOVE, load_suite(hire).tools if with_tools else None)
    assert asyncio.run(user.reply(question)) == "The booking id is BK-4102."


@pytest.mark.parametrize("question, expected", [
    ("Could you give me your customer account number?", "customerId"),   # the description's words
    ("Which shipping speed: Standard, Express or Overnight?", "shipping_speed"),
    ("Do you want it Standard or Express?", "shipping_speed"),   # its options, from the schema
    ("When does the hire start?", "startDate"),
    ("What is the first day of the hire?", "startDate"),
    ("Please confirm: move booking BK-1 from 2026-12-07. Shall I go ahead?", None),
    ("What should change on order ORD-2001?", None),   # the order it names is the one given
])
def test_asked_field_hears_descriptions_synonyms_and_options(question, expected):
    from lobeval.simulation.users import Name, content

    names = [Name("customerId", ("customer", "id"), content("The customer's account number, e.g. CUS-1001.")),
             Name("shipping_speed", ("shipping", "speed"), content("How fast it ships."),
                  ("Standard", "Express", "Overnight")),
             Name("startDate", ("start", "date"), content("The first day of the hire.")),
             Name("bookingId", ("booking", "id")), Name("order_id", ("order", "id"))]
    assert asked_field(question, names, {"bookingId": "BK-1", "order_id": "ORD-2001"}) == expected


@pytest.mark.parametrize("function, description, spoken", [
    ("createBooking", "Book a piece of equipment Reserve one item of equipment for a customer.",
     "book a piece of equipment"),   # a summary and a description run together
    ("getBooking", "Show a booking", "look up a booking"),
    ("get_support_ticket", "Fetch one support ticket by its identifier.", "look up a support ticket"),
    ("search_support_tickets", "Search tickets by words in the title or description, optionally filtered.",
     "search tickets"),
    ("listLoans", "Returns the loans of a member.", "look up the loans of a member"),
    ("create_support_ticket", "Department code from get_departments, e.g. IT.", "create a support ticket"),
    ("createLoan", None, "create a loan"), ("list_action_items", None, "see the action items"),
])
def test_what_the_user_wants_is_said_in_words_never_the_functions_name(function, description, spoken):
    tool = {"function": {"name": function, "description": description}} if description else None
    assert wanted(function, tool) == spoken


@pytest.mark.parametrize("instructions, asked", [
    ("Ask the assistant to book you a flight to Lisbon for next Tuesday. When it says it cannot help with that, "
     "thank it and end the session.", "Could you book me a flight to Lisbon for next Tuesday?"),
    ("Ask the assistant what the weather will be like tomorrow. When it says it cannot help with that, thank it "
     "and end the session.", "Can you tell me what the weather will be like tomorrow?"),
    ("Ask for a copy of your payslip.", "Could I have a copy of my payslip?"),
    ("Book a taxi to the airport.", "Could you book a taxi to the airport?"),
])
def test_an_out_of_scope_request_is_asked_in_the_users_own_words(instructions, asked):
    assert own_words(instructions) == asked


class Stubborn:
    """A bot that keeps asking for something no case holds."""

    async def start(self, case):
        return self

    async def greeting(self):
        return None

    async def send(self, message):
        from lobeval.core.protocol import Reply

        return Reply("What is the frobnication level of your request?")

    async def state(self):
        return {}

    async def close(self):
        pass


def test_a_user_that_cannot_tell_what_is_asked_says_so_then_gives_up_marked_and_it_is_its_fault_not_the_bots():
    case = Case.model_validate({"case_id": "move-1", "scenario_name": "move", "user_instructions": "...", **MOVE})
    record = asyncio.run(converse(case, 0, load_target(f"{__name__}:Stubborn"), ScriptedUser()))
    users = [m for m in record["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users[1:]] == [UNSURE] * UNSURE_TURNS + [
        f"{GIVE_UP} Thank you, the session is finished."]
    assert [bool(m.get(NOT_UNDERSTOOD)) for m in users] == [False] + [True] * (UNSURE_TURNS + 1)
    assert record["termination"]["reason"] == "user_finished"
    assert user_faults(record, case.model_dump()) == [{
        "check": "not_understood", "turn": 4, "message_index": 6,
        "detail": "the simulated user could not tell what the bot's 'What is the frobnication level of your "
                  "request?' asked for (3 messages in a row) and ended the conversation"}]   # not ended_early


def test_a_user_that_understands_after_saying_it_did_not_goes_on():
    user = session(MOVE)
    assert asyncio.run(user.reply("What is the frobnication level?")) == UNSURE
    assert user.marks == {NOT_UNDERSTOOD: True}
    assert asyncio.run(user.reply("Sorry: which booking?")) == "The booking id is BK-4102."
    assert user.marks == {} and user.unsure == 0


def test_an_out_of_scope_case_is_passed_only_by_a_bot_that_declined(hire, on_path, tmp_path):
    kept, _ = run(hire, "desk_bot:HireBot", tmp_path / "kind", per=1)
    silent, results = run(hire, "desk_bot:SilentHireBot", tmp_path / "silent", per=1)
    assert said(next(c for c in silent if c["scenario_name"] == "out_of_scope_request"), "assistant")[-1] == \
        "You're welcome, goodbye!"
    row = next(r for r in results["rows"] if r["scenario_name"] == "out_of_scope_request")
    assert (row["Success"], row["checks"]["declined"]) == (0, False)
    from lobeval.analysis.analyse import failure_sentences

    assert "never said it could not help with a request it has nothing to do for in 1 conversation" in [
        sentence["text"] for sentence in failure_sentences(results)]


def test_declining_is_read_from_the_bots_words_after_the_request():
    case = {"case_id": "c", "scenario_name": "out_of_scope_request", "user_instructions": "Book a taxi.",
            "expected_function_calls": [], "forbidden_function_calls": ["place_order"]}

    def success(*replies):
        messages = [{"role": "assistant", "content": "Hi! I can't wait to help."},
                    {"role": "user", "content": "A taxi?"}]
        conversation = {"case_id": "c", "function_calls": [], "termination": {"reason": "user_finished"},
                        "messages": messages + [{"role": "assistant", "content": text} for text in replies]}
        row = score_conversation(conversation, case, Rules())
        return row["Success"], row["checks"].get("declined")

    assert success("You're welcome, goodbye!") == (0, False)   # the greeting's "can't" came before the request
    assert success("Sorry, I can only help with orders.") == (1, True)
    assert success("I’m afraid that is outside my scope.") == (1, True)
    assert success("That's not something I can do, but the front desk can.") == (1, True)
    assert declines("I cannot book taxis") and not declines("Done: booked for 2026-12-01.")
    # a case with something to do, or an attack, or one that allows calls, is not asked to decline
    for other in ({"expected_outputs": ["TKT-1"]}, {"allowed_function_calls": ["get_order"]},
                  {"attack": {"category": "other_record"}}):
        assert "declined" not in score_conversation({"case_id": "c", "function_calls": [], "messages": []},
                                                    {**case, **other}, Rules())["checks"]
    assert case_problems(case, Rules()) == []   # lint's perfect agent declines


def test_on_the_sample_suite_the_user_never_says_a_function_name(tmp_path):
    conversations, results = run(SAMPLE_SUITE, "lobeval.samples.support_tickets:SupportTicketBot", tmp_path, per=1)
    names = [tool["function"]["name"] for tool in load_suite(SAMPLE_SUITE).tools.values()]
    for conversation in conversations:
        for text in said(conversation):
            assert not [name for name in names if name in text], text
    out_of_scope = next(c for c in conversations if c["scenario_name"] == "out_of_scope_request")
    assert said(out_of_scope)[0] == "Could you book me a flight to Lisbon for next Tuesday?"
    assert results["counts"]["user_faults"] == 0


TWO = {"expected_function_calls": [{"functionName": "cancel_reservation", "arguments": {
    "user_id": "mia_li_3668", "reservation_id": "NO6JO3"}}], "user_withholds": ["user_id", "reservation_id"]}


@pytest.mark.parametrize("question", [
    "Please provide your user id and reservation id.",
    "First, I need some information. What is your user ID? What is your reservation ID?",
    "To get started, could you please provide:\n- your user ID\n- the reservation ID",
])
def test_a_message_asking_for_two_values_gets_both(question):
    assert asyncio.run(session(TWO).reply(question)) == \
        "The user id is mia_li_3668. The reservation id is NO6JO3."


def test_a_list_of_details_stated_is_no_question():
    user = session(TWO)
    summary = "Please confirm:\n- user id: mia_li_3668\n- reservation id: NO6JO3\nShall I go ahead? (yes/no)"
    assert asyncio.run(user.reply(summary)) == "Yes, please go ahead."
