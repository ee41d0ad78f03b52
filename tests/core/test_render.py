"""lobeval.core.render: transcripts and function calls as plain text and as HTML."""
import subprocess
import sys

from lobeval.core.render import call_html, call_lines, call_text, conversation_html, excerpt, outcome_text, transcript_text

ATTACK = "<script>alert(1)</script>"
DONE = {"functionName": "create_ticket", "arguments": {"title": "Drucker klemmt"}, "result": {"ticket_id": "TKT-1"},
        "error": None, "turn": 1}
REFUSED = {"functionName": "close_ticket", "arguments": {"ticket_id": "TKT-9"}, "result": None,
           "error": "no such ticket", "turn": 2}
CONVERSATION = {"case_id": "a-001", "trial": 0, "scenario_name": "s1",
                "messages": [{"role": "assistant", "content": "Hi"},
                             {"role": "user", "content": "Create a High priority ticket"},
                             {"role": "assistant", "content": "Created with priority Low."}],
                "function_calls": [{"functionName": "create_ticket", "arguments": {"priority": "Low"},
                                    "result": {"ticket_id": "TKT-1"}, "error": None, "turn": 1}]}


def test_a_call_as_text_with_its_result_or_its_error():
    assert call_text(DONE) == 'create_ticket({"title": "Drucker klemmt"}) -> {"ticket_id": "TKT-1"}'
    assert call_text(REFUSED) == 'close_ticket({"ticket_id": "TKT-9"}) -> ERROR no such ticket'
    assert call_lines([DONE, REFUSED]) == [f"  [{call_text(DONE)}]", f"  [{call_text(REFUSED)}]"]


def test_a_shortened_call_has_each_piece_on_one_line_and_cut():
    long = {**REFUSED, "arguments": {"note": "x" * 50}, "error": "no such\n   ticket"}
    assert call_text(long, width=20) == 'close_ticket({"note": "xxxxxxxxxx…) -> ERROR no such ticket'


def test_a_call_as_html_with_its_result_or_its_error():
    assert call_html(DONE) == ("<div class='call'>create_ticket({&quot;title&quot;: &quot;Drucker klemmt&quot;}) "
                               "→ {&quot;ticket_id&quot;: &quot;TKT-1&quot;}</div>")
    assert call_html(REFUSED) == ("<div class='call'>close_ticket({&quot;ticket_id&quot;: &quot;TKT-9&quot;}) "
                                  "<span class='err'>error: no such ticket</span></div>")
    assert outcome_text({**DONE, "result": "y" * 700}) == "→ " + '"' + "y" * 599 + "…"


def test_every_piece_of_record_text_is_escaped_in_html():
    attack = {"functionName": ATTACK, "arguments": {ATTACK: ATTACK}, "result": ATTACK, "error": None}
    page = conversation_html({"case_id": ATTACK, "trial": ATTACK, "error": ATTACK,
                              "termination": {"reason": ATTACK, "turns": ATTACK},
                              "messages": [{"role": "user", "content": ATTACK},
                                           {"role": "assistant", "content": ATTACK,
                                            "function_calls": [attack, {**attack, "error": ATTACK}]}]})
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>" not in call_html(attack)


def test_a_transcript_for_a_model_puts_each_call_below_its_message():
    messages = [{"role": "user", "content": "Create it"},
                {"role": "assistant", "content": "Done.", "function_calls": [DONE]},
                {"role": "assistant", "content": None}]
    assert transcript_text(messages).splitlines() == [
        "USER: Create it", "ASSISTANT: Done.", f"  [{call_text(DONE)}]", "ASSISTANT: "]


def test_excerpt_numbers_lines_by_user_turn_and_places_calls():
    assert excerpt(CONVERSATION) == [
        "[turn 0] ASSISTANT: Hi", "[turn 1] USER: Create a High priority ticket",
        "[turn 1] ASSISTANT: Created with priority Low.",
        '[turn 1] CALL create_ticket({"priority": "Low"}) -> {"ticket_id": "TKT-1"}']
    assert excerpt(CONVERSATION, max_lines=2)[-1] == "... (cut)"


def test_render_loads_nothing_heavy():
    loaded = subprocess.run([sys.executable, "-c", "import sys, lobeval.core.render; print(' '.join(sys.modules))"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert not {"pandas", "ipywidgets", "numpy", "openai"} & set(loaded)
