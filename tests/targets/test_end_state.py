"""The end-state check (τ-bench style): expected calls replayed as a perfect agent, states compared."""
import asyncio
import copy

import pytest

from lobeval.targets.endstate import replay_cases, state_differences
from lobeval.evaluation.evaluate import evaluate
from lobeval.generation.generate import generate
from lobeval.core.records import state_changes, with_changes, write_jsonl
from lobeval.simulation.simulate import simulate_async
from lobeval.targets.targets import load_target
from lobeval.simulation.users import ScriptedUser
from helpers import SAMPLE_SUITE, read_jsonl
from http_target import serve

BOT = "lobeval.samples.support_tickets:SupportTicketBot"


def test_state_differences_ignore_generated_ids_and_timestamps():
    initial = {"tickets": {"T1": {"id": "T1", "priority": "Low", "updated_at": "t0"}}, "actions": {}}
    expected = {"tickets": {"T1": {"id": "T1", "priority": "High", "updated_at": "t1"},
                            "T2": {"id": "T2", "title": "A", "created_at": "t1"}},
                "actions": {"A1": {"id": "A1", "parent": "T2", "title": "x"}}}
    # The bot created an extra ticket first, so its IDs are shifted; it forgot the priority.
    actual = {"tickets": {"T1": {"id": "T1", "priority": "Low", "updated_at": "t9"},
                          "T2": {"id": "T2", "title": "Stray", "created_at": "t9"},
                          "T3": {"id": "T3", "title": "A", "created_at": "t9"}},
              "actions": {"A1": {"id": "A1", "parent": "T3", "title": "x"}}}
    assert state_differences(initial, expected, actual) == [
        {"path": "tickets.T1.priority", "expected": "High", "actual": "Low"},
        {"path": "tickets.<new T2>", "expected": None, "actual": {"id": "T2", "title": "Stray", "created_at": "t9"}}]
    assert state_differences(initial, expected, copy.deepcopy(expected)) == []


BEFORE = {"tickets": {"T1": {"priority": "Low"}, "T2": {"priority": "High"}}, "version": 1, "gone": {"x": 1}}
AFTER = {"tickets": {"T1": {"priority": "High"}, "T3": {"priority": "Low"}}, "version": 2, "new": {"y": 2}}


def test_state_changes_keep_what_changed_and_give_back_the_whole_state():
    changes = state_changes(BEFORE, AFTER)
    assert changes == {"gone": None, "new": {"y": 2}, "tickets": {"T1": {"priority": "High"}, "T2": None,
                                                                 "T3": {"priority": "Low"}}, "version": 2}
    assert with_changes(BEFORE, changes) == {**AFTER, "gone": None}
    assert state_changes(BEFORE, copy.deepcopy(BEFORE)) == {}
    assert state_changes(None, AFTER) is None and state_changes(BEFORE, None) is None


def test_sample_bot_applies_calls_in_process_and_over_http():
    calls = [{"functionName": "get_support_ticket", "arguments": {"ticket_id": "TKT-1001"}},
             {"functionName": "get_support_ticket", "arguments": {"ticket_id": "TKT-0"}}]

    async def apply(target):
        session = await target.start({"case_id": "x"})
        done = await session.apply(calls)
        await session.close()
        await target.aclose()
        return done

    for done in (asyncio.run(apply(load_target(BOT))),):
        assert done[0]["result"]["id"] == "TKT-1001" and done[0]["error"] is None
        assert done[1]["result"] is None and "there is no ticket 'TKT-0'" in done[1]["error"]
    from lobeval.samples.support_tickets import SupportTicketBot

    with serve(SupportTicketBot()) as server:
        done = asyncio.run(apply(load_target(server.url)))
    assert [c["error"] is None for c in done] == [True, False]


class BrokenBot:
    """Fails as soon as a conversation starts."""

    async def start(self, case: dict):
        raise RuntimeError("backend down")


def test_replay_cases_gives_each_replay_none_without_apply_and_the_error_of_a_failing_target():
    case = {"case_id": "c-1", "expected_function_calls": [
        {"functionName": "get_support_ticket", "arguments": {"ticket_id": "TKT-1001"}},
        {"functionName": "get_support_ticket", "arguments": {"ticket_id": {"$ref": "get_support_ticket.result.id"}}},
        {"functionName": "get_support_ticket", "arguments": {"ticket_id": "TKT-0"}}]}
    broken = f"{__name__}:BrokenBot"
    found = asyncio.run(replay_cases({(BOT, "c-1"): case, ("toy_leave_bot:LeaveBot", "c-1"): case,
                                      (broken, "c-1"): case}))
    replay = found[BOT, "c-1"]
    assert [call["arguments"] for call in replay["calls"]] == [{"ticket_id": "TKT-1001"}] * 2 + [{"ticket_id": "TKT-0"}]
    assert replay["replay_errors"] == [{"functionName": "get_support_ticket", "error": replay["calls"][2]["error"]}]
    assert "there is no ticket 'TKT-0'" in replay["calls"][2]["error"]
    assert replay["expected"] == replay["initial"]      # look-ups change nothing
    assert found["toy_leave_bot:LeaveBot", "c-1"] is None
    assert found[broken, "c-1"] == {
        "error": "replaying the expected calls failed: start failed: RuntimeError: backend down"}


def test_a_target_without_apply_gives_none():
    import toy_leave_bot  # noqa: F401  (a bot without apply)
    from toy_leave_bot import LeaveBot

    async def apply(target):
        session = await target.start({"case_id": "x"})
        return await session.apply([{"functionName": "f", "arguments": {}}])

    assert asyncio.run(apply(load_target("toy_leave_bot:LeaveBot"))) is None
    with serve(LeaveBot()) as server:
        assert asyncio.run(apply(load_target(server.url))) is None


@pytest.mark.slow
def test_evaluate_reports_end_state_differences(tmp_path):
    dataset = generate(SAMPLE_SUITE, tmp_path / "d.jsonl", cases_per_scenario=1, seed=5).path
    asyncio.run(simulate_async(dataset, tmp_path / "c.jsonl", target=load_target(BOT), user=ScriptedUser(),
                               scenarios=["escalate_ticket", "create_ticket"], progress=False))
    records = read_jsonl(tmp_path / "c.jsonl")
    escalated = next(r for r in records if r["scenario_name"] == "escalate_ticket")
    ticket_id = escalated["function_calls"][-1]["arguments"]["ticket_id"]
    escalated["state_changes"]["tickets"][ticket_id]["priority"] = "Low"   # as if the update had not happened
    write_jsonl(tmp_path / "c.jsonl", records)
    rows = {r["scenario_name"]: r for r in evaluate(dataset, tmp_path / "c.jsonl", tmp_path / "r.json",
                                                      suite=SAMPLE_SUITE, progress=False).results["rows"]}
    assert rows["create_ticket"]["state"] == {"differences": [], "replay_errors": []}
    differences = rows["escalate_ticket"]["state"]["differences"]
    assert [d["path"] for d in differences] == [f"tickets.{ticket_id}.priority"]
    assert differences[0]["actual"] == "Low" and differences[0]["expected"] != "Low"
