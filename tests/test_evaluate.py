"""Stage 3 as a user meets it: the command, imported transcripts, joined files, labels, bad input."""
import json

import pytest

from lobeval.cli import main
from lobeval.evaluate import azure_project, evaluate
from lobeval.records import read_conversations, write_jsonl
from lobeval.scoring import Rules, score_conversation
from helpers import make_suite

CASE = {"case_id": "t-001", "scenario_name": "ticket", "user_instructions": "Create a ticket.",
        "expected_function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams",
                                                                                   "priority": "High"}}],
        "expected_outputs": ["TKT-9"]}


def conversation(case_id="t-001", trial=0, priority="High", reason="user_finished", **extra):
    return {"case_id": case_id, "trial": trial, "scenario_name": "ticket",
            "messages": [{"role": "user", "content": "Create it"}, {"role": "assistant", "content": "Created TKT-9."}],
            "function_calls": [{"functionName": "create_ticket", "arguments": {"title": "printer jams", "priority": priority},
                                "result": {"ticket_id": "TKT-9"}, "error": None, "turn": 1}],
            "termination": {"reason": reason, "turns": 2}, **extra}


@pytest.fixture
def files(tmp_path):
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE, {**CASE, "case_id": "t-002"}])
    return tmp_path, dataset


def run_cli(*args):
    return main(["evaluate", *map(str, args)])


def test_cli_scores_and_writes_the_results(files, capsys):
    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation(), conversation("t-002", priority="Low")])
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 0
    results = json.loads((tmp / "r.json").read_text())
    assert set(results) >= {"metrics", "rows", "studio_url", "intervals", "pass_k", "scenarios", "counts", "judges"}
    # t-001 perfect; t-002 one of two arguments wrong: Reliability (1 + 0.5) / 2.
    assert [row["Reliability"] for row in results["rows"]] == [1.0, 0.75]
    assert results["metrics"]["Reliability"] == pytest.approx(0.875)
    assert results["metrics"]["Success"] == 0.5
    assert results["judges"]["status"] == "not run: no judge model configured"
    assert "Reliability 0.875" in capsys.readouterr().out


def test_several_conversation_files_are_joined(files):
    tmp, dataset = files
    first = write_jsonl(tmp / "a.jsonl", [conversation()])
    second = write_jsonl(tmp / "b.jsonl", [conversation("t-002")])
    results = evaluate(dataset, [first, second], tmp / "r.json", progress=False).results
    assert [row["case_id"] for row in results["rows"]] == ["t-001", "t-002"]


def test_a_pair_in_two_files_is_an_error_naming_both(files, capsys):
    tmp, dataset = files
    first = write_jsonl(tmp / "a.jsonl", [conversation()])
    second = write_jsonl(tmp / "b.jsonl", [conversation("t-002"), conversation()])
    assert run_cli("--dataset", dataset, "--conversations", first, second, "--out", tmp / "r.json") == 2
    err = capsys.readouterr().err
    assert f"{second}: line 2 (case t-001): field 'trial': case 't-001' trial 0 is already in {first} line 1" in err
    assert not (tmp / "r.json").exists()


def test_imported_transcripts_need_only_the_minimal_fields(tmp_path):
    record = {"case_id": "prod-17", "messages": [{"role": "assistant", "content": "Done, TKT-9."}],
              "function_calls": [{"functionName": "create_ticket", "arguments": json.dumps({"title": "Printer jams"})}],
              "expected_function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams"}}]}
    convs = write_jsonl(tmp_path / "logs.jsonl", [record])
    results = evaluate(None, convs, tmp_path / "r.json", progress=False).results
    row = results["rows"][0]
    assert (row["termination"], row["Reliability"], row["Success"]) == ("imported", 1.0, 1)


@pytest.mark.parametrize("line, message", [
    ('{"case_id": "t-001", "messages": [', "c.jsonl: line 1: invalid JSON"),
    ('{"case_id": "t-001", "function_calls": []}', "c.jsonl: line 1 (case t-001): field 'messages': is required"),
    ('{"case_id": "t-001", "messages": [], "function_calls": [{"arguments": {}}]}',
     "c.jsonl: line 1 (case t-001): field 'function_calls[0].functionName': is required"),
    ('{"case_id": "t-001", "messages": [], "function_calls": [{"functionName": "f", "arguments": "{oops"}]}',
     "c.jsonl: line 1 (case t-001): field 'function_calls[0].arguments': a string that is not JSON"),
    ('{"case_id": "nope", "messages": [], "function_calls": []}',
     "c.jsonl: line 1: field 'case_id': case 'nope' is not in the dataset and the record carries no expected_function_calls"),
])
def test_a_malformed_transcript_line_exits_2_naming_file_line_and_field(files, capsys, line, message):
    tmp, dataset = files
    (tmp / "c.jsonl").write_text(line + "\n")
    assert run_cli("--dataset", dataset, "--conversations", tmp / "c.jsonl", "--out", tmp / "r.json") == 2
    assert message in capsys.readouterr().err
    assert list(tmp.glob("r.json*")) == [] and list(tmp.glob(".r.json*")) == []


def test_a_bad_label_exits_2(tmp_path, capsys):
    suite = make_suite(tmp_path)
    (suite / "labels.jsonl").write_text('{"kind": "allowed_extra_argument", "functionName": "create_ticket"}\n')
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    convs = write_jsonl(tmp_path / "c.jsonl", [conversation()])
    assert run_cli("--dataset", dataset, "--conversations", convs, "--suite", suite, "--out", tmp_path / "r.json") == 2
    assert (f"{suite / 'labels.jsonl'}: line 1: field 'argument': is required for an allowed_extra_argument label"
            in capsys.readouterr().err)


def test_suite_labels_change_precision(tmp_path):
    suite = make_suite(tmp_path)
    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE])
    extra = conversation()
    extra["function_calls"].append({"functionName": "get_ticket", "arguments": {"ticket_id": "TKT-9"}, "result": {},
                                    "error": None, "turn": 1})
    extra["function_calls"][0]["arguments"]["notes"] = "urgent"
    convs = write_jsonl(tmp_path / "c.jsonl", [extra])
    before = evaluate(dataset, convs, tmp_path / "r.json", suite=suite, progress=False).results["rows"][0]
    assert (before["Precision_fn"], before["Precision_args"]) == (0.5, pytest.approx(2 / 3))
    (suite / "labels.jsonl").write_text(
        '{"kind": "allowed_extra_call", "functionName": "get_ticket", "scenario_name": "ticket"}\n'
        '{"kind": "allowed_extra_argument", "functionName": "create_ticket", "argument": "notes"}\n')
    results = evaluate(dataset, convs, tmp_path / "r.json", suite=suite, progress=False).results
    assert (results["rows"][0]["Precision_fn"], results["rows"][0]["Precision_args"]) == (1.0, 1.0)
    assert results["config"]["labels"] == 2


def test_machinery_errors_are_counted_not_scored(files):
    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation(), conversation("t-002", reason="llm_error",
                                                                        error="endpoint gave up after 5 attempts")])
    results = evaluate(dataset, convs, tmp / "r.json", progress=False).results
    assert results["counts"]["errors"] == 1 and results["counts"]["scored"] == 1
    assert results["metrics"]["Success"] == 1.0
    assert results["errors"] == [{"case_id": "t-002", "trial": 0, "scenario_name": "ticket", "reason": "llm_error",
                                  "error": "endpoint gave up after 5 attempts"}]


def test_azure_project_comes_from_the_environment():
    assert azure_project({}) is None
    assert azure_project({"AZURE_AI_PROJECT": "https://x.services.ai.azure.com/api/projects/p"}) == \
        "https://x.services.ai.azure.com/api/projects/p"
    assert azure_project({"AZURE_SUBSCRIPTION_ID": "s", "AZURE_RESOURCE_GROUP": "g", "AZURE_AI_PROJECT_NAME": "p"}) == \
        {"subscription_id": "s", "resource_group_name": "g", "project_name": "p"}
    assert azure_project({"AZURE_SUBSCRIPTION_ID": "s"}) is None


@pytest.mark.slow
def test_evaluate_notebook_glues_results_and_metrics(files):
    import papermill
    import scrapbook

    from helpers import REPO

    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation(), conversation("t-002", priority="Low")])
    executed = tmp / "03_evaluate.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "03_evaluate.ipynb"), str(executed),
                               parameters={"dataset": str(dataset), "conversations": [str(convs)], "suite": None,
                                           "out": str(tmp / "r.json")},
                               kernel_name="python3", cwd=str(tmp), progress_bar=False)
    scraps = scrapbook.read_notebook(str(executed)).scraps
    assert scraps["results_path"].data == str(tmp / "r.json")
    assert scraps["metrics"].data["Reliability"] == pytest.approx(0.875)
    assert scraps["counts"].data["scored"] == 2


def test_with_an_embedding_model_free_text_is_compared_by_meaning_and_embedded_once(tmp_path, monkeypatch):
    from lobeval.evaluate import with_embeddings
    from lobeval.roles import resolve
    from lobeval.testing import FakeOpenAI

    case = {**CASE, "expected_function_calls": [{"functionName": "create_ticket",
                                                 "arguments": {"title": "printer on floor three jams paper"}}]}
    made = lambda title: {**conversation(), "function_calls": [{"functionName": "create_ticket", "arguments": {
        "title": title}, "result": {}, "error": None, "turn": 1}]}
    # The fake endpoint embeds a bag of words: the same words in another order are the same meaning,
    # while their character-level fuzzy ratio is far below the 0.8 threshold.
    work = [(made("paper jams printer on floor three"), case), (made("the coffee machine leaks"), case)]
    with FakeOpenAI() as server:
        for name, value in {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": server.base_url,
                            "LOBEVAL_EMBEDDING_MODEL": "fake-embedder", "LOBEVAL_CACHE_DIR": str(tmp_path)}.items():
            monkeypatch.setenv(name, value)
        rules = with_embeddings(Rules(), work, resolve("embedder").embedder)
        assert len(server.requests) == 1 and len(server.requests[0]["input"]) == 3   # one batch, each text once
        with_embeddings(Rules(), work, resolve("embedder").embedder)
        assert len(server.requests) == 1                                             # cached
    assert rules.text_mode == "semantic"
    assert [score_conversation(c, k, rules)["Recall_args"] for c, k in work] == [1.0, 0.0]
    assert [score_conversation(c, k, Rules())["Recall_args"] for c, k in work] == [0.0, 0.0]


BOT = "lobeval.samples.support_tickets:SupportTicketBot"
RAISE_PRIORITY = [{"functionName": "update_support_ticket", "arguments": {"ticket_id": "TKT-1001", "priority": "Low"}}]


@pytest.mark.parametrize("recorded, state", [
    ({}, {"differences": [{"path": "tickets.TKT-1001.priority", "expected": "Low", "actual": "High"}],
          "replay_errors": []}),
    (None, None),
])
def test_inline_expected_calls_evaluate_without_a_dataset_with_or_without_state_changes(tmp_path, recorded, state):
    """The bot did nothing: with its (empty) state changes recorded, the replay of the inline expected
    calls shows what it left undone; without them there is no state check."""
    record = {"case_id": "prod-17", "messages": [{"role": "assistant", "content": "Done."}], "function_calls": [],
              "expected_function_calls": RAISE_PRIORITY, "target": BOT, "state_changes": recorded}
    convs = write_jsonl(tmp_path / "logs.jsonl", [record])
    [row] = evaluate(None, convs, tmp_path / "r.json", progress=False).results["rows"]
    assert (row["case_id"], row["Recall_fn"], row["state"]) == ("prod-17", 0.0, state)


def test_a_recorded_target_that_cannot_be_loaded_here_leaves_the_state_check_as_an_error(tmp_path, capsys):
    record = {"case_id": "prod-17", "messages": [], "function_calls": [], "expected_function_calls": RAISE_PRIORITY,
              "target": "their_bot:Bot", "state_changes": {}}
    convs = write_jsonl(tmp_path / "logs.jsonl", [record])
    [row] = evaluate(None, convs, tmp_path / "r.json", progress=False).results["rows"]
    assert row["state"]["error"].startswith("the end state cannot be checked: target 'their_bot:Bot'")
    assert run_cli("--conversations", convs, "--target", "their_bot:Bot", "--out", tmp_path / "s.json") == 2
    assert "target 'their_bot:Bot'" in capsys.readouterr().err and not (tmp_path / "s.json").exists()


def test_a_conversation_whose_cost_is_unknown_is_scored(files):
    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation(usage={"user": {"calls": 1, "cost_usd": None,
                                                                        "cost_known": False}})])
    [(_, _, record)] = read_conversations(convs)
    assert score_conversation(record, CASE, Rules())["cost_usd"] is None


def test_an_existing_results_file_is_replaced_and_nothing_else_is(files, capsys):
    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation()])
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 0
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 0
    other = write_jsonl(tmp / "other.jsonl", [conversation()])
    before = other.read_bytes()
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", other) == 2
    assert "other.jsonl: --out: exists and is not an evaluation results file" in capsys.readouterr().err
    assert other.read_bytes() == before
