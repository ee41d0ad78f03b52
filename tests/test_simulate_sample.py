"""The offline pair — scripted user and the sample bot's rules policy — completes every scenario."""
import asyncio
import json

import pytest

from lobeval.generate import generate
from lobeval.records import read_cases
from lobeval.simulate import simulate_async
from lobeval.targets import load_target
from lobeval.users import ScriptedUser
from helpers import SAMPLE_SUITE, read_jsonl

WRITES = {t["function"]["name"] for t in json.loads((SAMPLE_SUITE / "tools.json").read_text()) if t["effect"] == "write"}


def done_as_expected(case, conversation):
    """Every expected write made successfully with the expected values (a $ref resolved to the earlier
    result), every expected output said, no other write. Issue #5's scorer is the full rule set."""
    calls = [c for c in conversation["function_calls"] if not c["error"]]
    results = {c["functionName"]: c["result"] for c in calls}

    def value(v):
        if isinstance(v, dict) and "$ref" in v:
            function, _, key = v["$ref"].split(".")
            return results.get(function, {}).get(key)
        return v

    expected = [e for e in case.expected_function_calls if e["functionName"] in WRITES]
    made = [(c["functionName"], c["arguments"]) for c in calls if c["functionName"] in WRITES]
    wanted = [(e["functionName"], {k: value(v) for k, v in e["arguments"].items()}) for e in expected]
    said = " ".join(m["content"] for m in conversation["messages"] if m["role"] == "assistant").lower()
    return made == wanted and all(o.lower() in said for o in case.expected_outputs)


@pytest.mark.slow
def test_scripted_user_and_rules_bot_complete_every_sample_scenario(tmp_path):
    dataset = generate(SAMPLE_SUITE, tmp_path / "d.jsonl", cases_per_scenario=3, seed=11).path
    target = load_target("lobeval.samples.support_tickets:SupportTicketBot")
    asyncio.run(simulate_async(dataset, tmp_path / "c.jsonl", target=target, user=ScriptedUser(), progress=False))
    cases = {case.case_id: case for case in read_cases(dataset)}
    conversations = read_jsonl(tmp_path / "c.jsonl")
    assert len(conversations) == len(cases) == 39
    failed = [c["case_id"] for c in conversations
              if c["termination"]["reason"] != "user_finished" or not done_as_expected(cases[c["case_id"]], c)]
    assert failed == []
    out_of_scope = [c for c in conversations if c["scenario_name"] == "out_of_scope_request"]
    assert all(c["function_calls"] == [] for c in out_of_scope)
