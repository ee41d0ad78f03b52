"""Stage 2: turn each test case into a recorded conversation with a target.

`simulate()` reads as its steps: select the cases, skip the (case, trial) pairs the output file
already holds (with `retry_errors`, first drop those that ended in a machinery error), run the rest
concurrently, append each finished conversation whole. One conversation is `converse()`: start,
then user and bot take turns until a termination rule fires.
"""
from __future__ import annotations

import asyncio
import functools
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lobeval.core.errors import ConfigError
from lobeval.models.llm import BudgetExceeded, LLMError, Usage, format_cost
from lobeval.core.records import (
    MACHINERY_ERRORS, SCHEMA_VERSION, Case, TerminationReason, appending, check_output, dumps, iter_jsonl, read_as,
    read_cases, read_conversations, state_changes, write_jsonl,
)
from lobeval.core.protocol import Reply, reply_text
from lobeval.targets.targets import Target, TargetError
from lobeval.simulation.users import STOP_PHRASE, SimulatedUser, says_stop_phrase


@dataclass
class Transcript:
    """What one conversation accumulates while it runs."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    function_calls: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    target_usage: Usage = field(default_factory=Usage)   # calls: the messages sent to the target

    def user_said(self, text: str, marks: dict[str, Any] | None = None) -> None:
        """A user message, with the marks its user put on it (users.NOT_UNDERSTOOD)."""
        self.messages.append({"role": "user", "content": text, **(marks or {})})

    def bot_said(self, reply: Any) -> None:
        self.messages.append({"role": "assistant", "content": reply.text, "function_calls": reply.function_calls})
        self.function_calls += [{**call, "turn": self.turns} for call in reply.function_calls]


async def converse(case: Case, trial: int, target: Target, user: SimulatedUser, *, judge: Any = None,
                   max_turns: int = 20, stop_phrase: str = STOP_PHRASE, budget: Any = None) -> dict[str, Any]:
    """One conversation, always returned as a record: failures are data, never exceptions. The cost the
    target reports for its own model calls is charged to `budget` (lobeval.models.llm.Budget).

    The user's stop phrase ends a conversation; the completion `judge` is asked only about one that reached
    `max_turns` without it (one request at most: no model call per turn just to learn whether it is over)."""
    started = time.perf_counter()
    transcript, changes, error, verdict = Transcript(), None, None, None
    judge_usage = Usage()
    user_session = user.start(case)
    session, planted = None, None
    reason: TerminationReason
    try:
        session = await target.start(case.model_dump())
        planted = await _plant(session, case)
        start_state = await session.state()
        greeting = await session.greeting()
        if greeting is not None:
            transcript.bot_said(greeting)
        bot_text = reply_text(greeting.text) if greeting is not None else None
        while True:
            if transcript.turns >= max_turns:
                reason = "max_turns"
                if judge is not None:   # the user never said it was done: the goal may have been reached anyway
                    complete, verdict = await judge.is_complete(case, transcript.messages, judge_usage)
                    reason = "judged_complete" if complete else "max_turns"
                break
            message = await user_session.reply(bot_text)
            transcript.user_said(message, getattr(user_session, "marks", None))
            transcript.turns += 1
            if says_stop_phrase(message, stop_phrase):
                reason = "user_finished"
                break
            reply = await session.send(message)
            transcript.target_usage.add(**(reply.usage or {}))
            if budget is not None and reply.usage is not None:
                budget.charge(reply.usage["cost_usd"], role="target")
            transcript.bot_said(reply)
            bot_text = reply_text(reply.text)   # the user reads a reply written as JSON as its text
        changes = state_changes(start_state, await session.state())
    except TargetError as exc:
        reason, error = exc.reason, str(exc)
        made = getattr(exc, "function_calls", ())   # a turn that broke half-way may have acted already
        if made:
            transcript.bot_said(Reply("", list(made)))
        spent = getattr(exc, "usage", None)   # and still used its model
        if spent is not None:
            transcript.target_usage.add(**spent)
            if budget is not None:
                budget.charge(spent["cost_usd"], role="target")
    except BudgetExceeded as exc:
        reason, error = "budget_spent", str(exc)
    except LLMError as exc:
        reason, error = "llm_error", str(exc)
    finally:
        if session is not None:
            await session.close()
    return {
        "schema_version": SCHEMA_VERSION, "case_id": case.case_id, "trial": trial, "scenario_name": case.scenario_name,
        "messages": transcript.messages, "function_calls": transcript.function_calls,
        "termination": {"reason": reason, "turns": transcript.turns,
                        **({"judge_reason": verdict} if verdict is not None else {})},
        "usage": {"user": _usage(getattr(user_session, "usage", None)),
                  "target": transcript.target_usage.to_dict(),
                  "judge": judge_usage.to_dict()},
        "error": error, "duration_s": round(time.perf_counter() - started, 3),
        "target": target.name, "user_simulator": user.name, "state_changes": changes,
        **({"planted": planted} if planted else {}),
    }


async def _plant(session: Any, case: Case) -> str | None:
    """For an injection attack (docs/metrics.md#security): "target" when the instruction was planted in the bot's
    own data, through its write functions (`attack.plant`, played with the session's apply before the
    conversation), else "data" (only in the case's copy of the data, which a bot may or may not read)."""
    attack = getattr(case, "attack", None) or {}
    if attack.get("category") != "injection":
        return None
    if attack.get("plant"):
        done = await session.apply([attack["plant"]])
        if done and not any(call.get("error") for call in done):
            return "target"
    return "data"


def _usage(usage: Usage | None) -> dict[str, Any]:
    return (usage or Usage()).to_dict()


# --- many conversations ----------------------------------------------------------------------

@dataclass
class SimulationResult:
    path: Path
    written: int
    skipped: int
    terminations: Counter
    usage: dict[str, dict[str, float]]
    wall_s: float
    retried: int = 0
    """Conversations that had ended in a machinery error and were run again (`retry_errors`)."""

    def summary(self) -> list[str]:
        endings = ", ".join(f"{reason} {count}" for reason, count in self.terminations.most_common())
        retried = f", {self.retried} machinery errors run again" if self.retried else ""
        lines = [f"{self.written} conversations written to {self.path} ({self.skipped} already there{retried})",
                 f"endings: {endings or 'none'}"]
        for role, usage in self.usage.items():
            estimated = usage.get("estimated_tokens", 0)
            lines.append(f"usage {role}: {usage['calls']} calls ({usage['cached_calls']} cached), "
                         f"{usage.get('requests', 0)} requests, {usage['prompt_tokens']}+{usage['completion_tokens']} "
                         f"tokens{f' ({estimated} estimated)' if estimated else ''}, {format_cost(usage['cost_usd'])}")
        lines.append(f"wall time {self.wall_s:.1f} s")
        return lines


def select_cases(cases: list[Case], *, scenarios: list[str] | None = None, limit: int | None = None,
                 shard: tuple[int, int] | None = None) -> list[Case]:
    """The cases to run: by scenario, then a deterministic shard (every n-th case), then the first N."""
    if scenarios:
        known = {case.scenario_name for case in cases}
        unknown = sorted(set(scenarios) - known)
        if unknown:
            raise ConfigError(f"--scenarios: unknown scenario(s) {', '.join(unknown)}; "
                              f"the dataset has: {', '.join(sorted(known))}")
        cases = [case for case in cases if case.scenario_name in scenarios]
    if shard is not None:
        index, count = shard
        cases = [case for position, case in enumerate(cases) if position % count == index - 1]
    return cases[:limit] if limit is not None else cases


def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r}: expected I/N, e.g. 1/4") from None
    if not 1 <= index <= count:
        raise ConfigError(f"--shard {text!r}: I must be between 1 and N")
    return index, count


def finished_pairs(path: Path) -> set[tuple[str, int]]:
    """The (case, trial) pairs already in the output, which must hold conversations and nothing else
    (a dataset or a results file there is refused, unchanged); a torn last line (killed mid-write) is cut off."""
    earlier = read_as(path, functools.partial(read_conversations, torn_end=True), "a conversations file")
    if earlier is None:
        return set()
    _cut_torn_line(path)
    return {(record["case_id"], record["trial"]) for _, _, record in earlier}


def drop_machinery_errors(path: Path, pairs: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Remove from the output the conversations of `pairs` that ended in a machinery error, so that
    they run again without a pair ever appearing twice. The file is rewritten whole (a temporary
    file renamed over it), so a kill leaves either the old file or the new one. Returns their pairs."""
    def retried(record: dict[str, Any]) -> bool:
        return (_pair(record) in pairs
                and (record.get("termination") or {}).get("reason") in MACHINERY_ERRORS)

    dropped = {_pair(record) for _, record in iter_jsonl(path) if retried(record)} if path.exists() else set()
    if dropped:
        write_jsonl(path, (record for _, record in iter_jsonl(path) if not retried(record)))
    return dropped


def _cut_torn_line(path: Path) -> None:
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def _pair(record: dict[str, Any]) -> tuple[str, int]:
    return record["case_id"], record.get("trial", 0)


async def simulate_async(dataset: str | Path, out: str | Path, *, target: Target, user: SimulatedUser,
                         judge: Any = None, trials: int = 1, concurrency: int = 4, max_turns: int = 20,
                         stop_phrase: str = STOP_PHRASE, scenarios: list[str] | None = None,
                         limit: int | None = None, shard: tuple[int, int] | None = None,
                         retry_errors: bool = False, budget: Any = None, progress: bool = True) -> SimulationResult:
    """Run every selected (case, trial) pair not yet in `out` and append its conversation to `out`.
    With `retry_errors`, the selected pairs whose conversation ended in a machinery error
    (records.MACHINERY_ERRORS) are run again rather than skipped."""
    if trials < 1 or concurrency < 1 or max_turns < 1:
        raise ConfigError("--trials, --concurrency and --max-turns must be at least 1")
    started = time.perf_counter()
    out = Path(out)
    check_output(out, [dataset])
    cases = select_cases(read_cases(dataset), scenarios=scenarios, limit=limit, shard=shard)
    out.parent.mkdir(parents=True, exist_ok=True)
    with appending(out):
        done = finished_pairs(out)
        wanted = {(case.case_id, trial) for case in cases for trial in range(trials)}
        retried = drop_machinery_errors(out, wanted) if retry_errors else set()
        todo = [(case, trial) for case in cases for trial in range(trials) if (case.case_id, trial) not in done - retried]
        one = functools.partial(converse, target=target, user=user, judge=judge, max_turns=max_turns, budget=budget,
                                stop_phrase=stop_phrase)
        terminations, usage = await _run_all(todo, out, one, concurrency, progress)
    return SimulationResult(out, len(todo), len(wanted) - len(todo), terminations,
                            {role: totals.to_dict() for role, totals in usage.items()}, time.perf_counter() - started,
                            len(retried))


async def _run_all(todo: list[tuple[Case, int]], out: Path, one: Callable[[Case, int], Awaitable[dict[str, Any]]],
                   concurrency: int, progress: bool) -> tuple[Counter, dict[str, Usage]]:
    """Run the conversations `concurrency` at a time, appending each to `out` (and syncing it) as it finishes."""
    from tqdm.auto import tqdm

    terminations: Counter = Counter()
    usage = {role: Usage() for role in ("user", "target", "judge")}
    limiter = asyncio.Semaphore(concurrency)

    async def limited(case: Case, trial: int) -> dict[str, Any]:
        async with limiter:
            return await one(case, trial)

    with out.open("a", encoding="utf-8") as handle, \
            tqdm(total=len(todo), desc="simulate", unit="conv", disable=not progress) as bar:
        for finished in asyncio.as_completed([limited(case, trial) for case, trial in todo]):
            record = await finished
            handle.write(dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            terminations[record["termination"]["reason"]] += 1
            for role, numbers in record["usage"].items():
                usage[role] = usage[role] + Usage(**numbers)
            bar.update()
    return terminations, usage


def overview(conversations: str | Path) -> "pd.DataFrame":
    """One row per scenario: conversations, how they ended, machinery errors, turns and calls."""
    import pandas as pd

    rows = [{"scenario": r["scenario_name"], "ending": r["termination"]["reason"], "turns": r["termination"]["turns"],
             "calls": len(r["function_calls"]), "failed calls": sum(bool(c.get("error")) for c in r["function_calls"])}
            for _, r in iter_jsonl(conversations)]
    table = pd.DataFrame(rows, columns=["scenario", "ending", "turns", "calls", "failed calls"])
    endings = pd.crosstab(table["scenario"], table["ending"])
    numbers = table.groupby("scenario")[["turns", "calls", "failed calls"]].mean().round(1).add_prefix("mean ")
    return endings.join(numbers).rename_axis(columns=None).reset_index()
