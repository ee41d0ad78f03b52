"""The scripted user on a suite drafted as a new user drafts one (tests/domains/equipment_hire: `lobeval init` from
an OpenAPI document and a SQLite database, `lobeval draft` on the correct bot), whose cases carry business records
beside the expected calls: the call's values win over the records' columns of the same field, an empty value is
never said, a `$ref` is the id the bot returned; and `lobeval simulate --suite` gives it the tools' words."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from helpers import REPO, read_jsonl
from test_draft_equipment_hire import hire as drafted_hire, run  # noqa: F401 (a fixture: the suite drafted there)
from lobeval.core.records import Case, read_cases, rows_path
from lobeval.workspace.runs import dataset_suite
from lobeval.workspace.suite import load_suite
from lobeval.simulation.users import ScriptedUser, field_key, wanted

DOMAIN = REPO / "tests" / "domains" / "equipment_hire"
BOT = "hire_bot:HireBot"
GREETING = "Hello, this is the hire desk. What do you need?"


@pytest.fixture(scope="module")
def hire(drafted_hire):
    """(the drafted suite, its dataset as `lobeval generate` writes it by default): 60 cases."""
    suite = drafted_hire[0]
    assert run("generate", "--suite", str(suite), "--out", str(suite.parent.parent / "dataset.jsonl"))[0] == 0
    return suite, suite.parent.parent / "dataset.jsonl"


@pytest.fixture
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(DOMAIN))


def case_of(dataset, *functions: str, withheld: bool = False) -> Case:
    """The first case whose expected calls are `functions`, with or without a value withheld until asked."""
    return next(case for case in read_cases(dataset)
                if [call["functionName"] for call in case.expected_function_calls] == list(functions)
                and bool(case.user_withholds) == withheld)


def talk(suite, case: Case, *bot: str) -> list[str]:
    """What the scripted user (with the suite's tools) says to the greeting and then to each of `bot`."""
    session = ScriptedUser(tools=load_suite(suite, templates=False).tools).start(case)
    return [asyncio.run(session.reply(text)) for text in (GREETING, *bot)]


def test_a_correct_bot_succeeds_in_every_drafted_case_with_no_user_fault(hire, on_path, tmp_path):
    suite, dataset = hire
    code, out = run("simulate", "--dataset", str(dataset), "--target", BOT, "--suite", str(suite),
                    "--out", str(tmp_path / "c.jsonl"))
    assert code == 0 and "endings: user_finished 60" in out
    code, out = run("evaluate", "--dataset", str(dataset), "--conversations", str(tmp_path / "c.jsonl"),
                    "--suite", str(suite), "--out", str(tmp_path / "r.json"))
    assert code == 0
    assert json.loads((tmp_path / "r.json").read_text())["counts"]["user_faults"] == 0
    assert {row["case_id"]: row["Success"] for row in read_jsonl(rows_path(tmp_path / "r.json"))} == {
        case.case_id: 1 for case in read_cases(dataset)}
    said = [m["content"] for c in read_jsonl(tmp_path / "c.jsonl") for m in c["messages"] if m["role"] == "user"]
    assert len(said) > 200 and not [text for text in said if re.search(r"\bis \.", text)]


def test_the_expected_calls_value_wins_over_a_business_column_of_the_same_field(hire):
    suite, dataset = hire
    back = case_of(dataset, "recordReturn")
    booking = back.business_data["bookings"]
    call = back.expected_function_calls[0]["arguments"]
    assert booking["returned_on"] == "" and call["returnedOn"] == "2026-09-17"
    # a confirmation naming the value already given asks for nothing: it was "The returned on is ." (the record's
    # returned_on) again and again until the turns ran out
    assert talk(suite, back, "What is the returned on?",
                f"Shall I record the return of {call['bookingId']} with returned on 2026-09-17?")[1:] == [
        "The returned on is 2026-09-17.", "Here is the detail:\nCondition: Good"]
    # applyDiscount's reason is the booking's discount_reason: the call's value, never the record's (empty) one
    discount = case_of(dataset, "applyDiscount", withheld=True)
    reason = discount.expected_function_calls[0]["arguments"]["reason"]
    assert discount.business_data["bookings"]["discount_reason"] == "" and reason
    assert talk(suite, discount, "What is the discount reason?")[1] == f"The reason is {reason}."


def test_camel_case_arguments_and_snake_case_columns_are_one_field():
    assert field_key("returnedOn") == field_key("returned_on") == field_key("returned on") == ("returned",)
    assert field_key("bookingId") == field_key("booking_id") == field_key("bookingRef") == ("booking", "id")
    assert field_key("discountPercent") == field_key("discount_percent") != field_key("discount_reason")


def test_an_empty_value_is_never_said_the_user_says_it_does_not_know(hire):
    suite, dataset = hire
    cancel = case_of(dataset, "cancelBooking")
    customer = cancel.business_data["customers"]
    assert customer["tax_id"] == ""   # a personal account: no tax id
    assert talk(suite, cancel, "What is your tax id?", "And the customer's phone?")[1:] == [
        "Sorry, I don't know the tax id.", f"The phone is {customer['phone']}."]


def test_a_value_no_expected_call_holds_is_the_booking_records_column(hire):
    suite, dataset = hire
    back = case_of(dataset, "recordReturn")
    booking = back.business_data["bookings"]
    assert "equipmentId" not in back.expected_function_calls[0]["arguments"] and booking["equipment_id"]
    assert talk(suite, back, "Which equipment is it?", "What is the equipment id?")[1:] == [
        f"The equipment id is {booking['equipment_id']}."] * 2


def test_in_a_chain_the_records_id_is_the_one_the_bot_returned_never_the_sampled_records(hire):
    suite, dataset = hire
    chain = case_of(dataset, "createBooking", "reportDamage")
    sampled = chain.business_data["bookings"]["booking_id"]
    # before the bot made the booking, its id is not known (it was the sampled booking's)
    assert talk(suite, chain, "What is the booking id?")[1] == "Sorry, I don't know the booking id."
    # the bot made it while the booking was still due: its id, however asked
    said = talk(suite, chain, "Done: BK-9001 for you. Anything else?", "What is the booking id?",
                "Which booking is it for?")
    assert said[2:] == ["The booking id is BK-9001."] * 2 and sampled != "BK-9001"


def test_the_options_a_question_offers_for_one_value_name_no_other(hire):
    suite, dataset = hire
    damage = case_of(dataset, "reportDamage")
    severity = damage.expected_function_calls[0]["arguments"]["severity"]
    assert "total" in damage.business_data["bookings"]   # "Total loss" was heard as the booking's total too
    assert talk(suite, damage, "What is the severity: Minor, Major or Total loss?")[1] == \
        f"The severity is {severity}."


def test_the_user_asks_with_the_descriptions_verb_update_as_it_is():
    tool = {"function": {"name": "updateDamageReport", "description": "Update a damage report."}}
    assert wanted("updateDamageReport", tool) == "update a damage report"
    assert wanted("patchBooking", {"function": {"name": "patchBooking", "description": "Patch a booking."}}) == \
        "change a booking"


# --- lobeval simulate --suite ----------------------------------------------------------------

def first_said(conversations) -> dict[str, str]:
    return {c["scenario_name"]: next(m["content"] for m in c["messages"] if m["role"] == "user")
            for c in read_jsonl(conversations)}


def simulate(dataset, out, *options: str) -> int:
    return run("simulate", "--dataset", str(dataset), "--target", BOT, "--scenarios", "recordReturn_92", "--limit",
               "1", *options, "--out", str(out))[0]


def test_simulate_suite_gives_the_user_the_tools_words_by_default_the_runs(hire, on_path, tmp_path):
    suite, dataset = hire
    wanted_in_words = "I'd like to record that hired equipment came back."   # the description's words
    by_name = "I'd like to record a return."   # recordReturn in words: the bot does not take it
    assert simulate(dataset, tmp_path / "given.jsonl", "--suite", str(suite)) == 0
    assert first_said(tmp_path / "given.jsonl")["recordReturn_92"].startswith(wanted_in_words)
    assert simulate(dataset, tmp_path / "none.jsonl") == 0   # a dataset no run holds: no suite
    assert first_said(tmp_path / "none.jsonl")["recordReturn_92"].startswith(by_name)
    # a run's dataset: the suite its config.json names
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    (folder / "dataset.jsonl").write_bytes(dataset.read_bytes())
    (folder / "config.json").write_text(json.dumps({"run_id": "r1", "suite_name": "equipment_hire",
                                                    "suite": str(suite)}))
    assert dataset_suite(folder / "dataset.jsonl") == str(suite)
    assert simulate(folder / "dataset.jsonl", tmp_path / "run.jsonl") == 0
    assert first_said(tmp_path / "run.jsonl")["recordReturn_92"].startswith(wanted_in_words)
    # a run whose suite is gone, or a folder that is no run: none
    (folder / "config.json").write_text(json.dumps({"run_id": "r1", "suite_name": "gone",
                                                    "suite": str(tmp_path / "gone")}))
    assert dataset_suite(folder / "dataset.jsonl") is None and dataset_suite(dataset) is None


def test_simulate_suite_that_is_no_suite_is_refused_in_one_line(hire, on_path, tmp_path, capsys):
    _, dataset = hire
    assert simulate(dataset, tmp_path / "c.jsonl", "--suite", str(tmp_path)) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(tmp_path) in error, error
    assert not (tmp_path / "c.jsonl").exists()
