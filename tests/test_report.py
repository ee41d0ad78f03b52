"""The report's pieces: the gate's verdict, its escaping, the baseline and the trend, the page's hygiene."""
import pytest

from lobeval import report, runs
from lobeval.errors import RecordError
from lobeval.records import write_json


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
        ("Reliability >= 0.8", True), ("Success >= 0.8", True), ("error rate <= 0.05", False)]
    passed, _ = report.gate_verdict(folder, {**config, "max_error_rate": 0.25}, earlier)
    assert passed


def test_the_previous_run_of_the_suite_is_the_baseline(tmp_path):
    index = tmp_path / "index.jsonl"
    indexed(index, tmp_path, "old")
    indexed(index, tmp_path, "other", suite="t")
    folder, config = run_folder(tmp_path, "new", success=0)
    earlier = report.history(index, config)
    assert (earlier.baseline, earlier.skipped) == (str(tmp_path / "old"), [])
    passed, checks = report.gate_verdict(folder, config, earlier)
    assert not passed and "no regression in Success" in [check["check"] for check in checks]
    trend = report.trend_table(earlier, config, {"Reliability": 1.0, "Success": 0.0})
    assert trend.index.tolist() == ["old", "new"] and trend["Success"].tolist() == [1.0, 0.0]
    assert report.skipped_html(earlier) == ""


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
    assert "Judges: Done 1 · Partial Failure 0 · Failed 0 · Not judged 1; 1 conversations with judge errors" in page
    assert "1 judge errors, first: a trial 0: goal: unusable &lt;reply&gt;" in page
    assert report.judges_html({"counts": {}, "rows": [], "metrics": {}, "judges": {"status": "not run"}}) == ""


def test_a_judge_figure_in_the_headline_says_what_it_covers():
    results = judged_results(coverage={"judge.final_score": {"judged": 1, "of": 2, "errors": 1}})
    table = report.headline_table(results)
    assert table.loc["Success", "over"] == "2 of 2 conversations scored"
    assert table.loc["judge.final_score", "over"] == "judged 1 of 2, 1 judge errors: a mean over part of them"
    assert report.headline_table(judged_results()).loc["judge.final_score", "over"] == "coverage not recorded"


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
