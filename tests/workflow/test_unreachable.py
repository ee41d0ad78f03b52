"""A bot or a model endpoint that cannot be reached is the machinery's failure, never the bot's (issue 44): the
pre-flight of `run`, `simulate` and `evaluate` refuses it in one line with exit status 2, writing nothing; a bot
that stops mid-run loses its conversations to machinery errors, which no metric counts."""
from __future__ import annotations

import json
import re

import pytest

from helpers import REPO, read_jsonl
from http_target import serve
from lobeval.cli import main
from lobeval.samples.support_tickets import SupportTicketBot
from lobeval.models.testing import FakeOpenAI
from sockets import closed_port, resetting
from test_cli import no_stage, one_error_line, runs_dir   # noqa: F401 (fixtures)

REFUSED = r"ConnectionRefusedError: \[Errno \d+\] Connect call failed \('127\.0\.0\.1', \d+\)"


@pytest.fixture
def model(monkeypatch, tmp_path):
    """One model for every role, its key set; the test points it at an endpoint."""
    monkeypatch.setenv("LOBEVAL_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unreachable-12345")
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    return monkeypatch


# --- the pre-flight: exit 2, one line, nothing written -----------------------------------------------

def test_run_against_an_http_target_nothing_listens_on_exits_2_before_any_stage_and_writes_nothing(
        runs_dir, no_stage, capsys):
    url = f"http://127.0.0.1:{closed_port()}/bot"
    assert main(["run", "--target", url]) == 2
    assert one_error_line(capsys) == (f"lobeval run: error: target {url}: cannot connect (ConnectError: All "
                                      f"connection attempts failed): is it running?")
    assert not runs_dir.exists()   # no run folder, no runs/index.jsonl


def test_run_against_an_http_target_that_resets_every_connection_exits_2(runs_dir, no_stage, capsys):
    with resetting() as server:
        assert main(["run", "--target", f"http://127.0.0.1:{server.port}/bot"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"lobeval run: error: target http://127.0.0.1:{server.port}/bot: cannot connect (")
    assert line.endswith("): is it running?") and server.accepted == 1 and not runs_dir.exists()


@pytest.mark.parametrize("variables, url", [
    ({"OPENAI_BASE_URL": "http://127.0.0.1:{port}/v1"}, "http://127.0.0.1:{port}/v1"),
    ({"AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:{port}", "AZURE_OPENAI_API_KEY": "azure-key",
      "AZURE_OPENAI_API_VERSION": "2024-10-21"}, "http://127.0.0.1:{port}")], ids=["openai", "azure"])
def test_run_with_a_model_endpoint_nothing_listens_on_exits_2_naming_it_and_the_roles_that_use_it(
        runs_dir, no_stage, model, capsys, variables, url):
    port = closed_port()
    for name, value in variables.items():
        model.setenv(name, value.format(port=port))
    assert main(["run", "--user", "llm"]) == 2
    line = one_error_line(capsys)
    assert re.fullmatch(rf"lobeval run: error: model endpoint {re.escape(url.format(port=port))} \(the simulated "
                        rf"user's, the judges', the bot's\): cannot connect \({REFUSED}\): is it running\?", line), line
    assert not runs_dir.exists()


def test_run_with_a_key_the_endpoint_refuses_exits_2_saying_so_and_asks_no_model(runs_dir, no_stage, model, capsys):
    with FakeOpenAI(key="sk-test-the-right-key") as fake:
        url = fake.base_url
        model.setenv("OPENAI_BASE_URL", url)
        assert main(["run", "--user", "llm"]) == 2
    assert one_error_line(capsys) == (
        f"lobeval run: error: model endpoint {url} (the simulated user's, the judges', the bot's): refused "
        f"the key in OPENAI_API_KEY (HTTP 401: Incorrect API key provided.): check the key")
    assert fake.count == 0 and not runs_dir.exists()


@pytest.fixture
def dataset(tmp_path):
    from lobeval.generation.generate import generate

    return generate(REPO / "scenarios" / "support_tickets", tmp_path / "data" / "dataset.jsonl",
                    cases_per_scenario=1).path


def test_simulate_against_an_http_target_nothing_listens_on_exits_2_and_writes_nothing(tmp_path, runs_dir, dataset,
                                                                                      capsys):
    url = f"http://127.0.0.1:{closed_port()}/bot"
    out = tmp_path / "out" / "conversations.jsonl"
    assert main(["simulate", "--dataset", str(dataset), "--target", url, "--out", str(out)]) == 2
    assert one_error_line(capsys) == (f"lobeval simulate: error: target {url}: cannot connect (ConnectError: All "
                                      f"connection attempts failed): is it running?")
    assert not (tmp_path / "out").exists()


def test_simulate_and_evaluate_with_a_model_endpoint_nothing_listens_on_exit_2_and_write_nothing(
        tmp_path, runs_dir, dataset, model, capsys):
    port = closed_port()
    model.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    model.delenv("LOBEVAL_MODEL")
    model.setenv("LOBEVAL_USER_MODEL", "gpt-4o-mini")
    assert main(["simulate", "--dataset", str(dataset), "--user", "llm", "--out", str(tmp_path / "c.jsonl")]) == 2
    assert re.fullmatch(rf"lobeval simulate: error: model endpoint http://127\.0\.0\.1:{port}/v1 \(the simulated "
                        rf"user's\): cannot connect \({REFUSED}\): is it running\?", one_error_line(capsys))
    model.delenv("LOBEVAL_USER_MODEL")
    model.setenv("LOBEVAL_JUDGE_MODEL", "gpt-4o-mini")
    conversations = tmp_path / "conversations.jsonl"
    conversations.write_text("")
    assert main(["evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                 "--out", str(tmp_path / "results.json")]) == 2
    assert re.fullmatch(rf"lobeval evaluate: error: model endpoint http://127\.0\.0\.1:{port}/v1 \(the judges'\): "
                        rf"cannot connect \({REFUSED}\): is it running\?", one_error_line(capsys))
    assert not (tmp_path / "c.jsonl").exists() and not (tmp_path / "results.json").exists()


# --- a bot that stops mid-run ------------------------------------------------------------------------

@pytest.mark.slow
def test_a_bot_that_stops_mid_run_loses_its_conversations_to_machinery_errors_with_no_metric_on_them(
        runs_dir, capsys):
    with serve(SupportTicketBot("rules"), stop_after=4) as server:   # 4 conversations, then every connection refused
        status = main(["run", "--target", server.url, "--cases-per-scenario", "1", "--concurrency", "1",
                       "--run-id", "dies"])
    out, err = capsys.readouterr()
    run_dir = runs_dir / "dies"
    conversations = read_jsonl(run_dir / "conversations.jsonl")
    lost = [record for record in conversations if record["termination"]["reason"] == "target_unavailable"]
    assert (len(conversations), len(lost)) == (13, 9), out + err
    assert {record["error"] for record in lost} == {
        f"start failed: POST {server.url}/sessions: ConnectError: All connection attempts failed"}

    results = json.loads((run_dir / "evaluation_results.json").read_text())
    assert (results["counts"]["scored"], results["counts"]["errors"]) == (4, 9)
    # offline, ClaimsBacked is not measured (lobeval.scoring.trust): over none of them
    assert results["over"]["Success"] == 4 and results["over"]["NoFailedCalls"] == 4
    rows = [json.loads(line) for line in (run_dir / "evaluation_rows.jsonl").read_text().splitlines()]
    unscored = [row for row in rows if row["status"] == "error"]
    assert len(unscored) == 9 and all(row["termination"] == "target_unavailable" for row in unscored)
    metrics = ("Reliability", "Success", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args")
    assert all(row.get(name) is None for row in unscored for name in metrics)
    assert all(row.get("claims") is None and row["failed_calls"] == [] for row in unscored)   # no claims checked

    # the gate fails on the error rate (a gate), and says the bot's figures are over the 4 conversations it had
    assert status == 1
    lines = out.splitlines()
    assert "4 conversations scored, 9 machinery errors" in lines
    assert ("FAIL  error rate <= 0.05: 9/13 conversations failed in the machinery (target_unavailable 9) = 0.692 > "
            "0.05") in lines
    # the sample bot's planted wrong due date is among the 4: the bot's own figure, over its 4 conversations
    assert any(re.match(r"(PASS|FAIL|UNDECIDED)  Success >= 0\.8: Success = \d\.\d{3} .* over 4 conversations", line)
               for line in lines), out
