"""Stage 3 as a user meets it: the command, imported transcripts, joined files, labels, bad input."""
import json

import pytest

from lobeval.cli import main
from lobeval.evaluation.evaluate import azure_project, evaluate
from lobeval.core.records import METRICS, read_conversations, read_results, write_jsonl
from lobeval.scoring.scoring import Rules, score_conversation
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
    written = json.loads((tmp / "r.json").read_text())
    assert written["rows_file"] == "r.rows.jsonl" and "rows" not in written   # the rows are beside it
    results = read_results(tmp / "r.json")
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
    from lobeval.evaluation.evaluate import with_embeddings
    from lobeval.workflow.roles import resolve
    from lobeval.models.testing import FakeOpenAI

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


# --- streaming, the rows file, azure-ai-evaluation only for a Foundry project (issue #18) -----------------

def mixed_run(tmp):
    """A suite, a dataset and conversations of every kind a row can come from: right, wrong and extra
    arguments, an extra call, a machinery error, an imported transcript carrying its case, a recorded end state."""
    suite = make_suite(tmp)
    dataset = write_jsonl(tmp / "d.jsonl", [CASE, {**CASE, "case_id": "t-002"}, {**CASE, "case_id": "t-003"}])
    extra = conversation("t-002", trial=1, priority="Low")
    extra["function_calls"][0]["arguments"]["notes"] = "urgent"
    extra["function_calls"].append({"functionName": "get_ticket", "arguments": {"ticket_id": "TKT-9"},
                                    "result": {}, "error": None, "turn": 1})
    imported = {"case_id": "prod-17", "messages": [{"role": "assistant", "content": "Done, TKT-9."}],
                "function_calls": [{"functionName": "create_ticket", "arguments": json.dumps({"title": "Printer"})}],
                "expected_function_calls": [{"functionName": "create_ticket", "arguments": {"title": "Printer jams",
                                                                                            "due": "2024-05-01"}}]}
    convs = write_jsonl(tmp / "c.jsonl", [
        conversation(), conversation("t-002", priority="Low"), extra,
        conversation("t-003", reason="llm_error", error="gave up"), imported,
        conversation("t-003", trial=1, target=BOT, state_changes={}),
    ])
    return suite, dataset, convs


def without_azure(monkeypatch):
    for name in ("AZURE_AI_PROJECT", "AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "AZURE_AI_PROJECT_NAME"):
        monkeypatch.delenv(name, raising=False)


def test_azure_evaluate_and_direct_scoring_write_the_same_rows(tmp_path, monkeypatch):
    without_azure(monkeypatch)
    suite, dataset, convs = mixed_run(tmp_path)
    direct = evaluate(dataset, convs, tmp_path / "direct.json", suite=suite, progress=False).results
    azure = evaluate(dataset, convs, tmp_path / "azure.json", suite=suite, progress=False, azure=True).results
    assert direct["rows"] == azure["rows"] and len(direct["rows"]) == 6
    assert {**direct, "rows": None} == {**azure, "rows": None}
    wrong = [row.get("wrong_arguments") for row in direct["rows"]]
    assert wrong[1] == [{"functionName": "create_ticket", "argument": "priority", "expected": "High", "actual": "Low"}]
    assert direct["rows"][4]["missing_arguments"] == [{"functionName": "create_ticket", "argument": "due",
                                                       "expected": "2024-05-01"}]
    assert direct["rows"][5]["state"] is not None and direct["counts"]["errors"] == 1


def test_azure_evaluate_runs_only_when_a_foundry_project_is_configured(files, monkeypatch):
    import lobeval.evaluation.evaluate

    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation(), conversation("t-002", priority="Low")])
    calls = []

    def through_azure(work, rules):
        work = list(work)
        calls.append(len(work))
        return [score_conversation(c, k, rules) for c, k in work], "https://ai.azure.com/run/1"

    monkeypatch.setattr(lobeval.evaluation.evaluate, "score_with_azure", through_azure)
    without_azure(monkeypatch)
    local = evaluate(dataset, convs, tmp / "r.json", progress=False).results
    assert calls == [] and local["studio_url"] is None
    monkeypatch.setenv("AZURE_AI_PROJECT", "https://x.services.ai.azure.com/api/projects/p")
    logged = evaluate(dataset, convs, tmp / "r.json", progress=False).results
    assert calls == [2] and logged["studio_url"] == "https://ai.azure.com/run/1"
    assert logged["rows"] == local["rows"]


def test_rows_are_a_jsonl_file_beside_the_results_without_the_lists_pairs_repeat(tmp_path, monkeypatch):
    without_azure(monkeypatch)
    suite, dataset, convs = mixed_run(tmp_path)
    out = tmp_path / "run" / "evaluation_results.json"
    results = evaluate(dataset, convs, out, suite=suite, progress=False).results
    summary = json.loads(out.read_text())
    assert summary["rows_file"] == "evaluation_rows.jsonl" and "rows" not in summary
    assert set(summary) >= {"schema_version", "metrics", "intervals", "pass_k", "scenarios", "counts", "errors",
                            "judges", "claims", "usage", "config", "studio_url"}
    lines = (out.parent / "evaluation_rows.jsonl").read_text().splitlines()
    written = [json.loads(line) for line in lines]
    assert len(written) == 6 and all(row["schema_version"] == 1 for row in written)
    assert not any(key in row for row in written for key in ("wrong_arguments", "missing_arguments", "extra_arguments"))
    assert sorted(path.name for path in out.parent.iterdir()) == ["evaluation_results.json", "evaluation_rows.jsonl"]
    # read back, each row is what the scorer made of it
    rules = lobeval_rules(suite)
    [(_, _, first)] = read_conversations(convs)[:1]
    expected = score_conversation(first, CASE, rules)
    assert {key: results["rows"][0][key] for key in expected} == expected


def lobeval_rules(suite):
    from lobeval.evaluation.evaluate import make_rules
    from lobeval.workspace.suite import load_suite

    return make_rules(load_suite(suite), [])


def test_chunks_change_nothing(tmp_path, monkeypatch):
    import lobeval.evaluation.evaluate

    without_azure(monkeypatch)
    suite, dataset, convs = mixed_run(tmp_path)
    whole = evaluate(dataset, convs, tmp_path / "whole.json", suite=suite, progress=False).results
    monkeypatch.setattr(lobeval.evaluation.evaluate, "CHUNK", 2)
    chunked = evaluate(dataset, convs, tmp_path / "chunked.json", suite=suite, progress=False).results
    assert chunked["rows"] == whole["rows"]
    assert {**chunked, "rows": None} == {**whole, "rows": None}


def test_a_failure_midway_leaves_the_earlier_results_whole_and_no_temporary_file(files, monkeypatch):
    import lobeval.evaluation.evaluate

    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation(), conversation("t-002", priority="Low")])
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 0
    before = {path.name: path.read_bytes() for path in tmp.glob("r.*")}
    assert set(before) == {"r.json", "r.rows.jsonl"}
    monkeypatch.setattr(lobeval.evaluation.evaluate, "CHUNK", 1)
    real = lobeval.evaluation.evaluate.find_claims
    seen = []

    def failing(conversation, tools):
        seen.append(conversation["case_id"])
        if len(seen) == 2:
            raise OSError(28, "No space left on device")
        return real(conversation, tools)

    monkeypatch.setattr(lobeval.evaluation.evaluate, "find_claims", failing)
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 2
    assert {path.name: path.read_bytes() for path in tmp.glob("r.*")} == before
    assert list(tmp.glob(".r.*")) == []


def test_a_bad_line_after_many_good_ones_writes_nothing(files, capsys, monkeypatch):
    import lobeval.evaluation.evaluate

    tmp, dataset = files
    monkeypatch.setattr(lobeval.evaluation.evaluate, "CHUNK", 1)
    good = "".join(json.dumps(conversation(trial=trial)) + "\n" for trial in range(5))
    (tmp / "c.jsonl").write_text(good + '{"case_id": "t-001", "trial": 9, "messages": []}\n')
    assert run_cli("--dataset", dataset, "--conversations", tmp / "c.jsonl", "--out", tmp / "r.json") == 2
    assert "c.jsonl: line 6 (case t-001): field 'function_calls': is required" in capsys.readouterr().err
    assert list(tmp.glob("r.*")) == [] and list(tmp.glob(".r.*")) == []


def test_a_file_where_the_rows_would_go_that_is_not_rows_is_left_alone(files, capsys):
    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation()])
    mine = write_jsonl(tmp / "r.rows.jsonl", [{"note": "my own file"}])
    before = mine.read_bytes()
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 2
    assert "r.rows.jsonl: --out: exists and is not the rows file of evaluation results" in capsys.readouterr().err
    assert mine.read_bytes() == before and not (tmp / "r.json").exists()


def test_rescoring_with_labels_keeps_claims_state_and_judges_and_writes_both_files(tmp_path, monkeypatch):
    from lobeval.evaluation.evaluate import rescore_with_labels

    without_azure(monkeypatch)
    suite, dataset, convs = mixed_run(tmp_path)
    out = tmp_path / "evaluation_results.json"
    before = evaluate(dataset, convs, out, suite=suite, progress=False).results
    (suite / "labels.jsonl").write_text(
        '{"kind": "allowed_extra_call", "functionName": "get_ticket", "scenario_name": "ticket"}\n'
        '{"kind": "allowed_extra_argument", "functionName": "create_ticket", "argument": "notes"}\n')
    after = rescore_with_labels(read_results(out), suite / "labels.jsonl", tmp_path / "evaluation_results.labelled.json")
    assert (tmp_path / "evaluation_rows.labelled.jsonl").exists()
    assert after == read_results(tmp_path / "evaluation_results.labelled.json")
    assert (before["rows"][2]["Precision_fn"], after["rows"][2]["Precision_fn"]) == (0.5, 1.0)
    assert after["config"]["labels"] == 2
    for key in ("claims", "state", "judges"):
        assert [row.get(key) for row in after["rows"]] == [row.get(key) for row in before["rows"]]
    assert read_results(out) == before   # the run itself is unchanged


def test_evaluating_again_with_judges_asks_the_model_nothing(tmp_path, monkeypatch):
    """The judges' cache answers every request of a re-evaluation of unchanged conversations, chunk after chunk."""
    import lobeval.evaluation.evaluate
    from lobeval.judges.judges import ConversationJudges, selected_judges
    from lobeval.models.llm import LLMClient, resolve_model
    from lobeval.models.testing import FakeOpenAI, json_reply

    without_azure(monkeypatch)
    for name in ("LOBEVAL_MODEL", "LOBEVAL_EMBEDDING_MODEL", "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-JUDGE1234567")
    monkeypatch.setenv("LOBEVAL_JUDGE_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(lobeval.evaluation.evaluate, "CHUNK", 2)
    good = dict.fromkeys(("helpfulness", "coherence", "verbosity", "relevance", "faithfulness"), 4)

    def policy(request):
        count = request["messages"][-1]["content"].count("ASSISTANT: (reply ")
        return json_reply({"replies": [{"reply": k, "scores": good, "failure": None} for k in range(1, count + 1)],
                           "goal": {"score": 1, "reason": "created"}})

    dataset = write_jsonl(tmp_path / "d.jsonl", [CASE, {**CASE, "case_id": "t-002"}])
    convs = write_jsonl(tmp_path / "c.jsonl", [conversation(), conversation("t-002", priority="Low"),
                                               conversation(trial=1), conversation("t-002", trial=1, reason="llm_error")])
    with FakeOpenAI(policy) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)

        def judged():
            client = LLMClient(resolve_model("judge"), role="judge", cache=True)
            judges = ConversationJudges(client, selected_judges(["per_turn", "goal"]), [])
            return evaluate(dataset, convs, tmp_path / "r.json", judges=judges, progress=False).results

        first = judged()
        sent = server.count
        second = judged()
        assert sent > 0 and server.count == sent
    assert second["judges"]["usage"]["cached_calls"] == second["judges"]["usage"]["calls"] > 0
    verdicts = [[{k: v for k, v in row["judges"].items() if k != "usage"} for row in run["rows"]]
                for run in (first, second)]
    assert verdicts[0] == verdicts[1] and verdicts[1][0]["final_score"] == 1.0
    assert second["rows"][3]["judges"] == {"status": "not run: the conversation ended in a machinery error"}
    assert second["judges"]["coverage"]["judge.final_score"]["of"] == 3


# --- conversations without a reference (imported production traces) ---------------------------------

def test_imported_traces_evaluate_without_a_dataset_scored_only_by_what_needs_no_reference(tmp_path, capsys):
    from pathlib import Path

    from lobeval.imports.traces import import_traces

    fixture = Path(__file__).parents[1] / "fixtures" / "traces" / "openai_chat.jsonl"
    convs = tmp_path / "traces.jsonl"
    assert import_traces(fixture, "openai-chat", convs) == 2
    assert run_cli("--conversations", convs, "--out", tmp_path / "r.json") == 0
    out = capsys.readouterr().out
    assert ("2 conversations had no reference (imported traces, or a benchmark run that publishes no tasks): scored "
            "only by failed calls, claims and judges") in out
    results = read_results(tmp_path / "r.json")
    rows = {row["case_id"]: row for row in results["rows"]}
    assert all(row["reference"] is False and row["status"] == "scored" for row in rows.values())
    assert all(row[metric] is None for row in rows.values() for metric in METRICS)
    assert all(results["metrics"][metric] is None for metric in METRICS) and results["pass_k"] == {}
    assert results["counts"]["unreferenced"] == 2 and results["counts"]["scored"] == 2
    # conv-1's update_support_ticket failed ('Urgent' is no priority); line-3 made no call: 1 of 2.
    assert rows["conv-1"]["failed_calls"][0]["functionName"] == "update_support_ticket"
    assert rows["conv-1"]["checks"] == {"no_failed_calls": False, "no_forbidden_calls": True, "ended_normally": True}
    assert rows["line-3"]["failed_calls"] == []
    assert results["metrics"]["NoFailedCalls"] == 0.5 and results["over"]["NoFailedCalls"] == 2
    # the rules' claimed-but-not-done findings are "to check" on real bots (lobeval.scoring.trust): ClaimsBacked needs the judge
    assert results["metrics"]["ClaimsBacked"] is None and results["over"]["ClaimsBacked"] == 0
    assert rows["conv-1"]["state"] is None
    assert "NoFailedCalls 0.500" in out and "over 2 of 2 conversations" in out


def test_a_referenced_record_beside_one_without_a_reference_scores_as_before(tmp_path):
    referenced = conversation("prod-1", expected_function_calls=CASE["expected_function_calls"],
                              expected_outputs=["TKT-9"], priority="Low")
    alone = evaluate(None, write_jsonl(tmp_path / "one.jsonl", [referenced]), tmp_path / "one.json",
                     progress=False).results
    trace = {**conversation("prod-2"), "function_calls": [{"functionName": "create_ticket", "arguments": {},
                                                           "error": "timeout", "turn": 1}]}
    trace.pop("scenario_name")
    mixed = evaluate(None, write_jsonl(tmp_path / "two.jsonl", [referenced, trace]), tmp_path / "two.json",
                     progress=False).results
    first, second = mixed["rows"]
    assert {metric: first[metric] for metric in METRICS} == {metric: alone["rows"][0][metric] for metric in METRICS}
    assert first["Reliability"] == 0.75 and first["reference"] is True
    assert {metric: mixed["metrics"][metric] for metric in METRICS} == {
        metric: alone["metrics"][metric] for metric in METRICS}
    assert mixed["metrics"]["pass^1"] == alone["metrics"]["pass^1"] == 0.0
    assert second["reference"] is False and second["Success"] is None and second["checks"]["no_failed_calls"] is False
    assert mixed["counts"]["unreferenced"] == 1 and mixed["over"]["Reliability"] == 1
    assert mixed["metrics"]["NoFailedCalls"] == 0.5 and mixed["over"]["NoFailedCalls"] == 2


def test_with_a_dataset_a_record_whose_case_is_not_in_it_is_still_an_error(files, capsys):
    tmp, dataset = files
    convs = write_jsonl(tmp / "c.jsonl", [conversation("t-999")])
    assert run_cli("--dataset", dataset, "--conversations", convs, "--out", tmp / "r.json") == 2
    assert "case 't-999' is not in the dataset and the record carries no expected_function_calls" in \
        capsys.readouterr().err
    assert not (tmp / "r.json").exists()
