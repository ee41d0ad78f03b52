"""`lobeval draft` on a real API it was not written from (tests/domains/equipment_hire), made the way a new user
makes a suite: `lobeval init` from an OpenAPI document (camelCase operation ids, path parameters, an optional
`X-Request-Id` header, `$ref` bodies, enums, a date range) and a SQLite database of four related tables, then
`lobeval draft` proven on a correct bot's apply()."""
from __future__ import annotations

import contextlib
import io
import json
import re
import sqlite3

import pytest

from helpers import REPO
from lobeval.cli import main
from lobeval.drafting.draft import Choices, _moved, ranges
from lobeval.targets.endstate import replay_cases
from lobeval.generation.generate import generate
from lobeval.models.llm import run_sync
from lobeval.core.records import read_cases
from lobeval.workspace.suite import load_suite, write_functions

DOMAIN = REPO / "tests" / "domains" / "equipment_hire"
BOT = "hire_bot:HireBot"
WRITES = ["updateContactDetails", "createBooking", "cancelBooking", "changeBookingDates", "applyDiscount",
          "recordReturn", "reportDamage", "updateDamageReport"]


OWN = {"bookingId": "bookings", "customerId": "customers", "reportId": "damage_reports"}


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def hire(tmp_path_factory):
    """The suite `lobeval init` makes from the domain's OpenAPI document and database, drafted on the correct
    bot: (suite folder, what `lobeval init` printed, what `lobeval draft` printed)."""
    root = tmp_path_factory.mktemp("hire")
    database = root / "equipment_hire.db"
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.executescript((DOMAIN / "equipment_hire.sql").read_text(encoding="utf-8"))
    suite = root / "scenarios" / "equipment_hire"
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(DOMAIN))
        code, initialised = run("init", str(suite), "--tools", str(DOMAIN / "openapi.yaml"), "--data", str(database))
        assert code == 0
        code, drafted = run("draft", "--suite", str(suite), "--target", BOT)
        assert code == 0
        yield suite, initialised, drafted


def templates(suite):
    return {t["scenario_name"]: t for t in json.loads((suite / "templates.json").read_text())}


def drafted_for(suite, function):
    return {name: t for name, t in templates(suite).items()
            if [c["functionName"] for c in t["expected_function_calls"]] == [function]}


def test_init_reads_the_api_and_the_database_and_joins_summary_and_description_as_sentences(hire):
    suite, initialised, _ = hire
    assert initialised.splitlines()[0].endswith("tools.json (11 functions: 3 read, 8 write), suite.json (4 entities), "
                                                "templates.json (no scenarios yet); data in "
                                                f"{suite.parent.parent / 'data' / 'equipment_hire'}")
    assert "  bookings: child of customers through customer_id (its name and values)" in initialised
    loaded = load_suite(suite, templates=False)
    assert [f["name"] for f in write_functions(loaded)] == WRITES
    create = loaded.tool("createBooking")["function"]
    assert create["description"] == ("Book a piece of equipment. Reserve one item of equipment for a customer from "
                                     "a start date to a return date.")
    assert set(create["parameters"]["properties"]) == {"X-Request-Id", "customerId", "equipmentId", "startDate",
                                                       "returnDate", "quantity"}


def test_every_write_function_of_the_api_gets_a_scenario_proven_on_the_bot(hire):
    suite, _, drafted = hire
    lines = drafted.splitlines()
    assert lines[-1] == f"wrote 20 scenarios to {suite / 'templates.json'}; 0 rejected, 0 merged"
    table = [re.split(r"\s{2,}", line.strip()) for line in lines[lines.index("coverage:") + 2:-2]]
    functions = {row[0]: row[1] for row in table if len(row) == 2 and row[0] in WRITES}
    assert sorted(functions) == sorted(WRITES) and "NOT COVERED" not in functions.values()
    assert lines[-2] == "  39 of 45 covered; 4 left out"
    called = {call["functionName"] for t in templates(suite).values() for call in t["expected_function_calls"]}
    assert called == set(WRITES)


def test_optional_arguments_no_data_holds_are_left_out_never_changed(hire):
    suite, _, drafted = hire
    assert drafted.splitlines()[0] == ("left out X-Request-Id (of updateContactDetails, createBooking, cancelBooking, "
                                       "changeBookingDates): optional, and no column of the data holds its values")
    for name, template in templates(suite).items():
        assert "X-Request-Id" not in name
        assert all("X-Request-Id" not in call["arguments"] for call in template["expected_function_calls"])
    assert ["cancelBooking", "X-Request-Id", "left out: optional, no data holds it"] in [
        re.split(r"\s{2,}", line.strip()) for line in drafted.splitlines()]


def test_a_function_naming_its_record_by_id_gets_its_by_id_draft_which_changes_the_records_table(hire, tmp_path,
                                                                                                 monkeypatch):
    suite, _, drafted = hire
    cancels = drafted_for(suite, "cancelBooking")
    assert sorted(cancels) == ["cancelBooking_36", "cancelBooking_ask_bookingId_13"]
    main_draft = cancels["cancelBooking_36"]
    assert main_draft["expected_function_calls"] == [{"functionName": "cancelBooking",
                                                      "arguments": {"bookingId": "{bookings.booking_id}"}}]
    # the cases `generate` builds are the ones proven: replayed on the bot, each cancels its booking, and only that
    monkeypatch.syspath_prepend(str(DOMAIN))
    generate(suite, tmp_path / "dataset.jsonl")
    cases = {case.case_id: case.model_dump() for case in read_cases(tmp_path / "dataset.jsonl")
             if case.scenario_name in cancels}
    replays = run_sync(replay_cases({(BOT, case_id): case for case_id, case in cases.items()}))
    assert len(replays) == 6
    for (_, case_id), replay in replays.items():
        booking = cases[case_id]["business_data"]["bookings"]["booking_id"]
        changed = {(table, key, column) for table, rows in replay["expected"].items() for key, row in rows.items()
                   for column, value in row.items() if replay["initial"][table][key][column] != value}
        assert changed == {("bookings", booking, "status")}, case_id
        assert replay["expected"]["bookings"][booking]["status"] == "Cancelled"


def test_a_rejected_draft_is_tried_again_on_other_records_and_given_up_with_its_last_reason(hire, tmp_path,
                                                                                            monkeypatch):
    suite, _, drafted = hire
    # on the correct bot: the first bookings sampled for cancelBooking held one already returned
    retried = drafted.splitlines()[1]
    assert retried.startswith("passed when tried again on other records: ")
    assert "cancelBooking as cancelBooking_36 (try 2)" in retried
    assert "changeBookingDates as changeBookingDates_132 (try 6)" in retried
    # on a bot that takes no cancellation, no record helps: given up after ATTEMPTS tries, with the last reason
    monkeypatch.syspath_prepend(str(DOMAIN))
    code, out = run("draft", "--suite", str(suite), "--target", "hire_bot:PhoneCancelHireBot",
                    "--out", str(tmp_path / "templates.json"))
    assert code == 0
    rejected = [line for line in out.splitlines() if line.startswith("rejected ")]
    assert [line.split(":")[0] for line in rejected] == ["rejected cancelBooking",
                                                         "rejected cancelBooking_ask_bookingId"]
    assert re.fullmatch(r"rejected cancelBooking: case cancelBooking_\d+-001: cancelBooking fails on "
                        r"hire_bot:PhoneCancelHireBot: cancellations are taken by phone \(the last of 8 tries, each "
                        r"on other records\)", rejected[0])
    assert ["cancelBooking", "NOT COVERED"] in [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()]


def test_a_date_range_is_drawn_together_so_that_it_ends_after_it_starts(hire):
    suite, _, _ = hire
    loaded = load_suite(suite, templates=False)
    properties = loaded.tool("changeBookingDates")["function"]["parameters"]["properties"]
    assert ranges(properties) == [("startDate", "returnDate")]
    assert ranges({"date_from": {"type": "string", "format": "date"}, "date_to": {"type": "string"},
                   "first_name": {"type": "string"}, "last_name": {"type": "string"}}) == [("date_from", "date_to")]
    # a record's dates moved by whole weeks past the latest date of the table: 2026-09-30 - 2026-06-18 is 104
    # days, 15 weeks (105 days) move them past it
    assert _moved([("2026-06-18", "2026-06-19", 3)], ["2026-09-30", "2026-01-02"]) == [("2026-10-01", "2026-10-02", 3)]
    # each column on its own would take its most common value: a hire ending before it starts; together, a
    # record's two dates, and the bot takes them
    bookings = loaded.entities["bookings"]
    choices = Choices(bookings, ["startDate", "returnDate"], ["start_date", "return_date"], properties)
    first = bookings.records[0]
    assert choices.grounded[0] == (first["start_date"], first["return_date"]) == ("2026-06-18", "2026-06-19")
    for name, template in drafted_for(suite, "changeBookingDates").items():
        arguments = template["expected_function_calls"][0]["arguments"]
        assert arguments["startDate"] <= arguments["returnDate"], name
        assert (arguments["startDate"], arguments["returnDate"]) in choices.grounded + choices.made


def test_the_ask_variant_draws_its_values_for_its_own_records(hire, tmp_path, monkeypatch):
    suite, _, drafted = hire
    asks = {name: t for name, t in templates(suite).items() if t.get("user_withholds")}
    assert {t["expected_function_calls"][0]["functionName"] for t in asks.values()} == set(WRITES)
    assert not [line for line in drafted.splitlines() if line.startswith("rejected ")]
    # each update's cases set values other than those its own booking, customer or report already has
    columns = {"email": "email", "discountPercent": "discount_percent", "returnedOn": "returned_on",
               "status": "status", "startDate": "start_date"}
    generate(suite, tmp_path / "dataset.jsonl")
    checked = set()
    for case in read_cases(tmp_path / "dataset.jsonl"):
        [call] = case.expected_function_calls if case.scenario_name in asks else [{"functionName": "", "arguments": {}}]
        changed = [arg for arg in call["arguments"] if arg in columns and call["functionName"] != "createBooking"]
        if changed:
            [(key, value)] = [(k, v) for k, v in call["arguments"].items() if k in OWN]
            record = case.business_data[OWN[key]]
            assert record[f"{OWN[key].rstrip('s').replace('damage_', '')}_id"] == value
            assert all(record[columns[arg]] != call["arguments"][arg] for arg in changed), case.case_id
            checked.add(call["functionName"])
    assert checked == {"updateContactDetails", "changeBookingDates", "applyDiscount", "recordReturn",
                       "updateDamageReport"}


def test_drafted_texts_are_sentences_in_the_descriptions_words_without_operation_ids(hire):
    suite, _, _ = hire
    operations = [tool["function"]["name"] for tool in load_suite(suite, templates=False).tools.values()]
    drafted = templates(suite)
    for name, template in drafted.items():
        said = template["user_instructions"]
        assert not any(operation in said for operation in operations), name
        first = said.splitlines()[0]
        assert re.fullmatch(r"[A-Z][^.]*\.( [A-Z][^.]*\.)*", first) and not re.search(r"[a-z] [A-Z][a-z]", first), name
        assert template["task_completion"].endswith("."), name
    assert drafted["cancelBooking_36"]["user_instructions"] == "Cancel a booking.\n- Booking reference: " \
                                                              "{bookings.booking_id}"
    assert drafted["cancelBooking_36"]["task_completion"] == (
        "The assistant did what was asked (cancel a booking) for the booking with booking reference "
        "{bookings.booking_id}, and said so.")
    assert drafted["cancelBooking_ask_bookingId_13"]["user_instructions"] == (
        "Cancel a booking.\nDo not say the booking reference until the assistant asks for it; then it is "
        "{bookings.booking_id}.")
    assert drafted["createBooking_97"]["user_instructions"].splitlines()[0] == "Book a piece of equipment."
    chain = drafted["createBooking_then_reportDamage"]["user_instructions"]
    assert "\nThen, in the same conversation: report damage to hired equipment.\n" in chain
