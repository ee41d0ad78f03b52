"""How often the scripted user hears which value a real bot asks for: on τ²-bench's airline conversations
(/work/shared/real, written by real bots, none by this project), each bot message that asks something and is
answered by the customer with a value no one said before and a later call of the bot sends (the customer's user id,
a reservation id, a flight number), scored by `users.asked_fields` over every argument of τ²'s airline tools, named
with their docstrings' descriptions as a suite's tools.json would give them.

    .venv/bin/python tests/asked_figures.py        (PYTHONPATH=lib in a worktree)

prints: heard right (it answers with a value the customer's answer gives), heard only other arguments, not placed
(the scripted user would say it is not sure), over the questions counted (the bot's greeting left out). Guessed, and said so: that the customer's next message
answers the bot's question (a customer may give more, or other, values than asked).
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from lobeval.simulation.users import Name, asked_fields, asking, content, described, label, without_code

REAL = Path("/work/shared/real")


def airline_names() -> list[Name]:
    """Every argument of τ²'s airline tools (the @is_tool methods), with the description its docstring gives."""
    tree = ast.parse((REAL / "tau2_domains" / "airline" / "tools.py").read_text())
    found: dict[str, Name] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or not any("is_tool" in ast.unparse(d) for d in node.decorator_list):
            continue
        docs = dict(re.findall(r"^\s*(\w+):\s*(.+)$", (ast.get_docstring(node) or "").split("Args:", 1)[-1],
                               re.MULTILINE))
        for argument in node.args.args[1:]:
            name = argument.arg
            description = content(without_code(described(docs.get(name), ""))) if name in docs else ()
            found.setdefault(name, Name(name, content(label(name)), description))
    return list(found.values())


def text_of(message: dict) -> str:
    text = message.get("content") or ""
    try:   # some bots wrap their words in JSON
        wrapped = json.loads(text)
        return wrapped.get("message", text) if isinstance(wrapped, dict) else text
    except (ValueError, TypeError):
        return text


def scalars(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in scalars(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def questions(simulation: dict) -> list[tuple[str, set[str]]]:
    """(the bot's message, the arguments whose values the customer's answer first states) of one conversation."""
    messages = simulation.get("messages") or []
    sent = [(position, argument, value) for position, m in enumerate(messages)
            for call in m.get("tool_calls") or [] for argument, v in (call.get("arguments") or {}).items()
            for value in scalars(v) if len(value) >= 3]
    found, said = [], ""
    for position, (bot, customer) in enumerate(zip(messages, messages[1:])):
        said += " " + text_of(bot)
        if bot.get("role") != "assistant" or customer.get("role") != "user" or not asking(text_of(bot)) or (
                position == 0):   # the greeting asks nothing in particular
            continue
        answer = customer.get("content") or ""
        given = {argument for at, argument, value in sent if at > position
                 and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", answer, re.IGNORECASE)
                 and value.casefold() not in said.casefold()}
        if given:
            found.append((text_of(bot), given))
    return found


def main() -> int:
    names = airline_names()
    right = wrong = unplaced = 0
    for path in sorted((REAL / "trajectories").glob("*airline*.json")):
        data = json.loads(path.read_text())
        for simulation in data["simulations"] if isinstance(data, dict) else data:
            for text, given in questions(simulation):
                heard = set(asked_fields(text, names))
                right += bool(heard & given)
                wrong += bool(heard) and not heard & given
                unplaced += not heard
    total = right + wrong + unplaced
    print(f"{total} questions of real bots answered with a value: heard right {right} ({right / total:.1%}), "
          f"another argument {wrong} ({wrong / total:.1%}), not placed {unplaced} ({unplaced / total:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
