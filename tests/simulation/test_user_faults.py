"""The simulated user's own faults: each check on transcripts written for it, each beside a near miss it must
not flag (tests/fixtures/user_faults/transcripts.json says why each is what it is); the faults' effect on a run."""
import json

import pytest

from helpers import REPO
from lobeval.evaluation.evaluate import evaluate, with_user_faults
from lobeval.core.records import read_results, write_jsonl
from lobeval.scoring.scoring import Rules, score_conversation
from lobeval.workspace.suite import load_suite
from lobeval.simulation.user_faults import checks_not_run, judged_faults, open_question, stated_values, user_faults

SUITE = REPO / "scenarios" / "support_tickets"
TOOLS = load_suite(SUITE).tools
TRANSCRIPTS = json.loads((REPO / "tests" / "fixtures" / "user_faults" / "transcripts.json").read_text())
BY_NAME = {entry["name"]: entry for entry in TRANSCRIPTS}


@pytest.mark.parametrize("entry", TRANSCRIPTS, ids=[entry["name"] for entry in TRANSCRIPTS])
def test_each_check_flags_its_transcript_and_not_the_near_miss(entry):
    faults = user_faults(entry["conversation"], entry["case"], TOOLS)
    assert [{"check": fault["check"], "turn": fault["turn"]} for fault in faults] == entry["faults"], entry["why"]
    messages = entry["conversation"]["messages"]
    for fault in faults:   # the turn is the k-th user message, and message_index points at it
        assert messages[fault["message_index"]]["role"] == "user"
        assert sum(m["role"] == "user" for m in messages[:fault["message_index"] + 1]) == fault["turn"]


def test_every_check_has_a_transcript_and_a_near_miss():
    flagged = {fault["check"] for entry in TRANSCRIPTS for fault in entry["faults"]}
    assert flagged == {"invented_value", "ended_early", "contradicted_instructions"}
    assert {name.split("_near_miss")[0] for name in BY_NAME if "near_miss" in name} == {
        "invents_an_id", "stops_early", "contradicts_instructions"}


def test_a_fault_names_the_value():
    invented = user_faults(BY_NAME["invents_an_id"]["conversation"], BY_NAME["invents_an_id"]["case"], TOOLS)[0]
    assert "'TKT-1020'" in invented["detail"]
    contradicted = BY_NAME["contradicts_instructions"]
    fault = user_faults(contradicted["conversation"], contradicted["case"], TOOLS)[0]
    assert fault["detail"] == "the user asked for priority 'Medium' although its instructions say 'Critical'"


def test_a_value_is_flagged_once_and_a_value_the_bot_said_is_known_from_then_on():
    case = BY_NAME["invents_an_id"]["case"]
    messages = [{"role": "user", "content": "Ticket TKT-1020, please."},
                {"role": "assistant", "content": "Created ACT-5300 on TKT-1020.",
                 "function_calls": [{"functionName": "create_action_item", "arguments": {},
                                     "result": {"action_item_id": "ACT-5300"}}]},
                {"role": "user", "content": "So TKT-1020 has ACT-5300 now, and ACT-5301?"}]
    faults = user_faults({"messages": messages, "termination": {"reason": "max_turns"}}, case, TOOLS)
    assert [(fault["turn"], fault["detail"].split("'")[1]) for fault in faults] == [(1, "TKT-1020"), (2, "ACT-5301")]


def test_what_counts_as_a_stated_value():
    found = stated_values("Ticket TKT-1042, order ORD-0042, bob@contoso.example, 2026-10-22, 22/10/2026, "
                          "March 5, 2027, 1,250 euros, option 2, 45 minutes")
    assert [(kind, written) for kind, written, _ in found] == [
        ("id", "TKT-1042"), ("id", "ORD-0042"), ("email", "bob@contoso.example"), ("date", "2026-10-22"),
        ("date", "22/10/2026"), ("date", "March 5, 2027"), ("number", "1,250")]


@pytest.mark.parametrize("text, question", [
    ("What is the **priority**?\n1. Low\n2. High", "What is the **priority**?"),
    ("Please confirm: update TKT-1 with\n- priority: High\nShall I go ahead? (yes/no)", "Shall I go ahead?"),
    ("Done: created TKT-1063.\nAnything else?", None),
    ("Is there anything else I can help you with?", None),
    ("Done: created TKT-1063.", None),
])
def test_the_bot_asks_something_when_its_last_sentence_is_a_question_that_is_no_closing_offer(text, question):
    assert open_question(text) == question


def test_without_tools_every_required_expected_call_is_a_write_and_no_argument_has_an_enum():
    entry = BY_NAME["stops_early"]
    assert [fault["check"] for fault in user_faults(entry["conversation"], entry["case"])] == ["ended_early"]
    entry = BY_NAME["contradicts_instructions"]
    assert user_faults(entry["conversation"], entry["case"]) == []


def test_a_mistake_the_case_plans_is_no_contradiction():
    entry = BY_NAME["contradicts_instructions"]
    planned = {**entry["case"], "user_mistakes": {"priority": "Medium"}}
    assert user_faults(entry["conversation"], planned, TOOLS) == []


def test_the_user_review_verdict_becomes_a_fault_at_its_turn():
    messages = BY_NAME["stops_early"]["conversation"]["messages"]
    review = {"fault": True, "check": "other", "turn": 2, "reason": "it answered a question nobody asked"}
    assert judged_faults(review, messages) == [{"check": "user_review:other", "turn": 2, "message_index": 3,
                                                "detail": "it answered a question nobody asked"}]
    assert judged_faults({**review, "fault": False}, messages) == judged_faults(None, messages) == []


def _row(entry, rules, **options):
    row = score_conversation(entry["conversation"], entry["case"], rules)
    return with_user_faults({**row, "judges": {"status": "not run"}}, entry["conversation"], entry["case"], rules,
                            **options)


def test_a_row_with_a_fault_is_left_out_unless_kept_and_a_quarantined_case_always(offline_findings_counted):
    rules = Rules(tools=TOOLS)
    faulty, clean = BY_NAME["stops_early"], BY_NAME["stops_early_near_miss_bot_gave_up"]
    assert _row(faulty, rules, include_user_faults=False)["excluded"] == "user_fault"
    kept = _row(faulty, rules, include_user_faults=True)
    assert kept["excluded"] is None and kept["user_faults"][0]["check"] == "ended_early"
    assert _row(clean, rules, include_user_faults=False)["excluded"] is None
    quarantine = Rules(tools=TOOLS, labels=({"kind": "quarantined_case", "case_id": "create_ticket-001"},))
    assert _row(faulty, quarantine, include_user_faults=False)["excluded"] == "quarantined"   # quarantine wins
    assert _row(clean, quarantine, include_user_faults=True)["excluded"] == "quarantined"
    elsewhere = Rules(tools=TOOLS, labels=({"kind": "quarantined_case", "case_id": "create_ticket-001",
                                            "scenario_name": "another_scenario"},))
    assert _row(clean, elsewhere, include_user_faults=False)["excluded"] is None


def test_a_machinery_error_is_neither_checked_nor_left_out():
    entry = BY_NAME["stops_early"]
    broken = {**entry["conversation"], "termination": {"reason": "llm_error", "turns": 3}}
    row = score_conversation(broken, entry["case"], Rules(tools=TOOLS))
    assert with_user_faults(row, broken, entry["case"], Rules(tools=TOOLS), include_user_faults=False)[
        "user_faults"] == []
    assert row["excluded"] is None


def test_a_case_whose_scenario_is_unknown_is_not_checked_for_what_needs_it():
    entry = BY_NAME["invents_an_id"]
    unknown = {**entry["case"], "scenario_known": False}
    assert [fault["check"] for fault in user_faults(entry["conversation"], entry["case"], TOOLS)] == [
        "invented_value", "ended_early"]
    # TKT-1020 is never flagged where what the user was told is not known; ending early still is
    assert [fault["check"] for fault in user_faults(entry["conversation"], unknown, TOOLS)] == ["ended_early"]
    assert checks_not_run(unknown) == {"invented_value": "the user's scenario is unknown",
                                       "contradicted_instructions": "the user's scenario is unknown"}
    contradicting = BY_NAME["contradicts_instructions"]
    assert user_faults(contradicting["conversation"], {**contradicting["case"], "scenario_known": False}, TOOLS) == []
    stopping = BY_NAME["stops_early"]   # ended_early reads the expected calls, not the scenario
    assert [fault["check"] for fault in user_faults(stopping["conversation"],
                                                    {**stopping["case"], "scenario_known": False}, TOOLS)] == [
        "ended_early"]
    without = {**stopping["case"], "scenario_known": False, "reference": False, "expected_function_calls": []}
    assert list(checks_not_run(without)) == ["invented_value", "ended_early", "contradicted_instructions"]
    assert checks_not_run(entry["case"]) == {}


def test_a_row_says_which_checks_did_not_run_and_a_trace_is_not_checked_at_all(offline_findings_counted):
    rules = Rules(tools=TOOLS)
    entry = BY_NAME["contradicts_instructions"]
    unknown = {**entry, "case": {**entry["case"], "scenario_known": False}}
    assert _row(entry, rules, include_user_faults=False)["excluded"] == "user_fault"
    row = _row(unknown, rules, include_user_faults=False)
    assert (row["user_faults"], row["excluded"]) == ([], None)
    assert row["user_checks_not_run"] == checks_not_run(unknown["case"])
    # an imported run without its tasks: no reference, the scenario unknown; a trace: a real user, nothing to run
    untasked = {**entry["case"], "scenario_known": False, "reference": False, "expected_function_calls": []}
    row = score_conversation(entry["conversation"], untasked, rules)
    assert list(with_user_faults(row, entry["conversation"], untasked, rules, False)["user_checks_not_run"]) == [
        "invented_value", "ended_early", "contradicted_instructions"]
    trace = {"case_id": entry["case"]["case_id"], "reference": False}
    row = score_conversation(entry["conversation"], trace, rules)
    assert with_user_faults(row, entry["conversation"], trace, rules, False)["user_checks_not_run"] == {}


def test_a_run_says_how_many_conversations_a_check_did_not_run_on(tmp_path):
    entry = BY_NAME["contradicts_instructions"]
    dataset = write_jsonl(tmp_path / "dataset.jsonl", [{**entry["case"], "scenario_known": False}])
    conversations = write_jsonl(tmp_path / "conversations.jsonl", [entry["conversation"]])
    result = evaluate(dataset, conversations, tmp_path / "r.json", suite=SUITE, progress=False)
    assert result.results["counts"]["user_unchecked"] == {"invented_value": 1, "contradicted_instructions": 1}
    assert result.results["counts"]["user_faults"] == 0
    assert ("simulated-user checks not run where the case does not know what its user was told or what it expected "
            "(their users are unchecked, not clean): contradicted_instructions on 1 conversation, invented_value on "
            "1 conversation") in result.summary()


@pytest.fixture
def run_files(tmp_path):
    """The transcripts as one run: three conversations with user faults, four without."""
    cases = {entry["case"]["case_id"]: entry["case"] for entry in TRANSCRIPTS}
    dataset = write_jsonl(tmp_path / "dataset.jsonl", list(cases.values()))
    conversations = write_jsonl(tmp_path / "conversations.jsonl",
                                [{**entry["conversation"], "trial": trial} for trial, entry in enumerate(TRANSCRIPTS)])
    return tmp_path, dataset, conversations


def test_a_run_leaves_the_faulty_conversations_out_of_the_bot_metrics_and_counts_them(run_files,
                                                                                       offline_findings_counted):
    tmp, dataset, conversations = run_files
    result = evaluate(dataset, conversations, tmp / "r.json", suite=SUITE, progress=False)
    results = result.results
    faulty = [row for row in results["rows"] if row["user_faults"]]
    assert len(faulty) == 3 and all(row["excluded"] == "user_fault" for row in faulty)
    assert results["counts"]["user_faults"] == 3 and results["counts"]["scored"] == len(TRANSCRIPTS)
    counted = [row for row in results["rows"] if not row["excluded"]]
    assert results["over"]["Success"] == len(counted) == 4
    assert results["metrics"]["Success"] == pytest.approx(sum(row["Success"] for row in counted) / 4)
    assert sum(entry["user_faults"] for entry in results["scenarios"]) == 3
    assert results["config"]["include_user_faults"] is False and results["config"]["judge_model"] is None
    lines = result.summary()
    assert "3 conversations left out for simulated-user faults (--include-user-faults keeps them)" in lines
    assert any(line.strip().startswith("Success") and "over 4 of 7 conversations" in line for line in lines), lines

    kept = evaluate(dataset, conversations, tmp / "kept.json", suite=SUITE, progress=False, include_user_faults=True)
    assert kept.results["counts"]["user_faults"] == 0 and kept.results["counts"]["user_faults_kept"] == 3
    assert kept.results["over"]["Success"] == len(TRANSCRIPTS)
    assert all(row["excluded"] is None for row in kept.results["rows"])
    assert sum(bool(row["user_faults"]) for row in kept.results["rows"]) == 3
    assert "3 conversations with simulated-user faults kept in the metrics (--include-user-faults)" in kept.summary()


def test_a_check_below_the_bar_on_real_bots_is_to_check_and_leaves_the_conversation_in_the_metrics(run_files):
    from lobeval.scoring import trust

    # lobeval.scoring.trust's own table: ended_early and contradicted_instructions were never measured right on real bots
    assert not trust.reported("user_fault:ended_early") and not trust.reported("user_fault:contradicted_instructions")
    tmp, dataset, conversations = run_files
    result = evaluate(dataset, conversations, tmp / "r.json", suite=SUITE, progress=False)
    results = result.results
    found = {(row["case_id"], row["trial"]): ([fault["check"] for fault in row["user_faults"]],
                                                [fault["check"] for fault in row["user_faults_to_check"]], row["excluded"])
             for row in results["rows"] if row["user_faults"] or row["user_faults_to_check"]}
    # the transcript that invents an ID and then stops early: left out for the invented value alone
    assert sorted(found.values()) == [([], ["contradicted_instructions"], None), ([], ["ended_early"], None),
                                      (["invented_value"], ["ended_early"], "user_fault")]
    stops = next(row for row in results["rows"] if row["user_faults_to_check"])
    assert stops["user_faults_to_check"][0]["precision"] == list(
        trust.PRECISION[f"user_fault:{stops['user_faults_to_check'][0]['check']}"])
    # in the metrics and not in the gate's user-fault rate: only invented_value (a fault on real bots) left one out
    assert results["counts"]["user_faults"] == 1 and results["to_check"]["user_faults"] == 3
    assert results["over"]["Success"] == len(TRANSCRIPTS) - 1
    assert ("to check by hand: 3 simulated-user faults (found without a model by checks not right often enough on "
            "real bots' conversations to count: in no figure and not in the gate)") in result.summary()


def test_rescoring_with_labels_keeps_the_marks_and_the_switch(run_files):
    from lobeval.evaluation.evaluate import rescore_with_labels

    tmp, dataset, conversations = run_files
    results = read_results(evaluate(dataset, conversations, tmp / "r.json", suite=SUITE, progress=False,
                                    include_user_faults=True).path)
    again = rescore_with_labels(results, tmp / "no-labels.jsonl", tmp / "again.json")   # as the run had it
    assert again["config"]["include_user_faults"] is True and again["counts"]["user_faults"] == 0
    assert [row["user_faults"] for row in again["rows"]] == [row["user_faults"] for row in results["rows"]]


def test_a_case_quarantined_from_the_command_line_is_left_out_of_the_next_evaluation(run_files, capsys):
    """`lobeval quarantine` writes the label; `lobeval evaluate` then leaves the case's conversations out and
    counts them, and quarantine wins over a user fault on the same conversation."""
    import shutil

    from lobeval.cli import main

    tmp, dataset, conversations = run_files
    suite = tmp / "suite"
    shutil.copytree(SUITE, suite)
    (suite / "labels.jsonl").unlink(missing_ok=True)
    faulty = next(entry["case"]["case_id"] for entry in TRANSCRIPTS if entry["faults"])
    assert main(["quarantine", faulty, "--suite", str(suite), "--note", "flaky: the user invents IDs",
                 "--author", "ann"]) == 0
    out = tmp / "q.json"
    assert main(["evaluate", "--dataset", str(dataset), "--conversations", str(conversations), "--suite", str(suite),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    results = read_results(out)
    quarantined = [row for row in results["rows"] if row["case_id"] == faulty]
    assert quarantined and all(row["excluded"] == "quarantined" for row in quarantined)
    assert results["counts"]["quarantined"] == len(quarantined)
    assert results["counts"]["user_faults"] == sum(bool(row["user_faults"]) for row in results["rows"]
                                                   if row["case_id"] != faulty)
    counted = [row for row in results["rows"] if not row["excluded"]]
    assert results["over"]["Success"] == len(counted)
    assert f"{len(quarantined)} conversation" in printed and "quarantined" in printed


PROPOSAL_CASE = {"case_id": "c", "user_instructions": "Your gift card has $129 on it.",
                 "expected_function_calls": [{"functionName": "cancel_reservation", "arguments": {}}]}


def test_a_total_the_user_works_out_from_its_case_and_a_bot_message_is_not_invented():
    conversation = {"function_calls": [], "messages": [
        {"role": "user", "content": "Cancel my booking"},
        {"role": "assistant", "content": "Cancelling refunds $567 to your gift card. Shall I proceed?"},
        {"role": "user", "content": "So the card would hold $696? And what about 700?"}]}
    # 696 = 129 (its case) + 567 (the bot); 700 is no sum of two or three of them
    assert [fault["detail"] for fault in user_faults(conversation, PROPOSAL_CASE)] == [
        "the user said number '700', which is neither in its case nor said by the bot before"]


@pytest.mark.parametrize("reply, flagged", [("No, thanks. ###STOP###", []), ("Fine. ###STOP###", ["ended_early"])])
def test_ending_after_turning_down_the_bots_yes_no_proposal_is_no_fault(reply, flagged):
    conversation = {"function_calls": [], "termination": {"reason": "user_finished"}, "messages": [
        {"role": "user", "content": "Cancel my booking"},
        {"role": "assistant", "content": "That cancels reservation ABC. Would you like me to proceed?"},
        {"role": "user", "content": reply}]}
    assert [fault["check"] for fault in user_faults(conversation, PROPOSAL_CASE)] == flagged
