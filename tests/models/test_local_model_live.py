"""lobeval's model paths against a real model on a local OpenAI-compatible server, when one is named:
LOBEVAL_LOCAL_MODEL_URL (e.g. http://127.0.0.1:8000/v1) and LOBEVAL_LOCAL_MODEL (default smollm2); skipped
otherwise. How to start llama-cpp-python with SmolLM2: docs/models.md, "Local models". What a small model says is
not checked, only that every path ends as lobeval promises: an answer, or a failure recorded as machinery."""
from __future__ import annotations

import asyncio
import json
import os

import pytest

from lobeval.core.errors import ConfigError, TargetUnavailable
from lobeval.judges.judges import CompletionJudge
from lobeval.models.llm import LLMClient, ModelConfig, ReplyError, Usage, parse_json_object
from lobeval.targets.prompt_target import load_prompt_target
from lobeval.core.records import Case
from helpers import REPO, case

URL = os.environ.get("LOBEVAL_LOCAL_MODEL_URL")
MODEL = os.environ.get("LOBEVAL_LOCAL_MODEL", "smollm2")
pytestmark = pytest.mark.skipif(not URL, reason="no local model server named (LOBEVAL_LOCAL_MODEL_URL)")
TIMEOUT_S = 600.0   # a CPU-bound server reads a few hundred prompt tokens a second


@pytest.fixture(autouse=True)
def local(monkeypatch, tmp_path):
    for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
                 "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD", "LOBEVAL_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", URL or "")
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LOBEVAL_TIMEOUT_S", str(TIMEOUT_S))


def client(role: str, **kw) -> LLMClient:
    return LLMClient(ModelConfig("openai", MODEL, URL), role=role, cache=False, concurrency=1, **kw)


def test_a_user_turn_comes_back_within_its_cap(monkeypatch):
    monkeypatch.setenv("LOBEVAL_STREAM", "off")   # a plain request: the server reports its tokens
    result = asyncio.run(client("user", max_tokens=32).chat([{"role": "user", "content": "Say hello."}]))
    assert isinstance(result.message["content"], str) and 0 < result.completion_tokens <= 32
    assert result.cost_usd is None and result.usage.estimated_tokens == 0   # no price: unknown, never $0


def test_a_streamed_turn_comes_back_whole_with_its_tokens_reported_or_counted_and_marked():
    result = asyncio.run(client("user", max_tokens=32).chat([{"role": "user", "content": "Say hello."}]))
    assert result.message["content"].strip() and result.completion_tokens > 0 and result.requests == 1
    # llama-cpp-python 0.3.36 sends no usage in a stream (it ignores stream_options): lobeval counts, and says so
    assert result.usage.estimated_tokens in (0, result.prompt_tokens + result.completion_tokens)


def test_a_judges_json_answer_parses_or_is_an_unusable_reply_with_its_raw_text():
    ask = [{"role": "user", "content": 'Answer with the JSON object {"ok": true} and nothing else.'}]
    try:
        assert isinstance(asyncio.run(client("judge", max_tokens=64).ask_json(ask, parse_json_object)), dict)
    except ReplyError as exc:
        assert exc.raw is not None or exc.problem


def test_the_completion_judge_gives_a_verdict_or_says_why_not():
    messages = [{"role": "user", "content": "Open a ticket."}, {"role": "assistant", "content": "Done: TKT-1."}]
    complete, reason = asyncio.run(CompletionJudge(client("judge", max_tokens=128)).is_complete(
        Case.model_validate(case()), messages, Usage()))
    assert isinstance(complete, bool) and isinstance(reason, str)


def test_the_prompt_targets_tool_loop_ends_in_words_or_a_machinery_error_keeping_its_calls(tmp_path):
    spec = json.loads((REPO / "scenarios" / "support_tickets" / "prompt_target.json").read_text())
    path = tmp_path / "prompt_target.json"
    path.write_text(json.dumps({**spec, "model": MODEL, "max_tool_rounds": 2,
                                "tools_file": str(REPO / "scenarios" / "support_tickets" / "tools.json")}))
    target = load_prompt_target(path)

    async def turn():
        session = await target.start({})
        try:
            return await session.send("Show me ticket TKT-1001, please.")
        finally:
            await session.close()

    try:
        reply = asyncio.run(turn())
    except TargetUnavailable as exc:
        assert "HTTP 500" not in str(exc) or "null" not in str(exc)   # never refused for a null content
    else:
        assert isinstance(reply.text, str)
        assert all(set(call) >= {"functionName", "arguments", "result", "error"} for call in reply.function_calls)


def test_batch_is_refused_before_anything_runs():
    from lobeval.models.batch import check_batch_api

    with pytest.raises(ConfigError, match=r"has no Batch API .*: run without --batch$"):
        check_batch_api(ModelConfig("openai", MODEL, URL))


def test_the_claims_judge_on_labelled_conversations_answers_or_records_why_not(tmp_path):
    from lobeval.workflow.bench import bench_claims, format_claims

    lines = (REPO / "tests" / "fixtures" / "claims" / "held_out.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    path = tmp_path / "three.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    figures = bench_claims([path], client("judge", max_tokens=512), progress=False)
    judged = figures["judge"]
    assert judged["answered"] + len(judged["errors"]) == 3
    assert all(error.split(": ", 1)[0] in {json.loads(line)["case_id"] for line in lines} for error in judged["errors"])
    print("\n".join(format_claims(figures)))   # pytest -s shows what the small model made of them
