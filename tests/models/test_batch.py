"""The judges through the Batch API (`--batch`, lobeval.models.batch) against the fake endpoint's /v1/files and
/v1/batches: the same verdicts as sent one by one, at half the price; a run killed while it polls resumes the
same batch; a batch that expired is a judge error for each conversation it covered, never a score."""
from __future__ import annotations

import json

import pytest

from lobeval.models.batch import BATCH_FILE
from lobeval.evaluation.evaluate import evaluate
from lobeval.judges.judges import ConversationJudges, selected_judges
from lobeval.models.llm import LLMClient, resolve_model
from lobeval.core.records import write_jsonl
from lobeval.models.testing import FakeOpenAI
from test_judges import CASE, CONVERSATION, GREETED, judge_env, judge_policy  # noqa: F401 (a fixture)

PRICE = {"gpt-4o-mini": {"input": 1.0, "output": 2.0}}


def judged(tmp_path, server, judge_env, *, batch: bool, folder: str, selection=("per_turn", "goal", "user_review")):
    judge_env.setenv("OPENAI_BASE_URL", server.base_url)
    judge_env.setenv("LOBEVAL_BATCH_POLL_S", "0")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICE))
    judge_env.setenv("LOBEVAL_PRICES", str(prices))
    judge_env.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / folder / "cache"))   # nothing shared between the runs
    out = tmp_path / folder / "r.json"
    out.parent.mkdir(exist_ok=True)
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE, {**CASE, "case_id": "t-002"}])
    convs = write_jsonl(tmp_path / "c.jsonl", [CONVERSATION, {**GREETED, "case_id": "t-002"}])
    client = LLMClient(resolve_model("judge"), role="judge", cache=True)
    judges = ConversationJudges(client, selected_judges(list(selection)), [], batch=batch)
    return evaluate(dataset, convs, out, judges=judges, progress=False).results


def verdicts(results):
    return [{k: v for k, v in row["judges"].items() if k != "usage"} for row in results["rows"]]


def test_a_batch_gives_the_verdicts_of_requests_sent_alone_at_half_their_price(tmp_path, judge_env):
    with FakeOpenAI(judge_policy()) as server:
        alone = judged(tmp_path, server, judge_env, batch=False, folder="alone")
        sent_alone = server.count
        batched = judged(tmp_path, server, judge_env, batch=True, folder="batched")
        in_batch = [answer for answer in server.answers if answer.get("batch")]
    assert verdicts(batched) == verdicts(alone)
    assert len(server.batches) == 1 and len(in_batch) == sent_alone == 2   # one request per conversation
    assert batched["judges"]["usage"]["cost_usd"] == pytest.approx(alone["judges"]["usage"]["cost_usd"] / 2)
    [recorded] = json.loads((tmp_path / "batched" / BATCH_FILE).read_text()).values()
    assert recorded["batch_id"] in server.batches and recorded["status"] == "completed"


def test_a_run_killed_while_it_polls_resumes_the_same_batch(tmp_path, judge_env):
    monkeypatch = judge_env
    import asyncio

    import lobeval.models.batch

    async def killed(seconds):
        raise KeyboardInterrupt   # the kill, at the first wait between looks

    with FakeOpenAI(judge_policy()) as server:
        server.batch_polls = 2
        monkeypatch.setattr(lobeval.models.batch.asyncio, "sleep", killed)
        with pytest.raises(KeyboardInterrupt):
            judged(tmp_path, server, judge_env, batch=True, folder="run")
        [batch_id] = server.batches
        assert json.loads((tmp_path / "run" / BATCH_FILE).read_text()).popitem()[1]["batch_id"] == batch_id
        assert not (tmp_path / "run" / "r.json").exists()
        monkeypatch.setattr(lobeval.models.batch.asyncio, "sleep", asyncio.sleep)
        results = judged(tmp_path, server, judge_env, batch=True, folder="run")
    assert list(server.batches) == [batch_id]   # polled again, never submitted again
    assert results["judges"]["errors"] == 0 and results["metrics"]["judge.goal"] == 1.0


@pytest.mark.parametrize("fault", ["expired", "failed"])
def test_a_batch_that_expired_or_failed_is_a_judge_error_for_each_conversation_never_a_score(tmp_path, judge_env,
                                                                                          fault):
    with FakeOpenAI(judge_policy()) as server:
        server.batch_fault = fault
        results = judged(tmp_path, server, judge_env, batch=True, folder="run")
        assert server.count == 0   # nothing was sent again one by one
    summary = results["judges"]
    assert summary["errored_conversations"] == 2 and summary["errors"] == 6   # 3 judges' verdicts x 2 conversations
    assert not [name for name in results["metrics"] if name.startswith("judge.")]
    assert results["counts"]["scored"] == 2   # the bot's own scores stand
    errors = [error["error"] for row in results["rows"] for error in row["judges"]["errors"]]
    assert all(f" {fault}: injected {fault}; this request got no answer" in error for error in errors), errors


def test_the_azure_evaluators_requests_go_in_the_same_batch_with_the_same_verdicts(tmp_path, judge_env):
    selection = ["goal", "intent_resolution", "task_adherence", "response_completeness"]
    with FakeOpenAI(judge_policy()) as server:
        alone = judged(tmp_path, server, judge_env, batch=False, folder="alone", selection=selection)
        sent_alone = server.count
        batched = judged(tmp_path, server, judge_env, batch=True, folder="batched", selection=selection)
        in_batch = [answer for answer in server.answers if answer.get("batch")]
        assert len(server.answers) == 2 * sent_alone   # nothing of the batched run was sent one by one
    assert verdicts(batched) == verdicts(alone)
    assert verdicts(batched)[0]["azure"]["intent_resolution"]["score"] == 4.0
    assert len(server.batches) == 1 and len(in_batch) == sent_alone == 2 * 4   # lobeval's request + 3 evaluators
    assert batched["judges"]["usage"]["cost_usd"] == pytest.approx(alone["judges"]["usage"]["cost_usd"] / 2)
    by_judge = batched["judges"]["usage_by_judge"]
    assert by_judge["task_adherence"]["requests"] == 2 and by_judge["task_adherence"]["prompt_tokens"] > 0


def test_an_evaluator_request_the_batch_did_not_answer_is_a_judge_error(tmp_path, judge_env):
    with FakeOpenAI(judge_policy()) as server:
        server.batch_fault = "expired"
        results = judged(tmp_path, server, judge_env, batch=True, folder="run", selection=["intent_resolution"])
        assert server.count == 0
    errors = [error for row in results["rows"] for error in row["judges"]["errors"]]
    assert [error["judge"] for error in errors] == ["intent_resolution"] * 2
    assert all(" expired: injected expired; this request got no answer" in error["error"] for error in errors), errors
    assert "judge.intent_resolution" not in results["metrics"]


def test_a_run_with_batch_looks_once_whether_the_endpoint_has_a_batch_api(tmp_path, judge_env):
    from helpers import REPO
    from lobeval.cli import main
    from roleplay import Roleplay

    judge_env.chdir(REPO)
    judge_env.setattr("lobeval.workspace.runs.RUNS", tmp_path / "runs")
    judge_env.setenv("LOBEVAL_BATCH_POLL_S", "0")
    with FakeOpenAI(Roleplay()) as server:
        judge_env.setenv("OPENAI_BASE_URL", server.base_url)
        assert main(["run", "--batch", "--run-id", "b", "--cases-per-scenario", "1", "--judges", "goal"]) in (0, 1)
    looks = [path for path in server.gets if path.split("?")[0] == "/v1/batches"]
    assert looks == ["/v1/batches?limit=1"]   # the pre-flight's; the evaluate stage's kernel does not look again
    assert len(server.batches) == 1   # the judges still went through the batch, one request per conversation
    assert len([answer for answer in server.answers if answer.get("batch")]) == 13
