"""`lobeval estimate` and `lobeval run --estimate`: the expected requests, tokens and cost by role, before
anything is spent, checked against what the role-playing fake endpoint bills for the same run."""
from __future__ import annotations

from collections import Counter

import pytest

import json
from pathlib import Path

from helpers import REPO, make_suite
from lobeval.workflow.estimate import ASSUMED, LAYOUTS, conversation_events, estimate
from lobeval.judges.judges import judge_instructions
from lobeval.core.records import Case, read_results
from lobeval.workspace.runs import read_config
from lobeval.workspace.suite import load_suite
from lobeval.core.tokens import count
from roleplay import Roleplay, role_of
from test_model_run import cli, model_endpoint

PRICE = {"input": 5.00, "output": 15.00, "cached_input": 2.50}
GROUP = {"user": "simulated user", "bot": "bot (target)", "judges": "judge: per_turn+goal+user_review+commitments+claims",
         "root_causes": "root causes", "completion_judge": "completion check"}


def case(**fields):
    return Case.model_validate({"case_id": "c-1", "scenario_name": "s", "user_instructions": "Update TKT-1.",
                                **fields})


def test_a_conversation_is_laid_out_at_both_ends_of_the_range():
    update = {"functionName": "update_support_ticket",
              "arguments": {"ticket_id": "TKT-1", "priority": "High", "status": "Blocked"}}
    events = conversation_events(case(expected_function_calls=[update]), "scripted", "one_per_turn", set())
    # greeting; announce with the id; the priority asked alone; the status asked alone; the confirmation; the call,
    # its result, the report; the stop phrase
    assert [kind for kind, _ in events] == ["bot", "user", "bot", "user", "bot", "user", "bot", "user", "call",
                                            "result", "bot", "user"]
    assert events[1] == ("user", ASSUMED["user_words"] + count("TKT-1"))
    assert events[3] == ("user", ASSUMED["user_words"] + count("High"))
    # all values in one turn: the two asked for together, acted on at once
    together = conversation_events(case(expected_function_calls=[update]), "scripted", "all_in_one", set())
    assert [kind for kind, _ in together] == ["bot", "user", "bot", "user", "call", "result", "bot", "user"]
    assert together[3] == ("user", ASSUMED["user_words"] + count("High") + count("Blocked"))
    # the scripted user's style says what it gives first: everything, or nothing; a model may give everything
    everything = conversation_events(case(expected_function_calls=[update], user_style="all_in_one"), "scripted",
                                     "all_in_one", set())
    assert [kind for kind, _ in everything] == ["bot", "user", "call", "result", "bot", "user"]
    assert everything[1] == ("user", ASSUMED["user_words"] + count("TKT-1") + count("High") + count("Blocked"))
    assert conversation_events(case(expected_function_calls=[update]), "llm", "all_in_one", set()) == everything
    one_fact = conversation_events(case(expected_function_calls=[update], user_style="one_fact"), "scripted",
                                   "one_per_turn", set())
    assert one_fact[1] == ("user", ASSUMED["user_words"]) and len(one_fact) == len(events) + 2
    # a read (a function whose effect is read) is asked with its values and never confirmed
    read = conversation_events(case(expected_function_calls=[update]), "scripted", "one_per_turn",
                               {"update_support_ticket"})
    assert [kind for kind, _ in read] == ["bot", "user", "call", "result", "bot", "user"]
    for layout in LAYOUTS:   # an out-of-scope request: said once, then stop
        nothing = conversation_events(case(), "scripted", layout, set())
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


def test_a_prompt_target_file_that_is_not_one_exits_2_naming_the_file_and_the_field(monkeypatch, tmp_path, capsys):
    from lobeval.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    target = tmp_path / "bot.json"
    target.write_text('{"model": "m"}')
    assert main(["estimate", "--suite", "scenarios/support_tickets", "--target", str(target)]) == 2
    assert capsys.readouterr().err == (f"lobeval estimate: error: {target}: prompt target: field 'system_prompt': "
                                       f"is required\n")


@pytest.mark.parametrize("command", ["estimate", "run --estimate"])
def test_max_turns_counts_a_completion_check_for_each_conversation_it_cuts_off(monkeypatch, tmp_path, capsys,
                                                                               command):
    from lobeval.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("LOBEVAL_JUDGE_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "x" * 20)
    checks = {}
    # every conversation has 2 user messages at least (its request, the stop): a limit of 1 cuts each one off
    for turns in ("20", "1"):
        assert main([*command.split(), "--cases-per-scenario", "1", "--max-turns", turns]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()]
        checks[turns] = next((int(row[2]) for row in rows if row[:2] == ["completion", "check"]), 0)
    assert checks == {"20": 0, "1": 13}


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
    results = read_results(tmp_path / "runs" / "first" / "evaluation_results.json")
    assert results["counts"]["errors"] == 0
    # the prompt tokens the bot's endpoint read from its cache are the bot's, as the endpoint billed them
    cached = sum(((answer["usage"] or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                 for answer in list(fake.answers)[:measured] if role_of(answer["request"]) == "bot")
    assert results["usage"]["target"]["cached_prompt_tokens"] == cached > 0


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
    assert "judge: per_turn+goal+user_review+commitments+claims" in judges and "judge: task_adherence" in judges
    assert all(batched[role] == pytest.approx(alone[role] / 2) for role in judges)
    assert all(batched[role] == alone[role] for role in alone if role not in judges)   # the bot, the user, root causes


def test_each_judge_adds_its_instructions_at_the_cached_price_once_they_are_cached(monkeypatch, tmp_path):
    """What each of lobeval's judges adds to their shared request: from the second conversation on (the first puts
    the instructions in the provider's cache), its part of the instructions comes at the cached price."""
    prices = tmp_path / "prices.json"
    prices.write_text('{"m": {"input": 5.0, "output": 15.0, "cached_input": 2.5}}')
    for name in ("LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOBEVAL_MODEL", "m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-estimate")
    monkeypatch.setenv("LOBEVAL_PRICES", str(prices))
    found = estimate(str(REPO / "scenarios" / "support_tickets"), user="llm")   # 13 conversations, none an attack
    asked = ("per_turn", "goal", "user_review", "claims")
    for name in asked:
        added = count(judge_instructions(asked)) - count(judge_instructions(tuple(n for n in asked if n != name)))
        assert found.parts[name].requests == 13 and found.parts[name].cached_tokens == 12 * added > 0
    claims = found.parts["claims"]
    assert found.each_judge()["claims"] == pytest.approx(
        ((claims.prompt_tokens - claims.cached_tokens) * 5.0 + claims.cached_tokens * 2.5
         + claims.completion_tokens * 15.0) / 1e6 / 13)


# --- a suite of another domain: HR leave -----------------------------------------------------------------

EMPLOYEES = [{"id": "EMP-1", "name": "Ana Silva", "leave_type": "Vacation", "start": "2026-07-01", "end": "2026-07-10"},
             {"id": "EMP-2", "name": "Ben Okafor", "leave_type": "Sick", "start": "2026-03-02", "end": "2026-03-04"}]
LEAVE_TOOLS = [
    {"type": "function", "effect": "write", "function": {"name": "book_leave", "parameters": {"type": "object", "properties": {
        "employee_id": {"type": "string"}, "leave_type": {"type": "string", "enum": ["Vacation", "Sick"]},
        "start_date": {"type": "string"}, "end_date": {"type": "string"}},
        "required": ["employee_id", "leave_type", "start_date", "end_date"]}}},
    {"type": "function", "effect": "read", "function": {"name": "leave_balance", "parameters": {
        "type": "object", "properties": {"employee_id": {"type": "string"}}, "required": ["employee_id"]}}}]
LEAVE_TEMPLATES = [
    {"scenario_name": "book_leave", "user_instructions": "Book {employee.leave_type} leave for {employee.id} from "
                                                         "{employee.start} to {employee.end}.",
     "task_completion": "The leave is booked.", "expected_function_calls": [{"functionName": "book_leave", "arguments": {
         "employee_id": "{employee.id}", "leave_type": "{employee.leave_type}", "start_date": "{employee.start}",
         "end_date": "{employee.end}"}}]},
    {"scenario_name": "balance", "user_instructions": "Ask how many leave days {employee.id} has left.",
     "task_completion": "The balance is told.", "expected_function_calls": [{"functionName": "leave_balance", "arguments": {"employee_id": "{employee.id}"}}]}]


@pytest.fixture
def leave(tmp_path, monkeypatch):
    """An HR-leave suite, a prompt target for it, one model for every role at a known price, an empty runs/."""
    suite = make_suite(tmp_path, tickets=EMPLOYEES, tools=LEAVE_TOOLS, templates=LEAVE_TEMPLATES,
                       suite={"name": "leave", "entities": {"employee": {"csv": "data/toy/tickets.csv", "id": "id"}}})
    bot = tmp_path / "leave_bot.json"
    bot.write_text(json.dumps({"system_prompt": "You book leave for the HR desk.", "tools": {"python": "hr_tools"},
                               "tools_file": str(suite / "tools.json")}))
    (tmp_path / "prices.json").write_text(json.dumps({"m": PRICE}))
    for name in ("LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOBEVAL_MODEL", "m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-estimate")
    monkeypatch.setenv("LOBEVAL_PRICES", str(tmp_path / "prices.json"))
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    return suite, str(bot)


def by_role(found):
    return {row["role"]: row for row in found.rows()}


def earlier_run(tmp_path, suite, target, records, run_id="r1", user="scripted"):
    """A finished run of `suite` against `target` whose conversations.jsonl holds `records`, in the runs index."""
    from lobeval.workspace.runs import add_to_index, index_path, suite_digest

    run_dir = tmp_path / "runs" / run_id
    run_dir.mkdir(parents=True)
    config = {"schema_version": 1, "run_id": run_id, "suite_name": "leave", "suite": str(suite), "target": target,
              "user": user, "suite_digest": suite_digest(load_suite(suite))}
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "conversations.jsonl").write_text(records if isinstance(records, str) else
                                                 "".join(json.dumps(record) + "\n" for record in records))
    add_to_index(index_path(), config, run_dir, {}, {})


def recorded(case_id, scenario, requests, prompt, cached, completion):
    usage = {"calls": requests, "requests": requests, "prompt_tokens": prompt, "cached_prompt_tokens": cached,
             "completion_tokens": completion, "cost_usd": 0.0}
    return {"case_id": case_id, "scenario_name": scenario, "usage": {"target": usage},
            "messages": [{"role": "assistant", "content": "Hello, HR desk."}, {"role": "user", "content": "Book it."},
                         {"role": "assistant", "content": "Booked.", "function_calls": [
                             {"functionName": "book_leave", "arguments": {"employee_id": "EMP-1"}, "result": {"ok": 1}}]},
                         {"role": "user", "content": "Thanks, that is all."}],
            "function_calls": []}


def test_without_an_earlier_run_a_suite_of_another_domain_gets_a_range_and_its_midpoint(leave, capsys):
    from lobeval.cli import main

    suite, bot = leave
    found = estimate(str(suite), cases_per_scenario=2, target=bot)
    low, high = (by_role(end) for end in found.range)
    # per booking the user gives the employee id first; the bot answers the opening, the 3 other values together
    # and the result (3), or the opening, each of the 3 other values, the confirmation and the result (6); a
    # balance is asked with its id and read at once (2) at both ends
    assert (low["bot (target)"]["requests"], high["bot (target)"]["requests"]) == (2 * 3 + 2 * 2, 2 * 6 + 2 * 2)
    assert by_role(found)["bot (target)"]["requests"] == (10 + 16) // 2
    assert low["bot (target)"]["cost_usd"] < by_role(found)["bot (target)"]["cost_usd"] < high["bot (target)"]["cost_usd"]
    assert found.basis == ("no earlier run of the same suite, target and user: the midpoint of a range, from all "
                           "values in one turn to one value per turn")
    assert main(["estimate", "--suite", str(suite), "--cases-per-scenario", "2", "--target", bot]) == 0
    out = capsys.readouterr().out
    assert "no earlier run of the same suite, target and user" in out
    assert "range of the total: " in out and f"{low['bot (target)']['requests']:>9} .. 16" in out


def test_after_a_run_of_the_same_suite_target_and_user_its_measured_usage_per_scenario_is_the_estimate(
        leave, tmp_path):
    suite, bot = leave
    earlier_run(tmp_path, suite, bot, [recorded("book_leave-000", "book_leave", 3, 3000, 1024, 90),
                                       recorded("book_leave-001", "book_leave", 5, 5000, 2048, 110),
                                       recorded("balance-000", "balance", 2, 1500, 0, 40)])
    found = estimate(str(suite), cases_per_scenario=2, trials=2, target=bot)
    assert found.range is None and found.basis.startswith("from run r1 of the same suite, target and user")
    bot_row = by_role(found)["bot (target)"]
    # each of 4 booking conversations as the mean of the two measured (4 requests, 4000 prompt tokens of which 1536
    # cached, 100 completion tokens), each of 4 balance conversations as the one measured
    assert (bot_row["requests"], bot_row["prompt_tokens"], bot_row["cached_tokens"], bot_row["completion_tokens"]) \
        == (4 * 4 + 4 * 2, 4 * 4000 + 4 * 1500, 4 * 1536, 4 * 100 + 4 * 40)
    assert bot_row["cost_usd"] == pytest.approx(((22000 - 6144) * PRICE["input"] + 6144 * PRICE["cached_input"]
                                                 + 560 * PRICE["output"]) / 1e6)
    # the judges read the recorded transcripts: one request per conversation
    assert by_role(found)["judge: per_turn+goal+user_review+commitments+claims"]["requests"] == 8
    # a later run whose conversations can no longer be read is passed over
    earlier_run(tmp_path, suite, bot, '{"case_id": "book_leave-000", "messa\n', run_id="torn")
    assert estimate(str(suite), target=bot).basis.startswith("from run r1 ")
    # another target, another user, or a scenario the earlier run did not play: the range, saying why
    other = tmp_path / "other_bot.json"
    other.write_text(Path(bot).read_text())
    assert estimate(str(suite), target=str(other)).range is not None
    assert estimate(str(suite), target=bot, user="llm").basis.startswith("no earlier run")
    earlier_run(tmp_path, suite, bot, [recorded("balance-000", "balance", 2, 1500, 0, 40)], run_id="r2")
    partly = estimate(str(suite), target=bot)
    assert partly.range is not None and partly.basis.startswith("run r2 played no conversation of book_leave: ")


def never_reached(case_id, scenario, reason, requests=5):
    """A conversation that ended before the bot answered: every request of the user's model refused (401) or never
    connected, or the bot failed at its start. No user turn, and no tokens."""
    usage = {"calls": 1, "requests": requests, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    return {"case_id": case_id, "scenario_name": scenario, "messages": [], "function_calls": [],
            "termination": {"reason": reason, "turns": 0}, "error": "model 'm' (role user): not retried (attempt 1)",
            "usage": {"user": usage, "target": {**usage, "requests": 0}}}


def test_an_earlier_run_whose_conversations_never_reached_the_bot_is_no_evidence(leave, tmp_path, capsys):
    from lobeval.cli import main

    suite, bot = leave
    earlier_run(tmp_path, suite, bot, [never_reached("book_leave-000", "book_leave", "llm_error"),
                                       never_reached("balance-000", "balance", "target_unavailable"),
                                       never_reached("balance-001", "balance", "target_error")], run_id="down")
    found = estimate(str(suite), target=bot)
    assert found.range is not None
    assert found.basis == ("run down is no evidence (no conversation of it reached the bot: each ended in a machinery "
                           "error, or before the user spoke): the midpoint of a range, from all values in one turn to "
                           "one value per turn")
    assert main(["estimate", "--suite", str(suite), "--target", bot]) == 0
    assert "run down is no evidence" in capsys.readouterr().out
    # an earlier run that did reach the bot is the estimate, the later one that did not passed over and named
    (tmp_path / "runs").rename(tmp_path / "down_runs")
    earlier_run(tmp_path, suite, bot, [recorded("book_leave-000", "book_leave", 3, 3000, 1024, 90),
                                       recorded("balance-000", "balance", 2, 1500, 0, 40),
                                       never_reached("balance-001", "balance", "llm_error")])
    earlier_run(tmp_path, suite, bot, [never_reached("book_leave-000", "book_leave", "llm_error")], run_id="down")
    found = estimate(str(suite), cases_per_scenario=1, target=bot)
    assert found.range is None and found.basis.startswith("from run r1 of the same suite, target and user")
    assert found.basis.endswith("; run down is no evidence (no conversation of it reached the bot: each ended in a "
                                "machinery error, or before the user spoke)")
    # r1's conversation that never reached the bot is no part of its measured mean: one balance conversation of 2
    assert by_role(found)["bot (target)"]["requests"] == 3 + 2


def test_a_run_of_another_suite_of_the_same_name_and_scenarios_is_not_the_estimate(leave, tmp_path):
    suite, bot = leave
    records = [recorded("book_leave-000", "book_leave", 3, 3000, 1024, 90), recorded("balance-000", "balance", 2, 1500, 0, 40)]
    earlier_run(tmp_path, suite, bot, records)
    assert estimate(str(suite), target=bot).basis.startswith("from run r1 of the same suite, target and user")
    templates = json.loads((suite / "templates.json").read_text())
    templates[0]["user_instructions"] += " Say it is urgent."   # drafted again: the same names, another suite
    (suite / "templates.json").write_text(json.dumps(templates))
    assert estimate(str(suite), target=bot).basis.startswith("no earlier run of the same suite, target and user")
