"""The replay: display records from a row and its transcript, the static HTML, and the widget."""
import json
import re

from lobeval.replay import replay_data, replay_html

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
    assert [m["content"] for m in record["steps"][1]["messages"]] == [f"Make a ticket {ATTACK}", "Which department?"]
    [lookup] = record["steps"][1]["calls"]
    assert (lookup["index"], lookup["verdict"], lookup["expected"]) == (0, "extra", "")
    [create] = record["steps"][2]["calls"]
    assert (create["verdict"], create["expected"], create["outcome"]) == ("paired", "create_ticket",
                                                                          '→ {"ticket_id": "TKT-9"}')
    assert create["arguments"] == [
        {"argument": "title", "actual": '"printer"', "expected": '"Printer"', "status": "correct"},
        {"argument": "priority", "actual": '"Low"', "expected": '"High"', "status": "wrong"},
        {"argument": "due_date", "actual": "", "expected": '"2024-05-01"', "status": "missing"},
        {"argument": "notes", "actual": json.dumps(ATTACK), "expected": "", "status": "extra"}]


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


def test_two_replays_on_one_page_do_not_collide():
    first, second = (embedded(replay_html({"rows": [ROW]}, CONVERSATIONS))[0] for _ in range(2))
    assert first != second
