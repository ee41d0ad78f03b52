"""Error analysis on a small hand-made results file: breakdowns, signatures, clusters, labels."""
import math

import pytest

from lobeval.analysis import report
from lobeval.analysis.analyse import (argument_matrix, argument_table, conversations_df, cost_table, failure_clusters,
                             failure_sentences, failure_signatures, function_table, judge_errors_reason,
                             judge_status_counts, judge_table, metric_name, plot_argument_heatmap, plot_call_heatmaps,
                             plot_metric_distributions, plot_pass_k, plot_recall_heatmap, recall_matrix, shown,
                             termination_table, wrong_value_pairs, worst_conversations)


def row(case_id, scenario, reliability, success, **found):
    return {"case_id": case_id, "trial": 0, "scenario_name": scenario, "status": "scored",
            "termination": "user_finished", "turns": 3, "error": None, "Reliability": reliability,
            "Success": success, "pairs": [], "unpaired_expected": [], "unpaired_actual": [], "wrong_arguments": [],
            "missing_arguments": [], "extra_arguments": [], "missing_outputs": [], "forbidden_calls": [],
            "claims": {"claimed_not_done": [], "done_not_told": []}, "judges": {"status": "not run"},
            "usage": {}, **found}


def pair(name, arguments, extra=None):
    return {"expected_index": 0, "actual_index": 0, "functionName": name, "optional": False, "failed": False,
            "arguments": arguments, "extra_arguments": extra or {}}


CORRECT = {"status": "correct", "expected": "x", "actual": "x"}
WRONG_PRIORITY = {"status": "wrong", "expected": "High", "actual": "Low"}

RESULTS = {"rows": [
    # a-001: one wrong, one missing and one extra argument; a required call missed; two extra calls.
    row("a-001", "s1", 0.4, 0, termination="max_turns",
        pairs=[pair("create_ticket", {"title": CORRECT, "priority": WRONG_PRIORITY,
                                      "due_date": {"status": "missing", "expected": "2024-05-01", "actual": None}},
                    extra={"notes": {"actual": "x", "allowed": False}})],
        unpaired_expected=[{"expected_index": 1, "functionName": "create_action", "optional": False}],
        unpaired_actual=[{"actual_index": 1, "functionName": "get_departments", "effect": "read", "allowed": False,
                          "failed": False, "turn": 1},
                         {"actual_index": 2, "functionName": "Plugin-Delete_Ticket", "effect": "write",
                          "allowed": False, "failed": False, "turn": 2}],
        wrong_arguments=[{"functionName": "create_ticket", "argument": "priority", "expected": "High", "actual": "Low"}],
        missing_arguments=[{"functionName": "create_ticket", "argument": "due_date", "expected": "2024-05-01"}],
        extra_arguments=[{"functionName": "create_ticket", "argument": "notes", "actual": "x", "allowed": False}],
        usage={"user": {"cost_usd": 0.01}, "target": {"cost_usd": 0.02}}),
    row("b-001", "s1", 1.0, 1, pairs=[pair("create_ticket", {"title": CORRECT, "priority": CORRECT})],
        usage={"user": {"cost_usd": 0.01}}),
    # c-001: the same wrong priority under another spelling of the name; an allowed extra call;
    # a claim of work not done and a judge's behaviour failure.
    row("c-001", "s2", 0.75, 0, pairs=[pair("Plugin-create_ticket", {"priority": WRONG_PRIORITY})],
        unpaired_actual=[{"actual_index": 0, "functionName": "get_departments", "effect": "read", "allowed": True,
                          "failed": False, "turn": 1}],
        wrong_arguments=[{"functionName": "Plugin-create_ticket", "argument": "priority", "expected": "High",
                          "actual": "Low"}],
        claims={"claimed_not_done": [{"message_index": 5, "claim": "created", "text": "I created it"}],
                "done_not_told": []},
        judges={"status": "run", "turns": [
            {"message_index": 3, "failed": True,
             "failure": {"category": "false_information", "severity": "critical", "reason": "made up"}},
            {"message_index": 5, "failed": False, "failure": None}]},
        usage={"judge": {"cost_usd": 0.5}}),
    {"case_id": "d-001", "trial": 0, "scenario_name": "s2", "status": "error", "termination": None,
     "error": "llm_error: gave up", "Reliability": None, "Success": None},
]}


def test_conversations_df_has_one_row_per_conversation():
    table = conversations_df(RESULTS)
    assert table["case_id"].tolist() == ["a-001", "b-001", "c-001", "d-001"]
    assert table["status"].tolist() == ["scored", "scored", "scored", "error"]


def test_function_table_counts_and_rates_only_where_defined():
    table = function_table(RESULTS)
    as_dict = table.drop(columns=["recall", "precision"]).to_dict("index")
    assert as_dict["create_ticket"] == {"expected": 3, "paired": 3, "missed": 0, "extra": 0, "extra_read": 0,
                                        "extra_write": 0, "extra_allowed": 0}
    assert as_dict["create_action"] == {"expected": 1, "paired": 0, "missed": 1, "extra": 0, "extra_read": 0,
                                        "extra_write": 0, "extra_allowed": 0}
    assert as_dict["get_departments"] == {"expected": 0, "paired": 0, "missed": 0, "extra": 1, "extra_read": 1,
                                          "extra_write": 0, "extra_allowed": 1}
    assert as_dict["Delete_Ticket"]["extra_write"] == 1   # as spelled, without its prefix
    assert (table.loc["create_ticket", "recall"], table.loc["create_ticket", "precision"]) == (1.0, 1.0)
    assert table.loc["create_action", "recall"] == 0.0 and math.isnan(table.loc["create_action", "precision"])
    assert math.isnan(table.loc["get_departments", "recall"]) and table.loc["get_departments", "precision"] == 0.0


def test_argument_table_and_wrong_value_pairs():
    table = argument_table(RESULTS)
    priority = table.loc[("create_ticket", "priority")]
    assert (priority["expected"], priority["correct"], priority["wrong"]) == (3, 1, 2)
    assert priority["error_rate"] == pytest.approx(2 / 3)
    assert table.loc[("create_ticket", "due_date"), "missing"] == 1
    assert table.loc[("create_ticket", "notes"), "extra"] == 1
    assert math.isnan(table.loc[("create_ticket", "notes"), "error_rate"])
    assert wrong_value_pairs(RESULTS).to_dict("records") == [
        {"function": "create_ticket", "argument": "priority", "expected": '"High"', "actual": '"Low"', "count": 2}]


def test_a_claim_cluster_resting_on_one_basis_says_how_often_such_findings_were_right(monkeypatch):
    from lobeval.scoring import trust

    def claimed(case_id, basis):
        return row(case_id, "s1", 0.5, 0, claims={"claimed_not_done": [
            {"message_index": 1, "claim": "cancelled", "text": "I've cancelled it.", "basis": basis}],
            "done_not_told": []})

    monkeypatch.setitem(trust.PRECISION, "claimed_not_done:failed_call", (40, 44))   # as lobeval.scoring.trust would hold it
    one_basis = failure_sentences({"rows": [claimed("a-1", "failed_call"), claimed("a-2", "failed_call")]})
    assert [sentence["text"] for sentence in one_basis] == [
        "claimed to have cancelled something without doing it in 2 conversations (a write of the same reply failed; "
        "such findings were right 40 of 44 times on real bots' conversations)"]
    mixed = failure_sentences({"rows": [claimed("a-1", "failed_call"), claimed("a-2", "no_call")]})
    assert [sentence["text"] for sentence in mixed] == [
        "claimed to have cancelled something without doing it in 2 conversations"]


def test_wrong_value_pairs_can_all_be_had():
    results = {"rows": [*RESULTS["rows"], row("e-001", "s1", 0.5, 0, pairs=[pair("create_ticket", {
        "priority": {"status": "wrong", "expected": "Medium", "actual": "Low"}})])]}
    assert len(wrong_value_pairs(results, top=1)) == 1
    assert wrong_value_pairs(results, top=None)[["expected", "actual", "count"]].values.tolist() == [
        ['"High"', '"Low"', 2], ['"Medium"', '"Low"', 1]]


def test_failures_are_told_as_sentences_with_counts_and_wrong_values():
    sentences = failure_sentences(RESULTS)
    assert [sentence["text"] for sentence in sentences] == [
        "create_ticket: priority wrong in 2 conversations: sent Low instead of High ×2",
        "create_action never called in 1 conversation",
        "create_ticket: due_date left out in 1 conversation",
        "claimed to have created something without doing it in 1 conversation",
        "Delete_Ticket called without being expected (a write) in 1 conversation",
        "get_departments called without being expected (a read) in 1 conversation",
        "the judges found false information (critical) in 1 conversation",
        "create_ticket: notes given without being expected in 1 conversation"]
    top = sentences[0]
    assert (top["count"], top["conversations"], top["examples"]) == (
        2, 2, [{"case_id": "a-001", "trial": 0}, {"case_id": "c-001", "trial": 0}])
    assert [sentence["gist"] for sentence in sentences] == [
        "the bot sent the wrong priority in create_ticket", "the bot never called create_action",
        "the bot left out the due date in create_ticket", "the bot said it had done something that no call did",
        "the bot called Delete_Ticket when it should not have", "the bot called get_departments when it should not have",
        "the judges found false information", "the bot gave create_ticket an argument nobody asked for (notes)"]
    claim = sentences[3]
    assert claim["details"] == [{"text": "I created it", "count": 1}]
    assert sentences[6]["details"] == [{"text": "made up", "count": 1}]
    named = {"rows": [row("x-001", "s1", 1.0, 0, claims={"claimed_not_done": [
        {"message_index": 1, "claim": "TKT-1042", "text": "Your ticket is TKT-1042."}], "done_not_told": []},
        missing_outputs=["TKT-9"])]}
    assert [sentence["text"] for sentence in failure_sentences(named)] == [
        "named TKT-1042, which neither the user nor any call produced, in 1 conversation",
        "did not tell the user what it should have in 1 conversation"]
    assert failure_sentences(named)[1]["details"] == [{"text": "TKT-9", "count": 1}]
    assert failure_sentences(NOTHING_SCORED) == []


def due_date(case_id, expected, sent, *, told=None, function="updateActionItem"):
    """A conversation whose call sent a wrong due date, and, with `told`, whose reply told the user that date."""
    wrong = {"status": "wrong", "expected": expected, "actual": sent}
    claims = [{"message_index": 5, "claim": "update", "functionName": function.lower(), "argument": "due_date",
               "said": told, "sent": sent, "text": f"Done: the due date is now {told}.", "basis": "value"}] if told else []
    return row(case_id, "move", 0.8, 0, pairs=[pair(function, {"due_date": wrong})],
               wrong_arguments=[{"functionName": function, "argument": "due_date", **wrong}],
               claims={"claimed_not_done": claims, "done_not_told": []})


def test_a_wrong_value_the_bot_also_told_the_user_is_one_defect_with_both_facts():
    results = {"rows": [due_date("m-1", "2026-12-12", "2026-12-11", told="2026-12-12"),
                        due_date("m-2", "2026-12-04", "2026-12-03", told="2026-12-04"),
                        due_date("m-3", "2027-02-18", "2027-02-17", told="2027-02-18")]}
    [defect] = failure_sentences(results)
    assert defect["text"] == (
        "updateActionItem: due_date wrong in 3 conversations, one day early: sent 2026-12-03 instead of 2026-12-04, "
        "2026-12-11 instead of 2026-12-12, 2027-02-17 instead of 2027-02-18; each time the bot told the user the date it "
        "should have sent")
    assert defect["gist"] == ("the bot sent a due date one day earlier than it should have, while telling the user the "
                              "right one")
    assert (defect["kind"], defect["conversations"], defect["details"][0]) == (
        "wrong_argument", 3, {"text": "Done: the due date is now 2026-12-12.", "count": 1})


def test_a_told_value_apart_from_a_wrong_call_stays_its_own_finding_and_dates_off_by_days_say_by_how_many():
    results = {"rows": [due_date("m-1", "2026-12-10", "2026-12-12"), due_date("m-2", "2026-03-01", "2026-03-03"),
                        row("t-1", "move", 1.0, 1, claims={"claimed_not_done": [
                            {"message_index": 3, "claim": "update", "functionName": "updateactionitem",
                             "argument": "due_date", "said": "2026-05-02", "sent": "2026-05-01", "text": "Moved.",
                             "basis": "value"}], "done_not_told": []})]}
    late, told = failure_sentences(results)
    assert late["text"] == ("updateActionItem: due_date wrong in 2 conversations, 2 days late: sent 2026-03-03 instead "
                            "of 2026-03-01, 2026-12-12 instead of 2026-12-10")
    assert late["gist"] == "the bot sent a due date 2 days later than it should have"
    assert told["text"].startswith("updateActionItem: told the user one due_date and sent another in 1 conversation: "
                                   "told 2026-05-02, sent 2026-05-01 (the call that did it sent another value; such "
                                   "findings were ")


def test_names_are_shown_as_the_suite_spells_them():
    results = {"rows": [row("h-1", "hire", 0.5, 0, pairs=[pair("createLoan", {"startDate": WRONG_PRIORITY})],
                            wrong_arguments=[{"functionName": "createLoan", "argument": "startDate",
                                              **WRONG_PRIORITY}],
                            unpaired_actual=[{"actual_index": 1, "functionName": "getcustomer", "effect": "read",
                                              "allowed": False, "failed": False, "turn": 1}],
                            unpaired_expected=[{"expected_index": 1, "functionName": "Plugin-createBooking",
                                                "optional": False}]),
                        row("h-2", "hire", 0.5, 0, unpaired_actual=[
                            {"actual_index": 0, "functionName": "createloan", "effect": "write", "allowed": False,
                             "failed": False, "turn": 1}])]}
    assert [sentence["text"] for sentence in failure_sentences(results)] == [
        "createBooking never called in 1 conversation",
        "createLoan: startDate wrong in 1 conversation: sent Low instead of High",
        "createLoan called without being expected (a write) in 1 conversation",
        "getcustomer called without being expected (a read) in 1 conversation"]
    assert function_table(results).index.tolist() == ["createBooking", "createLoan", "getcustomer"]
    assert recall_matrix(results).index.tolist() == ["createBooking", "createLoan"]


def test_a_conversation_that_did_not_end_normally_says_how_it_ended():
    ended = [row(f"x-{i}", "s1", 1.0, 0, termination="max_turns", checks={"ended_normally": False}) for i in range(2)]
    ended.append(row("x-9", "s1", 1.0, 0, termination="target_error", checks={"ended_normally": False}))
    assert [(sentence["text"], sentence["gist"]) for sentence in failure_sentences({"rows": ended})] == [
        ("reached the turn limit before it was done in 2 conversations", "reached the turn limit before it was done"),
        ("the bot answered with an error in 1 conversation", "the bot answered with an error")]


def test_worst_termination_and_cost_tables():
    assert worst_conversations(RESULTS, n=2)["case_id"].tolist() == ["a-001", "c-001"]
    assert termination_table(RESULTS).to_dict("index") == {
        "s1": {"machinery error": 0, "max_turns": 1, "user_finished": 1},
        "s2": {"machinery error": 1, "max_turns": 0, "user_finished": 1}}
    cost = cost_table(RESULTS)
    assert cost.loc["s1", "total"] == pytest.approx(0.04)
    assert cost.loc["s2", "judge"] == pytest.approx(0.5)


def test_every_failed_item_gets_a_signature():
    failures = failure_signatures(RESULTS)
    signatures = sorted(failures[["case_id", "kind", "function", "argument", "category"]].itertuples(index=False,
                                                                                                        name=None))
    assert signatures == [
        ("a-001", "extra_argument", "create_ticket", "notes", ""),
        ("a-001", "extra_call", "Delete_Ticket", "", "write"),
        ("a-001", "extra_call", "get_departments", "", "read"),
        ("a-001", "missed_call", "create_action", "", ""),
        ("a-001", "missing_argument", "create_ticket", "due_date", ""),
        ("a-001", "wrong_argument", "create_ticket", "priority", ""),
        ("c-001", "behaviour", "", "", "false_information"),
        ("c-001", "claimed_not_done", "", "", "created"),
        ("c-001", "wrong_argument", "create_ticket", "priority", ""),
    ]
    behaviour = failures[failures["kind"] == "behaviour"].iloc[0]
    assert (behaviour["message_index"], behaviour["severity"]) == (3, "critical")


def test_failures_are_grouped_by_signature_with_examples():
    clusters = failure_clusters(RESULTS, examples=1)
    assert len(clusters) == 8
    top = clusters.iloc[0]
    assert (top["kind"], top["function"], top["argument"], top["count"], top["conversations"]) == \
        ("wrong_argument", "create_ticket", "priority", 2, 2)
    assert top["examples"] == ["a-001#0"]


def test_recall_matrix_is_blank_where_a_function_was_not_expected():
    matrix = recall_matrix(RESULTS)
    # s1: create_ticket paired twice; create_action missed once. s2: create_ticket paired once.
    assert matrix.loc["create_ticket"].tolist() == [1.0, 1.0]
    assert matrix.loc["create_action", "s1"] == 0.0 and math.isnan(matrix.loc["create_action", "s2"])
    assert "get_departments" not in matrix.index


def test_recall_heatmap_shows_the_matrix():
    figure = plot_recall_heatmap(RESULTS)
    mesh = figure.axes[0].collections[0].get_array()
    # rows create_action, create_ticket; columns s1, s2; the blank cell is masked.
    assert mesh.tolist() == [[0.0, None], [1.0, 1.0]]
    assert [text.get_text() for text in figure.axes[0].texts] == ["0.00", "1.00", "1.00"]


def test_argument_matrix_finds_the_wrong_values_recall_does_not():
    matrix = argument_matrix(RESULTS)
    # s1: a-001 title right, priority wrong, due_date missing; b-001 title and priority right. s2: priority wrong.
    assert matrix.loc["create_ticket"].tolist() == [pytest.approx(3 / 5), 0.0]
    assert recall_matrix(RESULTS).loc["create_ticket"].tolist() == [1.0, 1.0]
    assert "create_action" not in matrix.index   # never called: nothing to check
    figure = plot_argument_heatmap(RESULTS)
    assert figure.axes[0].get_title() == "Arguments right in the calls made"
    assert argument_matrix(NOTHING_SCORED).empty and plot_argument_heatmap(NOTHING_SCORED) is None


def test_the_two_heat_maps_stand_side_by_side_on_the_same_rows():
    figure = plot_call_heatmaps(RESULTS)
    recall, arguments = figure.axes[0], figure.axes[1]
    assert (recall.get_title(), arguments.get_title()) == ("Expected calls made (recall)",
                                                           "Expected arguments right, in the calls made")
    assert [label.get_text() for label in recall.get_yticklabels()] == ["create_action", "create_ticket"]
    assert recall.collections[0].get_array().tolist() == [[0.0, None], [1.0, 1.0]]
    assert arguments.collections[0].get_array().tolist() == [[None, None], [pytest.approx(0.6), 0.0]]
    assert plot_call_heatmaps(NOTHING_SCORED) is None


def test_metrics_have_readable_names():
    assert [metric_name(name) for name in ("Recall_fn", "Precision_args", "judge.final_score", "judge.task_adherence")] \
        == ["Function recall", "Argument precision", "Judges' final score", "task adherence"]


def test_metric_distributions_have_one_dot_per_scored_conversation_and_metric():
    figure = plot_metric_distributions(RESULTS)
    reliability = figure.axes[0]
    assert reliability.get_title() == "Reliability"
    dots = sorted(tuple(point) for collection in reliability.collections for point in collection.get_offsets()
                  if len(collection.get_offsets()))
    assert [round(x, 2) for x, _ in dots] == [0.4, 0.75, 1.0]


def test_pass_k_plot_needs_trials():
    assert plot_pass_k(RESULTS) is None
    assert plot_pass_k({"pass_k": {"1": {"value": 0.8, "interval": [0.6, 0.9]}}}) is None
    figure = plot_pass_k({"pass_k": {"2": {"value": 0.6, "interval": [0.4, 0.8]},
                                     "1": {"value": 0.8, "interval": [0.6, 0.9]}}})
    line = figure.axes[0].lines[0]
    assert (line.get_xdata().tolist(), line.get_ydata().tolist()) == ([1, 2], [0.8, 0.6])


NOTHING_SCORED = {"rows": [{"case_id": "x", "trial": 0, "scenario_name": "s1", "status": "error",
                             "termination": "llm_error", "error": "gave <up>"}],
                  "metrics": {}, "counts": {"conversations": 1, "scored": 0, "errors": 1}}


def test_a_section_with_nothing_to_show_says_why():
    assert plot_recall_heatmap(NOTHING_SCORED) is None and plot_metric_distributions(NOTHING_SCORED) is None
    note = shown(failure_clusters(NOTHING_SCORED), NOTHING_SCORED, "No failures.")
    assert note.data == ("<p>no conversation scored: lobeval&#x27;s own model endpoint failed: all 1 conversations "
                         "ended llm_error (a machinery error, not the bot&#x27;s failure), first: x trial 0: "
                         "gave &lt;up&gt;</p>")
    assert shown(failure_clusters(RESULTS), RESULTS, "No failures.") is not None
    assert shown(None, RESULTS, "No failures.").data == "<p>No failures.</p>"
    table = termination_table(NOTHING_SCORED)
    assert shown(table, NOTHING_SCORED) is table


def judged(coverage=None, **judges):
    rows = [row("a-001", "s1", 1.0, 1, judges={"status": "run", "errors": [
                {"judge": "per_turn", "message_index": 3, "error": "judge reply unusable after 2 attempts"}]}),
            row("b-001", "s1", 1.0, 1, judges={"status": "run", "errors": []})]
    return {"rows": rows, "metrics": {"Reliability": 1.0, "judge.final_score": 0.8, "judge.goal": 1.0},
            "intervals": {"judge.final_score": [0.8, 0.8]},
            "judges": {"status": "run", **({"coverage": coverage} if coverage is not None else {}), **judges}}


def test_every_judge_figure_stands_beside_its_coverage():
    table = judge_table(judged({"judge.final_score": {"judged": 1, "of": 2, "errors": 1, "not_applicable": 0},
                                "judge.goal": {"judged": 2, "of": 2, "errors": 0, "not_applicable": 0},
                                "judge.intent_resolution": {"judged": 0, "of": 2, "errors": 2, "not_applicable": 0}}))
    assert table.astype(object).where(table.notna(), None).to_dict("index") == {
        "final_score": {"mean": 0.8, "low": 0.8, "high": 0.8, "judged": "judged 1 of 2", "judge errors": 1,
                        "not applicable": 0, "mean over": "part of the conversations only"},
        "goal": {"mean": 1.0, "low": None, "high": None, "judged": "judged 2 of 2", "judge errors": 0,
                 "not applicable": 0, "mean over": "all conversations"},
        "intent_resolution": {"mean": None, "low": None, "high": None, "judged": "judged 0 of 2", "judge errors": 2,
                              "not applicable": 0, "mean over": "nothing: no conversation judged"}}


def test_results_without_coverage_still_render_and_say_so():
    table = judge_table(judged())
    assert table["judged"].tolist() == ["not recorded"] * 2
    assert table["mean over"].tolist() == ["unknown: coverage not recorded"] * 2
    assert judge_table({"rows": [], "metrics": {}, "judges": {"status": "not run: no judge model configured"}}) \
        .to_dict("records") == [{"judges": "not run: no judge model configured"}]


def test_final_statuses_are_counted_with_the_conversations_not_judged():
    assert judge_status_counts(judged(final_status={"Done": 1, "Partial Failure": 0, "Failed": 0})) == {
        "Done": 1, "Partial Failure": 0, "Failed": 0, "Not judged": 1}
    assert judge_status_counts(judged(final_status={"Done": 0, "Failed": 1, "Not judged": 1}))["Not judged"] == 1
    assert judge_status_counts(RESULTS) is None


def test_judge_errors_are_told_in_a_line():
    results = judged()
    assert judge_errors_reason(results) == ("1 judge errors, first: a-001 trial 0: per_turn: judge reply unusable "
                                            "after 2 attempts")
    results["metrics"] = {"Reliability": 1.0}
    assert judge_errors_reason(results).startswith("no conversation judged: 1 judge errors")
    assert judge_errors_reason(RESULTS) is None


@pytest.mark.slow
def test_error_analysis_notebook_runs_offline_and_glues_the_clusters(tmp_path, monkeypatch):
    import nbformat
    import papermill
    import scrapbook

    from helpers import REPO, SAMPLE_SUITE, read_jsonl
    from lobeval.cli import main
    from lobeval.core.records import write_jsonl

    for name in ("LOBEVAL_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    dataset, conversations, results = tmp_path / "d.jsonl", tmp_path / "c.jsonl", tmp_path / "r.json"
    assert main(["generate", "--suite", str(SAMPLE_SUITE), "--cases-per-scenario", "2", "--out", str(dataset)]) == 0
    assert main(["simulate", "--dataset", str(dataset), "--out", str(conversations)]) == 0
    # One conversation made to fail: the ticket created with the wrong priority.
    records = read_jsonl(conversations)
    broken = next(record for record in records if record["scenario_name"] == "create_ticket")
    call = next(call for call in broken["function_calls"] if call["functionName"] == "create_support_ticket")
    wrong = "Low" if call["arguments"]["priority"] != "Low" else "High"
    call["arguments"]["priority"] = wrong
    write_jsonl(conversations, records)
    assert main(["evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                 "--suite", str(SAMPLE_SUITE), "--out", str(results)]) == 0

    executed = tmp_path / "04_error_analysis.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "04_error_analysis.ipynb"), str(executed),
                               parameters={"results": str(results), "conversations": [str(conversations)],
                                           "suite": str(SAMPLE_SUITE), "out_dir": str(tmp_path / "analysis")},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    scraps = scrapbook.read_notebook(str(executed)).scraps
    conversation = f"{broken['case_id']}#{broken['trial']}"
    # the sample bot's deliberate weakness (a wrong argument; the words that say another value than the call sent are
    # a claims finding not right often enough on real bots to be a failure: to check), then the failure made here
    assert scraps["top_clusters"].data == [
        {"kind": "wrong_argument", "function": "update_action_item", "argument": "due_date", "category": "",
         "count": 2, "conversations": 2, "examples": ["reassign_action_item-001#0", "reassign_action_item-002#0"]}] + [
        {"kind": "wrong_argument", "function": "create_support_ticket", "argument": "priority", "category": "",
         "count": 1, "conversations": 1, "examples": [conversation]}]
    assert scraps["root_causes_status"].data == "not run: no model configured"
    assert "root_causes_path" not in scraps
    assert (tmp_path / "analysis" / "evaluation_results.labelled.json").exists()
    # the figures, glued as displays for the report to show again: two drawn, pass^k not (one trial per case)
    figures = {name: scraps[name].display["data"]["text/html"] for name in report.STAGE_FIGURES}
    assert ["data:image/png;base64," in figures[name] for name in report.STAGE_FIGURES] == [True, True, False]
    assert "One trial per case: no pass^k curve." in figures["pass_k"]
    assert report.stage_04_figures(executed.parent) == figures   # what the report of a run reads
    assert report.stage_04_figures(tmp_path / "no run") == {}   # drawn again then
