"""`lobeval lint`: find test cases that no agent could pass, or that any agent would pass.

For each case: the expected calls replayed as a perfect agent would make them must score
Success 1; an empty conversation must score Success 0 unless the case expects nothing; the
expected calls must fit the suite's tools; with a target, the replayed calls must succeed there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lobeval.targets.endstate import replay_cases
from lobeval.models.llm import run_sync
from lobeval.core.operators import concrete, refs, resolver, split_ref
from lobeval.core.records import expected_call_problems, read_cases
from lobeval.scoring.scoring import Rules, expects_nothing, score_conversation
from lobeval.workspace.suite import load_suite
from lobeval.core.vocabulary import function_key


PERFECT_DECLINE = "Sorry, I can't help with that."
"""What a perfect agent says to a case that expects nothing (scoring.expects_nothing)."""


def perfect_conversation(case: dict[str, Any]) -> dict[str, Any]:
    """The expected calls made in order, each reference answered by the result it points at, and every
    expected output said; a case that expects nothing declined."""
    calls: list[dict[str, Any]] = []
    for position, call in enumerate(case.get("expected_function_calls") or []):
        arguments = concrete(call.get("arguments") or {}, resolver(calls))
        calls.append({"functionName": call["functionName"], "arguments": arguments,
                      "result": _results_referenced(case, position), "error": None, "turn": position + 1})
    return {"case_id": case["case_id"], "trial": 0, "function_calls": calls,
            "messages": [{"role": "user", "content": case.get("user_instructions") or ""},
                         {"role": "assistant", "content": PERFECT_DECLINE if expects_nothing(case) else
                          " ".join(map(str, case.get("expected_outputs") or []))}],
            "termination": {"reason": "user_finished", "turns": len(calls) + 1}}


def _results_referenced(case: dict[str, Any], position: int) -> dict[str, Any]:
    """A result for the expected call at `position` holding every path later calls refer to in it."""
    calls = case.get("expected_function_calls") or []
    name = function_key(calls[position]["functionName"])
    result: dict[str, Any] = {}
    for later in calls[position + 1:]:
        for ref in refs(later.get("arguments")):
            function, path = split_ref(ref)
            if function_key(function) != name or not path:
                continue
            node = result
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = f"<{ref}>"
    return result


def case_problems(case: dict[str, Any], rules: Rules) -> list[tuple[str, str]]:
    """(field, problem) for one case; the tools are checked when the rules know them."""
    problems = expected_call_problems(case.get("expected_function_calls") or [], rules.tools or None,
                                      case.get("forbidden_function_calls") or [])
    perfect = score_conversation(perfect_conversation(case), case, rules)
    if perfect["Success"] != 1:
        failed = [name for name, ok in perfect["checks"].items() if not ok]
        problems.append(("expected_function_calls", f"a perfect agent scores Success 0 (failed: {', '.join(failed)})"))
    empty = score_conversation({"case_id": case["case_id"], "function_calls": [], "messages": [],
                                "termination": {"reason": "user_finished"}}, case, rules)
    expects_something = perfect["pairs"] and any(not p["optional"] for p in perfect["pairs"]) or case.get("expected_outputs")
    if empty["Success"] == 1 and expects_something:
        problems.append(("expected_function_calls", "an empty conversation scores Success 1"))
    return problems


def _replay_problems(replay: dict[str, Any] | None, spec: str) -> list[tuple[str, str]]:
    """(field, problem) for one case's expected calls replayed on the target `spec` (see replay_cases)."""
    if replay is None:
        return [("target", f"{spec} offers no apply(): the expected calls cannot be replayed")]
    if "error" in replay:
        return [("target", replay["error"])]
    return [(f"expected_function_calls[{i}]", f"{call['functionName']} fails on the target: {call['error']}")
            for i, call in enumerate(replay["calls"]) if call.get("error")]


def lint(dataset: str | Path, *, suite: str | Path | None = None, target: str | None = None) -> list[str]:
    """One message per problem, naming the file, the case and the field."""
    from lobeval.evaluation.evaluate import make_rules

    rules = make_rules(load_suite(suite) if suite else None, [])
    cases = [case.model_dump() for case in read_cases(dataset)]
    replays = run_sync(replay_cases({(target, case["case_id"]): case for case in cases})) if target else {}
    messages = []
    for case in cases:
        replayed = _replay_problems(replays[target, case["case_id"]], target) if target else []
        for field, problem in case_problems(case, rules) + replayed:
            messages.append(f"{dataset}: case {case['case_id']}: field '{field}': {problem}")
    return messages
