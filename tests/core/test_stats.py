"""Run-level numbers: pass^k, means over scored conversations, intervals over cases."""
import numpy as np
import pytest

from lobeval.core.stats import interval, pass_hat_k, summarise, unscored_reason


def test_pass_hat_k():
    assert pass_hat_k(2, 3, 1) == pytest.approx(2 / 3)
    assert pass_hat_k(2, 3, 2) == pytest.approx(1 / 3)   # C(2,2)/C(3,2)
    assert pass_hat_k(2, 3, 3) == 0.0


def test_summarise_means_errors_and_pass_k():
    def row(case, trial, success, status="scored", scenario="s"):
        values = {m: (None if status == "error" else float(success)) for m in
                  ("Reliability", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args", "Success")}
        return {"case_id": case, "trial": trial, "scenario_name": scenario, "status": status,
                "termination": "llm_error" if status == "error" else "user_finished", **values}
    rows = [row("a", 0, 1), row("a", 1, 1), row("a", 2, 0), row("b", 0, 1), row("b", 1, 1), row("b", 2, 0, "error")]
    results = summarise(rows)
    assert results["metrics"]["Success"] == pytest.approx(4 / 5)
    assert results["counts"] == {"conversations": 6, "scored": 5, "errors": 1, "unreferenced": 0, "target_errors": 0,
                                 "trials": 3, "user_faults": 0, "quarantined": 0, "user_faults_kept": 0,
                                 "user_unchecked": {}}
    # pass^2: case a C(2,2)/C(3,2) = 1/3, case b C(2,2)/C(2,2) = 1 → mean 2/3; pass^3 only case a: 0.
    assert results["pass_k"]["2"]["value"] == pytest.approx(2 / 3)
    assert results["pass_k"]["3"] == {"value": 0.0, "interval": [0.0, 0.0], "cases": 1}
    assert results["metrics"]["pass^1"] == pytest.approx((2 / 3 + 1) / 2)
    assert results["errors"] == [{"case_id": "b", "trial": 2, "scenario_name": "s", "reason": "llm_error", "error": None}]
    low, high = results["intervals"]["Success"]
    assert low <= 4 / 5 <= high


def test_rows_left_out_of_the_bot_metrics_count_apart_and_in_no_figure():
    def row(case, trial, success, scenario="s", excluded=None, faults=()):
        values = {m: float(success) for m in
                  ("Reliability", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args", "Success")}
        return {"case_id": case, "trial": trial, "scenario_name": scenario, "status": "scored",
                "termination": "user_finished", "excluded": excluded, "user_faults": list(faults),
                "failed_calls": [{"functionName": "x"}] if not success else [], **values}
    fault = {"check": "ended_early", "turn": 2}
    rows = [row("a", 0, 1), row("a", 1, 0, excluded="user_fault", faults=[fault]), row("b", 0, 1),
            row("b", 1, 1, faults=[fault]), row("c", 0, 0, "t", excluded="quarantined"),
            row("c", 1, 0, "t", excluded="quarantined", faults=[fault])]
    results = summarise(rows)
    assert results["metrics"]["Success"] == results["metrics"]["NoFailedCalls"] == 1.0
    assert results["intervals"]["Success"] == [1.0, 1.0]
    assert results["over"]["Success"] == results["over"]["NoFailedCalls"] == 3
    assert results["counts"] == {**results["counts"], "scored": 6, "errors": 0, "user_faults": 1, "quarantined": 2,
                                 "user_faults_kept": 1}
    # pass^2: only case b keeps two trials (a lost one to a user fault, c is quarantined)
    assert results["pass_k"]["2"] == {"value": 1.0, "interval": [1.0, 1.0], "cases": 1}
    by_scenario = {entry["scenario_name"]: entry for entry in results["scenarios"]}
    assert by_scenario["s"]["conversations"] == 4 and by_scenario["s"]["user_faults"] == 1
    assert by_scenario["t"]["quarantined"] == 2 and by_scenario["t"]["Success"] is None


def test_interval_is_none_without_values_and_a_point_for_one_distinct_value():
    assert interval(np.array([])) is None
    assert interval(np.array([0.5, 0.5, 0.5])) == [0.5, 0.5]
    low, high = interval(np.array([0.0, 1.0] * 20))
    assert low < 0.5 < high and 0.3 < low and high < 0.7


def test_no_scored_conversation_gives_no_means():
    rows = [{"case_id": "a", "trial": 0, "scenario_name": "s", "status": "error", "termination": "llm_error"}]
    results = summarise(rows)
    assert all(value is None for value in results["metrics"].values())
    assert results["counts"]["scored"] == 0 and results["counts"]["errors"] == 1 and results["pass_k"] == {}


def test_why_nothing_was_scored():
    assert unscored_reason([]) == "no conversation scored: the run has no conversations"
    rows = [{"case_id": f"c{i}", "trial": 0, "status": "error", "termination": reason,
             "error": "refused\n  " + "x" * 300}
            for i, reason in enumerate(["target_unavailable", "budget_spent", "target_unavailable"])]
    assert unscored_reason(rows) == ("no conversation scored: 3 machinery errors (target_unavailable 2, "
                                     "budget_spent 1), first: c0 trial 0: " + ("refused " + "x" * 300)[:199] + "…")
    assert unscored_reason([*rows, {"case_id": "d", "trial": 0, "status": "scored"}]) is None


@pytest.mark.parametrize("reason, plainly", [
    ("target_unavailable", "the bot (or its own infrastructure) could not be reached"),
    ("llm_error", "lobeval's own model endpoint failed"), ("budget_spent", "the budget was spent")])
def test_when_every_conversation_ended_in_one_machinery_error_the_reason_says_it_plainly(reason, plainly):
    rows = [{"case_id": f"c{i}", "trial": 0, "status": "error", "termination": reason, "error": "start failed: "
             "POST http://127.0.0.1:9/bot/sessions: ConnectError: All connection attempts failed"} for i in range(3)]
    assert unscored_reason(rows) == (f"no conversation scored: {plainly}: all 3 conversations ended {reason} (a "
                                     f"machinery error, not the bot's failure), first: c0 trial 0: start failed: "
                                     f"POST http://127.0.0.1:9/bot/sessions: ConnectError: All connection attempts "
                                     f"failed")


def test_a_tally_fed_row_by_row_keeps_only_the_summary_fields_and_sums_up_alike():
    from lobeval.core.stats import SUMMARY_FIELDS, RowTally

    rows = [{"case_id": f"c{n % 7}", "trial": n // 7, "scenario_name": f"s{n % 3}",
             "status": "error" if n % 11 == 0 else "scored", "termination": "llm_error" if n % 11 == 0 else "user_finished",
             "pairs": [{"big": "evidence"}] * 3,
             **{m: (None if n % 11 == 0 else (n % 4) / 4) for m in
                ("Reliability", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args")},
             "Success": None if n % 11 == 0 else n % 2} for n in range(40)]
    tally = RowTally()
    for row in rows:
        tally.add(row)
    assert set(tally.columns) == set(SUMMARY_FIELDS) and len(tally) == 40
    assert tally.summarise() == summarise(rows) == summarise(iter(rows))
    assert RowTally().summarise() == summarise([])


def test_rows_without_a_reference_are_left_out_of_the_metrics_against_expected_calls():
    def row(case, success, *, reference=True, failed=0, claimed=0):
        value = float(success) if reference else None
        return {"case_id": case, "trial": 0, "scenario_name": "s", "status": "scored", "termination": "imported",
                "reference": reference, **{m: value for m in ("Reliability", "Recall_fn", "Precision_fn",
                                                              "Recall_args", "Precision_args", "Success")},
                "failed_calls": [{"functionName": "f"}] * failed,
                "claims": {"claimed_not_done": [{"claim": "create"}] * claimed, "done_not_told": []}}
    rows = [row("a", 1), row("b", 0, failed=1), row("c", 0, reference=False, failed=2),
            row("d", 0, reference=False, claimed=1), {**row("e", 0, reference=False), "claims": None}]
    results = summarise(rows)
    assert results["metrics"]["Success"] == 0.5 and results["metrics"]["Reliability"] == 0.5
    assert results["pass_k"]["1"]["cases"] == 2
    assert results["counts"]["unreferenced"] == 3 and results["counts"]["scored"] == 5
    assert results["metrics"]["NoFailedCalls"] == pytest.approx(3 / 5)   # b and c had a failed call
    assert results["metrics"]["ClaimsBacked"] == pytest.approx(3 / 4)    # e's claims were not checked
    assert results["over"] == {"Reliability": 2, "Recall_fn": 2, "Precision_fn": 2, "Recall_args": 2,
                               "Precision_args": 2, "Success": 2, "NoFailedCalls": 5, "ClaimsBacked": 4}
    assert results["scenarios"][0]["unreferenced"] == 3 and results["scenarios"][0]["Success"] == 0.5
    only = summarise(rows[2:])
    assert all(only["metrics"][m] is None for m in ("Reliability", "Success")) and only["pass_k"] == {}
