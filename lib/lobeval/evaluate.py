"""Stage 3: score every conversation against its case and write `evaluation_results.json`.

`evaluate()` reads as its steps: read the cases and the conversations (one file or several),
load the suite's rules and the analysts' labels, score each conversation through
azure-ai-evaluation's `evaluate()` (so results have its shape and can be logged to an Azure AI
Foundry project), add the claims check and the judges, summarise, write.
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
from lobeval.errors import ConfigError, RecordError
from lobeval.judges import judge_all, selected_judges, summarise_judges
from lobeval.llm import Usage, run_sync
from lobeval.records import read_cases, read_conversations, read_labels, with_changes, write_json
from lobeval.scoring import METRICS, Rules, concrete, fuzzy_similar, resolver, score_conversation, state_differences
from lobeval.stats import summarise
from lobeval.suite import Suite, function_key, load_suite

SCHEMA_VERSION = 1
EVALUATOR = "function_calls"
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
            lines.append(f"{name:>16} {value:.3f}{band}")
        lines.append(f"judges: {self.results['judges']['status']}")
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
             suite: str | Path | None = None, judges: list[str] | None = None, labels: str | Path | None = None,
             target: str | None = None, progress: bool = True) -> EvaluationResult:
    """`target` replays the expected calls for the end-state check; default: the target each conversation names."""
    cases = {case.case_id: case.model_dump() for case in read_cases(dataset)} if dataset else {}
    records = read_conversations(conversations)
    loaded = load_suite(suite) if suite else None
    labels_path = Path(labels) if labels else (loaded.dir / "labels.jsonl" if loaded else None)
    rules = make_rules(loaded, read_labels(labels_path) if labels_path and labels_path.exists() else [])
    work = [(record, case_for(record, cases, path, line)) for path, line, record in records]
    rules = with_embeddings(rules, work)
    rows, studio_url = score_with_azure(work, rules)
    rows = add_claims(rows, work, rules)
    rows = add_end_states(rows, work, target)
    rows, judge_summary = add_judges(rows, work, loaded, judges, progress)
    results = {"schema_version": SCHEMA_VERSION, **summarise(rows)}
    results["metrics"].update(judge_summary.pop("metrics", {}))
    results["intervals"].update(judge_summary.pop("intervals", {}))
    results.update({
        "judges": judge_summary,
        "claims": {kind: sum(len(row["claims"][kind]) for row in rows if row.get("claims"))
                   for kind in ("claimed_not_done", "done_not_told")},
        "usage": total_usage(rows),
        "config": {"dataset": str(dataset) if dataset else None,
                   "conversations": [str(p) for p in ([conversations] if isinstance(conversations, str | Path)
                                                      else conversations)],
                   "suite": str(loaded.dir) if loaded else None, "labels": len(rules.labels),
                   "labels_path": str(labels_path) if labels_path else None,
                   "text_comparison": rules.text_mode, "judges": judge_summary.get("selected", [])},
        "studio_url": studio_url, "rows": rows})
    add_scenario_findings(results)
    return EvaluationResult(write_json(out, results), results)


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
    if "expected_function_calls" in conversation:
        return {**(case or {}), **{key: conversation[key] for key in _CASE_FIELDS if key in conversation}}
    if case is None:
        raise RecordError(path, f"line {line}", "case_id",
                          f"case {conversation['case_id']!r} is not in the dataset and the record carries no "
                          f"expected_function_calls")
    return case


def with_embeddings(rules: Rules, work: list[tuple[dict, dict]]) -> Rules:
    """Semantic comparison of free text when LOBEVAL_EMBEDDING_MODEL is set: every text embedded once."""
    from lobeval.roles import model_client

    client = model_client("embedding", cache=True)
    if client is None:
        return rules
    texts = sorted({text for conversation, case in work for text in _texts(case.get("expected_function_calls"))}
                   | {text for conversation, _ in work for text in _texts(conversation.get("function_calls"))})
    vectors: dict[str, np.ndarray] = {}

    async def embed_all() -> None:
        for start in range(0, len(texts), 256):
            batch = texts[start:start + 256]
            for text, vector in zip(batch, await client.embed(batch)):
                vectors[text] = np.asarray(vector) / (np.linalg.norm(vector) or 1.0)

    run_sync(embed_all())

    def similar(expected: str, actual: str, mode: str, threshold: float) -> bool:
        if mode == "semantic" and expected in vectors and actual in vectors:
            return float(vectors[expected] @ vectors[actual]) >= threshold
        return fuzzy_similar(expected, actual, mode, threshold)

    return Rules(**{**rules.__dict__, "text_mode": "semantic", "similar": similar})


def _texts(value: Any) -> set[str]:
    """Every normalised string of several words inside a value (arguments, calls)."""
    from lobeval.scoring import normal_text

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
    """Compare each recorded end state with the state the expected calls leave on a fresh session."""
    recorded = [(conversation, case) for conversation, case in work if conversation.get("state_changes") is not None]
    specs = {target or conversation.get("target") for conversation, _ in recorded} - {None}
    if not specs:
        return [{**row, "state": None} for row in rows]
    expected = run_sync(_replay_all(recorded, target))
    states = {}
    for conversation, case in recorded:
        replay = expected.get((target or conversation["target"], case["case_id"]))
        if replay is not None and "error" in replay:
            states[conversation["case_id"], conversation.get("trial", 0)] = replay
        elif replay is not None:
            states[conversation["case_id"], conversation.get("trial", 0)] = {
                "differences": state_differences(replay["initial"], replay["expected"],
                                                 with_changes(replay["initial"], conversation["state_changes"])),
                "replay_errors": replay["replay_errors"]}
    return [{**row, "state": states.get((row["case_id"], row["trial"]))} for row in rows]


async def replay_expected(session: Any, case: dict[str, Any]) -> dict[str, Any] | None:
    """Run the case's expected calls on a fresh session as a perfect agent; None without apply()."""
    initial = await session.state()
    made: list[dict[str, Any]] = []
    for call in case.get("expected_function_calls") or []:
        done = await session.apply([{"functionName": call["functionName"],
                                     "arguments": concrete(call.get("arguments") or {}, resolver(made))}])
        if done is None or initial is None:
            return None
        made += done
    return {"initial": initial, "expected": await session.state(), "calls": made,
            "replay_errors": [{"functionName": c["functionName"], "error": c["error"]} for c in made if c.get("error")]}


async def _replay_all(recorded: list[tuple[dict, dict]], target: str | None) -> dict[tuple[str, str], Any]:
    from lobeval.targets import TargetError, load_target

    wanted = {(target or conversation["target"], case["case_id"]): case for conversation, case in recorded}
    loaded = {spec: load_target(spec) for spec in {spec for spec, _ in wanted}}
    found: dict[tuple[str, str], Any] = {}
    for (spec, case_id), case in wanted.items():
        session = None
        try:
            session = await loaded[spec].start(case)
            found[spec, case_id] = await replay_expected(session, case)
        except TargetError as exc:
            found[spec, case_id] = {"error": f"replaying the expected calls failed: {exc}"}
        finally:
            if session is not None:
                await session.close()
    for bot in loaded.values():
        await bot.aclose()
    return found


def add_judges(rows: list[dict[str, Any]], work: list[tuple[dict, dict]], suite: Suite | None,
               selection: list[str] | None, progress: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The model judges on every scored conversation; "not run" (never a number) without a judge model.
    `selection` None runs every judge when a judge model is configured."""
    from lobeval.roles import model_client

    names = selected_judges(selection)
    client = model_client("judge", cache=True) if names else None
    if client is None:
        if names and selection is not None:
            raise ConfigError(f"--judges {','.join(selection)} needs a judge model: set LOBEVAL_JUDGE_MODEL or "
                              f"LOBEVAL_MODEL, and OPENAI_API_KEY (or the AZURE_OPENAI_* variables)")
        status = "not run: no judge model configured" if names else "not run: switched off (--judges none)"
        return ([{**row, "judges": {"status": status}} for row in rows],
                {"status": status, "selected": [], "errors": 0, "usage": Usage().to_dict()})
    scored = [(conversation, case) for row, (conversation, case) in zip(rows, work) if row["status"] == "scored"]
    tools = list(suite.tools.values()) if suite else []
    verdicts, usage = judge_all(client, names, tools, scored, progress=progress)
    rows = [{**row, "judges": verdicts.get((row["case_id"], row["trial"]),
                                           {"status": "not run: the conversation ended in a machinery error"})}
            for row in rows]
    return rows, summarise_judges(rows, names, usage)


def add_scenario_findings(results: dict[str, Any]) -> None:
    """Claims and the judges' final score per scenario, next to the function-call metrics."""
    for entry in results["scenarios"]:
        rows = [row for row in results["rows"] if row["scenario_name"] == entry["scenario_name"]]
        for kind in ("claimed_not_done", "done_not_told"):
            entry[kind] = sum(len(row["claims"][kind]) for row in rows if row.get("claims"))
        finals = [row["judges"].get("final_score") for row in rows if row["judges"].get("final_score") is not None]
        entry["judge.final_score"] = sum(finals) / len(finals) if finals else None


def total_usage(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    totals: dict[str, dict[str, float]] = {}
    for row in rows:
        for role, numbers in (row.get("usage") or {}).items():
            into = totals.setdefault(role, {})
            for key, value in numbers.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    into[key] = into.get(key, 0) + value
    return totals


def metric_table(results: dict[str, Any]) -> "pd.DataFrame":
    """The headline metrics with their 95 % intervals, one row each."""
    import pandas as pd

    rows = [{"metric": name, "value": value, "low": (results["intervals"].get(name) or [None, None])[0],
             "high": (results["intervals"].get(name) or [None, None])[1]}
            for name, value in results["metrics"].items() if not name.startswith("judge.")]
    return pd.DataFrame(rows).set_index("metric").round(3)


def judge_table(results: dict[str, Any]) -> "pd.DataFrame":
    """The judges' means with intervals (errors and "not applicable" left out), or why they did not run."""
    import pandas as pd

    judges = results["judges"]
    if judges["status"] != "run":
        return pd.DataFrame([{"judges": judges["status"]}])
    rows = [{"judge": name.removeprefix("judge."), "mean": value, "low": (results["intervals"].get(name) or [None] * 2)[0],
             "high": (results["intervals"].get(name) or [None] * 2)[1]}
            for name, value in results["metrics"].items() if name.startswith("judge.")]
    return pd.DataFrame(rows, columns=["judge", "mean", "low", "high"]).set_index("judge").round(3)


def claims_table(results: dict[str, Any]) -> "pd.DataFrame":
    """One row per claim the bot made without doing it, and per write it never told the user about."""
    import pandas as pd

    found = [{"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row["scenario_name"], "kind": kind,
              "what": item.get("claim") or item.get("functionName"), "text": item.get("text", "")}
             for row in results["rows"] for kind in ("claimed_not_done", "done_not_told")
             for item in (row.get("claims") or {}).get(kind, [])]
    return pd.DataFrame(found, columns=["case_id", "trial", "scenario_name", "kind", "what", "text"])
