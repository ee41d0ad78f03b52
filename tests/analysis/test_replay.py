"""The replay: display records from a row and its transcript, the static HTML, and the widget."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lobeval.judges.calibrate import report_calibration
from lobeval.judges.labels import add_label, list_labels
from lobeval.core.records import read_labels
from lobeval.analysis.replay import (covering_label, filter_records, judge_items, label_request, labelable_items, link_html, replay_data,
                            replay_html, replay_widget, verdict_label, verdict_request)

ATTACK = "</script><script>alert(1)</script>"

ROW = {"case_id": "t-001", "trial": 0, "scenario_name": "ticket", "status": "scored", "termination": "user_finished",
       "error": None, "Reliability": 0.5, "Success": 0,
       "pairs": [{"expected_index": 0, "actual_index": 1, "functionName": "create_ticket", "optional": False,
                  "failed": False,
                  "arguments": {"title": {"expected": "Printer", "actual": "printer", "status": "correct"},
                                "priority": {"expected": "High", "actual": "Low", "status": "wrong"},
                                "due_date": {"expected": "2024-05-01", "actual": None, "status": "missing"}},
                  "extra_arguments": {"notes": {"actual": ATTACK, "allowed": False}}}],
       "unpaired_expected": [{"expected_index": 1, "functionName": "create_action", "optional": False}],
       "unpaired_actual": [{"actual_index": 0, "functionName": "get_departments", "effect": "read", "allowed": False,
                            "failed": False, "turn": 1}],
       "extra_arguments": [{"functionName": "create_ticket", "argument": "notes", "actual": ATTACK,
                            "allowed": False}],
       "missing_outputs": ["TKT-9"], "forbidden_calls": []}

CONVERSATION = {"case_id": "t-001", "trial": 0, "scenario_name": "ticket",
                "messages": [{"role": "assistant", "content": "Hello & welcome"},
                             {"role": "user", "content": f"Make a ticket {ATTACK}"},
                             {"role": "assistant", "content": "Which department?"},
                             {"role": "user", "content": "IT"},
                             {"role": "assistant", "content": "Created."}],
                "function_calls": [
                    {"functionName": "get_departments", "arguments": {}, "result": ["IT"], "error": None, "turn": 1},
                    {"functionName": "create_ticket",
                     "arguments": {"title": "printer", "priority": "Low", "notes": ATTACK},
                     "result": {"ticket_id": "TKT-9"}, "error": None, "turn": 2}]}

CONVERSATIONS = {("t-001", 0): CONVERSATION}


def test_steps_are_user_turns_with_their_calls_annotated():
    [record] = replay_data({"rows": [ROW]}, CONVERSATIONS)
    assert (record["id"], record["outcome"], record["missed"], record["missing_outputs"]) == \
        ("t-001#0", "failed", ["create_action"], ["TKT-9"])
    assert [step["turn"] for step in record["steps"]] == [0, 1, 2]
    # turn 1 made an extra call, turn 2 a wrong argument: it opens at turn 1, not at the greeting
    assert [step["failing"] for step in record["steps"]] == [False, True, True] and record["first_failure"] == 1
    assert record["anchor"] == "replay-t-001-0"
    assert [m["content"] for m in record["steps"][1]["messages"]] == [f"Make a ticket {ATTACK}", "Which department?"]
    [lookup] = record["steps"][1]["calls"]
    assert (lookup["index"], lookup["verdict"], lookup["expected"]) == (0, "extra", "")
    [create] = record["steps"][2]["calls"]
    assert (create["verdict"], create["expected"], create["outcome"]) == ("paired", "create_ticket",
                                                                          '→ {"ticket_id": "TKT-9"}')
    assert create["notes"] == [] and lookup["notes"] == []
    assert create["arguments"] == [
        {"argument": "title", "actual": '"printer"', "expected": '"Printer"', "status": "correct"},
        {"argument": "priority", "actual": '"Low"', "expected": '"High"', "status": "wrong"},
        {"argument": "due_date", "actual": "", "expected": '"2024-05-01"', "status": "missing"},
        {"argument": "notes", "actual": json.dumps(ATTACK), "expected": "", "status": "extra"}]


CLAIMED = {**ROW, "case_id": "t-003", "scenario_name": "a-scenario", "pairs": [], "unpaired_actual": [],
           "unpaired_expected": [], "extra_arguments": [], "missing_outputs": [],
           "claims": {"claimed_not_done": [{"message_index": 4, "claim": "create", "text": "Created."}],
                      "done_not_told": [{"actual_index": 1, "functionName": "create_ticket", "turn": 2}]},
           "judges": {"status": "run", "turns": [{"message_index": 2, "failed": True, "failure": {
               "category": "false_information", "severity": "high", "reason": "there is no IT department"}}]}}


def test_claims_judges_and_untold_writes_are_flagged_where_they_happen():
    [record] = replay_data({"rows": [CLAIMED]}, {("t-003", 0): {**CONVERSATION, "case_id": "t-003"}})
    first, second = record["steps"][1], record["steps"][2]
    assert first["messages"][1]["flags"] == [
        "the judges: false_information (high): there is no IT department"]
    assert second["messages"][1]["flags"] == [
        "claimed but not done (create): no call did what this message says"]
    assert second["calls"][0]["notes"] == ["done, but the user was never told"]
    assert record["first_failure"] == 1


def test_failing_conversations_come_first_then_by_scenario():
    passed = {**ROW, "case_id": "t-000", "scenario_name": "a-scenario", "Success": 1}
    error = {"case_id": "t-004", "trial": 0, "scenario_name": "a-scenario", "status": "error", "error": "gave up"}
    records = replay_data({"rows": [passed, ROW, error, CLAIMED]}, CONVERSATIONS)
    assert [(record["id"], record["outcome"]) for record in records] == [
        ("t-003#0", "failed"), ("t-001#0", "failed"), ("t-004#0", "error"), ("t-000#0", "passed")]
    # a conversation that failed without a failing turn (a call never made) opens at its end
    missed_only = {**ROW, "pairs": [], "unpaired_actual": [], "extra_arguments": []}
    [record] = replay_data({"rows": [missed_only]}, {("t-001", 0): {**CONVERSATION, "function_calls": []}})
    assert record["first_failure"] == len(record["steps"]) - 1 == 2


def test_a_user_fault_is_flagged_at_its_turn_and_the_conversation_is_left_out():
    faulty = {**CLAIMED, "case_id": "t-005", "claims": None, "judges": None, "excluded": "user_fault",
              "user_faults": [{"check": "invented_value", "turn": 2, "message_index": 3,
                               "detail": "the user said id 'IT-7', which is neither in its case nor said by the bot"}]}
    passed = {**ROW, "case_id": "t-000", "Success": 1}
    records = replay_data({"rows": [faulty, passed, ROW]}, {("t-005", 0): {**CONVERSATION, "case_id": "t-005"}})
    assert [(record["id"], record["outcome"]) for record in records] == [
        ("t-001#0", "failed"), ("t-005#0", "left out"), ("t-000#0", "passed")]
    record = records[1]
    assert record["steps"][2]["messages"][0]["flags"] == [
        "the simulated user's mistake (invented_value): the user said id 'IT-7', which is neither in its case nor "
        "said by the bot"]
    assert record["first_failure"] == 2
    assert record["summary"].endswith("left out of the bot's metrics: the simulated user made a mistake")
    assert [r["id"] for r in filter_records(records, outcome="left out")] == ["t-005#0"]


def test_a_link_names_the_conversation_safely():
    assert link_html("t-001", 0) == "<a class='lobeval-replay-link' href='#replay-t-001-0'>t-001#0</a>"
    odd = link_html("a'b <c>#", 2, "<b>x</b>")
    assert odd == ("<a class='lobeval-replay-link' href='#replay-a%27b%20%3Cc%3E%23-2'>&lt;b&gt;x&lt;/b&gt;</a>")


def test_case_ids_choose_the_conversations_and_a_missing_transcript_has_no_steps():
    other = {**ROW, "case_id": "t-002"}
    records = replay_data({"rows": [ROW, other]}, CONVERSATIONS, case_ids=["t-002"])
    assert [(record["id"], record["steps"]) for record in records] == [("t-002#0", [])]


def embedded(page):
    match = re.search(r"<script type='application/json' id='(lobeval-replay-\w+)-data'>(.*?)</script>", page, re.S)
    return match.group(1), match.group(2)


def test_static_replay_cannot_be_broken_out_of_and_round_trips():
    page = replay_html({"rows": [ROW]}, CONVERSATIONS)
    assert "<script>alert" not in page and "</script><script>alert" not in page
    element, data = embedded(page)
    assert "<" not in data and ">" not in data and "&" not in data
    assert json.loads(data) == replay_data({"rows": [ROW]}, CONVERSATIONS)
    assert f"id='{element}'" in page
    # two script elements, the data and the renderer; nothing is fetched from anywhere.
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", page, re.I)
    assert "innerHTML" not in page


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_static_replay_script_steps_through_turns_showing_markup_as_text(tmp_path):
    page = tmp_path / "replay.html"
    page.write_text(replay_html({"rows": [ROW]}, CONVERSATIONS), encoding="utf-8")
    shown = json.loads(subprocess.run(["node", str(Path(__file__).parents[1].joinpath("replay_dom.js")), str(page),
                                       "next,next,next,prev"], capture_output=True, text=True, check=True).stdout)
    texts = lambda view: [(node["cls"], node.get("text")) for node in view["children"]]
    assert shown[0]["options"] == ["t-001#0 — ticket — failed"]
    # it opens at the first failing turn (1), not at the greeting
    assert [view["pos"] for view in shown] == ["turn 1 of 2", "turn 2 of 2", "turn 2 of 2",
                                               "turn 2 of 2", "turn 1 of 2"]
    assert texts(shown[0]["view"])[2:6] == [("warn", "expected but not called: create_action"),
                                            ("warn", "not told to the user: TKT-9"),
                                            ("warn failing", "something went wrong in this turn"),
                                            ("m user", f"user: Make a ticket {ATTACK}")]
    assert shown[4]["view"] == shown[0]["view"]
    create = shown[1]["view"]["children"][-1]
    assert (create["cls"], create["children"][0]["text"]) == ("call v-paired",
                                                              "#1 create_ticket — paired (expected create_ticket)")
    rows = [(row["cls"], [cell["text"] for cell in row["children"]]) for row in create["children"][1]["children"][1:]]
    assert rows[1] == ("a-wrong", ["priority", '"Low"', '"High"', "wrong"])
    assert rows[3] == ("a-extra", ["notes", json.dumps(ATTACK), "", "extra"])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_a_link_or_the_url_opens_a_conversation_at_its_first_failing_turn(tmp_path):
    claimed = {("t-003", 0): {**CONVERSATION, "case_id": "t-003"}}
    page = tmp_path / "replay.html"
    page.write_text(replay_html({"rows": [ROW, CLAIMED]}, {**CONVERSATIONS, **claimed}), encoding="utf-8")

    def run(clicks, fragment=""):
        return json.loads(subprocess.run(["node", str(Path(__file__).parents[1].joinpath("replay_dom.js")), str(page), clicks,
                                          fragment], capture_output=True, text=True, check=True).stdout)

    heads = lambda view: view["view"]["children"][0]["text"]
    shown = run("next,link:replay-t-001-0,next,link:replay-t-001-0,hash:replay-t-003-0,link:elsewhere,"
                "hash:replay-nobody-0")
    assert shown[0]["options"] == ["t-003#0 — a-scenario — failed", "t-001#0 — ticket — failed"]
    assert [(heads(view).split(" — ")[0], view["pos"], view["selected"], view["scrolled"]) for view in shown] == [
        ("t-003#0", "turn 1 of 2", "0", 0), ("t-003#0", "turn 2 of 2", "0", 0),
        ("t-001#0", "turn 1 of 2", "1", 1),    # the link: its conversation, at its first failing turn
        ("t-001#0", "turn 2 of 2", "1", 1),
        ("t-001#0", "turn 1 of 2", "1", 2),    # the same link again: back to that turn
        ("t-003#0", "turn 1 of 2", "0", 3),    # the URL's fragment
        ("t-003#0", "turn 1 of 2", "0", 3), ("t-003#0", "turn 1 of 2", "0", 3)]   # not a replay's
    flagged = [(node["cls"], node.get("text")) for node in shown[0]["view"]["children"]]
    assert ("m assistant flagged", "assistant: Which department?") in flagged
    assert ("flag", "⚠ the judges: false_information (high): there is no IT department") in flagged
    opened = run("", "#replay-t-001-0")[0]   # a page opened with the fragment
    assert (heads(opened).split(" — ")[0], opened["pos"], opened["scrolled"]) == ("t-001#0", "turn 1 of 2", 1)


def test_two_replays_on_one_page_do_not_collide():
    first, second = (embedded(replay_html({"rows": [ROW]}, CONVERSATIONS))[0] for _ in range(2))
    assert first != second


def test_labelable_items_are_the_unallowed_extra_calls_and_arguments():
    row = {**ROW, "unpaired_actual": [*ROW["unpaired_actual"],
                                      {"actual_index": 3, "functionName": "get_departments", "allowed": False,
                                       "turn": 2},
                                      {"actual_index": 4, "functionName": "get_ticket", "allowed": True, "turn": 2}]}
    items = labelable_items(row)
    assert [(item["kind"], item["functionName"], item["argument"]) for item in items] == [
        ("allowed_extra_call", "get_departments", None), ("allowed_extra_argument", "create_ticket", "notes")]
    assert label_request(items[1], row, scope="scenario", note="harmless", author="ana") == {
        "kind": "allowed_extra_argument", "function_name": "create_ticket", "argument": "notes",
        "scenario_name": "ticket", "note": "harmless", "author": "ana"}
    assert label_request(items[0], row, scope="suite", note="", author="ana")["scenario_name"] is None


def test_widget_steps_filters_and_writes_a_label(tmp_path):
    passed = {**ROW, "case_id": "t-002", "scenario_name": "other", "Success": 1, "unpaired_actual": [],
              "extra_arguments": []}
    replay = replay_widget({"rows": [passed, ROW]}, CONVERSATIONS, suite_dir=tmp_path)
    # the failing conversation first, at its first failing turn
    assert replay.conversation.value == "t-001#0" and replay.position.value == "turn 1 of 2"
    assert "something went wrong in this turn" in replay.view.value
    replay.previous.click()
    assert replay.position.value == "the bot's opening, before turn 1" and "Hello &amp; welcome" in replay.view.value
    replay.next.click()
    replay.next.click()
    replay.next.click()   # already at the last step: stays
    assert replay.position.value == "turn 2 of 2"
    assert "<script>alert" not in replay.view.value and "&lt;/script&gt;" in replay.view.value
    assert "<tr class='a-wrong'><td>priority</td>" in replay.view.value
    replay.previous.click()
    assert replay.position.value == "turn 1 of 2"

    controls = replay.labels.children
    assert len(controls) == 2
    text, scope, note, button = controls[1].children
    scope.value, note.value, replay.author.value = "suite", "harmless", "ana"
    button.click()
    [label] = list_labels(tmp_path / "labels.jsonl").to_dict("records")
    assert (label["kind"], label["functionName"], label["argument"], label["scenario_name"], label["note"],
            label["author"]) == ("allowed_extra_argument", "create_ticket", "notes", None, "harmless", "ana")
    assert label["id"] in replay.feedback.value
    # now covered by that label: no "mark legitimate" for it, and "undo"
    said, undo = replay.labels.children[1].children
    assert f"marked legitimate for the whole suite by label {label['id']}: harmless" in said.value
    assert undo.description == "undo"
    assert [type(widget).__name__ for widget in replay.labels.children[0].children][-1] == "Button"
    undo.click()
    assert list_labels(tmp_path / "labels.jsonl").empty and "revoked" in replay.feedback.value
    assert replay.labels.children[1].children[-1].description == "mark legitimate"

    replay.outcome.value = "passed"
    assert replay.conversation.options == (("t-002#0 — other — passed", "t-002#0"),)
    assert replay.position.value == "" and replay.labels.children == ()
    replay.outcome.value = "error"
    assert replay.conversation.value is None and "no conversation matches" in replay.view.value


def test_items_a_label_already_covers_say_so_and_offer_no_marking(tmp_path):
    add_label(tmp_path / "labels.jsonl", kind="allowed_extra_call", function_name="Plugin-Get_Departments",
              scenario_name="ticket", note="looking first is fine", author="bo")
    add_label(tmp_path / "labels.jsonl", kind="allowed_extra_argument", function_name="create_ticket",
              argument="notes", scenario_name="another scenario", note="", author="bo")
    replay = replay_widget({"rows": [ROW]}, CONVERSATIONS, suite_dir=tmp_path)
    call, argument = replay.labels.children
    [said] = call.children   # covered, and not added here: nothing to undo
    assert "extra call get_departments (turn 1) — marked legitimate for scenario ticket by label" in said.value
    assert "looking first is fine (applies from the next evaluation)" in said.value
    assert argument.children[-1].description == "mark legitimate"   # that label is for another scenario
    [label] = [label for label in read_labels(tmp_path / "labels.jsonl") if label["functionName"] == "create_ticket"]
    assert covering_label(labelable_items(ROW)[1], {**ROW, "scenario_name": "another scenario"}, [label]) == label


def test_a_damaged_labels_file_is_said_and_nothing_is_offered_as_covered(tmp_path):
    (tmp_path / "labels.jsonl").write_text("{not json\n")
    replay = replay_widget({"rows": [ROW]}, CONVERSATIONS, suite_dir=tmp_path)
    assert "labels.jsonl" in replay.feedback.value
    assert [control.children[-1].description for control in replay.labels.children] == ["mark legitimate"] * 2


def test_without_a_suite_the_widget_says_labels_cannot_be_saved():
    replay = replay_widget({"rows": [ROW]}, CONVERSATIONS)
    [note] = replay.labels.children
    assert "labels cannot be saved" in note.value


# --- the judges' verdicts -----------------------------------------------------------------------------

def scores(low=None, value=4):
    return {criterion: {"score": 2 if criterion == low else value, "reason": f"{criterion} {ATTACK}"}
            for criterion in ("helpfulness", "coherence", "verbosity", "relevance", "faithfulness")}


JUDGED = {**ROW, "judges": {
    "status": "run",
    "turns": [{"message_index": 0, "scores": None, "failed": None, "failure": None},   # the judge erred
              {"message_index": 2, "scores": scores(low="helpfulness"), "failed": True,
               "failure": {"category": "no_clarification", "severity": "medium", "reason": "guessed"}},
              {"message_index": 4, "scores": scores(value=5), "failed": False, "failure": None}],
    "goal": {"score": 0, "reason": "no ticket"},
    "azure": {"task_adherence": {"score": 1.0, "result": "pass", "threshold": 0, "reason": "kept to it"},
              "intent_resolution": {"result": "not applicable", "reason": "intermediate"},
              "tool_call_accuracy": {"error": "timed out", "raw": None},
              "response_completeness": {"score": 3.5, "result": "pass", "threshold": 3, "reason": "half"}}}}


def test_judge_items_are_the_verdicts_on_the_turns_messages_then_on_the_conversation():
    items = judge_items(JUDGED, [1, 2])
    assert [(item["judge"], item["criterion"], item["message_index"], item["judge_value"]) for item in items] == [
        ("per_turn", "helpfulness", 2, 2), ("per_turn", "coherence", 2, 4), ("per_turn", "verbosity", 2, 4),
        ("per_turn", "relevance", 2, 4), ("per_turn", "faithfulness", 2, 4),
        ("behaviour_failure", "category", 2, "no_clarification"), ("goal", "goal", None, 0),
        ("task_adherence", "task_adherence", None, 1), ("response_completeness", "response_completeness", None, 3.5)]
    assert items[0]["text"] == f"message 2 · helpfulness: 2 — helpfulness {ATTACK}"
    assert (items[5]["scale"], items[5]["values"][-1], items[6]["values"]) == ("category", None, (0, 1))
    passed = judge_items(JUDGED, [3, 4])[5]
    assert (passed["judge_value"], passed["text"]) == (None, "message 4 · behaviour failure: no failure")
    assert [item["judge"] for item in judge_items(JUDGED, [0])] == ["goal", "task_adherence", "response_completeness"]
    assert judge_items(ROW, [1, 2]) == [] and judge_items({**ROW, "judges": {"status": "not run"}}, [2]) == []


def test_a_verdict_request_says_what_the_analyst_thinks_and_finds_its_label_again():
    helpfulness, *_, failure, goal, _, _ = judge_items(JUDGED, [2])
    context = {"note": "ok", "author": "ana", "run_id": "r1", "judge_model": "gpt-judge"}
    agreed = verdict_request(helpfulness, JUDGED, verdict="agree", own_value=5, **context)
    assert agreed == {"kind": "judge_verdict", "case_id": "t-001", "trial": 0, "judge": "per_turn",
                      "criterion": "helpfulness", "judge_value": 2, "verdict": "agree", "human_value": 2,
                      "judge_model": "gpt-judge", "judge_prompt": None, "run_id": "r1", "note": "ok", "author": "ana",
                      "message_index": 2}
    assert verdict_request(failure, JUDGED, verdict="disagree", own_value=None, **context)["human_value"] is None
    goal_request = verdict_request(goal, JUDGED, verdict="disagree", own_value=0, **context)
    assert (goal_request["human_value"], "message_index" in goal_request) == (1, False)
    labels = [{**agreed, "id": "a"}, {**agreed, "id": "b", "run_id": "r0"}, {**agreed, "id": "c", "message_index": 4}]
    assert verdict_label(helpfulness, JUDGED, "r1", labels)["id"] == "a"
    assert verdict_label(helpfulness, JUDGED, "r1", [*labels, {**agreed, "id": "d"}])["id"] == "d"   # the last
    assert verdict_label(failure, JUDGED, "r1", labels) is None


def test_widget_agrees_disagrees_and_undoes_verdicts_per_turn(tmp_path):
    replay = replay_widget({"rows": [JUDGED], "config": {"judge_model": "gpt-judge"}}, CONVERSATIONS,
                           suite_dir=tmp_path, run_id="r1")
    replay.author.value = "ana"
    assert replay.position.value == "turn 1 of 2"
    controls = replay.verdicts.children
    assert len(controls) == 9
    text, agree, own, disagree, note = controls[0].children
    assert (agree.description, disagree.description) == ("agree", "disagree")
    assert "&lt;/script&gt;" in text.value and "<script>" not in text.value
    assert [label for label, _ in own.options] == ["1", "3", "4", "5"]   # every value but the judge's
    note.value = "fair"
    agree.click()
    [label] = read_labels(tmp_path / "labels.jsonl")
    assert (label["verdict"], label["human_value"], label["message_index"], label["run_id"], label["judge_model"],
            label["note"], label["author"]) == ("agree", 2, 2, "r1", "gpt-judge", "fair", "ana")
    said, undo = replay.verdicts.children[0].children
    assert f"ana agreed (label {label['id']}): fair" in said.value and undo.description == "undo"

    failure = replay.verdicts.children[5].children
    assert [label for label, _ in failure[2].options][-1] == "no failure"
    failure[2].value = len(failure[2].options) - 1
    failure[3].click()
    goal = replay.verdicts.children[6].children
    assert [label for label, _ in goal[2].options] == ["1"]
    goal[3].click()
    failure_label, goal_label = read_labels(tmp_path / "labels.jsonl")[1:]
    assert (failure_label["judge_value"], failure_label["human_value"]) == ("no_clarification", None)
    assert (goal_label["judge_value"], goal_label["human_value"], "message_index" in goal_label) == (0, 1, False)
    assert "ana disagreed: no failure" in replay.verdicts.children[5].children[0].value

    undo.click()
    assert len(read_labels(tmp_path / "labels.jsonl")) == 2 and "revoked" in replay.feedback.value
    assert replay.verdicts.children[0].children[1].description == "agree"

    replay.next.click()   # message 4: its own scores; the conversation's verdicts stay
    texts = [control.children[0].value for control in replay.verdicts.children]
    assert texts[0].startswith("message 4 · helpfulness: 5") and "behaviour failure: no failure" in texts[5]
    assert "ana disagreed: 1" in texts[6]
    # a new session sees what was said, with nothing to undo
    again = replay_widget({"rows": [JUDGED]}, CONVERSATIONS, suite_dir=tmp_path, run_id="r1")
    assert len(again.verdicts.children[6].children) == 1


def test_a_verdict_that_cannot_be_labelled_says_why_in_the_feedback(tmp_path):
    replay = replay_widget({"rows": [JUDGED]}, CONVERSATIONS, suite_dir=tmp_path)
    completeness = replay.verdicts.children[-1].children   # a score of 3.5 is on no 1–5 label scale
    completeness[1].click()
    assert "field &#x27;judge_value&#x27;: must be one of 1, 2, 3, 4, 5" in replay.feedback.value   # escaped
    assert not (tmp_path / "labels.jsonl").exists()
    assert "labels cannot be saved" in replay_widget({"rows": [JUDGED]}, CONVERSATIONS).verdicts.children[0].value


def test_the_user_review_is_a_verdict_an_analyst_can_check_and_calibrate(tmp_path):
    reviewed = {**ROW, "judges": {"status": "run", "user_review": {
        "fault": True, "check": "invented_value", "turn": 2, "reason": "gave a ticket id it was never given"}}}
    (item,) = judge_items(reviewed, [0])
    assert (item["judge"], item["criterion"], item["judge_value"], item["scale"]) == ("user_review", "user_review",
                                                                                     1, "0/1")
    request = verdict_request(item, reviewed, verdict="disagree", note="the id was in the instructions",
                              author="ana", run_id="r1", judge_model="gpt-judge")
    assert request["human_value"] == 0 and "message_index" not in request
    labels = tmp_path / "labels.jsonl"
    add_label(labels, **request)
    add_label(labels, **{**request, "case_id": "t-002", "verdict": "agree", "human_value": 1})
    assert report_calibration(read_labels(labels), "gpt-judge") == {"judge.user_review": {
        "labels": 2, "agreement": 0.5, "kappa": 0.0, "statistic": "κ"}}


def test_a_turn_is_named_as_a_reader_counts_it_and_a_value_told_otherwise_says_both():
    from lobeval.analysis.replay import _message_flags, turn_label

    assert (turn_label(0, 4), turn_label(3, 4)) == ("the bot's opening, before turn 1", "turn 3 of 4")
    row = {"claims": {"claimed_not_done": [{"message_index": 5, "claim": "update", "functionName": "update_action_item",
                                            "argument": "due_date", "said": "2026-12-12", "sent": "2026-12-11"}]}}
    assert _message_flags(row) == {5: ["told the user due_date 2026-12-12, but the call sent 2026-12-11"]}


def test_a_conversation_without_a_reference_fails_only_by_a_check_it_failed():
    from lobeval.analysis.replay import outcome

    unreferenced = {"status": "scored", "Success": None, "reference": False, "checks": {"no_failed_calls": True}}
    assert outcome(unreferenced) == "passed"
    assert outcome({**unreferenced, "checks": {"no_failed_calls": False}}) == "failed"
    assert outcome({**unreferenced, "Success": 0, "reference": True}) == "failed"
    assert outcome({**unreferenced, "excluded": "user_fault"}) == "left out"
