"""What a run will cost before anything is spent (`lobeval estimate`, `lobeval run --estimate`).

The suite's cases are built as `lobeval generate` would build them, and each conversation is laid out as the
turns its scenario takes: the simulated user's agenda (users.agenda) says what it announces, which values the
bot must ask for one at a time, which changes it confirms, and when it stops. Every request each role sends
along that conversation is then counted with the real prompts: the user's and judges' instructions, the case's
business data and instructions, the suite's tool definitions, azure-ai-evaluation's prompty templates, the
sample bot's or a prompt target's system prompt. Token counts come from lobeval.tokens.

What cannot be known before the bot talks is assumed, and the estimate says so (ASSUMED): how long the bot's
and the user's messages are, how much a function's result holds, how long each judge's answer is. Provider
prompt caching is counted as OpenAI documents it (a repeated prefix of 1,024 tokens or more, in steps of 128).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lobeval.generate import build_cases
from lobeval.judges import (COMPLETION_PROMPT, LOBEVAL_JUDGES, asked_parts, evaluator_prompt, judge_instructions,
                            selected_judges, usage_key)
from lobeval.llm import BATCH_DISCOUNT, cost_of, load_prices, resolve_model
from lobeval.records import Case
from lobeval.suite import load_suite
from lobeval.tokens import PER_MESSAGE, PER_REPLY, cacheable, count
from lobeval.users import ATTACK_TURNS, STOP_PHRASE, LLMUserSession, agenda
from lobeval.vocabulary import AZURE_JUDGES

ASSUMED = {"bot_message": 45, "user_words": 8, "result": 120, "tool_call": 25,
           "per_reply_scores": 60, "goal": 40, "user_review": 45, "commitments": 60, "azure": 55,
           "root_causes_prompt": 1500, "root_causes_answer": 150}
"""Tokens of what is only known once the bot talks: a bot message, the words around a value the user gives, a
function's result, a tool call, each judge's answer (the per-turn judge's per reply), the root-cause request."""
FIRST, LAST = ("simulated user", "bot (target)", "completion check"), ("root causes",)
"""The order of the roles in the estimate, the judges between them."""


@dataclass
class Tally:
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    def add(self, prompt: int, completion: int, cached: int = 0) -> None:
        self.requests += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cached_tokens += cached


@dataclass
class Estimate:
    conversations: int
    roles: dict[str, Tally] = field(default_factory=dict)
    models: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    batch: bool = False
    parts: dict[str, Tally] = field(default_factory=dict)
    """What each of lobeval's judges adds to the request that asks them together (tokens without it subtracted)."""

    def rows(self) -> list[dict[str, Any]]:
        """Per role: requests, tokens, the cost at the model's price (None: no price, or no model: offline)."""
        prices = load_prices()
        found = []
        for role in sorted(self.roles, key=lambda role: (role in LAST, role not in FIRST,
                                                          FIRST.index(role) if role in FIRST else 0)):
            tally = self.roles[role]
            if not tally.requests:
                continue
            model = self.models.get(_model_role(role))
            cost = self._cost(tally, prices.get(model), judged=role.startswith("judge: "))
            found.append({"role": role, "model": model, "requests": tally.requests,
                          "prompt_tokens": tally.prompt_tokens, "cached_tokens": tally.cached_tokens,
                          "completion_tokens": tally.completion_tokens, "cost_usd": cost,
                          "per_conversation_usd": None if cost is None else cost / self.conversations})
        return found

    def _cost(self, tally: Tally, price: dict[str, float] | None, *, judged: bool) -> float | None:
        """What `tally` costs at `price`; a judge's or an evaluator's request at the batch discount with --batch."""
        cost = cost_of(tally.prompt_tokens, tally.completion_tokens, price, tally.cached_tokens)
        return None if cost is None else cost * (BATCH_DISCOUNT if self.batch and judged else 1.0)

    def each_judge(self) -> dict[str, float | None]:
        """Each judge's cost per conversation it judges: what it adds to the request lobeval's judges share, or its
        own requests (an Azure evaluator); None without a price."""
        price = load_prices().get(self.models.get("judge"))
        found = {}
        for name, tally in self.parts.items():
            cost = self._cost(tally, price, judged=True)
            found[name] = None if cost is None else cost / tally.requests
        for row in self.rows():
            if row["role"].removeprefix("judge: ") in AZURE_JUDGES:
                found[row["role"].removeprefix("judge: ")] = (None if row["cost_usd"] is None
                                                              else row["cost_usd"] / row["requests"])
        return found


def _model_role(role: str) -> str:
    return {"simulated user": "user", "bot (target)": "target"}.get(role, "judge")


def estimate(suite: str, *, cases_per_scenario: int = 1, seed: int = 42, trials: int = 1, user: str = "scripted",
             judges: list[str] | None = None, attacks: str | None = None, target: str | None = None,
             max_turns: int = 20, batch: bool = False) -> Estimate:
    """The requests, tokens and cost by role of `lobeval run` with these options; reads the suite, writes
    nothing, asks no model."""
    loaded = load_suite(suite)
    cases = [Case.model_validate(case) for case in build_cases(loaded, cases_per_scenario, seed, attacks)]
    models = {role: (config.model if (config := resolve_model(role)) else None) for role in ("user", "target", "judge")}
    found = Estimate(conversations=len(cases) * trials, models=models, batch=batch)
    bot = _bot_prompt(target or loaded.default_target, loaded)
    names = selected_judges(judges) if models["judge"] else []
    tools = [{k: v for k, v in tool.items() if k != "effect"} for tool in loaded.tools.values()]
    required = {tool["function"]["name"]: tuple(tool["function"].get("parameters", {}).get("required") or ())
                for tool in tools}
    templates = {name: count(evaluator_prompt(name)["template"]) for name in names if name in AZURE_JUDGES}
    seen_prefix: set[tuple[str, ...]] = set()
    for case in cases:
        events = conversation_events(case, user, required)
        turns = sum(kind == "user" for kind, _ in events)
        for _ in range(trials):
            if user == "llm" and models["user"]:
                _user_requests(found, case, events)
            if bot is not None and models["target"]:
                _bot_requests(found, events, *bot, tools)
            if models["judge"] and turns > max_turns:
                found.roles.setdefault("completion check", Tally()).add(
                    count(COMPLETION_PROMPT) + _transcript(events) + 2 * PER_MESSAGE, ASSUMED["goal"])
            _judge_requests(found, case, events, names, templates, seen_prefix)
    if names:
        found.roles.setdefault("root causes", Tally()).add(ASSUMED["root_causes_prompt"], ASSUMED["root_causes_answer"])
    found.notes = _notes(models, bot, user)
    return found


# --- the conversation, laid out ----------------------------------------------------------------------

def conversation_events(case: Case, user: str, required: dict[str, tuple[str, ...]]) -> list[tuple[str, int]]:
    """The messages a conversation of this case is expected to hold, in order, as (kind, tokens): "bot" and "user"
    text, "call" (a tool call) and "result" (its result). The user announces each agenda item (with the values its
    style puts in the opening; a model, those its instructions spell out), gives each other required argument
    (`required`, by function) when the bot asks for it and the optional ones together, confirms a change, and
    stops; an attacker
    repeats its request (ATTACK_TURNS, and once more played by a model); a request with no agenda is said once."""
    events: list[tuple[str, int]] = [("bot", ASSUMED["bot_message"])]
    items = agenda(case)
    if not items:
        events += [("user", count(case.user_instructions)), ("bot", ASSUMED["bot_message"])]
        for _ in range(ATTACK_TURNS + (user == "llm") if getattr(case, "attack", None) else 0):
            events += [("user", count(case.user_instructions) + ASSUMED["user_words"]), ("bot", ASSUMED["bot_message"])]
    for item in items:
        read = item.verb in ("look up", "list", "search")
        if user == "llm":   # a model says what its instructions spell out
            shown = {k: v for k, v in item.values.items() if str(v) and str(v) in case.user_instructions}
        else:
            shown = (item.values if case.user_style == "all_in_one" or read else
                     {} if case.user_style == "one_fact" else item.identifiers())
        events += [("user", ASSUMED["user_words"] + sum(count(str(value)) for value in shown.values()))]
        missing = [name for name in item.values if name not in shown]
        asked = [name for name in missing if name in required.get(item.function, ())]
        rest = [name for name in missing if name not in asked]   # what the bot asks for at once ("what else?")
        for group in [[name] for name in asked] + ([rest] if rest else []):
            said = sum(count(str(item.values[name])) for name in group)
            events += [("bot", ASSUMED["bot_message"]), ("user", ASSUMED["user_words"] + said)]
        if not read:
            events += [("bot", ASSUMED["bot_message"]), ("user", ASSUMED["user_words"])]
        events += [("call", ASSUMED["tool_call"] + count(json.dumps(item.values))), ("result", ASSUMED["result"]),
                   ("bot", ASSUMED["bot_message"])]
    return events + [("user", count(STOP_PHRASE) + ASSUMED["user_words"])]


def _transcript(events: list[tuple[str, int]]) -> int:
    """A transcript's tokens as the judges read it: each message on a line, each call with its result below."""
    return sum(tokens + (2 if kind in ("bot", "user") else 0) for kind, tokens in events)


# --- each role's requests ----------------------------------------------------------------------------

def _user_requests(found: Estimate, case: Case, events: list[tuple[str, int]]) -> None:
    """The user model sees the bot's text only, and answers each with one message."""
    system = count(LLMUserSession(case, None, STOP_PHRASE).system_prompt()) + PER_MESSAGE
    seen, previous = system, 0
    for kind, tokens in events:
        if kind == "bot":
            seen += tokens + PER_MESSAGE
        elif kind == "user":
            prompt = seen + PER_REPLY
            found.roles.setdefault("simulated user", Tally()).add(prompt, tokens, cacheable(previous))
            previous = prompt
            seen += tokens + PER_MESSAGE


def _bot_requests(found: Estimate, events: list[tuple[str, int]], system: int, greeting: bool,
                  tools: list[dict[str, Any]]) -> None:
    """The bot's model answers each user message but the stop phrase, and each function's result."""
    fixed = system + PER_MESSAGE + count(json.dumps(tools))
    history, previous = fixed, 0
    last_user = max(i for i, (kind, _) in enumerate(events) if kind == "user")
    for index, (kind, tokens) in enumerate(events):
        if kind == "bot" and index == 0 and not greeting:
            continue
        history += tokens + PER_MESSAGE
        if (kind == "user" and index != last_user) or kind == "result":
            answer = next((t for k, t in events[index + 1:] if k in ("bot", "call")), ASSUMED["bot_message"])
            prompt = history + PER_REPLY
            found.roles.setdefault("bot (target)", Tally()).add(prompt, answer, cacheable(previous))
            previous = prompt


def _judge_requests(found: Estimate, case: Case, events: list[tuple[str, int]], names: list[str],
                    templates: dict[str, int], seen_prefix: set[tuple[str, ...]]) -> None:
    """lobeval's judges in one request per conversation, whose instructions are the same for every conversation
    that asks the same judges (from the second on, the provider reads them from its cache), and a request per Azure
    evaluator. What each of lobeval's judges adds to its request is kept in `found.parts`."""
    parts = asked_parts(names, bool(getattr(case, "attack", None)))
    if parts:
        prompt, answer = _own_request(case, events, parts)
        fixed = count(judge_instructions(parts)) + PER_MESSAGE
        found.roles.setdefault(f"judge: {usage_key(tuple(n for n in names if n in LOBEVAL_JUDGES))}", Tally()).add(
            prompt, answer, cacheable(fixed) if parts in seen_prefix else 0)
        seen_prefix.add(parts)
        for name in parts:
            without = _own_request(case, events, tuple(n for n in parts if n != name)) if len(parts) > 1 else (0, 0)
            found.parts.setdefault(name, Tally()).add(prompt - without[0], answer - without[1])
    for name in names:
        if name in templates and (name != "tool_call_accuracy" or any(k == "call" for k, _ in events)):
            # the evaluators read the conversation as JSON messages: about half again the plain transcript
            found.roles.setdefault(f"judge: {name}", Tally()).add(
                templates[name] + _transcript(events) * 3 // 2, ASSUMED["azure"])


def _own_request(case: Case, events: list[tuple[str, int]], parts: tuple[str, ...]) -> tuple[int, int]:
    """(prompt, completion) tokens of the request that asks lobeval's judges `parts` about one conversation: the
    instructions, the case's values each part reads, the transcript with its numbered messages; the answer."""
    replies, turns = sum(k == "bot" for k, _ in events), sum(k == "user" for k, _ in events)
    data = count(json.dumps(case.business_data, default=str))
    read = {"per_turn": 0, "goal": count(case.task_completion or case.user_instructions) + 4,
            "user_review": count(case.user_instructions) + count(json.dumps(case.user_mistakes or {})) + 12,
            "commitments": count(json.dumps(getattr(case, "attack", None)))}
    answers = {"per_turn": ASSUMED["per_reply_scores"] * replies, "goal": ASSUMED["goal"],
               "user_review": ASSUMED["user_review"], "commitments": ASSUMED["commitments"]}
    shared = (data + 12 if {"per_turn", "user_review"} & set(parts) else 0) + _transcript(events) + 4 * turns + 7 * replies
    prompt = count(judge_instructions(parts)) + sum(read[name] for name in parts) + shared + 2 * PER_MESSAGE + PER_REPLY
    return prompt, sum(answers[name] for name in parts)


def _bot_prompt(target: str | None, suite: Any) -> tuple[int, bool] | None:
    """(system prompt tokens, whether the greeting is in the model's history) of a bot lobeval can see into: the
    sample bot's LLM policy or a prompt target; None for any other target (its own model is its business)."""
    from lobeval.roles import DEFAULT_TARGET

    spec = target or DEFAULT_TARGET
    if spec == DEFAULT_TARGET:
        from lobeval.samples.support_tickets.llm_policy import SYSTEM_PROMPT

        return count(SYSTEM_PROMPT), True
    if spec.endswith(".json"):
        from pathlib import Path

        from lobeval.prompt_target import PromptTargetConfig

        return count(PromptTargetConfig.model_validate_json(Path(spec).read_text(encoding="utf-8")).system_prompt), False
    return None


def _notes(models: dict[str, str | None], bot: tuple[int, bool] | None, user: str) -> list[str]:
    notes = [f"{role}: {'no model configured: offline, free' if model is None else model}"
             for role, model in models.items()]
    if bot is None:
        notes.append("the bot's own model is inside the target: not estimated (its requests are its business)")
    if user != "llm":
        notes.append("the scripted user asks no model")
    notes.append("assumed token sizes (known only once the bot talks): "
                 + ", ".join(f"{name} {value}" for name, value in ASSUMED.items()))
    notes.append("tokens counted with cl100k_base (lobeval.tokens); prompt caching as OpenAI documents it")
    return notes


def format_estimate(found: Estimate) -> list[str]:
    """The estimate as printed: a row per role, the total, judging against the bot, then what it assumed."""
    rows = found.rows()
    unpriced = [row["role"] for row in rows if row["cost_usd"] is None]
    total = "unknown" if unpriced else f"{sum(row['cost_usd'] for row in rows):.4f}"
    width = max([30, *(len(row["role"]) + 2 for row in rows)])
    lines = [f"estimate for {found.conversations} conversations (nothing sent, nothing written):",
             f"  {'role':<{width}}{'requests':>9}{'prompt tok':>12}{'cached':>9}{'compl. tok':>12}{'USD':>10}{'USD/conv':>10}"]
    for row in rows:
        usd = "unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}"
        each = "" if row["cost_usd"] is None else f"{row['per_conversation_usd']:.5f}"
        lines.append(f"  {row['role']:<{width}}{row['requests']:>9}{row['prompt_tokens']:>12}{row['cached_tokens']:>9}"
                     f"{row['completion_tokens']:>12}{usd:>10}{each:>10}")
    if not rows:
        lines.append("  no model request: every role runs offline")
    lines.append(f"  {'total':<{width}}{sum(r['requests'] for r in rows):>9}{sum(r['prompt_tokens'] for r in rows):>12}"
                 f"{sum(r['cached_tokens'] for r in rows):>9}{sum(r['completion_tokens'] for r in rows):>12}"
                 f"{total:>10}" + (f"  (no price for: {', '.join(unpriced)})" if unpriced else ""))
    costs = {row["role"]: row["cost_usd"] for row in rows}
    judging = [cost for role, cost in costs.items() if role.startswith("judge") or role in ("completion check",
                                                                                             "root causes")]
    if costs.get("bot (target)") and judging and None not in judging:
        lines.append(f"  judging = {sum(judging) / costs['bot (target)']:.2f} x the bot's cost"
                     + (f"; the simulated user {costs['simulated user'] / costs['bot (target)']:.2f} x"
                        if costs.get("simulated user") is not None and "simulated user" in costs else ""))
    each = found.each_judge()
    if each:
        lines.append("  each judge per conversation it judges: " + ", ".join(
            f"{name} {'unknown' if cost is None else f'{cost:.5f}'}" for name, cost in each.items())
            + (" (lobeval's judges share one request: what each adds to it)" if found.parts else ""))
    lines += [f"  {note}" for note in found.notes]
    return lines
