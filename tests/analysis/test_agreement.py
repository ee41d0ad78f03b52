"""lobeval's verdicts against a benchmark's (issue #19): Cohen's κ and the agreement rate on hand-computed
tables, pass^k by both sides, the reasons of each disagreement, reference.jsonl checked, and the whole path
from an imported τ-bench and τ²-bench run through lobeval's scoring to numbers computed by hand."""
import json
from pathlib import Path

import pytest

from lobeval.analysis.agreement import (
    REFERENCE_FILE, agreement, benchmark_failures, benchmark_reasons, cohen_kappa, confusion_frame,
    disagreement_category, disagreements_frame, format_agreement, lobeval_reasons, pass_k_both, pass_k_frame,
    read_reference, run_agreement,
)
from lobeval.core.errors import RecordError
from lobeval.evaluation.evaluate import evaluate
from lobeval.imports.importers import import_tau2, import_tau_bench
from lobeval.core.records import read_results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tau"


def row(case_id, trial, success, status="scored", **evidence):
    return {"case_id": case_id, "trial": trial, "status": status, "Success": success if status == "scored" else None,
            "checks": {}, **evidence}


def verdict(case_id, trial, reward, **reward_info):
    return {"case_id": case_id, "trial": trial, "reward": float(reward), "reward_info": reward_info}


# (lobeval Success, benchmark reward) per trial of five tasks: 4 both pass, 4 both fail, 1 each way apart.
TRIALS = {"a": [(1, 1), (1, 1)], "b": [(1, 1), (0, 1)], "c": [(0, 0), (0, 0)], "d": [(1, 0), (0, 0)],
          "e": [(0, 0), (1, 1)]}
ROWS = [row(case, trial, mine) for case, pairs in TRIALS.items() for trial, (mine, _) in enumerate(pairs)]
REFERENCE = [verdict(case, trial, theirs) for case, pairs in TRIALS.items() for trial, (_, theirs) in enumerate(pairs)]


def test_cohen_kappa_on_hand_computed_tables():
    # p_o = (20 + 15) / 50 = 0.7; p_e = 0.5·0.6 + 0.5·0.4 = 0.5; κ = (0.7 − 0.5) / (1 − 0.5) = 0.4
    assert cohen_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    # p_o = 5/8; p_e = (4·5 + 4·3) / 64 = 0.5; κ = 0.25
    assert cohen_kappa([[3, 1], [2, 2]]) == pytest.approx(0.25)
    assert cohen_kappa([[3, 0], [0, 2]]) == 1.0
    assert cohen_kappa([[0, 3], [2, 0]]) == pytest.approx(-12 / 13)   # p_o = 0, p_e = 13/25
    assert cohen_kappa([[5, 0], [0, 0]]) is None                       # one verdict throughout: p_e = 1


def test_agreement_and_kappa_on_a_hand_computed_case():
    result = agreement(ROWS, REFERENCE)
    assert result["confusion"] == {"lobeval_pass": {"benchmark_pass": 4, "benchmark_fail": 1},
                                   "lobeval_fail": {"benchmark_pass": 1, "benchmark_fail": 4}}
    assert (result["compared"], result["cases"]) == (10, 5)
    # p_o = 8/10; both sides pass half: p_e = 0.5; κ = (0.8 − 0.5) / 0.5 = 0.6
    assert result["agreement"]["value"] == pytest.approx(0.8)
    assert result["kappa"]["value"] == pytest.approx(0.6)
    for figure in (result["agreement"], result["kappa"]):
        low, high = figure["interval"]
        assert low <= figure["value"] <= high <= 1.0
    assert agreement(ROWS, REFERENCE) == result   # the bootstrap is seeded
    assert [(d["case_id"], d["trial"], d["lobeval"], d["benchmark"]) for d in result["disagreements"]] == [
        ("b", 1, 0, 1), ("d", 0, 1, 0)]


def test_pass_k_by_both_sides_on_the_same_trajectories():
    # lobeval per task: a 2/2, b 1/2, c 0/2, d 1/2, e 1/2; the benchmark: a 2/2, b 2/2, c 0/2, d 0/2, e 1/2
    assert agreement(ROWS, REFERENCE)["pass_k"] == {
        "1": {"lobeval": pytest.approx(0.5), "benchmark": pytest.approx(0.5), "cases": 5},
        "2": {"lobeval": pytest.approx(0.2), "benchmark": pytest.approx(0.4), "cases": 5}}
    # uneven trials: x has 3 (lobeval 2 successes, the benchmark 1), y has 1 (lobeval 1, the benchmark 0)
    compared = [(row("x", t, s), verdict("x", t, r)) for t, (s, r) in enumerate([(1, 1), (1, 0), (0, 0)])]
    compared.append((row("y", 0, 1), verdict("y", 0, 0)))
    table = pass_k_both(compared)
    assert [table[k]["lobeval"] for k in "123"] == pytest.approx([(2 / 3 + 1) / 2, 1 / 3, 0.0])
    assert [table[k]["benchmark"] for k in "123"] == pytest.approx([(1 / 3 + 0) / 2, 0.0, 0.0])
    assert [table[k]["cases"] for k in "123"] == [2, 1, 1]


def test_only_trajectories_both_sides_judged_are_compared():
    rows = [*ROWS, row("f", 0, None, status="error"), row("h", 0, 1)]
    reference = [*REFERENCE, verdict("f", 0, 0), verdict("g", 0, 1)]
    result = agreement(rows, reference)
    assert result["compared"] == 10
    assert result["left_out"] == {"machinery_errors": [{"case_id": "f", "trial": 0}],
                                  "without_reference": [{"case_id": "h", "trial": 0}],
                                  "without_row": [{"case_id": "g", "trial": 0}], "without_expectations": []}
    assert "left out 1 that ended in a machinery error" in format_agreement(result)


def test_a_disagreement_lists_the_reasons_lobeval_gives():
    failing = row("t", 0, 0, termination="max_turns", checks={"ended_normally": False},
                  unpaired_expected=[{"functionName": "book", "optional": False},
                                     {"functionName": "get_user", "optional": True}],
                  pairs=[{"functionName": "cancel", "optional": False, "failed": True,
                          "arguments": {"id": {"status": "correct", "expected": "R1", "actual": "R1"},
                                        "reason": {"status": "wrong", "expected": "change of plan", "actual": "other"},
                                        "amount": {"status": "missing", "expected": 5, "actual": None}}},
                         {"functionName": "get_order", "optional": True, "failed": False,
                          "arguments": {"id": {"status": "wrong", "expected": "O1", "actual": "O2"}}}],
                  missing_outputs=["54.04"], forbidden_calls=[{"functionName": "delete_user"}],
                  unpaired_actual=[{"functionName": "refund", "effect": "write", "allowed": False, "failed": False},
                                   {"functionName": "refund", "effect": "write", "allowed": False, "failed": True},
                                   {"functionName": "get_x", "effect": "read", "allowed": False, "failed": False}])
    [item] = agreement([failing], [verdict("t", 0, 1)])["disagreements"]
    assert (item["lobeval"], item["benchmark"]) == (0, 1)
    assert [(r["kind"], r["text"]) for r in item["reasons"]] == [
        ("missed_call", "missed required call book"),
        ("failed_call", "failed call cancel (attempted, not done)"),
        ("wrong_argument", 'wrong argument cancel.reason: "change of plan" → "other"'),
        ("missing_argument", "missing argument cancel.amount"),
        ("output_not_told", "output not told: 54.04"),
        ("forbidden_call", "forbidden call delete_user"),
        ("unexpected_write", "unexpected write refund"),
        ("abnormal_ending", "abnormal ending: max_turns")]
    assert lobeval_reasons(row("u", 0, 1)) == []


def test_the_benchmark_reasons_count_only_what_its_reward_counted():
    assert benchmark_reasons({"reward": 0.0, "info": {"r_actions": 0.0, "gt_data_hash": "x"}}) == [
        "database differs from the expected end state"]
    assert benchmark_reasons({"info": {"r_outputs": 0.0, "outputs": {"54.04": False, "Austin": True}}}) == [
        "output not told: 54.04"]
    tau2 = {"reward": 0.0, "reward_basis": ["DB", "COMMUNICATE"], "db_check": {"db_match": True},
            "communicate_checks": [{"info": "delayed", "met": False}],
            "action_checks": [{"action": {"name": "cancel_reservation"}, "action_match": False}]}
    assert benchmark_reasons(tau2) == ["output not told: delayed"]   # ACTION is not in the reward basis
    assert benchmark_reasons({"reward": 0.0, "reward_basis": None, "info": {"note": "terminated: max_steps"}}) == [
        "terminated: max_steps"]


def test_read_reference_checks_every_line(tmp_path):
    good = [verdict("a", 0, 1), verdict("a", 1, 0)]
    (tmp_path / REFERENCE_FILE).write_text("".join(json.dumps(v) + "\n" for v in good))
    assert read_reference(tmp_path) == good
    for bad, field in [({**good[1], "reward": 0.5}, "reward"), ({**good[1], "trial": 0}, "trial"),
                       ({**good[1], "case_id": 7}, "case_id")]:
        (tmp_path / REFERENCE_FILE).write_text(json.dumps(good[0]) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(RecordError) as caught:
            read_reference(tmp_path)
        assert (caught.value.record, caught.value.field) == ("line 2", field)


def test_tables_and_text():
    result = agreement(ROWS, REFERENCE)
    confusion = confusion_frame(result)
    assert confusion.loc["lobeval pass", "benchmark fail"] == 1 and confusion.loc["lobeval fail", "benchmark fail"] == 4
    assert pass_k_frame(result)[["k", "cases"]].values.tolist() == [[1, 5], [2, 5]]
    assert pass_k_frame(result)["difference"].tolist() == pytest.approx([0.0, -0.2])
    frame = disagreements_frame(result)
    assert frame[["case_id", "trial", "lobeval", "benchmark"]].values.tolist() == [["b", 1, 0, 1], ["d", 0, 1, 0]]
    text = format_agreement(result)
    assert "compared 10 trajectories of 5 tasks" in text
    assert "agreement 0.800 [" in text and "Cohen's kappa 0.600 [" in text
    assert ("case d trial 0 [lobeval_error]: lobeval pass, benchmark fail: lobeval found nothing wrong; "
            "benchmark: no reason given") in text
    assert "2 disagreements, by what they come from:\n  lobeval_error 2: not explained by" in text
    empty = agreement([], [])
    assert (empty["agreement"]["value"], empty["kappa"]["value"], empty["pass_k"]) == (None, None, {})
    assert disagreements_frame(empty).empty
    assert format_agreement(empty) == "compared 0 trajectories of 0 tasks with the benchmark's verdicts"


# --- end to end: import, score with lobeval, compare ---------------------------------------------------------

def scored_import(tmp_path, importer, source):
    run = tmp_path / "run"
    importer(source, run)
    evaluate(run / "dataset.jsonl", run / "conversations.jsonl", run / "evaluation_results.json",
             suite=run / "suite", progress=False)
    return run


def test_an_imported_tau_bench_run_scored_by_lobeval_against_the_benchmark(tmp_path):
    result = run_agreement(scored_import(tmp_path, import_tau_bench, FIXTURES / "tau_bench_retail.json"))
    # task 0: both pass, both fail (wrong cancel reason); 1: both pass (a failed call, then the right one),
    # lobeval passes "1 Main Street" for "1 Main St" (fuzzy 0.82) where the database differs;
    # 2: both pass, both fail (price not told); 3: both pass both: transfer_to_human_agents changes no data in
    # τ-bench, so lobeval takes it for an optional read (benchmark_tools), as the benchmark does.
    assert result["confusion"] == {"lobeval_pass": {"benchmark_pass": 5, "benchmark_fail": 1},
                                   "lobeval_fail": {"benchmark_pass": 0, "benchmark_fail": 2}}
    assert result["agreement"]["value"] == pytest.approx(7 / 8)
    assert result["kappa"]["value"] == pytest.approx(5 / 7)   # p_e = (6·5 + 2·3) / 64 = 9/16
    assert result["pass_k"] == {"1": {"lobeval": 0.75, "benchmark": 0.625, "cases": 4},
                                "2": {"lobeval": 0.5, "benchmark": 0.25, "cases": 4}}
    assert [(d["case_id"], d["trial"], [r["kind"] for r in d["reasons"]], d["benchmark_reasons"], d["category"])
            for d in result["disagreements"]] == [("1", 1, [], ["database differs from the expected end state"],
                                                   "database")]
    assert result["categories"] == {"database": 1}


def test_an_imported_tau2_run_scored_by_lobeval_against_the_benchmark(tmp_path):
    run = scored_import(tmp_path, import_tau2, FIXTURES / "tau2_airline")
    result = run_agreement(run)
    # 7 compared (the infrastructure error is left out): 5 both pass (one a transfer with another summary: an
    # optional read, τ²-bench's GENERIC), 2 both fail (a failed cancel, max steps).
    assert result["left_out"]["machinery_errors"] == [{"case_id": "2", "trial": 1}]
    assert result["confusion"] == {"lobeval_pass": {"benchmark_pass": 5, "benchmark_fail": 0},
                                   "lobeval_fail": {"benchmark_pass": 0, "benchmark_fail": 2}}
    assert (result["agreement"]["value"], result["kappa"]["value"]) == (1.0, 1.0)
    assert result["pass_k"]["1"] == {"lobeval": 0.75, "benchmark": 0.75, "cases": 4}
    assert result["pass_k"]["2"] == {"lobeval": pytest.approx(1 / 3), "benchmark": pytest.approx(1 / 3), "cases": 3}
    assert result["disagreements"] == []
    rows = {(r["case_id"], r["trial"]): r for r in read_results(run / "evaluation_results.json")["rows"]}
    assert [r["kind"] for r in lobeval_reasons(rows["0", 1])] == ["failed_call"]
    assert [r["kind"] for r in lobeval_reasons(rows["1", 1])] == ["abnormal_ending"]


@pytest.mark.slow
def test_an_imported_run_goes_through_the_chain_from_evaluation_and_the_report_shows_the_agreement(
        tmp_path, monkeypatch, capsys):
    from helpers import REPO
    from lobeval.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    for name in ("LOBEVAL_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    fixture = REPO / "tests" / "fixtures" / "tau" / "tau_bench_retail.json"
    assert main(["import", "tau-bench", str(fixture), "--run-id", "tb", "--domain", "retail"]) == 0
    assert main(["run", "--run-id", "tb"]) == 1      # Success 0.5: the gate fails, and says so
    run_dir = tmp_path / "runs" / "tb"
    assert not (run_dir / "01_generate.ipynb").exists() and not (run_dir / "02_simulate.ipynb").exists()
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Agreement with the benchmark" in page and "Cohen" in page and "transfer_to_human_agents" in page
    capsys.readouterr()
    assert main(["agreement", str(run_dir)]) == 0
    assert "1 disagreement" in capsys.readouterr().out


# --- what each disagreement comes from (issue #43) -----------------------------------------------------------

TAU2_FAILED = {"reward": 0.0, "reward_basis": ["DB", "COMMUNICATE"], "db_check": {"db_match": False},
               "communicate_checks": [{"info": "1628", "met": False}],
               "nl_assertions": [{"nl_assertion": "Agent cancels XEHM4B.", "met": False}]}


def test_the_benchmarks_failed_checks_count_only_what_its_reward_basis_counts():
    assert benchmark_failures(TAU2_FAILED) == ["database", "communicate"]   # NL_ASSERTION is not in the basis
    assert benchmark_failures({**TAU2_FAILED, "db_check": {"db_match": True}}) == ["communicate"]
    assert benchmark_failures({**TAU2_FAILED, "reward_basis": ["NL_ASSERTION"]}) == ["nl_assertion"]
    assert benchmark_failures({"reward_basis": ["ACTION", "ENV_ASSERTION"],
                               "action_checks": [{"action_match": False}], "env_assertions": [{"met": False}]}) == [
        "action", "env_assertion"]
    assert benchmark_failures({"info": {"r_actions": 0.0, "outputs": {"54.04": False}}}) == ["database", "communicate"]
    assert benchmark_failures({"reward_basis": None, "info": {"note": "terminated: max_steps"}}) == []


CALLS = [{"functionName": "update_reservation_baggages", "arguments": {"reservation_id": "YAX4DR", "total": 2},
          "result": {}, "error": None},
         {"functionName": "update_reservation_baggages", "arguments": {"reservation_id": "YAX4DR", "total": 2},
          "result": {}, "error": None},
         {"functionName": "update_reservation_baggages", "arguments": {"reservation_id": "YAX4DR", "total": 3},
          "result": {}, "error": None}]


def unexpected(*indices):
    return row("x", 0, 0, unpaired_actual=[{"actual_index": index, "functionName": "update_reservation_baggages",
                                            "effect": "write", "allowed": False, "failed": False}
                                           for index in indices])


def test_each_disagreement_is_put_in_what_it_comes_from():
    database_basis = {"reward": 1.0, "reward_basis": ["DB", "COMMUNICATE"], "db_check": {"db_match": True}}
    # lobeval passed, the benchmark failed: the first check its reward counted and found failed
    assert disagreement_category(row("x", 0, 1), TAU2_FAILED) == "database"
    assert disagreement_category(row("x", 0, 1), {**TAU2_FAILED, "db_check": {"db_match": True}}) == "communicate"
    assert disagreement_category(row("x", 0, 1), {**TAU2_FAILED, "reward_basis": ["NL_ASSERTION"]}) == "nl_assertion"
    assert disagreement_category(row("x", 0, 1), {"reward": 0.0}) == "lobeval_error"
    # lobeval failed, the benchmark passed: a write repeated with the same arguments leaves the database as it was
    assert disagreement_category(unexpected(1), database_basis, CALLS) == "database"
    assert disagreement_category(unexpected(2), database_basis, CALLS) == "lobeval_error"   # other arguments
    assert disagreement_category(unexpected(1), database_basis) == "lobeval_error"          # the calls not known
    assert disagreement_category(unexpected(1), {"reward": 1.0, "reward_basis": ["ACTION"]}, CALLS) == "lobeval_error"
    missed = row("x", 0, 0, unpaired_expected=[{"functionName": "send_certificate", "optional": False}])
    assert disagreement_category(missed, database_basis, CALLS) == "lobeval_error"   # a task misread, to look into


def test_the_categories_are_counted_and_printed_and_unexpected_runs_left_out():
    rows = [unexpected(1), row("y", 0, 1), row("z", 0, 1, reference=False)]
    reference = [verdict("x", 0, 1, reward_basis=["DB"], db_check={"db_match": True}),
                 {**verdict("y", 0, 0), "reward_info": TAU2_FAILED}, verdict("z", 0, 0)]
    result = agreement(rows, reference, {("x", 0): CALLS})
    assert [(d["case_id"], d["category"]) for d in result["disagreements"]] == [("x", "database"), ("y", "database")]
    assert result["categories"] == {"database": 2}
    assert result["left_out"]["without_expectations"] == [{"case_id": "z", "trial": 0}]
    text = format_agreement(result)
    assert ("compared 2 trajectories of 2 tasks with the benchmark's verdicts; left out 1 that had no expectation "
            "lobeval could score (the run does not publish its tasks)") in text
    assert ("2 disagreements, by what they come from:\n  database 2: the benchmark's reward rests on its database's "
            "end state (DB), which lobeval does not replay: it compares the calls instead") in text
    assert "  case x trial 0 [database]: lobeval fail, benchmark pass: unexpected write update_reservation_baggages" \
        in text
    assert disagreements_frame(result)["category"].tolist() == ["database", "database"]


def test_a_real_run_whose_simulations_name_other_tasks_agrees_once_each_is_scored_against_its_own(tmp_path):
    # toolorchestra's five simulations, each graded 1.0 against the task its reward_info holds (not the one it names)
    run = scored_import(tmp_path, import_tau2, FIXTURES / "real" / "toolorchestra_airline_cut.json")
    result = run_agreement(run)
    assert result["confusion"] == {"lobeval_pass": {"benchmark_pass": 5, "benchmark_fail": 0},
                                   "lobeval_fail": {"benchmark_pass": 0, "benchmark_fail": 0}}
    assert (result["disagreements"], result["categories"]) == ([], {})


def test_the_report_says_what_was_left_out_and_what_each_disagreement_comes_from(tmp_path):
    from lobeval.analysis.report import benchmark_agreement
    from lobeval.workspace.runs import read_config

    run = scored_import(tmp_path, import_tau_bench, FIXTURES / "tau_bench_retail.json")
    page = benchmark_agreement(run, read_config(run))
    assert "8 trajectories of 4 tasks compared.</p>" in page
    assert ("what the disagreement comes from: database 1 (the benchmark&#x27;s reward rests on its database&#x27;s "
            "end state (DB), which lobeval does not replay: it compares the calls instead).</p>") in page
    assert "<td>database</td>" in page
    untasked = tmp_path / "untasked"
    import_tau2(FIXTURES / "real" / "adaptive_agent_airline_submission_cut.json", untasked)
    evaluate(untasked / "dataset.jsonl", untasked / "conversations.jsonl", untasked / "evaluation_results.json",
             suite=untasked / "suite", progress=False)
    assert ("0 trajectories of 0 tasks compared; left out 1 that ended in a machinery error; left out 1 that had no "
            "expectation lobeval could score (the run does not publish its tasks).</p>") in benchmark_agreement(
        untasked, read_config(untasked))
