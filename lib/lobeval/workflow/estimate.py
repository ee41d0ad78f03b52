"""What a run will cost before anything is spent (`lobeval estimate`, `lobeval run --estimate`).

The suite's cases are built as `lobeval generate` would build them. How many turns a conversation takes depends
on how the bot asks for what it needs, which only the bot knows; so the estimate uses what is known:

- after a finished run of the same suite against the same target with the same simulated user (runs/index.jsonl)
  that played every scenario of this one: that run's measured requests and tokens per conversation of each
  scenario, for each role that recorded them (the user, the bot when it reports its usage, the completion check),
  and its transcripts for the rest (the judges; a role that asked no model then). Only its conversations that
  reached the bot count (`reached_the_bot`: the user spoke, no machinery error), and a run with none is passed
  over, said in the estimate's basis: a run against a stopped bot or endpoint measured nothing;
- else a range: each conversation laid out with all values in one turn, and with one value per turn (LAYOUTS),
  from the simulated user's agenda (users.agenda) and what its style says first; the figures are its midpoint.

Every request each role sends along a conversation laid out is counted with the real prompts: the user's and
judges' instructions, the case's business data and instructions, the suite's tool definitions,
azure-ai-evaluation's prompty templates, the sample bot's or a prompt target's system prompt. Token counts come
from lobeval.core.tokens.

What cannot be known before the bot talks is assumed, and the estimate says so (ASSUMED): how long the bot's
and the user's messages are, how much a function's result holds, how long each judge's answer is. Provider
prompt caching is counted as OpenAI documents it (a repeated prefix of 1,024 tokens or more, in steps of 128).
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lobeval.generation.generate import build_cases
from lobeval.judges.judges import (COMPLETION_PROMPT, LOBEVAL_JUDGES, asked_parts, evaluator_prompt, judge_instructions,
                            selected_judges, usage_key)
from lobeval.models.llm import BATCH_DISCOUNT, cost_of, load_prices, named_model
from lobeval.core.records import MACHINERY_ERRORS, Case
from lobeval.workspace.suite import Suite, load_suite
from lobeval.core.tokens import PER_MESSAGE, PER_REPLY, cacheable, count
from lobeval.simulation.users import ATTACK_TURNS, STOP_PHRASE, LLMUserSession, agenda
from lobeval.core.vocabulary import AZURE_JUDGES

ASSUMED = {"bot_message": 45, "user_words": 8, "result": 120, "tool_call": 25,
           "per_reply_scores": 30, "goal": 40, "user_review": 45, "commitments": 60, "claims": 60, "azure": 55,
           "root_causes_prompt": 1500, "root_causes_answer": 150}
"""Tokens of what is only known once the bot talks: a bot message, the words around a value the user gives, a
function's result, a tool call, each judge's answer (the per-turn judge's per reply), the root-cause request."""
FIRST, LAST = ("simulated user", "bot (target)", "completion check"), ("root causes",)
"""The order of the roles in the estimate, the judges between them."""


@dataclass
class Tally:
    """Requests and tokens; a mean of measured conversations or a midpoint may hold fractions."""

    requests: float = 0
    prompt_tokens: float = 0
    cached_tokens: float = 0
    completion_tokens: float = 0

    def add(self, prompt: float, completion: float, cached: float = 0, requests: float = 1) -> None:
        self.requests += requests
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cached_tokens += cached

    def merge(self, other: Tally) -> None:
        self.add(other.prompt_tokens, other.completion_tokens, other.cached_tokens, other.requests)


def _between(low: dict[str, Tally], high: dict[str, Tally]) -> dict[str, Tally]:
    """Each tally halfway between its value in `low` and in `high` (a role missing from one counts 0 there)."""
    found = {}
    for name in [*low, *(name for name in high if name not in low)]:
        one, other = low.get(name, Tally()), high.get(name, Tally())
        found[name] = Tally(*((a + b) / 2 for a, b in zip(vars(one).values(), vars(other).values())))
    return found


@dataclass
class Estimate:
    conversations: int
    roles: dict[str, Tally] = field(default_factory=dict)
    models: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    batch: bool = False
    parts: dict[str, Tally] = field(default_factory=dict)
    """What each of lobeval's judges adds to the request that asks them together (tokens without it subtracted; its
    instructions cached where the request's are)."""
    basis: str = ""
    """What the figures come from: an earlier run's measured conversations, or the midpoint of `range`."""
    range: tuple[Estimate, Estimate] | None = None
    """Without an earlier run: the estimate with all values in one turn, and with one value per turn; the figures
    are their midpoint."""

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
            found.append({"role": role, "model": model, "requests": round(tally.requests),
                          "prompt_tokens": round(tally.prompt_tokens), "cached_tokens": round(tally.cached_tokens),
                          "completion_tokens": round(tally.completion_tokens), "cost_usd": cost,
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
             max_turns: int = 20, batch: bool = False, attack_roles: list[str] | None = None) -> Estimate:
    """The requests, tokens and cost by role of `lobeval run` with these options; reads the suite and the runs
    index, writes nothing, asks no model. From the last finished run of the same suite against the same target
    with the same simulated user that played every scenario of this one (`measured_run`), when there is one;
    else the midpoint of a range, from all values in one turn to one value per turn."""
    from lobeval.workflow.roles import check_named

    check_named(user=user, judges=judges)   # what `lobeval run` refuses, but for credentials: nothing is sent
    loaded = load_suite(suite)
    cases = [Case.model_validate(case) for case in build_cases(loaded, cases_per_scenario, seed, attacks,
                                                                    attack_roles)]
    models = {role: named_model(role) for role in ("user", "target", "judge")}
    target = target or loaded.default_target
    measured = measured_run(loaded, target, user, {case.scenario_name for case in cases})
    bot = _bot_prompt(target, loaded)

    def laid_out(layout: str | Measured) -> Estimate:
        found = Estimate(conversations=len(cases) * trials, models=models, batch=batch)
        _tally(found, loaded, cases, trials, user, judges, bot, max_turns, layout)
        return found

    if isinstance(measured, Measured):
        found = laid_out(measured)
        found.basis = (f"from run {measured.run_id} of the same suite, target and user: its measured requests and "
                       f"tokens per conversation of each scenario, its transcripts for the judges"
                       + (f"; {measured.passed_over}" if measured.passed_over else ""))
    else:
        low, high = laid_out("all_in_one"), laid_out("one_per_turn")
        found = Estimate(conversations=low.conversations, models=models, batch=batch, range=(low, high),
                         roles=_between(low.roles, high.roles), parts=_between(low.parts, high.parts))
        found.basis = ("no earlier run of the same suite, target and user" if measured is None else measured) + (
            ": the midpoint of a range, from all values in one turn to one value per turn")
    found.notes = _notes(models, bot, user)
    return found


def _tally(found: Estimate, loaded: Any, cases: list[Case], trials: int, user: str, judges: list[str] | None,
           bot: tuple[int, bool] | None, max_turns: int, layout: str | Measured) -> None:
    """Count every request of the run into `found`, each conversation laid out as `layout` says (LAYOUTS), or
    as an earlier run measured it: its transcripts, and each role's requests and tokens where it recorded them."""
    models = found.models
    names = selected_judges(judges) if models["judge"] else []
    tools = [{k: v for k, v in tool.items() if k != "effect"} for tool in loaded.tools.values()]
    reads = {tool["function"]["name"] for tool in loaded.tools.values() if tool["effect"] == "read"}
    templates = {name: count(evaluator_prompt(name)["template"]) for name in names if name in AZURE_JUDGES}
    seen_prefix: set[tuple[str, ...]] = set()
    shown: dict[str, int] = {}   # by scenario, the conversations laid out from its measured transcripts
    for case in cases:
        if isinstance(layout, Measured):
            recorded = layout.events[case.scenario_name]
            events = recorded[shown.get(case.scenario_name, 0) % len(recorded)]
            shown[case.scenario_name] = shown.get(case.scenario_name, 0) + 1
            spent = layout.usage[case.scenario_name]
        else:
            events, spent = conversation_events(case, user, layout, reads), {}
        turns = sum(kind == "user" for kind, _ in events)
        for _ in range(trials):
            if user == "llm" and models["user"]:
                _measured_or(found, "simulated user", spent, lambda: _user_requests(found, case, events))
            # a bot lobeval sees into asks a model only when one is configured; another reports what its own asks
            if (bot is not None and models["target"]) or (bot is None and spent.get("bot (target)")):
                _measured_or(found, "bot (target)", spent, lambda: _bot_requests(found, events, *bot, tools))
            if models["judge"] and (spent.get("completion check") or turns > max_turns):
                _measured_or(found, "completion check", spent, lambda: found.roles.setdefault(
                    "completion check", Tally()).add(count(COMPLETION_PROMPT) + _transcript(events) + 2 * PER_MESSAGE,
                                                     ASSUMED["goal"]))
            _judge_requests(found, case, events, names, templates, seen_prefix)
    if names:
        found.roles.setdefault("root causes", Tally()).add(ASSUMED["root_causes_prompt"], ASSUMED["root_causes_answer"])


def _measured_or(found: Estimate, role: str, spent: dict[str, Tally], lay_out: Callable[[], None]) -> None:
    """A conversation's requests of `role`: what an earlier run measured per conversation, else `lay_out()`."""
    if spent.get(role):
        found.roles.setdefault(role, Tally()).merge(spent[role])
    else:
        lay_out()


# --- an earlier run, measured ------------------------------------------------------------------------

@dataclass
class Measured:
    """An earlier run's conversations by scenario: each one's messages as `conversation_events` lays them out,
    and each role's mean requests and tokens per conversation, for the roles that asked a model."""

    run_id: str
    events: dict[str, list[list[tuple[str, int]]]]
    usage: dict[str, dict[str, Tally]]
    passed_over: str = ""
    """The later runs of the same suite, target and user passed over as no evidence (`_passed_over`)."""


MEASURED_ROLES = {"user": "simulated user", "target": "bot (target)", "judge": "completion check"}
"""A conversation record's usage by role, as the estimate names them."""


def measured_run(suite: Suite, target: str, user: str, scenarios: set[str]) -> Measured | str | None:
    """The last finished run (runs/index.jsonl) of `suite` (its name and content: `runs.same_suite`) against
    `target` with this `user`: measured, when its conversations played every scenario of `scenarios`; else why
    it cannot be used; None when there is none."""
    from lobeval.core.errors import LobevalError
    from lobeval.core.records import iter_conversations
    from lobeval.workspace.runs import index_path, read_config, read_index, same_suite, suite_digest

    this = {"suite_name": suite.name, "suite_digest": suite_digest(suite)}
    entries, _ = read_index(index_path())
    passed_over: list[str] = []   # runs of which no conversation reached the bot: not evidence
    for entry in reversed(entries):
        if not same_suite(entry, this):
            continue
        try:
            config = read_config(entry["run_dir"])
            if (config.get("target"), config.get("user")) != (target, user):
                continue
            found = _measured(entry["run_id"], (record for _, _, record in
                                                iter_conversations(Path(entry["run_dir"]) / "conversations.jsonl")))
        except LobevalError:   # an earlier run that can no longer be read is history only
            continue
        if not found.events:
            passed_over.append(entry["run_id"])
            continue
        missing = sorted(scenarios - set(found.events))
        if missing:
            return (_passed_over(passed_over, "; ")
                    + f"run {entry['run_id']} played no conversation of {', '.join(missing)}")
        found.passed_over = _passed_over(passed_over)
        return found
    return _passed_over(passed_over) or None


def _passed_over(run_ids: list[str], then: str = "") -> str:
    """What the estimate says of the runs it passed over, each without a conversation that reached the bot."""
    if not run_ids:
        return ""
    return (f"run {', '.join(run_ids)} is no evidence (no conversation of it reached the bot: each ended in a "
            f"machinery error, or before the user spoke){then}")


def reached_the_bot(record: dict[str, Any]) -> bool:
    """Whether a recorded conversation measured something: the user spoke, and it did not end in a machinery error
    (one whose every request was refused, or that never got through, used nothing a run of the bot would)."""
    return ((record.get("termination") or {}).get("reason") not in MACHINERY_ERRORS
            and any(message.get("role") == "user" for message in record.get("messages") or []))


TRANSCRIPTS = 20
"""Of each scenario, the transcripts an earlier run's judges are estimated from (all its conversations are averaged
for the roles it measured): enough for a mean, few enough to count quickly after a run of thousands."""


def _measured(run_id: str, records: Iterable[dict[str, Any]]) -> Measured:
    events: dict[str, list[list[tuple[str, int]]]] = {}
    totals: dict[str, dict[str, Tally]] = {}
    played: Counter[str] = Counter()
    for record in filter(reached_the_bot, records):
        scenario = record.get("scenario_name") or ""
        played[scenario] += 1
        if played[scenario] <= TRANSCRIPTS:
            events.setdefault(scenario, []).append(recorded_events(record))
        for role, numbers in (record.get("usage") or {}).items():
            if role in MEASURED_ROLES and numbers.get("requests"):
                totals.setdefault(scenario, {}).setdefault(MEASURED_ROLES[role], Tally()).add(
                    numbers["prompt_tokens"], numbers["completion_tokens"], numbers.get("cached_prompt_tokens", 0),
                    numbers["requests"])
    usage = {scenario: {role: Tally(*(value / played[scenario] for value in vars(tally).values()))
                        for role, tally in roles.items()} for scenario, roles in totals.items()}
    return Measured(run_id, events, {scenario: usage.get(scenario, {}) for scenario in events})


def recorded_events(record: dict[str, Any]) -> list[tuple[str, int]]:
    """A recorded conversation as `conversation_events` lays one out: each message, and before a bot message the
    calls it made with their results."""
    events: list[tuple[str, int]] = []
    for message in record["messages"]:
        for call in message.get("function_calls") or []:
            events += [("call", ASSUMED["tool_call"] + count(json.dumps(call.get("arguments") or {}))),
                       ("result", count(json.dumps(call.get("result") if call.get("error") is None
                                                   else {"error": call["error"]}, default=str)))]
        events.append(("bot" if message["role"] == "assistant" else "user", count(message.get("content") or "")))
    return events


# --- the conversation, laid out ----------------------------------------------------------------------

LAYOUTS = {"all_in_one": "all values in one turn (a model as the user: its first), the bot acting at once",
           "one_per_turn": "one value per turn, each asked for by the bot, a change confirmed before it is made"}
"""The two ends of the range the estimate gives without an earlier run: what a conversation takes depends on how
the bot asks, which only the bot knows."""


def conversation_events(case: Case, user: str, layout: str, reads: set[str]) -> list[tuple[str, int]]:
    """The messages a conversation of this case holds, in order, as (kind, tokens), laid out as `layout` (LAYOUTS)
    says: "bot" and "user" text, "call" (a tool call) and "result" (its result). The user announces each agenda
    item with the values it gives first (`_opening`); with "all_in_one" it gives the others in one turn, when the
    bot asks for them, and the bot acts; with "one_per_turn" it gives each other value when the bot asks for it,
    and confirms a change (not a read, a function of `reads`).
    Then it stops; an attacker repeats its request (ATTACK_TURNS, and once more played by a model, `user` "llm");
    a request with no agenda is said once."""
    events: list[tuple[str, int]] = [("bot", ASSUMED["bot_message"])]
    items = agenda(case)
    if not items:
        events += [("user", count(case.user_instructions)), ("bot", ASSUMED["bot_message"])]
        for _ in range(ATTACK_TURNS + (user == "llm") if getattr(case, "attack", None) else 0):
            events += [("user", count(case.user_instructions) + ASSUMED["user_words"]), ("bot", ASSUMED["bot_message"])]
    for item in items:
        read = item.function in reads
        shown = _opening(case, user, layout, item.values, item.identifiers(), read)
        events += [("user", ASSUMED["user_words"] + sum(count(str(value)) for value in shown.values()))]
        rest = [name for name in item.values if name not in shown]
        for group in ([rest] if rest else []) if layout == "all_in_one" else [[name] for name in rest]:
            said = sum(count(str(item.values[name])) for name in group)
            events += [("bot", ASSUMED["bot_message"]), ("user", ASSUMED["user_words"] + said)]
        if layout == "one_per_turn" and not read:
            events += [("bot", ASSUMED["bot_message"]), ("user", ASSUMED["user_words"])]
        events += [("call", ASSUMED["tool_call"] + count(json.dumps(item.values))), ("result", ASSUMED["result"]),
                   ("bot", ASSUMED["bot_message"])]
    return events + [("user", count(STOP_PHRASE) + ASSUMED["user_words"])]


def _opening(case: Case, user: str, layout: str, values: dict[str, Any], identifiers: dict[str, Any],
             read: bool) -> dict[str, Any]:
    """The values the user gives when it announces an agenda item: the scripted user those its style gives (all
    of them for a read), a model those of the layout (it may give all of them, or the identifiers only)."""
    if read or (layout if user == "llm" else case.user_style) == "all_in_one":
        return values
    return {} if user != "llm" and case.user_style == "one_fact" else identifiers


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
        fixed, cached = count(judge_instructions(parts)) + PER_MESSAGE, parts in seen_prefix
        found.roles.setdefault(f"judge: {usage_key(tuple(n for n in names if n in LOBEVAL_JUDGES))}", Tally()).add(
            prompt, answer, cacheable(fixed) if cached else 0)
        seen_prefix.add(parts)
        for name in parts:
            others = tuple(n for n in parts if n != name)
            without = _own_request(case, events, others) if others else (0, 0)
            # where the request's instructions come from the cache, so do the ones this judge adds to them
            instructions = count(judge_instructions(parts)) - (count(judge_instructions(others)) if others else 0)
            found.parts.setdefault(name, Tally()).add(prompt - without[0], answer - without[1],
                                                      instructions if cached else 0)
    for name in names:
        if name in templates and (name != "tool_call_accuracy" or any(k == "call" for k, _ in events)):
            # the evaluators read the conversation as JSON messages: about half again the plain transcript
            found.roles.setdefault(f"judge: {name}", Tally()).add(
                templates[name] + _transcript(events) * 3 // 2, ASSUMED["azure"])


def _own_request(case: Case, events: list[tuple[str, int]], parts: tuple[str, ...]) -> tuple[int, int]:
    """(prompt, completion) tokens of the request that asks lobeval's judges `parts` about one conversation: the
    instructions, the case's values each part reads, the transcript with its numbered messages and calls; the answer."""
    replies, turns = sum(k == "bot" for k, _ in events), sum(k == "user" for k, _ in events)
    calls = sum(k == "call" for k, _ in events)   # each numbered and marked read or write: "call #3, write: "
    data = count(json.dumps(case.business_data, default=str))
    read = {"per_turn": 0, "goal": count(case.task_completion or case.user_instructions) + 4,
            "user_review": count(case.user_instructions) + count(json.dumps(case.user_mistakes or {})) + 12,
            "commitments": count(json.dumps(getattr(case, "attack", None))), "claims": 0}
    answers = {"per_turn": ASSUMED["per_reply_scores"] * replies, "goal": ASSUMED["goal"],
               "user_review": ASSUMED["user_review"], "commitments": ASSUMED["commitments"],
               "claims": ASSUMED["claims"]}
    shared = (data + 12 if {"per_turn", "user_review"} & set(parts) else 0) + _transcript(events) + 4 * turns + 7 * replies + 6 * calls
    prompt = count(judge_instructions(parts)) + sum(read[name] for name in parts) + shared + 2 * PER_MESSAGE + PER_REPLY
    return prompt, sum(answers[name] for name in parts)


def _bot_prompt(target: str | None, suite: Any) -> tuple[int, bool] | None:
    """(system prompt tokens, whether the greeting is in the model's history) of a bot lobeval can see into: the
    sample bot's LLM policy or a prompt target; None for any other target (its own model is its business)."""
    from lobeval.workflow.roles import DEFAULT_TARGET

    spec = target or DEFAULT_TARGET
    if spec == DEFAULT_TARGET:
        from lobeval.samples.support_tickets.llm_policy import SYSTEM_PROMPT

        return count(SYSTEM_PROMPT), True
    if spec.endswith(".json"):
        from lobeval.targets.prompt_target import read_config

        return count(read_config(Path(spec)).system_prompt), False
    return None


def _notes(models: dict[str, str | None], bot: tuple[int, bool] | None, user: str) -> list[str]:
    prices = load_prices()
    notes = [f"{role}: {_priced(model, prices.get(model)) if model else 'no model configured: offline, free'}"
             for role, model in models.items()]
    if bot is None:
        notes.append("the bot's own model is inside the target: not estimated (its requests are its business)")
    if user != "llm":
        notes.append("the scripted user asks no model")
    notes.append("assumed token sizes (known only once the bot talks): "
                 + ", ".join(f"{name} {value}" for name, value in ASSUMED.items()))
    notes.append("tokens counted with cl100k_base (lobeval.core.tokens); prompt caching as OpenAI documents it")
    return notes


def _priced(model: str, price: dict[str, float] | None) -> str:
    """A role's model and the price the estimate assumed for it."""
    if price is None:
        return f"{model}, no price known: its cost is unknown (give it in LOBEVAL_PRICES; docs/models.md)"
    cached = f", cached prompt {price['cached_input']:g}" if "cached_input" in price else ""
    return f"{model} at USD {price['input']:g} prompt{cached}, {price['output']:g} completion per 1M tokens"


def format_estimate(found: Estimate) -> list[str]:
    """The estimate as printed: a row per role, the total, judging against the bot, then what it assumed."""
    rows = found.rows()
    unpriced = [row["role"] for row in rows if row["cost_usd"] is None]
    total = _total_usd(rows)
    width = max([30, *(len(row["role"]) + 2 for row in rows)])
    ends = [{row["role"]: row for row in end.rows()} for end in found.range or ()]
    lines = [f"estimate for {found.conversations} conversations (nothing sent, nothing written), {found.basis}:",
             f"  {'role':<{width}}{'requests':>9}{'prompt tok':>12}{'cached':>9}{'compl. tok':>12}{'USD':>10}{'USD/conv':>10}"
             + (f"{'requests range':>17}{'USD range':>19}" if ends else "")]
    for row in rows:
        usd = "unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}"
        each = "" if row["cost_usd"] is None else f"{row['per_conversation_usd']:.5f}"
        lines.append(f"  {row['role']:<{width}}{row['requests']:>9}{row['prompt_tokens']:>12}{row['cached_tokens']:>9}"
                     f"{row['completion_tokens']:>12}{usd:>10}{each:>10}" + _range_text(row["role"], ends))
    if not rows:
        lines.append("  no model request: every role runs offline")
    lines.append(f"  {'total':<{width}}{sum(r['requests'] for r in rows):>9}{sum(r['prompt_tokens'] for r in rows):>12}"
                 f"{sum(r['cached_tokens'] for r in rows):>9}{sum(r['completion_tokens'] for r in rows):>12}"
                 f"{total:>10}" + (f"  (no price for: {', '.join(unpriced)})" if unpriced else ""))
    if ends:
        totals = [(sum(row["requests"] for row in end.values()), _total_usd(list(end.values()))) for end in ends]
        lines.append(f"  range of the total: {totals[0][0]} .. {totals[1][0]} requests, USD {totals[0][1]} .. "
                     f"{totals[1][1]} ({' .. '.join(LAYOUTS.values())})")
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


def _range_text(role: str, ends: list[dict[str, dict[str, Any]]]) -> str:
    """A role's requests and USD at both ends of the range; empty without a range."""
    if not ends:
        return ""
    rows = [end.get(role) or {"requests": 0, "cost_usd": 0.0} for end in ends]
    usd = " .. ".join("unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}" for row in rows)
    return f"{rows[0]['requests']:>9} .. {rows[1]['requests']:<5}{usd:>19}"


def _total_usd(rows: list[dict[str, Any]]) -> str:
    """The cost of `rows` together: "unknown" when a role has no price (never a partial sum shown as the whole)."""
    costs = [row["cost_usd"] for row in rows]
    return "unknown" if None in costs else f"{sum(costs):.4f}"
