"""Run comparison and the gate, on hand-made run folders with hand-computed expectations."""
from __future__ import annotations

import json

import pandas as pd
from scipy import stats
import pytest

from lobeval.cli import main
from lobeval.analysis.compare import (compare_metric, compare_runs, flaky_cases, flip_rate, flip_summary, format_comparison,
                             gate as gate_checks, power_figures)
from lobeval.core.errors import ConfigError, RecordError
from lobeval.scoring.scoring import METRICS


def row(case_id, success=1, reliability=1.0, *, trial=0, scenario="scen-a", status="scored", judge=None):
    values = {metric: None if status == "error" else reliability for metric in METRICS}
    values["Success"] = None if status == "error" else success
    judges = {"status": "run", "final_score": judge} if judge is not None else {"status": "not run: no judge model"}
    return {"case_id": case_id, "trial": trial, "scenario_name": scenario, "status": status, **values, "judges": judges}


def write_run(tmp_path, name, rows, metrics=None):
    errors = sum(r["status"] == "error" for r in rows)
    results = {"metrics": metrics or {"Reliability": 1.0}, "counts": {"conversations": len(rows), "errors": errors},
               "rows": rows}
    folder = tmp_path / name
    folder.mkdir()
    (folder / "evaluation_results.json").write_text(json.dumps(results))
    return folder


CASES = [f"case-{i:02d}" for i in range(12)]


@pytest.fixture
def eight_flips(tmp_path):
    """12 shared cases, all successes in the baseline; cases 0-7 fail in the candidate (Reliability 0.5)."""
    baseline = write_run(tmp_path, "old", [row(c) for c in CASES] + [row("only-old")])
    candidate_rows = [row(c, 0, 0.5) for c in CASES[:8]] + [row(c) for c in CASES[8:]]
    candidate_rows += [row("only-new"), row("broken", status="error")]
    candidate = write_run(tmp_path, "new", candidate_rows,
                          metrics={"Reliability": 14 / 21, "Success": 5 / 13, "judge.final_score": None})
    return baseline, candidate


def test_eight_flips_are_a_significant_regression(eight_flips):
    comparison = compare_runs(*eight_flips)
    assert comparison["pairs"] == {"shared": 12, "only_baseline": 1, "only_candidate": 1}
    success = next(m for m in comparison["metrics"] if m["metric"] == "Success")
    assert (success["baseline"], success["candidate"]) == (1.0, pytest.approx(4 / 12))
    assert success["difference"] == pytest.approx(-8 / 12)
    assert (success["worse"], success["better"]) == (8, 0)
    assert success["p_value"] == pytest.approx(2 * 0.5 ** 8)  # exact McNemar: 0.0078125
    assert success["regression"] is True
    low, high = success["interval"]
    assert low <= -8 / 12 <= high < 0
    reliability = next(m for m in comparison["metrics"] if m["metric"] == "Reliability")
    assert reliability["difference"] == pytest.approx(-8 * 0.5 / 12)
    assert reliability["p_value"] < 0.05  # exact: 2 / 2**8 of the sign flips are as extreme
    assert comparison["regressions"] == list(METRICS)
    assert [m["metric"] for m in comparison["metrics"]] == list(METRICS)  # no judge scores in either run
    assert [f["case_id"] for f in comparison["flips"]["worse"]] == CASES[:8]
    assert comparison["flips"]["worse"][0] == {"case_id": "case-00", "trial": 0, "scenario_name": "scen-a"}
    assert comparison["flips"]["better"] == []
    assert comparison["error_rate"] == {"baseline": 0.0, "candidate": pytest.approx(1 / 14),
                                        "difference": pytest.approx(1 / 14)}
    assert next(m for m in comparison["metrics"] if m["metric"] == "Success")["worse"] == 8


def test_one_flip_is_not_significant(tmp_path):
    baseline = write_run(tmp_path, "old", [row(c) for c in CASES])
    candidate = write_run(tmp_path, "new", [row(CASES[0], 0, 0.5)] + [row(c) for c in CASES[1:]])
    comparison = compare_runs(baseline, candidate)
    success = next(m for m in comparison["metrics"] if m["metric"] == "Success")
    assert success["difference"] == pytest.approx(-1 / 12)  # worse by more than 0.05 ...
    assert success["p_value"] == 1.0  # ... but one discordant pair: binomial p = 1
    reliability = next(m for m in comparison["metrics"] if m["metric"] == "Reliability")
    assert reliability["p_value"] == 1.0  # every sign flip of one case is as extreme
    assert comparison["regressions"] == []
    assert [f["case_id"] for f in comparison["flips"]["worse"]] == ["case-00"]


def test_difference_weighs_trials_and_interval_resamples_cases():
    # case a: two trials, each 0.2 worse; case b: one trial, 0.1 better.
    pairs = pd.DataFrame({"case_id": ["a", "a", "b"], "Reliability_baseline": [1.0, 1.0, 0.5],
                          "Reliability_candidate": [0.8, 0.8, 0.6]})
    entry = compare_metric(pairs, "Reliability")
    assert (entry["pairs"], entry["cases"]) == (3, 2)
    assert entry["difference"] == pytest.approx((-0.4 + 0.1) / 3)
    # resampled case sets: {a,a} -0.2, {b,b} +0.1, {a,b} -0.1 (weights 1/4, 1/4, 1/2)
    assert entry["interval"] == [pytest.approx(-0.2), pytest.approx(0.1)]
    assert entry["p_value"] == pytest.approx(1.0)  # all 4 sign flips are at least as extreme
    assert entry["regression"] is False


def test_constant_difference_in_three_cases_is_not_significant():
    pairs = pd.DataFrame({"case_id": ["a", "b", "c"], "Recall_fn_baseline": [1.0, 1.0, 1.0],
                          "Recall_fn_candidate": [0.9, 0.9, 0.9]})
    entry = compare_metric(pairs, "Recall_fn")
    assert entry["interval"] == [pytest.approx(-0.1), pytest.approx(-0.1)]
    assert entry["p_value"] == pytest.approx(2 / 8)  # all-minus and all-plus of 8 sign patterns
    assert entry["regression"] is False


def test_judge_score_compared_only_where_both_have_it(tmp_path):
    baseline = write_run(tmp_path, "old", [row("a", judge=0.9), row("b", judge=0.7)])
    candidate = write_run(tmp_path, "new", [row("a", judge=0.6), row("b")])
    entry = next(m for m in compare_runs(baseline, candidate)["metrics"] if m["metric"] == "judge.final_score")
    assert (entry["pairs"], entry["baseline"], entry["candidate"]) == (1, 0.9, 0.6)


def test_format_comparison_lists_shares_and_flips(eight_flips):
    text = format_comparison(compare_runs(*eight_flips))
    assert "12 scored conversations shared; 1 only in the baseline, 1 only in the candidate" in text
    assert "Success 1 -> 0: 8 conversation(s)\n  case-00 trial 0 (scen-a)\n" in text
    assert "Success 0 -> 1: 0 conversation(s)" in text
    assert "error rate: baseline 0.000, candidate 0.071 (+0.071)" in text
    assert text.endswith("significant regressions (worse by > 0.05 with p < 0.05): " + ", ".join(METRICS))


def test_compare_command_prints(eight_flips, capsys):
    assert main(["compare", *map(str, eight_flips)]) == 0
    assert "Success 1 -> 0: 8 conversation(s)" in capsys.readouterr().out


def test_bad_run_folders(tmp_path, capsys):
    good = write_run(tmp_path, "good", [row("a")])
    with pytest.raises(ConfigError, match=f"^{tmp_path / 'missing'}: no such run folder$"):
        compare_runs(tmp_path / "missing", good)
    (tmp_path / "empty").mkdir()
    results = tmp_path / "empty" / "evaluation_results.json"
    assert main(["compare", str(good), str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == (f"lobeval compare: error: {results}: file: not found "
                                       "(run `lobeval evaluate` or `lobeval run` first)\n")
    results.write_text("{not json")
    with pytest.raises(RecordError, match="evaluation_results.json: line 1: invalid JSON"):
        compare_runs(good, tmp_path / "empty")
    results.write_text(json.dumps({"metrics": {}, "counts": {"conversations": 0, "errors": 0}, "rows": []}))
    with pytest.raises(RecordError) as caught:
        compare_runs(good, tmp_path / "empty")
    assert str(caught.value) == f"{results}: file: field 'rows': no rows: nothing was evaluated"
    results.write_text(json.dumps({"metrics": {}, "counts": {"conversations": 1, "errors": 0}, "rows": [{"trial": 0}]}))
    with pytest.raises(RecordError, match="row 0: field 'case_id': is required$"):
        compare_runs(good, tmp_path / "empty")
    other = write_run(tmp_path, "other", [row("z")])
    with pytest.raises(ConfigError, match="share no scored"):
        compare_runs(good, other)


def gate(capsys, *argv):
    code = main(["gate", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_gate_passes(eight_flips, capsys):
    baseline, _ = eight_flips
    code, out, _ = gate(capsys, "--run", baseline, "--min", "Reliability=0.8", "--max-error-rate", "0.1")
    assert code == 0
    assert out == ("PASS  Reliability >= 0.8: Reliability = 1.000 >= 0.8\n"
                   "PASS  error rate <= 0.1: 0/13 conversations failed in the machinery = 0.000 <= 0.1\n"
                   "gate: passed (2/2 checks passed)\n")


def test_gate_fails_below_minimum_and_on_unmeasured_metric(eight_flips, capsys):
    # The Reliability check's interval over the 13 cases straddles 0.8: undecided (issue 45), whichever the rule.
    # `--min-rule point` counts it as failed, the default interval rule as passed (issue #20); each line says which.
    _, candidate = eight_flips
    code, out, _ = gate(capsys, "--run", candidate, "--min", "Reliability=0.8", "--min", "judge.final_score=0.5",
                        "--min-rule", "point")
    assert code == 1
    assert out == ("UNDECIDED  Reliability >= 0.8: Reliability = 0.667 < 0.8, 95% interval [0.577, 0.809] straddles "
                   "it: undecided, counted as failed (--min-rule point: a value below its minimum fails)\n"
                   f"FAIL  judge.final_score >= 0.5: judge.final_score not measured in {candidate / 'evaluation_results.json'}\n"
                   "gate: FAILED (0/2 checks passed; 1 undecided, counted as the rule says)\n")
    code, out, _ = gate(capsys, "--run", candidate, "--min", "Reliability=0.8", "--min", "judge.final_score=0.5")
    assert code == 1   # the unmeasured judge score still fails
    assert out.splitlines()[0] == ("UNDECIDED  Reliability >= 0.8: Reliability = 0.667 < 0.8, 95% interval [0.577, "
                                   "0.809] straddles it: undecided, counted as passed (--min-rule interval fails only "
                                   "an interval entirely below)")
    code, out, _ = gate(capsys, "--run", candidate, "--min", "Reliability=0.8")
    assert code == 0 and out.splitlines()[-1] == "gate: passed (1/1 checks passed; 1 undecided, counted as the rule says)"


def test_gate_fails_on_error_rate(eight_flips, capsys):
    _, candidate = eight_flips
    code, out, _ = gate(capsys, "--run", candidate, "--max-error-rate", "0.05")
    assert code == 1
    assert out.startswith("FAIL  error rate <= 0.05: 1/14 conversations failed in the machinery = 0.071 > 0.05\n")


def test_the_error_rate_check_names_the_machinery_that_failed(tmp_path, capsys):
    rows = [row("a"), row("b", status="error"), row("c", status="error"), row("d", status="error")]
    run = write_run(tmp_path, "lost", rows)
    results = json.loads((run / "evaluation_results.json").read_text())
    results["errors"] = [{"case_id": case_id, "trial": 0, "reason": reason, "error": "..."} for case_id, reason in
                         (("b", "target_unavailable"), ("c", "target_unavailable"), ("d", "llm_error"))]
    (run / "evaluation_results.json").write_text(json.dumps(results))
    code, out, _ = gate(capsys, "--run", run, "--max-error-rate", "0.05")
    assert code == 1
    assert out.startswith("FAIL  error rate <= 0.05: 3/4 conversations failed in the machinery (target_unavailable 2, "
                          "llm_error 1) = 0.750 > 0.05\n")


def test_gate_fails_on_significant_regression(eight_flips, capsys):
    baseline, candidate = eight_flips
    code, out, _ = gate(capsys, "--run", candidate, "--baseline", baseline)
    assert code == 1
    assert ("FAIL  no regression in Success: -0.667 " in out
            and "over 12 shared, p = 0.0078: worse by more than 0.05 and significant\n" in out)
    assert out.endswith("gate: FAILED (0/6 checks passed)\n")
    code, out, _ = gate(capsys, "--run", baseline, "--baseline", candidate)  # the other way round: better
    assert code == 0


def test_gate_bad_input(eight_flips, capsys):
    baseline, _ = eight_flips
    code, _, err = gate(capsys, "--run", baseline, "--min", "Reliabilty=0.8")
    assert code == 2
    assert err == ("lobeval gate: error: --min: unknown metric Reliabilty; known: Precision_args, Precision_fn, "
                   "Recall_args, Recall_fn, Reliability, Success, judge.final_score, pass^1\n")
    for bad in ("Reliability", "Reliability=high", "=0.8"):
        code, _, err = gate(capsys, "--run", baseline, "--min", bad)
        assert (code, err) == (2, f"lobeval gate: error: --min '{bad}': expected METRIC=NUMBER, e.g. Reliability=0.8\n")
    code, _, err = gate(capsys, "--run", baseline)
    assert (code, err) == (2, "lobeval gate: error: gate: nothing to check; give --min, --baseline, --max-error-rate, "
                                "--max-user-fault-rate or --max-breaches\n")


def test_compare_and_gate_take_run_ids_and_name_what_is_missing(eight_flips, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)
    assert main(["compare", "old", "new"]) == 0
    assert capsys.readouterr().out.startswith(f"baseline  {tmp_path / 'old' / 'evaluation_results.json'}\n")
    code, out, _ = gate(capsys, "--run", "new", "--baseline", "old")
    assert code == 1 and "FAIL  no regression in Success: -0.667 " in out
    code, _, err = gate(capsys, "--run", "runs/nope")   # named before "nothing to check"
    assert (code, err) == (2, f"lobeval gate: error: --run runs/nope: the folder {tmp_path.parent / 'runs' / 'nope'} "
                              f"does not exist\n")
    code, _, err = gate(capsys, "--run", "new", "--baseline", "olde", "--min", "Success=0.5")
    assert (code, err) == (2, f"lobeval gate: error: --baseline olde: no run olde under {tmp_path}; did you mean "
                              f"old?\n")
    assert main(["compare", "old", "nwe"]) == 2
    assert capsys.readouterr().err == f"lobeval compare: error: candidate nwe: no run nwe under {tmp_path}; did you " \
                                      f"mean new?\n"


def test_two_identical_runs_size_nothing(tmp_path, capsys):
    run = trials_run(tmp_path, "same", {case: [1] for case in CASES[:6]} | {case: [0] for case in CASES[6:]})
    power = compare_runs(run, run)["noise"]["power"]
    assert (power["sd"], power["difference"], power["minimum_detectable"], power["cases_needed"]) == (0, 0, None, None)
    assert main(["compare", str(run), str(run)]) == 0
    out = capsys.readouterr().out
    assert ("nothing can be sized from these runs: the two runs agree on Success in every one of the 12 shared cases, "
            "so they show no noise to size a comparison on; run both with --trials 3 or more and compare again\n") in out
    assert "to detect" not in out and "minimum detectable" not in out
    # every case failing now that passed before: no variance either
    passing = trials_run(tmp_path, "passing", {case: [1] for case in CASES[:6]})
    failing = trials_run(tmp_path, "failing", {case: [0] for case in CASES[:6]})
    assert main(["compare", str(passing), str(failing)]) == 0
    assert "nothing can be sized from these runs: Success differs by the same -1.000 in every one of the 6 shared " \
           "cases" in capsys.readouterr().out


def judged_run(tmp_path, judged, errored):
    """39 scored conversations; `judged` of them have a final score (1.0), `errored` had judge errors."""
    rows = [row(f"c{i:02d}", judge=1.0 if i < judged else None) for i in range(39)]
    folder = write_run(tmp_path, f"judged-{judged}", rows, metrics={"Reliability": 1.0, "judge.final_score": 1.0})
    path = folder / "evaluation_results.json"
    results = json.loads(path.read_text())
    results["judges"] = {"status": "run", "errored_conversations": errored,
                         "coverage": {"judge.final_score": {"judged": judged, "of": 39, "errors": errored}}}
    path.write_text(json.dumps(results))
    return folder


def test_a_judge_mean_over_some_of_the_conversations_cannot_pass_the_gate(tmp_path, capsys):
    partial = judged_run(tmp_path, 6, 33)
    code, out, _ = gate(capsys, "--run", partial, "--min", "judge.final_score=0.9", "--max-error-rate", "0.05")
    assert code == 1
    assert out == ("FAIL  judge.final_score >= 0.9: judge.final_score = 1.000 >= 0.9 over 6 of 39 conversations "
                   "judged (33 judge errors): below the 100% coverage a gate needs\n"
                   "FAIL  error rate <= 0.05: 33/39 conversations failed in the machinery (0 machinery errors, "
                   "33 with judge errors) = 0.846 > 0.05\n"
                   "gate: FAILED (0/2 checks passed)\n")
    code, out, _ = gate(capsys, "--run", partial, "--min", "judge.final_score=0.9", "--min-judge-coverage", "0.1")
    assert code == 0
    code, out, _ = gate(capsys, "--run", judged_run(tmp_path, 39, 0), "--min", "judge.final_score=0.9")
    assert (code, out.splitlines()[0]) == (0, "PASS  judge.final_score >= 0.9: judge.final_score = 1.000 >= 0.9 "
                                              "over 39 of 39 conversations judged (0 judge errors)")


@pytest.mark.parametrize("option, value", [("--max-error-rate", "2"), ("--max-error-rate", "-1"),
                                           ("--min-judge-coverage", "1.5")])
def test_a_share_outside_zero_to_one_is_bad_input(eight_flips, capsys, option, value):
    baseline, _ = eight_flips
    with pytest.raises(SystemExit) as exit_status:
        gate(capsys, "--run", baseline, "--min", "Reliability=0.5", option, value)
    assert exit_status.value.code == 2
    assert capsys.readouterr().err == (f"lobeval gate: error: argument {option}: must be at least 0 and at most 1, "
                                       f"got {value} (see lobeval gate --help)\n")


@pytest.mark.parametrize("rows", [[], [row("a", status="error")]])
def test_a_run_that_measured_nothing_fails_the_gate(tmp_path, capsys, rows):
    run = write_run(tmp_path, "nothing", [{**r, "termination": "llm_error", "error": "gave up"} for r in rows],
                    metrics={"Reliability": None})
    code, out, _ = gate(capsys, "--run", run, "--min", "Reliability=0.5", "--min", "Success=0.5")
    assert code == 1
    why = ("the run has no conversations" if not rows
           else "lobeval's own model endpoint failed: all 1 conversations ended llm_error (a machinery error, not "
                "the bot's failure), first: a trial 0: gave up")
    # one check says why, in place of a "not measured" line per minimum
    assert out.splitlines() == [f"FAIL  conversations scored: no conversation scored: {why}: nothing was measured",
                                "gate: FAILED (0/1 checks passed)"]


def test_a_baseline_named_for_a_run_that_measured_nothing_must_still_be_whole(tmp_path, capsys):
    run = write_run(tmp_path, "nothing", [], metrics={})
    code, out, _ = gate(capsys, "--run", run, "--baseline", write_run(tmp_path, "old", [row("a")]))
    assert code == 1 and "no regression" not in out
    (tmp_path / "broken").mkdir()
    code, _, err = gate(capsys, "--run", run, "--baseline", tmp_path / "broken")
    assert code == 2 and "broken/evaluation_results.json: file: not found" in err


# --- noise from repeated trials (issue #20)



def trials_run(tmp_path, name, successes):
    """One row per trial: {case_id: [Success of trial 0, trial 1, ...]}."""
    rows = [row(case, s, trial=t) for case, values in successes.items() for t, s in enumerate(values)]
    return write_run(tmp_path, name, rows, metrics={"Reliability": 1.0,
                                                    "Success": sum(r["Success"] for r in rows) / len(rows)})


def test_flip_rate_and_flaky_cases_on_hand_made_trials(tmp_path):
    assert flip_rate(0, 4) == 0 and flip_rate(4, 4) == 0
    assert flip_rate(2, 4) == pytest.approx(4 / 6)   # 2 x 2 disagreeing pairs of the 6
    assert flip_rate(1, 4) == pytest.approx(3 / 6)
    assert flip_rate(1, 1) is None
    run = trials_run(tmp_path, "r", {"a": [1, 1, 1, 1], "b": [1, 0, 1, 0], "c": [0, 0, 0, 1], "d": [1]})
    from lobeval.analysis.compare import load_run
    results = load_run(run)
    assert flaky_cases(results) == [
        {"case_id": "b", "scenario_name": "scen-a", "trials": 4, "successes": 2, "flip_rate": pytest.approx(4 / 6)},
        {"case_id": "c", "scenario_name": "scen-a", "trials": 4, "successes": 1, "flip_rate": pytest.approx(3 / 6)}]
    summary = flip_summary(results)
    assert (summary["cases"], summary["repeated"]) == (4, 3)
    assert summary["mean_flip_rate"] == pytest.approx((0 + 4 / 6 + 3 / 6) / 3)


def test_minimum_detectable_difference_and_what_a_target_needs():
    # ten cases, per-case differences +1, 0 x 8, -1 (one trial each): sd = sqrt(2/9)
    pairs = pd.DataFrame({"case_id": list("abcdefghij"), "Success_baseline": [0] * 9 + [1],
                          "Success_candidate": [1] + [0] * 9})
    sd = (2 / 9) ** 0.5
    power = power_figures(pairs, target=0.5 * sd)
    assert power["sd"] == pytest.approx(sd)
    # G*Power, one-sample t-test, two-tailed, alpha 0.05, power 0.8: n = 10 detects d = 0.996; d = 0.5 needs n = 34
    assert power["minimum_detectable"] == pytest.approx(0.996 * sd, rel=1e-3)
    assert power["cases_needed"] == 34
    assert power["trials_needed"] is None       # one trial per case: no within-case variance to go on


def test_trials_needed_split_the_variance_within_and_between_cases():
    # two trials per case: a (1, 0) mean 0.5 var 0.5; b (0, 0) 0 var 0; c (0, 1) 0.5 var 0.5; d (1, 1) 1 var 0
    pairs = pd.DataFrame({"case_id": list("aabbccdd"), "Success_baseline": [0] * 8,
                          "Success_candidate": [1, 0, 0, 0, 0, 1, 1, 1]})
    smallest = 2.12795   # the effect size 4 cases detect; checked below against the noncentral t
    df, critical = 3, stats.t.ppf(0.975, 3)
    noncentral = smallest * 4 ** 0.5
    assert stats.nct.sf(critical, df, noncentral) + stats.nct.cdf(-critical, df, noncentral) == pytest.approx(0.8, abs=1e-4)
    power = power_figures(pairs, target=0.4)
    assert power["sd"] ** 2 == pytest.approx(1 / 6)        # of 0.5, 0, 0.5, 1
    assert power["minimum_detectable"] == pytest.approx(smallest * (1 / 6) ** 0.5, rel=1e-4)
    # within w = (0.5 + 0 + 0.5 + 0) / 4 = 0.25; between b = 1/6 - 0.25/2 = 1/24;
    # room = 0.16 / 2.12795^2 - 1/24 = 0.035334 - 0.041667 < 0: more trials cannot reach 0.4
    assert power["trials_needed"] is None
    power = power_figures(pairs, target=0.6)
    # room = 0.36 / 4.52817 - 1/24 = 0.079502 - 0.041667 = 0.037835; m = ceil(0.25 / 0.037835) = ceil(6.61) = 7
    assert power["trials_needed"] == 7


def test_compare_prints_the_noise(tmp_path, capsys):
    old = trials_run(tmp_path, "old", {c: [1, 1] for c in CASES[:4]})
    new = trials_run(tmp_path, "new", {"case-00": [1, 0], "case-01": [0, 1], "case-02": [1, 1], "case-03": [1, 1]})
    comparison = compare_runs(old, new, target_difference=0.1)
    assert [case["case_id"] for case in comparison["noise"]["candidate"]["flaky"]] == ["case-00", "case-01"]
    assert main(["compare", str(old), str(new), "--target-difference", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "baseline Success flip rate: mean 0.000 over 4 of 4 cases with 2+ trials; 0 flaky case(s)" in out
    assert "candidate Success flip rate: mean 0.500 over 4 of 4 cases with 2+ trials; 2 flaky case(s)\n" \
           "  case-00 1/2 (flip rate 1.000)\n  case-01 1/2 (flip rate 1.000)\n" in out
    assert "minimum detectable Success difference (alpha 0.05, power 0.8, paired over 4 cases): " in out
    assert "to detect 0.1: " in out


def test_a_drop_too_small_to_tell_from_the_noise_is_an_undecided_regression_check(tmp_path):
    # 20 shared cases, one of them failing now: Success -0.050, its interval reaching -0.15, McNemar p = 1
    before = trials_run(tmp_path, "before", {f"c{i:02d}": [1] for i in range(20)})
    after = trials_run(tmp_path, "after", {f"c{i:02d}": [int(i != 0)] for i in range(20)})
    success = next(check for check in gate_checks(after, baseline=before) if check["check"] == "no regression in Success")
    assert (success["passed"], success["undecided"], success["kind"], success["metric"]) == (
        True, True, "regression", "Success")
    assert success["reason"].startswith("-0.050 [-0.150, +0.000] over 20 shared, p = 1.0000: undecided, counted as "
                                        "passed (not significantly worse, but the interval reaches a drop of more "
                                        "than 0.05)")
    reliability = next(check for check in gate_checks(after, baseline=before)
                       if check["check"] == "no regression in Reliability")
    assert "undecided" not in reliability and reliability["passed"]   # no difference at all: decided


def test_gate_interval_rule(tmp_path):
    # 20 cases, Success mean 0.75: the interval over cases straddles 0.8 ...
    straddles = trials_run(tmp_path, "straddles", {f"c{i:02d}": [int(i >= 5)] for i in range(20)})
    (check,) = gate_checks(straddles, minimums={"Success": 0.8}, min_rule="interval")
    assert check["passed"] is True and check["undecided"] is True
    assert check["reason"].endswith("straddles it: undecided, counted as passed (--min-rule interval fails only an "
                                    "interval entirely below)")
    (check,) = gate_checks(straddles, minimums={"Success": 0.8}, min_rule="point")   # point rule unchanged
    assert check["passed"] is False and check["undecided"] is True
    assert check["reason"].startswith("Success = 0.750 < 0.8, 95% interval")
    assert {key: check[key] for key in ("kind", "metric", "value", "minimum", "rule")} == {
        "kind": "minimum", "metric": "Success", "value": 0.75, "minimum": 0.8, "rule": "point"}
    # ... mean 0.25: entirely below 0.8, a failure under both rules
    below = trials_run(tmp_path, "below", {f"c{i:02d}": [int(i < 5)] for i in range(20)})
    for rule in ("interval", "point"):
        (check,) = gate_checks(below, minimums={"Success": 0.8}, min_rule=rule)
        assert check["passed"] is False and check["reason"].endswith("entirely below") and "undecided" not in check
    with pytest.raises(ConfigError, match="--min-rule 'mean'"):
        gate_checks(below, minimums={"Success": 0.8}, min_rule="mean")


def test_rows_left_out_of_the_bot_metrics_are_not_compared_and_are_said(tmp_path, capsys):
    """A conversation left out for a simulated-user fault or a quarantined case neither pairs, flips nor makes a
    case flaky, and compare says how many each run left out."""
    old = trials_run(tmp_path, "old", {c: [1, 1] for c in CASES[:4]})
    rows = [row("case-00", 1, trial=0), {**row("case-00", 0, trial=1), "excluded": "user_fault"},
            *[{**row("case-01", 0, trial=t), "excluded": "quarantined"} for t in (0, 1)],
            *[row(c, 1, trial=t) for c in CASES[2:4] for t in (0, 1)]]
    new = write_run(tmp_path, "new", rows, metrics={"Reliability": 1.0, "Success": 1.0})
    results = json.loads((new / "evaluation_results.json").read_text())
    results["counts"].update(user_faults=1, quarantined=2)
    (new / "evaluation_results.json").write_text(json.dumps(results))
    comparison = compare_runs(old, new)
    assert comparison["pairs"] == {"shared": 5, "only_baseline": 3, "only_candidate": 0}
    assert comparison["flips"]["worse"] == []
    assert comparison["noise"]["candidate"]["flaky"] == []
    assert comparison["left_out"] == {"baseline": "", "candidate": (
        "1 conversation left out for simulated-user faults (--include-user-faults keeps them); "
        "2 conversations quarantined (quarantined_case labels): left out")}
    assert main(["compare", str(old), str(new)]) == 0
    assert "\ncandidate: 1 conversation left out for simulated-user faults" in capsys.readouterr().out


def test_a_minimum_says_over_how_many_conversations_and_what_was_left_out(tmp_path):
    run = write_run(tmp_path, "r", [row(c) for c in CASES[:3]], metrics={"Reliability": 1.0, "Success": 1.0})
    results = json.loads((run / "evaluation_results.json").read_text())
    results.update(over={"Success": 3}, counts={**results["counts"], "user_faults": 2})
    (run / "evaluation_results.json").write_text(json.dumps(results))
    (check,) = gate_checks(run, minimums={"Success": 0.8})
    assert check["reason"].startswith("Success = 1.000 >= 0.8 over 3 conversations "
                                      "(2 conversations left out for simulated-user faults")


def test_a_run_the_simulated_user_spoiled_fails_the_user_fault_check(tmp_path):
    run = write_run(tmp_path, "r", [row(c) for c in CASES[:10]], metrics={"Reliability": 1.0, "Success": 1.0})
    results = json.loads((run / "evaluation_results.json").read_text())
    results["counts"].update(scored=10, user_faults=2, user_faults_kept=1)
    (run / "evaluation_results.json").write_text(json.dumps(results))
    (check,) = gate_checks(run, max_user_fault_rate=0.2)
    assert check == {"check": "user faults <= 0.2", "passed": False,
                     "reason": "3/10 scored conversations with a simulated-user fault = 0.300 > 0.2: fix the "
                               "simulated user before trusting the bot's figures",
                     "kind": "user_faults", "spoiled": 3, "of": 10, "limit": 0.2}
    (check,) = gate_checks(run, max_user_fault_rate=0.3)
    assert check["passed"] and check["reason"] == "3/10 scored conversations with a simulated-user fault = 0.300 <= 0.3"
    with pytest.raises(ConfigError, match="--max-user-fault-rate 1.5: expected a share from 0 to 1"):
        gate_checks(run, max_user_fault_rate=1.5)
    assert main(["gate", "--run", str(run), "--max-user-fault-rate", "0.2"]) == 1
