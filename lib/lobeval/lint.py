"""`lobeval lint`: find test cases that no agent could pass, or that any agent would pass.

For each case: the expected calls replayed as a perfect agent would make them must score
Success 1; an empty conversation must score Success 0 unless the case expects nothing; the
expected calls must fit the suite's tools; with a target, the replayed calls must succeed there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lobeval.llm import run_sync
from lobeval.records import read_cases
from lobeval.scoring import Rules, concrete, resolver, score_conversation
from lobeval.suite import function_key, load_suite


def perfect_conversation(case: dict[str, Any]) -> dict[str, Any]:
    """The expected calls made in order, each reference answered by the result it points at, and every
    expected output said."""
    calls: list[dict[str, Any]] = []
    for position, call in enumerate(case.get("expected_function_calls") or []):
        arguments = concrete(call.get("arguments") or {}, resolver(calls))
        calls.append({"functionName": call["functionName"], "arguments": arguments,
                      "result": _results_referenced(case, position), "error": None, "turn": position + 1})
    return {"case_id": case["case_id"], "trial": 0, "function_calls": calls,
            "messages": [{"role": "assistant", "content": " ".join(map(str, case.get("expected_outputs") or []))}],
            "termination": {"reason": "user_finished", "turns": len(calls) + 1}}


def _results_referenced(case: dict[str, Any], position: int) -> dict[str, Any]:
    """A result for the expected call at `position` holding every path later calls refer to in it."""
    calls = case.get("expected_function_calls") or []
    name = function_key(calls[position]["functionName"])
    result: dict[str, Any] = {}
    for later in calls[position + 1:]:
        for ref in _refs(later.get("arguments")):
            function, _, path = ref.partition(".result")
            if function_key(function) != name:
                continue
            node = result
            parts = [p for p in path.split(".") if p]
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            if parts:
                node[parts[-1]] = f"<{ref}>"
    return result


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict) and "$ref" in value:
        return [value["$ref"]]
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _refs(item)]
    return []


def case_problems(case: dict[str, Any], rules: Rules) -> list[tuple[str, str]]:
    """(field, problem) for one case."""
    problems = []
    expected = case.get("expected_function_calls") or []
    for position, call in enumerate(expected):
        where = f"expected_function_calls[{position}]"
        earlier = {function_key(c["functionName"]) for c in expected[:position]}
        for ref in _refs(call.get("arguments")):
            if function_key(ref.partition(".result")[0]) not in earlier:
                problems.append((f"{where}.arguments", f"$ref {ref!r} points at a function no earlier expected call makes"))
        if rules.tools:
            tool = rules.tools.get(function_key(call["functionName"]))
            if tool is None:
                problems.append((f"{where}.functionName", f"{call['functionName']!r} is not in tools.json"))
                continue
            properties = tool.get("function", {}).get("parameters", {}).get("properties", {})
            problems += [(f"{where}.arguments.{name}", f"{call['functionName']} has no parameter {name!r}")
                         for name in call.get("arguments") or {} if name not in properties]
        if function_key(call["functionName"]) in {function_key(f) for f in case.get("forbidden_function_calls") or []}:
            problems.append((f"{where}.functionName", f"{call['functionName']!r} is both expected and forbidden"))
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


async def _replay_problems(cases: list[dict[str, Any]], spec: str) -> dict[str, list[tuple[str, str]]]:
    from lobeval.evaluate import replay_expected
    from lobeval.targets import TargetError, load_target

    target = load_target(spec)
    found: dict[str, list[tuple[str, str]]] = {}
    try:
        for case in cases:
            session = None
            try:
                session = await target.start(case)
                replay = await replay_expected(session, case)
            except TargetError as exc:
                found[case["case_id"]] = [("target", str(exc))]
                continue
            finally:
                if session is not None:
                    await session.close()
            if replay is None:
                found[case["case_id"]] = [("target", f"{spec} offers no apply(): the expected calls cannot be replayed")]
                continue
            found[case["case_id"]] = [(f"expected_function_calls[{i}]", f"{call['functionName']} fails on the target: "
                                                                      f"{call['error']}")
                                      for i, call in enumerate(replay["calls"]) if call.get("error")]
    finally:
        await target.aclose()
    return found


def lint(dataset: str | Path, *, suite: str | Path | None = None, target: str | None = None) -> list[str]:
    """One message per problem, naming the file, the case and the field."""
    from lobeval.evaluate import make_rules

    rules = make_rules(load_suite(suite) if suite else None, [])
    cases = [case.model_dump() for case in read_cases(dataset)]
    replayed = run_sync(_replay_problems(cases, target)) if target else {}
    messages = []
    for case in cases:
        for field, problem in case_problems(case, rules) + replayed.get(case["case_id"], []):
            messages.append(f"{dataset}: case {case['case_id']}: field '{field}': {problem}")
    return messages
