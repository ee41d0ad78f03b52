"""The analysts' labels: added, listed, revoked, checked, and applied when a run is scored again."""
import pytest

from lobeval.core.errors import ConfigError, RecordError
from lobeval.evaluation.evaluate import evaluate, rescore_with_labels
from lobeval.judges.labels import add_label, compare_labels, list_labels, quarantine_cases, revoke_label
from lobeval.core.records import human_value, read_labels, write_jsonl


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


# --- judge verdicts and quarantined cases -------------------------------------------------------------

VERDICT = {"kind": "judge_verdict", "case_id": "t-001", "trial": 0, "judge": "per_turn", "criterion": "helpfulness",
           "message_index": 1, "judge_value": 4, "verdict": "disagree", "human_value": 2, "judge_model": "gpt-judge",
           "run_id": "r1", "note": "it never asked for the priority", "author": "ana"}
QUARANTINE = {"kind": "quarantined_case", "case_id": "t-001", "note": "the user simulator loops", "author": "ana"}


def test_judge_verdicts_and_quarantined_cases_are_added_listed_and_revoked(tmp_path):
    path = tmp_path / "labels.jsonl"
    verdict = add_label(path, **{key: value for key, value in VERDICT.items() if key != "kind"}, kind="judge_verdict")
    goal = add_label(path, kind="judge_verdict", case_id="t-001", trial=0, judge="goal", criterion="goal",
                     judge_value=1, verdict="disagree", judge_model=None, run_id=None, note="", author="ana")
    quarantined = add_label(path, kind="quarantined_case", case_id="t-002", scenario_name="ticket",
                            note="flaky: the bot's search times out", author="bo")
    assert [label["id"] for label in read_labels(path)] == [verdict["id"], goal["id"], quarantined["id"]]
    assert {key: verdict[key] for key in VERDICT} == VERDICT and "human_value" not in goal
    assert (human_value(verdict), human_value(goal)) == (2, 0)   # a goal's other value is derived
    listed = list_labels(path)
    assert listed["kind"].tolist() == ["judge_verdict", "judge_verdict", "quarantined_case"]
    assert listed["case_id"].tolist() == ["t-001", "t-001", "t-002"]
    revoke_label(path, goal["id"])
    assert [label["id"] for label in read_labels(path)] == [verdict["id"], quarantined["id"]]


def test_scoring_ignores_judge_verdicts(tmp_path, scored):
    dataset, conversations, labels, before = scored
    write_jsonl(labels, [VERDICT])
    after = evaluate(dataset, conversations, tmp_path / "after.json", labels=labels, progress=False).results
    assert after["metrics"]["Precision_fn"] == before["metrics"]["Precision_fn"] == 0.5


def test_quarantining_writes_every_case_or_none(tmp_path):
    path = tmp_path / "labels.jsonl"
    first, second = quarantine_cases(path, ["t-001", "t-002", "t-001"], note="flaky", author="ana")
    assert [(label["kind"], label["case_id"], label["note"]) for label in read_labels(path)] == [
        ("quarantined_case", "t-001", "flaky"), ("quarantined_case", "t-002", "flaky")]
    with pytest.raises(ConfigError, match=f"case 't-002' is already quarantined by label {second['id']}"):
        quarantine_cases(path, ["t-003", "t-002"], note="flaky", author="ana")
    with pytest.raises(RecordError, match="new label: field 'note': is required: why the case is quarantined"):
        quarantine_cases(path, ["t-003"], note="  ", author="ana")
    assert len(read_labels(path)) == 2


def changed(record, **changes):
    return {key: value for key, value in {**record, **changes}.items() if value is not DROP}


DROP = object()


@pytest.mark.parametrize("label, field, problem", [
    (changed(VERDICT, case_id=DROP), "case_id", "is required (the case the verdict is on)"),
    (changed(VERDICT, trial=-1), "trial", "must be a whole number from 0, got -1"),
    (changed(VERDICT, trial=True), "trial", "must be a whole number from 0, got True"),
    (changed(VERDICT, judge="politeness"), "judge", "must be one of per_turn, behaviour_failure, goal, user_review, commitments, tool_call_acc"),
    (changed(VERDICT, criterion="goal"), "criterion", "must be one of helpfulness, coherence, verbosity, relevance, "
                                                      "faithfulness for judge per_turn, got 'goal'"),
    (changed(VERDICT, judge="goal"), "criterion", "must be one of goal for judge goal, got 'helpfulness'"),
    (changed(VERDICT, message_index=DROP), "message_index", "must be a whole number from 0 for a per_turn verdict"),
    (changed(VERDICT, judge="behaviour_failure", criterion="category", message_index="1", judge_value=None,
             human_value="repetition"), "message_index",
     "must be a whole number from 0 for a behaviour_failure verdict (the judged message's index in the transcript), "
     "got '1'"),
    (changed(VERDICT, judge="goal", criterion="goal", judge_value=1, human_value=0), "message_index",
     "is only for per_turn and behaviour_failure verdicts"),
    (changed(VERDICT, verdict="unsure"), "verdict", "must be agree or disagree, got 'unsure'"),
    (changed(VERDICT, judge_value=6), "judge_value", "must be one of 1, 2, 3, 4, 5 (the 1-5 scale), got 6"),
    (changed(VERDICT, judge_value="4"), "judge_value", "must be one of 1, 2, 3, 4, 5 (the 1-5 scale), got '4'"),
    (changed(VERDICT, judge_value=DROP), "judge_value", "must be one of 1, 2, 3, 4, 5"),
    (changed(VERDICT, judge="goal", criterion="goal", message_index=DROP, judge_value=True, human_value=0),
     "judge_value", "must be one of 0, 1 (the 0/1 scale), got True"),
    (changed(VERDICT, judge="behaviour_failure", criterion="category", judge_value="rude", human_value=None),
     "judge_value", "must be one of unsafe_action, unsafe_state, false_information, disobeyed_user, "
                    "missing_information, no_clarification, repetition, null (the category scale), got 'rude'"),
    (changed(VERDICT, human_value=0), "human_value", "must be one of 1, 2, 3, 4, 5 (the 1-5 scale), got 0"),
    (changed(VERDICT, human_value=4), "human_value", "must differ from the judge_value when the verdict is disagree"),
    (changed(VERDICT, verdict="agree"), "human_value", "must be the judge_value when the verdict is agree"),
    (changed(VERDICT, human_value=DROP), "human_value", "is required when disagreeing on a 1-5 scale"),
    (changed(VERDICT, judge="behaviour_failure", criterion="category", judge_value="repetition", human_value=DROP),
     "human_value", "is required when disagreeing on a category scale"),
    (changed(VERDICT, judge_model=3), "judge_model", "must be text or null, got 3"),
    (changed(VERDICT, run_id=["r1"]), "run_id", "must be text or null"),
    (changed(QUARANTINE, case_id=""), "case_id", "is required (the case to quarantine)"),
    (changed(QUARANTINE, note=""), "note", "is required: why the case is quarantined"),
    (changed(QUARANTINE, scenario_name=3), "scenario_name", "must be a scenario name"),
])
def test_a_bad_verdict_or_quarantine_label_names_its_field_whether_read_or_added(tmp_path, label, field, problem):
    path = write_jsonl(tmp_path / "labels.jsonl", [label])
    with pytest.raises(RecordError) as read:
        read_labels(path)
    assert str(read.value).startswith(f"{path}: line 1: field '{field}': {problem}")
    fields = {key: value for key, value in label.items() if key not in ("kind", "note", "author")}
    with pytest.raises(RecordError) as added:
        add_label(tmp_path / "new.jsonl", kind=label["kind"], note=label.get("note"), author="a", **fields)
    assert f"new label: field '{field}': {problem}" in str(added.value)
    assert not (tmp_path / "new.jsonl").exists()


@pytest.mark.parametrize("label", [
    changed(VERDICT, verdict="agree", human_value=4),
    changed(VERDICT, verdict="agree", human_value=DROP),
    changed(VERDICT, judge_value=4.0, human_value=2.0, judge_model=None, run_id=None, note=DROP, author=DROP),
    changed(VERDICT, judge="task_adherence", criterion="task_adherence", message_index=None, judge_value=0,
            human_value=DROP),   # azure-ai-evaluation scores task adherence 0 (a material failure) or 1
    changed(VERDICT, judge="behaviour_failure", criterion="category", judge_value=None, human_value="repetition"),
    changed(VERDICT, judge="behaviour_failure", criterion="category", judge_value="repetition", human_value=None),
    changed(VERDICT, judge="goal", criterion="goal", message_index=DROP, judge_value=0, human_value=DROP),
    changed(QUARANTINE, scenario_name="ticket"),
])
def test_good_verdict_and_quarantine_labels_are_read(tmp_path, label):
    assert read_labels(write_jsonl(tmp_path / "labels.jsonl", [label])) == [label]
