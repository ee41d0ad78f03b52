"""Benchmarks that print figures (never tests that assert a time): `lobeval bench ...`."""
from __future__ import annotations

import asyncio
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from lobeval.testing import FakeOpenAI, tool_calls

BENCH_TICKET = {"title": "Printer on floor 3 prints blank pages", "description": "Every job comes out blank.",
                "department_code": "IT", "priority": "Medium", "workflow_type": "Standard",
                "expected_outcome": "Printing works again.", "customer_visible": False}


def scripted_models(request: dict[str, Any]) -> Any:
    """The fake endpoint's script for both roles: the bot's model (it sends tools) and the user's."""
    messages = request["messages"]
    last = messages[-1]
    if request.get("tools"):
        if last["role"] == "tool":
            return "Done: your ticket is created. Anything else?"
        if sum(m["role"] == "user" for m in messages) >= 2:
            return tool_calls([("create_support_ticket", BENCH_TICKET)])
        return "Sure. What is the title of the ticket?"
    if "Done" in (last.get("content") or ""):
        return "Thanks, the session is finished."
    if "title" in (last.get("content") or ""):
        return f"The title is: {BENCH_TICKET['title']}"
    return "I need a new support ticket."


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _simulate_bench(conversations: int, concurrency: int, latency: float) -> dict[str, float]:
    from lobeval.generate import generate
    from lobeval.roles import make_user
    from lobeval.simulate import simulate_async
    from lobeval.targets import load_target

    suite = Path(__file__).resolve().parents[2] / "scenarios" / "support_tickets"
    with FakeOpenAI(scripted_models, latency=latency) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": server.base_url,
                           "LOBEVAL_MODEL": "bench-model", "LOBEVAL_CACHE_DIR": str(Path(tmp) / "cache")})
        dataset = generate(suite, Path(tmp) / "dataset.jsonl", cases_per_scenario=conversations).path
        # With a model configured the sample bot runs its llm policy, so both roles hit the endpoint.
        target = load_target("lobeval.samples.support_tickets:SupportTicketBot")
        started = time.perf_counter()
        result = await simulate_async(dataset, Path(tmp) / "conversations.jsonl", target=target,
                                      user=make_user("llm", concurrency=concurrency), concurrency=concurrency,
                                      scenarios=["create_ticket"], progress=False)
        wall = time.perf_counter() - started
        await target.aclose()
        calls = server.count
    ideal = calls * latency / concurrency
    return {"conversations": result.written, "endings": dict(result.terminations), "model calls": calls,
            "wall s": wall, "ideal s": ideal, "ratio": wall / ideal, "peak RSS MB": _peak_rss_mb()}


def bench_simulate(conversations: int = 200, concurrency: int = 32, latency: float = 0.1) -> dict[str, Any]:
    return asyncio.run(_simulate_bench(conversations, concurrency, latency))
