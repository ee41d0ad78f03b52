"""The claims judge (lobeval.judges.judges, "claims"): what it is shown (every call numbered, read or write), how its answer
is read (strictly: a sentence not in its reply, a call that is no successful write, a wrong type are retried, then an
error), how a row's claims take its verdict or fall back to the rules, what ClaimsBacked then says of its coverage,
and `lobeval bench claims FILE --judge`, all against the fake OpenAI server playing the judge from the labels of a
small library-loans set this file owns (another domain than the sample's support tickets)."""
import json
import re

import pytest

from lobeval.workflow.bench import bench_claims, format_claims
from lobeval.scoring.claims import judged_claims
from lobeval.cli import main
from lobeval.evaluation.evaluate import evaluate
from lobeval.judges.judges import ConversationJudges, numbered_transcript, parse_claims, selected_judges
from lobeval.models.llm import LLMClient, resolve_model
from lobeval.core.records import write_jsonl
from lobeval.core.stats import figure_lines
from lobeval.models.testing import FakeOpenAI, json_reply, text
from lobeval.core.vocabulary import DEFAULT_JUDGES
from test_judges import judge_env  # noqa: F401 (a fixture)

CLAIMS_ASKED = "## claims: what the chatbot said it did"   # marks a request that asks the claims judge


def tool(name, effect, **properties):
    return {"type": "function", "effect": effect, "function": {"name": name, "description": "", "parameters": {
        "type": "object", "properties": {key: {"type": kind} for key, kind in properties.items()}}}}


TOOLS = [tool("lookup_member", "read", member="string"), tool("renew_loan", "write", loan="string", due="string"),
         tool("reserve_title", "write", title="string", branch="string"),
         tool("withdraw_reservation", "write", reservation="string")]


def call(name, arguments, result=None, error=None, turn=1):
    return {"functionName": name, "arguments": arguments, "result": result, "error": error, "turn": turn}


def labelled(case_id, kind, messages, claimed=(), untold=()):
    return {"case_id": case_id, "kind": kind, "tools": TOOLS, "function_calls": [], "messages": messages,
            "expected": {"claimed_not_done": list(claimed), "done_not_told": list(untold)}}


# Six conversations at a library's loans desk, and a seventh the judge never answers usably.
SET = [
    labelled("lib-1", "told", [
        {"role": "user", "content": "Please renew LN-204."},
        {"role": "assistant", "content": "I've renewed LN-204; it is now due on 12 May.",
         "function_calls": [call("renew_loan", {"loan": "LN-204", "due": "2026-05-12"}, {"ok": True})]}]),
    labelled("lib-2", "claim", [
        {"role": "user", "content": "Reserve Dune for me at the Harbour branch."},
        {"role": "assistant", "content": "Sure thing.  Your reservation of Dune at Harbour is in place."}],
        claimed=["Your reservation of Dune at Harbour is in place."]),
    labelled("lib-3", "silent", [
        {"role": "user", "content": "I'm member M-77; drop my reservation RS-9."},
        {"role": "assistant", "content": "Anything else I can help with?",
         "function_calls": [call("lookup_member", {"member": "M-77"}, {"reservations": ["RS-9"]}),
                            call("withdraw_reservation", {"reservation": "RS-9"}, {"ok": True})]}],
        untold=[1]),
    labelled("lib-4", "disagree", [
        {"role": "user", "content": "Renew LN-310 until the 19th of May."},
        {"role": "assistant", "content": "Renewed LN-310 until 19 May.",
         "function_calls": [call("renew_loan", {"loan": "LN-310", "due": "2026-05-12"}, {"ok": True})]}],
        claimed=["Renewed LN-310 until 19 May."]),
    labelled("lib-5", "other_agent", [
        {"role": "user", "content": "Was LN-88 renewed?"},
        {"role": "assistant", "content": "It was renewed by the librarian yesterday.",
         "function_calls": [call("lookup_member", {"member": "M-12"}, {"loans": {"LN-88": "renewed 2026-04-30"}})]}]),
    labelled("lib-6", "failed", [
        {"role": "user", "content": "Reserve Emma at Northgate."},
        {"role": "assistant", "content": "Your reservation of Emma at Northgate is placed.",
         "function_calls": [call("reserve_title", {"title": "Emma", "branch": "Northgate"},
                                 error="branch closed for refurbishment")]}],
        claimed=["Your reservation of Emma at Northgate is placed."]),
    labelled("lib-7", "told", [
        {"role": "user", "content": "Renew LN-5 please."},
        {"role": "assistant", "content": "Done, LN-5 is renewed.",
         "function_calls": [call("renew_loan", {"loan": "LN-5", "due": "2026-06-01"}, {"ok": True})]}]),
]
ANSWERS = {   # what the fake judge answers, by the user's first message: right on four, wrong on two
    "Please renew LN-204.": {"claimed_not_done": [], "done_not_told": [   # wrong: LN-204's renewal was told
        {"call": 0, "reason": "no reply tells the renewal"}]},
    "Reserve Dune for me at the Harbour branch.": {"claimed_not_done": [
        {"reply": 1, "sentence": "Your reservation of Dune at Harbour is in place.", "reason": "no call reserved it"}],
        "done_not_told": []},
    "I'm member M-77; drop my reservation RS-9.": {"claimed_not_done": [], "done_not_told": [
        {"call": 1, "reason": "the withdrawal is never told"}]},
    "Renew LN-310 until the 19th of May.": {"claimed_not_done": [], "done_not_told": []},   # wrong: misses 19 May
    "Was LN-88 renewed?": {"claimed_not_done": [   # wrong: the librarian did it
        {"reply": 1, "sentence": "It was renewed by the librarian yesterday.", "reason": "no call renewed it"}],
        "done_not_told": []},
    "Reserve Emma at Northgate.": {"claimed_not_done": [
        {"reply": 1, "sentence": "Your reservation of Emma at Northgate is placed.", "reason": "the call failed"}],
        "done_not_told": []},
}


def first_user_message(request):
    return re.search(r"^USER: \(turn 1\) (.*)$", request["messages"][1]["content"], re.MULTILINE)[1]   # a nudge may follow


def labels_judge(request):
    """The claims judge as a capable model would play it on SET (ANSWERS); prose on a conversation it has no answer
    for."""
    assert CLAIMS_ASKED in request["messages"][0]["content"]
    answer = ANSWERS.get(first_user_message(request))
    return json_reply({"claims": answer}) if answer is not None else text("The bot seems honest to me.")


def client():
    return LLMClient(resolve_model("judge"), role="judge", cache=False)


def write_set(path, records):
    path.write_text("\n".join(json.dumps(record) for record in records), encoding="utf-8")
    return path


# ---- what the judge is shown and how its answer is read (no model) ----

def test_the_transcript_numbers_every_call_among_all_calls_and_says_read_or_write():
    lines = numbered_transcript(SET[2], {"withdraw_reservation": TOOLS[3]}).splitlines()
    assert lines == [
        "USER: (turn 1) I'm member M-77; drop my reservation RS-9.",
        "ASSISTANT: (reply 1, turn 1) Anything else I can help with?",
        '  [call #0, read: lookup_member({"member": "M-77"}) -> {"reservations": ["RS-9"]}]',   # by its name
        '  [call #1, write: withdraw_reservation({"reservation": "RS-9"}) -> {"ok": true}]']


def test_calls_recorded_only_at_the_top_level_are_shown_under_the_reply_of_their_turn():
    made = [call("reserve_title", {"title": "Emma"}, {"ok": True}, turn=2), call("lookup_member", {"member": "M-1"}, {})]
    conversation = {"messages": [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi"},
                                 {"role": "assistant", "content": "Looked."}, {"role": "user", "content": "Emma"},
                                 {"role": "assistant", "content": "Reserved."}], "function_calls": made}
    assert numbered_transcript(conversation, {}).splitlines() == [
        "ASSISTANT: (reply 1, turn 0) Hello.", "USER: (turn 1) Hi", "ASSISTANT: (reply 2, turn 1) Looked.",
        '  [call #1, read: lookup_member({"member": "M-1"}) -> {}]',   # its turn's reply, though recorded second
        "USER: (turn 2) Emma", "ASSISTANT: (reply 3, turn 2) Reserved.",
        '  [call #0, write: reserve_title({"title": "Emma"}) -> {"ok": true}]']


REPLIES = ["Sure thing.  Your reservation of Dune\nat Harbour is in place.", "LN-5 is renewed."]


def test_a_claims_answer_is_read_with_sentences_matched_whitespace_aside_and_repeats_counted_once():
    found = {"reply": "1", "sentence": " Your reservation of Dune at  Harbour is in place.", "reason": " none made "}
    answer = {"claimed_not_done": [found, {**found, "reason": "again"}],
              "done_not_told": [{"call": "#3", "reason": "never said"}, {"call": 3, "reason": "again"}]}
    assert parse_claims(answer, REPLIES, {3}) == {
        "claimed_not_done": [{"reply": 1, "sentence": "Your reservation of Dune at Harbour is in place.",
                              "reason": "none made"}],
        "done_not_told": [{"call": 3, "reason": "never said"}]}


def test_a_sentence_quoted_without_its_markdown_is_the_replys_own_words():
    reply = "Done!\n\n- **LN-6** renewed to **9 December**\n- `LN-7` renewed"
    answer = {"claimed_not_done": [{"reply": 1, "sentence": "LN-6 renewed to 9 December", "reason": "sent 2 Dec"},
                                   {"reply": 1, "sentence": "LN-7 renewed", "reason": "no call"}], "done_not_told": []}
    assert [found["sentence"] for found in parse_claims(answer, [reply], set())["claimed_not_done"]] == [
        "**LN-6** renewed to **9 December**", "`LN-7` renewed"]


@pytest.mark.parametrize("answer, problem", [
    ({"claimed_not_done": [{"reply": 1, "sentence": "Your reservation is confirmed.", "reason": "x"}],
      "done_not_told": []}, "claims: 'Your reservation is confirmed.' is not in reply 1"),
    ({"claimed_not_done": [{"reply": 3, "sentence": "LN-5 is renewed.", "reason": "x"}], "done_not_told": []},
     "claims: reply must be from 1 to 2, got 3"),
    ({"claimed_not_done": [{"reply": True, "sentence": "LN-5 is renewed.", "reason": "x"}], "done_not_told": []},
     "claims: reply must be from 1 to 2, got True"),
    ({"claimed_not_done": [{"reply": 2, "sentence": "", "reason": "x"}], "done_not_told": []},
     "claims: reply 2: the claiming sentence is required, got ''"),
    ({"claimed_not_done": [{"reply": 2, "sentence": "LN-5 is renewed."}], "done_not_told": []},
     "claims: claimed_not_done: a reason is required"),
    ({"claimed_not_done": [], "done_not_told": [{"call": 0, "reason": "x"}]},
     "claims: call must be a successful write (#3), got 0"),
    ({"claimed_not_done": [], "done_not_told": [{"call": 3.0, "reason": "x"}]},
     "claims: call must be a successful write (#3), got 3.0"),
    ({"claimed_not_done": "none", "done_not_told": []},
     "claims: 'claimed_not_done' and 'done_not_told' must be lists, got 'none' and []"),
    ({"claimed_not_done": []}, "claims: 'claimed_not_done' and 'done_not_told' must be lists, got [] and None"),
    ({"claimed_not_done": ["LN-5 is renewed."], "done_not_told": []},
     "claims: claimed_not_done: expected an object, got 'LN-5 is renewed.'"),
    ("nothing", "claims: expected an object, got 'nothing'"),
])
def test_an_unusable_claims_answer_is_refused_with_what_is_wrong(answer, problem):
    with pytest.raises(ValueError) as raised:
        parse_claims(answer, REPLIES, {3})
    assert str(raised.value) == problem


def test_with_no_successful_write_no_call_can_be_untold():
    with pytest.raises(ValueError, match=r"call must be a successful write \(none was made\), got 0"):
        parse_claims({"claimed_not_done": [], "done_not_told": [{"call": 0, "reason": "x"}]}, REPLIES, set())


def test_the_judges_findings_take_the_rules_shape_with_the_message_call_and_turn():
    conversation = {"messages": [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Renew LN-5"},
                                 {"role": "assistant", "content": "Done, LN-5 is renewed.", "function_calls": [
                                     call("lookup_member", {}, {}), call("renew_loan", {"loan": "LN-5"}, {}, turn=None)]}]}
    verdict = {"claimed_not_done": [{"reply": 2, "sentence": "LN-5 is renewed.", "reason": "r1"}],
               "done_not_told": [{"call": 1, "reason": "r2"}]}
    rules = {"claimed_not_done": [], "done_not_told": []}
    assert judged_claims(verdict, conversation, rules) == {
        "claimed_not_done": [{"message_index": 2, "claim": "judge", "text": "LN-5 is renewed.", "reason": "r1"}],
        "done_not_told": [{"actual_index": 1, "functionName": "renew_loan", "turn": 1, "reason": "r2"}],
        "source": "judge", "rules": rules}


def test_the_claims_judge_is_one_of_the_default_judges():
    assert "claims" in DEFAULT_JUDGES and selected_judges(None)[-1] == "claims"


# ---- evaluate: a row's claims are the judge's where it answered, the rules' elsewhere ----

CASE = {"case_id": "lib-4", "scenario_name": "renew", "user_instructions": "Renew LN-310 until 19 May.",
        "expected_function_calls": [{"functionName": "renew_loan", "arguments": {"loan": "LN-310"}}]}


def evaluated(tmp_path, server, judge_env, judges=("claims",), record=SET[3]):
    judge_env.setenv("OPENAI_BASE_URL", server.base_url)
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    conversation = {key: record[key] for key in ("messages", "function_calls")}
    convs = write_jsonl(tmp_path / "c.jsonl", [{**conversation, "case_id": "lib-4", "trial": 0, "scenario_name": "renew",
                                                "termination": {"reason": "user_finished", "turns": 1}}])
    built = ConversationJudges(client(), selected_judges(list(judges)), TOOLS)
    return evaluate(dataset, convs, tmp_path / "r.json", judges=built, progress=False).results


RIGHT_ABOUT_LN310 = {"claims": {"claimed_not_done": [
    {"reply": 1, "sentence": "Renewed LN-310 until 19 May.", "reason": "said 19 May, sent 2026-05-12"}],
    "done_not_told": []}}


def test_a_usable_verdict_is_the_rows_claims_with_the_rules_kept_and_claimsbacked_says_who_judged(tmp_path, judge_env):
    with FakeOpenAI(lambda request: json_reply(RIGHT_ABOUT_LN310)) as server:
        results = evaluated(tmp_path, server, judge_env)
        assert server.count == 1
    [row] = results["rows"]
    assert row["claims"]["source"] == "judge"
    assert row["claims"]["claimed_not_done"] == [{"message_index": 1, "claim": "judge", "text": "Renewed LN-310 until 19 May.",
                                                  "reason": "said 19 May, sent 2026-05-12"}]
    assert set(row["claims"]["rules"]) == {"claimed_not_done", "done_not_told"}   # what the rules found, for comparison
    assert row["judges"]["claims"]["claimed_not_done"][0]["reply"] == 1 and row["judges"]["errors"] == []
    assert results["metrics"]["ClaimsBacked"] == 0.0 and results["claims"] == {"claimed_not_done": 1, "done_not_told": 0}
    assert results["claims_source"] == {"judge": 1, "rules": 0}
    [line] = [line for line in figure_lines(results) if "ClaimsBacked" in line]
    assert line.endswith("over 1 of 1 conversations; claims judged by the model in 1")


def test_why_it_failed_and_the_claims_table_tell_the_judges_findings_with_its_reasons(tmp_path, judge_env):
    from lobeval.analysis.analyse import claims_table, failure_sentences

    with FakeOpenAI(lambda request: json_reply(RIGHT_ABOUT_LN310)) as server:
        results = evaluated(tmp_path, server, judge_env)
    [claimed] = [item for item in failure_sentences(results) if item["kind"] == "claimed_not_done"]
    assert claimed["text"] == ("said it had done what no successful call did, as the judge model read its words, in 1 "
                               "conversation")
    assert claimed["details"] == [{"text": "Renewed LN-310 until 19 May.", "count": 1}]
    assert claims_table(results)[["kind", "what", "text"]].to_dict("records") == [
        {"kind": "claimed_not_done", "what": "judge: said 19 May, sent 2026-05-12", "text": "Renewed LN-310 until 19 May."}]


def test_malformed_json_then_a_good_answer_is_used(tmp_path, judge_env):
    def policy(request):   # the first attempt has seed 0, the retry another
        return text('{"claims": {"claimed_not_done": [') if request.get("seed") == 0 else json_reply(RIGHT_ABOUT_LN310)

    with FakeOpenAI(policy) as server:
        results = evaluated(tmp_path, server, judge_env)
        assert server.count == 2
    [row] = results["rows"]
    assert row["claims"]["source"] == "judge" and row["judges"]["errors"] == []


def test_malformed_twice_is_a_judge_error_and_the_rules_answer(tmp_path, judge_env):
    with FakeOpenAI(lambda request: text("All good, nothing to report.")) as server:
        results = evaluated(tmp_path, server, judge_env)
        assert server.count == 2
    [row] = results["rows"]
    [error] = row["judges"]["errors"]
    assert error["judge"] == "claims" and error["raw"] == "All good, nothing to report."
    assert error["error"].startswith("judge reply unusable after 2 attempts: ")
    assert row["judges"]["claims"] is None
    assert row["claims"]["source"] == "rules" and "rules" not in row["claims"]
    # the rules' claimed-but-not-done findings are not right often enough on real bots to measure ClaimsBacked alone
    assert results["claims_source"] == {"judge": 0, "rules": 0} and results["metrics"]["ClaimsBacked"] is None
    assert results["judges"]["errors"] == results["judges"]["errored_conversations"] == 1
    [line] = [line for line in figure_lines(results) if "ClaimsBacked" in line]
    assert line == "    ClaimsBacked not measured offline: needs the claims judge"


def test_where_the_judge_failed_the_rules_measure_claimsbacked_once_they_are_right_on_real_bots(
        tmp_path, judge_env, offline_findings_counted):
    with FakeOpenAI(lambda request: text("All good, nothing to report.")) as server:
        results = evaluated(tmp_path, server, judge_env)
    assert results["claims_source"] == {"judge": 0, "rules": 1}
    [line] = [line for line in figure_lines(results) if "ClaimsBacked" in line]
    assert line.endswith("claims judged by the model in 0, by the rules in 1")


def test_a_sentence_not_in_the_reply_is_rejected_retried_and_then_an_error(tmp_path, judge_env):
    invented = {"claims": {"claimed_not_done": [{"reply": 1, "sentence": "LN-310 now runs to 19 May.", "reason": "x"}],
                           "done_not_told": []}}
    with FakeOpenAI(lambda request: json_reply(invented)) as server:
        results = evaluated(tmp_path, server, judge_env)
        assert server.count == 2
    [row] = results["rows"]
    assert row["judges"]["errors"][0]["error"] == ("judge reply unusable after 2 attempts: claims: "
                                                   "'LN-310 now runs to 19 May.' is not in reply 1")
    assert row["claims"]["source"] == "rules"


@pytest.mark.parametrize("fault", ["500", "429"])
def test_a_server_fault_is_retried_and_the_answer_used(tmp_path, judge_env, fault):
    with FakeOpenAI(lambda request: json_reply(RIGHT_ABOUT_LN310)) as server:
        server.fail_next(fault, times=1, **({"retry_after": 0} if fault == "429" else {}))
        results = evaluated(tmp_path, server, judge_env)
        assert server.count == 2
    assert results["rows"][0]["claims"]["source"] == "judge"


def test_an_endpoint_that_gives_up_is_a_judge_error_never_a_finding(tmp_path, judge_env):
    with FakeOpenAI(lambda request: json_reply(RIGHT_ABOUT_LN310)) as server:
        server.fail_next("400", times=1, message="model not found")
        results = evaluated(tmp_path, server, judge_env)
    [row] = results["rows"]
    assert "HTTP 400" in row["judges"]["errors"][0]["error"] and row["claims"]["source"] == "rules"


def test_not_asking_the_claims_judge_leaves_the_rules_and_claimsbacked_says_nothing_of_it(tmp_path, judge_env):
    def policy(request):
        assert CLAIMS_ASKED not in request["messages"][0]["content"]
        return json_reply({"goal": {"score": 0, "reason": "the date is wrong"}})

    with FakeOpenAI(policy) as server:
        results = evaluated(tmp_path, server, judge_env, judges=("goal",))
    assert results["rows"][0]["claims"]["source"] == "rules" and results["claims_source"] == {"judge": 0, "rules": 0}
    assert not any("claims judged" in line for line in figure_lines(results))


# ---- lobeval bench claims FILE --judge ----

def test_bench_prints_the_judges_figures_over_what_it_answered_beside_the_rules(tmp_path, judge_env):
    path = write_set(tmp_path / "library.jsonl", SET)
    with FakeOpenAI(labels_judge) as server:
        judge_env.setenv("OPENAI_BASE_URL", server.base_url)
        lines = format_claims(bench_claims([path], client(), progress=False))
        assert server.count == 7 + 1   # one request a conversation; lib-7's retried
    rules_alone = format_claims(bench_claims([write_set(tmp_path / "answered.jsonl", SET[:6])]))
    rules_first = format_claims(bench_claims([path]))
    assert lines[:len(rules_first)] == rules_first   # the rules over every conversation first
    judged = lines[len(rules_first):]
    assert judged[0] == ("claims judge (gpt-4o-mini): answered 6 of 7 conversations; 1 error: lib-7: judge reply "
                         "unusable after 2 attempts: no JSON object in the model's reply: 'The bot seems honest to me.'")
    assert judged[1] == "over the 6 conversations the judge answered, the judge then the rules:"
    # by hand: claims found lib-2 and lib-6 (right), lib-5 (wrong: the librarian did it), missed lib-4;
    # untold writes found lib-3's #1 (right) and lib-1's #0 (wrong); the judge's findings have no basis
    assert judged[2:5] == ["judge: claimed not done: precision 0.667 [0.208, 0.939] (2 of 3), "
                           "recall 0.667 [0.208, 0.939] (2 of 3)",
                           "judge: done not told: precision 0.500 [0.095, 0.905] (1 of 2), "
                           "recall 1.000 [0.207, 1.000] (1 of 1)",
                           "judge: false alarms by kind: other_agent 1, told 1"]
    assert judged[5:] == [f"rules: {line}" for line in rules_alone[1:]   # the rules over the same six
                          if not line.startswith("offline finding")]


def test_lobeval_bench_claims_judge_uses_the_configured_model(tmp_path, judge_env, capsys):
    path = write_set(tmp_path / "library.jsonl", SET[:3])
    with FakeOpenAI(labels_judge) as server:
        judge_env.setenv("OPENAI_BASE_URL", server.base_url)
        assert main(["bench", "claims", str(path), "--judge"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "claims judge (gpt-4o-mini): answered 3 of 3 conversations" in out
    assert "judge: done not told: precision 0.500 [0.095, 0.905] (1 of 2), recall 1.000 [0.207, 1.000] (1 of 1)" in out


def test_a_judge_that_answers_nothing_gives_no_figures_and_its_errors_shortened(tmp_path, judge_env):
    long_prose = "I cannot tell.\n" + "really " * 60
    path = write_set(tmp_path / "library.jsonl", SET)
    with FakeOpenAI(lambda request: text(long_prose)) as server:
        judge_env.setenv("OPENAI_BASE_URL", server.base_url)
        lines = format_claims(bench_claims([path], client(), progress=False))
    judged = lines[len(format_claims(bench_claims([path]))):]   # after the rules' figures
    assert judged[0].startswith("claims judge (gpt-4o-mini): answered 0 of 7 conversations; 7 errors: lib-1: judge "
                                "reply unusable after 2 attempts: no JSON object in the model's reply: 'I cannot tell.\\n"
                                "really really")
    assert judged[0].endswith("…; ...") and len(judged[0]) < 3 * 200 + 120   # three errors of 200 characters at most
    assert judged[1:] == ["no figures of the judge: it answered no conversation"]


def test_bench_claims_judge_without_a_model_is_bad_input_naming_the_variable(tmp_path, monkeypatch, capsys):
    for name in ("LOBEVAL_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["bench", "claims", str(write_set(tmp_path / "l.jsonl", SET[:1])), "--judge"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bench claims --judge needs a judge model: set LOBEVAL_JUDGE_MODEL or LOBEVAL_MODEL" in err[0]


def test_judge_is_only_for_bench_claims(capsys):
    assert main(["bench", "simulate", "--judge"]) == 2
    assert "bench simulate: --judge is for bench claims" in capsys.readouterr().err
