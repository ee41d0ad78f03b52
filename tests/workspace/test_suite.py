"""Loading a suite: suite.json, tools.json, templates.json and the CSV business data."""

import pytest

from lobeval.cli import main
from lobeval.core.errors import RecordError
from lobeval.workspace.suite import load_suite, read_csv_typed
from lobeval.core.vocabulary import function_key
from helpers import SAMPLE_SUITE, make_suite


def test_the_sample_suite_loads():
    suite = load_suite(SAMPLE_SUITE)
    assert suite.name == "support_tickets" and len(suite.tools) == 14 and len(suite.templates) == 13
    assert {tool["effect"] for tool in suite.tools.values()} == {"read", "write"}
    assert suite.tool("TicketPlugin-Create_Support_Ticket") is suite.tools["create_support_ticket"]


def test_function_key_ignores_case_and_the_plugin_prefix():
    assert function_key("TicketPlugin-Create_Ticket") == function_key("create_ticket") == "create_ticket"


def test_csv_columns_are_typed_whole_and_ids_stay_text(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("ID,Flag,Count,Ratio,Code\nA7,true,3,0.5,00123\nB8,false,12,1.25,00124\n")
    assert read_csv_typed(path) == [{"id": "A7", "flag": True, "count": 3, "ratio": 0.5, "code": "00123"},
                                    {"id": "B8", "flag": False, "count": 12, "ratio": 1.25, "code": "00124"}]


@pytest.mark.parametrize("change, file, where, field, problem", [
    ({"suite": {"entities": {"ticket": {"id": "id"}}}}, "suite.json", "entities.ticket", "csv", "is required"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools.json", "tool 'f'", "effect",
     "must be one of read, write"),
    ({"tools": [{"type": "function"}]}, "tools.json", "tool 0", "function.name", "is required (a string)"),
    ({"templates": [{"scenario_name": "x"}]}, "templates.json", "scenario 'x'", "user_instructions", "is required"),
])
def test_a_bad_suite_file_names_its_record_and_field(tmp_path, change, file, where, field, problem):
    suite = make_suite(tmp_path, **change)
    with pytest.raises(RecordError) as caught:
        load_suite(suite)
    assert str(caught.value) == f"{suite / file}: {where}: field '{field}': {problem}"


def test_a_csv_row_of_the_wrong_width_is_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,title\nA,x\nB\n")
    with pytest.raises(RecordError, match=r"t.csv: line 3: has 1 cells, the header has 2"):
        read_csv_typed(path)


def test_missing_suite_file_is_bad_input(tmp_path, capsys):
    assert main(["generate", "--suite", str(tmp_path), "--out", str(tmp_path / "d.jsonl")]) == 2
    assert "suite.json: file: not found" in capsys.readouterr().err
