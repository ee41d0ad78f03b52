"""`lobeval bench evaluate`: the whole `lobeval evaluate` process in a child, on synthetic conversations.
Prints figures; no test asserts a time."""
import re

import pytest

from lobeval.workflow.bench import _phases, format_evaluate, synthetic_work, write_synthetic
from lobeval.cli import main
from lobeval.evaluation.evaluate import EvaluationResult
from lobeval.core.records import read_cases, read_conversations


def test_the_synthetic_files_are_valid_records_of_the_stated_shape(tmp_path):
    dataset, conversations = write_synthetic(tmp_path, 7)
    cases = read_cases(dataset)
    records = [record for _, _, record in read_conversations(conversations)]
    assert len(cases) == len(records) == 7
    assert all(len(case.expected_function_calls) == 5 for case in cases)
    assert all(len(record["function_calls"]) == 6 for record in records)
    assert [c for c, _ in synthetic_work(3)] == records[:3]   # the same seed, the same conversations


def test_the_bench_reads_the_phases_from_evaluates_time_line(tmp_path):
    seconds = {"read": 1.25, "score": 2.5, "claims": 0.5, "end states": 0.01, "judges": 0.0, "summary": 0.2,
               "write": 0.3}
    summary = {"metrics": {"Reliability": 0.9}, "intervals": {}, "judges": {"status": "not run"},
               "counts": {"scored": 1, "errors": 0, "target_errors": 0}, "rows_file": "r.rows.jsonl"}
    printed = "\n".join(EvaluationResult(tmp_path / "r.json", summary, seconds).summary())
    assert _phases(printed) == seconds


def test_the_figures_are_printed_with_their_spread_and_shares():
    run = {"wall s": 8.0, "CPU s": 7.5, "peak MB": 300.0, "rows/s": 1250.0,
           "phases": {"startup": 2.0, "read": 2.0, "score": 3.0, "claims": 0.5, "end states": 0.1, "judges": 0.0,
                      "summary": 0.2, "write": 0.2}}
    lines = format_evaluate([{"conversations": 10_000, "runs": [run, {**run, "wall s": 10.0, "rows/s": 1000.0}],
                              "Reliability": 0.98, "scored": 10_000, "results MB": 0.007, "rows MB": 35.0,
                              "input MB": 24.0}])
    assert lines[0].startswith("evaluate: 10000 synthetic conversations")
    assert "wall 9.00 (8.00–10.00) s" in lines[1] and "1125 (1000–1250) rows/s" in lines[1]
    assert "startup 22 (20–25) %" in lines[2] and "claims/end states/judges 7 (6–8) %" in lines[2]
    assert "azure" not in lines[2]   # not configured, not run


@pytest.mark.slow
def test_bench_evaluate_runs_lobeval_evaluate_in_a_child_and_prints_its_figures(capsys, monkeypatch):
    monkeypatch.delenv("AZURE_AI_PROJECT", raising=False)
    assert main(["bench", "evaluate", "--conversations", "300"]) == 0
    out = capsys.readouterr().out
    assert "evaluate: 300 synthetic conversations" in out and "Reliability 0.980" in out
    assert re.search(r"wall [\d.]+ s, CPU [\d.]+ s, peak memory \(RSS\) \d+ MB, \d+ rows/s", out)
    shares = re.search(r"share of the wall time: (.*)", out).group(1)
    assert [part.rsplit(" ", 2)[0] for part in shares.split(", ")] == [
        "startup", "read", "score", "claims/end states/judges", "summary", "write"]
