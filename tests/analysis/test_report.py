"""The report's pieces: the gate's verdict, its escaping, the baseline and the trend, the page's hygiene."""
import json
import re

import pytest

import pandas as pd

from lobeval.analysis import report
from lobeval.workspace import runs
from lobeval.core.errors import RecordError
from lobeval.core.records import write_json


def run_folder(root, run_id, *, success=1, errors=0, suite="s"):
    rows = [{"case_id": f"c{i}", "trial": 0, "scenario_name": "sc", "status": "scored",
             "termination": "user_finished", "Reliability": 1.0, "Success": success} for i in range(4)]
    rows += [{"case_id": f"e{i}", "trial": 0, "scenario_name": "sc", "status": "error",
              "termination": "llm_error", "error": "gave up"} for i in range(errors)]
    folder = root / run_id
    write_json(folder / "evaluation_results.json", {
        "metrics": {"Reliability": 1.0, "Success": float(success)},
        "counts": {"conversations": len(rows), "scored": 4, "errors": errors, "target_errors": 0}, "rows": rows})
    config = {"run_id": run_id, "suite_name": suite, "gate": {"Reliability": 0.8, "Success": 0.8}}
    write_json(folder / "config.json", config)
    return folder, config


def indexed(index, root, run_id, **options):
    folder, config = run_folder(root, run_id, **options)
    runs.add_to_index(index, config, folder, {"Reliability": 1.0, "Success": float(options.get("success", 1))}, {})
    return folder


def test_the_gate_counts_machinery_errors_by_default(tmp_path):
    folder, config = run_folder(tmp_path, "a", errors=1)
    earlier = report.history(tmp_path / "index.jsonl", config)
    passed, checks = report.gate_verdict(folder, config, earlier)
    assert not passed
    assert [(check["check"], check["passed"]) for check in checks] == [
        ("Reliability >= 0.8", True), ("Success >= 0.8", True), ("error rate <= 0.05", False),
        ("user faults <= 0.2", True)]
    passed, _ = report.gate_verdict(folder, {**config, "max_error_rate": 0.25}, earlier)
    assert passed


def test_the_previous_run_of_the_suite_is_the_baseline(tmp_path):
    index = tmp_path / "index.jsonl"
    indexed(index, tmp_path, "old")
    indexed(index, tmp_path, "other", suite="t")
    folder, config = run_folder(tmp_path, "new", success=0)
    earlier = report.history(index, config)
    assert (earlier.baseline, earlier.baseline_id, earlier.skipped) == (str(tmp_path / "old"), "old", [])
    passed, checks = report.gate_verdict(folder, config, earlier)
    assert not passed and "no regression in Success" in [check["check"] for check in checks]
    finished = earlier.baseline_finished
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", finished)
    assert report.comparison_text(checks, earlier).startswith(
        f"No regression against run old, finished {finished}, the last earlier run of this bot on this suite (same "
        f"scenarios, target, simulated user and attacks): ")
    worse = [{"check": "no regression in Recall_args", "passed": False, "reason": "-0.300 [-0.4, -0.2], p = 0.001"},
             {"check": "no regression in Success", "passed": True, "reason": "+0.000"}]
    assert report.comparison_text(worse, earlier) == (
        f"Regression against run old, finished {finished}, the last earlier run of this bot on this suite (same "
        f"scenarios, target, simulated user and attacks): Argument recall -0.300 [-0.4, -0.2], p = 0.001.")
    page = report.verdict_html(False, worse, {"counts": {"errors": 0}}, earlier)
    assert "Regression against run old" in page and "FAIL</b> no regression in Argument recall: -0.300" in page
    trend = report.trend_table(earlier, config, {"Reliability": 1.0, "Success": 0.0})
    assert trend.index.tolist() == ["old", "new"] and trend["Success"].tolist() == [1.0, 0.0]
    assert report.skipped_html(earlier) == ""


def dead_run(root, run_id):
    """A run whose every conversation was lost to the machinery: the bot could not be reached."""
    rows = [{"case_id": f"c{i}", "trial": 0, "scenario_name": "sc", "status": "error",
             "termination": "target_unavailable",
             "error": "start failed: POST http://127.0.0.1:9/bot/sessions: ConnectError: All connection attempts "
                      "failed"} for i in range(4)]
    folder = root / run_id
    write_json(folder / "evaluation_results.json", {
        "metrics": {"Reliability": None, "Success": None}, "rows": rows,
        "errors": [{"case_id": row["case_id"], "trial": 0, "reason": row["termination"], "error": row["error"]}
                   for row in rows],
        "counts": {"conversations": 4, "scored": 0, "errors": 4, "target_errors": 0}})
    config = {"run_id": run_id, "suite_name": "s", "gate": {"Reliability": 0.8, "Success": 0.8}}
    write_json(folder / "config.json", config)
    return folder, config


def test_a_run_whose_bot_could_not_be_reached_says_so_with_no_metric_and_no_regression_verdict(tmp_path):
    index = tmp_path / "index.jsonl"
    indexed(index, tmp_path, "good")
    folder, config = dead_run(tmp_path, "dead")
    earlier = report.history(index, config)
    passed, checks = report.gate_verdict(folder, config, earlier)
    assert not passed
    reached = ("no conversation scored: the bot (or its own infrastructure) could not be reached: all 4 conversations "
               "ended target_unavailable (a machinery error, not the bot's failure), first: c0 trial 0: start failed: "
               "POST http://127.0.0.1:9/bot/sessions: ConnectError: All connection attempts failed")
    assert [(check["check"], check["passed"], check["reason"]) for check in checks] == [
        ("conversations scored", False, f"{reached}: nothing was measured"),
        ("error rate <= 0.05", False,
         "4/4 conversations failed in the machinery (target_unavailable 4) = 1.000 > 0.05"),
        ("user faults <= 0.2", True, "0/0 scored conversations with a simulated-user fault = 0.000 <= 0.2")]
    assert re.fullmatch(r"Not compared with run good, finished [\d-]+ [\d:]+, the last earlier run of this bot on this "
                        r"suite \(same scenarios, target, simulated user and attacks\): this run scored no conversation\.",
                        report.comparison_text(checks, earlier))
    # the next run is compared with the last run that measured something, the dead one named as passed over
    runs.add_to_index(index, config, folder, {"Reliability": None, "Success": None}, {})
    folder, config = run_folder(tmp_path, "back", success=0)
    earlier = report.history(index, config)
    assert earlier.baseline_id == "good"
    assert earlier.skipped == [f"skipped earlier run dead as the baseline: {reached}"]
    _, checks = report.gate_verdict(folder, config, earlier)
    assert "no regression in Success" in [check["check"] for check in checks]


def test_earlier_runs_that_cannot_be_read_are_skipped_and_listed(tmp_path, caplog):
    index = tmp_path / "index.jsonl"
    indexed(index, tmp_path, "first")
    deleted = indexed(index, tmp_path, "deleted")
    damaged = indexed(index, tmp_path, "damaged")
    with index.open("a") as handle:
        handle.write('{"run_id": "torn", "suite_na\n')
    for path in deleted.iterdir():
        path.unlink()
    deleted.rmdir()
    (damaged / "evaluation_results.json").write_text('{"rows": [], "metrics": {}, "counts": {"errors": "many"}}')
    folder, config = run_folder(tmp_path, "new", success=0)

    earlier = report.history(index, config)

    assert earlier.baseline == str(tmp_path / "first")
    assert [entry["run_id"] for entry in earlier.runs] == ["first", "deleted", "damaged"]
    assert earlier.skipped == [record.getMessage() for record in caplog.records]
    torn, unreadable, gone = earlier.skipped
    assert torn.startswith(f"skipped {index}: line 4: invalid JSON")
    assert unreadable.startswith("skipped earlier run damaged as the baseline: ") and "field 'counts" in unreadable
    assert gone == f"skipped earlier run deleted as the baseline: {deleted}: no such run folder"
    page = report.skipped_html(earlier)
    assert page.count("<li>") == 3 and "could not be read" in page
    passed, checks = report.gate_verdict(folder, config, earlier)
    assert not passed and "no regression in Success" in [check["check"] for check in checks]


def test_the_run_being_made_must_be_whole(tmp_path):
    folder, config = run_folder(tmp_path, "new")
    (folder / "evaluation_results.json").write_text("{")
    with pytest.raises(RecordError, match="evaluation_results.json: line 1: invalid JSON"):
        report.gate_verdict(folder, config, report.history(tmp_path / "index.jsonl", config))


def test_the_verdict_names_what_it_was_compared_with(tmp_path):
    index = tmp_path / "index.jsonl"
    indexed(index, tmp_path, "old")
    folder, config = run_folder(tmp_path, "new")
    earlier = report.history(index, config)
    passed, checks = report.gate_verdict(folder, config, earlier)
    assert passed
    page = report.verdict_html(passed, checks, {"counts": {"scored": 4, "errors": 0}}, earlier)
    assert (f"No regression against run old, finished {earlier.baseline_finished}, the last earlier run of this bot "
            f"on this suite (same scenarios, target, simulated user and attacks): none of the 2 metrics compared is "
            f"significantly worse on the conversations both runs scored.") in page
    # the failed checks open, the passed ones folded
    assert "<details><summary>6 checks passed</summary>" in page and "FAIL" not in page

    alone = report.history(tmp_path / "none.jsonl", config)
    _, checks = report.gate_verdict(folder, config, alone)
    assert report.comparison_text(checks, alone) == report.comparison_text(checks, None) == (
        "No earlier run of this bot on this suite to compare with (a baseline must have the same scenarios, target, "
        "simulated user and attacks): the gate checks the minimums and the limits only.")

    unshared = report.History(earlier.runs, earlier.baseline, [])
    assert report.comparison_text(checks, unshared) == (
        f"Not compared with run old, finished {earlier.baseline_finished}, the last earlier run of this bot on this "
        f"suite (same scenarios, target, simulated user and attacks): the two runs share no scored conversation.")


def test_the_verdict_escapes_what_it_shows():
    checks = [{"check": "Success >= 0.8", "passed": False, "reason": "<script>x</script>"}]
    page = report.verdict_html(False, checks, {"counts": {"scored": 1, "errors": 0, "target_errors": 0}})
    assert "<script>" not in page and "&lt;script&gt;" in page and "FAILED" in page


def judged_results(**judges):
    rows = [{"case_id": "a", "trial": 0, "status": "scored", "judges": {
        "status": "run", "errors": [{"judge": "goal", "message_index": None, "error": "unusable <reply>"}]}},
            {"case_id": "b", "trial": 0, "status": "scored", "judges": {"status": "run", "errors": []}}]
    return {"rows": rows, "metrics": {"Success": 1.0, "judge.final_score": 0.9}, "intervals": {},
            "counts": {"conversations": 2, "scored": 2, "errors": 0}, "judges": {"status": "run", **judges}}


def test_the_verdict_shows_judge_errors_and_final_statuses():
    results = judged_results(errored_conversations=1,
                             final_status={"Done": 1, "Partial Failure": 0, "Failed": 0, "Not judged": 1})
    page = report.verdict_html(True, [], results)
    assert ("Judges: Done 1 · Partial Failure 0 · Failed 0 · Not judged 1; 1 conversations with judge errors "
            "(judged 1 of 2)") in page
    assert "1 judge errors, first: a trial 0: goal: unusable &lt;reply&gt;" in page
    not_run = {"counts": {}, "rows": [], "metrics": {}, "judges": {"status": "not run: no judge model configured"}}
    assert report.judges_html(not_run) == "<p>Judges: not run: no judge model configured.</p>"
    assert "not run: no judge model configured" in report.judges_section_html(not_run)


def test_the_judges_section_shows_each_status_and_each_figure_readably():
    results = judged_results(final_status={"Done": 1, "Partial Failure": 0, "Failed": 0, "Not judged": 1},
                             coverage={"judge.final_score": {"judged": 1, "of": 2, "errors": 1, "not_applicable": 0}})
    page = report.judges_section_html(results)
    assert [chip.split(">")[-1] for chip in page.split("</span>")[:4]] == [
        "Done 1", "Partial Failure 0", "Failed 0", "Not judged 1"]
    assert "judged 1 of 2 scored conversations" in page
    summary = report.judge_summary(results)
    assert summary.index.name == "judge" and summary.index.tolist() == ["Judges' final score"]
    assert list(summary.columns) == ["mean", "95% interval", "judged", "judge errors", "not applicable", "mean over",
                                     "calibration"]
    assert summary.loc["Judges' final score", "judged"] == "judged 1 of 2"
    assert summary.loc["Judges' final score", "calibration"] == "derived from the per-turn and goal judges"


def verdict_label(criterion, judge_value, human, *, model="judge-m", index=1, case="a"):
    return {"kind": "judge_verdict", "case_id": case, "trial": 0, "judge": "per_turn", "criterion": criterion,
            "message_index": index, "judge_value": judge_value, "human_value": human,
            "verdict": "agree" if judge_value == human else "disagree", "judge_model": model, "run_id": "r1",
            "note": "", "author": "ann", "id": f"{criterion}{index}{case}", "created_at": "2026-11-23T10:00:00+00:00"}


def test_each_judge_figure_says_on_how_many_labels_it_was_calibrated(tmp_path):
    labels = tmp_path / "labels.jsonl"
    found = [verdict_label("helpfulness", 4, 4, index=1), verdict_label("helpfulness", 2, 4, index=3),
             verdict_label("helpfulness", 5, 5, index=1, case="b"), verdict_label("helpfulness", 1, 1, index=3, case="b"),
             verdict_label("coherence", 4, 4, model="another-model")]
    labels.write_text("".join(json.dumps(label) + "\n" for label in found))
    results = judged_results(coverage={name: {"judged": 2, "of": 2, "errors": 0, "not_applicable": 0}
                                       for name in ("judge.helpfulness", "judge.coherence")})
    results["metrics"].update({"judge.helpfulness": 3.5, "judge.coherence": 4.0})
    results["config"] = {"labels_path": str(labels), "judge_model": "judge-m"}
    summary = report.judge_summary(results)
    # 3 of the 4 labels agree; the coherence label is of another judge model, so coherence is not calibrated
    assert summary.loc["helpfulness", "calibration"].startswith("calibrated on 4 labels: agreement 0.75, weighted κ ")
    assert summary.loc["coherence", "calibration"] == "not calibrated"
    labels.write_text('{"kind": "judge_verdict"}\n')
    assert report.judge_summary(results).loc["coherence", "calibration"].startswith(
        f"calibration unknown: {labels}: line 1: ")


def test_a_judge_figure_in_the_headline_says_what_it_covers():
    results = judged_results(coverage={"judge.final_score": {"judged": 1, "of": 2, "errors": 1}})
    table = report.headline_table(results)
    assert table.loc["Success", "over"] == "2 of 2 conversations scored"
    assert table.loc["Judges' final score", "over"] == "judged 1 of 2, 1 judge errors: a mean over part of them"
    assert report.headline_table(judged_results()).loc["Judges' final score", "over"] == "coverage not recorded"
    left_out = {**results, "counts": {**results["counts"], "user_faults": 1}, "over": {"Success": 1}}
    assert report.headline_table(left_out).loc["Success", "over"] == (
        "1 of 2 conversations scored (1 left out: simulated-user faults, quarantined cases)")


def test_claims_backed_says_what_the_rules_findings_are_worth():
    results = {"counts": {"conversations": 2, "scored": 2, "errors": 0}, "metrics": {"ClaimsBacked": 0.5},
               "over": {"ClaimsBacked": 2}, "rows": [], "judges": {"status": "not run: no judge model configured"}}
    meaning = report.headline_table(results).loc["ClaimsBacked", "what it measures"]
    # lobeval.scoring.trust's table: claimed but not done by the rules was right 0 of 29 over its bases
    assert meaning.endswith("without the claims judge, the rules' claimed-but-not-done findings were right 0 times of 29 "
                            "on real bots' conversations (docs/metrics.md §9): they are listed to check by hand, not "
                            "counted, and ClaimsBacked needs the claims judge")


def test_nothing_measured_gives_empty_tables_not_errors():
    results = {"rows": [], "metrics": {"Success": None}, "counts": {"conversations": 0, "errors": 0},
               "scenarios": []}
    assert report.headline_table(results).empty and report.scenario_summary(results).empty
    assert report.cost_by_role(results).empty


def test_external_scripts_and_styles_are_dropped_and_inline_ones_kept():
    page = ('<script src="https://cdn.example/require.js"></script><link href="//cdn.example/x.css">'
            '<script>var local = 1;</script><img src="data:image/png;base64,AAAA">')
    kept = report.self_contained(page)
    assert "cdn.example" not in kept and "var local = 1;" in kept and "data:image/png" in kept


ATTACK = "</script><script>alert(1)</script>"


def scored_row(case_id, scenario="sc", **found):
    return {"case_id": case_id, "trial": 0, "scenario_name": scenario, "status": "scored", "termination": "user_finished",
            "Reliability": 0.9, "Success": 0, "pairs": [], "unpaired_expected": [], "unpaired_actual": [],
            "wrong_arguments": [], "missing_arguments": [], "extra_arguments": [], "missing_outputs": [],
            "forbidden_calls": [], "claims": {"claimed_not_done": [], "done_not_told": []}, **found}


def priority(case_id, expected, actual):
    check = {"status": "wrong", "expected": expected, "actual": actual}
    return scored_row(case_id, pairs=[{"expected_index": 0, "actual_index": 0, "functionName": "create_ticket",
                                       "failed": False, "arguments": {"priority": check,
                                                                       "title": {"status": "correct"}}}],
                      wrong_arguments=[{"functionName": "create_ticket", "argument": "priority", **check}])


LONG_CLAIM = "I have created the action item ACT-77 " + "and told everyone about it " * 12 + ATTACK
FAILING = {"counts": {"conversations": 7, "scored": 7, "errors": 0, "trials": 1}, "metrics": {}, "rows": [
    *(priority(f"p-{i}", "Medium", "Low") for i in range(6)), priority("p-6", "High", "Medium"),
    scored_row("m-1", unpaired_expected=[{"functionName": "update_ticket", "optional": False}]),
    scored_row(f"c-1{ATTACK}", claims={"claimed_not_done": [{"message_index": 1, "claim": "create", "text": LONG_CLAIM}],
                                       "done_not_told": []})]}


def test_why_it_failed_is_told_in_sentences_with_counts_wrong_values_and_links_into_the_replay():
    page = report.why_html(FAILING)
    items = re.findall(r"<li><b>(.*?)</b>", page)
    assert items == [
        "create_ticket: priority wrong in 7 conversations: sent Low instead of Medium ×6, Medium instead of High",
        "update_ticket never called in 1 conversation",
        "claimed to have created something without doing it in 1 conversation"]
    # five links shown, all seven folded; each opens the replay at that conversation
    assert page.count("href='#replay-p-0-0'") == 2 and "<summary>all 7 conversations</summary>" in page
    assert "<a class='lobeval-replay-link' href='#replay-m-1-0'>m-1</a>" in page
    # the claim whole (not cut), escaped, folded because long; the case id with markup escaped and quoted
    assert "<script>" not in page and "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<details><summary>what the bot said (1)</summary>" in page
    assert html_text(LONG_CLAIM) in page
    assert "href='#replay-c-1%3C%2Fscript%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E-0'" in page
    assert report.why_html({**FAILING, "rows": [scored_row("ok", Success=1)]}) == "<p>No failures.</p>"


def html_text(text):
    import html

    return html.escape(text)


def test_claims_are_shown_whole_with_a_link_and_escaped():
    page = report.claims_html(FAILING)
    assert "claimed but not done" in page and html_text(LONG_CLAIM) in page and "<script>" not in page
    assert "lobeval-replay-link" in page
    nothing = {"rows": [], "counts": {}, "metrics": {}}
    assert report.claims_html(nothing) == "<p>no conversation scored: the run has no conversations</p>"


def test_root_causes_are_shown_whole_and_folded_where_long(tmp_path):
    assert report.root_causes_html(tmp_path) == "<p>Root causes: not run (no model configured for the analysis).</p>"
    description = "The bot lowers every priority it is given. " * 10
    write_json(tmp_path / "root_causes.json", {"schema_version": 1, "root_causes": [
        {"title": f"Priority {ATTACK}", "description": description, "severity": "high",
         "conversations": ["p-1#0", "odd"], "turns": [2], "suggested_fix": "Keep the priority the user gives."}]})
    page = report.root_causes_html(tmp_path, FAILING)
    assert html_text(description) in page and "<details><summary>What goes wrong: The bot lowers" in page
    assert "<i>Suggested fix:</i> Keep the priority the user gives." in page
    assert "<a class='lobeval-replay-link' href='#replay-p-1-0'>p-1</a>, odd · user turns 2" in page
    assert "<script>" not in page


def test_a_failed_root_cause_analysis_is_named_in_the_report(tmp_path):
    write_json(tmp_path / "root_causes.json", {"schema_version": 1, "status": f"error: root causes: HTTP 500 {ATTACK}",
                                               "root_causes": []})
    page = report.root_causes_html(tmp_path, FAILING)
    assert page == (f"<p>Root causes: the analysis did not finish (error: root causes: HTTP 500 "
                    f"{html_text(ATTACK)}).</p>")


def test_tables_have_readable_headers_and_no_index_or_none():
    results = {"counts": {"conversations": 2, "scored": 2, "errors": 0}, "metrics": {"Success": 0.5}, "rows": [],
               "judges": {"status": "not run: no judge model configured"},
               "scenarios": [{"scenario_name": None, "conversations": 2, "errors": 0, "Reliability": 0.5,
                              "Success": 0.5, "Success_interval": [0.0, 1.0], "claimed_not_done": 0,
                              "done_not_told": 0, "judge.final_score": None}]}
    summary = report.scenario_summary(results)
    assert summary.index.tolist() == ["(no scenario)"]
    assert "judges' final score" not in summary   # the judges did not run
    page = report.table_html(summary, results)
    headers = re.findall(r"<th>(.*?)</th>", page)
    assert headers[:4] == ["scenario", "conversations", "machinery errors", "Reliability"]
    assert not any("_" in header for header in headers)
    assert ">None<" not in page and "<td>—</td>" in page and "<td class='n'>0.500</td>" in page
    assert ">0<" not in page.split("<tbody>")[0]
    results["scenarios"][0].update(user_faults=1, quarantined=1)
    assert report.scenario_summary(results).loc["(no scenario)", "left out"] == 2
    unnamed = report.table_html(pd.DataFrame([{"what": ATTACK}]))
    assert re.findall(r"<th>(.*?)</th>", unnamed) == ["what"] and "<script>" not in unnamed
    assert report.table_html(pd.DataFrame(), {"rows": []}, "x") == "<p>no conversation scored: the run has no conversations</p>"
    costs = report.cost_by_role({"usage": {"user": {}, "target": {}}, "judges": {"usage_by_judge": {"per_turn": {}}}})
    assert costs.index.tolist() == ["simulated user", "bot (target)", "judge: per turn"]
    cached = report.cost_by_role({"usage": {"judge": {"prompt_tokens": 1000, "cached_prompt_tokens": 400}}})
    assert cached.loc["judges", "prompt tokens cached"] == "40%" and costs.loc["bot (target)", "prompt tokens cached"] == ""
    priced = report.cost_by_role({"counts": {"conversations": 4},
                                  "usage": {"target": {"cost_usd": 0.5}, "user": {"cost_usd": None, "cost_known": False}},
                                  "judges": {"usage_by_judge": {"goal": {"cost_usd": 0.1}}}})
    assert priced["per conversation"].to_dict() == {"bot (target)": "$0.1250", "simulated user": "",
                                                     "judge: goal": "$0.0250"}


def test_the_heat_maps_stand_side_by_side_as_one_inline_image():
    page = report.heatmaps_html(FAILING)
    assert page.count("<img class='figure' style='--natural:") == page.count("src='data:image/png;base64,") == 1
    # in a box that scrolls on a narrow screen and says so
    assert "<div class='lobeval-box'><div class='scroll-hint'>scroll sideways to see all of it →</div>" in page
    nothing = report.heatmaps_html({"rows": [], "counts": {}, "metrics": {}})
    assert nothing.count("no conversation scored: the run has no conversations") == 2


def test_the_configuration_is_a_short_definition_list():
    config = {"schema_version": 1, "run_id": "r1", "suite": "/x/scenarios/s", "suite_name": "s", "seed": 42,
              "cases_per_scenario": 3, "target": f"bot{ATTACK}", "user": "llm", "trials": 2, "concurrency": 4,
              "judges": None, "gate": {"Reliability": 0.8, "Success": 0.9}, "max_error_rate": 0.05,
              "models": {"user": {"provider": "openai", "model": "gpt-4o-mini", "base_url": None,
                                  "api_version": None}, "judge": None,
                         "target": {"provider": "openai", "model": "smollm2", "base_url": "http://127.0.0.1:8000/v1",
                                    "tools": "prompted"}},
              "versions": {"python": "3.11.7", "lobeval": "0.1.0"}, "started": "2026-01-01T00:00:00", "extra": [1]}
    page = report.config_html(config)
    entries = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page))
    assert entries["Suite"] == "s" and entries["Simulated user"] == "llm"
    assert entries["Test cases"] == "3 per scenario, 2 trials each, seed 42"
    assert entries["Models"] == ("simulated user: openai gpt-4o-mini · judges: none (offline) · bot (target): openai "
                                 "smollm2 at http://127.0.0.1:8000/v1, its functions described in the prompt")
    assert entries["Judges"] == "not run: no judge model"
    assert entries["Quality gate"] == ("Reliability ≥ 0.8, Success ≥ 0.9, at most 5% of conversations lost to "
                                       "machinery errors, at most 20% spoiled by the simulated user")
    assert "<details><summary>Versions</summary>python 3.11.7 · lobeval 0.1.0</details>" in page
    assert "<dt>extra</dt><dd>[1]</dd>" in page and "<dt>suite folder</dt><dd>/x/scenarios/s</dd>" in page
    assert "<script>" not in page and "{" not in page.split("</style>")[1]   # no JSON


def fault_results(excluded="user_fault"):
    rows = [{"case_id": "c1", "trial": 0, "scenario_name": "s", "status": "scored", "excluded": excluded,
             "user_faults": [{"check": "invented_value", "turn": 2, "message_index": 3,
                              "detail": "the user said <TKT-9990>, which is neither in its case nor said by the bot"}]},
            {"case_id": "c2", "trial": 0, "scenario_name": "s", "status": "scored", "user_faults": []},
            {"case_id": "c3", "trial": 0, "scenario_name": "s", "status": "error", "user_faults": []}]
    counts = {"conversations": 3, "scored": 2, "errors": 1, "target_errors": 0,
              "user_faults": int(excluded == "user_fault"), "user_faults_kept": int(excluded is None)}
    return {"rows": rows, "counts": counts, "metrics": {}}


def test_the_report_shows_each_user_fault_with_its_turn_and_what_was_left_out():
    page = report.user_faults_html(fault_results())
    assert "1 of 2 scored conversations had a mistake of the simulated user" in page
    assert ("<td class='n'>2</td><td>invented_value</td><td>the user said &lt;TKT-9990&gt;, which is neither in "
            "its case nor said by the bot</td><td>left out</td>") in page
    assert "<td><a class='lobeval-replay-link' href='#replay-c1-0'>c1</a></td>" in page
    verdict = report.verdict_html(True, [], fault_results())
    assert "1 conversation left out for simulated-user faults (--include-user-faults keeps them)." in verdict
    assert "<td>kept in</td>" in report.user_faults_html(fault_results(excluded=None))
    clean = {"rows": fault_results()["rows"][1:], "counts": {}, "metrics": {}}
    assert "No mistake of the simulated user was found in the 1 scored conversations checked" in \
        report.user_faults_html(clean)
    # a conversation of an imported run without its tasks: no check could run on its user, and the page says so
    unknown = {"case_id": "c4", "trial": 0, "scenario_name": "s", "status": "scored", "reference": False,
               "user_faults": [], "user_checks_not_run": {"invented_value": "the user's scenario is unknown",
                                                          "ended_early": "the expected calls are unknown",
                                                          "contradicted_instructions": "the user's scenario is unknown"}}
    unchecked = {"rows": [*clean["rows"], unknown], "metrics": {},
                 "counts": {"user_unchecked": {"invented_value": 1, "ended_early": 1, "contradicted_instructions": 1}}}
    page = report.user_faults_html(unchecked)
    assert "No mistake of the simulated user was found in the 1 scored conversations checked" in page
    assert ("Simulated-user checks not run where the case does not know what its user was told or what it expected "
            "(their users are unchecked, not clean): contradicted_instructions on 1 conversation, ended_early on 1 "
            "conversation, invented_value on 1 conversation.") in page
    alone = report.user_faults_html({**unchecked, "rows": [unknown]})
    assert "No scored conversation could be checked for mistakes of the simulated user. Simulated-user checks" in alone


# --- the verdict in one sentence, the title, the terminal's failing conversations ---------------------

def moved(case_id, expected, sent):
    """A reassign_action_item conversation whose call sent the due date a day early while the bot told the user the
    date asked for: the sample bot's deliberate weakness."""
    wrong = {"status": "wrong", "expected": expected, "actual": sent}
    claim = {"message_index": 5, "claim": "update", "functionName": "update_action_item", "argument": "due_date",
             "said": expected, "sent": sent, "text": f"Done: due date is now {expected}.", "basis": "value"}
    return scored_row(case_id, "reassign_action_item", pairs=[{"functionName": "update_action_item", "arguments": {
        "due_date": wrong}}], wrong_arguments=[{"functionName": "update_action_item", "argument": "due_date", **wrong}],
                      claims={"claimed_not_done": [claim], "done_not_told": []})


SAMPLE = {"counts": {"conversations": 39, "scored": 39, "errors": 0, "trials": 1}, "metrics": {}, "rows": [
    *(scored_row(f"create_ticket-{i:03d}", "create_ticket", Success=1) for i in range(36)),
    moved("reassign_action_item-001", "2027-02-18", "2027-02-17"),
    moved("reassign_action_item-002", "2026-12-12", "2026-12-11"),
    moved("reassign_action_item-003", "2026-12-04", "2026-12-03")]}


def minimum(metric, value, low, high, passed=True, **facts):
    return {"check": f"{metric} >= 0.8", "passed": passed, "reason": "", "kind": "minimum", "metric": metric,
            "value": value, "minimum": 0.8, "interval": [low, high], **facts}


LIMITS = [{"check": "error rate <= 0.05", "passed": True, "reason": "", "kind": "error_rate", "failed": 0, "of": 39,
           "limit": 0.05},
          {"check": "user faults <= 0.2", "passed": True, "reason": "", "kind": "user_faults", "spoiled": 0, "of": 39,
           "limit": 0.2}]
SAMPLE_CHECKS = [minimum("Reliability", 0.987, 0.970, 1.0), minimum("Success", 0.923, 0.821, 1.0), *LIMITS]


def test_the_verdict_is_one_sentence_saying_what_failed_why_and_what_the_gate_decided():
    assert report.verdict_sentence(True, SAMPLE_CHECKS, SAMPLE) == (
        "3 of 39 conversations failed, all 3 because the bot sent a due date one day earlier than it should have, "
        "while telling the user the right one; the quality gate passed: Reliability 0.987 and Success 0.923 meet their "
        "minimum of 0.8.")
    # the same defect behind some of the failures only; a machinery error, counted apart
    other = {**SAMPLE, "rows": [*SAMPLE["rows"], scored_row("m-1", unpaired_expected=[
        {"functionName": "update_ticket", "optional": False}]),
        {"case_id": "e-1", "trial": 0, "scenario_name": "sc", "status": "error", "termination": "target_unavailable"}]}
    below = [minimum("Reliability", 0.95, 0.9, 1.0), minimum("Success", 0.5, 0.3, 0.7, passed=False), *LIMITS]
    assert report.verdict_sentence(False, below, other) == (
        "4 of 40 conversations failed, 3 of them because the bot sent a due date one day earlier than it should have, "
        "while telling the user the right one; 1 more ended in a machinery error (the bot could not be reached), not "
        "counted against the bot; the quality gate failed because Success 0.500 is below its minimum of 0.8.")
    passing = {**SAMPLE, "rows": SAMPLE["rows"][:36]}
    assert report.verdict_sentence(True, SAMPLE_CHECKS, passing).startswith(
        "None of the 36 conversations failed; the quality gate passed: ")


def test_a_run_mostly_lost_to_the_machinery_says_so_first():
    down = [{"case_id": f"e-{i}", "trial": 0, "scenario_name": "sc", "status": "error",
             "termination": "target_unavailable"} for i in range(3)]
    lost = {"counts": {}, "metrics": {}, "rows": [*SAMPLE["rows"][:2], SAMPLE["rows"][-1], *down]}
    checks = [*SAMPLE_CHECKS[:2], {**LIMITS[0], "passed": False, "failed": 3, "of": 6}]
    assert report.verdict_sentence(False, checks, lost) == (
        "3 of 6 conversations ended in machinery errors (the bot could not be reached), so this run says little about "
        "the bot; of the others, 1 of 3 conversations failed, because the bot sent a due date one day earlier than it "
        "should have, while telling the user the right one; the quality gate failed because 3 of 6 conversations were "
        "lost to machinery or judge errors, more than the 5% allowed.")


def test_an_undecided_check_reads_undecided_in_the_verdict_and_in_the_checks():
    undecided = minimum("Success", 0.75, 0.6, 0.9, passed=False, undecided=True, rule="point")
    checks = [minimum("Reliability", 0.9, 0.85, 0.95), undecided, *LIMITS]
    assert report.verdict_sentence(False, checks, SAMPLE).endswith(
        "; the quality gate failed because Success 0.750 is below its minimum of 0.8 but too close to it to be sure "
        "(undecided, counted as failed).")
    counted_in = {**undecided, "passed": True, "rule": "interval"}
    assert report.verdict_sentence(True, [checks[0], counted_in], SAMPLE).endswith(
        "; the quality gate passed: Reliability 0.900 meets its minimum of 0.8, and Success 0.750 is below its minimum "
        "of 0.8 but too close to it to be sure (undecided, counted as passed).")
    drop = {"check": "no regression in Success", "passed": True, "reason": "", "kind": "regression",
            "metric": "Success", "difference": -0.05, "interval": [-0.15, 0.0], "undecided": True}
    earlier = report.History([{"run_id": "r0", "run_dir": "/runs/r0"}], "/runs/r0", [])
    assert report.verdict_sentence(True, [drop], SAMPLE, earlier).endswith(
        "; the quality gate passed: Success may have got worse than in run r0, by too little to be sure (undecided, "
        "counted as passed).")
    page = report.verdict_html(False, [{**undecided, "reason": "straddles it: undecided"}], SAMPLE)
    assert '<b style="color:#a15c00">UNDECIDED</b> Success &gt;= 0.8: straddles it: undecided' in page
    assert "PASS" not in page and "FAIL</b>" not in page


def test_a_run_that_scored_nothing_is_no_verdict_on_the_bot():
    down = {"counts": {"conversations": 2, "scored": 0, "errors": 2}, "metrics": {}, "rows": [
        {"case_id": f"c-{i}", "trial": 0, "scenario_name": "sc", "status": "error", "termination": "target_unavailable"}
        for i in range(2)]}
    nothing = [{"check": "conversations scored", "passed": False, "reason": "", "kind": "scored"},
               {"check": "Success >= 0.8", "passed": False, "reason": "", "kind": "minimum", "metric": "Success",
                "minimum": 0.8, "value": None}]
    assert report.verdict_sentence(False, nothing, down) == (
        "No conversation could be scored, as all 2 conversations ended in a machinery error (the bot could not be "
        "reached), so this run says nothing about the bot; the quality gate failed because nothing could be measured.")
    assert report.verdict_sentence(False, nothing, {"rows": [], "counts": {}}) == (
        "This run has no conversations, so it says nothing about the bot; the quality gate failed because nothing "
        "could be measured.")
    assert report.title_text(False, down, {"suite_name": "s", "target": "https://bots.example/api",
                                           "started": "2026-11-28T10:19:14+0000"}) == (
        "s · https://bots.example/api · 2026-11-28 · gate FAILED, nothing scored")
    assert report.failing_lines(down) == []


def test_the_page_opens_with_the_verdict_then_what_it_is_of_and_its_title_says_the_same():
    config = {"run_id": "r1", "suite_name": "support_tickets", "target": "lobeval.samples.support_tickets:SupportTicketBot",
              "started": "2026-11-28T10:19:14+0000"}
    page = report.headline_html(True, SAMPLE_CHECKS, SAMPLE, config)
    sentence = report.verdict_sentence(True, SAMPLE_CHECKS, SAMPLE)
    assert page.split("</style>", 1)[1].startswith(f"<div class='lobeval-report'><p class='sentence' style='border-left-"
                                                  f"color:#1b7f3b'>{html_text(sentence)}</p>")
    assert ("<p class='about'>lobeval report of run r1: suite support_tickets, bot "
            "lobeval.samples.support_tickets:SupportTicketBot, started 2026-11-28 10:19</p>") in page
    assert report.title_text(True, SAMPLE, config) == "support_tickets · SupportTicketBot · 2026-11-28 · gate passed, " \
                                                      "3 of 39 failed"


def test_the_terminal_names_the_failing_conversations_and_where_to_read_why():
    assert report.failing_lines(SAMPLE) == [
        "failing: 3 of 39 conversations, all of scenario reassign_action_item: reassign_action_item-001, "
        "reassign_action_item-002, reassign_action_item-003",
        "why: in the report (the last line), under 'Why it failed'; each conversation there opens at the turn where it "
        "went wrong"]
    many = {**SAMPLE, "rows": [*SAMPLE["rows"], *(scored_row(f"p-{i}") for i in range(4))]}
    assert report.failing_lines(many)[0] == (
        "failing: 7 of 43 conversations, of scenarios sc (4), reassign_action_item (3): reassign_action_item-001, "
        "reassign_action_item-002, reassign_action_item-003, p-0, p-1 and 2 more")
    assert report.failing_lines({**SAMPLE, "rows": SAMPLE["rows"][:36]}) == []


def test_why_it_failed_tells_a_wrong_value_the_bot_also_told_the_user_once():
    page = report.why_html(SAMPLE)
    assert re.findall(r"<li><b>(.*?)</b>", page) == [
        "update_action_item: due_date wrong in 3 conversations, one day early: sent 2026-12-03 instead of 2026-12-04, "
        "2026-12-11 instead of 2026-12-12, 2027-02-17 instead of 2027-02-18; each time the bot told the user the date it "
        "should have sent"]
    assert "</div><ul><li class='quote'>Done: due date is now 2027-02-18.</li>" in page   # what it told, whole
    assert "such findings" not in page and "blind" not in page


def test_the_report_shows_the_figures_stage_04_drew_and_draws_only_those_it_did_not():
    results = {"rows": [], "pass_k": {}}   # nothing scored: each section says why instead of drawing
    drawn = {"call_heatmaps": "<p>as stage 04 drew it</p>"}
    assert report.shown_figure("call_heatmaps", drawn, results) == "<p>as stage 04 drew it</p>"
    assert report.shown_figure("pass_k", drawn, results) == report.drawn_figure("pass_k", results)
    assert report.drawn_figure("pass_k", results) == "<p>no conversation scored: the run has no conversations</p>"
    with pytest.raises(ValueError, match=r"^no figure 'heatmap'; the figures: call_heatmaps, metric_distributions, "
                                         r"pass_k$"):
        report.drawn_figure("heatmap", results)
