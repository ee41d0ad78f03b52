"""Run-level numbers from scored rows: means, bootstrap intervals over cases, pass^k, per scenario.

Rows whose status is "error" (the evaluation's own machinery failed) are left out of every mean
and counted apart; so are scored rows left out of the bot's metrics (`excluded`: a fault of the simulated
user, a quarantined case), counted in counts.user_faults and counts.quarantined. Rows without a reference
(`"reference": false`: imported traces with no expected calls) are left out of the means of METRICS and
of pass^k, and counted in NO_REFERENCE_METRICS.
"""
from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from math import comb
from typing import Any

import numpy as np
import pandas as pd

from lobeval.core.records import METRICS

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0


def interval(values: np.ndarray) -> list[float] | None:
    """95 % percentile-bootstrap interval of the mean; None for no values.

    A resample of n values is n draws from the distinct values with their observed frequencies,
    so the resampled means come from one multinomial draw per resample: the same distribution as
    resampling the values one by one, at a cost that grows with the distinct values, not with n.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return None
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size == 1:
        return [float(distinct[0])] * 2
    rng = np.random.default_rng(SEED)
    means = rng.multinomial(values.size, counts / values.size, size=RESAMPLES) @ distinct / values.size
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return [float(low), float(high)]


def pass_hat_k(successes: int, trials: int, k: int) -> float:
    """The chance that k trials drawn from this case's all succeed: C(successes, k) / C(trials, k)."""
    return comb(successes, k) / comb(trials, k)


def pass_k_table(scored: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """pass^k for k = 1 .. the most trials of any case; a case counts for k only with k trials or more."""
    per_case = scored.groupby("case_id")["Success"].agg(["sum", "count"])
    table = {}
    for k in range(1, int(per_case["count"].max()) + 1 if len(per_case) else 1):
        eligible = per_case[per_case["count"] >= k]
        values = np.array([pass_hat_k(int(s), int(n), k) for s, n in zip(eligible["sum"], eligible["count"])])
        table[str(k)] = {"value": float(values.mean()), "interval": interval(values), "cases": int(len(values))}
    return table


def _case_means(scored: pd.DataFrame, metric: str) -> np.ndarray:
    """One value per case (the mean over its trials), so intervals resample cases, not trials."""
    return scored.groupby("case_id")[metric].mean().to_numpy()


ALL_ENDED = {"target_unavailable": "the bot (or its own infrastructure) could not be reached",
             "llm_error": "lobeval's own model endpoint failed",
             "budget_spent": "the budget was spent"}
"""What it means, in plain words, when every conversation of a run ended in the same machinery error."""


def unscored_reason(rows: list[dict[str, Any]]) -> str | None:
    """Why no conversation was scored ("no conversation scored: the bot (or its own infrastructure) could not be
    reached: all 13 conversations ended target_unavailable (a machinery error, not the bot's failure), first: …"),
    or None when one was."""
    if any(row.get("status") == "scored" for row in rows):
        return None
    if not rows:
        return "no conversation scored: the run has no conversations"
    endings = Counter(row.get("termination") or "unknown ending" for row in rows)
    first = rows[0]
    message = " ".join(str(first.get("error") or "no message").split())
    (ending, _), = endings.most_common(1)
    listed = ", ".join(f"{reason} {count}" for reason, count in endings.most_common())
    said = (f"{ALL_ENDED[ending]}: all {len(rows)} conversations ended {ending} (a machinery error, not the bot's "
            f"failure)" if len(endings) == 1 and ending in ALL_ENDED else f"{len(rows)} machinery errors ({listed})")
    return f"no conversation scored: {said}, first: {first.get('case_id')} trial {first.get('trial')}: {clip(message)}"


def failed(row: dict[str, Any]) -> bool:
    """Whether a scored conversation failed: Success 0, or, without a reference (no Success), a check that failed.
    A machinery error is no failure of the bot's, and neither is a conversation left out of its metrics."""
    if row.get("status") != "scored" or row.get("excluded"):
        return False
    if row.get("Success") is not None:
        return row["Success"] != 1
    return not all((row.get("checks") or {}).values())


def clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


NO_REFERENCE_METRICS = ("NoFailedCalls", "ClaimsBacked")
"""Metrics every scored row has, reference or not: the share of conversations with no failed call, and with
no claimed-but-not-done (over the rows whose claims were checked)."""
SUMMARY_FIELDS = ("case_id", "trial", "scenario_name", "status", "termination", "excluded", "user_faulted", *METRICS,
                  "reference", *NO_REFERENCE_METRICS, "user_unchecked")
"""What the run-level numbers read of a row (user_faulted, the three after METRICS and user_unchecked derived from
it: `_derived_values`)."""


CLAIMS_NOT_MEASURED = "not measured offline: needs the claims judge"
"""ClaimsBacked when no conversation's claims were read by the claims judge and the rules' claimed-but-not-done
findings are all "to check" (lobeval.scoring.trust): the rules alone are not right often enough on real bots to measure it."""


def unreferenced_note(unreferenced: int) -> str:
    """The sentence saying which metrics apply to conversations without a reference."""
    had = "conversation had" if unreferenced == 1 else "conversations had"
    return (f"{unreferenced} {had} no reference (imported traces, or a benchmark run that publishes no tasks): "
            f"scored only by failed calls, claims and judges; left out of Reliability, recall, precision, Success "
            f"and pass^k")


def claims_source_note(results: dict[str, Any]) -> str:
    """Who read ClaimsBacked's conversations when the claims judge was asked: "; claims judged by the model in 36,
    by the rules in 2" (the rules where it failed, when a kind of theirs counts: lobeval.scoring.trust); "" when it
    was not asked."""
    if "claims" not in (results.get("judges") or {}).get("selected", []):
        return ""
    source = results.get("claims_source") or {}
    rules = f", by the rules in {source['rules']}" if source.get("rules") else ""
    return f"; claims judged by the model in {source.get('judge', 0)}{rules}"


def left_out_notes(counts: dict[str, Any]) -> list[str]:
    """The summary's lines on the scored conversations left out of the bot's metrics, or kept in with faults."""
    lines = []
    if counts.get("user_faults"):
        lines.append(f"{_conversations(counts['user_faults'])} left out for simulated-user faults "
                     f"(--include-user-faults keeps them)")
    if counts.get("user_faults_kept"):
        lines.append(f"{_conversations(counts['user_faults_kept'])} with simulated-user faults kept in the metrics "
                     f"(--include-user-faults)")
    if counts.get("quarantined"):
        lines.append(f"{_conversations(counts['quarantined'])} quarantined (quarantined_case labels): left out")
    return lines


def unchecked_note(unchecked: dict[str, int]) -> str:
    """The sentence naming the simulated-user checks that could not run (`counts.user_unchecked`), and on how
    many conversations."""
    return ("simulated-user checks not run where the case does not know what its user was told or what it "
            "expected (their users are unchecked, not clean): "
            + ", ".join(f"{check} on {_conversations(n)}" for check, n in sorted(unchecked.items())))


def _conversations(n: int) -> str:
    return f"{n} conversation{'' if n == 1 else 's'}"


def _derived_values(row: dict[str, Any]) -> dict[str, Any]:
    """user_faulted (whether it holds simulated-user faults), reference, NoFailedCalls and ClaimsBacked of a row
    (1.0 / 0.0, None when not known, and for a conversation lost to a machinery error), and user_unchecked (the user
    checks not run on it, space-separated)."""
    lost = row.get("status") == "error"
    failed, claims = (None, None) if lost else (row.get("failed_calls"), row.get("claims"))
    return {"user_faulted": bool(row.get("user_faults")), "reference": row.get("reference") is not False,
            "NoFailedCalls": None if failed is None else float(not failed),
            "ClaimsBacked": None if claims is None or not claims.get("backed_measured", True)
            else float(not claims.get("claimed_not_done")),
            "user_unchecked": " ".join(row.get("user_checks_not_run") or {})}


class RowTally:
    """The run-level numbers of rows handed over one at a time: of each row only SUMMARY_FIELDS are kept,
    column by column (a few hundred bytes a row), and the machinery errors."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in SUMMARY_FIELDS}
        self.errors: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        derived = _derived_values(row)
        for name, column in self.columns.items():
            value = derived[name] if name in derived else row.get(name)
            column.append(sys.intern(value) if isinstance(value, str) and name != "case_id" else value)
        if row["status"] == "error":
            self.errors.append({"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row["scenario_name"],
                                "reason": row["termination"], "error": row.get("error")})

    def __len__(self) -> int:
        return len(self.columns["case_id"])

    def summarise(self) -> dict[str, Any]:
        """metrics, intervals, pass_k, scenarios, counts and errors of evaluation_results.json."""
        frame = pd.DataFrame(self.columns) if len(self) else pd.DataFrame(columns=list(self.columns))
        return _summary(frame, self.errors)


def summarise(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """metrics, intervals, pass_k, scenarios, counts and errors of evaluation_results.json."""
    tally = RowTally()
    for row in rows:
        tally.add(row)
    return tally.summarise()


def _summary(frame: pd.DataFrame, errors: list[dict[str, Any]]) -> dict[str, Any]:
    if "reference" not in frame:
        frame = frame.assign(reference=True)
    frame = frame.astype({"reference": bool, "user_faulted": bool})
    counted = (frame["status"] == "scored") & frame["excluded"].isna()   # what the bot's metrics are over
    everything = frame[counted].astype({metric: float for metric in (*METRICS, *NO_REFERENCE_METRICS)
                                        if metric in frame})
    scored = everything[everything["reference"]]   # the metrics against expected calls: rows with a reference
    metrics = {metric: float(scored[metric].mean()) if len(scored) else None for metric in METRICS}
    intervals = {metric: interval(_case_means(scored, metric)) for metric in METRICS}
    over = {metric: int(len(scored)) for metric in METRICS}
    for metric in NO_REFERENCE_METRICS:
        known = everything[everything[metric].notna()] if metric in everything else everything.iloc[0:0]
        over[metric] = int(len(known))
        metrics[metric] = float(known[metric].mean()) if len(known) else None
        intervals[metric] = interval(_case_means(known, metric)) if len(known) else None
    pass_k = pass_k_table(scored) if len(scored) else {}
    if "1" in pass_k:
        metrics["pass^1"], intervals["pass^1"] = pass_k["1"]["value"], pass_k["1"]["interval"]
    scenarios = []
    for name, group in frame.groupby("scenario_name", sort=True):
        ok = scored[scored["scenario_name"] == name]
        entry = {"scenario_name": name, "conversations": int(len(group)), "errors": int((group["status"] == "error").sum()),
                 "unreferenced": int((counted[group.index] & ~group["reference"]).sum()),
                 **_left_out(group)}
        entry.update({metric: float(ok[metric].mean()) if len(ok) else None for metric in METRICS})
        entry["pass^1"] = pass_k_table(ok)["1"]["value"] if len(ok) else None
        for metric in ("Reliability", "Success"):
            entry[f"{metric}_interval"] = interval(_case_means(ok, metric))
        scenarios.append(entry)
    counts = {"conversations": len(frame), "scored": int((frame["status"] == "scored").sum()), "errors": len(errors),
              "unreferenced": int(len(everything) - len(scored)), **_left_out(frame),
              "user_faults_kept": int((counted & frame["user_faulted"]).sum()),
              "user_unchecked": _unchecked(frame),
              "target_errors": int((frame["termination"] == "target_error").sum()),
              "trials": int(frame.groupby("case_id")["trial"].nunique().max()) if len(frame) else 0}
    return {"metrics": metrics, "intervals": intervals, "pass_k": pass_k, "scenarios": scenarios,
            "counts": counts, "errors": errors, "over": over}


def _unchecked(frame: pd.DataFrame) -> dict[str, int]:
    """By check, the scored rows on which it could not run (`user_checks_not_run`)."""
    if "user_unchecked" not in frame:
        return {}
    named = frame.loc[frame["status"] == "scored", "user_unchecked"].fillna("").str.split()
    return {str(check): int(n) for check, n in named.explode().dropna().value_counts(sort=False).items()}


def _left_out(frame: pd.DataFrame) -> dict[str, int]:
    """The scored rows left out of the bot's metrics, by why: user_faults and quarantined."""
    scored = frame[frame["status"] == "scored"]
    return {"user_faults": int((scored["excluded"] == "user_fault").sum()),
            "quarantined": int((scored["excluded"] == "quarantined").sum())}


def figure_lines(results: dict[str, Any]) -> list[str]:
    """What `lobeval evaluate` and `lobeval run` print of a results summary: each figure with its interval,
    each judge figure with "judged n of N, k judge errors", a figure over part of the conversations with
    its share, and the judges' status."""
    metrics, intervals, counts = results["metrics"], results["intervals"], results["counts"]
    lines = []
    over = results.get("over") or {}
    coverage = results["judges"].get("coverage") or {}
    for name in dict.fromkeys([*metrics, *coverage]):   # a judge that judged nothing has coverage, no value
        value, cover = metrics.get(name), coverage.get(name)
        if name == "ClaimsBacked" and value is None and counts.get("scored"):
            lines.append(f"{name:>16} {CLAIMS_NOT_MEASURED}")
            continue
        if value is None and cover is None:
            continue
        low_high = intervals.get(name)
        band = f"  [{low_high[0]:.3f}, {low_high[1]:.3f}]" if low_high and value is not None else ""
        if cover:
            band += f"  judged {cover['judged']} of {cover['of']}" + (
                f", {cover['errors']} judge errors" if cover["errors"] else "")
        elif name in over and value is not None and (counts.get("unreferenced") or counts.get("user_faults")
                                                      or counts.get("quarantined") or name in NO_REFERENCE_METRICS):
            band += f"  over {over[name]} of {counts['scored']} conversations"
            band += claims_source_note(results) if name == "ClaimsBacked" else ""
        shown = f"{value:.3f}" if value is not None else "not measured"
        lines.append(f"{name:>16} {shown}{band}")
    errored = results["judges"].get("errored_conversations")
    lines.append(f"judges: {results['judges']['status']}"
                 + (f" ({errored} conversations with judge errors)" if errored else ""))
    if results.get("to_check"):
        lines.append(to_check_note(results["to_check"]))
    return lines


TO_CHECK_KINDS = {"claimed_not_done": ("claimed but not done", "claimed but not done"),
                  "done_not_told": ("done but not told", "done but not told"),
                  "user_faults": ("simulated-user fault", "simulated-user faults")}


def to_check_note(to_check: dict[str, int]) -> str:
    """The line on the findings "to check" (lobeval.scoring.trust): how many of each kind, counted in no figure."""
    listed = ", ".join(f"{n} {TO_CHECK_KINDS.get(kind, (kind, kind))[n != 1]}" for kind, n in to_check.items() if n)
    return (f"to check by hand: {listed} (found without a model by checks not right often enough on real bots' "
            f"conversations to count: in no figure and not in the gate)")
