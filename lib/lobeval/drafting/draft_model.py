"""Scenarios a model proposes (`lobeval draft` with a model configured): from the tools, a sample of the data
and an optional text about the bot; and the goal of a recorded conversation, summarised for its regression case. Each proposal is read as a template and goes through the same gates as an
offline draft (lobeval.drafting.draft.prove); the model only proposes."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lobeval.drafting.draft import Draft
from lobeval.core.errors import ConfigError
from lobeval.core.records import read_text
from lobeval.workspace.suite import Suite

SAMPLE_ROWS = 3
"""Rows of each entity the model is shown."""
MAX_PROPOSALS = 8

PROMPT = """You draft test scenarios for a company's chatbot, which acts for its users through the functions below.
Propose at most {limit} new scenarios that the drafts already made do not cover: tasks of several steps in one
conversation, different personas (how the person talks), and the mistakes users make (a wrong value first,
corrected when the assistant objects).

Answer with one JSON object, {{"scenarios": [...]}}, each scenario a template with these fields:
- "scenario_name": a new snake_case name;
- "user_instructions": what the person wants, in plain words (never a function's or an argument's name), with
  {{entity.column}} placeholders for values from the business data;
- "task_completion": what is true when the task is done;
- "persona": how the person talks, in a sentence;
- "user_style": "conversational", "terse", "one_fact" or "all_in_one";
- "user_mistakes": {{"argument": the wrong value the person gives first}} (or {{}});
- "expected_function_calls": the calls the assistant must make, in order: {{"functionName": ..., "arguments":
  {{argument: "{{entity.column}}", a literal, or {{"$ref": "<function>.result.<path>"}} for a value an earlier
  call returned}}}};
- "expected_outputs": facts the assistant must tell the person (or []);
- "forbidden_function_calls": functions that must not be called (or []);
- "ordered": true when the calls must happen in that order.

Functions (JSON):
{tools}

Business data: each entity with its id column, parent and first rows (JSON):
{data}

Drafts already made: {existing}

About the bot:
{about}"""


SUMMARY_PROMPT = """You read what a person wrote to a company's chatbot and say, in one to three plain sentences, what
they wanted done, with every value they gave (names, numbers, dates, identifiers), as an instruction to someone who
will ask the chatbot for the same thing: "Ask for ...". Answer with one JSON object: {"goal": "..."}.

The person's messages, in order (JSON):
"""


def summariser(client: Any) -> Callable[[list[str]], str]:
    """A conversation's user messages → the user's goal, as the model summarises it."""
    from lobeval.models.llm import run_sync

    def summarise(said: list[str]) -> str:
        messages = [{"role": "system", "content": SUMMARY_PROMPT + json.dumps(said, ensure_ascii=False)},
                    {"role": "user", "content": "Summarise the goal."}]
        return run_sync(client.ask_json(messages, _goal))
    return summarise


def _goal(content: str) -> str:
    found = json.loads(content)
    goal = found.get("goal") if isinstance(found, dict) else None
    if not isinstance(goal, str) or not goal.strip():
        raise ValueError('expected {"goal": "..."}')
    return goal.strip()


def prompt(suite: Suite, existing: list[str], about: str | None) -> str:
    tools = [{"effect": tool["effect"], **tool["function"]} for tool in suite.tools.values()]
    data = {name: {"id": entity.id, "parent": entity.parent, "rows": entity.records[:SAMPLE_ROWS]}
            for name, entity in suite.entities.items()}
    return PROMPT.format(limit=MAX_PROPOSALS, tools=json.dumps(tools, ensure_ascii=False),
                         data=json.dumps(data, ensure_ascii=False, default=str), existing=", ".join(existing) or "none",
                         about=about or "(nothing more)")


def parse(content: str) -> list[dict[str, Any]]:
    """The proposals of a reply; ValueError when it is not {"scenarios": [objects]} (the model is asked again)."""
    found = json.loads(content)
    scenarios = found.get("scenarios") if isinstance(found, dict) else None
    if not isinstance(scenarios, list) or not all(isinstance(s, dict) for s in scenarios):
        raise ValueError('expected {"scenarios": [template, ...]}')
    return scenarios[:MAX_PROPOSALS]


def about_text(path: str | Path | None) -> str | None:
    return read_text(Path(path)) if path else None


def model_drafts(suite: Suite, client: Any, existing: list[str], about: str | None) -> list[Draft]:
    """The model's proposals as drafts (kind "proposed"), each still to be proven. A proposal without a usable
    name is named `proposed_<n>`, and fails its gates."""
    from lobeval.models.llm import run_sync

    messages = [{"role": "system", "content": prompt(suite, existing, about)},
                {"role": "user", "content": "Propose the scenarios."}]
    scenarios = run_sync(client.ask_json(messages, parse))
    drafts = []
    for number, template in enumerate(scenarios, start=1):
        name = template.get("scenario_name")
        if not isinstance(name, str) or not name:
            template = {**template, "scenario_name": f"proposed_{number}"}
        drafts.append(Draft(template, "proposed"))
    return drafts


def drafter(about: str | Path | None) -> Any:
    """The model client that proposes (the judge's model: LOBEVAL_JUDGE_MODEL, else LOBEVAL_MODEL), or None
    offline; `--about` needs one."""
    from lobeval.workflow.roles import model_client

    client = model_client("judge", cache=True, concurrency=1)
    if client is None and about:
        raise ConfigError(f"--about {about}: proposals need a model: set LOBEVAL_JUDGE_MODEL or LOBEVAL_MODEL "
                          f"(docs/models.md)")
    return client
