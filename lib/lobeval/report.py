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
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
from matplotlib.figure import Figure

from lobeval.compare import DEFAULT_MAX_ERROR_RATE, gate
from lobeval.errors import ConfigError
from lobeval.runs import HEADLINE, RESULTS_FILE, earlier_runs

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
    rows = [{"metric": name, "value": results["metrics"][name],
             "95% interval": _band(results["intervals"].get(name))}
            for name in HEADLINE if isinstance(results["metrics"].get(name), int | float)]
    return pd.DataFrame(rows).set_index("metric").round(3)


def _band(interval: list[float] | None) -> str:
    return f"{interval[0]:.3f} – {interval[1]:.3f}" if interval else ""


def baseline_run(index: str | Path, config: dict[str, Any]) -> str | None:
    """The last earlier finished run of the same suite, to compare with."""
    earlier = [entry for entry in earlier_runs(index, config) if Path(entry["run_dir"], RESULTS_FILE).exists()]
    return earlier[-1]["run_dir"] if earlier else None


def gate_verdict(run_dir: str | Path, config: dict[str, Any], index: str | Path) -> tuple[bool, list[dict[str, Any]]]:
    """The quality gate of the run's configuration (minimums), against the previous run of the suite
    when there is one with shared cases."""
    baseline = baseline_run(index, config)
    limits = {"minimums": config["gate"], "max_error_rate": config.get("max_error_rate", DEFAULT_MAX_ERROR_RATE)}
    try:
        checks = gate(run_dir, baseline=baseline, **limits)
    except ConfigError:   # no shared cases with the baseline: gate on the limits alone
        checks = gate(run_dir, **limits)
    return all(check["passed"] for check in checks), checks


def verdict_html(passed: bool, checks: list[dict[str, Any]], results: dict[str, Any]) -> str:
    counts = results["counts"]
    colour, word = ("#1b7f3b", "PASSED") if passed else ("#b3261e", "FAILED")
    items = "".join(f'<li><b style="color:{"#1b7f3b" if check["passed"] else "#b3261e"}">'
                    f'{"PASS" if check["passed"] else "FAIL"}</b> {html.escape(check["check"])}: '
                    f'{html.escape(check["reason"])}</li>' for check in checks)
    return (f'<div style="font-size:1.4em;padding:.6em;border-left:.4em solid {colour}">'
            f'Quality gate <b style="color:{colour}">{word}</b> · {counts["scored"]} conversations scored, '
            f'{counts["errors"]} machinery errors (not counted as the bot\'s failures), '
            f'{counts["target_errors"]} target errors</div><ul>{items}</ul>')


def scenario_summary(results: dict[str, Any]) -> pd.DataFrame:
    """Per scenario, the columns a reader needs: size, errors, the two main metrics with intervals,
    claims and the judges' final score."""
    rows = [{"scenario": entry["scenario_name"], "conversations": entry["conversations"], "errors": entry["errors"],
             "Reliability": entry["Reliability"], "Reliability 95%": _band(entry.get("Reliability_interval")),
             "Success": entry["Success"], "Success 95%": _band(entry.get("Success_interval")),
             "claimed, not done": entry.get("claimed_not_done"), "done, not told": entry.get("done_not_told"),
             "judge final score": entry.get("judge.final_score")}
            for entry in results["scenarios"]]
    return pd.DataFrame(rows).set_index("scenario").round(3)


def trend_table(index: str | Path, config: dict[str, Any], metrics: dict[str, Any]) -> pd.DataFrame:
    """The headline metrics of the earlier runs of this suite, and this run last."""
    rows = [{"run_id": entry["run_id"], **entry["metrics"]} for entry in earlier_runs(index, config)]
    rows.append({"run_id": config["run_id"], **{name: metrics.get(name) for name in HEADLINE if name in metrics}})
    return pd.DataFrame(rows).set_index("run_id")


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
    for name, numbers in (results["judges"].get("usage_by_judge") or {}).items():
        roles[f"judge: {name}"] = numbers
    columns = ["calls", "cached_calls", "prompt_tokens", "completion_tokens", "cost_usd"]
    table = pd.DataFrame([{"role": role, **{c: numbers.get(c, 0) for c in columns}} for role, numbers in roles.items()],
                         columns=["role", *columns])
    return table.set_index("role")


def config_html(config: dict[str, Any]) -> str:
    return f"<pre>{html.escape(json.dumps(config, indent=1, default=str))}</pre>"
