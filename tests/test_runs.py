"""Run folders, their configuration and the index of finished runs."""
import json

import pytest

from lobeval import runs
from lobeval.errors import ConfigError, RecordError


@pytest.mark.parametrize("run_id", ["nightly", "2026-11-23_a.1", "A"])
def test_plain_run_ids_are_accepted(run_id):
    assert runs.check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", ["../x", "/tmp/x", "a/b", ".", "..", ".hidden", "-x", "", "a b", "x" * 129])
def test_a_run_id_that_is_not_a_plain_name_is_refused(run_id):
    with pytest.raises(ConfigError, match="use a plain name of letters, digits"):
        runs.check_run_id(run_id)


def test_the_index_lists_a_run_once(tmp_path):
    index = tmp_path / "index.jsonl"
    config = {"run_id": "a", "suite_name": "s"}
    for _ in range(2):
        runs.add_to_index(index, config, tmp_path / "a", {"Reliability": 0.5, "other": 1}, {"errors": 0})
    [entry] = runs.read_index(index)
    assert entry["run_id"] == "a" and entry["metrics"] == {"Reliability": 0.5} and entry["schema_version"] == 1
    runs.add_to_index(index, {"run_id": "b", "suite_name": "s"}, tmp_path / "b", {}, {})
    runs.add_to_index(index, {"run_id": "c", "suite_name": "other"}, tmp_path / "c", {}, {})
    assert [e["run_id"] for e in runs.earlier_runs(index, {"run_id": "b", "suite_name": "s"})] == ["a"]


@pytest.mark.parametrize("line, problem", [
    ("{oops", "line 1: invalid JSON"),
    ('{"run_id": "a"}', "line 1: must be an object with run_id, suite_name and run_dir"),
])
def test_a_damaged_index_line_is_named(tmp_path, line, problem):
    index = tmp_path / "index.jsonl"
    index.write_text(line + "\n")
    with pytest.raises(RecordError, match=problem):
        runs.read_index(index)


def test_a_config_without_its_fields_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"run_id": "a"}))
    with pytest.raises(RecordError, match=r"config.json: file: field 'suite_name': is required"):
        runs.read_config(tmp_path)
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(RecordError, match=r"config.json: file: invalid JSON"):
        runs.read_config(tmp_path)
