"""lobeval.models.llm against the fake OpenAI server: configuration, retries, usage, cache, budget, validated
JSON answers, key hygiene. Races are driven by events, never by measuring time."""
from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import diskcache
import pytest

from lobeval.core.errors import ConfigError, RecordError
from lobeval.models.llm import (
    PRICES, Budget, BudgetExceeded, LLMClient, LLMError, ModelConfig, ReplyError, Usage, _assistant_message, _Unusable,
    cost_of, format_cost, load_prices, parse_json_object, resolve_model, worst_case_usd,
)
from lobeval.models.llm import probe
from lobeval.core.tokens import prompt_tokens
from sockets import closed_port, resetting, silent
from lobeval.models.testing import FakeOpenAI, json_reply, text, tool_calls

SECRET = "sk-test-SECRET123456789"
HI = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_ticket", "parameters": {"type": "object"}}}]
MODEL_VARS = ["LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
              "LOBEVAL_EMBEDDING_MODEL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY",
              "AZURE_OPENAI_API_VERSION", "LOBEVAL_PRICES", "LOBEVAL_BUDGET_USD", "LOBEVAL_BUDGET_LEDGER"]


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in MODEL_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def client(server: FakeOpenAI, model: str = "gpt-4o-mini", **kw) -> LLMClient:
    options = {"role": "judge", "cache": False, "timeout": 5.0, "max_attempts": 4, "backoff": (0.01, 0.1), **kw}
    return LLMClient(ModelConfig("openai", model, server.base_url), **options)


def chat(llm: LLMClient, messages=HI, **kw):
    return asyncio.run(llm.chat(messages, **kw))


def blocked_until(release: threading.Event) -> None:
    """Waits for the test to release it; the timeout only keeps a failing test from hanging."""
    assert release.wait(timeout=30), "never released"


# --- resolve_model -----------------------------------------------------------------------------------

def test_no_model_name_is_offline():
    assert resolve_model("judge", {"OPENAI_API_KEY": SECRET}) is None


def test_role_override_and_default():
    env = {"OPENAI_API_KEY": SECRET, "LOBEVAL_MODEL": "gpt-4o-mini", "LOBEVAL_JUDGE_MODEL": "gpt-4.1",
           "OPENAI_BASE_URL": "http://localhost:11434/v1"}
    assert resolve_model("judge", env) == ModelConfig("openai", "gpt-4.1", "http://localhost:11434/v1")
    assert resolve_model("user", env).model == "gpt-4o-mini"
    assert resolve_model("target", env).model == "gpt-4o-mini"


def test_embedding_needs_its_own_variable():
    env = {"OPENAI_API_KEY": SECRET, "LOBEVAL_MODEL": "gpt-4o-mini"}
    assert resolve_model("embedding", env) is None
    assert resolve_model("embedding", {**env, "LOBEVAL_EMBEDDING_MODEL": "text-embedding-3-small"}).model == \
        "text-embedding-3-small"


def test_azure_wins_when_its_endpoint_is_set():
    env = {"OPENAI_API_KEY": SECRET, "LOBEVAL_MODEL": "my-deployment", "AZURE_OPENAI_ENDPOINT": "https://x.azure.com",
           "AZURE_OPENAI_API_KEY": SECRET, "AZURE_OPENAI_API_VERSION": "2024-10-21"}
    assert resolve_model("user", env) == ModelConfig("azure", "my-deployment", "https://x.azure.com", "2024-10-21")


@pytest.mark.parametrize("missing", ["AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION"])
def test_azure_missing_variable_is_named(missing):
    env = {"LOBEVAL_MODEL": "dep", "AZURE_OPENAI_ENDPOINT": "https://x.azure.com",
           "AZURE_OPENAI_API_KEY": SECRET, "AZURE_OPENAI_API_VERSION": "2024-10-21"}
    del env[missing]
    with pytest.raises(ConfigError, match=missing) as caught:
        resolve_model("judge", env)
    assert SECRET not in str(caught.value)


def test_model_without_credentials_says_what_to_set():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY.*AZURE_OPENAI_ENDPOINT"):
        resolve_model("target", {"LOBEVAL_TARGET_MODEL": "gpt-4o"})


def test_unknown_role_lists_the_roles():
    with pytest.raises(ConfigError, match="user, target, judge, embedding"):
        resolve_model("grader", {})


# --- chat --------------------------------------------------------------------------------------------

def test_text_reply_and_request_parameters(server):
    result = chat(client(server), temperature=0.3, max_tokens=50)
    assert result.message == {"role": "assistant", "content": "hi"}
    assert not result.cached and result.prompt_tokens > 0 and result.completion_tokens > 0
    body = server.requests[0]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("gpt-4o-mini", 0.3, 50)
    assert "tools" not in body and "response_format" not in body


def test_temperature_none_is_left_out(server):
    chat(client(server), temperature=None)
    assert "temperature" not in server.requests[0]


def test_tool_call_reply(server):
    server.policy = lambda request: tool_calls([("get_ticket", {"id": "TKT-1"})])
    message = chat(client(server), tools=TOOLS).message
    assert message["content"] == ""   # not null: it goes back in the history, which some servers refuse with null
    [call] = message["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_ticket" and json.loads(call["function"]["arguments"]) == {"id": "TKT-1"}
    assert server.requests[0]["tools"] == TOOLS and server.requests[0]["tool_choice"] == "auto"


def test_json_mode(server):
    server.policy = lambda request: json_reply({"mode": request["response_format"]["type"], "score": 3})
    result = chat(client(server), response_format={"type": "json_object"})
    assert parse_json_object(result.message["content"]) == {"mode": "json_object", "score": 3}


def test_azure_client_uses_the_deployment_path(server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-secret")
    llm = LLMClient(ModelConfig("azure", "my-deployment", server.azure_endpoint, "2024-10-21"), role="user",
                    cache=False)
    assert chat(llm).message["content"] == "hi"


def test_bad_tool_arguments_are_passed_through_as_the_bot_wrote_them(server):
    server.fail_next("bad_tool_args")
    [call] = chat(client(server), tools=TOOLS).message["tool_calls"]
    with pytest.raises(ValueError):
        json.loads(call["function"]["arguments"])
    assert server.count == 1


def test_same_client_works_across_event_loops_and_closes_its_connections_with_each(server, caplog, recwarn):
    llm = client(server)
    sdks = []
    for i in range(3):
        assert chat(llm, [{"role": "user", "content": f"{i}"}]).message["content"] == f"{i}"
        sdks.append(llm._sdk)
    assert len(set(map(id, sdks))) == 3 and all(sdk.is_closed() for sdk in sdks)
    gc.collect()
    assert "Unclosed" not in caplog.text and not [w for w in recwarn if "Unclosed" in str(w.message)]


@pytest.mark.parametrize("completion, problem", [
    ({"choices": []}, "IndexError"),
    ({"id": "x"}, "KeyError: 'choices'"),
    ({"choices": [{"message": {"content": None, "tool_calls": [{"id": "c1"}]}}]}, "KeyError: 'function'"),
    ({"choices": [{"message": {"content": ""}}]}, "empty reply"),
    ("not an object", "TypeError"),
])
def test_a_completion_of_the_wrong_shape_is_unusable(completion, problem):
    with pytest.raises(_Unusable, match=problem):
        _assistant_message(completion)


def test_concurrency_is_bounded(server):
    state = {"in_flight": 0, "peak": 0}
    changed, release = threading.Condition(), threading.Event()

    def policy(request):
        with changed:
            state["in_flight"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
            changed.notify_all()
        blocked_until(release)
        with changed:
            state["in_flight"] -= 1
        return "ok"

    def two_held():
        with changed:
            return changed.wait_for(lambda: state["in_flight"] >= 2, timeout=30)

    server.policy = policy
    llm = client(server, concurrency=2)
    posted, post = [], llm._post

    async def counted_post(sdk, path, body, **kw):
        posted.append(body)
        return await post(sdk, path, body, **kw)

    llm._post = counted_post

    async def many():
        replies = asyncio.gather(*(llm.chat([{"role": "user", "content": f"{i}"}]) for i in range(6)))
        try:
            # Every chat started before the first request could reach the server: one the bound let
            # through would have been posted by now.
            assert await asyncio.to_thread(two_held) and len(posted) == 2
        finally:
            release.set()
        return await replies

    assert len(asyncio.run(many())) == 6
    assert state["peak"] == 2 and len(posted) == server.count == 6


# --- retries -----------------------------------------------------------------------------------------

def recorded_sleeps(llm: LLMClient) -> list[float]:
    """The waits the client's retries ask for, recorded instead of slept."""
    sleeps = []

    async def sleep(seconds):
        sleeps.append(seconds)

    llm._sleep = sleep
    return sleeps


def test_429_waits_for_retry_after(server):
    server.fail_next("429", retry_after=7)
    llm = client(server)
    sleeps = recorded_sleeps(llm)
    assert chat(llm).message["content"] == "hi"
    assert sleeps == [7.0] and server.count == 2


def test_retry_after_is_capped_and_backoff_used_without_it(server):
    server.fail_next("429", retry_after=3600)
    server.fail_next("503")
    llm = client(server, deadline=120.0)
    sleeps = recorded_sleeps(llm)
    assert chat(llm).message["content"] == "hi"
    assert sleeps[0] == 60.0 and 0 < sleeps[1] <= 0.1   # the backoff's maximum


@pytest.mark.parametrize("kind, times", [("500", 2), ("503", 1), ("malformed", 1), ("408", 1)])
def test_transient_faults_are_retried(server, kind, times):
    server.fail_next(kind, times=times)
    assert chat(client(server)).message["content"] == "hi"
    assert server.count == times + 1


def test_timeout_is_retried(server):
    arrivals, retried = itertools.count(), threading.Event()

    def policy(request):
        if next(arrivals) == 0:
            blocked_until(retried)   # answers only once the client gave up on it and asked again
            return "too late"
        retried.set()
        return "hi"

    server.policy = policy
    assert chat(client(server, timeout=1.0)).message["content"] == "hi"
    assert server.count == 2


def test_a_dripping_answer_is_cut_off_at_the_timeout_and_retried(server):
    # A byte every 0.05 s: no single read waits long, but the body would take seconds to arrive.
    server.fail_next("drip", interval=0.05)
    llm = client(server, timeout=0.5)
    assert chat(llm).message["content"] == "hi"
    assert server.count == 2 and (llm.usage.calls, llm.usage.requests) == (1, 2)


def test_a_hung_call_gives_up_at_its_deadline(server):
    release = threading.Event()
    server.policy = lambda request: blocked_until(release) or "too late"
    llm = client(server, timeout=30.0, deadline=0.3, max_attempts=10)
    try:
        with pytest.raises(LLMError, match=r"gave up after 1 attempts at the call's deadline \(0.3 s\).*timed out"):
            chat(llm)
    finally:
        release.set()
    assert llm.usage.requests == 1


def test_no_retry_whose_backoff_would_pass_the_deadline(server):
    server.fail_next("500", times=10)
    llm = client(server, deadline=25.0, backoff=(10.0, 10.0), max_attempts=10)
    sleeps = recorded_sleeps(llm)
    with pytest.raises(LLMError, match=r"gave up after 3 attempts at the call's deadline \(25 s\).*HTTP 500"):
        chat(llm)
    assert sleeps == [10.0, 10.0] and server.count == 3


def test_persistent_500_gives_up_after_max_attempts(server):
    server.fail_next("500", times=10)
    with pytest.raises(LLMError, match="gave up after 3 attempts.*HTTP 500"):
        chat(client(server, max_attempts=3))
    assert server.count == 3


@pytest.mark.parametrize("status", ["400", "401", "403", "404"])
def test_client_errors_are_not_retried(server, status):
    server.fail_next(status, message="the server says no")
    with pytest.raises(LLMError, match=f"not retried.*HTTP {status}: the server says no"):
        chat(client(server))
    assert server.count == 1


# --- an endpoint that cannot be reached ---------------------------------------------------------------

REFUSED = r"ConnectionRefusedError: \[Errno \d+\] Connect call failed \('127\.0\.0\.1', \d+\)"


def unreachable_client(port: int, **kw) -> LLMClient:
    options = {"role": "user", "cache": False, "timeout": 5.0, "max_attempts": 4, "backoff": (0.01, 0.1), **kw}
    return LLMClient(ModelConfig("openai", "gpt-4o-mini", f"http://127.0.0.1:{port}/v1"), **options)


def test_once_a_call_could_not_connect_the_next_ones_try_once_until_one_gets_through(server):
    port = closed_port()
    llm = unreachable_client(port)
    sleeps = recorded_sleeps(llm)
    with pytest.raises(LLMError, match=rf"^model 'gpt-4o-mini' \(role user\) at http://127\.0\.0\.1:{port}/v1: "
                                       rf"gave up after 4 attempts; last error: connection error: {REFUSED}$"):
        chat(llm)
    assert len(sleeps) == 3 and llm.unreachable
    with pytest.raises(LLMError, match=r"not retried: its endpoint could not be reached on an earlier call either; "
                                       rf"last error: connection error: {REFUSED}$"):
        chat(llm)
    assert len(sleeps) == 3 and (llm.usage.calls, llm.usage.requests) == (2, 5)
    # an endpoint that answers again: the first call that gets through clears it
    back = client(server)
    back.unreachable = True
    assert chat(back).message["content"] == "hi" and not back.unreachable and server.count == 1


def test_a_reset_connection_is_a_connection_failure_and_an_http_error_is_not(server):
    with resetting() as broken:
        llm = unreachable_client(broken.port, max_attempts=2)
        with pytest.raises(LLMError, match="gave up after 2 attempts; last error: connection error: "):
            chat(llm)
    assert broken.accepted == 2 and llm.unreachable
    server.fail_next("500", times=2)
    answering = client(server, max_attempts=2)
    with pytest.raises(LLMError, match="HTTP 500"):
        chat(answering)
    assert not answering.unreachable


def test_the_probe_of_a_model_endpoint_says_why_it_does_not_answer(monkeypatch):
    port = closed_port()
    assert re.fullmatch(rf"cannot connect \({REFUSED}\)",
                        asyncio.run(probe(ModelConfig("openai", "m", f"http://127.0.0.1:{port}/v1"), 5)))
    with FakeOpenAI(key="sk-test-the-right-one") as fake:
        assert asyncio.run(probe(ModelConfig("openai", "m", fake.base_url), 5)) == \
            "refused the key in OPENAI_API_KEY (HTTP 401: Incorrect API key provided.)"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-the-right-one")
        assert asyncio.run(probe(ModelConfig("openai", "m", fake.base_url), 5)) is None
        assert fake.gets == ["/v1/models", "/v1/models"] and fake.count == 0   # no completion asked for
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    with FakeOpenAI(local=True) as local:   # a server of one's own answers its list of models too
        assert asyncio.run(probe(ModelConfig("openai", "m", local.base_url), 5)) is None
        assert asyncio.run(probe(ModelConfig("azure", "dep", local.azure_endpoint, "2024-10-21"), 5)) is None
        assert local.gets == ["/v1/models", "/openai/models?api-version=2024-10-21"]
    with silent() as port:
        assert asyncio.run(probe(ModelConfig("openai", "m", f"http://127.0.0.1:{port}/v1"), 0.2)) == \
            "no answer within 0.2 s"


def test_a_reply_that_stays_empty_is_an_llm_error(server):
    server.fail_next("empty", times=4)
    with pytest.raises(ReplyError, match=r"^the model's reply was unusable after 3 attempts: an empty reply \(no "
                                         r"content, no tool calls\)$"):
        chat(client(server))
    assert server.count == 3


def test_an_empty_reply_is_asked_again_with_what_was_wrong_and_a_warmer_temperature_never_as_it_was(server):
    server.policy = lambda request: "hi"
    server.fail_next("empty")
    assert chat(client(server)).message["content"] == "hi"
    first, second = server.requests
    assert first["temperature"] == 0.0 and second["temperature"] == 0.7
    assert second["messages"] == [*HI, {"role": "user", "content": "(Your last reply could not be used: an empty reply "
                                                                   "(no content, no tool calls). Answer again.)"}]
    server.fail_next("empty")   # a temperature above RETRY_TEMPERATURE is kept, one left out stays out
    chat(client(server), temperature=0.9)
    server.fail_next("empty")
    chat(client(server), temperature=None)
    assert [request.get("temperature") for request in server.requests[2:]] == [0.9, 0.9, None, None]


def test_a_whitespace_reply_is_empty(server):
    server.policy = lambda request: "hi" if len(request["messages"]) > 1 else " \n "
    assert chat(client(server)).message["content"] == "hi" and server.count == 2


# --- usage and cost ----------------------------------------------------------------------------------

def test_usage_and_cost_accumulate_for_a_priced_model(server):
    llm = client(server, model="gpt-4o-mini")
    first, second = chat(llm), chat(llm, [{"role": "user", "content": "hello again"}])
    usage = llm.usage.to_dict()
    assert usage["calls"] == 2 and usage["cached_calls"] == 0
    assert usage["prompt_tokens"] == first.prompt_tokens + second.prompt_tokens
    assert usage["completion_tokens"] == first.completion_tokens + second.completion_tokens
    expected = (usage["prompt_tokens"] * 0.15 + usage["completion_tokens"] * 0.60) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected) and usage["cost_usd"] > 0
    assert usage["cost_known"] is True


def test_unknown_model_counts_tokens_but_its_cost_is_unknown(server):
    llm = client(server, model="my-local-llama")
    result = chat(llm)
    usage = llm.usage.to_dict()
    assert result.cost_usd is None and result.prompt_tokens > 0
    assert usage["prompt_tokens"] > 0 and usage["cost_usd"] is None and usage["cost_known"] is False
    assert format_cost(usage["cost_usd"]) == "unknown" and format_cost(0.0) == "$0.0000"


def test_an_unknown_price_is_refused_under_a_budget(server):
    with pytest.raises(ConfigError, match="'my-local-llama'.*no known price.*LOBEVAL_PRICES"):
        client(server, model="my-local-llama", budget=Budget(1.0))
    assert server.count == 0


def test_requests_count_failed_attempts_calls_count_answers(server):
    server.fail_next("500")
    llm = client(server)
    result = chat(llm)
    assert (llm.usage.calls, llm.usage.requests, result.requests) == (1, 2, 2)


def test_tokens_of_failed_attempts_are_counted_and_charged(server):
    server.fail_next("empty")   # a 200 with an empty reply: the server reported (and billed) its tokens
    budget = Budget(1.0)
    llm = client(server, budget=budget)
    result = chat(llm)
    billed = server.bill()
    assert billed["requests"] == result.requests == 2
    assert llm.usage.prompt_tokens == result.prompt_tokens == billed["prompt_tokens"]
    assert llm.usage.completion_tokens == result.completion_tokens == billed["completion_tokens"]
    assert llm.usage.cost_usd == result.cost_usd == pytest.approx(budget.spent_usd)
    assert result.cost_usd == pytest.approx((billed["prompt_tokens"] * 0.15 + billed["completion_tokens"] * 0.6) / 1e6)


def test_a_call_that_failed_still_counts_what_it_used_and_says_so_on_its_error(server):
    server.fail_next("empty", times=3)
    server.fail_next("500", times=4)   # then the endpoint gives up
    budget = Budget(1.0)
    llm = client(server, budget=budget)
    with pytest.raises(ReplyError, match="unusable after 3 attempts") as caught:
        chat(llm)
    with pytest.raises(LLMError, match="gave up after 4 attempts") as gave_up:
        chat(llm)
    usage, billed = llm.usage, server.bill()
    assert (usage.calls, usage.requests, usage.prompt_tokens) == (2, 7, billed["prompt_tokens"])
    assert caught.value.usage.requests == 3 and caught.value.usage.prompt_tokens == billed["prompt_tokens"]
    assert (gave_up.value.usage.requests, gave_up.value.usage.prompt_tokens) == (4, 0)   # an HTTP 500 bills nothing
    assert usage.cost_usd == pytest.approx(budget.spent_usd) and usage.cost_usd > 0 and budget.reserved_usd == 0


def test_price_file_overrides(server, monkeypatch, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-local-llama": {"input": 1000.0, "output": 2000.0}}))
    monkeypatch.setenv("LOBEVAL_PRICES", str(prices))
    llm = client(server, model="my-local-llama")
    result = chat(llm)
    assert result.cost_usd == pytest.approx((result.prompt_tokens * 1000 + result.completion_tokens * 2000) / 1e6)
    assert llm.usage.cost_known is True


def test_bad_price_file_is_a_config_error(server, monkeypatch, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"in": 1}}))
    monkeypatch.setenv("LOBEVAL_PRICES", str(prices))
    with pytest.raises(ConfigError, match="LOBEVAL_PRICES"):
        client(server)


def test_usages_add_up_and_unknown_plus_known_is_unknown():
    a, b = Usage(), Usage()
    a.add(prompt_tokens=10, completion_tokens=5, cost_usd=0.5, requests=2)
    b.add(prompt_tokens=100, completion_tokens=100, cost_usd=1.0, cached=True)   # cached calls cost nothing
    assert (a + b).to_dict() == {"calls": 2, "cached_calls": 1, "requests": 2, "prompt_tokens": 10,
                                 "completion_tokens": 5, "cost_usd": 0.5, "cost_known": True, "cached_prompt_tokens": 0,
                                 "estimated_tokens": 0}
    b.add(prompt_tokens=1, completion_tokens=1, cost_usd=None, requests=1)
    total = a + b
    assert total.to_dict() == {"calls": 3, "cached_calls": 1, "requests": 3, "prompt_tokens": 11,
                               "completion_tokens": 6, "cost_usd": None, "cost_known": False,
                               "cached_prompt_tokens": 0, "estimated_tokens": 0}
    assert Usage(**json.loads(json.dumps(total.to_dict()))) == total and (b + a).cost_usd is None


def test_usage_records_written_before_requests_and_unknown_costs_still_read():
    assert Usage(**{"calls": 2, "cached_calls": 0, "prompt_tokens": 5, "completion_tokens": 1, "cost_usd": 0.0,
                    "cost_known": False}) == Usage(calls=2, prompt_tokens=5, completion_tokens=1, cost_usd=None)


# --- cache -------------------------------------------------------------------------------------------

def test_identical_call_is_served_from_the_cache(server):
    llm = client(server, cache=True)
    first, second = chat(llm), chat(llm)
    assert server.count == 1
    assert second.cached and second.cost_usd == 0.0 and second.message == first.message
    assert llm.usage.calls == 2 and llm.usage.cached_calls == 1
    assert llm.usage.cost_usd == pytest.approx(first.cost_usd)


def test_cache_persists_across_clients(server):
    chat(client(server, cache=True))
    assert chat(client(server, cache=True)).cached
    assert server.count == 1


@pytest.mark.parametrize("change", [{"temperature": 0.5}, {"tools": TOOLS}, {"max_tokens": 10}])
def test_any_changed_parameter_misses_the_cache(server, change):
    llm = client(server, cache=True)
    chat(llm)
    assert not chat(llm, **change).cached
    assert server.count == 2


def test_another_model_misses_the_cache(server):
    chat(client(server, cache=True))
    assert not chat(client(server, model="gpt-4.1", cache=True)).cached


def test_failed_calls_are_not_cached(server):
    llm = client(server, cache=True, max_attempts=2)
    server.fail_next("empty", times=3)
    with pytest.raises(LLMError):
        chat(llm)
    assert chat(llm).message["content"] == "hi" and server.count == 4


def test_without_cache_every_call_is_sent(server):
    llm = client(server, cache=False)
    chat(llm), chat(llm)
    assert server.count == 2


# --- budget ------------------------------------------------------------------------------------------

def spent(budget: Budget) -> Budget:
    budget.charge(budget.limit_usd, role="target")
    return budget


def test_a_spent_budget_stops_new_calls_before_sending(server):
    budget = spent(Budget(1.0))
    judge, user = client(server, budget=budget), client(server, role="user", budget=budget)
    for llm in (judge, user):
        with pytest.raises(BudgetExceeded, match=r"budget of \$1.00 reached \(\$1.0000 spent"):
            chat(llm, [{"role": "user", "content": "more"}])
    assert server.count == 0 and budget.reserved_usd == 0


def test_budget_still_serves_cached_answers(server):
    budget = Budget(1.0)
    llm = client(server, cache=True, budget=budget)
    chat(llm)
    spent(budget)
    assert chat(llm).cached
    with pytest.raises(BudgetExceeded):
        chat(llm, [{"role": "user", "content": "new"}])


def test_a_request_is_charged_its_real_cost_in_place_of_its_reservation(server):
    budget = Budget(1.0)
    llm = client(server, budget=budget, role="user")
    result = chat(llm)
    assert budget.spent_usd == pytest.approx(result.cost_usd) and budget.reserved_usd == 0


def test_the_budget_is_reserved_after_the_slot_so_queued_calls_cannot_all_pass(server):
    release = threading.Event()
    server.policy = lambda request: blocked_until(release) or "ok"
    worst = worst_case_usd({"messages": HI, "temperature": 0.0, "max_tokens": 100}, PRICES["gpt-4o-mini"])
    budget = Budget(2.5 * worst)   # two calls' worst case, not three
    llm = client(server, budget=budget, concurrency=4, timeout=30.0)

    async def ten():
        calls = [asyncio.create_task(llm.chat(HI, max_tokens=100)) for _ in range(10)]
        outcomes = []
        for finished in asyncio.as_completed(calls):
            try:
                outcomes.append(await finished)
            except BudgetExceeded as exc:
                outcomes.append(exc)
            if len(outcomes) == 8:   # the two sent are held by the server until now
                release.set()
        return outcomes

    try:
        outcomes = asyncio.run(ten())
    finally:
        release.set()
    assert all(isinstance(outcome, BudgetExceeded) for outcome in outcomes[:8])
    assert [outcome.message["content"] for outcome in outcomes[8:]] == ["ok", "ok"]
    assert server.count == 2 and (llm.usage.calls, llm.usage.requests) == (10, 2)
    assert budget.spent_usd == pytest.approx(llm.usage.cost_usd) and budget.reserved_usd == 0


def test_worst_case_is_the_request_size_and_its_completion_cap():
    price = {"input": 1.0, "output": 2.0}
    request = {"messages": [{"role": "user", "content": "x" * 396}], "max_tokens": 50}
    assert worst_case_usd(request, price) == pytest.approx((len(json.dumps(request)) / 4 * 1.0 + 50 * 2.0) / 1e6)
    embeddings, free_output = {"input": ["a"]}, {"input": 1.0, "output": 0.0}
    assert worst_case_usd(embeddings, free_output) == pytest.approx(len(json.dumps(embeddings)) / 4 / 1e6)
    assert worst_case_usd({}, price) == pytest.approx((2 / 4 + 4096 * 2.0) / 1e6)


def test_budget_from_env(tmp_path):
    assert Budget.from_env({}) is None
    assert Budget.from_env({"LOBEVAL_BUDGET_USD": "2.5"}).limit_usd == 2.5
    assert Budget.from_env({"LOBEVAL_BUDGET_USD": "2.5"}).ledger is None
    ledger = tmp_path / "budget.json"
    assert Budget.from_env({"LOBEVAL_BUDGET_USD": "2.5", "LOBEVAL_BUDGET_LEDGER": str(ledger)}).ledger == ledger
    for value in ("lots", "-1", "nan"):
        with pytest.raises(ConfigError, match="LOBEVAL_BUDGET_USD"):
            Budget.from_env({"LOBEVAL_BUDGET_USD": value})


def test_two_budgets_on_one_ledger_keep_one_budget(tmp_path):
    ledger = tmp_path / "budget.json"
    first, second = Budget(1.0, ledger), Budget(1.0, ledger)   # as two processes of a run would
    first.reserve(0.5)
    assert second.reserved_usd == 0.5
    with pytest.raises(BudgetExceeded, match=r"\$0.5000 reserved"):
        second.reserve(0.75)
    first.settle(0.5, 0.25, role="judge")
    second.charge(0.5, role="target")
    second.charge(None, role="target")   # a target that reported no cost: counted, not charged
    assert first.spent_usd == 0.75 and first.reserved_usd == 0
    with pytest.raises(BudgetExceeded):
        first.reserve(0.5)
    assert json.loads(ledger.read_text()) == {"schema_version": 1, "limit_usd": 1.0, "spent_usd": 0.75,
                                              "reserved_usd": 0.0, "reservations": {},
                                              "calls": {"judge": 1, "target": 2}}


def test_clients_given_budgets_from_the_environment_share_its_ledger(server, tmp_path, monkeypatch):
    ledger = tmp_path / "budget.json"
    monkeypatch.setenv("LOBEVAL_BUDGET_USD", "1")
    monkeypatch.setenv("LOBEVAL_BUDGET_LEDGER", str(ledger))
    first = chat(client(server, budget=Budget.from_env()))
    Budget.from_env().charge(0.5, role="target")
    second = chat(client(server, role="user", budget=Budget.from_env()), [{"role": "user", "content": "again"}])
    data = json.loads(ledger.read_text())
    assert data["calls"] == {"judge": 1, "target": 1, "user": 1} and data["reserved_usd"] == 0
    assert data["spent_usd"] == pytest.approx(0.5 + first.cost_usd + second.cost_usd)


HOLDER = """
import sys
from lobeval.models.llm import Budget
budget = Budget.from_env()
budget.reserve(0.5)
print("reserved", flush=True)
if sys.stdin.readline().strip() == "settle":
    budget.settle(0.5, 0.25, role="judge")
"""

CHARGER = """
import sys
from lobeval.models.llm import Budget
budget = Budget.from_env()
for _ in range(200):
    budget.charge(0.001, role=sys.argv[1])
"""


def budget_process(ledger: Path, script: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "LOBEVAL_BUDGET_USD": "1", "LOBEVAL_BUDGET_LEDGER": str(ledger)}
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


@pytest.mark.slow
@pytest.mark.parametrize("then", ["settle", "end"])
def test_a_reservation_in_another_process_holds_until_settled_or_that_process_ends(tmp_path, then):
    ledger = tmp_path / "budget.json"
    holder = budget_process(ledger, HOLDER)
    try:
        assert holder.stdout.readline() == "reserved\n"
        mine = Budget(1.0, ledger)
        with pytest.raises(BudgetExceeded, match=r"\$0.5000 reserved"):
            mine.reserve(0.75)
        holder.communicate(f"{then}\n", timeout=60)
    finally:
        holder.kill()
    assert holder.returncode == 0 and mine.reserved_usd == 0
    assert mine.spent_usd == (0.25 if then == "settle" else 0.0)
    mine.reserve(0.75)


@pytest.mark.slow
def test_processes_charging_at_once_lose_no_charge(tmp_path):
    ledger = tmp_path / "budget.json"
    chargers = [budget_process(ledger, CHARGER, role) for role in ("user", "target")]
    for charger in chargers:
        charger.communicate(timeout=120)
        assert charger.returncode == 0
    data = json.loads(ledger.read_text())
    assert data["calls"] == {"user": 200, "target": 200} and data["spent_usd"] == pytest.approx(0.4)


@pytest.mark.parametrize("content, field", [
    ("{not json", "not JSON"),
    ("[]", "expected a JSON object"),
    ('{"schema_version": 2}', "field 'schema_version'"),
    ('{"schema_version": 1, "limit_usd": 1, "spent_usd": "lots", "reserved_usd": 0, "reservations": {}, '
     '"calls": {}}', "field 'spent_usd'"),
    ('{"schema_version": 1, "limit_usd": 1, "spent_usd": 0, "reserved_usd": 0, "reservations": {"x": 1}, '
     '"calls": {}}', "field 'reservations'"),
    ('{"schema_version": 1, "limit_usd": 1, "spent_usd": 0, "reserved_usd": 0, "reservations": {}, '
     '"calls": {"judge": -1}}', "field 'calls'"),
])
def test_a_damaged_ledger_is_a_record_error_naming_file_and_field(tmp_path, content, field):
    ledger = tmp_path / "budget.json"
    ledger.write_text(content)
    with pytest.raises(RecordError, match=f"budget.json: budget ledger: {field}"):
        Budget(1.0, ledger).reserve(0.1)


# --- validated answers: ask_json and ask --------------------------------------------------------------

def parse_score(text: str) -> int:
    score = parse_json_object(text).get("score")
    if not isinstance(score, int):
        raise ValueError(f"no whole score in {text!r}")
    return score


def ask(llm: LLMClient, **kw):
    return asyncio.run(llm.ask_json(HI, parse_score, **kw))


def test_ask_json_a_valid_reply_first_time(server):
    server.policy = lambda request: json_reply({"score": 4})
    llm, mine = client(server), Usage()
    assert ask(llm, usage=(mine,)) == 4
    [request] = server.requests
    assert (request["response_format"], request["temperature"], request["seed"]) == ({"type": "json_object"}, 0.0, 0)
    assert mine == llm.usage and mine.calls == 1 and mine.prompt_tokens > 0 and mine.cost_usd > 0


def test_ask_json_an_unusable_reply_is_asked_again_with_what_was_wrong_another_seed_and_temperature(server):
    server.policy = lambda request: json_reply({"score": 4}) if request["seed"] == 1 else text("four, I think")
    llm = client(server)
    assert ask(llm) == 4
    assert [request["seed"] for request in server.requests] == [0, 1] and llm.usage.calls == 1
    assert [request["temperature"] for request in server.requests] == [0.0, 0.7]
    assert server.requests[1]["messages"] == [*HI, {"role": "assistant", "content": "four, I think"}, {
        "role": "user", "content": "(Your last reply could not be used: no JSON object in the model's reply: "
                                   "'four, I think'. Answer again.)"}]


def test_ask_json_unusable_twice_is_a_reply_error_with_the_raw_text_and_both_attempts_counted(server):
    server.policy = lambda request: text("no idea")
    one = chat(client(server))   # what a single attempt uses
    llm, mine = client(server), Usage()
    with pytest.raises(ReplyError, match=r"unusable after 2 attempts: no JSON object") as caught:
        ask(llm, usage=(mine,))
    assert (caught.value.raw, caught.value.attempts) == ("no idea", 2) and isinstance(caught.value, LLMError)
    assert mine == llm.usage == caught.value.usage and (mine.calls, mine.cached_calls, mine.requests) == (1, 0, 2)
    billed = server.bill()
    assert (mine.prompt_tokens, mine.completion_tokens) == (billed["prompt_tokens"] - one.prompt_tokens,
                                                            billed["completion_tokens"] - one.completion_tokens)
    assert mine.completion_tokens == 2 * one.completion_tokens and mine.prompt_tokens > 2 * one.prompt_tokens


def test_ask_json_an_endpoint_that_gives_up_is_an_llm_error_not_a_reply_error(server):
    server.fail_next("400", message="bad request")
    with pytest.raises(LLMError, match="HTTP 400: bad request") as caught:
        ask(client(server))
    assert not isinstance(caught.value, ReplyError) and server.count == 1


def test_ask_json_unusable_replies_are_not_cached_so_a_rerun_asks_again(server):
    llm = client(server, cache=True)
    server.policy = lambda request: text("not yet")
    with pytest.raises(ReplyError):
        ask(llm)
    server.policy = lambda request: json_reply({"score": 4}) if request["seed"] == 1 else text("hmm")
    assert ask(llm) == 4
    assert ask(llm) == 4
    # the rerun sends seed 0 again (its reply was unusable) and takes seed 1 from the cache
    assert [request["seed"] for request in server.requests] == [0, 1, 0, 1, 0]
    assert llm.usage.cached_calls == 1


def test_ask_json_a_valid_reply_is_served_from_the_cache(server):
    server.policy = lambda request: json_reply({"score": 4})
    ask(client(server, cache=True))
    llm, mine = client(server, cache=True), Usage()
    assert ask(llm, usage=(mine,)) == 4
    assert server.count == 1 and (mine.calls, mine.cached_calls, mine.cost_usd) == (1, 1, 0.0)


def test_ask_json_is_stopped_by_the_budget(server):
    budget = Budget(1.0)
    server.policy = lambda request: json_reply({"score": 4})
    llm = client(server, budget=budget)
    ask(llm)
    assert budget.spent_usd == pytest.approx(llm.usage.cost_usd)
    spent(budget)
    with pytest.raises(BudgetExceeded):
        asyncio.run(llm.ask_json([{"role": "user", "content": "again"}], parse_score))
    assert server.count == 1


def test_ask_with_another_answerer_prices_its_tokens_and_retries_what_it_could_not_answer(server):
    """The path the azure evaluators take: their answer comes from elsewhere, the rest is the same."""
    budget = Budget(1.0)
    llm = client(server, cache=True, budget=budget)
    asked = []

    async def answer(attempt):
        asked.append(attempt)
        if attempt == 0:
            raise ValueError("the evaluator raised")
        return {"content": '{"score": 2}', "prompt_tokens": 1000, "completion_tokens": 100}

    assert asyncio.run(llm.ask({"kind": "other"}, answer, parse_score)) == 2
    assert (llm.usage.calls, llm.usage.requests, llm.usage.prompt_tokens, llm.usage.completion_tokens) == \
        (1, 2, 1000, 100)
    assert llm.usage.cost_usd == pytest.approx((1000 * 0.15 + 100 * 0.60) / 1e6)
    assert asyncio.run(llm.ask({"kind": "other"}, answer, parse_score)) == 2
    assert asked == [0, 1, 0] and llm.usage.cached_calls == 1
    assert budget.spent_usd == pytest.approx(llm.usage.cost_usd) and budget.reserved_usd == 0
    with pytest.raises(ReplyError, match="unusable after 1 attempts: the evaluator raised") as caught:
        asyncio.run(llm.ask({"kind": "another"}, answer, parse_score, attempts=1))
    assert caught.value.raw is None and server.count == 0


# --- embeddings --------------------------------------------------------------------------------------

def test_embeddings_are_ordered_similar_and_cached(server):
    llm = client(server, model="text-embedding-3-small", cache=True)
    texts = ["reset my account password", "please reset the password of my account", "weather in Paris"]
    a, b, c = asyncio.run(llm.embed(texts))
    dot = lambda x, y: sum(p * q for p, q in zip(x, y))
    assert dot(a, b) > dot(a, c)
    assert asyncio.run(llm.embed(texts)) == [a, b, c]
    assert len(server.requests) == 1 and llm.usage.cached_calls == 1 and llm.usage.cost_usd > 0


def test_missing_embeddings_are_not_asked_again_as_they_were(server):
    server.fail_next("empty")
    with pytest.raises(ReplyError, match="unusable after 1 attempts: 0 embeddings for 2 texts"):
        asyncio.run(client(server).embed(["a", "b"]))
    assert len(server.requests) == 1


# --- key hygiene -------------------------------------------------------------------------------------

def test_the_key_never_leaks(server, tmp_path):
    llm = client(server, cache=True)
    chat(llm)
    server.fail_next("401", message=f"Incorrect API key provided: {SECRET}")
    with pytest.raises(LLMError) as caught:
        chat(llm, [{"role": "user", "content": "again"}])
    texts = [str(caught.value), repr(caught.value), "".join(traceback.format_exception(caught.value))]
    with pytest.raises(ConfigError) as config_error:
        resolve_model("judge", {"LOBEVAL_MODEL": "m", "AZURE_OPENAI_ENDPOINT": "x", "AZURE_OPENAI_API_KEY": SECRET})
    texts += [str(config_error.value), json.dumps(llm.config.describe()), json.dumps(llm.usage.to_dict())]
    assert all(SECRET not in text and "SECRET123" not in text for text in texts)
    with diskcache.Cache(str(tmp_path / "cache")) as cache:
        assert all(SECRET not in str(key) for key in cache.iterkeys())
    assert all(SECRET.encode() not in path.read_bytes() for path in Path(tmp_path / "cache").rglob("*") if path.is_file())


def test_an_azure_key_is_scrubbed_from_server_messages(server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-SECRET-key-42")
    llm = LLMClient(ModelConfig("azure", "dep", server.azure_endpoint, "2024-10-21"), role="user", cache=False)
    server.fail_next("401", message="key azure-SECRET-key-42 is not valid")
    with pytest.raises(LLMError, match="HTTP 401") as caught:
        chat(llm)
    assert "azure-SECRET-key-42" not in str(caught.value)


# --- parse_json_object -------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    '{"score": 4, "reason": "ok"}',
    '```json\n{"score": 4, "reason": "ok"}\n```',
    'Here is my verdict: {"score": 4, "reason": "ok"} Hope that helps {not json}.',
    'Using {braces} first, then {"score": 4, "reason": "ok"}',
])
def test_parse_json_object(reply):
    assert parse_json_object(reply) == {"score": 4, "reason": "ok"}


@pytest.mark.parametrize("reply", ["no json here", "[1, 2]", '{"unterminated": 1'])
def test_parse_json_object_rejects(reply):
    with pytest.raises(ValueError):
        parse_json_object(reply)


def test_prompt_tokens_read_from_the_providers_cache_are_priced_at_the_cached_input_price(tmp_path, monkeypatch):
    price = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
    assert cost_of(1000, 100, price, cached_tokens=800) == pytest.approx((200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6)
    assert cost_of(1000, 100, {"input": 2.0, "output": 8.0}, cached_tokens=800) == pytest.approx(
        (1000 * 2.0 + 100 * 8.0) / 1e6)   # no cached price: the input price
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"cache-model": price}))
    monkeypatch.setenv("LOBEVAL_PRICES", str(prices))
    assert load_prices()["cache-model"] == price
    instructions = [{"role": "system", "content": "Judge the reply. " * 400}]   # a prefix long enough to cache
    with FakeOpenAI(prompt_cache=True) as fake:
        llm = LLMClient(ModelConfig("openai", "cache-model", fake.base_url), role="judge", cache=False,
                        timeout=5.0, max_attempts=1)
        first = chat(llm, [*instructions, *HI])
        again = chat(llm, [*instructions, *HI, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "and?"}])
        reported = [answer["usage"] for answer in fake.answers]
    assert reported[0]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = reported[1]["prompt_tokens_details"]["cached_tokens"]
    leading = prompt_tokens([*instructions, *HI]) - 3   # the first request's messages lead the second's
    assert cached == leading - leading % 128 > 1024   # in steps of 128, as OpenAI caches
    assert llm.usage.cached_prompt_tokens == cached
    expected = sum(cost_of(u["prompt_tokens"], u["completion_tokens"], price, u["prompt_tokens_details"]["cached_tokens"])
                   for u in reported)
    assert llm.usage.cost_usd == pytest.approx(expected)
    assert first.cost_usd + again.cost_usd == pytest.approx(expected)
