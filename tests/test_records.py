"""The records stages hand each other: reading JSONL and results, and what a bad record is told."""
import json

import pytest

from lobeval.errors import RecordError
from lobeval.records import (
    MACHINERY_ERRORS, NORMAL_ENDINGS, SCHEMA_VERSION, iter_jsonl, read_cases, read_conversations, read_json,
    read_results, write_json, write_jsonl,
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
