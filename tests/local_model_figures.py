"""The figures of docs/models.md, "Local models", measured against a running local server (llama-cpp-python with
SmolLM2, as that section starts it):

    LOBEVAL_LOCAL_MODEL_URL=http://127.0.0.1:8000/v1 .venv/bin/python tests/local_model_figures.py

1. speed: prompt tokens read a second (a prompt of about 1,000 tokens, one token asked) and tokens written a second
   (a short prompt, 128 tokens asked with the end-of-turn tokens barred), each the median of three requests;
2. hang-up: a request for 1,500 tokens that lobeval gives up on after 5 s, sent plain and then streamed, and how long
   the next one-token request waits for its answer: the rest of the abandoned answer, or nothing;
3. with `--tools`: the prompt target's first request with its 14 functions described (LOBEVAL_TOOLS=prompted), given
   up after 5 s while the server reads its prompt, then again once the server holds the prompt (a request for one
   token read it first) and writes on, and how long the next one-token request waits each time; then that request
   answered in full, capped at 192 tokens as docs/models.md's recipe caps the bot, and whether it reads as a call.

The server must be idle, serving one request at a time; the machine's load is printed with the figures.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

from lobeval.models.llm import LLMClient, LLMError, ModelConfig
from lobeval.targets.prompt_target import offered_tools

URL = os.environ.get("LOBEVAL_LOCAL_MODEL_URL", "http://127.0.0.1:8000/v1")
MODEL = os.environ.get("LOBEVAL_LOCAL_MODEL", "smollm2")
NO_END = {"0": -100, "1": -100, "2": -100}   # SmolLM2's <|endoftext|>, <|im_start|>, <|im_end|>: the answer runs on
WORDS = "ticket action item department priority status owner due date request support badge door printer".split()


def post(body: dict, timeout: float = 900.0) -> tuple[float, dict]:
    started = time.perf_counter()
    response = httpx.post(f"{URL}/chat/completions", json={"model": MODEL, **body}, timeout=timeout,
                          headers={"Authorization": "Bearer local"})
    response.raise_for_status()
    return time.perf_counter() - started, response.json()


def prompt_speed(seed: int) -> float:
    """Prompt tokens read a second: a prompt of unrelated words (none of it in the server's cache), one token."""
    words = random.Random(seed).choices(WORDS, k=900)
    seconds, answer = post({"messages": [{"role": "user", "content": " ".join(words)}], "max_tokens": 1})
    return answer["usage"]["prompt_tokens"] / seconds


def writing_speed(seed: int) -> float:
    """Tokens written a second, net of reading the prompt (a few dozen tokens)."""
    body = {"messages": [{"role": "user", "content": f"Count from {seed} onwards, one number a line."}],
            "max_tokens": 128, "temperature": 0, "logit_bias": NO_END}
    seconds, answer = post(body)
    return answer["usage"]["completion_tokens"] / seconds


async def abandoned(stream: str) -> tuple[str, float]:
    """Ask for 1,500 tokens, hang up after 5 s, then time a one-token request: what the server still owed."""
    os.environ.update(OPENAI_API_KEY="local", LOBEVAL_STREAM=stream)
    client = LLMClient(ModelConfig("openai", MODEL, URL), role="user", cache=False, timeout=5.0, deadline=5.0,
                       max_tokens=1500, max_attempts=1)
    try:
        await client.chat([{"role": "user", "content": "Write a very long story about a lighthouse keeper."}],
                          temperature=0, attempts=1, logit_bias=NO_END)
        outcome = "answered within 5 s"
    except LLMError as exc:
        outcome = str(exc).rsplit("last error: ", 1)[-1]
    started = time.perf_counter()
    await asyncio.to_thread(post, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
    return outcome, time.perf_counter() - started


SUITE = Path(__file__).resolve().parents[1] / "scenarios" / "support_tickets"


def bot_request() -> tuple[list[dict], list[dict]]:
    """The prompt target's first request of a conversation: its system prompt, a user's question, its functions."""
    system = json.loads((SUITE / "prompt_target.json").read_text(encoding="utf-8"))["system_prompt"]
    return ([{"role": "system", "content": system}, {"role": "user", "content": "What is the status of TKT-1042?"}],
            offered_tools(SUITE / "tools.json"))


async def prompted(seconds: float, **params) -> tuple[str, float, dict | None]:
    """The bot's request with its tools prompted, given up after `seconds`: what became of it, how long it took, and
    its message when it answered."""
    os.environ.update(OPENAI_API_KEY="local", LOBEVAL_STREAM="auto", LOBEVAL_TOOLS="prompted")
    client = LLMClient(ModelConfig("openai", MODEL, URL), role="target", cache=False, timeout=seconds,
                       deadline=seconds, max_tokens=192, max_attempts=1)
    messages, tools = bot_request()
    started = time.perf_counter()
    try:
        result = await client.chat(messages, tools=tools, temperature=0, attempts=1, **params)
        return "answered", time.perf_counter() - started, result.message
    except LLMError as exc:
        return str(exc).rsplit(": ", 1)[-1][:300], time.perf_counter() - started, None


def next_wait() -> float:
    started = time.perf_counter()
    post({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
    return time.perf_counter() - started


def tools_figures() -> None:
    outcome, _, _ = asyncio.run(prompted(5.0, max_tokens=1500, logit_bias=NO_END))
    print(f"prompted tools, given up at 5 s while reading the prompt ({outcome}); the next request waited "
          f"{next_wait():.1f} s")
    outcome, read, _ = asyncio.run(prompted(900.0, max_tokens=1))
    outcome, _, _ = asyncio.run(prompted(5.0, max_tokens=1500, logit_bias=NO_END))
    print(f"prompted tools, the prompt read first ({read:.1f} s), given up at 5 s while writing ({outcome}); the next "
          f"request waited {next_wait():.1f} s")
    outcome, took, message = asyncio.run(prompted(900.0))
    print(f"prompted tools, answered in full in {took:.1f} s: {outcome}; {json.dumps(message)[:600]}")


def main() -> None:
    print(f"server {URL}, model {MODEL}; load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    reading = statistics.median(prompt_speed(seed) for seed in range(3))
    writing = statistics.median(writing_speed(seed) for seed in range(3))
    print(f"prompt tokens read a second: {reading:.0f}; tokens written a second: {writing:.1f}")
    for stream in ("off", "on"):
        outcome, waited = asyncio.run(abandoned(stream))
        print(f"streamed {stream}: the abandoned request {outcome}; the next request waited {waited:.1f} s")
    if "--tools" in sys.argv:
        tools_figures()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
