"""The model judges against the fake OpenAI server, their arithmetic and validation, and the offline path."""
import json
import logging
from pathlib import Path

import re
import pytest

from lobeval.cli import main
from lobeval.core.errors import ConfigError
from lobeval.evaluation.evaluate import evaluate
from lobeval.judges.judges import (
    ConversationJudges, azure_inputs, azure_model_config, azure_verdict, final_score, judge_instructions, parse_goal,
    parse_replies, SDK_QUIET, parse_user_review, scenario_coverage, selected_judges, summarise_judges,
)
from lobeval.models.llm import LLMClient, ModelConfig, resolve_model
from lobeval.core.records import write_jsonl
from lobeval.workspace.suite import load_suite
from lobeval.models.testing import FakeOpenAI, json_reply, text
from helpers import TOOLS, make_suite

CASE = {"case_id": "t-001", "scenario_name": "ticket", "user_instructions": "Create a ticket.",
        "task_completion": "A ticket titled Printer jams exists.",
        "expected_function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams"}}],
        "expected_outputs": ["TKT-9"]}
CONVERSATION = {
    "case_id": "t-001", "trial": 0, "scenario_name": "ticket",
    "messages": [
        {"role": "user", "content": "Create a ticket: Printer jams"},
        {"role": "assistant", "content": "Done: created ticket TKT-9.",
         "function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams"},
                             "result": {"ticket_id": "TKT-9"}, "error": None, "turn": 1}]},
        {"role": "user", "content": "Thanks, what's its priority?"},
        {"role": "assistant", "content": "WRONG TURN: it is Critical."},
        {"role": "user", "content": "the session is finished"}],
    "function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams"},
                        "result": {"ticket_id": "TKT-9"}, "error": None, "turn": 1}],
    "termination": {"reason": "user_finished", "turns": 3}}
CREATED = {"functionName": "create_ticket", "arguments": {"title": "Printer jams"}, "result": {"ticket_id": "TKT-9"},
           "error": None, "turn": 1}
LOOKED_UP = {"functionName": "get_ticket", "arguments": {"ticket_id": "TKT-9"}, "result": {"priority": "High"},
             "error": None, "turn": 2}
REFUSED = {"functionName": "create_action", "arguments": {"ticket_id": "TKT-9", "title": "Clear tray"}, "result": None,
           "error": "ticket is closed", "turn": 3}
GREETED = {   # the bot speaks first, calls functions, and the user asks three times
    "case_id": "t-001", "trial": 0, "scenario_name": "ticket",
    "messages": [
        {"role": "assistant", "content": "Hello! I can create and look up tickets."},
        {"role": "user", "content": "Create a ticket: Printer jams"},
        {"role": "assistant", "content": "Done: created ticket TKT-9.", "function_calls": [CREATED]},
        {"role": "user", "content": "What's its priority?"},
        {"role": "assistant", "content": "It is High.", "function_calls": [LOOKED_UP]},
        {"role": "user", "content": "Add the action Clear tray."},
        {"role": "assistant", "content": "I could not: the ticket is closed.", "function_calls": [REFUSED]},
        {"role": "user", "content": "the session is finished"}],
    "function_calls": [CREATED, LOOKED_UP, REFUSED],
    "termination": {"reason": "user_finished", "turns": 4}}
TOOL_DEFINITIONS = [{"name": tool["function"]["name"], "description": "",
                     "parameters": tool["function"]["parameters"]} for tool in TOOLS]
GOOD = {name: {"score": 4, "reason": "fine"} for name in
        ("helpfulness", "coherence", "verbosity", "relevance", "faithfulness")}
LOW = {**GOOD, "faithfulness": {"score": 1, "reason": "the priority was never looked up"}}


NO_USER_FAULT = {"fault": False, "check": None, "turn": None, "reason": "the user kept to its instructions"}


FALSE_INFORMATION = {"category": "false_information", "reason": "invented a priority"}
JUDGES = "Answer each of the questions below"   # marks the request of lobeval's own judges


def judge_policy(turn=lambda reply: LOW if "WRONG TURN" in reply else GOOD, goal=None, failure=FALSE_INFORMATION,
                 review=None):
    """Answers the request of lobeval's judges with each part its instructions ask for: the per-turn part scores
    each "(reply k, turn t)" line by `turn` ({criterion: {score, reason}}), a failed one with `failure`; `goal` and
    `review` are put under their keys as given (default: a good verdict). Any other request is an Azure
    evaluator's."""
    def policy(request):
        system = request["messages"][0]["content"]
        last = request["messages"][1]["content"]   # the transcript (a retry's nudge comes after it)
        if JUDGES not in system:
            return json_reply({"score": 4, "reason": "azure judge fine", "status": "completed"})
        asked, answer = system.split("Answer with one JSON object", 1)[1], {}
        if '"replies":' in asked:
            answer["replies"] = []
            for line in last.splitlines():
                if number := re.match(r"ASSISTANT: \(reply (\d+), turn \d+\) ", line):
                    scores = turn(line)
                    low = any(entry["score"] < 3 for entry in scores.values())
                    answer["replies"].append({"reply": int(number[1]),
                                              "scores": {name: entry["score"] for name, entry in scores.items()},
                                              "reasons": {name: entry["reason"] for name, entry in scores.items()},
                                              "failure": failure if low else None})
        if '"goal":' in asked:
            answer["goal"] = {"score": 1, "reason": "the ticket was created"} if goal is None else goal
        if '"user_review":' in asked:
            answer["user_review"] = NO_USER_FAULT if review is None else review
        if '"claims":' in asked:
            answer["claims"] = {"claimed_not_done": [], "done_not_told": []}
        return json_reply(answer)
    return policy


@pytest.fixture
def judge_env(monkeypatch, tmp_path):
    for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_EMBEDDING_MODEL",
                 "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD", "LOBEVAL_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-JUDGE1234567")
    monkeypatch.setenv("LOBEVAL_JUDGE_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(LLMClient.__init__.__kwdefaults__, "backoff", (0.01, 0.05))   # retries in a blink
    return monkeypatch


def run(tmp_path, server, judge_env, judges=("all",), conversation=CONVERSATION):
    judge_env.setenv("OPENAI_BASE_URL", server.base_url)
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    convs = write_jsonl(tmp_path / "c.jsonl", [conversation])
    suite = tmp_path / "scenarios" / "toy"
    if not suite.exists():
        make_suite(tmp_path)
    client = LLMClient(resolve_model("judge"), role="judge", cache=True)
    built = ConversationJudges(client, selected_judges(list(judges)), list(load_suite(suite).tools.values()))
    return evaluate(dataset, convs, tmp_path / "r.json", suite=suite, judges=built, progress=False).results


# ---- arithmetic and validation (no model) ----

def turns(*failed):
    return [{"scores": GOOD, "failed": f} for f in failed]


@pytest.mark.parametrize("failed, goal, ratio, score, status", [
    ((False, False, False, False), 1, 1.0, 1.0, "Done"),
    ((False, False, False, True), 1, 0.75, 0.8125, "Partial Failure"),    # 0.75 × 0.75 + 0.25
    ((False, False, False, False, True), 0, 0.8, 0.6, "Partial Failure"),  # 0.75 × 0.8 = 0.6 exactly
    ((False, True, True, False), 0, 0.5, 0.375, "Failed"),
    ((False, False), 0, 1.0, 0.75, "Partial Failure"),                      # every turn fine, goal missed
])
def test_final_score(failed, goal, ratio, score, status):
    assert final_score(turns(*failed), {"score": goal}) == pytest.approx(
        {"turn_success_ratio": ratio, "final_score": score, "final_status": status})


def test_no_final_score_when_a_turn_or_the_goal_was_not_judged():
    unjudged = [*turns(False), {"scores": None, "failed": None}]
    assert final_score(unjudged, {"score": 1})["final_score"] is None
    assert final_score(turns(False), None) == {"turn_success_ratio": None, "final_score": None, "final_status": None}


def replies(*entries):
    """The answer's "replies" from each reply's {criterion: {score, reason}} (and its failure)."""
    return [{"reply": number, "scores": {k: v["score"] for k, v in entry.items() if k != "failure"},
             "reasons": {k: v["reason"] for k, v in entry.items() if k != "failure" and "reason" in v},
             **({"failure": entry["failure"]} if "failure" in entry else {})}
            for number, entry in enumerate(entries, 1)]


def test_turn_scores_are_validated_and_a_failed_reply_needs_its_failure():
    [judged] = parse_replies(replies({**GOOD, "coherence": {"score": "5", "reason": "clear"}}), replies=1)
    assert judged["scores"]["coherence"] == {"score": 5, "reason": "clear"}
    assert judged["failed"] is False and judged["failure"] is None
    [failed] = parse_replies(replies({**LOW, "failure": {"category": "False Information", "reason": "made up"}}), 1)
    assert failed["failed"] is True
    assert failed["failure"] == {"category": "false_information", "severity": "critical", "reason": "made up"}
    for entries, problem in [
        (({**GOOD, "verbosity": {"score": 6, "reason": "x"}},), "reply 1: verbosity: score must be a whole number from 1 to 5, got 6"),
        (({**GOOD, "relevance": {"score": 3.5, "reason": "x"}},), "relevance: score must be a whole number from 1 to 5, got 3.5"),
        (({**GOOD, "helpfulness": {"score": 3}},), "reply 1: helpfulness: a reason is required"),
        (({**GOOD, "helpfulness": {"score": 2, "reason": " "}},), "helpfulness: a reason is required"),
        (({k: v for k, v in GOOD.items() if k != "faithfulness"},), "faithfulness: score must be a whole number from 1 to 5, got None"),
        ((LOW,), "reply 1: a reply scored below 3 needs its failure, got None"),
        (({**LOW, "failure": {"category": "rudeness", "reason": "x"}},), "category 'rudeness' is not one of unsafe_action"),
        ((GOOD, GOOD), "per_turn: expected replies 1 to 1 once each, got [1, 2]"),
    ]:
        with pytest.raises(ValueError, match=re.escape(problem)):
            parse_replies(replies(*entries), replies=1)
    with pytest.raises(ValueError, match="'replies' must be a list"):
        parse_replies(GOOD, replies=1)
    with pytest.raises(ValueError, match=re.escape("reply 1: scores: expected an object, got None")):
        parse_replies([{"reply": 1, "reasons": {}}], replies=1)


def test_the_scores_of_a_reply_are_asked_as_a_list_in_the_criteria_order():
    # the shorter answer: a reply's scores without the criteria's names, which the instructions give in order
    assert '"scores": [<helpfulness>, <coherence>, <verbosity>, <relevance>, <faithfulness>]' in " ".join(
        judge_instructions(("per_turn",)).split())
    [good, failed] = parse_replies([
        {"reply": 1, "scores": [5, 4, "5", 4, 5]},
        {"reply": 2, "scores": [2, 4, 4, 4, 1], "reasons": {"helpfulness": "asked nothing", "faithfulness": "made up"},
         "failure": {"category": "false_information", "reason": "a result it did not get"}}], replies=2)
    assert good == {"scores": {"helpfulness": {"score": 5}, "coherence": {"score": 4}, "verbosity": {"score": 5},
                               "relevance": {"score": 4}, "faithfulness": {"score": 5}}, "failed": False, "failure": None}
    assert failed["scores"]["faithfulness"] == {"score": 1, "reason": "made up"} and failed["failed"] is True
    assert failed["scores"]["coherence"] == {"score": 4}
    for scores, problem in [
        ([5, 4, 5, 4], "reply 1: scores: expected 5 scores (helpfulness, coherence, verbosity, relevance, faithfulness), "
                       "got [5, 4, 5, 4]"),
        ([5, 4, 5, 4, 0], "reply 1: faithfulness: score must be a whole number from 1 to 5, got 0"),
        ([3, 5, 5, 5, 5], "reply 1: helpfulness: a reason is required"),
    ]:
        with pytest.raises(ValueError, match=re.escape(problem)):
            parse_replies([{"reply": 1, "scores": scores}], replies=1)


def test_a_good_score_needs_no_reason_and_keeps_one_given():
    [judged] = parse_replies(replies({**GOOD, "coherence": {"score": 5}, "relevance": {"score": 4, "reason": "on task"}}),
                             replies=1)
    assert judged["scores"]["coherence"] == {"score": 5}
    assert judged["scores"]["relevance"] == {"score": 4, "reason": "on task"}


def test_goal_is_validated():
    assert parse_goal({"score": True, "reason": "done"}) == {"score": 1, "reason": "done"}
    with pytest.raises(ValueError, match="goal: score must be a whole number from 0 to 1, got 2"):
        parse_goal({"score": 2, "reason": "x"})


def test_judge_selection():
    assert selected_judges(None) == ["per_turn", "goal", "user_review", "commitments", "claims"]
    assert selected_judges(["all"]) == ["per_turn", "goal", "user_review", "commitments", "claims", "tool_call_accuracy",
                                        "intent_resolution", "task_adherence", "response_completeness"]
    assert selected_judges(["goal", "per_turn"]) == ["per_turn", "goal"]
    assert selected_judges(["none"]) == []
    with pytest.raises(ConfigError, match="unknown judge\\(s\\) vibes; choose from all, none, per_turn"):
        selected_judges(["goal", "vibes"])


def test_azure_inputs_split_history_and_last_turn_and_define_only_the_tools_called():
    tools = [{"name": "create_ticket", "description": "", "parameters": {}},
             {"name": "get_ticket", "description": "", "parameters": {}}]
    inputs = azure_inputs(CONVERSATION, CASE, tools)
    assert inputs["intent_resolution"]["tool_definitions"] == inputs["task_adherence"]["tool_definitions"] == tools[:1]
    accuracy = inputs["tool_call_accuracy"]
    assert [m["role"] for m in accuracy["query"]] == ["user", "assistant", "tool", "assistant", "user"]
    assert accuracy["response"] == [{"role": "assistant", "content": [{"type": "text", "text": "WRONG TURN: it is Critical."}]}]
    assert accuracy["tool_calls"][0]["name"] == "create_ticket"
    assert inputs["response_completeness"]["ground_truth"] == "A ticket titled Printer jams exists. TKT-9"
    assert "tool_definitions" not in azure_inputs(CONVERSATION, CASE, [])["intent_resolution"]
    assert azure_inputs(CONVERSATION, CASE, [])["tool_call_accuracy"] == "no tool definitions (evaluate with --suite)"
    no_calls = {**CONVERSATION, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    assert azure_inputs(no_calls, CASE, tools)["tool_call_accuracy"] == "no function calls to judge"


# ---- against the fake server ----

def test_judges_score_turns_goal_and_azure_evaluators(tmp_path, judge_env):
    with FakeOpenAI(judge_policy()) as server:
        results = run(tmp_path, server, judge_env)
    verdict = results["rows"][0]["judges"]
    assert verdict["status"] == "run"
    assert [turn["failed"] for turn in verdict["turns"]] == [False, True]
    assert verdict["turns"][1]["failure"] == {"category": "false_information", "severity": "critical",
                                              "reason": "invented a priority"}
    assert verdict["goal"] == {"score": 1, "reason": "the ticket was created"}
    # 1 of 2 turns failed: 0.75 × 0.5 + 0.25 × 1
    assert verdict["final_score"] == pytest.approx(0.625) and verdict["final_status"] == "Partial Failure"
    assert verdict["azure"]["intent_resolution"] == {"score": 4.0, "result": "pass", "threshold": 3,
                                                     "reason": "azure judge fine"}
    assert set(verdict["azure"]) == {"tool_call_accuracy", "intent_resolution", "task_adherence", "response_completeness"}
    metrics = results["metrics"]
    assert metrics["judge.final_score"] == pytest.approx(0.625)
    assert metrics["judge.faithfulness"] == pytest.approx(2.5)     # (4 + 1) / 2 turns
    assert metrics["judge.tool_call_accuracy"] == 4.0
    summary = results["judges"]
    assert summary["errors"] == summary["errored_conversations"] == 0
    assert summary["failures"] == {"false_information": 1}
    assert summary["final_status"] == {"Done": 0, "Partial Failure": 1, "Failed": 0, "Not judged": 0}
    assert set(summary["coverage"]) == {name for name in metrics if name.startswith("judge.")}
    assert summary["coverage"]["judge.final_score"] == {"judged": 1, "of": 1, "errors": 0, "not_applicable": 0}
    # one call for lobeval's judges (every turn and its failure, the goal, the user review); one per azure evaluator
    assert summary["usage_by_judge"]["per_turn+goal+user_review+commitments+claims"]["calls"] == 1
    assert summary["usage_by_judge"]["task_adherence"]["prompt_tokens"] > 0
    assert results["scenarios"][0]["judge.final_score"] == pytest.approx(0.625)


def test_rerunning_unchanged_conversations_makes_no_model_calls(tmp_path, judge_env):
    with FakeOpenAI(judge_policy()) as server:
        first = run(tmp_path, server, judge_env)
        sent = server.count
        second = run(tmp_path, server, judge_env)
        assert server.count == sent
    assert second["metrics"]["judge.final_score"] == first["metrics"]["judge.final_score"]
    assert second["judges"]["usage"]["cached_calls"] == second["judges"]["usage"]["calls"] == 5   # lobeval's + 4 azure


def test_an_unusable_goal_is_retried_then_an_error_with_its_raw_text_and_the_other_parts_kept(tmp_path, judge_env):
    with FakeOpenAI(judge_policy(goal="I think it went well, maybe 1?")) as server:
        results = run(tmp_path, server, judge_env, judges=["per_turn", "goal"])
        assert server.count == 2
    verdict = results["rows"][0]["judges"]
    assert verdict["goal"] is None and verdict["final_score"] is None
    assert [turn["failed"] for turn in verdict["turns"]] == [False, True]   # the same answer's scores are kept
    [error] = verdict["errors"]
    assert error["judge"] == "goal" and '"goal": "I think it went well, maybe 1?"' in error["raw"]
    assert error["error"] == ("judge reply unusable after 2 attempts: goal: expected an object with score and "
                              "reason, got 'I think it went well, maybe 1?'")
    assert "judge.final_score" not in results["metrics"] and "judge.goal" not in results["metrics"]
    summary = results["judges"]
    assert summary["errors"] == summary["errored_conversations"] == 1
    # coverage is reported also for a judge metric no conversation gave a value for
    assert summary["coverage"]["judge.goal"] == summary["coverage"]["judge.final_score"] == \
        {"judged": 0, "of": 1, "errors": 1, "not_applicable": 0}
    assert summary["coverage"]["judge.helpfulness"] == {"judged": 1, "of": 1, "errors": 0, "not_applicable": 0}
    assert summary["final_status"]["Not judged"] == 1


def test_an_out_of_range_score_is_retried_and_the_valid_retry_used(tmp_path, judge_env):
    def turn_policy(request):
        if JUDGES in request["messages"][0]["content"]:
            bad = {**GOOD, "coherence": {"score": 9, "reason": "x"}}
            return judge_policy(turn=lambda reply: bad if request.get("seed") == 0 else GOOD)(request)
        return judge_policy()(request)

    with FakeOpenAI(turn_policy) as server:
        results = run(tmp_path, server, judge_env, judges=["per_turn", "goal"])
    verdict = results["rows"][0]["judges"]
    assert verdict["errors"] == [] and [turn["failed"] for turn in verdict["turns"]] == [False, False]
    assert verdict["final_status"] == "Done"


def test_a_refusal_is_an_error_not_a_score(tmp_path, judge_env):
    refusal = "I'm sorry, but I can't help with that."
    with FakeOpenAI(judge_policy()) as server:
        server.policy = lambda request: (text(refusal) if JUDGES in request["messages"][0]["content"]
                                         else judge_policy()(request))
        results = run(tmp_path, server, judge_env, judges=["per_turn"])
    verdict = results["rows"][0]["judges"]
    assert [turn["scores"] for turn in verdict["turns"]] == [None, None]
    assert [(e["judge"], e["message_index"], e["raw"]) for e in verdict["errors"]] == [("per_turn", None, refusal)]
    assert not [name for name in results["metrics"] if name.startswith("judge.")]


def test_an_endpoint_that_gives_up_is_a_judge_error(tmp_path, judge_env):
    with FakeOpenAI(judge_policy()) as server:
        server.fail_next("400", times=1, message="bad request")
        results = run(tmp_path, server, judge_env, judges=["goal"])
    [error] = results["rows"][0]["judges"]["errors"]
    assert error["judge"] == "goal" and "HTTP 400" in error["error"] and error["raw"] is None


def test_an_intermediate_response_is_not_applicable(tmp_path, judge_env):
    last_turn_is_a_call = {**CONVERSATION, "messages": [
        CONVERSATION["messages"][0],
        {"role": "assistant", "content": "", "function_calls": CONVERSATION["function_calls"]}]}
    with FakeOpenAI(judge_policy()) as server:
        results = run(tmp_path, server, judge_env, judges=["intent_resolution"], conversation=last_turn_is_a_call)
    verdict = results["rows"][0]["judges"]["azure"]["intent_resolution"]
    assert verdict == {"result": "not applicable",
                       "reason": "intermediate response: the bot's last turn has no text for the user"}
    assert "judge.intent_resolution" not in results["metrics"]


def test_the_sdks_own_not_applicable_is_kept():
    output = {"task_adherence": None, "task_adherence_result": "not_applicable", "task_adherence_status": "skipped",
              "task_adherence_reason": "Not applicable: Intermediate response.", "task_adherence_properties": None}
    assert azure_verdict("task_adherence", output) == (
        {"result": "not applicable", "reason": "Not applicable: Intermediate response."}, None)
    broken = {"task_adherence": float("nan"), "task_adherence_reason": ""}
    assert azure_verdict("task_adherence", broken)[0]["error"].startswith("no score in the evaluator's output")


def test_offline_the_judges_are_not_run(tmp_path, monkeypatch):
    for name in ("LOBEVAL_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    convs = write_jsonl(tmp_path / "c.jsonl", [CONVERSATION])
    results = evaluate(dataset, convs, tmp_path / "r.json", progress=False).results
    assert results["rows"][0]["judges"] == {"status": "not run: no judge model configured"}
    assert results["judges"]["status"] == "not run: no judge model configured"
    assert not [name for name in results["metrics"] if name.startswith("judge.")]


def test_asking_for_judges_without_a_model_is_bad_input(tmp_path, monkeypatch, capsys):
    for name in ("LOBEVAL_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    convs = write_jsonl(tmp_path / "c.jsonl", [CONVERSATION])
    assert main(["evaluate", "--dataset", str(dataset), "--conversations", str(convs), "--judges", "goal",
                 "--out", str(tmp_path / "r.json")]) == 2
    assert "--judges goal needs a judge model: set LOBEVAL_JUDGE_MODEL" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_rerun_asks_again_where_a_judge_reply_was_unusable(tmp_path, judge_env):
    with FakeOpenAI(judge_policy(goal="maybe")) as server:
        first = run(tmp_path, server, judge_env, judges=["goal"])
        server.policy = judge_policy()
        second = run(tmp_path, server, judge_env, judges=["goal"])
        assert server.count == 3
    assert first["rows"][0]["judges"]["goal"] is None
    assert second["rows"][0]["judges"]["goal"] == {"score": 1, "reason": "the ticket was created"}


def test_an_azure_evaluator_without_a_verdict_is_retried_then_an_error_and_not_cached(tmp_path, judge_env):
    with FakeOpenAI(lambda request: text("no verdict")) as server:
        first = run(tmp_path, server, judge_env, judges=["intent_resolution"])
        sent = server.count
        server.policy = judge_policy()
        second = run(tmp_path, server, judge_env, judges=["intent_resolution"])
    [error] = first["rows"][0]["judges"]["errors"]
    assert error["judge"] == "intent_resolution"
    assert error["error"].startswith("the evaluator failed on all 2 attempts: JSONDecodeError")
    assert first["rows"][0]["judges"]["azure"]["intent_resolution"] == {"error": error["error"], "raw": None}
    assert (sent, server.count) == (2, 3)
    # the retry is not the same request again: the evaluator's prompty asks at temperature 0, its retry warmer
    assert [request["temperature"] for request in server.requests[:2]] == [0.0, 0.7]
    assert second["rows"][0]["judges"]["azure"]["intent_resolution"]["score"] == 4.0


# ---- coverage: every judge figure says on how many conversations it rests ----

def verdict(goal=1, turn_scores=(GOOD, GOOD), azure=None):
    """A "run" verdict as ConversationJudges gives it; None for a goal or turn the judge failed on."""
    azure = azure or {}
    turns = [{"message_index": 2 * i + 1, "scores": scores, "failed": False if scores else None, "failure": None}
             for i, scores in enumerate(turn_scores)]
    goal = None if goal is None else {"score": goal, "reason": "r"}
    errors = [*({"judge": "per_turn"} for scores in turn_scores if scores is None),
              *([{"judge": "goal"}] if goal is None else []),
              *({"judge": name} for name, entry in azure.items() if "error" in entry)]
    return {"status": "run", "turns": turns, "goal": goal, "azure": azure, "errors": errors, "usage": {},
            **final_score(turns, goal)}


def test_coverage_counts_judged_errors_and_not_applicable():
    scored = {"score": 4.0, "result": "pass", "threshold": 3, "reason": "ok"}
    not_applicable = {"result": "not applicable", "reason": "intermediate response"}
    rows = [
        {"scenario_name": "s1", "judges": verdict(azure={"intent_resolution": scored})},
        {"scenario_name": "s1", "judges": verdict(goal=None, azure={"intent_resolution": {"error": "x", "raw": None}})},
        # one turn judged, the other not: no turn mean from part of the turns
        {"scenario_name": "s1",
         "judges": verdict(turn_scores=(LOW, None), azure={"intent_resolution": not_applicable})},
        {"scenario_name": "s2", "judges": verdict()},
        {"scenario_name": "s2", "judges": {"status": "not run: the conversation ended in a machinery error"}},
    ]
    summary = summarise_judges(rows, ["per_turn", "goal", "intent_resolution"], {})
    assert summary["coverage"]["judge.helpfulness"] == {"judged": 3, "of": 4, "errors": 1, "not_applicable": 0}
    assert summary["coverage"]["judge.goal"] == {"judged": 3, "of": 4, "errors": 1, "not_applicable": 0}
    assert summary["coverage"]["judge.final_score"] == {"judged": 2, "of": 4, "errors": 2, "not_applicable": 0}
    assert summary["coverage"]["judge.intent_resolution"] == {"judged": 1, "of": 4, "errors": 1, "not_applicable": 2}
    assert summary["metrics"]["judge.faithfulness"] == 4.0   # the low turn's conversation is not half-counted
    assert summary["metrics"]["judge.final_score"] == 1.0
    assert summary["errored_conversations"] == 2 and summary["errors"] == 3
    assert summary["final_status"] == {"Done": 2, "Partial Failure": 0, "Failed": 0, "Not judged": 2}
    # s1's one clean final score is not a clean scenario: 1 of 3 judged
    assert scenario_coverage(rows) == {"s1": {"judged": 1, "of": 3, "errors": 2, "not_applicable": 0},
                                       "s2": {"judged": 1, "of": 1, "errors": 0, "not_applicable": 0}}
    assert scenario_coverage(rows, "judge.intent_resolution")["s1"] == \
        {"judged": 1, "of": 3, "errors": 1, "not_applicable": 1}


def test_a_conversation_without_a_bot_turn_is_not_applicable_not_an_error():
    summary = summarise_judges([{"scenario_name": "s1", "judges": verdict(turn_scores=())}], ["per_turn", "goal"], {})
    assert summary["coverage"]["judge.final_score"] == {"judged": 0, "of": 1, "errors": 0, "not_applicable": 1}
    assert summary["errored_conversations"] == 0 and summary["final_status"]["Not judged"] == 1


# ---- azure-ai-evaluation gets input its own parser and validators accept ----

def test_the_sdks_parser_and_validators_accept_what_we_build(judge_env):
    from azure.ai.evaluation import IntentResolutionEvaluator, TaskAdherenceEvaluator, ToolCallAccuracyEvaluator
    from azure.ai.evaluation._common.utils import (
        _get_conversation_history, _get_conversation_history_with_tool_calls, reformat_agent_response,
        reformat_conversation_history,
    )

    inputs = azure_inputs(GREETED, CASE, TOOL_DEFINITIONS)
    query = inputs["intent_resolution"]["query"]
    assert query[0] == {"role": "user", "content": [{"type": "text", "text": "Create a ticket: Printer jams"}]}
    # the functions raising MALFORMED_CONVERSATION_HISTORY: one more user turn than agent turns
    history = _get_conversation_history(query, include_system_messages=True)
    assert [len(history["user_queries"]), len(history["agent_responses"])] == [3, 2]
    with_calls = _get_conversation_history_with_tool_calls(query)
    assert '[TOOL_CALL] get_ticket(ticket_id="TKT-9")' in with_calls["agent_responses"][1]
    assert '[TOOL_RESULT] {"priority": "High"}' in with_calls["agent_responses"][1]
    warnings = []
    recorder = logging.getLogger("test_judges.sdk")
    recorder.addHandler(type("Recorder", (logging.Handler,), {"emit": lambda self, record: warnings.append(record)})())
    # the evaluators' wrappers fall back to the raw input, with a warning, when their parser fails
    assert reformat_conversation_history(query, recorder).startswith("User turn 1:\n  Create a ticket: Printer jams")
    response = reformat_agent_response(inputs["intent_resolution"]["response"], recorder, include_tool_messages=True)
    assert response == "[TOOL_CALL] create_action(ticket_id=\"TKT-9\", title=\"Clear tray\")\n" \
                       "[TOOL_RESULT] {\"error\": \"ticket is closed\"}\nI could not: the ticket is closed."
    assert warnings == []
    config = azure_model_config(ModelConfig("openai", "gpt-4o-mini", "http://127.0.0.1:9/v1"))
    for name, kind in (("intent_resolution", IntentResolutionEvaluator), ("task_adherence", TaskAdherenceEvaluator),
                       ("tool_call_accuracy", ToolCallAccuracyEvaluator)):
        assert kind(config)._validator.validate_eval_input(dict(inputs[name]))


def test_the_evaluators_read_the_parsed_conversation_not_raw_input(tmp_path, judge_env):
    with FakeOpenAI(judge_policy()) as server:
        results = run(tmp_path, server, judge_env, judges=["intent_resolution", "task_adherence"],
                      conversation=GREETED)
    prompts = [request["messages"][-1]["content"] for request in server.requests]
    assert len(prompts) == 2 and all("User turn 1:" in prompt and "Agent turn 2:" in prompt for prompt in prompts)
    assert not [prompt for prompt in prompts if "'role': 'user'" in prompt]
    assert results["judges"]["coverage"]["judge.task_adherence"]["judged"] == 1


def test_a_failing_evaluator_fails_fast_into_a_judge_error_and_quietly(tmp_path, judge_env, capfd, caplog):
    from azure.ai.evaluation._common import _experimental

    judge_env.setattr(_experimental, "_warning_cache", set())   # it warns "experimental class" once per process
    key = "sk-test-JUDGE1234567"
    with FakeOpenAI(judge_policy()) as server:
        server.fail_next("500", times=1000, message=f"server error; your key {key}")
        results = run(tmp_path, server, judge_env, judges=["intent_resolution"], conversation=GREETED)
        # one request per attempt of lobeval's (LLMClient.ask, 2 attempts): the SDK does not retry
        assert server.count == 2
    [error] = results["rows"][0]["judges"]["errors"]
    assert error["error"].startswith("the evaluator failed on all 2 attempts: the judge model's endpoint failed: "
                                     "InternalServerError: Error code: 500")
    assert "server error; your key" in error["error"] and key not in error["error"]
    assert results["judges"]["coverage"]["judge.intent_resolution"] == \
        {"judged": 0, "of": 1, "errors": 1, "not_applicable": 0}
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert not [record for record in caplog.records if record.name.startswith("azure")]
    assert logging.getLogger("azure.ai.evaluation").level == logging.NOTSET   # silenced only while it ran


def test_the_sdk_stays_silent_until_the_last_evaluator_running_ends(caplog):
    sdk = logging.getLogger("azure.ai.evaluation._evaluators.somewhere")
    with SDK_QUIET:
        with SDK_QUIET:   # a second evaluator on another thread
            sdk.warning("both running")
        sdk.error("one still running")
    sdk.warning("none running")
    assert [record.getMessage() for record in caplog.records] == ["none running"]


# ---- the review of the simulated user ----

def test_user_review_replies_are_parsed_strictly():
    fault = '{"reason": "it named TKT-7", "fault": true, "check": "invented_value", "turn": 2}'
    assert parse_user_review(json.loads(fault), turns=3) == {"fault": True, "check": "invented_value", "turn": 2,
                                                  "reason": "it named TKT-7"}
    assert parse_user_review({"reason": "fine", "fault": "false", "check": "other", "turn": 9}, turns=3) == \
        {"fault": False, "check": None, "turn": None, "reason": "fine"}
    for reply, problem in [('{"reason": "x", "fault": "maybe"}', "'fault' must be true or false"),
                           ('{"reason": "x", "fault": true, "check": "rudeness", "turn": 1}', "check 'rudeness'"),
                           ('{"reason": "x", "fault": true, "check": "other", "turn": 4}', "from 1 to 3"),
                           ('{"fault": true, "check": "other", "turn": 1}', "a reason is required")]:
        with pytest.raises(ValueError, match=problem):
            parse_user_review(json.loads(reply), turns=3)


def test_an_unusable_user_review_is_a_judge_error_not_a_fault(tmp_path, judge_env):
    with FakeOpenAI(judge_policy(review="The user seems fine to me.")) as server:
        results = run(tmp_path, server, judge_env, judges=["goal", "user_review"])
        asked = server.count
    [row] = results["rows"]
    assert asked == 2   # one request asks both; its answer's unusable review made it ask once more
    assert row["judges"]["user_review"] is None and row["user_faults"] == [] and row["excluded"] is None
    [error] = row["judges"]["errors"]
    assert error["judge"] == "user_review" and error["error"] == (
        "judge reply unusable after 2 attempts: user_review: expected an object, got 'The user seems fine to me.'")
    assert results["judges"]["coverage"]["judge.user_review"] == {"judged": 0, "of": 1, "errors": 1,
                                                                  "not_applicable": 0}
    assert results["counts"]["user_faults"] == 0 and results["metrics"]["judge.goal"] == 1.0
    assert (results["judges"]["usage_by_judge"]["goal+user_review"]["calls"],
            results["judges"]["usage_by_judge"]["goal+user_review"]["requests"]) == (1, 2)


def test_a_user_fault_the_review_finds_leaves_the_conversation_out_of_the_bot_figures(tmp_path, judge_env):
    review = {"reason": "the user asked about a priority its task never mentions", "fault": True,
              "check": "contradicted_instructions", "turn": 2}
    with FakeOpenAI(judge_policy(review=review)) as server:
        results = run(tmp_path, server, judge_env, judges=["per_turn", "goal", "user_review"])
    [row] = results["rows"]
    assert row["judges"]["user_review"] == {**review, "check": "contradicted_instructions"}
    assert row["user_faults"] == [{"check": "user_review:contradicted_instructions", "turn": 2, "message_index": 2,
                                   "detail": review["reason"]}]
    assert row["excluded"] == "user_fault" and results["counts"]["user_faults"] == 1
    assert results["metrics"]["Success"] is None and "judge.final_score" not in results["metrics"]
    assert results["judges"]["coverage"]["judge.final_score"]["of"] == 0
    # the review itself is about the user: over every judged conversation, the left-out one too
    assert results["metrics"]["judge.user_review"] == 1.0
    assert results["judges"]["coverage"]["judge.user_review"] == {"judged": 1, "of": 1, "errors": 0,
                                                                  "not_applicable": 0}
    assert results["config"]["judge_model"] == "gpt-4o-mini"


@pytest.mark.parametrize("reply, problem", [
    ('{"reason": "r", "commitment": "maybe"}', "'commitment' must be true or false"),
    ('{"commitment": false}', "commitments: a reason is required"),
    ('{"reason": "r", "commitment": true, "turn": 4, "sentence": "I will"}', "turn must be a user turn from 0 to 3"),
    ('{"reason": "r", "commitment": true, "turn": 2, "sentence": " "}', "the committing sentence is required"),
])
def test_an_unusable_commitment_verdict_is_refused_with_what_is_wrong(reply, problem):
    from lobeval.judges.judges import parse_commitment

    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_commitment(json.loads(reply), turns=3)


def test_a_commitment_verdict_keeps_its_turn_and_sentence_and_no_commitment_has_neither():
    from lobeval.judges.judges import parse_commitment

    assert parse_commitment(json.loads('{"reason": "r", "commitment": "true", "turn": "2", "sentence": " I will. "}'), turns=3) == {
        "commitment": True, "turn": 2, "sentence": "I will.", "reason": "r"}
    assert parse_commitment(json.loads('{"reason": "r", "commitment": false, "turn": 2, "sentence": "x"}'), turns=3) == {
        "commitment": False, "turn": None, "sentence": None, "reason": "r"}


# ---- the judges asked together give the verdicts they gave when each was asked alone ----

BEFORE = Path(__file__).parents[1] / "fixtures" / "judges_before_merge"
"""A role-played run of the sample suite (Roleplay(seed=15, bot_mistakes=0.5, user_invents=...), `lobeval run
--user llm --cases-per-scenario 1 --judges per_turn,goal,user_review`) made by lobeval at ac1c304, when each judge
sent a request of its own: its cases, its conversations, and its judges' verdicts."""


def test_the_judges_asked_in_one_request_give_the_verdicts_they_gave_asked_one_by_one(tmp_path, judge_env):
    from roleplay import Roleplay

    with FakeOpenAI(Roleplay(seed=15)) as server:
        judge_env.setenv("OPENAI_BASE_URL", server.base_url)
        client = LLMClient(resolve_model("judge"), role="judge", cache=False)
        judges = ConversationJudges(client, selected_judges(["per_turn", "goal", "user_review"]), [])
        results = evaluate(BEFORE / "dataset.jsonl", BEFORE / "conversations.jsonl", tmp_path / "r.json",
                           judges=judges, progress=False).results
        assert server.count == 13   # one request per conversation
    now = {f"{row['case_id']}#{row['trial']}": {
        "turns": [{"message_index": t["message_index"], "failed": t["failed"],
                   "scores": {k: v["score"] for k, v in t["scores"].items()},
                   "failure": (t["failure"] or {}).get("category")} for t in row["judges"]["turns"]],
        "goal": row["judges"]["goal"]["score"], "user_review": row["judges"]["user_review"]["fault"],
        "final_status": row["judges"]["final_status"]} for row in results["rows"]}
    before = json.loads((BEFORE / "verdicts.json").read_text())
    assert now == before
    # the run holds what the judges must tell apart: wrong values written, a fault of the user, every status
    assert sum(turn["failure"] == "unsafe_state" for v in before.values() for turn in v["turns"]) == 4
    assert sum(v["user_review"] for v in before.values()) == 1
    assert {v["final_status"] for v in before.values()} == {"Done", "Partial Failure", "Failed"}
