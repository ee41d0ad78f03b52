"""Benchmarks that print figures (never tests that assert a time): `lobeval bench ...`."""
from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
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


def _serve(latency: float, pipe: Connection) -> None:
    """The fake endpoint in a process of its own, as a real endpoint would be: its CPU is not the client's."""
    with FakeOpenAI(scripted_models, latency=latency) as server:
        pipe.send(server.base_url)
        pipe.recv()
        pipe.send(server.count)


@contextlib.contextmanager
def _endpoint(latency: float) -> Iterator[tuple[str, Callable[[], int]]]:
    """Start the fake endpoint in another process; yield its base URL and a function counting its calls."""
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=_serve, args=(latency, theirs), daemon=True)
    process.start()
    theirs.close()   # so that a server that dies ends our recv() with EOFError instead of a hang
    try:
        yield ours.recv(), lambda: (ours.send("count"), ours.recv())[1]
    finally:
        process.terminate()
        process.join()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _simulate_bench(conversations: int, concurrency: int, latency: float) -> dict[str, float]:
    from lobeval.generate import generate
    from lobeval.roles import make_user
    from lobeval.simulate import simulate_async
    from lobeval.targets import load_target

    suite = Path(__file__).resolve().parents[2] / "scenarios" / "support_tickets"
    with _endpoint(latency) as (base_url, count_calls), tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": base_url,
                           "LOBEVAL_MODEL": "bench-model", "LOBEVAL_CACHE_DIR": str(Path(tmp) / "cache")})
        dataset = generate(suite, Path(tmp) / "dataset.jsonl", cases_per_scenario=conversations).path
        # With a model configured the sample bot runs its llm policy, so both roles hit the endpoint.
        target = load_target("lobeval.samples.support_tickets:SupportTicketBot")
        started, cpu = time.perf_counter(), time.process_time()
        result = await simulate_async(dataset, Path(tmp) / "conversations.jsonl", target=target,
                                      user=make_user("llm", concurrency=concurrency), concurrency=concurrency,
                                      scenarios=["create_ticket"], progress=False)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        await target.aclose()
        calls = count_calls()
    ideal = calls * latency / concurrency
    # Every bench conversation makes the same calls one after another, so they run in waves of
    # `concurrency`; no scheduler finishes before the last wave does.
    floor = math.ceil(result.written / concurrency) * calls / result.written * latency
    return {"conversations": result.written, "endings": dict(result.terminations), "model calls": calls,
            "wall s": wall, "client CPU s": cpu, "ideal s": ideal, "ratio": wall / ideal, "floor s": floor,
            "peak RSS MB": _peak_rss_mb()}


def bench_simulate(conversations: int = 200, concurrency: int = 32, latency: float = 0.1) -> dict[str, Any]:
    return asyncio.run(_simulate_bench(conversations, concurrency, latency))


def synthetic_scoring_work(conversations: int, seed: int = 0) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(conversation, case) pairs: 5 expected calls and 6 actual ones (one extra), 5 arguments each,
    of every kind the scorer compares (text, ID, number, date, boolean); some values wrong."""
    import random

    rng = random.Random(seed)
    work = []
    for n in range(conversations):
        expected, actual = [], []
        for f in range(5):
            arguments = {"title": f"Printer {n} on floor {f} prints blank pages", "ticket_id": f"TKT-{n}-{f}",
                         "hours": f + 1, "due_date": f"2026-0{f + 1}-1{f}", "visible": bool(f % 2)}
            expected.append({"functionName": f"function_{f}", "arguments": arguments})
            made = dict(arguments)
            if rng.random() < 0.3:
                made["title"] = made["title"].replace("blank", "empty")
            if rng.random() < 0.2:
                made["hours"] = f + 2
            made["due_date"] = f"1{f} {['Jan', 'Feb', 'Mar', 'Apr', 'May'][f]} 2026"
            actual.append({"functionName": f"function_{f}", "arguments": made, "result": {"ok": True},
                           "error": None, "turn": f + 1})
        actual.insert(rng.randrange(6), {"functionName": "function_0", "arguments": {"title": "again"},
                                         "result": {}, "error": None, "turn": 3})
        case = {"case_id": f"case-{n}", "scenario_name": f"scenario_{n % 10}", "expected_function_calls": expected,
                "expected_outputs": [f"TKT-{n}-0"]}
        conversation = {"case_id": case["case_id"], "trial": 0, "scenario_name": case["scenario_name"],
                        "function_calls": actual, "messages": [{"role": "assistant", "content": f"Done: TKT-{n}-0."}],
                        "termination": {"reason": "user_finished", "turns": 6}}
        work.append((conversation, case))
    return work


def bench_evaluate(conversations: int = 10_000, through_azure: bool = True) -> dict[str, Any]:
    """Wall time and peak memory of scoring and summarising, directly and through azure's evaluate()."""
    from lobeval.evaluate import score_with_azure
    from lobeval.scoring import Rules, score_conversation
    from lobeval.stats import summarise

    work = synthetic_scoring_work(conversations)
    rules = Rules()
    started = time.perf_counter()
    rows = [score_conversation(conversation, case, rules) for conversation, case in work]
    scored = time.perf_counter()
    summary = summarise(rows)
    figures = {"conversations": conversations, "score s": scored - started, "summarise s": time.perf_counter() - scored,
               "Reliability": summary["metrics"]["Reliability"], "peak RSS MB": _peak_rss_mb()}
    if through_azure:
        started = time.perf_counter()
        score_with_azure(work, rules)
        figures["azure evaluate() s"] = time.perf_counter() - started
        figures["peak RSS MB with azure"] = _peak_rss_mb()
    return figures
