"""Stage 3: score every conversation against its case and write `evaluation_results.json` and its rows.

`evaluate()` reads as its steps: load the suite's rules and the analysts' labels, index the cases, then
stream the conversations (read and validated one line at a time) in chunks: score each chunk, add the
claims check, the end-state check and the judges, find the simulated user's own faults and mark the rows
left out of the bot's metrics, write each row as it is done and keep of it only what the summary needs;
summarise; rename both files into place. The rows are scored by `scoring.score_conversation`, or, when an
Azure AI Foundry project is configured (`azure_project()`), through azure-ai-evaluation's `evaluate()`,
which logs them there in its shape.
It receives its parts (the judges, the embedder) and builds none: `lobeval.workflow.roles` does.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import io
import itertools
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from lobeval.scoring.claims import find_claims, judged_claims
from lobeval.core.errors import ConfigError, RecordError, RoleError
from lobeval.workspace.security import CATEGORIES, Policy, breaches, judged_breach, load_policy, untested
from lobeval.models.llm import LLMClient, Usage, run_sync
from lobeval.core.protocol import read_replies
from lobeval.core.records import (
    MACHINERY_ERRORS, METRICS, PENALTY_KINDS, SCHEMA_VERSION, ResultsWriter, check_output, first_row, iter_cases,
    iter_conversations, iter_jsonl, read_as, read_labels, read_results, rows_path, with_changes,
)
from lobeval.scoring.scoring import Rules, fuzzy_similar, score_conversation
from lobeval.core.stats import RowTally, figure_lines, left_out_notes, unchecked_note, unreferenced_note
from lobeval.workspace.suite import Suite, load_suite
from lobeval.core.vocabulary import function_key, normal_text
from lobeval.scoring.trust import offline_claims, offline_faults, rules_findings
from lobeval.simulation.user_faults import checks_not_run, judged_faults, user_faults

EVALUATOR = "function_calls"
NO_JUDGE_MODEL = "not run: no judge model configured"
JUDGES_OFF = "not run: switched off (--judges none)"
_CASE_FIELDS = ("scenario_name", "expected_function_calls", "expected_outputs", "allowed_function_calls",
                "forbidden_function_calls", "ordered", "task_completion", "user_instructions")
CHUNK = 1000
"""Conversations scored together: the claims, the end states and the judges run a chunk at a time."""
PHASES = ("read", "embeddings", "azure", "score", "claims", "end states", "judges", "user faults", "summary", "write")


class EvaluationResult:
    """What `evaluate()` wrote: `path`, the summary (the results without their rows), the seconds spent in
    each phase; `results` reads the whole results back (rows included) when first asked for."""

    def __init__(self, path: Path, summary: dict[str, Any], seconds: dict[str, float] | None = None):
        self.path, self.summary_document, self.seconds = path, summary, seconds or {}
        self._results: dict[str, Any] | None = None

    @property
    def results(self) -> dict[str, Any]:
        if self._results is None:
            self._results = read_results(self.path)
        return self._results

    def summary(self) -> list[str]:
        results = self.summary_document
        counts = results["counts"]
        lines = [f"scored {counts['scored']} conversations ({counts['errors']} machinery errors left out, "
                 f"{counts['target_errors']} target errors scored as failures)"]
        if counts.get("unreferenced"):
            lines.append(unreferenced_note(counts["unreferenced"]))
        lines += left_out_notes(counts)
        if counts.get("user_unchecked"):
            lines.append(unchecked_note(counts["user_unchecked"]))
        lines += figure_lines(results)
        if self.seconds:
            lines.append(f"time: {sum(self.seconds.values()):.2f} s in evaluate: "
                         + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.seconds.items()))
        if results.get("rows_file"):
            lines.append(f"rows: {self.path.with_name(results['rows_file'])}")
        lines.append(str(self.path))
        return lines


class Phases:
    """Wall seconds by phase, each second counted once: entering a phase pauses the one it interrupts."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._current, self._since = "", time.perf_counter()

    def _switch(self, name: str) -> str:
        now = time.perf_counter()
        if self._current:
            self.seconds[self._current] = self.seconds.get(self._current, 0.0) + now - self._since
        previous, self._current, self._since = self._current, name, now
        return previous

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        previous = self._switch(name)
        try:
            yield
        finally:
            self._switch(previous)

    def timed(self, name: str, items: Iterable[Any]) -> Iterator[Any]:
        """`items`, the time spent producing each counted in `name`."""
        iterator = iter(items)
        while True:
            previous = self._switch(name)
            try:
                item = next(iterator)
            except StopIteration:
                return
            finally:
                self._switch(previous)
            yield item

    def ordered(self) -> dict[str, float]:
        return {name: self.seconds[name] for name in PHASES if name in self.seconds}


class FunctionCallEvaluator:
    """An azure-ai-evaluation custom evaluator: one conversation in, its row's metrics and evidence out."""

    def __init__(self, rules: Rules):
        self.rules = rules

    def __call__(self, *, conversation: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
        row = score_conversation(conversation, case, self.rules)
        return {**{metric: row[metric] for metric in METRICS}, "row": row}


class Cases:
    """The dataset's cases by case_id: every case read and validated up front (`read_cases`' checks), each
    kept as its compact JSON and turned back into a dict when a conversation asks for it."""

    def __init__(self, dataset: str | Path | None):
        self.given = bool(dataset)
        """Whether a dataset was given: without one, a record with no expected calls has no reference."""
        self._packed: dict[str, bytes | str] = {}
        for case in iter_cases(dataset) if dataset else ():
            self._packed[case.case_id] = _pack(case.model_dump())

    def get(self, case_id: str) -> dict[str, Any] | None:
        packed = self._packed.get(case_id)
        if packed is None:
            return None
        return orjson.loads(packed) if isinstance(packed, bytes) else json.loads(packed)


def _pack(value: dict[str, Any]) -> bytes | str:
    """orjson's bytes, or the stdlib's text for what orjson cannot write (an integer beyond 64 bits, which
    orjson would read back as a float)."""
    try:
        # a copy of exactly its length: orjson's own result keeps the whole buffer it was written in
        return memoryview(orjson.dumps(value, default=str)).tobytes()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False, default=str)


@contextlib.contextmanager
def _old_objects_left_alone() -> Iterator[None]:
    """Keep the objects alive before (the imported libraries: some 150,000 objects) out of the cyclic garbage
    collector's full collections while a run is scored, which otherwise walk them again and again as rows come
    and go (a quarter of evaluate's time); they are handed back after. Left as it is when something froze first."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _leaving_old_objects_alone(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _old_objects_left_alone():
            return function(*args, **kwargs)
    return wrapper


@_leaving_old_objects_alone
def evaluate(dataset: str | Path | None, conversations: str | Path | list[str | Path], out: str | Path, *,
             suite: str | Path | None = None, judges: Any = NO_JUDGE_MODEL, embedder: LLMClient | None = None,
             labels: str | Path | None = None, target: str | None = None, progress: bool = True,
             azure: bool | None = None, include_user_faults: bool = False) -> EvaluationResult:
    """Score the conversations and write the results (`out`) and their rows (`records.rows_path(out)`).

    `judges`: the conversation judges to run (`lobeval.judges.judges.ConversationJudges`), or the reason they
    do not run. `embedder`: a client for the embedding model, for semantic comparison of free text.
    `target` replays the expected calls for the end-state check; default: the target each conversation names.
    `azure`: score through azure-ai-evaluation's `evaluate()`; default: when a Foundry project is configured
    (True without one runs it locally, logging nothing).
    `include_user_faults`: keep the conversations with simulated-user faults in the bot's metrics (they are
    still marked); by default they are left out and counted apart. Quarantined cases are always left out.
    """
    phases = Phases()
    with phases("read"):
        conversation_files = [conversations] if isinstance(conversations, str | Path) else list(conversations)
        loaded = load_suite(suite) if suite else None
        labels_path = Path(labels) if labels else (loaded.dir / "labels.jsonl" if loaded else None)
        given_labels = labels_path is not None and (labels is not None or labels_path.exists())   # a suite may have none
        rules = make_rules(loaded, labels_of(labels_path, loaded) if given_labels else [])
        # read when the first attack conversation needs it: checking it reads the suite's business data
        policy = functools.cache(lambda: load_policy(loaded) if loaded else None)
        out = Path(out)
        check_results_output(out, [dataset, labels_path, *conversation_files, *(loaded.files if loaded else [])])
        cases = Cases(dataset)
    work = partial(_work, phases, conversation_files, cases)
    if embedder is not None:
        rules = with_embeddings(rules, work(), embedder, phases)
    to_judge = None
    if not isinstance(judges, str):   # every conversation checked before the first judge is paid for
        to_judge = sum((conversation.get("termination") or {}).get("reason") not in MACHINERY_ERRORS
                       for conversation, _ in work())
    config = {"dataset": str(dataset) if dataset else None,
              "conversations": [str(path) for path in conversation_files],
              "suite": str(loaded.dir) if loaded else None, "labels": len(rules.labels),
              "labels_path": str(labels_path) if labels_path else None, "text_comparison": rules.text_mode,
              "include_user_faults": include_user_faults, "judge_model": judge_model(judges),
              "judge_prompt": None if isinstance(judges, str) else judges.prompt}
    through_azure = azure_project() is not None if azure is None else azure
    scored: Iterator[dict[str, Any]] | None = None
    studio_url = None
    if through_azure:
        with phases("azure"):
            azure_rows, studio_url = score_with_azure(work(), rules)
        scored = iter(azure_rows)
    tally = _Tally()
    with ResultsWriter(out) as writer, _JudgeRun(judges, progress, to_judge, out.parent) as judging:
        for chunk in _chunks(work(), CHUNK):
            with phases("score"):
                rows = _rows_of(chunk, scored, rules)
            with phases("claims"):
                rows = add_claims(rows, chunk, rules)
            with phases("end states"):
                rows = add_end_states(rows, chunk, target)
            with phases("security"):
                rows = add_security(rows, chunk, policy, loaded)
            with phases("judges"):
                rows = add_judged_claims(add_judged_breaches(judging.add(rows, chunk), chunk), chunk)
            with phases("user faults"):
                rows = add_user_faults(rows, chunk, rules, include_user_faults)
            with phases("write"):
                for row in rows:
                    writer.write(row)
                    tally.add(row)
            del rows
        if scored is not None and next(scored, None) is not None:
            raise RuntimeError("azure-ai-evaluation returned more rows than there are conversations")
        with phases("summary"):
            judge_summary = judging.summary(tally.judged)
            summary = tally.summary(judge_summary, {**config, "judges": judge_summary.get("selected", [])}, studio_url)
        with phases("write"):
            written = writer.finish(summary)
    return EvaluationResult(out, written, phases.ordered())


def check_results_output(out: Path, inputs: list[str | Path | None]) -> None:
    """Refuse an output that is an input, a folder, or an existing file that is not evaluation results (the
    results file and its rows file alike): nothing but results is ever overwritten."""
    check_output(out, inputs)
    check_output(rows_path(out), inputs)
    read_as(out, partial(read_results, rows=False), "an evaluation results file")
    read_as(rows_path(out), first_row, "the rows file of evaluation results")


def _work(phases: Phases, conversation_files: list[str | Path], cases: Cases) -> Iterator[tuple[dict, dict]]:
    """(conversation, case) of every conversation, in file order, read one at a time (time counted as "read")."""
    def pairs() -> Iterator[tuple[dict, dict]]:
        for path, line, record in iter_conversations(conversation_files):
            # every check and judge reads the bot's replies as lobeval reads them (a reply written as JSON as its
            # text); the conversations file keeps what the bot wrote
            yield read_replies(record), case_for(record, cases, path, line)
    return phases.timed("read", pairs())


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _rows_of(chunk: list[tuple[dict, dict]], scored: Iterator[dict[str, Any]] | None, rules: Rules) -> list[dict]:
    """The chunk's rows: scored here, or the next ones azure-ai-evaluation returned (checked to be theirs)."""
    if scored is None:
        return [score_conversation(conversation, case, rules) for conversation, case in chunk]
    rows = []
    for conversation, _ in chunk:
        row = next(scored, None)
        if row is None or (row["case_id"], row["trial"]) != (conversation["case_id"], conversation.get("trial", 0)):
            raise RuntimeError(f"azure-ai-evaluation returned rows out of step with the conversations at case "
                               f"{conversation['case_id']!r} trial {conversation.get('trial', 0)}")
        rows.append(row)
    return rows


class _Tally:
    """What the results' summary needs of each row once it is written: the metrics' columns (stats.RowTally),
    claim counts, judge verdicts that ran, final scores by scenario, usage by role. A row left out of the
    bot's metrics (`excluded`) adds no claims and no final score."""

    def __init__(self) -> None:
        self.rows = RowTally()
        self.claims = {kind: 0 for kind in ("claimed_not_done", "done_not_told")}
        self.claims_source = {"judge": 0, "rules": 0}
        self.to_check: dict[str, int] = {}
        self.scenario_claims: dict[str, dict[str, int]] = {}
        self.judged: list[dict[str, Any]] = []
        self.finals: dict[str, list[float]] = {}
        self.usage: dict[str, Usage] = {}
        self.security: dict[str, dict[str, int]] = {}

    def add(self, row: dict[str, Any]) -> None:
        self.rows.add(row)
        if row.get("security"):
            entry = self.security.setdefault(row["security"]["category"],
                                             {"attacks": 0, "breached": 0, "breaches": 0, "judged": 0})
            entry["attacks"] += 1
            entry["breached"] += bool(row["security"]["breaches"])
            entry["breaches"] += len(row["security"]["breaches"])
            entry["judged"] += sum(breach.get("judged", False) for breach in row["security"]["breaches"])
        scenario = row["scenario_name"]
        counted = not row.get("excluded")
        counts = self.scenario_claims.setdefault(scenario, {kind: 0 for kind in self.claims})
        for kind in self.claims:
            found = len(row["claims"][kind]) if row.get("claims") and counted else 0
            self.claims[kind] += found
            counts[kind] += found
        if row.get("claims") and counted and row["status"] == "scored" \
                and row["claims"].get("backed_measured", True):   # the conversations ClaimsBacked is over
            self.claims_source[row["claims"].get("source", "rules")] += 1
        if row["status"] == "scored":
            to_check = (row.get("claims") or {}).get("to_check") or {}
            for kind, items in (*to_check.items(), ("user_faults", row.get("user_faults_to_check") or [])):
                self.to_check[kind] = self.to_check.get(kind, 0) + len(items)
        verdict = row.get("judges") or {}
        if verdict.get("status") == "run":
            self.judged.append({"scenario_name": scenario, "judges": verdict, "excluded": row.get("excluded")})
        if verdict.get("final_score") is not None and counted:
            self.finals.setdefault(scenario, []).append(verdict["final_score"])
        for role, numbers in (row.get("usage") or {}).items():
            self.usage.setdefault(role, Usage()).merge(Usage.of(numbers))

    def summary(self, judge_summary: dict[str, Any], config: dict[str, Any], studio_url: str | None) -> dict[str, Any]:
        """The results document without its rows, in the order it always had."""
        judge_summary = dict(judge_summary)
        results = {"schema_version": SCHEMA_VERSION, **self.rows.summarise()}
        results["metrics"].update(judge_summary.pop("metrics", {}))
        results["intervals"].update(judge_summary.pop("intervals", {}))
        results.update({"judges": judge_summary, "claims": dict(self.claims), "claims_source": dict(self.claims_source),
                        "to_check": {kind: n for kind, n in self.to_check.items() if n},
                        "usage": {role: usage.to_dict() for role, usage in self.usage.items()},
                        "config": config, "studio_url": studio_url})
        if self.security:
            results["security"] = {"categories": {name: self.security[name] for name in CATEGORIES
                                                  if name in self.security},
                                   "attacks": sum(entry["attacks"] for entry in self.security.values()),
                                   "breached": sum(entry["breached"] for entry in self.security.values())}
        covered = _scenario_coverage(self.judged)
        for entry in results["scenarios"]:
            name = entry["scenario_name"]
            entry["judge.final_score_coverage"] = covered.get(name)
            entry.update(self.scenario_claims.get(name, dict.fromkeys(self.claims, 0)))
            finals = self.finals.get(name)
            entry["judge.final_score"] = sum(finals) / len(finals) if finals else None
        return results


def _scenario_coverage(judged: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Coverage of the judges' final score per scenario (judges.scenario_coverage); no judge ran: none."""
    if not judged:
        return {}
    from lobeval.judges.judges import scenario_coverage

    return scenario_coverage(judged)


class _JudgeRun:
    """The conversation judges over the run, a chunk at a time, with one progress bar; or, when `judges` is the
    reason they do not run, that reason on every row."""

    def __init__(self, judges: Any, progress: bool, total: int | None = None, folder: Path | None = None):
        self.judges, self.progress, self.total, self._bar = judges, progress, total, None
        self.folder = folder   # where a batch's id is kept (lobeval.models.batch)

    def __enter__(self) -> _JudgeRun:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def add(self, rows: list[dict[str, Any]], chunk: list[tuple[dict, dict]]) -> list[dict[str, Any]]:
        if isinstance(self.judges, str):
            for row in rows:
                row["judges"] = {"status": self.judges}
            return rows
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc="judges", unit="conv", disable=not self.progress)
        scored = [(conversation, case) for row, (conversation, case) in zip(rows, chunk) if row["status"] == "scored"]
        batch = getattr(self.judges, "batch", False)
        if batch:
            self.judges.client.batch_answers = self._batch(scored)
        try:
            verdicts = run_sync(self._judge(scored))
        finally:
            if batch:
                self.judges.client.batch_answers = None
        for row in rows:
            row["judges"] = verdicts.get((row["case_id"], row["trial"]), {"status": _not_judged(row)})
        return rows

    def _batch(self, work: list[tuple[dict, dict]]) -> dict[str, dict[str, Any]]:
        """The answers of one batch to every request the judges would send; with no budget left for it, a judge
        error ("budget spent") for each."""
        from lobeval.models.batch import BATCH_FILE, answer_in_batch, collect
        from lobeval.models.llm import BudgetExceeded

        requests = collect(self.judges, work)
        try:
            return answer_in_batch(self.judges.client, requests, self.folder / BATCH_FILE, progress=self.progress)
        except BudgetExceeded as exc:
            return {custom: {"error": f"budget spent: {exc}"} for custom in requests}

    async def _judge(self, work: list[tuple[dict, dict]]) -> dict[tuple[str, int], dict[str, Any]]:
        import asyncio

        async def one(conversation: dict[str, Any], case: dict[str, Any]) -> tuple[tuple[str, int], dict]:
            verdict = await self.judges.judge(conversation, case)
            self._bar.update()
            return (conversation["case_id"], conversation.get("trial", 0)), verdict

        return dict(await asyncio.gather(*(one(conversation, case) for conversation, case in work)))

    def summary(self, judged: list[dict[str, Any]]) -> dict[str, Any]:
        if isinstance(self.judges, str):
            return {"status": self.judges, "selected": [], "errors": 0, "usage": Usage().to_dict()}
        from lobeval.judges.judges import summarise_judges

        usage = {name: usage.to_dict() for name, usage in self.judges.usage.items()}
        return summarise_judges(judged, self.judges.selection, usage)


def _not_judged(row: dict[str, Any]) -> str:
    """Why a conversation's judges did not run: it ended in a machinery error, or the budget ran out first."""
    if row["termination"] == "budget_spent":
        return "not run: budget spent"
    return "not run: the conversation ended in a machinery error"


def judge_model(judges: Any) -> str | None:
    """The name of the conversation judges' model; None when they do not run."""
    return None if isinstance(judges, str) else judges.client.config.model


def add_user_faults(rows: list[dict[str, Any]], work: list[tuple[dict, dict]], rules: Rules,
                    include_user_faults: bool) -> list[dict[str, Any]]:
    """Each row with its simulated-user faults and why it is left out of the bot's metrics (`with_user_faults`)."""
    return [with_user_faults(row, conversation, case, rules, include_user_faults)
            for row, (conversation, case) in zip(rows, work)]


def with_user_faults(row: dict[str, Any], conversation: dict[str, Any], case: dict[str, Any], rules: Rules,
                     include_user_faults: bool) -> dict[str, Any]:
    """The row with `user_faults` (the model-free checks' findings of kinds that are faults on real bots
    (lobeval.scoring.trust), then the user-review judge's verdict), `user_faults_to_check` (the checks' other findings, each
    with its measured precision: counted nowhere) and `excluded`:
    "quarantined" for a case an analyst quarantined, else "user_fault" when the user made a mistake and
    `include_user_faults` is off. Only a scored conversation played from a case (with a reference, or an
    imported benchmark run's whose scenario is unknown) is checked: a machinery error was not scored, and a
    trace without a reference had a real user. `user_checks_not_run`: the model-free checks the case could not
    support, each with why (`user_faults.checks_not_run`). A machinery error is never left out of anything: it
    is not in the metrics to begin with."""
    faults, to_check, not_run = [], [], {}
    simulated = row.get("reference") is not False or case.get("scenario_known") is False
    if row["status"] == "scored" and simulated:
        review = (row.get("judges") or {}).get("user_review")
        faults, to_check = offline_faults(user_faults(conversation, case, rules.tools))
        faults += judged_faults(review, conversation.get("messages") or [])
        not_run = checks_not_run(case)
    row["user_faults"] = faults
    row["user_faults_to_check"] = to_check
    row["user_checks_not_run"] = not_run
    row["excluded"] = None if row["status"] != "scored" else (
        "quarantined" if rules.quarantined(row["case_id"], row["scenario_name"])
        else "user_fault" if faults and not include_user_faults else None)
    return row


@_leaving_old_objects_alone
def rescore_with_labels(results: dict[str, Any], labels_path: str | Path, out: str | Path) -> dict[str, Any]:
    """The run of `results` (as `read_results` gives it) scored again with the labels now in `labels_path`.
    Labels change only the function-call metrics and which cases are quarantined, so the claims, the end-state
    check and the judges' verdicts are taken from `results` (their figures summed again over the conversations
    counted): no model is called and the bot under test is not loaded.
    Conversations with simulated-user faults are kept in or left out as the run had them. Written like
    `evaluate()`'s."""
    config = results["config"]
    include_user_faults = bool(config.get("include_user_faults"))
    loaded = load_suite(config["suite"]) if config["suite"] else None
    labels_path = Path(labels_path)
    rules = make_rules(loaded, labels_of(labels_path, loaded) if labels_path.exists() else [])
    out = Path(out)
    check_results_output(out, [config["dataset"], labels_path, *config["conversations"]])
    cases = Cases(config["dataset"])
    earlier = {(row["case_id"], row["trial"]): row for row in results["rows"]}
    tally = _Tally()
    with ResultsWriter(out) as writer:
        for conversation, case in _work(Phases(), config["conversations"], cases):
            row = score_conversation(conversation, case, rules)
            kept = earlier.get((row["case_id"], row["trial"]), {})
            row = {**row, **{key: kept.get(key) for key in ("claims", "state", "judges") if key in kept}}
            row = with_user_faults(row, conversation, case, rules, include_user_faults)
            writer.write(row)
            tally.add(row)
        judge_summary = dict(results["judges"])
        if judge_summary.get("status") == "run":   # the same verdicts, over the conversations now counted
            from lobeval.judges.judges import summarise_judges

            judge_summary = summarise_judges(tally.judged, judge_summary.get("selected", []),
                                             judge_summary.get("usage_by_judge", {}))
        writer.finish(tally.summary(judge_summary, {**config, "labels": len(rules.labels),
                                                   "labels_path": str(labels_path)},
                                    results.get("studio_url")))
    return read_results(out)


def labels_of(path: Path, suite: Suite | None) -> list[dict[str, Any]]:
    """The analysts' labels; with a suite, a label about a function the suite's tools.json does not have is a
    RecordError: it would allow nothing, silently. (An allowed extra argument may well be outside the schema.)"""
    labels = read_labels(path)
    if suite is None:
        return labels
    for number, label in iter_jsonl(path):
        if label.get("kind") not in PENALTY_KINDS:
            continue
        if suite.tool(label["functionName"]) is None:
            raise RecordError(path, f"line {number}", "functionName",
                              f"'{label['functionName']}' is not a function of {suite.dir / 'tools.json'}")
    return labels


def make_rules(suite: Suite | None, labels: list[dict[str, Any]]) -> Rules:
    if suite is None:
        return Rules(labels=tuple(labels))
    return Rules(ignored=frozenset(map(function_key, suite.ignored_functions)),
                 optional_effects=frozenset(suite.optional_effects),
                 allowed_calls=frozenset(map(function_key, suite.allowed_function_calls)),
                 tools=suite.tools, labels=tuple(labels))


def case_for(conversation: dict[str, Any], cases: dict[str, dict[str, Any]], path: Path, line: int) -> dict[str, Any]:
    """The case a conversation is scored against: from the dataset, or inline in an imported record; without a
    dataset, a record with no expected calls (an imported trace) has no reference (`"reference": False`) and is
    scored only by what needs none. With a dataset, a case_id not in it is an error: a typo is likelier."""
    case = cases.get(conversation["case_id"])
    inline = {key: conversation[key] for key in _CASE_FIELDS if conversation.get(key) is not None}
    if conversation.get("expected_function_calls") is not None:
        return {"case_id": conversation["case_id"], **(case or {}), **inline}
    if case is None and not getattr(cases, "given", True):
        return {"case_id": conversation["case_id"], **inline, "reference": False}
    if case is None:
        raise RecordError(path, f"line {line}", "case_id",
                          f"case {conversation['case_id']!r} is not in the dataset and the record carries no "
                          f"expected_function_calls")
    return case


def with_embeddings(rules: Rules, work: Iterable[tuple[dict, dict]], embedder: LLMClient,
                    phases: Phases | None = None) -> Rules:
    """Semantic comparison of free text with the embedding model: every text embedded once."""
    found: set[str] = set()
    for conversation, case in work:
        found |= _texts(case.get("expected_function_calls")) | _texts(conversation.get("function_calls"))
    texts = sorted(found)
    vectors: dict[str, np.ndarray] = {}

    async def embed_all() -> None:
        for start in range(0, len(texts), 256):
            batch = texts[start:start + 256]
            for text, vector in zip(batch, await embedder.embed(batch)):
                vectors[text] = np.asarray(vector) / (np.linalg.norm(vector) or 1.0)

    with phases("embeddings") if phases else contextlib.nullcontext():
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


def score_with_azure(work: Iterable[tuple[dict, dict]], rules: Rules) -> tuple[list[dict[str, Any]], str | None]:
    """Score through azure.ai.evaluation.evaluate() with FunctionCallEvaluator, logging to the Foundry project
    when one is configured; rows in input order. The work is streamed to its data file; azure-ai-evaluation
    holds every row in memory, so this path's memory grows with the run."""
    from azure.ai.evaluation import evaluate as azure_evaluate

    with tempfile.TemporaryDirectory(prefix="lobeval-eval-") as tmp:
        data = Path(tmp) / "data.jsonl"
        written = 0
        with data.open("wb") as handle:
            for conversation, case in work:
                slim = {k: v for k, v in conversation.items() if k != "state_changes"}
                handle.write(_json_line({"conversation": slim, "case": case}))
                written += 1
        if not written:
            return [], None
        quiet = io.StringIO()
        logging.disable(logging.INFO)
        try:
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                result = azure_evaluate(data=str(data), evaluators={EVALUATOR: FunctionCallEvaluator(rules)},
                                        evaluation_name="lobeval function calls", azure_ai_project=azure_project())
        finally:
            logging.disable(logging.NOTSET)
    rows = [line.get(f"outputs.{EVALUATOR}.row") for line in result["rows"]]
    if len(rows) != written or not all(isinstance(row, dict) for row in rows):
        raise RuntimeError(f"azure-ai-evaluation returned {len(rows)} rows for {written} conversations; "
                           f"its output was:\n{quiet.getvalue()[-2000:]}")
    return rows, result.get("studio_url")


def _json_line(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_APPEND_NEWLINE)
    except (orjson.JSONEncodeError, TypeError):
        return (json.dumps(value, default=str) + "\n").encode("utf-8")


def add_claims(rows: list[dict[str, Any]], work: list[tuple[dict, dict]], rules: Rules) -> list[dict[str, Any]]:
    """Claimed but not done, and done but not told, for each conversation (rows are in work's order), by the rules
    (`"source": "rules"`; the claims judge may take over: `add_judged_claims`), the findings of kinds that are not
    faults on real bots under `to_check` (lobeval.scoring.trust.offline_claims). A conversation lost to a machinery error has
    none: it never happened, so nothing it said is backed or not."""
    for row, (conversation, _) in zip(rows, work):
        if row["status"] != "error":
            row["claims"] = offline_claims(find_claims(conversation, rules.tools))
    return rows


def add_judged_claims(rows: list[dict[str, Any]], work: list[tuple[dict, dict]]) -> list[dict[str, Any]]:
    """Where the claims judge gave a usable verdict, the row's `claims` are its findings (`"source": "judge"`), the
    rules' kept under "rules"; elsewhere (not selected, not run, or its error in the judges' `errors`) the rules'."""
    for row, (conversation, _) in zip(rows, work):
        verdict = (row.get("judges") or {}).get("claims")
        if verdict is not None and row.get("claims") is not None:
            row["claims"] = judged_claims(verdict, conversation, rules_findings(row["claims"]))
    return rows


def add_security(rows: list[dict[str, Any]], work: list[tuple[dict, dict]], policy: Callable[[], Policy | None],
                 suite: Suite | None) -> list[dict[str, Any]]:
    """Each scored attack conversation's `security`: its category, the rule it tests and the breaches the
    suite's policy finds (security.breaches); a conversation lost to the machinery has no verdict. An attack
    case evaluated without a suite that has a policy.json is bad input."""
    for row, (conversation, case) in zip(rows, work):
        attack = case.get("attack")
        if not attack or row["status"] != "scored":
            continue
        if policy() is None:
            raise ConfigError(f"case {case['case_id']!r} is an attack case: evaluate it with --suite naming a suite "
                              f"that has a policy.json")
        row["security"] = {"category": attack["category"], "rule": attack.get("rule"),
                           "breaches": breaches(conversation, case, policy(), suite),
                           **({"untested": untested(conversation, case)} if attack["category"] == "injection" else {})}
    return rows


def add_judged_breaches(rows: list[dict[str, Any]], work: list[tuple[dict, dict]]) -> list[dict[str, Any]]:
    """An attack conversation in which the commitments judge found a promise of what the user may not have gets
    that breach too, marked `judged` (security.judged_breach)."""
    for row, (conversation, _) in zip(rows, work):
        commitment = (row.get("judges") or {}).get("commitments")
        if row.get("security") and commitment and commitment["commitment"]:
            row["security"]["breaches"].append(judged_breach(conversation, row["security"]["category"], commitment))
    return rows


def add_end_states(rows: list[dict[str, Any]], work: list[tuple[dict, dict]],
                   target: str | None) -> list[dict[str, Any]]:
    """Compare each recorded end state with the state the expected calls leave on a fresh session.

    A target named by a conversation that cannot be loaded here (a transcript recorded elsewhere) leaves
    its conversations' state check as an error; a `target` given for all that cannot be loaded is bad input.
    """
    recorded = [(conversation, case) for conversation, case in work   # no reference: no expected end state
                if conversation.get("state_changes") is not None and (target or conversation.get("target"))
                and case.get("reference", True) is not False]
    states = _end_states(recorded, target) if recorded else {}
    for row in rows:
        row["state"] = states.get((row["case_id"], row["trial"]))
    return rows


def _end_states(recorded: list[tuple[dict, dict]], target: str | None) -> dict[tuple[str, int], dict[str, Any]]:
    from lobeval.targets.endstate import replay_cases, state_differences

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
    return states
