"""The fake OpenAI server, driven by the real openai SDK over HTTP."""
from __future__ import annotations

import asyncio
import json
import math

import openai
import pytest

from lobeval.models.testing import FakeOpenAI, json_reply, text, tool_calls
from lobeval.core.tokens import count

USER = [{"role": "user", "content": "Where is ticket TKT-1?"}]


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def sdk(server: FakeOpenAI, **kw) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-fake", base_url=server.base_url, max_retries=0, **kw)


def chat(server: FakeOpenAI, **kw):
    return sdk(server).chat.completions.create(model="fake-model", messages=USER, **kw)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def test_default_policy_echoes_the_last_user_message(server):
    reply = chat(server)
    assert reply.choices[0].message.content == "Where is ticket TKT-1?"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "fake-model"
    # as OpenAI counts: 3 per message, its role and content, 3 for the reply's priming
    assert reply.usage.prompt_tokens == 3 + count("user") + count(USER[0]["content"]) + 3
    assert reply.usage.completion_tokens == count("Where is ticket TKT-1?")
    assert server.count == 1 and server.requests[0]["messages"] == USER


def test_the_tool_definitions_are_billed_as_prompt_tokens_like_a_provider_does(server):
    tools = [{"type": "function", "function": {"name": "get_ticket", "parameters": {"type": "object"}}}]
    assert chat(server, tools=tools).usage.prompt_tokens == chat(server).usage.prompt_tokens + count(json.dumps(tools))


def test_text_reply_from_a_policy_set_as_attribute(server):
    server.policy = lambda request: text(f"{len(request['messages'])} message(s)")
    assert chat(server).choices[0].message.content == "1 message(s)"


def test_tool_call_round_trip(server):
    def policy(request):
        last = request["messages"][-1]
        if last["role"] == "tool":
            return f"Status: {json.loads(last['content'])['status']}"
        return tool_calls([("get_ticket", {"id": "TKT-1"})])

    server.policy = policy
    tools = [{"type": "function", "function": {"name": "get_ticket", "parameters": {"type": "object"}}}]
    first = chat(server, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_ticket", {"id": "TKT-1"})

    messages = [*USER, first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"status": "open"})}]
    second = sdk(server).chat.completions.create(model="fake-model", messages=messages, tools=tools)
    assert second.choices[0].message.content == "Status: open"
    assert server.requests[0]["tools"] == tools
    assert server.requests[1]["messages"][1]["tool_calls"][0]["id"] == call.id


def test_json_mode_reply(server):
    server.policy = lambda request: json_reply({"format": request["response_format"]["type"], "score": 4})
    reply = chat(server, response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content) == {"format": "json_object", "score": 4}


def test_azure_deployment_path(server):
    client = openai.AzureOpenAI(azure_endpoint=server.azure_endpoint, api_key="azure-fake",
                                api_version="2024-10-21", max_retries=0)
    reply = client.chat.completions.create(model="my-deployment", messages=USER)
    assert reply.choices[0].message.content == "Where is ticket TKT-1?"
    assert reply.model == "my-deployment"   # taken from the URL path, as Azure does


def test_unknown_path_is_404(server):
    client = openai.OpenAI(api_key="sk-fake", base_url=server.azure_endpoint + "/v2", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="m", messages=USER)


@pytest.mark.parametrize("encoding", [{}, {"encoding_format": "float"}], ids=["sdk-default-base64", "float"])
def test_embeddings_put_similar_texts_closer(server, encoding):
    texts = ["reset my account password", "please reset the password of my account", "weather in Paris tomorrow"]
    response = sdk(server).embeddings.create(model="emb", input=texts, **encoding)
    vectors = [item.embedding for item in response.data]
    assert [len(v) for v in vectors] == [64, 64, 64]
    assert math.isclose(cosine(vectors[0], vectors[0]), 1.0, rel_tol=1e-5)
    assert cosine(vectors[0], vectors[1]) > 0.5 > cosine(vectors[0], vectors[2])
    assert response.usage.prompt_tokens > 0
    assert server.count == 0   # count is chat completions only


def test_429_carries_retry_after(server):
    server.fail_next("429", retry_after=2)
    with pytest.raises(openai.RateLimitError) as caught:
        chat(server)
    assert caught.value.response.headers["retry-after"] == "2"
    assert chat(server).choices[0].message.content   # the fault was consumed


def test_status_faults_repeat_times_then_stop(server):
    server.fail_next("500", times=2)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            chat(server)
    assert chat(server).choices[0].message.content
    assert server.count == 3


def test_status_fault_with_message(server):
    server.fail_next("401", message="bad key")
    with pytest.raises(openai.AuthenticationError, match="bad key"):
        chat(server)


def test_timeout_fault_sleeps_past_the_client_timeout(server):
    server.fail_next("timeout", seconds=1.0)
    with pytest.raises(openai.APITimeoutError):
        sdk(server, timeout=0.2).chat.completions.create(model="m", messages=USER)


def test_drip_fault_sends_the_whole_answer_a_byte_at_a_time(server):
    server.fail_next("drip", interval=0.001)
    assert chat(server).choices[0].message.content == "Where is ticket TKT-1?"
    assert chat(server).choices[0].message.content   # the fault was consumed


def test_malformed_fault_is_not_json(server):
    server.fail_next("malformed")
    with pytest.raises(ValueError):
        chat(server)


def test_empty_fault(server):
    server.fail_next("empty")
    message = chat(server).choices[0].message
    assert message.content == "" and not message.tool_calls


def test_bad_tool_args_fault(server):
    server.fail_next("bad_tool_args")
    tools = [{"type": "function", "function": {"name": "get_ticket", "parameters": {"type": "object"}}}]
    call = chat(server, tools=tools).choices[0].message.tool_calls[0]
    assert call.function.name == "get_ticket"
    with pytest.raises(ValueError):
        json.loads(call.function.arguments)


def test_unknown_fault_is_rejected(server):
    with pytest.raises(ValueError, match="malformed"):
        server.fail_next("teapot")


def test_a_failing_policy_is_a_500_with_its_message(server):
    server.policy = lambda request: 1 / 0
    with pytest.raises(openai.InternalServerError, match="ZeroDivisionError"):
        chat(server)


def test_64_concurrent_clients_with_latency(server):
    server.latency = 0.2

    async def many():
        client = openai.AsyncOpenAI(api_key="sk-fake", base_url=server.base_url, max_retries=0)
        replies = await asyncio.gather(*(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"n{i}"}]) for i in range(64)))
        return [r.choices[0].message.content for r in replies]

    assert asyncio.run(many()) == [f"n{i}" for i in range(64)]
    assert server.count == 64
