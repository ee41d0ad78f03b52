"""`lobeval bench claims FILE`: precision and recall with their Wilson intervals, disputed labels counted neither way,
precision by basis, the simulated-user checks where their faults are labelled, and each kind of offline finding
against lobeval.scoring.trust's bar (docs/cli.md, docs/formats.md "Claims benchmark")."""
import json

import pytest

from lobeval.workflow.bench import bench_claims, format_claims, share, wilson
from lobeval.cli import main

RENEW = {"type": "function", "effect": "write", "function": {
    "name": "renew_loan", "description": "Renew a library loan.",
    "parameters": {"type": "object", "properties": {"loan_id": {"type": "string"}}}}}


def library(case_id, reply, calls=(), expected=None, **extra):
    return {"case_id": case_id, "kind": "real", "tools": [RENEW], "function_calls": [],
            "messages": [{"role": "user", "content": "Please renew LN-4."},
                         {"role": "assistant", "content": reply, "function_calls": list(calls)}],
            "expected": {"claimed_not_done": [], "done_not_told": [], **(expected or {})}, **extra}


def renew(loan):
    return {"functionName": "renew_loan", "arguments": {"loan_id": loan}, "result": {"ok": True}}


def write(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def test_wilson_intervals_as_computed_by_hand():
    # 2 of 3: centre (2/3 + 1.96²/6) / (1 + 1.96²/3) = 0.5731, half-width 1.96·√(2/27 + 1.96²/36) / 2.2805 = 0.3654
    assert wilson(2, 3) == pytest.approx((0.2077, 0.9385), abs=5e-4)
    assert wilson(0, 1) == pytest.approx((0.0, 0.7935), abs=5e-4) and wilson(0, 0) is None
    assert share(5, 9) == "0.556 [0.267, 0.811] (5 of 9)" and share(0, 0) == "— (0 of 0)"


def test_a_disputed_label_counts_neither_way_in_both_directions(tmp_path):
    records = [
        # "I've renewed LN-4." with no call: found, labelled → right; "LN-9 has been renewed too." found, disputed
        library("a", "I've renewed LN-4. LN-9 has been renewed too.",
                expected={"claimed_not_done": ["I've renewed LN-4."], "disputed": ["LN-9 has been renewed too."]}),
        # a renewal never told: found, but only one labeller said so → neither right nor wrong
        library("b", "Anything else?", [renew("LN-4")], expected={"done_not_told_disputed": [0]}),
        # a renewal never told, labelled → right; a disputed one the rules do not find is no miss
        library("c", "Anything else?", [renew("LN-4")], expected={"done_not_told": [0], "disputed": ["Anything"]}),
    ]
    figures = bench_claims([write(tmp_path / "l.jsonl", records)])
    assert figures["directions"] == {
        "claimed_not_done": {"found": 1, "false": 0, "missed": 0, "disputed": 1},
        "done_not_told": {"found": 1, "false": 0, "missed": 0, "disputed": 1}}
    assert figures["by_basis"] == {"no_call": [1, 1]}   # the disputed sentence is in no basis's count
    assert format_claims(figures)[1:3] == [
        "claimed not done: precision 1.000 [0.207, 1.000] (1 of 1), recall 1.000 [0.207, 1.000] (1 of 1); "
        "1 found only a disputed label",
        "done not told: precision 1.000 [0.207, 1.000] (1 of 1), recall 1.000 [0.207, 1.000] (1 of 1); "
        "1 found only a disputed label"]


CASE = {"case_id": "renew-1", "scenario_name": "renew", "user_instructions": "Renew loan LN-4. Your member number "
        "is 55012.", "expected_function_calls": [{"functionName": "renew_loan", "arguments": {"loan_id": "LN-4"}}]}


def talk(case_id, user, faults, disputed=()):
    record = library(case_id, "Done: LN-4 is renewed.", [renew("LN-4")])
    record["messages"] = [{"role": "user", "content": user}, *record["messages"][1:]]
    return {**record, "case": CASE, "user_faults": faults, "user_faults_disputed": list(disputed)}


def test_the_simulated_user_checks_are_measured_where_faults_are_labelled(tmp_path):
    records = [
        # a member number nobody gave it, labelled → right
        talk("u1", "Renew LN-4, member 77310.", [{"check": "invented_value", "message_index": 0, "detail": "77310"}]),
        # a number nobody gave it that the labellers did not call a fault → wrong
        talk("u2", "Renew LN-4, card 4455.", []),
        # flagged where only one labeller put a fault → neither
        talk("u3", "Renew LN-4 on 12 March 2031.", [], [{"check": "invented_value", "message_index": 0}]),
        # its own number, not flagged; a fault no check of lobeval's looks for → labelled, not found
        talk("u4", "Renew LN-4, member 55012.", [{"check": "other", "message_index": 0, "detail": "spoke as the bot"}]),
        # faults not labelled (no scenario): not measured at all
        talk("u5", "Renew LN-4, card 9999.", None),
    ]
    figures = bench_claims([write(tmp_path / "u.jsonl", records)])
    assert figures["user_faults"] == {
        "conversations": 4,
        "flagged": {"invented_value": {"right": 1, "wrong": 1, "disputed": 1},
                    "ended_early": {"right": 0, "wrong": 0, "disputed": 0},
                    "contradicted_instructions": {"right": 0, "wrong": 0, "disputed": 0}},
        "labelled": {"invented_value": [1, 1], "other": [0, 1]}}
    lines = format_claims(figures)
    start = lines.index("simulated-user checks: 4 conversations with labelled user faults")
    assert lines[start + 1:start + 5] == [
        "invented value: right 0.500 [0.095, 0.905] (1 of 2) of flagged, recall 1.000 [0.207, 1.000] (1 of 1) of "
        "labelled; 1 at a disputed label",
        "ended early: right — (0 of 0) of flagged, recall — (0 of 0) of labelled",
        "contradicted instructions: right — (0 of 0) of flagged, recall — (0 of 0) of labelled",
        "labelled with no check of lobeval's: other 1 (flagged by another check at that message: 0)"]
    assert "offline finding user_fault:invented_value: right 1 of 2: to check (below 0.9, fewer than 5 found)" in lines


def test_each_offline_kind_is_set_against_the_bar(tmp_path):
    # six renewals never told, all labelled: 6 of 6 ≥ 0.9 → a fault; one wrong claim of no call: 0 of 1 → to check
    records = [library(f"t{n}", "Anything else?", [renew("LN-4")], expected={"done_not_told": [0]}) for n in range(6)]
    records.append(library("t6", "I've renewed LN-4."))
    lines = format_claims(bench_claims([write(tmp_path / "t.jsonl", records)]))
    assert [line for line in lines if line.startswith("offline finding")] == [
        "offline finding claimed_not_done:no_call: right 0 of 1: to check (below 0.9, fewer than 5 found)",
        "offline finding done_not_told: right 6 of 6: a fault"]


def test_a_labelled_user_fault_with_a_bad_message_index_names_the_line_and_field(tmp_path, capsys):
    bad = talk("u1", "Renew LN-4.", [{"check": "invented_value", "message_index": "first"}])
    assert main(["bench", "claims", str(write(tmp_path / "bad.jsonl", [bad]))]) == 2
    assert capsys.readouterr().err == (f"lobeval bench: error: {tmp_path / 'bad.jsonl'}: line 1: field "
                                       "'user_faults[0].message_index': must be an integer, got \"first\"\n")
