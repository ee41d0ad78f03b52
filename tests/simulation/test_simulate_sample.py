"""The offline pair — scripted user and the sample bot's rules policy — succeeds in every scenario, by the scorer."""
import asyncio
from datetime import date, timedelta

import pytest

from lobeval.evaluation.evaluate import evaluate
from lobeval.generation.generate import generate
from lobeval.simulation.simulate import simulate_async
from lobeval.targets.targets import load_target
from lobeval.simulation.users import ScriptedUser
from helpers import SAMPLE_SUITE, read_jsonl


@pytest.mark.slow
def test_scripted_user_and_rules_bot_complete_every_sample_scenario_but_the_deliberate_weakness(tmp_path):
    dataset = generate(SAMPLE_SUITE, tmp_path / "d.jsonl", cases_per_scenario=3, seed=11).path
    target = load_target("lobeval.samples.support_tickets:SupportTicketBot")
    asyncio.run(simulate_async(dataset, tmp_path / "c.jsonl", target=target, user=ScriptedUser(), progress=False))
    conversations = read_jsonl(tmp_path / "c.jsonl")
    results = evaluate(dataset, tmp_path / "c.jsonl", tmp_path / "r.json", suite=SAMPLE_SUITE, progress=False).results
    assert results["counts"]["scored"] == len(conversations) == 39
    imperfect = [row for row in results["rows"]
                 if row["Success"] != 1 or row["Precision_fn"] != 1 or row["Reliability"] != 1]
    # only the sample bot's deliberate weakness (rules.sent): every moved due date arrives one day early
    assert sorted(row["case_id"] for row in imperfect) == [f"reassign_action_item-00{n}" for n in (1, 2, 3)]
    for row in imperfect:
        [wrong] = row["wrong_arguments"]
        assert (wrong["functionName"], wrong["argument"]) == ("update_action_item", "due_date")
        expected = date.fromisoformat(wrong["expected"])
        assert date.fromisoformat(wrong["actual"]) == expected - timedelta(days=1)
        assert row["unpaired_actual"] == [] and row["Precision_fn"] == 1
    assert {s["scenario_name"]: s["pass^1"] for s in results["scenarios"]} == {
        s["scenario_name"]: 0.0 if s["scenario_name"] == "reassign_action_item" else 1.0 for s in results["scenarios"]}
    out_of_scope = [c for c in conversations if c["scenario_name"] == "out_of_scope_request"]
    assert all(c["function_calls"] == [] for c in out_of_scope)
