"""`lobeval estimate` and `lobeval run --estimate`: the expected requests, tokens and cost by role, before
anything is spent, checked against what the role-playing fake endpoint bills for the same run."""
from __future__ import annotations

from collections import Counter

import pytest

from helpers import REPO
from lobeval.estimate import ASSUMED, LAYOUTS, conversation_events, estimate
from lobeval.records import Case, read_results
from lobeval.runs import read_config
from lobeval.tokens import count
from roleplay import Roleplay, role_of
from test_model_run import cli, model_endpoint

PRICE = {"input": 5.00, "output": 15.00, "cached_input": 2.50}
GROUP = {"user": "simulated user", "bot": "bot (target)", "judges": "judge: per_turn+goal+user_review+commitments",
         "root_causes": "root causes", "completion_judge": "completion check"}


def case(**fields):
    return Case.model_validate({"case_id": "c-1", "scenario_name": "s", "user_instructions": "Update TKT-1.",
                                **fields})


def test_a_conversation_is_laid_out_at_both_ends_of_the_range():
    update = {"functionName": "update_support_ticket",
              "arguments": {"ticket_id": "TKT-1", "priority": "High", "status": "Blocked"}}
    events = conversation_events(case(expected_function_calls=[update]), "scripted", "one_per_turn")
    # greeting; announce with the id; the priority asked alone; the status asked alone; the confirmation; the call,
    # its result, the report; the stop phrase
    assert [kind for kind, _ in events] == ["bot", "user", "bot", "user", "bot", "user", "bot", "user", "call",
                                            "result", "bot", "user"]
    assert events[1] == ("user", ASSUMED["user_words"] + count("TKT-1"))
    assert events[3] == ("user", ASSUMED["user_words"] + count("High"))
    everything = conversation_events(case(expected_function_calls=[update]), "scripted", "all_in_one")
    assert [kind for kind, _ in everything] == ["bot", "user", "call", "result", "bot", "user"]
    assert everything[1] == ("user", ASSUMED["user_words"] + count("TKT-1") + count("High") + count("Blocked"))
    for layout in LAYOUTS:   # an out-of-scope request: said once, then stop
        nothing = conversation_events(case(), "scripted", layout)
        assert [kind for kind, _ in nothing] == ["bot", "user", "bot", "user"]


def test_with_no_model_configured_nothing_is_estimated_and_nothing_written(monkeypatch, tmp_path, capsys):
    from lobeval.cli import main

    for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    assert estimate("scenarios/support_tickets").rows() == []
    assert main(["run", "--estimate", "--cases-per-scenario", "1"]) == 0
    out = capsys.readouterr().out
    assert "estimate for 13 conversations (nothing sent, nothing written)" in out
    assert "no model request: every role runs offline" in out and not (tmp_path / "runs").exists()
    assert main(["estimate", "--suite", str(tmp_path / "nowhere")]) == 2


def billed(answers):
    """USD and requests by the estimate's role, as the endpoint billed them."""
    usd, requests = Counter(), Counter()
    for answer in answers:
        usage = answer["usage"] or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        role = GROUP[role_of(answer["request"])]
        usd[role] += ((usage["prompt_tokens"] - cached) * PRICE["input"] + cached * PRICE["cached_input"]
                      + usage["completion_tokens"] * PRICE["output"]) / 1e6
        requests[role] += 1
    return usd, requests


def show(title, found, usd, requests):
    rows = {row["role"]: row for row in found.rows()}
    print(f"\n{title}: {found.basis}\nrole: estimated requests / billed requests, estimated USD / billed USD")
    for role in sorted(set(rows) | set(usd)):
        print(f"  {role}: {rows.get(role, {}).get('requests')} / {requests[role]}, "
              f"{rows.get(role, {}).get('cost_usd')} / {usd[role]:.4f}")


def total(found):
    return sum(row["cost_usd"] for row in found.rows())


@pytest.mark.slow
@pytest.mark.parametrize("asks_all", [False, True], ids=["the sample bot", "a bot asking every value at once"])
def test_the_range_holds_the_first_bill_and_the_second_run_is_estimated_from_the_first_within_20_percent(
        tmp_path, monkeypatch, asks_all):
    with model_endpoint(monkeypatch, tmp_path, Roleplay(seed=15, bot_asks_all=asks_all), price=PRICE,
                        prompt_cache=True) as fake:
        status, printed = cli("run", "--estimate", "--user", "llm", "--cases-per-scenario", "1")
        assert status == 0 and fake.count == 0 and not (tmp_path / "runs").exists()
        first = estimate("scenarios/support_tickets", cases_per_scenario=1, user="llm")
        status, out = cli("run", "--user", "llm", "--cases-per-scenario", "1", "--run-id", "first")
        assert status in (0, 1), out
        usd, requests = billed(list(fake.answers))
        # the next run, on other cases of the same scenarios, is estimated from what the first one measured
        second = estimate("scenarios/support_tickets", cases_per_scenario=1, seed=7, user="llm")
        measured = fake.count
        status, out = cli("run", "--user", "llm", "--cases-per-scenario", "1", "--seed", "7", "--run-id", "second")
        assert status in (0, 1), out
        usd_then, requests_then = billed(list(fake.answers)[measured:])
    show("first run", first, usd, requests)
    show("second run", second, usd_then, requests_then)
    low, high = first.range
    assert "no earlier run of the same suite, target and user: the midpoint of a range" in printed
    assert total(low) <= sum(usd.values()) <= total(high)
    assert sum(row["requests"] for row in low.rows()) <= sum(requests.values()) <= sum(
        row["requests"] for row in high.rows())
    assert second.range is None and second.basis.startswith("from run first of the same suite, target and user")
    assert total(second) == pytest.approx(sum(usd_then.values()), rel=0.20)
    rows = {row["role"]: row for row in first.rows()}
    assert f"{total(first):.4f}" in printed and "judging = " in printed and "range of the total: " in printed
    # what each of lobeval's judges adds to the request they share, so a team can price its choice
    each = next(line for line in printed.splitlines() if "each judge per conversation it judges:" in line)
    assert all(f"{name} 0.0" in each for name in ("per_turn", "goal", "user_review"))
    # the run kept its estimate, and the report sets it beside the bill
    assert read_config(tmp_path / "runs" / "first")["estimate"]["bot (target)"] == pytest.approx(
        rows["bot (target)"]["per_conversation_usd"])
    page = (tmp_path / "runs" / "first" / "report.html").read_text(encoding="utf-8")
    assert "estimated per conversation" in page
    assert read_results(tmp_path / "runs" / "first" / "evaluation_results.json")["counts"]["errors"] == 0


def test_with_batch_the_judges_and_the_azure_evaluators_are_at_the_batch_price(monkeypatch, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text('{"m": {"input": 5.0, "output": 15.0, "cached_input": 2.5}}')
    for name in ("LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOBEVAL_MODEL", "m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-estimate")
    monkeypatch.setenv("LOBEVAL_PRICES", str(prices))
    suite = str(REPO / "scenarios" / "support_tickets")
    alone = {row["role"]: row["cost_usd"] for row in estimate(suite, user="llm", judges=["all"]).rows()}
    batched = {row["role"]: row["cost_usd"] for row in estimate(suite, user="llm", judges=["all"], batch=True).rows()}
    judges = [role for role in alone if role.startswith("judge: ")]
    assert "judge: per_turn+goal+user_review+commitments" in judges and "judge: task_adherence" in judges
    assert all(batched[role] == pytest.approx(alone[role] / 2) for role in judges)
    assert all(batched[role] == alone[role] for role in alone if role not in judges)   # the bot, the user, root causes
