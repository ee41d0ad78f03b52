"""The analysts' labels: added, listed, revoked, checked, and applied when a run is scored again."""
import pytest

from lobeval.errors import ConfigError, RecordError
from lobeval.evaluate import evaluate, rescore_with_labels
from lobeval.labels import add_label, compare_labels, list_labels, revoke_label
from lobeval.records import read_labels, write_jsonl


def test_labels_are_added_listed_and_revoked(tmp_path):
    path = tmp_path / "labels.jsonl"
    first = add_label(path, kind="allowed_extra_call", function_name="get_ticket", note="lookup is fine",
                      author="ana")
    second = add_label(path, kind="allowed_extra_argument", function_name="create_ticket", scenario_name="ticket",
                       argument="notes", note="harmless", author="ana")
    listed = list_labels(path)
    assert listed["id"].tolist() == [first["id"], second["id"]]
    assert listed.loc[0, "scenario_name"] is None and listed.loc[1, "argument"] == "notes"
    revoke_label(path, first["id"])
    assert list_labels(path)["id"].tolist() == [second["id"]]
    with pytest.raises(ConfigError, match=f"no label with id '{first['id']}'"):
        revoke_label(path, first["id"])


def test_an_argument_label_needs_its_argument(tmp_path):
    with pytest.raises(RecordError, match="new label: field 'argument': is required for an allowed_extra_argument label"):
        add_label(tmp_path / "l.jsonl", kind="allowed_extra_argument", function_name="f", note="", author="a")
    assert not (tmp_path / "l.jsonl").exists()


CASE = {"case_id": "t-001", "scenario_name": "ticket", "user_instructions": "Create a ticket.",
        "expected_function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams"}}]}
# One extra call of two, and one extra argument of two; its bot cannot be imported (labels need none).
CONVERSATION = {"case_id": "t-001", "trial": 0, "scenario_name": "ticket", "target": "no_such_module:Bot",
                "messages": [{"role": "user", "content": "Create it"}, {"role": "assistant", "content": "Created."}],
                "function_calls": [
                    {"functionName": "get_ticket", "arguments": {"ticket_id": "TKT-1"}, "result": {}, "error": None,
                     "turn": 1},
                    {"functionName": "create_ticket", "arguments": {"title": "Printer jams", "notes": "x"},
                     "result": {"ticket_id": "TKT-9"}, "error": None, "turn": 1}],
                "termination": {"reason": "user_finished", "turns": 2}}


@pytest.fixture
def scored(tmp_path):
    """(dataset, conversations, an empty labels file, the results scored before any label)."""
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    conversations = write_jsonl(tmp_path / "c.jsonl", [CONVERSATION])
    labels = tmp_path / "labels.jsonl"
    labels.touch()
    before = evaluate(dataset, conversations, tmp_path / "before.json", labels=labels, progress=False).results
    return dataset, conversations, labels, before


def test_labels_change_precision_when_re_scored(tmp_path, scored):
    dataset, conversations, labels, before = scored
    # One extra call of two: Precision_fn 1/2; one extra argument of two: Precision_args 1/2.
    assert (before["metrics"]["Precision_fn"], before["metrics"]["Precision_args"]) == (0.5, 0.5)
    add_label(labels, kind="allowed_extra_call", function_name="Plugin-Get_Ticket", note="lookup", author="ana")
    add_label(labels, kind="allowed_extra_argument", function_name="create_ticket", scenario_name="ticket",
              argument="notes", note="harmless", author="ana")
    after = evaluate(dataset, conversations, tmp_path / "after.json", labels=labels, progress=False).results
    change = compare_labels(before, after)
    assert change.loc["Precision_fn"].tolist() == [0.5, 1.0, 0.5]
    assert change.loc["Precision_args"].tolist() == [0.5, 1.0, 0.5]
    assert change.loc["Recall_fn", "change"] == 0.0


def test_rescoring_with_labels_keeps_claims_and_judges_and_loads_no_bot(tmp_path, scored):
    _, _, labels, before = scored
    before["rows"][0]["judges"] = {"status": "run", "final_score": 0.5}   # as if judged: must survive re-scoring
    add_label(labels, kind="allowed_extra_call", function_name="get_ticket", note="lookup", author="ana")
    after = rescore_with_labels(before, labels, tmp_path / "after.json")
    assert (before["metrics"]["Precision_fn"], after["metrics"]["Precision_fn"]) == (0.5, 1.0)
    assert after["rows"][0]["judges"] == {"status": "run", "final_score": 0.5}
    assert after["rows"][0]["claims"] == before["rows"][0]["claims"]
    assert after["config"]["labels"] == 1 and (tmp_path / "after.json").exists()


@pytest.mark.parametrize("label, field, problem", [
    ({"kind": "mark", "functionName": "f"}, "kind", "must be one of allowed_extra_call, allowed_extra_argument"),
    ({"kind": "allowed_extra_call"}, "functionName", "is required (a function name)"),
    ({"kind": "allowed_extra_call", "functionName": ""}, "functionName", "is required (a function name)"),
    ({"kind": "allowed_extra_argument", "functionName": "f"}, "argument", "is required for an allowed_extra_argument"),
    ({"kind": "allowed_extra_call", "functionName": "f", "argument": "x"}, "argument", "is only for allowed_extra_arg"),
    ({"kind": "allowed_extra_call", "functionName": "f", "scenario_name": 3}, "scenario_name", "must be a scenario name"),
])
def test_a_bad_label_names_its_line_and_field_whether_read_or_added(tmp_path, label, field, problem):
    path = write_jsonl(tmp_path / "labels.jsonl", [label])
    with pytest.raises(RecordError) as read:
        read_labels(path)
    assert str(read.value).startswith(f"{path}: line 1: field '{field}': {problem}")
    arguments = {"kind": label.get("kind"), "function_name": label.get("functionName"), "note": "", "author": "a",
                 "argument": label.get("argument"), "scenario_name": label.get("scenario_name")}
    with pytest.raises(RecordError) as added:
        add_label(tmp_path / "new.jsonl", **arguments)
    assert f"new label: field '{field}': {problem}" in str(added.value)
    assert not (tmp_path / "new.jsonl").exists()
