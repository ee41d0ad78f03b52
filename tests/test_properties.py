"""Any JSON value in any field of a case, a conversation, a label or a results record gives a result or
bad input (exit 2, one line naming the file and the field), never another exception.

Each property puts a generated value at one place of a good record and runs the commands that read
it. The examples are derandomised, so every run tries the same ones; scoring goes straight to
scoring.score_conversation instead of through azure-ai-evaluation's evaluate(), which only wraps it
and would make every example take a second.
"""
from __future__ import annotations

import asyncio
import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lobeval.evaluation.evaluate
from lobeval.cli import main
from lobeval.core.records import Case
from lobeval.scoring.scoring import score_conversation
from lobeval.simulation.simulate import converse
from lobeval.targets.targets import load_target
from lobeval.simulation.users import ScriptedUser
from helpers import CASE, CONVERSATION, LABEL, RESULTS, make_run, write_lines

EXAMPLES = {"cases": 250, "conversations": 500, "labels": 150, "results": 250}
settings.register_profile("lobeval", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile("lobeval")

LEAVES = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
          | st.text(max_size=12))
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=3), max_leaves=8)
TELLING = st.sampled_from(["", "yes", "user_finished", "create_ticket", "ticket_and_action-001", 0, -1, 1.5, True,
                           [], {}, [{}], {"$ref": 5}, {"$ref": "create_ticket.result.id"}, {"$oneOf": 3},
                           {"$oneOf": []}, {"$match": "fuzzy"}, {"$match": "any"}, {"reason": "tired"},
                           {"user": {"cost_usd": "1"}}, {"tickets": []}, "{\"a\": 1}", "[1]"])
VALUES = JSON | TELLING

CASE_PLACES = [(key,) for key in CASE] + [
    ("expected_function_calls", 0), ("expected_function_calls", 0, "functionName"),
    ("expected_function_calls", 0, "arguments"), ("expected_function_calls", 0, "arguments", "title"),
    ("expected_function_calls", 1, "arguments", "ticket_id"), ("expected_function_calls", 0, "optional"),
    ("business_data", "ticket"), ("business_data", "ticket", "id"), ("user_mistakes", "title"),
    ("expected_outputs", 0), ("something_else",)]
CONVERSATION_PLACES = [(key,) for key in CONVERSATION] + [
    ("messages", 0), ("messages", 1, "role"), ("messages", 1, "content"), ("messages", 1, "function_calls"),
    ("function_calls", 0), ("function_calls", 0, "functionName"), ("function_calls", 0, "arguments"),
    ("function_calls", 0, "arguments", "title"), ("function_calls", 0, "result"), ("function_calls", 0, "error"),
    ("function_calls", 0, "turn"), ("termination", "reason"), ("termination", "turns"), ("usage", "user"),
    ("usage", "user", "cost_usd"), ("usage", "target", "calls"), ("expected_function_calls",),
    ("expected_outputs",), ("allowed_function_calls",), ("forbidden_function_calls",), ("ordered",),
    ("task_completion",), ("user_instructions",)]
LABEL_PLACES = [(key,) for key in LABEL] + [("argument",)]
RESULTS_PLACES = [(key,) for key in RESULTS] + [
    ("metrics", "Reliability"), ("counts", "conversations"), ("counts", "errors"), ("judges", "coverage"),
    ("judges", "errored_conversations"), ("judges", "coverage", "judge.final_score"), ("rows", 0)] + [
    ("rows", 0, key) for key in RESULTS["rows"][0]] + [("rows", 0, "judges", "final_score"), ("rows", 0, "usage")]
# A value in one field that can make another part of the run wrong, and what the message names then.
RELATED = {"kind": ("field 'argument",), "forbidden_function_calls": ("field 'expected_function_calls",),
           "expected_function_calls": ("field 'case_id",),   # null: no inline case, and no dataset
           "rows": ("share no scored",)}                     # compare: the runs share no conversation


def put(record: dict[str, Any], place: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A copy of `record` with `value` at `place` (creating objects on the way)."""
    changed = copy.deepcopy(record)
    holder: Any = changed
    for key in place[:-1]:
        holder = holder[key] if isinstance(holder, list) or key in holder else holder.setdefault(key, {})
    holder[place[-1]] = value
    return changed


def named(place: tuple[str | int, ...]) -> tuple[str, ...]:
    """What a message about a value at `place` must name: the field, or for a whole results row the row."""
    if place[0] == "rows":
        row = f"field '{place[2]}" if len(place) > 2 else "row "
        return (row, "field 'rows", *RELATED["rows"])
    return (f"field '{place[0]}", *RELATED.get(str(place[0]), ()))


def check(status: int, err: str, files: tuple[Path, ...], place: tuple[str | int, ...],
          allowed: tuple[int, ...] = (0, 2)) -> None:
    assert status in allowed, err
    if status == 2:
        assert len(err.strip().splitlines()) == 1 and any(str(file) in err for file in files), err
        assert any(name in err for name in named(place)), err


@pytest.fixture(autouse=True)
def direct_scoring(monkeypatch):
    monkeypatch.setattr(lobeval.evaluation.evaluate, "score_with_azure",
                        lambda work, rules: ([score_conversation(c, k, rules) for c, k in work], None))


def run(argv: list[Any], capsys) -> tuple[int, str]:
    """The command's exit status and what it said on standard error."""
    status = main([str(arg) for arg in argv])
    return status, capsys.readouterr().err


@settings(max_examples=EXAMPLES["cases"])
@given(place=st.sampled_from(CASE_PLACES), value=VALUES)
def test_any_value_in_a_case_is_scored_simulated_or_named(capsys, place, value):
    record = put(CASE, place, value)
    with tempfile.TemporaryDirectory() as tmp:
        dataset = write_lines(Path(tmp) / "d.jsonl", [record])
        conversations = write_lines(Path(tmp) / "c.jsonl", [CONVERSATION])
        status, err = run(["evaluate", "--dataset", dataset, "--conversations", conversations,
                           "--out", Path(tmp) / "r.json"], capsys)
        # a case_id changed leaves the conversation with no case: that file is then at fault
        check(status, err, (dataset, conversations) if place == ("case_id",) else (dataset,), place)
    if status == 0:
        simulated = asyncio.run(converse(Case.model_validate(record), 0, load_target("toy_leave_bot:LeaveBot"),
                                         ScriptedUser(), max_turns=4))
        assert simulated["termination"]["reason"] in ("user_finished", "max_turns")


@settings(max_examples=EXAMPLES["conversations"])
@given(place=st.sampled_from(CONVERSATION_PLACES), value=VALUES, with_dataset=st.booleans())
def test_any_value_in_a_conversation_is_scored_or_named(capsys, place, value, with_dataset):
    record = put(CONVERSATION, place, value)
    if not with_dataset:
        record.setdefault("expected_function_calls", CASE["expected_function_calls"])
    with tempfile.TemporaryDirectory() as tmp:
        dataset = write_lines(Path(tmp) / "d.jsonl", [CASE])
        conversations = write_lines(Path(tmp) / "c.jsonl", [record])
        status, err = run(["evaluate", *(["--dataset", dataset] if with_dataset else []),
                           "--conversations", conversations, "--out", Path(tmp) / "r.json"], capsys)
        check(status, err, (conversations,), place)


@settings(max_examples=EXAMPLES["labels"])
@given(place=st.sampled_from(LABEL_PLACES), value=VALUES)
def test_any_value_in_a_label_is_applied_or_named(capsys, place, value):
    with tempfile.TemporaryDirectory() as tmp:
        dataset = write_lines(Path(tmp) / "d.jsonl", [CASE])
        conversations = write_lines(Path(tmp) / "c.jsonl", [CONVERSATION])
        labels = write_lines(Path(tmp) / "l.jsonl", [put(LABEL, place, value)])
        status, err = run(["evaluate", "--dataset", dataset, "--conversations", conversations, "--labels", labels,
                           "--out", Path(tmp) / "r.json"], capsys)
        check(status, err, (labels,), place)


@settings(max_examples=EXAMPLES["results"])
@given(place=st.sampled_from(RESULTS_PLACES), value=VALUES)
def test_any_value_in_a_results_file_is_gated_compared_or_named(capsys, place, value):
    with tempfile.TemporaryDirectory() as tmp:
        base = make_run(Path(tmp), "base")
        candidate = make_run(Path(tmp), "cand", put(RESULTS, place, value))
        results = candidate / "evaluation_results.json"
        status, err = run(["gate", "--run", candidate, "--min", "Reliability=0.5", "--max-error-rate", "0.5"], capsys)
        check(status, err, (results,), place, allowed=(0, 1, 2))
        status, err = run(["compare", base, candidate], capsys)
        check(status, err, (results,), place)
