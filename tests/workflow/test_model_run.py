"""Issue #15's acceptance test: whole model-backed runs through the real CLI, against one fake endpoint that
plays every role (tests/roleplay.py): the simulated user, the sample bot's model, the completion judge, the
conversation judges, azure-ai-evaluation's evaluators and the root causes.

Every command runs in this process from the repository root (`lobeval run`'s stage notebooks in kernels of
their own), with runs/ in a temporary folder and the model configuration in the environment: the fake's
URL, a model name the price file prices, a response cache of the test's own. What the endpoint saw is
counted from its own log (FakeOpenAI.answers): the requests by role, and their cost at that price.

`pytest -s` prints, for each `lobeval run`, the requests by role and the cost the endpoint saw against the
budget.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, read_jsonl
from lobeval.workflow import roles
from lobeval.cli import main
from lobeval.models.llm import LLMClient
from lobeval.core.records import MACHINERY_ERRORS, read_results
from lobeval.workspace.runs import read_index
from lobeval.models.testing import FakeOpenAI
from roleplay import Roleplay, role_of

MODEL = "roleplay-1"
PRICE = {"input": 2.00, "output": 8.00}    # USD per 1M tokens, as LOBEVAL_PRICES gives it
CONCURRENCY = 4
CASES = 13                                 # the sample suite's scenarios, one case each
ENV_OFF = ("LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL", "LOBEVAL_EMBEDDING_MODEL",
           "LOBEVAL_BUDGET_USD", "LOBEVAL_BUDGET_LEDGER", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY",
           "AZURE_AI_PROJECT", "AZURE_SUBSCRIPTION_ID")


@contextlib.contextmanager
def model_endpoint(patch: pytest.MonkeyPatch, root: Path, play: Roleplay, budget_usd: float | None = None, *,
                   price: dict[str, float] = PRICE, prompt_cache: bool = False):
    """The role-player serving on 127.0.0.1, and this process (and the kernels it starts) configured for it."""
    prices = root / "prices.json"
    prices.write_text(json.dumps({MODEL: price}))
    with FakeOpenAI(play, prompt_cache=prompt_cache) as fake:
        patch.chdir(REPO)
        patch.setattr("lobeval.workspace.runs.RUNS", root / "runs")
        for name in ENV_OFF:
            patch.delenv(name, raising=False)
        patch.setenv("OPENAI_API_KEY", "sk-test-roleplay-0123456789")
        patch.setenv("OPENAI_BASE_URL", fake.base_url)
        patch.setenv("LOBEVAL_MODEL", MODEL)
        patch.setenv("LOBEVAL_CACHE_DIR", str(root / "cache"))
        patch.setenv("LOBEVAL_PRICES", str(prices))
        if budget_usd is not None:
            patch.setenv("LOBEVAL_BUDGET_USD", str(budget_usd))
        roles.shared_budget.cache_clear()   # one budget per process: the one this environment names
        try:
            yield fake
        finally:
            roles.shared_budget.cache_clear()


def quick_retries(patch: pytest.MonkeyPatch) -> None:
    """Retry backoff of milliseconds for the model clients made in this process: a bot endpoint that keeps
    failing gives up after its 5 attempts in a blink instead of ~15 s. What is retried, and how often, is
    unchanged (tests/models/test_llm.py checks the backoff itself)."""
    patch.setitem(LLMClient.__init__.__kwdefaults__, "backoff", (0.01, 0.05))


def cli(*argv: str) -> tuple[int, str]:
    """`lobeval ARGV` in this process: (exit status, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(argv))
    return status, out.getvalue()


def usd(usage: dict[str, int] | None) -> float:
    usage = usage or {}
    return (usage.get("prompt_tokens", 0) * PRICE["input"] + usage.get("completion_tokens", 0) * PRICE["output"]) / 1e6


def endpoint_figures(answers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """By role, what the endpoint answered: requests, failed ones, tokens, and their cost at PRICE."""
    figures: dict[str, dict[str, Any]] = {}
    for answer in answers:
        row = figures.setdefault(role_of(answer["request"]), Counter())
        usage = answer["usage"] or {}
        row.update(requests=1, failed=answer["status"] != 200, prompt_tokens=usage.get("prompt_tokens", 0),
                   completion_tokens=usage.get("completion_tokens", 0))
        row["cost_usd"] = row.get("cost_usd", 0.0) + usd(usage)
    return figures


def print_figures(title: str, answers: list[dict[str, Any]], budget_usd: float, ledger: Path,
                  notes: tuple[str, ...] = ()) -> None:
    """What `pytest -s` shows: the requests by role as the endpoint saw them, and their cost against the budget."""
    figures = endpoint_figures(answers)
    total = sum(row["cost_usd"] for row in figures.values())
    spent = json.loads(ledger.read_text())["spent_usd"] if ledger.exists() else None
    print(f"\n{title}: requests by role as the endpoint saw them ({MODEL} at ${PRICE['input']:.2f} in / "
          f"${PRICE['output']:.2f} out per 1M tokens)")
    print(f"  {'role':<28}{'requests':>9}{'failed':>8}{'prompt tok':>12}{'compl. tok':>12}{'cost USD':>11}")
    for role, row in sorted(figures.items(), key=lambda item: -item[1]["requests"]):
        print(f"  {role:<28}{row['requests']:>9}{row['failed']:>8}{row['prompt_tokens']:>12}"
              f"{row['completion_tokens']:>12}{row['cost_usd']:>11.4f}")
    print(f"  {'total':<28}{sum(r['requests'] for r in figures.values()):>9}"
          f"{sum(r['failed'] for r in figures.values()):>8}{sum(r['prompt_tokens'] for r in figures.values()):>12}"
          f"{sum(r['completion_tokens'] for r in figures.values()):>12}{total:>11.4f}")
    print(f"  cost the endpoint saw ${total:.4f} against a budget of ${budget_usd:.4f} "
          f"({total / budget_usd:.0%}); lobeval's ledger (budget.json) says ${spent:.4f} spent" if spent is not None
          else f"  cost the endpoint saw ${total:.4f} against a budget of ${budget_usd:.4f}")
    for note in notes:
        print(f"  {note}")


def terminations(run_dir: Path) -> Counter:
    return Counter(record["termination"]["reason"] for record in read_jsonl(run_dir / "conversations.jsonl"))


def page_text(html: str) -> str:
    """The report's visible text, roughly: tags dropped, entities of the few characters that matter decoded."""
    words = re.sub(r"<[^>]+>", " ", html).replace("&amp;", "&").replace("&#x27;", "'").replace("&quot;", '"')
    return " ".join(words.split())


# ---- a. a failing bot fails the gate; the report shows what the judges covered ----------------------------

FAILING_BUDGET = 5.0   # never reached: there only so that (e) can set the run's cost against a budget


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    """One `lobeval run --user llm` in which the bot writes a wrong value in 60 % of the conversations and
    30 % of the judges' replies are unusable; the claims judge reads what the bot said against its calls."""
    root = tmp_path_factory.mktemp("failing")
    play = Roleplay(seed=17, bot_mistakes=0.6, bad_judge_replies=0.3)
    with pytest.MonkeyPatch.context() as patch, model_endpoint(patch, root, play, FAILING_BUDGET) as fake:
        status, out = cli("run", "--user", "llm", "--cases-per-scenario", "1", "--judges", "per_turn,goal,claims",
                          "--concurrency", str(CONCURRENCY), "--run-id", "failing")
        answers = list(fake.answers)
    run_dir = root / "runs" / "failing"
    print_figures("lobeval run (a failing bot, bad judge replies)", answers, FAILING_BUDGET, run_dir / "budget.json",
                  (f"conversations: {dict(terminations(run_dir))}",))
    return {"status": status, "out": out, "run_dir": run_dir, "answers": answers, "play": play,
            "results": read_results(run_dir / "evaluation_results.json")}


@pytest.mark.slow
def test_a_failing_bot_makes_the_run_exit_1_with_fail_lines(failing_run):
    out, results = failing_run["out"], failing_run["results"]
    assert failing_run["status"] == 1, out
    assert re.search(r"^FAIL  Success >= 0\.8: Success = 0\.\d+ < 0\.8\b", out, re.MULTILINE), out
    assert "gate: FAILED" in out and out.rstrip().endswith("report.html")
    # The bot's wrong values are the bot's failures, scored: no conversation was lost to the machinery.
    assert results["counts"] == {**results["counts"], "conversations": CASES, "scored": CASES, "errors": 0}
    assert results["metrics"]["Success"] < 0.8
    wrong = [item for row in results["rows"] for item in row.get("wrong_arguments") or []]
    assert wrong and {item["argument"] for item in wrong} <= {"priority", "status", "workflow_type", "due_date"}
    # Every role was played: the endpoint saw the user, the bot, and the judges (one request per conversation, and
    # a retry where its answer was unusable); the user said when it was done, so no completion check was asked.
    seen = Counter(role_of(answer["request"]) for answer in failing_run["answers"])
    assert {"user", "bot", "judges", "root_causes"} <= set(seen), seen
    assert "completion_judge" not in seen and CASES < seen["judges"] < 2 * CASES
    assert "unknown" not in seen


@pytest.mark.slow
def test_a_the_judges_catch_the_wrong_values_and_their_bad_replies_are_errors_not_scores(failing_run):
    results = failing_run["results"]
    judged = [row["judges"] for row in results["rows"]]
    assert all(verdict["status"] == "run" for verdict in judged)
    failures = [turn["failure"]["category"] for verdict in judged for turn in verdict.get("turns") or []
                if turn.get("failure")]
    assert "unsafe_state" in failures   # the turn that wrote a value the user did not give
    errors = [error for verdict in judged for error in verdict["errors"]]
    assert errors and all(error["error"].startswith("judge reply unusable after 2 attempts") for error in errors)
    assert all(error["raw"] for error in errors)   # the unusable reply is kept for whoever reads the error
    # A conversation with an error of the per-turn or goal judge has no final score: never a number made of part of
    # its turns.
    scoring = [any(error["judge"] in ("per_turn", "goal") for error in verdict["errors"]) for verdict in judged]
    for verdict, failed in zip(judged, scoring):
        if failed:
            assert verdict["final_score"] is None
    cover = results["judges"]["coverage"]["judge.final_score"]
    assert 0 < cover["judged"] < cover["of"] == CASES and cover["errors"] == CASES - cover["judged"] == sum(scoring)
    assert results["judges"]["errored_conversations"] == sum(bool(verdict["errors"]) for verdict in judged)
    # lobeval run prints the coverage beside the judge figure, as lobeval evaluate does
    final = results["metrics"]["judge.final_score"]
    assert (f"judge.final_score {final:.3f}" in failing_run["out"]
            and f"judged {cover['judged']} of {CASES}, {cover['errors']} judge errors" in failing_run["out"])
    assert f"judges: run ({cover['errors']} conversations with judge errors)" in failing_run["out"]


@pytest.mark.slow
def test_a_the_report_shows_the_judges_coverage_and_errors(failing_run):
    """(a) and (d): the report says what the judge figures rest on."""
    results = failing_run["results"]
    page = page_text((failing_run["run_dir"] / "report.html").read_text(encoding="utf-8"))
    cover = results["judges"]["coverage"]["judge.final_score"]
    assert f"judged {cover['judged']} of {cover['of']}" in page, page[:3000]
    errored = results["judges"]["errored_conversations"]
    assert re.search(rf"\b{errored} conversations with judge errors", page), page[:3000]
    assert f"judges: run ({errored} conversations with judge errors)" in failing_run["out"]
    assert "judge reply unusable" in page   # what went wrong, in the judges' own words


@pytest.mark.slow
def test_a_the_claims_judges_findings_are_the_rows_claims_where_it_answered_and_the_report_says_so(failing_run):
    results = failing_run["results"]
    sources = Counter(row["claims"]["source"] for row in results["rows"])
    assert sources["judge"] >= 1 and sources["judge"] + sources["rules"] == CASES, sources
    for row in results["rows"]:   # the judge's findings where it gave a usable verdict, else the rules' and its error
        verdict = row["judges"]["claims"]
        assert (row["claims"]["source"] == "judge") == (verdict is not None)
        if verdict is not None:
            assert [item["text"] for item in row["claims"]["claimed_not_done"]] == \
                [item["sentence"] for item in verdict["claimed_not_done"]] and row["claims"]["rules"] is not None
        else:
            assert any(error["judge"] == "claims" for error in row["judges"]["errors"])
    # ClaimsBacked is over the judged conversations: the rules' findings, where the judge failed, are to check by hand
    assert results["claims_source"] == {"judge": sources["judge"], "rules": 0}
    said = f"claims judged by the model in {sources['judge']}"
    assert said in page_text((failing_run["run_dir"] / "report.html").read_text(encoding="utf-8"))
    assert re.search(rf"^ +ClaimsBacked .*{said}$", failing_run["out"], re.MULTILINE), failing_run["out"]


@pytest.mark.slow
def test_a_root_causes_cite_only_conversations_of_the_run(failing_run):
    run_dir = failing_run["run_dir"]
    causes = json.loads((run_dir / "root_causes.json").read_text())["root_causes"]
    ids = {f"{record['case_id']}#{record['trial']}" for record in read_jsonl(run_dir / "conversations.jsonl")}
    assert causes and all(set(cause["conversations"]) <= ids for cause in causes)


# ---- b. a budget cut-off cannot pass a gate ---------------------------------------------------------------

BUDGET = 0.25


@pytest.mark.slow
def test_b_a_budget_spent_part_way_ends_conversations_as_machinery_errors_and_fails_the_gate(tmp_path, monkeypatch):
    """Bound asserted: the endpoint's total cost ≤ BUDGET + CONCURRENCY × 2 × (the dearest bot request).

    Why: lobeval reserves each of its own calls' worst case (the request's characters / 4 as prompt tokens,
    4,096 completion tokens) before sending it; the fake bills len(messages) / 4 prompt tokens and far fewer
    completion tokens, so none of those calls costs more than its reservation, and once a reservation is
    refused no such call starts. The one spending not reserved ahead is the bot's own model, charged after
    each bot turn from the usage the bot reports. After the last call admitted, each conversation in flight
    (CONCURRENCY at most) can finish at most one bot turn before its next user or judge call is refused, and
    the role-played bot makes at most two requests a turn (the tool call, then its answer)."""
    play = Roleplay(seed=15)
    with model_endpoint(monkeypatch, tmp_path, play, BUDGET) as fake:
        status, out = cli("run", "--user", "llm", "--cases-per-scenario", "1", "--judges", "per_turn,goal",
                          "--concurrency", str(CONCURRENCY), "--run-id", "budget")
        answers = list(fake.answers)
    run_dir = tmp_path / "runs" / "budget"
    ended = terminations(run_dir)
    figures = endpoint_figures(answers)
    total = sum(row["cost_usd"] for row in figures.values())
    dearest_bot_request = max(usd(answer["usage"]) for answer in answers if role_of(answer["request"]) == "bot")
    bound = BUDGET + CONCURRENCY * 2 * dearest_bot_request
    print_figures("lobeval run (LOBEVAL_BUDGET_USD spent part-way)", answers, BUDGET, run_dir / "budget.json",
                  (f"conversations: {dict(ended)}",
                   f"bound asserted: budget + {CONCURRENCY} conversations x 2 bot requests x "
                   f"${dearest_bot_request:.4f} (the dearest bot request) = ${bound:.4f}"))

    assert status == 1, out
    assert ended["budget_spent"] >= 1 and ended["budget_spent"] < CASES, ended   # spent part-way
    results = read_results(run_dir / "evaluation_results.json")
    spent_rows = [row for row in results["rows"] if row["termination"] == "budget_spent"]
    assert len(spent_rows) == ended["budget_spent"] and all(row["status"] == "error" for row in spent_rows)
    assert results["counts"]["errors"] >= ended["budget_spent"]
    assert re.search(r"^FAIL  error rate <= 0\.05: \d+/13 conversations failed in the machinery", out,
                     re.MULTILINE), out

    assert total <= bound
    ledger = json.loads((run_dir / "budget.json").read_text())
    assert ledger["spent_usd"] == pytest.approx(total, rel=1e-9, abs=1e-9)   # lobeval counted what was spent
    assert ledger["reserved_usd"] == 0


# Tool call accuracy's calls here: lobeval reserves $0.037-0.039 each, a reply that uses the whole allowance bills
# $0.049-0.051. Three reservations fit in this budget, a fourth does not; three such calls exceed it.
EVALUATOR_BUDGET = 0.14


def test_b_the_budget_holds_when_azure_evaluators_use_their_whole_allowance(tmp_path, monkeypatch):
    """Only reserved calls here (the evaluators of `lobeval evaluate`): with every reservation the most its
    call could cost, what the endpoint billed cannot exceed the budget."""
    play = Roleplay(seed=15, verbose_evaluators=True)
    with model_endpoint(monkeypatch, tmp_path, play) as fake:
        dataset, conversations = tmp_path / "dataset.jsonl", tmp_path / "conversations.jsonl"
        cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1", "--out", str(dataset))
        cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
            "--out", str(conversations))
        simulated = len(fake.answers)
        monkeypatch.setenv("LOBEVAL_BUDGET_USD", str(EVALUATOR_BUDGET))
        roles.shared_budget.cache_clear()
        status, out = cli("evaluate", "--dataset", str(dataset), "--conversations", str(conversations), "--suite",
                          "scenarios/support_tickets", "--judges", "tool_call_accuracy",
                          "--out", str(tmp_path / "r.json"))
        answers = fake.answers[simulated:]
    if status != 0 or not answers or "budget" not in out:
        pytest.fail(f"the setting did not come about: exit {status}, {len(answers)} evaluator requests\n{out}")
    billed = sum(usd(answer["usage"]) for answer in answers)
    assert billed <= EVALUATOR_BUDGET, f"{len(answers)} evaluator requests billed ${billed:.4f}"


# ---- c. injected bot-model failures are machinery errors ------------------------------------------------

def test_c_a_failing_bot_model_is_target_unavailable_left_out_of_the_scores_and_run_again(tmp_path, monkeypatch):
    play = Roleplay(seed=15, bot_faults=0.4)
    quick_retries(monkeypatch)
    with model_endpoint(monkeypatch, tmp_path, play) as fake:
        dataset, conversations = tmp_path / "dataset.jsonl", tmp_path / "conversations.jsonl"
        assert cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1",
                   "--out", str(dataset))[0] == 0
        status, out = cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
                          "--out", str(conversations))
        assert status == 0, out
        records = read_jsonl(conversations)
        down = {r["case_id"] for r in records if r["termination"]["reason"] == "target_unavailable"}
        assert 0 < len(down) < CASES, Counter(r["termination"]["reason"] for r in records)
        assert f"target_unavailable {len(down)}" in out
        # Exactly the conversations whose bot endpoint was down, and only the bot's requests failed.
        faulted = {r["case_id"] for r in records
                   if play.chance("bot fault", next(m["content"] for m in r["messages"] if m["role"] == "user")) < 0.4}
        assert down == faulted
        failed = [answer for answer in fake.answers if answer["status"] != 200]
        assert failed and {role_of(answer["request"]) for answer in failed} == {"bot"}
        assert {answer["status"] for answer in failed} == {500}
        for record in records:
            if record["case_id"] in down:
                assert "the bot's model endpoint gave up" in record["error"] and "HTTP 500" in record["error"]

        # Not scored, not judged, counted in the error rate.
        run_dir = tmp_path / "run"
        status, out = cli("evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                          "--suite", "scenarios/support_tickets", "--judges", "per_turn,goal",
                          "--out", str(run_dir / "evaluation_results.json"))
        assert status == 0, out
        assert f"scored {CASES - len(down)} conversations ({len(down)} machinery errors left out" in out
        results = read_results(run_dir / "evaluation_results.json")
        for row in results["rows"]:
            if row["case_id"] in down:
                assert row["status"] == "error" and row["Success"] is None
                assert row["judges"]["status"] == "not run: the conversation ended in a machinery error"
        assert results["judges"]["coverage"]["judge.goal"]["of"] == CASES - len(down)
        status, out = cli("gate", "--run", str(run_dir), "--max-error-rate", "0.05")
        assert status == 1
        assert f"FAIL  error rate <= 0.05: {len(down)}/{CASES} conversations failed in the machinery" in out

        # The endpoint is back: --retry-errors runs exactly those again, and they are scored.
        play.bot_faults = 0.0
        status, out = cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
                          "--retry-errors", "--out", str(conversations))
        assert status == 0, out
        assert f"{len(down)} conversations written" in out and f"{len(down)} machinery errors run again" in out
        again = read_jsonl(conversations)
        assert sorted(r["case_id"] for r in again) == sorted(r["case_id"] for r in records)   # no pair twice
        assert not [r for r in again if r["termination"]["reason"] in MACHINERY_ERRORS]
        kept = {r["case_id"]: r for r in records if r["case_id"] not in down}
        assert all(kept[r["case_id"]] == r for r in again if r["case_id"] in kept)   # the others untouched
        status, out = cli("evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                          "--suite", "scenarios/support_tickets", "--out", str(tmp_path / "again.json"))
        assert status == 0 and f"scored {CASES} conversations (0 machinery errors left out" in out


# ---- d. the CLI summary of the judges says what they covered --------------------------------------------

def test_d_evaluate_with_every_judge_prints_judged_n_of_n_and_the_judge_errors(tmp_path, monkeypatch):
    play = Roleplay(seed=16, bot_mistakes=0.5, bad_judge_replies=0.3)
    with model_endpoint(monkeypatch, tmp_path, play) as fake:
        dataset, conversations = tmp_path / "dataset.jsonl", tmp_path / "conversations.jsonl"
        cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1", "--out", str(dataset))
        assert cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
                   "--out", str(conversations))[0] == 0
        status, out = cli("evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                          "--suite", "scenarios/support_tickets", "--judges", "--out", str(tmp_path / "results.json"))
        seen = Counter(role_of(answer["request"]) for answer in fake.answers)
    assert status == 0, out
    results = read_results(tmp_path / "results.json")
    coverage = results["judges"]["coverage"]
    # All six judges ran, azure-ai-evaluation's four evaluators on the same endpoint included.
    assert {f"azure:{name}" for name in ("tool_call_accuracy", "intent_resolution", "task_adherence",
                                         "response_completeness")} <= set(seen), seen
    for name, cover in coverage.items():
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{name} "))
        errors = f", {cover['errors']} judge errors" if cover["errors"] else ""
        assert line.endswith(f"judged {cover['judged']} of {cover['of']}{errors}"), (line, cover)
    partial = [name for name, cover in coverage.items() if 0 < cover["judged"] < cover["of"] and cover["errors"]]
    # Which replies the role-player spoils follows a hash of the request, so name no judge: one of lobeval's own
    # and one of azure-ai-evaluation's judged part of the conversations and printed their errors.
    azure = {f"judge.{name}" for name in ("tool_call_accuracy", "intent_resolution", "task_adherence",
                                          "response_completeness")}
    assert set(partial) & azure and set(partial) - azure, coverage
    # Not applicable is no error: the out-of-scope request made no call for tool call accuracy to judge.
    assert coverage["judge.tool_call_accuracy"]["not_applicable"] >= 1
    assert f"judges: run ({results['judges']['errored_conversations']} conversations with judge errors)" in out


def test_d_a_judge_that_judged_nothing_still_prints_judged_0_of_n(tmp_path, monkeypatch):
    play = Roleplay(seed=15, bad_judge_replies=1.0)   # every judge reply unusable
    with model_endpoint(monkeypatch, tmp_path, play):
        dataset, conversations = tmp_path / "dataset.jsonl", tmp_path / "conversations.jsonl"
        cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1", "--out", str(dataset))
        cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
            "--out", str(conversations))
        status, out = cli("evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                          "--suite", "scenarios/support_tickets", "--judges", "goal", "--out", str(tmp_path / "r.json"))
    cover = read_results(tmp_path / "r.json")["judges"]["coverage"].get("judge.goal")
    if status != 0 or not cover or cover["judged"] != 0:
        pytest.fail(f"the setting did not come about: exit {status}, coverage {cover}\n{out}")
    assert f"judged 0 of {CASES}, {CASES} judge errors" in out, out


def test_c_a_bot_turn_broken_half_way_still_counts_what_its_model_answered(tmp_path, monkeypatch):
    play = Roleplay(seed=15, bot_faults=0.4, bot_faults_on="answer")
    quick_retries(monkeypatch)
    ledger = tmp_path / "budget.json"
    with model_endpoint(monkeypatch, tmp_path, play, budget_usd=50.0) as fake:
        monkeypatch.setenv("LOBEVAL_BUDGET_LEDGER", str(ledger))
        roles.shared_budget.cache_clear()
        dataset, conversations = tmp_path / "dataset.jsonl", tmp_path / "conversations.jsonl"
        cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1", "--out", str(dataset))
        cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
            "--out", str(conversations))
        answers = list(fake.answers)
    broken = [r for r in read_jsonl(conversations) if r["termination"]["reason"] == "target_unavailable"]
    if not broken:
        pytest.fail("no bot turn broke half-way: the setting did not come about")
    billed = sum(usd(answer["usage"]) for answer in answers)
    recorded = sum(sum(usage["cost_usd"] for usage in r["usage"].values()) for r in read_jsonl(conversations))
    assert json.loads(ledger.read_text())["spent_usd"] == pytest.approx(billed, rel=1e-9)
    assert recorded == pytest.approx(billed, rel=1e-9)


# ---- e. a user that invents an ID: the user review says so and the bot is not blamed ----------------------

def test_e_a_user_that_invents_an_id_is_reviewed_left_out_of_the_bot_metrics_and_counted(tmp_path, monkeypatch):
    play = Roleplay(seed=15, user_invents="Ask for the current status of ticket")
    with model_endpoint(monkeypatch, tmp_path, play):
        dataset, conversations = tmp_path / "dataset.jsonl", tmp_path / "conversations.jsonl"
        cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1", "--out", str(dataset))
        assert cli("simulate", "--dataset", str(dataset), "--user", "llm", "--concurrency", str(CASES),
                   "--out", str(conversations))[0] == 0
        status, out = cli("evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                          "--suite", "scenarios/support_tickets", "--judges", "goal,user_review",
                          "--out", str(tmp_path / "r.json"))
    assert status == 0, out
    results = read_results(tmp_path / "r.json")
    [faulty] = [row for row in results["rows"] if row["user_faults"]]
    assert faulty["scenario_name"] == "check_ticket_status"
    review = faulty["judges"]["user_review"]
    assert review["fault"] is True and review["check"] == "invented_value" and review["turn"] == 1
    assert "TKT-9990" in review["reason"]
    assert [(fault["check"], fault["turn"]) for fault in faulty["user_faults"]] == [
        ("invented_value", 1), ("user_review:invented_value", 1)]
    # Left out of the bot's metrics and its judges' figures, counted apart; every other user kept to its task.
    assert faulty["excluded"] == "user_fault"
    assert results["counts"] == {**results["counts"], "scored": CASES, "user_faults": 1, "errors": 0}
    assert results["over"]["Success"] == CASES - 1
    assert results["judges"]["coverage"]["judge.goal"]["of"] == CASES - 1
    assert results["judges"]["coverage"]["judge.user_review"] == {"judged": CASES, "of": CASES, "errors": 0,
                                                                  "not_applicable": 0}
    assert results["metrics"]["judge.user_review"] == pytest.approx(1 / CASES)
    assert "1 conversation left out for simulated-user faults (--include-user-faults keeps them)" in out
    assert results["config"]["judge_model"] == MODEL


@pytest.mark.slow
def test_a_an_analyst_checks_the_judges_verdicts_and_calibrate_and_the_report_say_how_far_they_agree(
        failing_run, tmp_path, capsys):
    """The calibration loop on a judged run: the replay's verdict items of each conversation's first judged turn,
    agreed with except two helpfulness scores the analyst puts one lower; `lobeval calibrate --run` and the
    report's judge table then say on how many labels, with the agreement counted by hand."""
    from lobeval.analysis import report
    from lobeval.judges.labels import add_label
    from lobeval.analysis.replay import judge_items, verdict_request

    results, run_dir = failing_run["results"], failing_run["run_dir"]
    assert results["config"]["judge_model"] == MODEL
    labels = tmp_path / "labels.jsonl"
    helpfulness, disagreed = 0, 0
    for row in results["rows"]:
        turns = [turn for turn in row["judges"].get("turns") or [] if turn["scores"] is not None]
        if not turns:
            continue
        for item in judge_items(row, [turns[0]["message_index"]]):
            if item["criterion"] != "helpfulness":
                continue
            helpfulness += 1
            lower = item["judge_value"] - 1
            verdict = "disagree" if disagreed < 2 and lower >= 1 else "agree"
            disagreed += verdict == "disagree"
            add_label(labels, **verdict_request(
                item, row, verdict=verdict, own_value=lower, note="", author="ann", run_id="failing",
                judge_model=results["config"]["judge_model"], judge_prompt=results["config"]["judge_prompt"]))
    assert disagreed == 2 and helpfulness >= 6
    status = main(["calibrate", "--labels", str(labels), "--run", str(run_dir)])
    out = capsys.readouterr().out
    prompts = results["config"]["judge_prompt"]
    assert status == 0 and f"judge calibration: {helpfulness} labels (judge model {MODEL}, prompts {prompts})" in out, out
    summary = report.judge_summary({**results, "config": {**results["config"], "labels_path": str(labels)}})
    agreement = (helpfulness - 2) / helpfulness
    assert summary.loc["helpfulness", "calibration"].startswith(
        f"calibrated on {helpfulness} labels: agreement {agreement:.2f}, weighted κ "), summary["calibration"]
    assert summary.loc["coherence", "calibration"] == "not calibrated"


@pytest.mark.slow
@pytest.mark.parametrize("budget_usd", [0.01, 0.10], ids=["spent before any request", "spent after six requests"])
def test_b_a_budget_spent_early_still_gives_the_whole_report_and_exit_1(budget_usd, tmp_path, monkeypatch):
    """The report renders every section (no judge figure at all is an empty table, not a crash), each
    conversation the budget cut off says "not run: budget spent", and the run exits 1 (the gate), not 2."""
    play = Roleplay(seed=15)
    with model_endpoint(monkeypatch, tmp_path, play, budget_usd):
        status, out = cli("run", "--user", "llm", "--cases-per-scenario", "1", "--run-id", "early")
    run_dir = tmp_path / "runs" / "early"
    assert status == 1, out
    assert terminations(run_dir)["budget_spent"] >= CASES - CONCURRENCY
    text = page_text((run_dir / "report.html").read_text(encoding="utf-8"))
    assert "Judges" in text and "Run configuration" in text
    results = read_results(run_dir / "evaluation_results.json")
    cut = [row for row in results["rows"] if row["termination"] == "budget_spent"]
    assert cut and all(row["judges"] == {"status": "not run: budget spent"} for row in cut)
    assert text.count("not run: budget spent") >= len(cut)


@pytest.mark.slow
def test_c_retry_errors_on_a_finished_run_runs_the_errored_conversations_and_every_later_stage_again(
        tmp_path, monkeypatch):
    """Issue 27.2: the bot's endpoint fails for some scenarios; once it is back, `lobeval run --run-id ID
    --retry-errors` simulates exactly those again and reruns 03-05, and the figures equal a fault-free run's.
    The first attempt used --retry-errors too, and the run is listed once in the index, with its last figures.
    The fault-free figures come from the run's own stage commands (generate, simulate, evaluate with the run's
    defaults) in this process: the same cases, conversations and scores, without five more notebooks."""
    play = Roleplay(seed=15, bot_faults=0.4, bot_fault_status="400")   # the stages' kernels retry at full backoff
    options = ("run", "--user", "llm", "--cases-per-scenario", "1", "--retry-errors", "--judges", "none")
    clean = tmp_path / "clean"
    with model_endpoint(monkeypatch, tmp_path, play):
        status, out = cli(*options, "--run-id", "flaky")
        first = terminations(tmp_path / "runs" / "flaky")
        play.bot_faults = 0.0
        again_status, again = cli(*options, "--run-id", "flaky")
        assert cli("generate", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1",
                   "--out", str(clean / "dataset.jsonl"))[0] == 0
        assert cli("simulate", "--dataset", str(clean / "dataset.jsonl"), "--user", "llm",
                   "--out", str(clean / "conversations.jsonl"))[0] == 0
        clean_status, _ = cli("evaluate", "--dataset", str(clean / "dataset.jsonl"), "--conversations",
                              str(clean / "conversations.jsonl"), "--suite", "scenarios/support_tickets",
                              "--judges", "none", "--out", str(clean / "evaluation_results.json"))
    assert status == 1 and 0 < first["target_unavailable"] < CASES, (first, out)
    assert again_status == clean_status == 0, again
    assert "kept from the earlier attempt: 01_generate" in again and "02_simulate.ipynb" in again
    assert "05_report.ipynb" in again
    assert terminations(tmp_path / "runs" / "flaky") == terminations(clean)
    retried = read_results(tmp_path / "runs" / "flaky" / "evaluation_results.json")
    fault_free = read_results(clean / "evaluation_results.json")
    # the retried conversations are appended last: the means add up in another order
    assert retried["metrics"].keys() == fault_free["metrics"].keys()
    for name, value in fault_free["metrics"].items():   # None: not measured (offline, ClaimsBacked)
        assert retried["metrics"][name] == (value if value is None else pytest.approx(value, rel=1e-12)), name
    assert retried["counts"] == fault_free["counts"]
    index = read_jsonl(tmp_path / "runs" / "index.jsonl")
    listed, _ = read_index(tmp_path / "runs" / "index.jsonl")
    assert [entry["run_id"] for entry in listed] == ["flaky"]
    assert listed[0]["counts"]["errors"] == 0 and len(index) == 2   # the first, failed figures are superseded
