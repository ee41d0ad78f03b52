"""A reply written as a JSON object is read as its text wherever lobeval reads what the bot said (issue #43):
the shapes real bots write (tests/fixtures/tau/real), the record kept as written, and each reader."""
import json
from pathlib import Path

import pytest

from lobeval.targets.chat import chat_loop
from lobeval.scoring.claims import find_claims
from lobeval.evaluation.evaluate import evaluate
from lobeval.imports.importers import import_tau2
from lobeval.core.protocol import Reply, read_replies, reply_text
from lobeval.core.records import read_results
from lobeval.core.render import conversation_html, excerpt, transcript_text
from lobeval.analysis.replay import replay_data
from lobeval.scoring.scoring import assistant_text

REAL = Path(__file__).parents[1] / "fixtures" / "tau" / "real"


@pytest.mark.parametrize("written, read", [
    ('{"message": "Your return has been submitted."}', "Your return has been submitted."),
    ('{"reply":"I found your profile."}', "I found your profile."),
    ('  {"response": "Done, thank you."}\n', "Done, thank you."),
    # the text field first, then every other value on its own line after its key in words; a nested object under
    # its key, indented; each item of a list under the list's key
    ('{"summary": "Two options.", "message": "Here they are.", "total_fare_usd": 255, "insurance": "no", '
     '"nonstop_preferred": true, "notes": ["Bags are free.", "No insurance."], "reservation_summary": '
     '{"reservation_id": "HATHAT", "flights": [{"flight_number": "HAT136", "date": null}, {"flight_number": "HAT039"}]},'
     ' "empty": {"a": null}}',
     "Here they are.\nsummary: Two options.\ntotal fare usd: 255\ninsurance: no\nnonstop preferred: yes\n"
     "notes: Bags are free.\nnotes: No insurance.\nreservation summary:\n  reservation id: HATHAT\n  flights:\n"
     "    flight number: HAT136\n  flights:\n    flight number: HAT039"),
    ('{"tool": "transfer_to_human_agents", "arguments": {"summary": "User wants a refund."}}',
     "tool: transfer_to_human_agents\narguments:\n  summary: User wants a refund."),
    ('{"message": "Cut off', '{"message": "Cut off'),            # not JSON: as written
    ('["a list", "of lines"]', '["a list", "of lines"]'),       # JSON, but no object: as written
    ("Your total is {amount}.", "Your total is {amount}."),
    ("", ""), (None, ""),
])
def test_a_reply_is_read_as_its_text(written, read):
    assert reply_text(written) == read


def test_a_conversation_is_read_and_its_record_kept_as_written():
    conversation = {"case_id": "c", "messages": [{"role": "user", "content": '{"message": "user text stays"}'},
                                                 {"role": "assistant", "content": '{"message": "Cancelled."}'}]}
    read = read_replies(conversation)
    assert [m["content"] for m in read["messages"]] == ['{"message": "user text stays"}', "Cancelled."]
    assert conversation["messages"][1]["content"] == '{"message": "Cancelled."}'


def test_every_reader_reads_the_text_of_a_json_reply():
    written = '{"message": "Your reservation is cancelled.", "refund": {"amount_usd": 1,628}}'   # not JSON
    conversation = {"case_id": "c", "trial": 0, "termination": {"reason": "user_finished", "turns": 1},
                    "messages": [{"role": "user", "content": "Cancel it"},
                                 {"role": "assistant", "content": '{"message": "Cancelled: refund of $1,628."}',
                                  "function_calls": []},
                                 {"role": "assistant", "content": written}], "function_calls": []}
    assert assistant_text(conversation) == f"Cancelled: refund of $1,628.\n{written}"
    assert transcript_text(conversation["messages"]).splitlines()[1] == "ASSISTANT: Cancelled: refund of $1,628."
    assert excerpt(conversation)[1] == "[turn 1] ASSISTANT: Cancelled: refund of $1,628."
    assert "<b>assistant:</b> Cancelled: refund of $1,628.</div>" in conversation_html(conversation)
    row = {"case_id": "c", "trial": 0, "scenario_name": "s", "status": "scored", "Success": 1}
    [record] = replay_data({"rows": [row]}, {("c", 0): conversation})
    [step] = [step for step in record["steps"] if step["turn"] == 1]
    assert [m["content"] for m in step["messages"]][:2] == ["Cancel it", "Cancelled: refund of $1,628."]


def test_the_claims_rules_read_the_sentence_inside_a_json_reply():
    conversation = {"messages": [{"role": "user", "content": "Cancel my order"},
                                 {"role": "assistant", "content": '{"message": "Your order has been cancelled."}'}],
                    "function_calls": []}
    tools = {"cancel_order": {"type": "function", "effect": "write", "function": {"name": "cancel_order"}}}
    [claim] = find_claims(read_replies(conversation), tools)["claimed_not_done"]
    assert claim["text"] == "Your order has been cancelled."


class JsonBot:
    """Answers every message with a JSON object, as some real bots do."""

    async def start(self, case):
        return self

    async def send(self, message):
        return Reply('{"reply": "Hello there."}')

    async def close(self):
        pass


def test_chat_prints_the_text_of_a_json_reply():
    said, lines = iter(["hi", "/quit"]), []
    chat_loop("test_replies:JsonBot", read=lambda prompt: next(said), write=lines.append)
    assert lines[0] == "bot> Hello there."


def test_an_imported_run_keeps_what_the_bot_wrote_and_is_scored_on_what_it_said(tmp_path):
    run = tmp_path / "run"
    import_tau2(REAL / "ironshell_airline_gpt54_cut.json", run)
    recorded = [json.loads(line) for line in (run / "conversations.jsonl").read_text().splitlines()]
    replies = [m["content"] for m in recorded[0]["messages"] if m["role"] == "assistant" and m["content"]]
    assert replies[1].startswith('{"reply":"I’m sorry to hear that.')   # the record: what the bot wrote
    evaluate(run / "dataset.jsonl", run / "conversations.jsonl", run / "evaluation_results.json", suite=run / "suite",
             progress=False, judges="not run: switched off (--judges none)")
    rows = read_results(run / "evaluation_results.json")["rows"]
    quoted = [claim["text"] for row in rows for claim in (row.get("claims") or {}).get("claimed_not_done", [])]
    assert not any(text.lstrip().startswith("{") for text in quoted)
