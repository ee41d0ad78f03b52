"""Degenerate runs through the real notebooks: every stage runs, the report says why each section is
empty, and the gate fails when nothing was measured.

One case runs the whole chain against a bot whose infrastructure is down. The others write what the
earlier stages would have written (their records, and executed notebooks holding only their glue, so
the chain resumes after them) and run the stages from there: the cheapest route through the real
notebooks that still reaches every stage that reads the degenerate records.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from helpers import CASE, CONVERSATION, REPO, make_suite
from lobeval import TargetUnavailable
from lobeval.cli import main
from lobeval.core.records import write_json, write_jsonl

pytestmark = pytest.mark.slow

KEY = "sk-degenerate-NEVER-WRITTEN-4242"
BUDGET_SPENT = "budget of $0.00 spent ($0.0000): no new model calls are started"
SECTIONS = ("Verdict", "Headline metrics", "By scenario", "Why it failed", "Judges", "Claimed but not done", "Cost",
            "Replay of the failing conversations", "Trend", "Run configuration")


class DownBot:
    """A bot whose own model endpoint refuses it, and says so with the key in the message."""

    async def start(self, case: dict) -> None:
        raise TargetUnavailable(f"model endpoint refused the key {os.environ['OPENAI_API_KEY']}")


def case(case_id: str) -> dict:
    """A case that expects one call: the ticket."""
    return {**CASE, "case_id": case_id, "expected_function_calls": CASE["expected_function_calls"][:1]}


def conversation(case_id: str, trial: int = 0, *, done: bool = True) -> dict:
    """A conversation in which the bot creates the ticket (done), or only talks."""
    if done:
        return {**CONVERSATION, "case_id": case_id, "trial": trial}
    return {**CONVERSATION, "case_id": case_id, "trial": trial, "function_calls": [],
            "messages": [{"role": "user", "content": "Create a ticket"},
                         {"role": "assistant", "content": "I cannot do that right now."}]}


def budget_spent(case_id: str) -> dict:
    return {**CONVERSATION, "case_id": case_id, "messages": [], "function_calls": [], "usage": {},
            "termination": {"reason": "budget_spent", "turns": 0}, "error": BUDGET_SPENT}


def glued(path: Path, **glue) -> None:
    """An executed notebook that holds only its scrapbook glue, as the chain reads a finished stage."""
    outputs = [new_output("display_data", data={"application/scrapbook.scrap.json+json": {
        "name": name, "data": value, "encoder": "json", "version": 1}},
        metadata={"scrapbook": {"name": name, "data": True, "display": False}}) for name, value in glue.items()]
    nbformat.write(new_notebook(cells=[new_code_cell(outputs=outputs)]), str(path))


def simulated(run_dir: Path, cases: list[dict], conversations: list[dict]) -> None:
    """Stages 01 and 02 done: the chain goes on from 03_evaluate."""
    run_dir.mkdir(parents=True)
    write_jsonl(run_dir / "dataset.jsonl", cases)
    write_jsonl(run_dir / "conversations.jsonl", conversations)
    glued(run_dir / "01_generate.ipynb", dataset_path=str(run_dir / "dataset.jsonl"))
    glued(run_dir / "02_simulate.ipynb", conversations_path=str(run_dir / "conversations.jsonl"), terminations={})


def judged_with_errors(run_dir: Path, suite: Path, cases: list[dict], conversations: list[dict]) -> None:
    """Stages 01 to 03 done, and every judge call of every conversation failed: the chain goes on from 04."""
    from lobeval.evaluation.evaluate import evaluate   # here: the stage kernels import this module for DownBot

    simulated(run_dir, cases, conversations)
    results_path = run_dir / "evaluation_results.json"
    results = evaluate(run_dir / "dataset.jsonl", run_dir / "conversations.jsonl", results_path, suite=suite,
                       progress=False).results
    error = {"judge": "goal", "message_index": None, "error": "judge reply unusable after 2 attempts: not JSON",
             "raw": "Sure! Here is my verdict"}
    for row in results["rows"]:
        row["judges"] = {"status": "run", "errors": [error], "goal": None, "final_score": None, "final_status": None}
    scored = results["counts"]["scored"]
    results["judges"] = {
        "status": "run", "selected": ["goal"], "errors": scored, "errored_conversations": scored,
        "coverage": {"judge.goal": {"judged": 0, "of": scored, "errors": scored, "not_applicable": 0}},
        "final_status": {"Done": 0, "Partial Failure": 0, "Failed": 0, "Not judged": scored}}
    write_json(results_path, results)
    glued(run_dir / "03_evaluate.ipynb", results_path=str(results_path), metrics=results["metrics"],
          counts=results["counts"])


NOTHING = "no conversation scored: "
NOT_MEASURED = "so this run says nothing about the bot; the quality gate failed because nothing could be measured."
CASES = [
    pytest.param(lambda run_dir, suite: simulated(run_dir, [], []), 1,
                 "This run has no conversations, so it says nothing about the bot; the quality gate failed because "
                 "nothing could be measured.",
                 [NOTHING + "the run has no conversations"], [], id="zero conversations"),
    pytest.param(None, 1,
                 "No conversation could be scored, as all 2 conversations ended in a machinery error (the bot could "
                 "not be reached), " + NOT_MEASURED,
                 [NOTHING + "the bot (or its own infrastructure) could not be reached: all 2 conversations "
                            "ended target_unavailable (a machinery error, not the bot's failure), first: ",
                  "model endpoint refused the key ***"], [], id="all machinery errors"),
    pytest.param(lambda run_dir, suite: simulated(run_dir, [case("a"), case("b")],
                                                  [budget_spent("a"), budget_spent("b")]), 1,
                 "No conversation could be scored, as all 2 conversations ended in a machinery error (the budget was "
                 "spent), " + NOT_MEASURED,
                 [NOTHING + "the budget was spent: all 2 conversations ended budget_spent (a machinery error, not "
                            "the bot's failure), first: a trial 0: " + BUDGET_SPENT], [],
                 id="budget spent before the first call"),
    pytest.param(lambda run_dir, suite: judged_with_errors(run_dir, suite, [case("a"), case("b")],
                                                           [conversation("a"), conversation("b")]), 1,
                 "None of the 2 conversations failed; the quality gate failed because 2 of 2 conversations were lost "
                 "to machinery or judge errors, more than the 5% allowed.",
                 ["no conversation judged: 2 judge errors, first: a trial 0: goal: judge reply unusable",
                  "Not judged 2", "2 conversations with judge errors", "judged 0 of 2",
                  "FAIL</b> error rate &lt;= 0.05"], [NOTHING], id="all judge errors"),
    pytest.param(lambda run_dir, suite: simulated(run_dir, [case("a")], [conversation("a")]), 0,
                 "The one conversation passed; the quality gate passed: Reliability 1.000 and Success 1.000 meet their "
                 "minimum of 0.8.",
                 ["One trial per case: no pass^k curve.", "No failures."], [NOTHING], id="one conversation"),
    pytest.param(lambda run_dir, suite: simulated(run_dir, [case("a")], [conversation("a", 0), conversation("a", 1),
                                                                         conversation("a", 2, done=False)]), 1,
                 "1 of 3 conversations failed, because the bot never called create_ticket; the quality gate failed "
                 "because Reliability 0.667 is below its minimum of 0.8 and Success 0.667 is below its minimum of 0.8.",
                 ["FAIL</b> Success &gt;= 0.8"], [NOTHING, "One trial per case"], id="one case, three trials"),
]


def first_text(page: str) -> str:
    """The first text a reader sees on a page: its body's, without styles and scripts."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for hidden in soup.body(["style", "script"]):
        hidden.decompose()
    return soup.body.get_text("\n", strip=True).split("\n")[0]


@pytest.mark.parametrize("prepare, exit_status, verdict, said, unsaid", CASES)
def test_a_degenerate_run_gives_a_full_report_and_a_clear_verdict(prepare, exit_status, verdict, said, unsaid,
                                                                    tmp_path, monkeypatch, capsys):
    runs = (tmp_path / "runs").resolve()
    suite = make_suite(tmp_path)
    monkeypatch.chdir(REPO)
    monkeypatch.setattr("lobeval.workspace.runs.RUNS", runs)
    monkeypatch.delenv("LOBEVAL_RUNS", raising=False)
    # the stage kernels import DownBot from here (and lobeval from where this process does)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), str(Path(__file__).parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for variable in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    if prepare is not None:
        prepare(runs / "d", suite)

    status = main(["run", "--suite", str(suite), "--run-id", "d", "--cases-per-scenario", "2",
                   "--target", "test_degenerate:DownBot"])

    out, err = capsys.readouterr()
    assert status == exit_status, out + err
    assert out.splitlines()[-2].startswith("gate: " + ("passed" if exit_status == 0 else "FAILED"))
    assert verdict in out.splitlines()   # the terminal says it in the words the page opens with
    page = (runs / "d" / "report.html").read_text(encoding="utf-8")
    assert first_text(page) == verdict
    assert [heading for heading in SECTIONS if heading not in page] == []
    assert "Quality gate" in page and ("PASSED" if exit_status == 0 else "FAILED") in page
    assert [text for text in said if text not in page] == []
    assert [text for text in unsaid if text in page] == []
    if said[0].startswith(NOTHING):
        # said in the verdict's failed check, the headline, both plots, pass^k, the failures and the claims at least
        assert page.count(said[0]) >= 7
        assert "FAIL</b> conversations scored" in page
    leaking = [path.name for path in (runs / "d").rglob("*")
               if path.is_file() and KEY in path.read_text(errors="ignore")]
    assert leaking == []
