"""How far lobeval's verdicts agree with a benchmark's own, trajectory by trajectory (issue #19).

An imported τ-bench or τ²-bench run (`lobeval.imports.importers`) carries the benchmark's verdict per (case, trial)
in `reference.jsonl`; once lobeval has scored the run, `agreement(rows, reference)` sets lobeval's Success
against the benchmark's reward: the confusion matrix, the agreement rate and Cohen's κ with 95 % bootstrap
intervals that resample tasks (all trials of a task together, as lobeval's other intervals do), pass^k by
both side by side, and every trajectory on which they disagree with the reasons each side gives.

Only trajectories both sides judged are compared: a conversation that ended in a machinery error is no
score in lobeval and is left out (and listed), as is a verdict without a row or a row without a verdict.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, field_validator

from lobeval.core.errors import RecordError
from lobeval.core.records import SCHEMA_VERSION, STRICT, iter_jsonl, read_conversations, read_results, validated
from lobeval.workspace.runs import RESULTS_FILE
from lobeval.core.stats import CONFIDENCE, RESAMPLES, SEED, clip, pass_hat_k

REFERENCE_FILE = "reference.jsonl"
OUTCOMES = ("pass", "fail")
LEFT_OUT = {"machinery_errors": "ended in a machinery error", "without_reference": "had no benchmark verdict",
            "without_row": "had no lobeval row",
            "without_expectations": "had no expectation lobeval could score (the run does not publish its tasks)"}
CATEGORIES = {
    "database": "the benchmark's reward rests on its database's end state (DB), which lobeval does not replay: it "
                "compares the calls instead",
    "action": "the benchmark's reward rests on the calls it compares itself (ACTION)",
    "env_assertion": "the benchmark's reward rests on an assertion about the environment (ENV_ASSERTION)",
    "communicate": "the benchmark's reward rests on information the bot had to communicate (COMMUNICATE)",
    "nl_assertion": "the benchmark's reward rests on an assertion in words (NL_ASSERTION), which lobeval does not "
                    "check",
    "lobeval_error": "not explained by what the benchmark's reward rests on: a lobeval error, to fix or explain",
}
"""What a disagreement comes from (`disagreement_category`), in the order they are tried."""


class ReferenceVerdict(BaseModel):
    """One line of `reference.jsonl`: the benchmark's verdict on one trajectory."""

    model_config = STRICT

    schema_version: int = SCHEMA_VERSION
    case_id: str
    trial: int = Field(ge=0)
    reward: float
    """1.0 solved, 0.0 not: the benchmark's reward, thresholded as the benchmark does."""
    raw_reward: float | None = None
    reward_info: dict[str, Any] = {}

    @field_validator("reward")
    @classmethod
    def _zero_or_one(cls, value: float) -> float:
        if value not in (0.0, 1.0):
            raise ValueError(f"must be 0.0 or 1.0 (the benchmark's verdict), got {value}")
        return value


def read_reference(run_dir: str | Path) -> list[dict[str, Any]]:
    """The benchmark's verdicts of a run folder, each checked; a (case, trial) pair twice is an error."""
    path = Path(run_dir) / REFERENCE_FILE
    verdicts, seen = [], {}
    for number, record in iter_jsonl(path):
        verdict = validated(ReferenceVerdict, record, path, f"line {number}")
        key = (verdict.case_id, verdict.trial)
        if key in seen:
            raise RecordError(path, f"line {number}", "trial",
                              f"case {key[0]!r} trial {key[1]} is also on line {seen[key]}")
        seen[key] = number
        verdicts.append(record)
    return verdicts


def cohen_kappa(table: Any) -> float | None:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) of a 2×2 table of counts (rows: one rater's verdicts, columns: the
    other's, in the same order); None when p_e is 1 (both gave one and the same verdict throughout)."""
    kappa = _kappas(np.asarray(table)[None])[0]
    return None if np.isnan(kappa) else float(kappa)


def _kappas(tables: np.ndarray) -> np.ndarray:
    """κ of each 2×2 table of a stack (shape (n, 2, 2)), nan where undefined. On counts, κ is
    (N·agreed − Σ row·column) / (N² − Σ row·column): exact, with no rounding near p_e = 1."""
    total = tables.sum(axis=(1, 2)).astype(float)
    agreed = np.trace(tables, axis1=1, axis2=2)
    chance = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1)
    denominator = total * total - chance
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (total * agreed - chance) / denominator, np.nan)


def _percentiles(values: np.ndarray) -> list[float] | None:
    """The 95 % percentile interval of the values that are defined; None when none is."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return [float(low), float(high)]


def bootstrap(case_tables: np.ndarray) -> tuple[list[float] | None, list[float] | None]:
    """95 % percentile intervals of the agreement rate and of κ over RESAMPLES resamples of the tasks (seeded).
    A resample draws as many tasks as there are, with replacement: how often each is drawn is one multinomial
    draw, and the resample's table the tasks' tables weighted so. Resamples where κ is undefined are left out
    of its interval."""
    rng = np.random.default_rng(SEED)
    tasks = len(case_tables)
    weights = rng.multinomial(tasks, np.full(tasks, 1 / tasks), size=RESAMPLES)
    tables = np.tensordot(weights, case_tables, axes=1)
    rates = np.trace(tables, axis1=1, axis2=2) / tables.sum(axis=(1, 2))
    return _percentiles(rates), _percentiles(_kappas(tables))


def _cell(success: int, reward: float) -> tuple[int, int]:
    """The table cell of one trajectory: row lobeval, column the benchmark, pass first."""
    return (0 if success else 1), (0 if reward == 1.0 else 1)


def agreement(rows: list[dict[str, Any]], reference: list[dict[str, Any]],
              calls: dict[tuple[str, int], list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """lobeval's verdicts (the `rows` of evaluation_results.json) against the benchmark's (`read_reference`).
    `calls`: each conversation's function calls by (case, trial), which tell a disagreement's category apart
    (`disagreement_category`); without them a write lobeval did not expect is a lobeval error to look into."""
    verdicts = {(v["case_id"], v["trial"]): v for v in reference}
    by_key = {(row["case_id"], row["trial"]): row for row in rows}
    compared = [(row, verdicts[key]) for key, row in by_key.items()
                if row["status"] == "scored" and key in verdicts and row.get("reference") is not False]
    tables: dict[str, np.ndarray] = defaultdict(lambda: np.zeros((2, 2), dtype=int))
    for row, verdict in compared:
        tables[row["case_id"]][_cell(row["Success"], verdict["reward"])] += 1
    table = sum(tables.values(), np.zeros((2, 2), dtype=int))
    total = int(table.sum())
    rate_interval, kappa_interval = bootstrap(np.stack(list(tables.values()))) if total else (None, None)
    return {
        "compared": total, "cases": len(tables),
        "left_out": {"machinery_errors": _keys(key for key, row in by_key.items() if row["status"] != "scored"),
                     "without_reference": _keys(key for key, row in by_key.items()
                                                if row["status"] == "scored" and key not in verdicts),
                     "without_row": _keys(key for key in verdicts if key not in by_key),
                     "without_expectations": _keys(key for key, row in by_key.items() if row["status"] == "scored"
                                                   and key in verdicts and row.get("reference") is False)},
        "confusion": {f"lobeval_{mine}": {f"benchmark_{theirs}": int(table[i, j]) for j, theirs in enumerate(OUTCOMES)}
                      for i, mine in enumerate(OUTCOMES)},
        "agreement": {"value": float(np.trace(table) / total) if total else None, "interval": rate_interval},
        "kappa": {"value": cohen_kappa(table) if total else None, "interval": kappa_interval},
        "pass_k": pass_k_both(compared),
        "disagreements": (disagreed := [disagreement(row, verdict, (calls or {}).get((row["case_id"], row["trial"])))
                                        for row, verdict in compared if row["Success"] != int(verdict["reward"])]),
        "categories": {category: count for category in CATEGORIES
                       if (count := sum(item["category"] == category for item in disagreed))},
    }


def _keys(keys: Any) -> list[dict[str, Any]]:
    return [{"case_id": case_id, "trial": trial} for case_id, trial in sorted(keys)]


def pass_k_both(compared: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """pass^k by lobeval and by the benchmark on the same trajectories, for k = 1 .. the most trials of a task:
    the mean over tasks with at least k trials of C(successes, k) / C(trials, k)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])   # trials, lobeval's successes, the benchmark's
    for row, verdict in compared:
        counts[row["case_id"]][0] += 1
        counts[row["case_id"]][1] += row["Success"]
        counts[row["case_id"]][2] += int(verdict["reward"])
    table = {}
    for k in range(1, max((n for n, _, _ in counts.values()), default=0) + 1):
        eligible = [c for c in counts.values() if c[0] >= k]
        table[str(k)] = {"lobeval": float(np.mean([pass_hat_k(mine, n, k) for n, mine, _ in eligible])),
                         "benchmark": float(np.mean([pass_hat_k(theirs, n, k) for n, _, theirs in eligible])),
                         "cases": len(eligible)}
    return table


def disagreement(row: dict[str, Any], verdict: dict[str, Any],
                 calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"case_id": row["case_id"], "trial": row["trial"], "lobeval": row["Success"],
            "benchmark": int(verdict["reward"]), "reasons": lobeval_reasons(row),
            "benchmark_reasons": benchmark_reasons(verdict.get("reward_info") or {}),
            "category": disagreement_category(row, verdict.get("reward_info") or {}, calls)}


def benchmark_failures(reward_info: dict[str, Any]) -> list[str]:
    """The categories (CATEGORIES) of the checks the benchmark's reward counted and found failed: τ²-bench's by
    its reward_basis (DB: db_check.db_match; ACTION, ENV_ASSERTION, COMMUNICATE, NL_ASSERTION: a check not met),
    τ-bench's by r_actions (its database hash) and its outputs."""
    details = reward_info.get("info") if isinstance(reward_info.get("info"), dict) else {}
    basis = set(reward_info.get("reward_basis") or [])
    failed = {
        "database": ("DB" in basis and (reward_info.get("db_check") or {}).get("db_match") is False)
                    or details.get("r_actions") in (0, False),
        "action": "ACTION" in basis and any(not c.get("action_match") for c in reward_info.get("action_checks") or []),
        "env_assertion": "ENV_ASSERTION" in basis and any(not c.get("met")
                                                          for c in reward_info.get("env_assertions") or []),
        "communicate": ("COMMUNICATE" in basis and any(not c.get("met")
                                                       for c in reward_info.get("communicate_checks") or []))
                       or any(not said for said in (details.get("outputs") or {}).values()),
        "nl_assertion": "NL_ASSERTION" in basis and any(not c.get("met") for c in reward_info.get("nl_assertions") or []),
    }
    return [category for category in CATEGORIES if failed.get(category)]


def disagreement_category(row: dict[str, Any], reward_info: dict[str, Any],
                          calls: list[dict[str, Any]] | None = None) -> str:
    """What a disagreement comes from (a key of CATEGORIES). The benchmark failed and lobeval passed: the first
    check the benchmark's reward counted and found failed. lobeval failed and the benchmark passed: "database"
    when all lobeval holds against the bot is writes it did not expect that repeat an earlier successful call
    with the same arguments (`calls`: the conversation's), and the benchmark's reward rests on its database,
    which such a write leaves as it was. Whatever no rule explains is a lobeval error, to look into."""
    if row.get("Success"):
        failures = benchmark_failures(reward_info)
        return failures[0] if failures else "lobeval_error"
    details = reward_info.get("info") if isinstance(reward_info.get("info"), dict) else {}
    rests_on_database = "DB" in set(reward_info.get("reward_basis") or []) or "r_actions" in details
    unexpected = [call.get("actual_index") for call in row.get("unpaired_actual") or []
                  if call.get("effect") == "write" and not call.get("allowed") and not call.get("failed")]
    only_unexpected = {reason["kind"] for reason in lobeval_reasons(row)} == {"unexpected_write"}
    if rests_on_database and only_unexpected and calls is not None \
            and all(_repeats(calls, index) for index in unexpected):
        return "database"
    return "lobeval_error"


def _repeats(calls: list[dict[str, Any]], index: int | None) -> bool:
    """Whether call `index` repeats an earlier successful call of the same function with the same arguments."""
    if not isinstance(index, int) or not 0 <= index < len(calls):
        return False
    call = calls[index]
    return any(earlier.get("functionName") == call.get("functionName") and not earlier.get("error")
               and earlier.get("arguments") == call.get("arguments") for earlier in calls[:index])


def _shown(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False, default=str), 60)


def lobeval_reasons(row: dict[str, Any]) -> list[dict[str, str]]:
    """Why lobeval failed a conversation, from its row's evidence, in the order of Success's conditions."""
    reasons = [("missed_call", f"missed required call {call['functionName']}")
               for call in row.get("unpaired_expected") or [] if not call.get("optional")]
    for pair in row.get("pairs") or []:
        if pair.get("optional"):
            continue
        name = pair["functionName"]
        if pair.get("failed"):
            reasons.append(("failed_call", f"failed call {name} (attempted, not done)"))
        for argument, check in (pair.get("arguments") or {}).items():
            if check["status"] == "wrong":
                reasons.append(("wrong_argument", f"wrong argument {name}.{argument}: "
                                                  f"{_shown(check['expected'])} → {_shown(check['actual'])}"))
            elif check["status"] == "missing":
                reasons.append(("missing_argument", f"missing argument {name}.{argument}"))
    reasons += [("output_not_told", f"output not told: {fact}") for fact in row.get("missing_outputs") or []]
    reasons += [("forbidden_call", f"forbidden call {call['functionName']}")
                for call in row.get("forbidden_calls") or []]
    reasons += [("unexpected_write", f"unexpected write {call['functionName']}")
                for call in row.get("unpaired_actual") or []
                if call.get("effect") == "write" and not call.get("allowed") and not call.get("failed")]
    if (row.get("checks") or {}).get("declined") is False:
        reasons.append(("not_declined", "did not decline a request it has nothing to do for"))
    if not (row.get("checks") or {}).get("ended_normally", True):
        reasons.append(("abnormal_ending", f"abnormal ending: {row.get('termination')}"))
    return [{"kind": kind, "text": text} for kind, text in reasons]


def benchmark_reasons(reward_info: dict[str, Any]) -> list[str]:
    """Why the benchmark failed a trajectory, from its reward_info: τ-bench's database and output checks, and
    those of τ²-bench's checks that its reward basis counts."""
    details = reward_info.get("info") if isinstance(reward_info.get("info"), dict) else {}
    basis = set(reward_info.get("reward_basis") or [])
    reasons = []
    database_differs = "DB" in basis and (reward_info.get("db_check") or {}).get("db_match") is False
    if details.get("r_actions") in (0, False) or database_differs:
        reasons.append("database differs from the expected end state")
    reasons += [f"output not told: {fact}" for fact, said in (details.get("outputs") or {}).items() if not said]
    checks = (("COMMUNICATE", "communicate_checks", "met", lambda c: f"output not told: {c.get('info')}"),
              ("ACTION", "action_checks", "action_match",
               lambda c: f"action not matched: {(c.get('action') or {}).get('name')}"),
              ("ENV_ASSERTION", "env_assertions", "met",
               lambda c: f"environment assertion failed: {(c.get('env_assertion') or {}).get('func_name')}"),
              ("NL_ASSERTION", "nl_assertions", "met", lambda c: f"assertion not met: {c.get('nl_assertion')}"))
    for kind, key, passed, text in checks:
        if kind in basis:
            reasons += [text(check) for check in reward_info.get(key) or [] if not check.get(passed)]
    note = details.get("note") or reward_info.get("note")
    return reasons + ([str(note)] if note else [])


def run_agreement(run_dir: str | Path) -> dict[str, Any]:
    """`agreement` of a run folder that holds both evaluation_results.json and reference.jsonl (and the
    conversations.jsonl they were scored from, whose calls categorise the disagreements)."""
    run_dir = Path(run_dir)
    conversations = run_dir / "conversations.jsonl"
    calls = {(record["case_id"], record.get("trial", 0)): record.get("function_calls") or []
             for _, _, record in read_conversations(conversations)} if conversations.exists() else None
    return agreement(read_results(run_dir / RESULTS_FILE)["rows"], read_reference(run_dir), calls)


# --- tables and text --------------------------------------------------------------------------------------

def confusion_frame(result: dict[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame.from_dict(result["confusion"], orient="index")
    frame.index = [f"lobeval {outcome}" for outcome in OUTCOMES]
    frame.columns = [f"benchmark {outcome}" for outcome in OUTCOMES]
    return frame


def pass_k_frame(result: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"k": int(k), "lobeval": v["lobeval"], "benchmark": v["benchmark"],
                          "difference": v["lobeval"] - v["benchmark"], "cases": v["cases"]}
                         for k, v in result["pass_k"].items()],
                        columns=["k", "lobeval", "benchmark", "difference", "cases"])


def disagreements_frame(result: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"case_id": d["case_id"], "trial": d["trial"], "lobeval": d["lobeval"],
                          "benchmark": d["benchmark"], "category": d.get("category"),
                          "lobeval_reasons": "; ".join(r["text"] for r in d["reasons"]),
                          "benchmark_reasons": "; ".join(d["benchmark_reasons"])} for d in result["disagreements"]],
                        columns=["case_id", "trial", "lobeval", "benchmark", "category", "lobeval_reasons",
                                 "benchmark_reasons"])


def _estimate(figure: dict[str, Any], undefined: str) -> str:
    if figure["value"] is None:
        return undefined
    band = figure["interval"]
    return f"{figure['value']:.3f}" + (f" [{band[0]:.3f}, {band[1]:.3f}]" if band else "")


def format_agreement(result: dict[str, Any]) -> str:
    """The agreement as `lobeval agreement` prints it."""
    left_out = result["left_out"]
    lines = [f"compared {result['compared']} trajectories of {result['cases']} tasks with the benchmark's verdicts"
             + "".join(f"; left out {len(keys)} that {LEFT_OUT[what]}" for what, keys in left_out.items() if keys)]
    if not result["compared"]:
        return "\n".join(lines)
    lines += ["", confusion_frame(result).to_string(), "",
              f"agreement {_estimate(result['agreement'], 'undefined')}   Cohen's kappa "
              f"{_estimate(result['kappa'], 'undefined (one verdict throughout)')}   (95 % intervals, tasks resampled)",
              "", "pass^k, on the same trajectories:",
              pass_k_frame(result).to_string(index=False, float_format=lambda v: f"{v:.3f}")]
    if result["disagreements"]:
        lines += ["", f"{len(result['disagreements'])} disagreements, by what they come from:"]
        lines += [f"  {category} {count}: {CATEGORIES[category]}"
                  for category, count in (result.get("categories") or {}).items()]
        lines.append("")
    for item in result["disagreements"]:
        verdicts = f"lobeval {OUTCOMES[1 - item['lobeval']]}, benchmark {OUTCOMES[1 - item['benchmark']]}"
        theirs = "; ".join(item["benchmark_reasons"]) or "no reason given"
        why = ("; ".join(r["text"] for r in item["reasons"]) if item["reasons"]
               else f"lobeval found nothing wrong; benchmark: {theirs}")
        category = f" [{item['category']}]" if item.get("category") else ""
        lines.append(f"  case {item['case_id']} trial {item['trial']}{category}: {verdicts}: {why}")
    return "\n".join(lines)
