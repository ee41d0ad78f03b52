"""The stakeholder report: what `05_report.ipynb` shows, and its export to one self-contained HTML file.

nbconvert's templates load require.js, MathJax and mermaid from CDNs; the report needs none of
them (its plots are inline PNGs and its replay is inline script), so those tags are dropped and a
reader's browser asks no other host for anything. Every piece of transcript text reaches the page
through pandas (which escapes) or `html.escape`, or as escaped JSON read by `textContent`.
"""
from __future__ import annotations

import copy
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
from matplotlib.figure import Figure

from lobeval.analyse import judge_coverage, judge_errors_reason, judge_status_counts
from lobeval.compare import DEFAULT_GATE, DEFAULT_MAX_ERROR_RATE, JUDGE_SCORE, gate, load_run
from lobeval.errors import ConfigError, LobevalError
from lobeval.llm import Usage, format_cost
from lobeval.records import METRICS
from lobeval.runs import HEADLINE, earlier_runs, skipped

_EXTERNAL = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)


def to_html(notebook: nbformat.NotebookNode) -> str:
    """The executed report notebook as HTML without code cells, prompts or external requests."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True, exclude_anchor_links=True)
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:   # scrapbook's glue is for the pipeline, not for readers
        cell["outputs"] = [output for output in cell.get("outputs", [])
                           if not any(kind.startswith("application/scrapbook") for kind in output.get("data", {}))]
    body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": "lobeval report"}})
    return self_contained(body)


def self_contained(page: str) -> str:
    """Drop every script, stylesheet or frame that would be fetched from another host."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for tag in soup.find_all(["script", "link", "iframe", "img"]):
        reference = tag.get("src") or tag.get("href") or ""
        fetches = _EXTERNAL.match(reference) or (tag.name == "script" and re.search(
            r"\bimport\b[^;]*['\"](?:https?:)?//", tag.string or ""))
        if fetches:
            tag.decompose()
    return str(soup)


def headline_table(results: dict[str, Any]) -> pd.DataFrame:
    """The headline metrics with their intervals and what each covers (a judge's mean over part of the
    conversations says so); empty when nothing was measured."""
    rows = [{"metric": name, "value": results["metrics"][name],
             "95% interval": _band((results.get("intervals") or {}).get(name)), "over": _coverage(results, name)}
            for name in HEADLINE if isinstance(results["metrics"].get(name), int | float)]
    return pd.DataFrame(rows, columns=["metric", "value", "95% interval", "over"]).set_index("metric").round(3)


def _coverage(results: dict[str, Any], name: str) -> str:
    counts = results["counts"]
    if name in METRICS:
        return f"{counts.get('scored', 0)} of {counts['conversations']} conversations scored"
    if name == "pass^1":
        return f"{(results.get('pass_k') or {}).get('1', {}).get('cases', '?')} cases"
    return judge_coverage(results, name)


def _band(interval: list[float] | None) -> str:
    return f"{interval[0]:.3f} – {interval[1]:.3f}" if interval else ""


@dataclass
class History:
    """The earlier finished runs of a suite, as the report reads them."""

    runs: list[dict[str, Any]]
    """The index entries that could be read, oldest first: the trend."""
    baseline: str | None
    """The folder of the last of them whose results can be read: the gate compares with it."""
    skipped: list[str]
    """One line for each index line that could not be read, and each run tried as the baseline that could
    not be read (the later runs), and why."""


def history(index: str | Path, config: dict[str, Any]) -> History:
    """The earlier runs of this run's suite. Those are history, not this run: an index line or a run
    folder that cannot be read (damaged, of an older format, deleted by hand) is skipped with a warning."""
    entries, left_out = earlier_runs(index, config)
    for entry in reversed(entries):
        try:
            load_run(entry["run_dir"])
        except LobevalError as exc:
            left_out.append(skipped(f"earlier run {entry['run_id']} as the baseline: {exc}"))
            continue
        return History(entries, entry["run_dir"], left_out)
    return History(entries, None, left_out)


def gate_verdict(run_dir: str | Path, config: dict[str, Any], earlier: History) -> tuple[bool, list[dict[str, Any]]]:
    """The quality gate of the run's configuration (minimums), against the previous run of the suite
    when there is one with shared cases."""
    limits = {"minimums": config.get("gate") or DEFAULT_GATE,
              "max_error_rate": config.get("max_error_rate", DEFAULT_MAX_ERROR_RATE)}
    try:
        checks = gate(run_dir, baseline=earlier.baseline, **limits)
    except ConfigError:   # no shared cases with the baseline: gate on the limits alone
        checks = gate(run_dir, **limits)
    return all(check["passed"] for check in checks), checks


def verdict_html(passed: bool, checks: list[dict[str, Any]], results: dict[str, Any]) -> str:
    counts = results["counts"]
    colour, word = ("#1b7f3b", "PASSED") if passed else ("#b3261e", "FAILED")
    items = "".join(f'<li><b style="color:{"#1b7f3b" if check["passed"] else "#b3261e"}">'
                    f'{"PASS" if check["passed"] else "FAIL"}</b> {html.escape(check["check"])}: '
                    f'{html.escape(check["reason"])}</li>' for check in checks)
    judged = judges_html(results)
    return (f'<div style="font-size:1.4em;padding:.6em;border-left:.4em solid {colour}">'
            f'Quality gate <b style="color:{colour}">{word}</b> · {counts.get("scored", 0)} conversations scored, '
            f'{counts["errors"]} machinery errors (not counted as the bot\'s failures), '
            f'{counts.get("target_errors", 0)} target errors</div>{judged}<ul>{items}</ul>')


def judges_html(results: dict[str, Any]) -> str:
    """The judges' final status per scored conversation (Done / Partial Failure / Failed / Not judged) and
    their errors; empty when the judges did not run."""
    statuses = judge_status_counts(results)
    if statuses is None:
        return ""
    errored = (results.get("judges") or {}).get("errored_conversations")
    line = " · ".join(f"{status} {count}" for status, count in statuses.items())
    why = judge_errors_reason(results)
    errors = f"; {errored} conversations with judge errors" if errored else ""
    return (f"<p>Judges: {html.escape(line)}{html.escape(errors)}"
            f"{'<br>' + html.escape(why) if why else ''}</p>")


def scenario_summary(results: dict[str, Any]) -> pd.DataFrame:
    """Per scenario, the columns a reader needs: size, errors, the two main metrics with intervals,
    claims and the judges' final score."""
    columns = ["scenario", "conversations", "errors", "Reliability", "Reliability 95%", "Success", "Success 95%",
               "claimed, not done", "done, not told", "judge final score", "judge final score over"]
    rows = [{"scenario": entry["scenario_name"], "conversations": entry["conversations"], "errors": entry["errors"],
             "Reliability": entry["Reliability"], "Reliability 95%": _band(entry.get("Reliability_interval")),
             "Success": entry["Success"], "Success 95%": _band(entry.get("Success_interval")),
             "claimed, not done": entry.get("claimed_not_done"), "done, not told": entry.get("done_not_told"),
             "judge final score": entry.get(JUDGE_SCORE),
             "judge final score over": _judged(entry.get(f"{JUDGE_SCORE}_coverage"))}
            for entry in results["scenarios"]]
    return pd.DataFrame(rows, columns=columns).set_index("scenario").round(3)


def _judged(cover: dict[str, int] | None) -> str:
    if not cover:
        return ""
    errors = f", {cover['errors']} judge errors" if cover.get("errors") else ""
    return f"judged {cover['judged']} of {cover['of']}{errors}"


def trend_table(earlier: History, config: dict[str, Any], metrics: dict[str, Any]) -> pd.DataFrame:
    """The headline metrics of the earlier runs of this suite, and this run last."""
    rows = [{"run_id": entry["run_id"], **entry["metrics"]} for entry in earlier.runs]
    rows.append({"run_id": config["run_id"], **{name: metrics.get(name) for name in HEADLINE if name in metrics}})
    return pd.DataFrame(rows).set_index("run_id")


def skipped_html(earlier: History) -> str:
    """What of the earlier runs could not be read and was left out, one line each; empty when nothing was."""
    if not earlier.skipped:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in earlier.skipped)
    return f"<p>Earlier runs left out because they could not be read:</p><ul>{items}</ul>"


def plot_trend(table: pd.DataFrame) -> Figure | None:
    """Reliability and Success over the runs; None with fewer than two runs."""
    columns = [name for name in ("Reliability", "Success") if name in table]
    if len(table) < 2 or not columns:
        return None
    figure = Figure(figsize=(7, 3))
    axes = figure.subplots()
    for name in columns:
        axes.plot(range(len(table)), table[name].astype(float), marker="o", label=name)
    axes.set_xticks(range(len(table)), table.index, rotation=30, ha="right", fontsize=8)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("mean over conversations")
    axes.legend(loc="lower left")
    figure.tight_layout()
    return figure


def cost_by_role(results: dict[str, Any]) -> pd.DataFrame:
    """Model calls, tokens and cost of the simulation roles and of the judges."""
    roles = {role: numbers for role, numbers in (results.get("usage") or {}).items()}
    for name, numbers in ((results.get("judges") or {}).get("usage_by_judge") or {}).items():
        roles[f"judge: {name}"] = numbers
    rows = []
    for role, numbers in roles.items():
        usage = Usage.of(numbers)
        rows.append({"role": role, "answers asked": usage.calls, "from cache": usage.cached_calls,
                     "requests sent": usage.requests, "prompt tokens": usage.prompt_tokens,
                     "completion tokens": usage.completion_tokens, "cost": format_cost(usage.cost_usd)})
    columns = ["role", "answers asked", "from cache", "requests sent", "prompt tokens", "completion tokens", "cost"]
    return pd.DataFrame(rows, columns=columns).set_index("role")


def config_html(config: dict[str, Any]) -> str:
    return f"<pre>{html.escape(json.dumps(config, indent=1, default=str))}</pre>"
