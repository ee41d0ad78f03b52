"""The report's pieces: the gate's verdict, its escaping, the baseline and the trend, the page's hygiene."""
import json

from lobeval import report, runs
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


def test_the_gate_counts_machinery_errors_by_default(tmp_path):
    folder, config = run_folder(tmp_path, "a", errors=1)
    passed, checks = report.gate_verdict(folder, config, tmp_path / "index.jsonl")
    assert not passed
    assert [(check["check"], check["passed"]) for check in checks] == [
        ("Reliability >= 0.8", True), ("Success >= 0.8", True), ("error rate <= 0.05", False)]
    passed, _ = report.gate_verdict(folder, {**config, "max_error_rate": 0.25}, tmp_path / "index.jsonl")
    assert passed


def test_the_previous_run_of_the_suite_is_the_baseline(tmp_path):
    index = tmp_path / "index.jsonl"
    for run_id, suite in (("old", "s"), ("other", "t")):
        folder, config = run_folder(tmp_path, run_id, suite=suite)
        runs.add_to_index(index, config, folder, {"Reliability": 1.0, "Success": 1.0}, {})
    folder, config = run_folder(tmp_path, "new", success=0)
    assert report.baseline_run(index, config) == str(tmp_path / "old")
    passed, checks = report.gate_verdict(folder, config, index)
    assert not passed and "no regression in Success" in [check["check"] for check in checks]
    trend = report.trend_table(index, config, {"Reliability": 1.0, "Success": 0.0})
    assert trend.index.tolist() == ["old", "new"] and trend["Success"].tolist() == [1.0, 0.0]


def test_the_verdict_escapes_what_it_shows():
    checks = [{"check": "Success >= 0.8", "passed": False, "reason": "<script>x</script>"}]
    page = report.verdict_html(False, checks, {"counts": {"scored": 1, "errors": 0, "target_errors": 0}})
    assert "<script>" not in page and "&lt;script&gt;" in page and "FAILED" in page


def test_external_scripts_and_styles_are_dropped_and_inline_ones_kept():
    page = ('<script src="https://cdn.example/require.js"></script><link href="//cdn.example/x.css">'
            '<script>var local = 1;</script><img src="data:image/png;base64,AAAA">')
    kept = report.self_contained(page)
    assert "cdn.example" not in kept and "var local = 1;" in kept and "data:image/png" in kept
