"""Stage 3: score every conversation against its case and write `evaluation_results.json`.

`evaluate()` reads as its steps: read the cases and the conversations (one file or several),
load the suite's rules and the analysts' labels, score each conversation through
azure-ai-evaluation's `evaluate()` (so results have its shape and can be logged to an Azure AI
Foundry project), add the claims check, the end-state check and the judges, summarise, write.
It receives its parts (the judges, the embedder) and builds none: `lobeval.roles` does.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lobeval.claims import find_claims
from lobeval.endstate import replay_cases, state_differences
from lobeval.errors import RecordError, RoleError
from lobeval.llm import LLMClient, Usage, run_sync
from lobeval.records import (
    METRICS, SCHEMA_VERSION, RunResults, check_output, read_as, read_cases, read_conversations, read_labels,
    read_results, with_changes, write_json,
)
from lobeval.scoring import Rules, fuzzy_similar, normal_text, score_conversation
from lobeval.stats import summarise
from lobeval.suite import Suite, function_key, load_suite

EVALUATOR = "function_calls"
NO_JUDGE_MODEL = "not run: no judge model configured"
JUDGES_OFF = "not run: switched off (--judges none)"
_CASE_FIELDS = ("scenario_name", "expected_function_calls", "expected_outputs", "allowed_function_calls",
                "forbidden_function_calls", "ordered", "task_completion", "user_instructions")


@dataclass
class EvaluationResult:
    path: Path
    results: dict[str, Any]

    def summary(self) -> list[str]:
        metrics, intervals, counts = self.results["metrics"], self.results["intervals"], self.results["counts"]
        lines = [f"scored {counts['scored']} conversations ({counts['errors']} machinery errors left out, "
                 f"{counts['target_errors']} target errors scored as failures)"]
        for name, value in metrics.items():
            if value is None:
                continue
            low_high = intervals.get(name)
            band = f"  [{low_high[0]:.3f}, {low_high[1]:.3f}]" if low_high else ""
            cover = (self.results["judges"].get("coverage") or {}).get(name)
            if cover:
                band += f"  judged {cover['judged']} of {cover['of']}" + (
                    f", {cover['errors']} judge errors" if cover["errors"] else "")
            lines.append(f"{name:>16} {value:.3f}{band}")
        errored = self.results["judges"].get("errored_conversations")
        lines.append(f"judges: {self.results['judges']['status']}"
                     + (f" ({errored} conversations with judge errors)" if errored else ""))
        lines.append(str(self.path))
        return lines


class FunctionCallEvaluator:
    """An azure-ai-evaluation custom evaluator: one conversation in, its row's metrics and evidence out."""

    def __init__(self, rules: Rules):
        self.rules = rules

    def __call__(self, *, conversation: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
        row = score_conversation(conversation, case, self.rules)
        return {**{metric: row[metric] for metric in METRICS}, "row": row}


def evaluate(dataset: str | Path | None, conversations: str | Path | list[str | Path], out: str | Path, *,
             suite: str | Path | None = None, judges: Any = NO_JUDGE_MODEL, embedder: LLMClient | None = None,
             labels: str | Path | None = None, target: str | None = None, progress: bool = True) -> EvaluationResult:
    """Score the conversations and write the results.

    `judges`: the conversation judges to run (`lobeval.judges.ConversationJudges`), or the reason they
    do not run. `embedder`: a client for the embedding model, for semantic comparison of free text.
    `target` replays the expected calls for the end-state check; default: the target each conversation names.
    """
    conversation_files = [conversations] if isinstance(conversations, str | Path) else list(conversations)
    cases = {case.case_id: case.model_dump() for case in read_cases(dataset)} if dataset else {}
    records = read_conversations(conversation_files)
    loaded = load_suite(suite) if suite else None
    labels_path = Path(labels) if labels else (loaded.dir / "labels.jsonl" if loaded else None)
    given_labels = labels_path is not None and (labels is not None or labels_path.exists())   # a suite may have none
    rules = make_rules(loaded, read_labels(labels_path) if given_labels else [])
    work = [(record, case_for(record, cases, path, line)) for path, line, record in records]
    out = Path(out)
    check_output(out, [dataset, labels_path, *conversation_files, *(loaded.files if loaded else [])])
    read_as(out, read_results, "an evaluation results file")
    if embedder is not None:
        rules = with_embeddings(rules, work, embedder)
    rows, studio_url = score_with_azure(work, rules)
    rows = add_claims(rows, work, rules)
    rows = add_end_states(rows, work, target)
    rows, judge_summary = add_judges(rows, work, judges, progress)
    config = {"dataset": str(dataset) if dataset else None,
              "conversations": [str(path) for path in conversation_files],
              "suite": str(loaded.dir) if loaded else None, "labels": len(rules.labels),
              "labels_path": str(labels_path) if labels_path else None,
              "text_comparison": rules.text_mode, "judges": judge_summary.get("selected", [])}
    return EvaluationResult(*write_results(out, rows, judge_summary, config, studio_url))


def write_results(out: str | Path, rows: list[dict[str, Any]], judge_summary: dict[str, Any], config: dict[str, Any],
                  studio_url: str | None) -> tuple[Path, dict[str, Any]]:
    """Summarise the rows into the results document, check it against its schema, write it whole."""
    judge_summary = dict(judge_summary)
    results = {"schema_version": SCHEMA_VERSION, **summarise(rows)}
    results["metrics"].update(judge_summary.pop("metrics", {}))
    results["intervals"].update(judge_summary.pop("intervals", {}))
    results.update({
        "judges": judge_summary,
        "claims": {kind: sum(len(row["claims"][kind]) for row in rows if row.get("claims"))
                   for kind in ("claimed_not_done", "done_not_told")},
        "usage": total_usage(rows), "config": config, "studio_url": studio_url, "rows": rows})
    add_scenario_findings(results)
    RunResults.model_validate(results)
    return write_json(out, results), results


def rescore_with_labels(results: dict[str, Any], labels_path: str | Path, out: str | Path) -> dict[str, Any]:
    """The run of `results` scored again with the labels now in `labels_path`. Labels change only the
    function-call metrics, so the claims, the end-state check and the judges are taken from `results`:
    no model is called and the bot under test is not loaded."""
    config = results["config"]
    cases = {case.case_id: case.model_dump() for case in read_cases(config["dataset"])} if config["dataset"] else {}
    loaded = load_suite(config["suite"]) if config["suite"] else None
    labels_path = Path(labels_path)
    rules = make_rules(loaded, read_labels(labels_path) if labels_path.exists() else [])
    earlier = {(row["case_id"], row["trial"]): row for row in results["rows"]}
    rows = []
    for path, line, record in read_conversations(config["conversations"]):
        row = score_conversation(record, case_for(record, cases, path, line), rules)
        kept = earlier.get((row["case_id"], row["trial"]), {})
        rows.append({**row, **{key: kept.get(key) for key in ("claims", "state", "judges") if key in kept}})
    judge_summary = {key: value for key, value in results["judges"].items()}
    judge_summary["metrics"] = {name: value for name, value in results["metrics"].items() if name.startswith("judge.")}
    judge_summary["intervals"] = {name: value for name, value in results["intervals"].items()
                                  if name.startswith("judge.")}
    _, rescored = write_results(out, rows, judge_summary,
                                {**config, "labels": len(rules.labels), "labels_path": str(labels_path)},
                                results.get("studio_url"))
    return rescored


def make_rules(suite: Suite | None, labels: list[dict[str, Any]]) -> Rules:
    if suite is None:
        return Rules(labels=tuple(labels))
    return Rules(ignored=frozenset(map(function_key, suite.ignored_functions)),
                 optional_effects=frozenset(suite.optional_effects),
                 allowed_calls=frozenset(map(function_key, suite.allowed_function_calls)),
                 tools=suite.tools, labels=tuple(labels))


def case_for(conversation: dict[str, Any], cases: dict[str, dict[str, Any]], path: Path, line: int) -> dict[str, Any]:
    """The case a conversation is scored against: from the dataset, or inline in an imported record."""
    case = cases.get(conversation["case_id"])
    if conversation.get("expected_function_calls") is not None:
        return {"case_id": conversation["case_id"], **(case or {}),
                **{key: conversation[key] for key in _CASE_FIELDS if conversation.get(key) is not None}}
    if case is None:
        raise RecordError(path, f"line {line}", "case_id",
                          f"case {conversation['case_id']!r} is not in the dataset and the record carries no "
                          f"expected_function_calls")
    return case


def with_embeddings(rules: Rules, work: list[tuple[dict, dict]], embedder: LLMClient) -> Rules:
    """Semantic comparison of free text with the embedding model: every text embedded once."""
    texts = sorted({text for conversation, case in work for text in _texts(case.get("expected_function_calls"))}
                   | {text for conversation, _ in work for text in _texts(conversation.get("function_calls"))})
    vectors: dict[str, np.ndarray] = {}

    async def embed_all() -> None:
        for start in range(0, len(texts), 256):
            batch = texts[start:start + 256]
            for text, vector in zip(batch, await embedder.embed(batch)):
                vectors[text] = np.asarray(vector) / (np.linalg.norm(vector) or 1.0)

    run_sync(embed_all())

    def similar(expected: str, actual: str, mode: str, threshold: float) -> bool:
        if mode == "semantic" and expected in vectors and actual in vectors:
            return float(vectors[expected] @ vectors[actual]) >= threshold
        return fuzzy_similar(expected, actual, mode, threshold)

    return Rules(**{**rules.__dict__, "text_mode": "semantic", "similar": similar})


def _texts(value: Any) -> set[str]:
    """Every normalised string of several words inside a value (arguments, calls)."""
    if isinstance(value, str):
        text = normal_text(value)
        return {text} if len(text.split()) > 1 else set()
    if isinstance(value, dict):
        return set().union(*(_texts(v) for k, v in value.items() if k not in ("result", "error")))
    if isinstance(value, list):
        return set().union(*(_texts(v) for v in value))
    return set()


def azure_project(env: dict[str, str] | None = None) -> str | dict[str, str] | None:
    """Where to log results in Azure AI Foundry: AZURE_AI_PROJECT (the project endpoint), or the
    AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP and AZURE_AI_PROJECT_NAME triple; None = stay local."""
    env = os.environ if env is None else env
    if env.get("AZURE_AI_PROJECT"):
        return env["AZURE_AI_PROJECT"]
    triple = {"subscription_id": env.get("AZURE_SUBSCRIPTION_ID"), "resource_group_name": env.get("AZURE_RESOURCE_GROUP"),
              "project_name": env.get("AZURE_AI_PROJECT_NAME")}
    return triple if all(triple.values()) else None


def score_with_azure(work: list[tuple[dict, dict]], rules: Rules) -> tuple[list[dict[str, Any]], str | None]:
    """Score through azure.ai.evaluation.evaluate() with FunctionCallEvaluator; rows in input order."""
    from azure.ai.evaluation import evaluate as azure_evaluate

    if not work:
        return [], None
    with tempfile.TemporaryDirectory(prefix="lobeval-eval-") as tmp:
        data = Path(tmp) / "data.jsonl"
        with data.open("w", encoding="utf-8") as handle:
            for conversation, case in work:
                slim = {k: v for k, v in conversation.items() if k != "state_changes"}
                handle.write(json.dumps({"conversation": slim, "case": case}, default=str) + "\n")
        quiet = io.StringIO()
        logging.disable(logging.INFO)
        try:
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                result = azure_evaluate(data=str(data), evaluators={EVALUATOR: FunctionCallEvaluator(rules)},
                                        evaluation_name="lobeval function calls", azure_ai_project=azure_project())
        finally:
            logging.disable(logging.NOTSET)
    rows = [line.get(f"outputs.{EVALUATOR}.row") for line in result["rows"]]
    if len(rows) != len(work) or not all(isinstance(row, dict) for row in rows):
        raise RuntimeError(f"azure-ai-evaluation returned {len(rows)} rows for {len(work)} conversations; "
                           f"its output was:\n{quiet.getvalue()[-2000:]}")
    return rows, result.get("studio_url")


def add_claims(rows: list[dict[str, Any]], work: list[tuple[dict, dict]], rules: Rules) -> list[dict[str, Any]]:
    """Claimed but not done, and done but not told, for each conversation (rows are in work's order)."""
    return [{**row, "claims": find_claims(conversation, rules.tools)} for row, (conversation, _) in zip(rows, work)]


def add_end_states(rows: list[dict[str, Any]], work: list[tuple[dict, dict]],
                   target: str | None) -> list[dict[str, Any]]:
    """Compare each recorded end state with the state the expected calls leave on a fresh session.

    A target named by a conversation that cannot be loaded here (a transcript recorded elsewhere) leaves
    its conversations' state check as an error; a `target` given for all that cannot be loaded is bad input.
    """
    recorded = [(conversation, case) for conversation, case in work
                if conversation.get("state_changes") is not None and (target or conversation.get("target"))]
    wanted: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for conversation, case in recorded:
        spec = target or conversation["target"]
        wanted.setdefault(spec, {})[spec, case["case_id"]] = case
    expected: dict[tuple[str, str], dict[str, Any] | None] = {}
    for spec, cases in wanted.items():
        try:
            expected.update(run_sync(replay_cases(cases)))
        except RoleError as exc:
            if target:
                raise
            expected.update(dict.fromkeys(cases, {"error": f"the end state cannot be checked: {exc}"}))
    states = {}
    for conversation, case in recorded:
        replay = expected.get((target or conversation["target"], case["case_id"]))
        key = (conversation["case_id"], conversation.get("trial", 0))
        if replay is not None and "error" in replay:
            states[key] = replay
        elif replay is not None:
            states[key] = {"differences": state_differences(replay["initial"], replay["expected"],
                                                            with_changes(replay["initial"], conversation["state_changes"])),
                           "replay_errors": replay["replay_errors"]}
    return [{**row, "state": states.get((row["case_id"], row["trial"]))} for row in rows]


def add_judges(rows: list[dict[str, Any]], work: list[tuple[dict, dict]], judges: Any,
               progress: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The conversation judges on every scored conversation; "not run" with its reason (never a number)
    when `judges` is that reason."""
    from lobeval.judges import judge_all, summarise_judges

    if isinstance(judges, str):
        return ([{**row, "judges": {"status": judges}} for row in rows],
                {"status": judges, "selected": [], "errors": 0, "usage": Usage().to_dict()})
    scored = [(conversation, case) for row, (conversation, case) in zip(rows, work) if row["status"] == "scored"]
    verdicts, usage = judge_all(judges, scored, progress=progress)
    rows = [{**row, "judges": verdicts.get((row["case_id"], row["trial"]),
                                           {"status": "not run: the conversation ended in a machinery error"})}
            for row in rows]
    return rows, summarise_judges(rows, judges.selection, usage)


def add_scenario_findings(results: dict[str, Any]) -> None:
    """Claims and the judges' final score per scenario (with what it covers), next to the function-call metrics."""
    from lobeval.judges import scenario_coverage

    covered = scenario_coverage(results["rows"])
    for entry in results["scenarios"]:
        entry["judge.final_score_coverage"] = covered.get(entry["scenario_name"])
        rows = [row for row in results["rows"] if row["scenario_name"] == entry["scenario_name"]]
        for kind in ("claimed_not_done", "done_not_told"):
            entry[kind] = sum(len(row["claims"][kind]) for row in rows if row.get("claims"))
        finals = [row["judges"].get("final_score") for row in rows
                  if (row.get("judges") or {}).get("final_score") is not None]
        entry["judge.final_score"] = sum(finals) / len(finals) if finals else None


def total_usage(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Usage per role over the rows; a cost is unknown when any conversation's was."""
    totals: dict[str, Usage] = {}
    for row in rows:
        for role, numbers in (row.get("usage") or {}).items():
            totals.setdefault(role, Usage()).merge(Usage.of(numbers))
    return {role: usage.to_dict() for role, usage in totals.items()}
