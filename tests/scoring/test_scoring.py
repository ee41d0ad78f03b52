"""Every rule of SPEC §8, each with a hand-computed case."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobeval.scoring.scoring import Rules, agrees, pair_calls, score_conversation

TOOLS = {
    "create_ticket": {"effect": "write", "function": {"name": "create_ticket", "parameters": {"properties": {
        "title": {"type": "string"}, "priority": {"type": "string", "enum": ["Low", "High"]},
        "due": {"type": "string", "format": "date"}, "hours": {"type": "integer"}, "visible": {"type": "boolean"}}}}},
    "create_action": {"effect": "write", "function": {"name": "create_action", "parameters": {}}},
    "delete_ticket": {"effect": "write", "function": {"name": "delete_ticket", "parameters": {}}},
    "get_ticket": {"effect": "read", "function": {"name": "get_ticket", "parameters": {}}},
    "get_departments": {"effect": "read", "function": {"name": "get_departments", "parameters": {}}},
    "start_over": {"effect": "read", "function": {"name": "start_over", "parameters": {}}},
}
RULES = Rules(ignored=frozenset({"start_over"}), optional_effects=frozenset({"read"}), tools=TOOLS)


def call(name, error=None, result=None, **arguments):
    return {"functionName": name, "arguments": arguments, "result": result or {}, "error": error}


def expect(name, optional=False, **arguments):
    return {"functionName": name, "arguments": arguments, **({"optional": True} if optional else {})}


def score(expected, actual, *, rules=RULES, reason="user_finished", text="", **case):
    conversation = {"case_id": "c-1", "trial": 0, "function_calls": actual,
                    "messages": [{"role": "assistant", "content": text}], "termination": {"reason": reason, "turns": 3}}
    return score_conversation(conversation, {"scenario_name": "s", "expected_function_calls": expected, **case}, rules)


def metrics(row):
    return {k: row[k] for k in ("Recall_fn", "Precision_fn", "Recall_args", "Precision_args", "Reliability", "Success")}


# --- argument agreement ---------------------------------------------------------------------

@pytest.mark.parametrize("expected, actual, schema, verdict", [
    ("Printer jams", "  printer   JAMS ", None, True),          # trim, case-fold, collapse whitespace
    (True, "yes", None, True), (False, "No", None, True), (True, "false", None, False),
    ("true", True, None, True), ("yes", "no", None, False),
    (4, "4.0", None, True), (4, 5, None, False), ("4", 4, {"type": "integer"}, True),
    ("2024-05-01", "May 1, 2024", None, True), ("2024-05-01", "01/05/2024", None, True),
    ("2024-05-01", "05/01/2024", None, True), ("2024-05-01", "2024-05-02", None, False),
    ("2024-05-01", "2024-05-01T09:30:00Z", {"format": "date"}, True),
    ("High", "high", {"enum": ["Low", "High"]}, True),
    ("TKT-1042", "TKT-1043", None, False),                        # a single token must be equal
    ("TKT-1042", "tkt-1042", None, True),
    ("Printer on floor three jams daily", "Printer on floor three jams dayly", None, True),  # fuzzy ≥ 0.8
    ("Printer on floor three jams daily", "VPN drops", None, False),
    ({"a": 1, "b": "x"}, {"a": 1.0, "b": "X", "extra": 2}, None, True),   # objects on expected keys only
    ({"a": 1}, {"b": 1}, None, False),
    ([1, "a"], [1, "A"], None, True), ([1, "a"], ["a", 1], None, False), ([1], [1, 2], None, False),
    ({"$oneOf": ["High", "Urgent"]}, "urgent", None, True), ({"$oneOf": ["High"]}, "Low", None, False),
    ({"$match": "any", "value": None}, "anything", None, True),
    ({"$match": "exact", "value": "Printer jams now"}, "Printer jams now!", None, False),
    ({"$match": "fuzzy", "value": "Printer jams now", "threshold": 0.9}, "Printer jams now!", None, True),
    ({"$match": "fuzzy", "value": "abc def", "threshold": 0.99}, "abd def", None, False),
    (None, None, None, True), (None, "x", None, False), ("x", None, None, False),
    # equal values agree before any date, number or fuzzy comparison (issue 27.6: τ-bench user ids)
    ("ethan_martin_2396", "ethan_martin_2396", None, True), ("john_may_1987", "john_may_1987", None, True),
    ("john_may_1987", "John_May_1987 ", None, True), ("john_may_1987", "john_may_1988", None, False),
    ("May 2024", "may 2024", {"format": "date"}, True), ("dec 5", "dec 6", None, False),
    # dates only when both sides parse as one; what a date leaves out is never taken from today
    ("2024-05-01", "the first of May", None, False), ("May 2024", "2024-05-01", None, True),
    ("5 May", "May 5", None, True), ("5 May", "2024-05-05", None, False),
    # whole numbers exact, however large; a decimal within a float's rounding
    (10**20, 10**20 + 1, None, False), (2**64 + 1, str(2**64 + 1), None, True), (1000000000, 1000000001, None, False),
    (0.1, "0.1", None, True), (0.3, 0.1 + 0.2, None, True), (4, 4.5, None, False),
])
def test_argument_agreement(expected, actual, schema, verdict):
    assert agrees(expected, actual, RULES, schema) is verdict


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.integers(), st.floats(allow_nan=False), st.booleans(), st.dates().map(str),
                 st.from_regex(r"[a-z]{2,8}_(jan|may|dec)_[0-9]{2,4}", fullmatch=True)))
def test_any_value_agrees_with_itself(value):
    assert agrees(value, value, RULES, None)
    assert agrees(value, value, RULES, {"format": "date"})


def test_ref_resolves_against_the_latest_earlier_successful_call():
    calls = [call("create_ticket", result={"ticket_id": "TKT-1"}),
             call("create_ticket", error="invalid", result=None),
             call("create_action", ticket_id="TKT-1")]
    row = score([expect("create_ticket"), expect("create_action", ticket_id={"$ref": "create_ticket.result.ticket_id"})],
                calls)
    pair = next(p for p in row["pairs"] if p["functionName"] == "create_action")
    assert pair["arguments"]["ticket_id"] == {"expected": {"$ref": "create_ticket.result.ticket_id", "resolved": "TKT-1"},
                                              "actual": "TKT-1", "status": "correct"}
    # No earlier call of that function: the reference cannot hold.
    row = score([expect("create_action", ticket_id={"$ref": "create_ticket.result.ticket_id"})],
                [call("create_action", ticket_id="TKT-1")])
    assert row["wrong_arguments"] == [{"functionName": "create_action", "argument": "ticket_id",
                                       "expected": {"$ref": "create_ticket.result.ticket_id", "resolved": None},
                                       "actual": "TKT-1"}]


# --- pairing --------------------------------------------------------------------------------

def test_pairing_maximises_correct_arguments():
    # Two expected tickets, two actual ones in the other order: pairs follow the arguments.
    row = score([expect("create_ticket", title="A", priority="High"), expect("create_ticket", title="B", priority="Low")],
                [call("create_ticket", title="B", priority="Low"), call("create_ticket", title="A", priority="High")])
    assert [(p["expected_index"], p["actual_index"]) for p in row["pairs"]] == [(0, 1), (1, 0)]
    assert metrics(row) == {"Recall_fn": 1.0, "Precision_fn": 1.0, "Recall_args": 1.0, "Precision_args": 1.0,
                            "Reliability": 1.0, "Success": 1}


def test_pairing_prefers_a_call_that_did_not_fail_among_equals():
    row = score([expect("create_ticket", title="A")],
                [call("create_ticket", error="backend down", title="A"), call("create_ticket", title="A")])
    assert row["pairs"][0]["actual_index"] == 1 and row["Success"] == 1
    # The failed attempt is an unpaired write, but not a successful one: Success holds, Precision_fn pays.
    assert row["unpaired_actual"] == [{"actual_index": 0, "functionName": "create_ticket", "effect": "write",
                                       "allowed": False, "failed": True, "turn": None}]
    assert row["Precision_fn"] == 0.5


def test_names_compare_case_insensitively_without_plugin_prefix_and_ignored_functions_drop():
    row = score([expect("TicketPlugin-Create_Ticket", title="A"), expect("start_over")],
                [call("start_over"), call("create_ticket", title="a")])
    assert metrics(row)["Recall_fn"] == 1.0 and metrics(row)["Precision_fn"] == 1.0
    assert row["pairs"][0]["actual_index"] == 1  # indexes stay those of the conversation


def test_ordered_pairs_keep_the_expected_order():
    expected = [expect("create_ticket", title="A"), expect("create_action", title="x")]
    actual = [call("create_action", title="x"), call("create_ticket", title="A")]
    assert score(expected, actual)["Recall_fn"] == 1.0
    row = score(expected, actual, ordered=True)
    assert len(row["pairs"]) == 1 and row["Recall_fn"] == 0.5 and row["Success"] == 0


def test_pair_calls_ordered_is_the_best_common_subsequence():
    weights = np.array([[0, 5, 0], [3, 0, 0], [0, 0, 2]], dtype=float)
    assert pair_calls(weights, ordered=True) == [(0, 1), (2, 2)]        # 5 + 2 beats 3 + 2
    assert pair_calls(weights, ordered=False) == [(0, 1), (1, 0), (2, 2)]


# --- metrics --------------------------------------------------------------------------------

def test_metrics_hand_computed():
    # Expected: create_ticket(title, priority, due) and create_action(title). Actual: a ticket with a
    # wrong priority and an extra argument, an unpaired write and an unpaired, allowed read.
    expected = [expect("create_ticket", title="A", priority="High", due="2024-05-01"), expect("create_action", title="x")]
    actual = [call("get_departments"), call("create_ticket", title="A", priority="Low", due="1 May 2024", notes="n"),
              call("delete_ticket")]
    row = score(expected, actual, allowed_function_calls=["get_departments"])
    # Recall_fn 1/2; Precision_fn 1 paired / (1 + 1 unallowed unpaired); Recall_args 2 correct of 3 expected;
    # Precision_args 2 correct / 4 actual arguments; Reliability (0.5 + 2/3) / 2.
    assert metrics(row) == pytest.approx({"Recall_fn": 0.5, "Precision_fn": 0.5, "Recall_args": 2 / 3,
                                          "Precision_args": 0.5, "Reliability": (0.5 + 2 / 3) / 2, "Success": 0})
    assert row["wrong_arguments"] == [{"functionName": "create_ticket", "argument": "priority", "expected": "High",
                                       "actual": "Low"}]
    assert row["extra_arguments"] == [{"functionName": "create_ticket", "argument": "notes", "actual": "n",
                                       "allowed": False}]
    assert row["unpaired_expected"] == [{"expected_index": 1, "functionName": "create_action", "optional": False}]
    assert [(u["functionName"], u["allowed"]) for u in row["unpaired_actual"]] == [("get_departments", True),
                                                                                  ("delete_ticket", False)]
    assert row["checks"] == {"calls_correct": False, "outputs_said": True, "no_forbidden_calls": True,
                             "no_unallowed_writes": False, "ended_normally": True}


def test_missing_argument_counts_against_recall_args():
    row = score([expect("create_ticket", title="A", due="2024-05-01")], [call("create_ticket", title="A")])
    assert row["Recall_args"] == 0.5 and row["Precision_args"] == 1.0 and row["Success"] == 0
    assert row["missing_arguments"] == [{"functionName": "create_ticket", "argument": "due", "expected": "2024-05-01"}]


def test_empty_denominators():
    # Nothing expected, nothing done: every ratio is 1.0.
    assert metrics(score([], [])) == {"Recall_fn": 1.0, "Precision_fn": 1.0, "Recall_args": 1.0,
                                      "Precision_args": 1.0, "Reliability": 1.0, "Success": 1}
    # Required calls, none paired: argument ratios are 0.0, not 1.0.
    row = score([expect("create_ticket", title="A")], [call("get_departments")])
    assert metrics(row) == {"Recall_fn": 0.0, "Precision_fn": 0.0, "Recall_args": 0.0, "Precision_args": 0.0,
                            "Reliability": 0.0, "Success": 0}
    # A paired call that expects no arguments and gets none: 1.0.
    assert score([expect("create_action")], [call("create_action")])["Recall_args"] == 1.0


def test_optional_calls_free_when_absent_counted_when_made():
    expected = [expect("get_ticket", ticket_id="TKT-1"), expect("create_action", optional=True, title="x"),
                expect("create_ticket", title="A")]
    row = score(expected, [call("create_ticket", title="A")])  # get_ticket is optional by its read effect
    assert metrics(row) == {"Recall_fn": 1.0, "Precision_fn": 1.0, "Recall_args": 1.0, "Precision_args": 1.0,
                            "Reliability": 1.0, "Success": 1}
    # Made, with a wrong argument: counted in the argument ratios, yet Success does not require it.
    row = score(expected, [call("get_ticket", ticket_id="TKT-2"), call("create_ticket", title="A")])
    assert (row["Recall_fn"], row["Recall_args"], row["Success"]) == (1.0, 0.5, 1)


def test_success_checks_one_by_one():
    expected = [expect("create_ticket", title="A")]
    done = [call("create_ticket", title="A")]
    assert score(expected, done, text="Created TKT-1,042.", expected_outputs=["tkt-1042"])["Success"] == 1
    missing = score(expected, done, text="Done.", expected_outputs=["TKT-1042"])
    assert missing["Success"] == 0 and missing["missing_outputs"] == ["TKT-1042"]
    forbidden = score(expected, done + [call("delete_ticket", error="refused")], forbidden_function_calls=["delete_ticket"])
    assert forbidden["Success"] == 0 and forbidden["forbidden_calls"] == [{"actual_index": 1, "functionName": "delete_ticket"}]
    assert score(expected, [call("create_ticket", error="bad", title="A")])["Success"] == 0   # attempted, not done
    assert score(expected, done, reason="max_turns")["Success"] == 0
    extra_write = score(expected, done + [call("create_action")])
    assert extra_write["Success"] == 0 and not extra_write["checks"]["no_unallowed_writes"]
    assert score(expected, done + [call("get_departments")])["Success"] == 1   # an extra read is not a write


def test_labels_allow_extra_calls_and_arguments():
    expected = [expect("create_ticket", title="A")]
    actual = [call("create_ticket", title="A", notes="n"), call("create_action")]
    before = score(expected, actual)
    assert (before["Precision_fn"], before["Precision_args"]) == (0.5, 0.5)
    labels = ({"kind": "allowed_extra_call", "functionName": "Create_Action", "scenario_name": "s"},
              {"kind": "allowed_extra_argument", "functionName": "create_ticket", "argument": "notes"})
    after = score(expected, actual, rules=Rules(**{**RULES.__dict__, "labels": labels}))
    assert (after["Precision_fn"], after["Precision_args"], after["Success"]) == (1.0, 1.0, 1)
    other_scenario = ({"kind": "allowed_extra_call", "functionName": "create_action", "scenario_name": "other"},)
    assert score(expected, actual, rules=Rules(**{**RULES.__dict__, "labels": other_scenario}))["Precision_fn"] == 0.5


def test_target_error_is_scored_with_success_zero_and_machinery_error_is_not_scored():
    done = [call("create_ticket", title="A")]
    broken = score([expect("create_ticket", title="A")], done, reason="target_error")
    assert (broken["status"], broken["Reliability"], broken["Success"]) == ("scored", 1.0, 0)
    machinery = score([expect("create_ticket", title="A")], done, reason="llm_error")
    assert machinery["status"] == "error" and machinery["Reliability"] is None


# --- conversations without a reference ---------------------------------------------------------

def test_a_conversation_without_a_reference_has_no_metric_only_the_checks_that_need_none():
    actual = [call("create_ticket", title="x"), call("get_ticket", error="not found"), call("delete_ticket")]
    conversation = {"case_id": "prod-1", "trial": 0, "function_calls": [{**c, "turn": 1} for c in actual],
                    "messages": [{"role": "assistant", "content": "Done."}], "termination": {"reason": "imported"}}
    row = score_conversation(conversation, {"case_id": "prod-1", "reference": False}, RULES)
    assert row["reference"] is False and row["status"] == "scored"
    assert all(value is None for value in metrics(row).values())   # never 1.0 from an empty denominator
    assert row["checks"] == {"no_failed_calls": False, "no_forbidden_calls": True, "ended_normally": True}
    assert row["failed_calls"] == [{"actual_index": 1, "functionName": "get_ticket", "error": "not found", "turn": 1}]
    assert row["pairs"] == row["unpaired_actual"] == row["unpaired_expected"] == []
    # inline forbidden and allowed calls apply: delete_ticket is forbidden, create_ticket is an unallowed write
    row = score_conversation(conversation, {"case_id": "prod-1", "reference": False, "forbidden_function_calls":
                                            ["delete_ticket"], "allowed_function_calls": ["delete_ticket"]}, RULES)
    assert row["checks"] == {"no_failed_calls": False, "no_forbidden_calls": False, "no_unallowed_writes": False,
                             "ended_normally": True}
    assert row["forbidden_calls"] == [{"actual_index": 2, "functionName": "delete_ticket"}]
    assert [w["functionName"] for w in row["unallowed_writes"]] == ["create_ticket"]


def test_every_scored_row_lists_its_failed_calls():
    row = score([expect("create_ticket", title="x")], [call("create_ticket", error="boom", title="x")])
    assert row["reference"] is True
    assert row["failed_calls"] == [{"actual_index": 0, "functionName": "create_ticket", "error": "boom", "turn": None}]
