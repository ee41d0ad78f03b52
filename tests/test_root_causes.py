"""Root causes against the fake OpenAI server: a good reply, malformed and invalid replies, the file."""
import asyncio
import json

import pytest

from lobeval.analyse import failure_clusters
from lobeval.llm import LLMClient, LLMError, ModelConfig
from lobeval.root_causes import root_causes, run_root_causes, write_root_causes
from lobeval.testing import FakeOpenAI, json_reply, text
from test_analyse import RESULTS

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
    assert json.loads(path.read_text()) == {"schema_version": 1, "root_causes": [CAUSE]}


def test_run_root_causes_status_path_and_file(llm, tmp_path):
    server, client = llm
    out = tmp_path / "root_causes.json"

    def found(client):
        return asyncio.run(run_root_causes(failure_clusters(RESULTS), RESULTS, CONVERSATIONS, out, client))

    assert found(None) == {"status": "not run: no model configured", "path": None, "causes": [], "usage": None}
    server.policy = lambda request: text("sorry, no")
    failed = found(client)
    assert failed["status"].startswith("error: root causes: the model's reply was unusable after 2 attempts")
    assert (failed["path"], failed["usage"]["calls"]) == (None, 2) and not out.exists()
    server.policy = lambda request: json_reply({"root_causes": [CAUSE]})
    done = found(client)
    assert (done["status"], done["path"], done["causes"]) == ("run", str(out), [CAUSE])
    assert json.loads(out.read_text())["root_causes"] == [CAUSE]
    # the unusable replies were not cached, so the client (a caching one) asked again; the usage is this run's
    assert server.count == 3 and done["usage"]["calls"] == 1 and client.usage.calls == 3
