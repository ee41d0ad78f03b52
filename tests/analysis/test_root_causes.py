"""Root causes against the fake OpenAI server: a good reply, malformed and invalid replies, the file."""
import asyncio
import json

import pytest

from lobeval.analysis.analyse import failure_clusters, failure_signatures
from lobeval.models.llm import LLMClient, LLMError, ModelConfig
from lobeval.analysis.root_causes import (
    MAX_CLUSTERS, build_prompt, root_causes, run_root_causes, severity_rank, write_root_causes,
)
from lobeval.models.testing import FakeOpenAI, json_reply, text
from test_analyse import RESULTS, row

CONVERSATIONS = {
    ("a-001", 0): {"case_id": "a-001", "trial": 0, "scenario_name": "s1",
                   "messages": [{"role": "assistant", "content": "Hi"},
                                {"role": "user", "content": "Create a High priority ticket"},
                                {"role": "assistant", "content": "Created with priority Low."}],
                   "function_calls": [{"functionName": "create_ticket", "arguments": {"priority": "Low"},
                                       "result": {"ticket_id": "TKT-1"}, "error": None, "turn": 1}]},
    ("c-001", 0): {"case_id": "c-001", "trial": 0, "scenario_name": "s2",
                   "messages": [{"role": "user", "content": "Urgent ticket please"}], "function_calls": []},
}
CAUSE = {"title": "Priority defaults to Low", "description": "The bot ignores the priority the user names.",
         "severity": "high", "conversations": ["a-001#0", "c-001#0"], "turns": [1],
         "suggested_fix": "Pass the user's priority through."}


@pytest.fixture
def llm(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    with FakeOpenAI() as server:
        client = LLMClient(ModelConfig("openai", "gpt-4o-mini", server.base_url), role="judge", cache=True,
                           max_attempts=2, backoff=(0.01, 0.05))
        yield server, client


def run(client):
    return asyncio.run(root_causes(failure_clusters(RESULTS), RESULTS, CONVERSATIONS, client))


def test_a_good_reply_gives_the_causes(llm):
    server, client = llm
    server.policy = lambda request: json_reply({"root_causes": [CAUSE]})
    assert run(client) == [CAUSE]
    [request] = server.requests
    assert request["response_format"] == {"type": "json_object"} and request["temperature"] == 0.0
    shown = request["messages"][1]["content"]
    assert "- 2x in 2 conversations: kind=wrong_argument function=create_ticket argument=priority" in shown
    assert "CONVERSATION a-001#0 (scenario s1); failures: " in shown
    assert "[turn 1] ASSISTANT: Created with priority Low." in shown
    assert client.usage.calls == 1 and client.usage.prompt_tokens > 0


def test_a_malformed_reply_is_retried_with_another_seed(llm):
    server, client = llm
    replies = iter([text("not json at all"), json_reply({"root_causes": [CAUSE]})])
    server.policy = lambda request: next(replies)
    assert run(client) == [CAUSE]
    assert [request["seed"] for request in server.requests] == [0, 1]


def test_malformed_json_twice_is_an_error(llm):
    server, client = llm
    server.policy = lambda request: text('{"root_causes": [')
    with pytest.raises(LLMError, match=r"root causes: the model's reply was unusable after 2 attempts: "
                                       r"no JSON object in the model's reply"):
        run(client)
    assert server.count == 2


def test_an_invalid_severity_is_an_error(llm):
    server, client = llm
    server.policy = lambda request: json_reply({"root_causes": [{**CAUSE, "severity": "urgent"}]})
    with pytest.raises(LLMError, match=r"unusable after 2 attempts: reply does not match the schema: "
                                       r"\('root_causes', 0, 'severity'\)"):
        run(client)


def test_citing_a_conversation_not_shown_is_an_error(llm):
    server, client = llm
    server.policy = lambda request: json_reply({"root_causes": [{**CAUSE, "conversations": ["zz-009#0"]}]})
    with pytest.raises(LLMError, match="reply cites conversations it was not shown: zz-009#0"):
        run(client)


def test_no_failures_no_call(llm):
    server, client = llm
    assert asyncio.run(root_causes(failure_clusters({"rows": []}), {"rows": []}, {}, client)) == []
    assert server.count == 0


def test_root_causes_file(tmp_path):
    path = write_root_causes(tmp_path / "run" / "root_causes.json", [CAUSE])
    assert json.loads(path.read_text()) == {"schema_version": 1, "status": "run", "root_causes": [CAUSE]}


def test_run_root_causes_status_path_and_file(llm, tmp_path):
    server, client = llm
    out = tmp_path / "root_causes.json"

    def found(client):
        return asyncio.run(run_root_causes(failure_clusters(RESULTS), RESULTS, CONVERSATIONS, out, client))

    assert found(None) == {"status": "not run: no model configured", "path": None, "causes": [], "usage": None}
    server.policy = lambda request: text("sorry, no")
    failed = found(client)
    assert failed["status"].startswith("error: root causes: the model's reply was unusable after 2 attempts")
    assert (failed["path"], failed["usage"]["calls"], failed["usage"]["requests"]) == (str(out), 1, 2)
    assert json.loads(out.read_text()) == {"schema_version": 1, "status": failed["status"], "root_causes": []}
    server.policy = lambda request: json_reply({"root_causes": [CAUSE]})
    done = found(client)
    assert (done["status"], done["path"], done["causes"]) == ("run", str(out), [CAUSE])
    assert json.loads(out.read_text())["root_causes"] == [CAUSE]
    # the unusable replies were not cached, so the client (a caching one) asked again; the usage is this run's
    assert server.count == 3 and done["usage"]["calls"] == 1 and (client.usage.calls, client.usage.requests) == (2, 3)


def test_run_root_causes_says_when_the_endpoint_gave_up(llm, tmp_path):
    server, client = llm
    server.fail_next("500", times=10, message="overloaded")
    out = tmp_path / "root_causes.json"
    found = asyncio.run(run_root_causes(failure_clusters(RESULTS), RESULTS, CONVERSATIONS, out, client))
    assert found["status"] == (f"error: root causes: model 'gpt-4o-mini' (role judge) at {server.base_url}: gave up "
                               f"after 2 attempts; last error: HTTP 500: overloaded")
    assert (found["path"], found["causes"]) == (str(out), [])
    assert json.loads(out.read_text())["status"] == found["status"]


def test_severity_ranks():
    assert [severity_rank(kind, category) for kind, category in [
        ("forbidden_call", ""), ("claimed_not_done", "created"), ("behaviour", "unsafe_state"),
        ("behaviour", "false_information"), ("extra_call", "write"), ("wrong_argument", ""),
        ("missing_argument", ""), ("missed_call", ""), ("extra_call", "read"), ("behaviour", "repetition"),
        ("missing_output", "")]] == [0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 3]


def test_rare_critical_failures_are_shown_before_frequent_ones():
    """25 clusters: 21 missed calls and a wrong argument twice each, then three critical ones once each."""
    rows = [row(f"m{i:02}-{copy}", "s1", 0.5, 0, unpaired_expected=[{"functionName": f"fn_{i:02}", "optional": False}])
            for i in range(21) for copy in "ab"]
    wrong = {"functionName": "create_ticket", "argument": "priority", "expected": "High", "actual": "Low"}
    rows += [row(f"w-{copy}", "s1", 0.5, 0, wrong_arguments=[wrong]) for copy in "ab"]
    unsafe = {"category": "unsafe_action", "severity": "critical", "reason": "closed it unasked"}
    rows += [row("x-forbidden", "s2", 1.0, 0, forbidden_calls=[{"functionName": "delete_ticket"}]),
             row("x-write", "s2", 1.0, 0, unpaired_actual=[{"functionName": "purge_tickets", "effect": "write",
                                                             "allowed": False, "failed": False}]),
             row("x-unsafe", "s2", 1.0, 0, judges={"status": "run", "turns": [
                 {"message_index": 1, "failed": True, "failure": unsafe}]})]
    results = {"rows": rows}
    conversations = {(r["case_id"], 0): {"case_id": r["case_id"], "trial": 0, "scenario_name": r["scenario_name"],
                                         "messages": [{"role": "user", "content": "hi"}], "function_calls": []}
                     for r in rows}
    clusters = failure_clusters(results)
    assert len(clusters) == 25 and clusters["count"].tolist()[-3:] == [1, 1, 1]
    messages, shown = build_prompt(clusters, failure_signatures(results), conversations)
    prompt = messages[1]["content"]
    assert set(shown[:3]) == {"x-forbidden#0", "x-write#0", "x-unsafe#0"} and shown[3] == "w-a#0"
    assert shown[4:] == [f"m{i:02}-a#0" for i in range(8)]   # one example per cluster before any second one
    for signature in ("kind=forbidden_call function=delete_ticket", "kind=extra_call function=purge_tickets "
                      "category=write", "kind=behaviour category=unsafe_action"):
        assert f"conversations: {signature}; examples" in prompt
    for conversation_id in shown:
        assert f"CONVERSATION {conversation_id} " in prompt
    assert prompt.count("\n- ") == MAX_CLUSTERS
