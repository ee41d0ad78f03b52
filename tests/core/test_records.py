"""The records stages hand each other: reading JSONL and results, and what a bad record is told."""
import json

import pytest

from lobeval.core.errors import RecordError
from lobeval.core.records import (
    MACHINERY_ERRORS, NORMAL_ENDINGS, SCHEMA_VERSION, ResultsWriter, iter_jsonl, read_cases, read_conversations,
    read_json, read_results, rows_path, write_json, write_jsonl,
)


def results(**overrides):
    return {"schema_version": SCHEMA_VERSION, "metrics": {"Reliability": 1.0},
            "counts": {"conversations": 1, "scored": 1, "errors": 0},
            "rows": [{"case_id": "a-001", "trial": 0, "status": "scored", "termination": "user_finished",
                      "Reliability": 1.0, "Success": 1}], **overrides}


def test_results_are_read_back_as_written(tmp_path):
    path = write_json(tmp_path / "r.json", results())
    assert read_results(path) == results()


@pytest.mark.parametrize("document, where, field, problem", [
    ({"metrics": {}}, "file", "rows", "is required"),
    (results(counts={"errors": 0}), "file", "counts.conversations", "is required"),
    (results(metrics=[]), "file", "metrics", "must be a JSON object, got []"),
    (results(rows=[{"trial": 0, "status": "scored"}]), "row 0", "case_id", "is required"),
    (results(rows=[{"case_id": "a", "trial": -1, "status": "scored"}]), "row 0", "trial", "Input should be greater than or equal to 0"),
    (results(rows=[{"case_id": "a", "trial": 0, "status": "done"}]), "row 0", "status", "Input should be 'scored' or 'error'"),
    (results(rows=[{"case_id": "a", "trial": 0, "status": "scored", "termination": "tired"}]), "row 0", "termination",
     "Input should be 'user_finished'"),
    (results(rows=[{"case_id": "a", "trial": 0, "status": "scored", "claims": {"source": "model"}}]), "row 0",
     "claims.source", "Input should be 'judge' or 'rules'"),
    (results(rows=[{"case_id": "a", "trial": 0, "status": "scored", "claims": {"source": "judge", "rules": []}}]),
     "row 0", "claims.rules", "must be a JSON object, got []"),
    (results(claims_source={"model": 3}), "file", "claims_source.model.[key]", "Input should be 'judge' or 'rules'"),
])
def test_a_bad_results_file_names_the_row_and_field(tmp_path, document, where, field, problem):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    with pytest.raises(RecordError) as caught:
        read_results(path)
    assert str(caught.value).startswith(f"{path}: {where}: field '{field}': {problem}")


@pytest.mark.parametrize("content, problem", [
    (b"{\n not json", "line 2: invalid JSON: Expecting property name enclosed in double quotes (column 2)"),
    ('{"a": "\u00e9"}'.encode("utf-16"), "file: is UTF-16 text: save it as UTF-8"),
    (b'{"a":\n "caf\xe9"}', "line 2: is not UTF-8 text (byte 0xe9): save the file as UTF-8"),
    (b'{"a": "x\x00"}', "line 1: holds a NUL byte: save the file as UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "file: nested more than 64 levels deep"),
    (b"[" * 65 + b"]" * 65, "file: nested more than 64 levels deep"),
    (b'{"a": NaN}', "file: NaN is not a number JSON allows"),
    (b'{"a": 1e999}', "file: the number 1e999 is out of range"),
    (b'{"a": "\\ud800"}', "file: holds a lone surrogate"),
])
def test_a_json_file_that_cannot_be_read_is_bad_input(tmp_path, content, problem):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(RecordError) as caught:
        read_json(path)
    assert str(caught.value).startswith(f"{path}: {problem}")


@pytest.mark.parametrize("make, problem", [
    (lambda path: None, "file: not found"),
    (lambda path: path.mkdir(), "file: is a folder, not a file"),
])
def test_a_missing_file_or_a_folder_is_bad_input(tmp_path, make, problem):
    path = tmp_path / "x.json"
    make(path)
    with pytest.raises(RecordError) as caught:
        read_json(path)
    assert str(caught.value) == f"{path}: {problem}"


def test_a_line_may_hold_any_unicode_line_break_and_json_as_deep_as_allowed(tmp_path):
    path = tmp_path / "x.jsonl"
    deep = {"a": [[[[[]]]]]}
    for _ in range(58):
        deep = {"a": deep}
    path.write_text(json.dumps({"a": "one\u2028two\x85three"}, ensure_ascii=False) + "\n" + json.dumps(deep) + "\n",
                    encoding="utf-8")
    assert [record for _, record in iter_jsonl(path)] == [{"a": "one\u2028two\x85three"}, deep]


def test_jsonl_lines_are_numbered_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n[1]\n')
    rows = iter_jsonl(path)
    assert next(rows) == (1, {"a": 1}) and next(rows) == (3, {"a": 2})
    with pytest.raises(RecordError, match=r"x.jsonl: line 4: must be a JSON object"):
        next(rows)


def test_write_jsonl_leaves_no_file_when_a_record_cannot_be_written(tmp_path):
    with pytest.raises(TypeError):
        write_jsonl(tmp_path / "out.jsonl", [{"a": 1}, {"b": object()}])
    assert list(tmp_path.iterdir()) == []


def test_a_case_and_a_conversation_name_their_line_and_field(tmp_path):
    cases = write_jsonl(tmp_path / "d.jsonl", [{"case_id": "a", "scenario_name": "s", "user_instructions": "x",
                                                "ordered": "sometimes"}])
    with pytest.raises(RecordError, match=r"d.jsonl: line 1 \(case a\): field 'ordered': must be true or false, got \"sometimes\""):
        read_cases(cases)
    conversations = write_jsonl(tmp_path / "c.jsonl", [{"case_id": "a", "messages": [], "function_calls": [
        {"functionName": "f", "arguments": "{oops"}]}])
    with pytest.raises(RecordError, match=r"c.jsonl: line 1 \(case a\): field 'function_calls\[0\].arguments'"):
        read_conversations(conversations)


def test_machinery_errors_and_normal_endings_are_apart():
    assert not set(MACHINERY_ERRORS) & set(NORMAL_ENDINGS)
    assert {"llm_error", "target_unavailable", "budget_spent"} == set(MACHINERY_ERRORS)


# --- the rows file beside evaluation_results.json ---------------------------------------------------------

PAIR = {"expected_index": 0, "actual_index": 0, "functionName": "create_ticket", "optional": False, "failed": False,
        "arguments": {"title": {"expected": "Printer jams", "actual": "printer jams", "status": "correct"},
                      "priority": {"expected": "High", "actual": "Low", "status": "wrong"},
                      "due": {"expected": "2024-05-01", "actual": None, "status": "missing"}},
        "extra_arguments": {"notes": {"actual": "urgent", "allowed": False}}}
FULL_ROW = {"case_id": "a-001", "trial": 0, "scenario_name": "s", "status": "scored", "termination": "user_finished",
            "Reliability": 0.5, "Success": 0, "pairs": [PAIR], "unpaired_expected": [], "unpaired_actual": [],
            "wrong_arguments": [{"functionName": "create_ticket", "argument": "priority", "expected": "High",
                                 "actual": "Low"}],
            "missing_arguments": [{"functionName": "create_ticket", "argument": "due", "expected": "2024-05-01"}],
            "extra_arguments": [{"functionName": "create_ticket", "argument": "notes", "actual": "urgent",
                                 "allowed": False}],
            "missing_outputs": [], "forbidden_calls": [], "judges": {"status": "not run"}}
ERROR_ROW = {"case_id": "a-002", "trial": 0, "scenario_name": "s", "status": "error", "termination": "llm_error",
             "Reliability": None, "Success": None}


def write_results(path, rows, **overrides):
    summary = {key: value for key, value in results(**overrides).items() if key != "rows"}
    summary["counts"] = {**summary["counts"], "conversations": len(rows)}
    with ResultsWriter(path) as writer:
        for row in rows:
            writer.write(row)
        writer.finish(summary)
    return path


def test_rows_are_written_beside_the_results_and_read_back_as_they_were(tmp_path):
    path = write_results(tmp_path / "evaluation_results.json", [FULL_ROW, ERROR_ROW])
    assert json.loads(path.read_text())["rows_file"] == "evaluation_rows.jsonl"
    lines = [json.loads(line) for line in (tmp_path / "evaluation_rows.jsonl").read_text().splitlines()]
    assert lines[0]["schema_version"] == SCHEMA_VERSION and "wrong_arguments" not in lines[0]   # derivable
    assert lines[1] == {"schema_version": SCHEMA_VERSION, **ERROR_ROW}
    read = read_results(path)
    assert read["rows"] == [FULL_ROW, ERROR_ROW] and list(read["rows"][0]) == list(FULL_ROW)
    assert "rows_file" not in read and read_results(path, rows=False) == {k: v for k, v in read.items() if k != "rows"}


def test_argument_lists_that_pairs_do_not_give_are_kept(tmp_path):
    odd = {**FULL_ROW, "wrong_arguments": []}
    path = write_results(tmp_path / "r.json", [odd])
    assert "wrong_arguments" in json.loads((tmp_path / "r.rows.jsonl").read_text())
    assert read_results(path)["rows"] == [odd]


def test_values_orjson_cannot_hold_exactly_are_written_by_the_standard_library(tmp_path):
    huge = {**ERROR_ROW, "usage": {"user": {"calls": 10 ** 30}}, "error": "caf\u00e9 \u2028 \U0001F600"}
    path = write_results(tmp_path / "r.json", [huge])
    assert read_results(path)["rows"] == [huge]


def test_rows_file_names(tmp_path):
    assert rows_path(tmp_path / "evaluation_results.json") == tmp_path / "evaluation_rows.jsonl"
    assert rows_path(tmp_path / "evaluation_results.labelled.json") == tmp_path / "evaluation_rows.labelled.jsonl"
    assert rows_path(tmp_path / "r.json") == tmp_path / "r.rows.jsonl"


@pytest.mark.parametrize("break_it, where, problem", [
    (lambda rows: rows.write_text('{"case_id": "a", "trial": 0, "status": "scored"}\n{"case_id": "b", "trial": -1, '
                                  '"status": "scored"}\n'), "line 2: field 'trial'", "greater than or equal to 0"),
    (lambda rows: rows.write_text('{"case_id": "a", "trial": 0, "status": "scored"}\n{"case_id": \n'), "line 2",
     "invalid JSON"),
    (lambda rows: rows.write_text('{"case_id": "a", "trial": 0, "status": "scored"}\n'), "file",
     "holds 1 rows where"),
    (lambda rows: rows.unlink(), "file", "not found"),
])
def test_a_broken_rows_file_names_itself_the_line_and_the_field(tmp_path, break_it, where, problem):
    path = write_results(tmp_path / "evaluation_results.json", [FULL_ROW, ERROR_ROW])
    rows = tmp_path / "evaluation_rows.jsonl"
    break_it(rows)
    with pytest.raises(RecordError) as caught:
        read_results(path)
    assert str(caught.value).startswith(f"{rows}: {where}") and problem in str(caught.value)


def test_the_rows_file_is_a_name_beside_the_results(tmp_path):
    path = tmp_path / "r.json"
    document = {key: value for key, value in results().items() if key != "rows"}
    path.write_text(json.dumps({**document, "rows_file": "../elsewhere.jsonl"}))
    with pytest.raises(RecordError, match=r"r.json: file: field 'rows_file': must be the name of a file beside"):
        read_results(path)


def test_a_failed_write_leaves_neither_file(tmp_path):
    with pytest.raises(ValueError):   # pydantic's: the summary does not fit its schema
        with ResultsWriter(tmp_path / "r.json") as writer:
            writer.write(FULL_ROW)
            writer.finish({"metrics": "not a mapping", "counts": {"conversations": 1, "errors": 0}})
    assert list(tmp_path.iterdir()) == []


def test_jsonl_is_read_a_line_at_a_time_with_the_whole_file_checks(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n{"a": 2}\n{"a": "caf\xe9"}\n')
    rows = iter_jsonl(path)
    assert next(rows) == (1, {"a": 1}) and next(rows) == (2, {"a": 2})   # read before the bad line is reached
    with pytest.raises(RecordError, match=r"x.jsonl: line 3: is not UTF-8 text \(byte 0xe9\)"):
        next(rows)
    path.write_bytes(b'{"a": 1}\n{"a": "x\x00"}\n')
    with pytest.raises(RecordError, match=r"x.jsonl: line 2: holds a NUL byte"):
        list(iter_jsonl(path))
    path.write_bytes('{"a": 1}\n'.encode("utf-16"))
    with pytest.raises(RecordError, match=r"x.jsonl: file: is UTF-16 text"):
        list(iter_jsonl(path))
    path.write_bytes(b'{"a": 1}\n{"a": 2')   # a line torn by a kill
    assert list(iter_jsonl(path, torn_end=True)) == [(1, {"a": 1})]
    with pytest.raises(RecordError, match="line 2: invalid JSON"):
        list(iter_jsonl(path))
