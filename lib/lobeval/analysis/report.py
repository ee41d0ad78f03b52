"""The stakeholder report: what `05_report.ipynb` shows, and its export to one self-contained HTML file.

The report is written for a manager who reads it in two minutes: the verdict and what it was compared
with, why the bot failed in sentences with counts and the wrong values, each example a link into the
replay at the conversation's first failing turn, then the numbers. The tables have readable headers
(`table_html`); the pieces that are more than a table are HTML built here.

nbconvert's templates load require.js, MathJax and mermaid from CDNs; the report needs none of
them (its plots are inline PNGs and its replay is inline script), so those tags are dropped and a
reader's browser asks no other host for anything. Every piece of transcript text reaches the page
through `html.escape` (tables included: `DataFrame.to_html` escapes), or as escaped JSON read by
`textContent`.
"""
from __future__ import annotations

import base64
import copy
import functools
import html
import io
import json
import numbers
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from lobeval.analysis.analyse import (breach_table, claims_table, failure_sentences, judge_coverage, judge_errors_reason,
                             judge_status_counts, judge_table, plot_call_heatmaps, plot_metric_distributions,
                             plot_pass_k, security_table, to_check_table,
                             user_fault_table)
from lobeval.scoring.claims import RULES_MEASURED
from lobeval.analysis.compare import (DEFAULT_GATE, DEFAULT_MAX_ERROR_RATE, DEFAULT_MAX_USER_FAULT_RATE, JUDGE_SCORE,
                             NOTHING_SCORED, check_word, gate, load_run)
from lobeval.core.errors import ConfigError, LobevalError
from lobeval.models.llm import Usage, format_cost
from lobeval.core.records import METRICS
from lobeval.core.render import METRIC_NAMES, metric_name
from lobeval.analysis.replay import link_html
from lobeval.workspace.runs import HEADLINE, earlier_runs, skipped
from lobeval.core.stats import (
    CLAIMS_NOT_MEASURED, NO_REFERENCE_METRICS, claims_source_note, failed, left_out_notes, unchecked_note,
    unreferenced_note, unscored_reason,
)
from lobeval.simulation.user_faults import CHECKS as USER_CHECKS, MARK_ONLY, review_failed

_EXTERNAL = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)


TITLE_SCRAP = "report_title"
"""The glue of 05_report that the page's <title> is (`title_text`)."""
STAGE_FIGURES = ("call_heatmaps", "metric_distributions", "pass_k")
"""The figures stage 04 shows and glues as displays (`sb.glue(name, HTML(drawn_figure(name, data)),
encoder="display")`), which the report shows again from that glue (`shown_figure`): each is drawn once a run."""


@functools.cache
def _exporter() -> Any:
    """nbconvert's HTML exporter for the report, made once a process: it compiles its templates when first used."""
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                        exclude_output_prompt=True, exclude_anchor_links=True)


def to_html(notebook: nbformat.NotebookNode) -> str:
    """The executed report notebook as HTML without code cells, prompts or external requests; its <title> the
    notebook's `report_title` glue (suite, bot, date and verdict), else "lobeval report"."""
    exporter = _exporter()
    notebook = copy.deepcopy(notebook)
    title = "lobeval report"
    for cell in notebook.cells:   # scrapbook's glue is for the pipeline, not for readers
        for output in cell.get("outputs", []):
            for kind, scrap in output.get("data", {}).items():
                if kind.startswith("application/scrapbook") and isinstance(scrap, dict) \
                        and scrap.get("name") == TITLE_SCRAP and isinstance(scrap.get("data"), str):
                    title = scrap["data"]
        cell["outputs"] = [output for output in cell.get("outputs", [])
                           if not any(kind.startswith("application/scrapbook") for kind in output.get("data", {}))]
    body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
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


GREEN, RED, AMBER, GREY = "#1b7f3b", "#b3261e", "#a15c00", "#666"
STYLE = ("<style>.lobeval-report{font-family:sans-serif;font-size:14px;line-height:1.45;max-width:1100px}"
         ".lobeval-report .verdict{font-size:1.1em;padding:.4em .6em;border-left:.4em solid}"
         ".lobeval-report .sentence{font-size:1.3em;font-weight:600;padding:.5em .7em;border-left:.4em solid;"
         "margin:0 0 .3em}.lobeval-report .about{color:#555;margin:0 0 1em;overflow-wrap:anywhere}"
         ".lobeval-report li{margin:.25em 0}.lobeval-report .examples{color:#444;font-size:.92em}"
         ".lobeval-report details{margin:.2em 0}.lobeval-report summary{cursor:pointer;color:#1f4e8c}"
         ".lobeval-report .quote{white-space:pre-wrap;color:#333}"
         ".lobeval-report .chip{display:inline-block;padding:.1em .6em;margin:0 .3em .3em 0;border-radius:1em;"
         "color:#fff;font-weight:bold}"
         ".lobeval-report dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2em 1em;margin:0}"
         ".lobeval-report dt{font-weight:bold;white-space:nowrap}.lobeval-report dd{margin:0;overflow-wrap:anywhere}"
         ".lobeval-report img{max-width:100%}"
         # a table or figure wider than the page scrolls sideways in its own box, and says so (`scroll_box`): a shadow
         # at the edge with more to see, and a line the page's script shows when the box overflows
         ".lobeval-report .scroll{overflow-x:auto;max-width:100%;background:"
         "linear-gradient(to right,#fff 30%,rgba(255,255,255,0)) left/2em 100% no-repeat local,"
         "linear-gradient(to left,#fff 30%,rgba(255,255,255,0)) right/2em 100% no-repeat local,"
         "radial-gradient(farthest-side at 0 50%,rgba(0,0,0,.25),transparent) left/.8em 100% no-repeat scroll,"
         "radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.25),transparent) right/.8em 100% no-repeat scroll}"
         ".lobeval-report .scroll-hint{display:none;color:#1f4e8c;font-size:.9em;margin:.2em 0}"
         ".lobeval-report .overflows>.scroll-hint{display:block}"
         # a figure keeps its own size on a narrow screen (its text stays readable) and scrolls instead
         "@media (max-width:800px){.lobeval-report img.figure{max-width:none;width:var(--natural)}}"
         ".lobeval-report table.lobeval-table{border-collapse:collapse;margin:.3em 0}"
         ".lobeval-report table.lobeval-table th,.lobeval-report table.lobeval-table td{padding:.2em .6em;"
         "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
         # cells wrap, and a quoted text even inside a word (an e-mail address, a call's JSON): tables fit the page
         ".lobeval-report table.lobeval-table th,.lobeval-report table.lobeval-table .n{white-space:nowrap}"
         ".lobeval-report table.lobeval-table .quote{overflow-wrap:anywhere}"
         ".lobeval-report table.lobeval-table .n{text-align:right;font-variant-numeric:tabular-nums}"
         ".lobeval-report .cause{margin:.6em 0;padding:.4em .8em;border-left:.3em solid #ccc}</style>")
LONG = 240
"""Characters of a text shown whole; longer ones are folded (<details>), never cut."""
EXAMPLES = 5
"""Example links shown with a failure; the rest are folded."""

MEANINGS = {"Reliability": "did it do what it should: the mean of function and argument recall",
            "Success": "all required calls right, every fact told, nothing forbidden, a normal ending",
            "Recall_fn": "the expected calls it made",
            "Precision_fn": "the calls it made that were expected",
            "Recall_args": "the expected arguments it got right",
            "Precision_args": "the arguments it gave that were right",
            "pass^1": "the chance that one try of a case succeeds",
            "NoFailedCalls": "conversations in which no call the bot made failed (needs no reference)",
            "ClaimsBacked": "conversations in which the bot claimed nothing it had not done (needs no reference); "
                            + RULES_MEASURED,
            JUDGE_SCORE: "how it talked, as the judges saw it"}
ROLE_NAMES = {"user": "simulated user", "target": "bot (target)", "judge": "judges", "embedding": "embeddings"}


def _e(value: Any) -> str:
    return html.escape(str(value))


def _note(results: dict[str, Any] | None, empty: str) -> str:
    """Why a section is empty: why nothing was scored when nothing was, `empty` otherwise."""
    reason = unscored_reason(results["rows"]) if results is not None else None
    return f"<p>{_e(reason or empty)}</p>"


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, str) and not value) or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table_html(frame: pd.DataFrame | None, results: dict[str, Any] | None = None,
               empty: str = "Nothing to show.") -> str:
    """A table as the report shows it: its headers as given (readable ones), a named index as its first
    column and an unnamed one not at all, numbers to three places and right-aligned, "—" for nothing, every
    value escaped; or a note saying why there is nothing (`_note`)."""
    if frame is None or frame.empty:
        return _note(results, empty)
    named = any(name is not None for name in frame.index.names)
    shown = frame.reset_index() if named else frame.reset_index(drop=True)
    header = "".join(f"<th>{_e(column)}</th>" for column in shown.columns)
    rows = "".join("<tr>" + "".join(f"<td{_number_class(value)}>{_e(_cell(value))}</td>" for value in row) + "</tr>"
                   for row in shown.itertuples(index=False, name=None))
    table = f"<table class='lobeval-table'><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"
    return f"{STYLE}<div class='lobeval-report'>{scroll_box(table)}</div>"


HINT = "scroll sideways to see all of it →"
SCROLL_SCRIPT = ("<script>(function () {function mark() {document.querySelectorAll('.lobeval-box').forEach("
                 "function (box) {var inner = box.querySelector('.scroll'); box.classList.toggle('overflows', "
                 "inner.scrollWidth > inner.clientWidth + 1);});}"
                 "window.addEventListener('load', mark); window.addEventListener('resize', mark); mark();})();</script>")
"""Shows the hint of each scroll box whose content is wider than the page (on load and on every resize)."""


def scroll_box(content: str) -> str:
    """A table or figure in a box of its own that scrolls sideways when the page is narrower than it (a phone), with
    a shadow at the edge that hides more and a line saying so (`SCROLL_SCRIPT` shows it when the box overflows)."""
    return (f"<div class='lobeval-box'><div class='scroll-hint'>{HINT}</div><div class='scroll'>{content}</div>"
            f"</div>")


def _number_class(value: Any) -> str:
    return " class='n'" if isinstance(value, numbers.Number) and not isinstance(value, bool | np.bool_) else ""


def headline_table(results: dict[str, Any]) -> pd.DataFrame:
    """The headline metrics with their intervals, what each covers (a judge's mean over part of the
    conversations says so) and what it measures; empty when nothing was measured."""
    rows = [{"metric": metric_name(name), "value": results["metrics"].get(name),
             "95% interval": _band((results.get("intervals") or {}).get(name)), "over": _coverage(results, name),
             "what it measures": MEANINGS.get(name, "")}
            for name in (*HEADLINE, *NO_REFERENCE_METRICS) if isinstance(results["metrics"].get(name), int | float)
            or name == "ClaimsBacked" and (results.get("counts") or {}).get("scored")]
    for row in rows:
        if row["metric"] == metric_name("ClaimsBacked") and row["value"] is None:
            row["over"] = CLAIMS_NOT_MEASURED
    columns = ["metric", "value", "95% interval", "over", "what it measures"]
    return pd.DataFrame(rows, columns=columns).set_index("metric").round(3)


def _coverage(results: dict[str, Any], name: str) -> str:
    counts = results["counts"]
    over = results.get("over") or {}
    left_out = (counts.get("user_faults") or 0) + (counts.get("quarantined") or 0)
    note = f" ({left_out} left out: simulated-user faults, quarantined cases)" if left_out else ""
    if name in METRICS and counts.get("unreferenced"):
        return (f"{over.get(name, counts.get('scored', 0) - counts['unreferenced'])} of {counts['conversations']} "
                f"conversations scored against a reference{note}")
    if name in METRICS:
        return f"{over.get(name, counts.get('scored', 0))} of {counts['conversations']} conversations scored{note}"
    if name in NO_REFERENCE_METRICS:
        return (f"{over.get(name, '?')} of {counts['conversations']} conversations"
                + (claims_source_note(results) if name == "ClaimsBacked" else ""))
    if name == "pass^1":
        return f"{(results.get('pass_k') or {}).get('1', {}).get('cases', '?')} cases"
    return judge_coverage(results, name)


def _band(interval: list[float] | None) -> str:
    return f"{interval[0]:.3f} – {interval[1]:.3f}" if interval else ""


@dataclass
class History:
    """The earlier finished runs of this bot on this suite (`runs.earlier_runs`), as the report reads them."""

    runs: list[dict[str, Any]]
    """The index entries that could be read, oldest first: the trend."""
    baseline: str | None
    """The folder of the last of them whose results can be read and scored a conversation: the gate compares with
    it."""
    skipped: list[str]
    """One line for each index line that could not be read, and each run tried as the baseline that could
    not be read or scored no conversation (the later runs), and why."""

    @property
    def baseline_id(self) -> str | None:
        """The run id of the baseline, as the verdict names it."""
        return next((entry["run_id"] for entry in reversed(self.runs) if entry["run_dir"] == self.baseline), None)

    @property
    def baseline_finished(self) -> str | None:
        """When the baseline finished ("2026-11-28 10:21"), as its index line says."""
        found = next((entry.get("finished") for entry in reversed(self.runs) if entry["run_dir"] == self.baseline), None)
        return _day(found) if found else None


def history(index: str | Path, config: dict[str, Any]) -> History:
    """The earlier runs of this run's suite against the same bot, with the same simulated user and attacks. Those are
    history, not this run: an index line or a run folder that cannot be read (damaged, of an older format, deleted by
    hand) is skipped with a warning, and so is, as the baseline, a run that scored no conversation (every one lost to
    the machinery: nothing to compare with)."""
    entries, left_out = earlier_runs(index, config)
    for entry in reversed(entries):
        try:
            nothing_scored = unscored_reason(load_run(entry["run_dir"])["rows"])
        except LobevalError as exc:
            left_out.append(skipped(f"earlier run {entry['run_id']} as the baseline: {exc}"))
            continue
        if nothing_scored:
            left_out.append(skipped(f"earlier run {entry['run_id']} as the baseline: {nothing_scored}"))
            continue
        return History(entries, entry["run_dir"], left_out)
    return History(entries, None, left_out)


def gate_verdict(run_dir: str | Path, config: dict[str, Any], earlier: History) -> tuple[bool, list[dict[str, Any]]]:
    """The quality gate of the run's configuration (minimums), against the last earlier run of this bot on this
    suite (`history`) when there is one with shared cases."""
    limits = {"minimums": config.get("gate") or DEFAULT_GATE,
              "max_error_rate": config.get("max_error_rate", DEFAULT_MAX_ERROR_RATE),
              "max_user_fault_rate": config.get("max_user_fault_rate", DEFAULT_MAX_USER_FAULT_RATE),
              "min_rule": config.get("min_rule", "point")}
    try:
        checks = gate(run_dir, baseline=earlier.baseline, **limits)
    except ConfigError:   # no shared cases with the baseline: gate on the limits alone
        checks = gate(run_dir, **limits)
    return all(check["passed"] for check in checks), checks


REGRESSION = "no regression in "
SAME_RUN = "the last earlier run of this bot on this suite (same scenarios, target, simulated user and attacks)"
"""Which run the baseline is, and why that one."""


def comparison_text(checks: list[dict[str, Any]], earlier: History | None) -> str:
    """What the gate compared the run with, in a sentence naming the baseline run and why it is that run."""
    if earlier is None or earlier.baseline is None:
        return ("No earlier run of this bot on this suite to compare with (a baseline must have the same scenarios, "
                "target, simulated user and attacks): the gate checks the minimums and the limits only.")
    name = earlier.baseline_id or earlier.baseline
    finished = earlier.baseline_finished
    which = f"run {name}{f', finished {finished},' if finished else ''} {SAME_RUN}"
    compared = [check for check in checks if check["check"].startswith(REGRESSION)]
    if not compared:
        why = ("this run scored no conversation" if any(check["check"] == NOTHING_SCORED for check in checks)
               else "the two runs share no scored conversation")
        return f"Not compared with {which}: {why}."
    worse = [check for check in compared if not check["passed"]]
    if not worse:
        return (f"No regression against {which}: none of the {len(compared)} metrics compared is significantly "
                f"worse on the conversations both runs scored.")
    return (f"Regression against {which}: "
            + "; ".join(f"{metric_name(check['check'].removeprefix(REGRESSION))} {check['reason']}"
                        for check in worse) + ".")


def _readable(text: str) -> str:
    """A gate check's words with the metrics named as the report names them."""
    for name in sorted(METRIC_NAMES, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.^]){re.escape(name)}(?![\w^])", METRIC_NAMES[name], text)
    return text


WORD_COLOURS = {"PASS": GREEN, "FAIL": RED, "UNDECIDED": AMBER}


def _check_item(check: dict[str, Any]) -> str:
    word = check_word(check)
    return (f'<li><b style="color:{WORD_COLOURS[word]}">{word}</b> {_e(_readable(check["check"]))}: '
            f'{_e(_readable(check["reason"]))}</li>')


# --- the verdict in one sentence ---------------------------------------------------------------------

MACHINERY_WORDS = {"target_unavailable": "the bot could not be reached", "llm_error": "a model lobeval uses failed",
                   "budget_spent": "the budget was spent"}
"""Why a conversation ended in a machinery error (records.MACHINERY_ERRORS), in words."""


def verdict_sentence(passed: bool, checks: list[dict[str, Any]], results: dict[str, Any],
                     earlier: History | None = None) -> str:
    """The verdict in one sentence a manager reads first, the same words on the report's first line and in the
    terminal: how many conversations failed of how many and the defect behind most of them (`failure_sentences`'
    gist), then what the gate decided and why. A run in which nothing could be scored says that instead: it is no
    verdict on the bot."""
    rows = results.get("rows") or []
    gate_words = _gate_clause(passed, checks, earlier)
    if unscored_reason(rows) is not None:
        return f"{_nothing_scored(rows)}; {gate_words}."
    lost = any(check.get("kind") == "error_rate" and not check["passed"] for check in checks)
    return f"{_failures_clause(results, lost)}; {gate_words}."


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _endings(rows: list[dict[str, Any]]) -> str:
    """The machinery errors of `rows` in words: "the bot could not be reached" (with counts when there are kinds)."""
    endings = Counter(row.get("termination") or "unknown" for row in rows if row.get("status") != "scored")
    words = [(MACHINERY_WORDS.get(reason, reason.replace("_", " ")), count) for reason, count in endings.most_common()]
    return words[0][0] if len(words) == 1 else ", ".join(f"{what} in {count}" for what, count in words)


def _nothing_scored(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "This run has no conversations, so it says nothing about the bot"
    every = "the one conversation" if len(rows) == 1 else f"all {len(rows)} conversations"
    return (f"No conversation could be scored, as {every} ended in a machinery error ({_endings(rows)}), so this run "
            f"says nothing about the bot")


def _failures_clause(results: dict[str, Any], lost: bool = False) -> str:
    """How many conversations failed of those counted for the bot, the defect behind most of them, and the
    conversations not counted (machinery errors, left out). `lost`: more conversations were lost to the machinery
    than the gate allows, which the clause then says first."""
    rows = results.get("rows") or []
    counted = [row for row in rows if row.get("status") == "scored" and not row.get("excluded")]
    failing = {(row["case_id"], row["trial"]) for row in counted if failed(row)}
    errors = [row for row in rows if row.get("status") != "scored"]
    if not counted:
        text = "No conversation counted for the bot"
    elif not failing:
        text = "The one conversation passed" if len(counted) == 1 else f"None of the {len(counted)} conversations failed"
    else:
        text = f"{len(failing)} of {_plural(len(counted), 'conversation')} failed{_defect_clause(results, failing)}"
    ended = f"ended in {'a machinery error' if len(errors) == 1 else 'machinery errors'} ({_endings(rows)})"
    if lost and errors:
        text = (f"{len(errors)} of {_plural(len(rows), 'conversation')} {ended}, so this run says little about the "
                f"bot; of the others, {text[0].lower()}{text[1:]}")
    elif errors:
        text += f"; {len(errors)} more {ended}, not counted against the bot"
    left_out = sum(bool(row.get("excluded")) for row in rows if row.get("status") == "scored")
    if left_out:
        text += f"; {left_out} more {'was' if left_out == 1 else 'were'} left out (the simulated user's mistakes, " \
                f"quarantined cases)"
    return text


def _defect_clause(results: dict[str, Any], failing: set[tuple[str, int]]) -> str:
    """", all 3 because the bot ...": the defect found in most of the failing conversations, in plain words."""
    best, most = None, 0
    for sentence in failure_sentences(results):
        found = len(failing & {(example["case_id"], example["trial"]) for example in sentence["examples"]})
        if found > most:
            best, most = sentence, found
    if best is None:
        return ""
    if most == len(failing):
        return f", because {best['gist']}" if most == 1 else f", all {most} because {best['gist']}"
    return f", {most} of them because {best['gist']}"


def _gate_clause(passed: bool, checks: list[dict[str, Any]], earlier: History | None) -> str:
    """What the gate decided and why, in words."""
    undecided = [check for check in checks if check.get("undecided")]
    if any(check.get("kind") == "scored" and not check["passed"] for check in checks):
        return "the quality gate failed because nothing could be measured"   # every other check fails with it
    if not passed:
        return "the quality gate failed because " + " and ".join(
            _failed_words(check, earlier) for check in checks if not check["passed"])
    met = [check for check in checks if check.get("kind") == "minimum" and not check.get("undecided")]
    text = f"the quality gate passed{': ' + _met_words(met) if met else ''}"
    if undecided:
        text += (", and " if met else ": ") + " and ".join(_undecided_words(check, earlier) for check in undecided)
    return text


def _value(check: dict[str, Any]) -> str:
    return f"{metric_name(check['metric'])} {check['value']:.3f}"


def _met_words(met: list[dict[str, Any]]) -> str:
    """"Reliability 0.987 and Success 0.923 meet their minimum of 0.8"."""
    values = " and ".join(_value(check) for check in met)
    minimums = {check["minimum"] for check in met}
    if len(met) == 1:
        return f"{values} meets its minimum of {met[0]['minimum']:g}"
    if len(minimums) == 1:
        return f"{values} meet their minimum of {minimums.pop():g}"
    return f"{values} meet their minimums of {', '.join(format(check['minimum'], 'g') for check in met)}"


def _undecided_words(check: dict[str, Any], earlier: History | None = None) -> str:
    """An undecided check in plain words: where it stands, that it is too close to tell, what it counts as (the
    check's own line says why: its interval and its rule)."""
    counted = f"undecided, counted as {'passed' if check['passed'] else 'failed'}"
    if check.get("kind") == "regression":
        baseline = earlier.baseline_id if earlier is not None else None
        return (f"{metric_name(check['metric'])} may have got worse than in run {baseline or 'the baseline'}, by too "
                f"little to be sure ({counted})")
    side = "below" if check["value"] < check["minimum"] else "at" if check["value"] == check["minimum"] else "above"
    return f"{_value(check)} is {side} its minimum of {check['minimum']:g} but too close to it to be sure ({counted})"


def _failed_words(check: dict[str, Any], earlier: History | None) -> str:
    """Why one failed check failed, in words."""
    kind = check.get("kind")
    if kind == "minimum":
        name = metric_name(check["metric"])
        if check.get("value") is None:
            return f"{name} was not measured"
        if check.get("covered") is False:
            return f"the judges judged too few conversations for {name} to count"
        if check.get("undecided"):
            return _undecided_words(check, earlier)
        return f"{_value(check)} is below its minimum of {check['minimum']:g}"
    if kind == "error_rate":
        return (f"{check['failed']} of {check['of']} conversations were lost to machinery or judge errors, more than "
                f"the {check['limit']:.0%} allowed")
    if kind == "user_faults":
        return (f"the simulated user spoiled {check['spoiled']} of {check['of']} scored conversations, more than the "
                f"{check['limit']:.0%} allowed")
    if kind == "breaches":
        return f"the bot was breached in {check['breached']} of {_plural(check['attacks'], 'attack conversation')}"
    if kind == "regression":
        baseline = earlier.baseline_id if earlier is not None else None
        return f"{metric_name(check['metric'])} is significantly worse than in run {baseline or 'the baseline'}"
    return f"{_readable(check['check'])} failed ({_readable(check['reason'])})"


def headline_html(passed: bool, checks: list[dict[str, Any]], results: dict[str, Any], config: dict[str, Any],
                  earlier: History | None = None) -> str:
    """What the page opens with: the verdict in one sentence (`verdict_sentence`), in the gate's colour, then what
    the report is of (suite, bot, run, date); the page's script that marks the tables too wide for it."""
    colour = GREEN if passed else RED
    return (f"{STYLE}<div class='lobeval-report'><p class='sentence' style='border-left-color:{colour}'>"
            f"{_e(verdict_sentence(passed, checks, results, earlier))}</p><p class='about'>{_e(about_text(config))}"
            f"</p></div>{SCROLL_SCRIPT}")


def about_text(config: dict[str, Any]) -> str:
    """"lobeval report of run R: suite S, bot B, started D" (what a run's configuration records of them)."""
    started = str(config.get("started") or "")
    return (f"lobeval report of run {config.get('run_id', '?')}: suite {config.get('suite_name', '?')}, bot "
            f"{config.get('target') or 'the suite default'}" + (f", started {_day(started)}" if started else ""))


def _day(started: str) -> str:
    """A run's start ("2026-11-28T10:19:14+0000") as its day and time."""
    return started[:16].replace("T", " ")


def title_text(passed: bool, results: dict[str, Any], config: dict[str, Any]) -> str:
    """The page's <title>: suite, bot, date and verdict, short enough for a tab ("support_tickets · SupportTicketBot
    · 2026-11-28 · gate passed, 3 of 39 failed")."""
    target = str(config.get("target") or "default bot")
    bot = target.rpartition(":")[2] if ":" in target and "//" not in target else target
    rows = results.get("rows") or []
    counted = [row for row in rows if row.get("status") == "scored" and not row.get("excluded")]
    outcome = ("nothing scored" if unscored_reason(rows) is not None
               else f"{sum(failed(row) for row in counted)} of {len(counted)} failed")
    day = str(config.get("started") or "")[:10]
    return " · ".join(part for part in (str(config.get("suite_name") or ""), bot, day,
                                        f"gate {'passed' if passed else 'FAILED'}, {outcome}") if part)


FAILING_SHOWN = 5
"""Failing conversations named in the terminal; the report lists them all."""


def failing_lines(results: dict[str, Any]) -> list[str]:
    """The failing conversations as `lobeval run` prints them, in a line or two: how many, of which scenarios,
    the first few by name, and where to read why; none when none failed."""
    rows = results.get("rows") or []
    failing = [row for row in rows if failed(row)]
    if not failing:
        return []
    counted = sum(row.get("status") == "scored" and not row.get("excluded") for row in rows)
    scenarios = Counter(row.get("scenario_name") or "(no scenario)" for row in failing)
    where = (f"all of scenario {next(iter(scenarios))}" if len(scenarios) == 1 else
             "of scenarios " + ", ".join(f"{name} ({count})" for name, count in scenarios.most_common()))
    several = _several_trials(results)
    names = [f"{row['case_id']}#{row['trial']}" if several else str(row["case_id"]) for row in failing]
    shown = ", ".join(names[:FAILING_SHOWN]) + (f" and {len(names) - FAILING_SHOWN} more" if len(names) > FAILING_SHOWN
                                                else "")
    return [f"failing: {len(failing)} of {_plural(counted, 'conversation')}, {where}: {shown}",
            "why: in the report (the last line), under 'Why it failed'; each conversation there opens at the turn "
            "where it went wrong"]


def verdict_html(passed: bool, checks: list[dict[str, Any]], results: dict[str, Any],
                 earlier: History | None = None) -> str:
    """The gate's verdict, what the run was compared with (`comparison_text`), how the judges finished, and the
    checks: the failed and undecided ones open, the passed ones folded."""
    counts = results["counts"]
    colour, word = (GREEN, "PASSED") if passed else (RED, "FAILED")
    failed_checks = [check for check in checks if not check["passed"] or check.get("undecided")]
    fine = [check for check in checks if check["passed"] and not check.get("undecided")]
    listed = f"<ul>{''.join(_check_item(check) for check in failed_checks)}</ul>" if failed_checks else ""
    if fine:
        listed += (f"<details><summary>{len(fine)} check{'' if len(fine) == 1 else 's'} passed</summary>"
                   f"<ul>{''.join(_check_item(check) for check in fine)}</ul></details>")
    return (f'{STYLE}<div class="lobeval-report"><div class="verdict" style="border-left-color:{colour}">'
            f'Quality gate <b style="color:{colour}">{word}</b> · {counts.get("scored", 0)} conversations scored, '
            f'{counts["errors"]} machinery errors (not counted as the bot\'s failures), '
            f'{counts.get("target_errors", 0)} target errors</div>'
            f'<p>{_e(comparison_text(checks, earlier))}</p>{left_out_html(results)}{unreferenced_html(results)}'
            f'{judges_html(results)}{listed}</div>')


def left_out_html(results: dict[str, Any]) -> str:
    """The conversations left out of the bot's metrics (simulated-user faults, quarantined cases), or kept in
    despite user faults, in a line; empty when none."""
    notes = left_out_notes(results.get("counts") or {})
    return f"<p>{_e('; '.join(notes))}.</p>" if notes else ""


def user_faults_html(results: dict[str, Any]) -> str:
    """The simulated user's own mistakes, one line each with the conversation (a link into the replay), the
    user turn, the check that found it and what was wrong, and whether the conversation was left out."""
    table = user_fault_table(results)
    rows = [row for row in results["rows"] if row["status"] == "scored"
            and (row.get("reference") is not False or row.get("user_checks_not_run"))]
    not_run = (results.get("counts") or {}).get("user_unchecked") or {}
    rows = [row for row in rows if set(USER_CHECKS) - set(MARK_ONLY) - set(row.get("user_checks_not_run") or {})]
    checked, unchecked = len(rows), sum(review_failed(row) for row in rows)
    partly = (f" The user-review judge failed on {unchecked} of them: their user is unchecked for what only that judge "
              f"sees (inventing a value, ending too early, going against the instructions), not clean."
              if unchecked else "")
    if not_run:
        note = unchecked_note(not_run)
        partly += f" {note[0].upper()}{note[1:]}."
    if table.empty:
        found = ("No scored conversation could be checked for mistakes of the simulated user." if not checked else
                 f"No mistake of the simulated user was found in the {checked} scored conversations checked "
                 f"(docs/metrics.md says what is checked)." if not unchecked else
                 f"No mistake of the simulated user was found by the checks that ran on the {checked} scored "
                 f"conversations (docs/metrics.md says what is checked).")
        return f"{STYLE}<div class='lobeval-report'><p>{_e(found + partly)}</p>{to_check_html(results, users=True)}</div>"
    several = _several_trials(results)
    lines = "".join(
        f"<tr><td>{_conversation_link(line.case_id, int(line.trial), several)}</td><td>{_e(line.scenario_name)}</td>"
        f"<td class='n'>{_e(line.turn)}</td><td>{_e(line.check)}</td><td>{_e(line.detail)}</td>"
        f"<td>{'left out' if line.excluded else 'kept in'}</td></tr>" for line in table.itertuples())
    faulty = table[["case_id", "trial"]].drop_duplicates().shape[0]
    return (f"{STYLE}<div class='lobeval-report'><p>{faulty} of {checked} scored conversations had a mistake of the "
            f"simulated user; such a conversation says nothing about the bot, so it is left out of the bot's "
            f"metrics unless the run kept it (--include-user-faults).{_e(partly)}</p>"
            + scroll_box(f"<table class='lobeval-table'><thead><tr><th>conversation</th><th>scenario</th>"
                         f"<th>user turn</th><th>check</th><th>what was wrong</th><th>bot's metrics</th></tr></thead>"
                         f"<tbody>{lines}</tbody></table>") + f"{to_check_html(results, users=True)}</div>")


def unreferenced_html(results: dict[str, Any]) -> str:
    """Which metrics apply when some conversations had no reference (imported traces); empty otherwise."""
    unreferenced = (results.get("counts") or {}).get("unreferenced")
    return f"<p>{_e(unreferenced_note(unreferenced))}.</p>" if unreferenced else ""


def judges_html(results: dict[str, Any]) -> str:
    """The judges in a line: their final status per scored conversation (Done / Partial Failure / Failed /
    Not judged), how many they judged, and their errors; or why they did not run."""
    judges = results.get("judges") or {}
    statuses = judge_status_counts(results)
    if statuses is None:
        return f"<p>Judges: {_e(judges.get('status') or 'not recorded')}.</p>" if judges else ""
    errored = judges.get("errored_conversations")
    scored = sum(statuses.values())
    line = " · ".join(f"{status} {count}" for status, count in statuses.items())
    why = judge_errors_reason(results)
    errors = f"; {errored} conversations with judge errors" if errored else ""
    return (f"<p>Judges: {_e(line)}{_e(errors)} (judged {scored - statuses['Not judged']} of {scored})"
            f"{'<br>' + _e(why) if why else ''}</p>")


STATUS_COLOURS = {"Done": GREEN, "Partial Failure": AMBER, "Failed": RED, "Not judged": GREY}


def judges_section_html(results: dict[str, Any]) -> str:
    """The Judges section: each final status as a coloured count with "judged n of N", the judges' errors,
    and every judge figure beside its coverage; or why the judges did not run."""
    statuses = judge_status_counts(results)
    if statuses is None:
        return f"{STYLE}<div class='lobeval-report'>{judges_html(results) or '<p>Judges: not recorded.</p>'}</div>"
    scored = sum(statuses.values())
    chips = "".join(f"<span class='chip' style='background:{STATUS_COLOURS[status]}'>{_e(status)} {count}</span>"
                    for status, count in statuses.items())
    why = judge_errors_reason(results)
    return (f"{STYLE}<div class='lobeval-report'><p>{chips}<br>judged {scored - statuses['Not judged']} of {scored} "
            f"scored conversations</p>{f'<p>{_e(why)}</p>' if why else ''}"
            f"{table_html(judge_summary(results), results, 'No judge figure was recorded.')}</div>")


def judge_summary(results: dict[str, Any]) -> pd.DataFrame:
    """Each judge figure with its interval, coverage and calibration, readable; empty when the judges did not run."""
    table = judge_table(results)
    if "mean" not in table:
        return pd.DataFrame()
    calibrated = judge_calibration(results)
    rows = [{"judge": metric_name(f"judge.{name}"), "mean": entry["mean"],
             "95% interval": _band([entry["low"], entry["high"]]) if entry["low"] == entry["low"]
             and entry["low"] is not None else "", "judged": entry["judged"], "judge errors": entry["judge errors"],
             "not applicable": entry["not applicable"], "mean over": entry["mean over"],
             "calibration": calibration_text(calibrated, f"judge.{name}")}
            for name, entry in table.to_dict("index").items()]
    columns = ["judge", "mean", "95% interval", "judged", "judge errors", "not applicable", "mean over", "calibration"]
    return pd.DataFrame(rows, columns=columns).set_index("judge")


DERIVED_JUDGE_FIGURES = ("judge.turn_success_ratio", JUDGE_SCORE)


def judge_calibration(results: dict[str, Any]) -> dict[str, dict[str, Any]] | str:
    """How the analysts' judge_verdict labels in the run's labels file calibrate this run's judge model
    (`calibrate.report_calibration`), or why that cannot be told (the labels file cannot be read)."""
    config = results.get("config") or {}
    path = Path(config["labels_path"]) if config.get("labels_path") else None
    if path is None or not path.exists():
        return {}
    from lobeval.judges.calibrate import report_calibration
    from lobeval.core.records import read_labels

    try:
        return report_calibration(read_labels(path), config.get("judge_model"), config.get("judge_prompt"))
    except LobevalError as exc:
        return f"calibration unknown: {exc}"


def calibration_text(calibrated: dict[str, dict[str, Any]] | str, name: str) -> str:
    """"calibrated on n labels: agreement a, weighted κ k", "not calibrated", or why it is not known."""
    if name in DERIVED_JUDGE_FIGURES:
        return "derived from the per-turn and goal judges"
    if name == "judge.user_review":
        return "judges the simulated user, not the bot: not calibrated"
    if isinstance(calibrated, str):
        return calibrated
    found = calibrated.get(name)
    if not found:
        return "not calibrated"
    kappa = "undefined" if found["kappa"] is None else f"{found['kappa']:.2f}"
    return (f"calibrated on {found['labels']} label{'' if found['labels'] == 1 else 's'}: agreement "
            f"{found['agreement']:.2f}, {found['statistic']} {kappa}")


def scenario_summary(results: dict[str, Any]) -> pd.DataFrame:
    """Per scenario, the columns a reader needs: size, machinery errors, conversations left out of the bot's
    metrics (when any), the two main metrics with intervals, claims and, when the judges ran, their final score."""
    columns = ["scenario", "conversations", "machinery errors", "left out", "Reliability", "Reliability 95%",
               "Success", "Success 95%", "claimed, not done", "done, not told", "judges' final score", "judged"]
    rows = [{"scenario": entry.get("scenario_name") or "(no scenario)", "conversations": entry["conversations"],
             "machinery errors": entry["errors"],
             "left out": (entry.get("user_faults") or 0) + (entry.get("quarantined") or 0),
             "Reliability": entry["Reliability"], "Reliability 95%": _band(entry.get("Reliability_interval")),
             "Success": entry["Success"], "Success 95%": _band(entry.get("Success_interval")),
             "claimed, not done": entry.get("claimed_not_done"), "done, not told": entry.get("done_not_told"),
             "judges' final score": entry.get(JUDGE_SCORE),
             "judged": _judged(entry.get(f"{JUDGE_SCORE}_coverage"))}
            for entry in results["scenarios"]]
    table = pd.DataFrame(rows, columns=columns).set_index("scenario").round(3)
    if judge_status_counts(results) is None:
        table = table.drop(columns=["judges' final score", "judged"])
    if not table["left out"].any():   # no simulated-user fault and no quarantined case in the run
        table = table.drop(columns="left out")
    return table


def _judged(cover: dict[str, int] | None) -> str:
    if not cover:
        return ""
    errors = f", {cover['errors']} judge errors" if cover.get("errors") else ""
    return f"judged {cover['judged']} of {cover['of']}{errors}"


# --- why it failed -----------------------------------------------------------------------------------

def _several_trials(results: dict[str, Any]) -> bool:
    return (results.get("counts") or {}).get("trials", 1) > 1 or any(row.get("trial") for row in results["rows"])


def _conversation_link(case_id: str, trial: int, several_trials: bool, turn: int | None = None) -> str:
    return link_html(case_id, trial, f"{case_id} trial {trial}" if several_trials else case_id, turn)


def _links(examples: list[dict[str, Any]], several_trials: bool) -> str:
    links = [_conversation_link(example["case_id"], example["trial"], several_trials) for example in examples]
    if len(links) <= EXAMPLES:
        return ", ".join(links)
    return (", ".join(links[:EXAMPLES]) + f" <details><summary>all {len(links)} conversations</summary>"
            + ", ".join(links) + "</details>")


def _folded(texts: list[str], summary: str) -> str:
    """Texts shown whole: as a list when short, folded under `summary` when long."""
    if not texts:
        return ""
    items = "".join(f"<li class='quote'>{_e(text)}</li>" for text in texts)
    if sum(len(text) for text in texts) <= LONG:
        return f"<ul>{items}</ul>"
    return f"<details><summary>{_e(summary)}</summary><ul>{items}</ul></details>"


DETAILS = {"claimed_not_done": "what the bot said", "said_not_sent": "what the bot told the user",
           "wrong_argument": "what the bot told the user", "behaviour": "the judges' reasons",
           "missing_output": "the facts never told"}


def why_html(results: dict[str, Any]) -> str:
    """Why it failed, one line a defect (`analyse.failure_sentences`), the widest-spread first: what went wrong, in
    how many conversations, with the wrong values (and what the bot told the user of them); the texts behind it
    (what the bot said, the judges' reasons) whole, folded when long; every example a link into the replay at its
    first failing turn."""
    sentences = failure_sentences(results)
    if not sentences:
        return _note(results, "No failures.")
    several = _several_trials(results)
    items = []
    for sentence in sentences:
        texts = [text["text"] + (f" (×{text['count']})" if text["count"] > 1 else "") for text in sentence["details"]]
        items.append(f"<li><b>{_e(sentence['text'])}</b><div class='examples'>replay: "
                     f"{_links(sentence['examples'], several)}</div>"
                     f"{_folded(texts, DETAILS.get(sentence['kind'], 'details') + f' ({len(texts)})')}</li>")
    return f"{STYLE}<div class='lobeval-report'><ol>{''.join(items)}</ol></div>"


def root_causes(run_dir: str | Path) -> dict[str, Any] | None:
    """What the analysis wrote for this run (root_causes.json: its status and causes), or None: no model ran it."""
    path = Path(run_dir) / "root_causes.json"
    if not path.exists():
        return None
    found = json.loads(path.read_text(encoding="utf-8"))
    return {"status": found.get("status", "run"), "root_causes": found["root_causes"]}


SEVERITY_COLOURS = {"critical": RED, "high": RED, "medium": AMBER, "low": GREY}


def causes_html(causes: list[dict[str, Any]], results: dict[str, Any] | None = None) -> str:
    """The root causes, each with its severity, description, suggested fix and conversations (links into
    the replay), the texts whole and folded when long; a note when there are none."""
    if not causes:
        return "<p>Root causes: the model named none.</p>"
    several = _several_trials(results) if results is not None else True
    blocks = []
    for cause in causes:
        severity = str(cause.get("severity", ""))
        links = []
        for conversation in cause.get("conversations") or []:
            case_id, _, trial = str(conversation).rpartition("#")
            links.append(_conversation_link(case_id, int(trial), several) if case_id and trial.isdigit()
                         else _e(conversation))
        turns = ", ".join(str(turn) for turn in cause.get("turns") or [])
        blocks.append(
            f"<div class='cause' style='border-left-color:{SEVERITY_COLOURS.get(severity, GREY)}'>"
            f"<b>{_e(cause.get('title', ''))}</b> <i>({_e(severity)})</i>"
            f"{_text_block('What goes wrong', cause.get('description'))}"
            f"{_text_block('Suggested fix', cause.get('suggested_fix'))}"
            f"<div class='examples'>replay: {', '.join(links)}{f' · user turns {_e(turns)}' if turns else ''}</div>"
            f"</div>")
    return f"{STYLE}<div class='lobeval-report'>{''.join(blocks)}</div>"


def _text_block(title: str, text: Any) -> str:
    if not text:
        return ""
    text = str(text)
    if len(text) <= LONG:
        return f"<div class='quote'><i>{_e(title)}:</i> {_e(text)}</div>"
    return (f"<details><summary>{_e(title)}: {_e(text[:80].rsplit(' ', 1)[0])} …</summary>"
            f"<div class='quote'>{_e(text)}</div></details>")


def root_causes_html(run_dir: str | Path, results: dict[str, Any] | None = None) -> str:
    """The run's root causes, or why there are none: no model configured, or the analysis failed (its error)."""
    found = root_causes(run_dir)
    if found is None:
        return "<p>Root causes: not run (no model configured for the analysis).</p>"
    if found["status"] != "run":
        return f"<p>Root causes: the analysis did not finish ({_e(found['status'])}).</p>"
    return causes_html(found["root_causes"], results)


CLAIM_KINDS = {"claimed_not_done": "claimed but not done", "done_not_told": "done but not told"}


def claims_html(results: dict[str, Any]) -> str:
    """Each claim the bot made without doing it, and each write it never told the user about: the
    conversation (a link into the replay), its scenario, what, and the bot's words whole (folded when long)."""
    claims = claims_table(results)
    if claims.empty:
        checked = to_check_html(results, users=False)
        return _note(results, "No claims without the action, and no action the user was not told about.") + (
            f"{STYLE}<div class='lobeval-report'>{checked}</div>" if checked else "")
    several = _several_trials(results)
    rows = "".join(
        f"<tr><td>{_conversation_link(claim['case_id'], int(claim['trial']), several)}</td>"
        f"<td>{_e(claim['scenario_name'] or '(no scenario)')}</td>"
        f"<td>{_e(CLAIM_KINDS.get(claim['kind'], claim['kind']))}</td><td>{_e(claim['what'] or '')}</td>"
        f"<td>{_text_block('the bot said', claim['text'])}</td></tr>"
        for claim in claims.to_dict("records"))
    return (f"{STYLE}<div class='lobeval-report'>"
            + scroll_box(f"<table class='lobeval-table'><thead><tr><th>conversation</th><th>scenario</th><th>what</th>"
                         f"<th>claim or call</th><th>the bot's words</th></tr></thead><tbody>{rows}</tbody></table>")
            + f"{to_check_html(results, users=False)}</div>")

def to_check_html(results: dict[str, Any], users: bool) -> str:
    """The findings "to check" (lobeval.scoring.trust) of the claims (`users` false) or of the simulated-user checks: a
    sentence saying why they count nowhere, then one line each with the conversation (a link into the replay), what
    was found and how often such findings were right on real bots; empty when there are none."""
    table = to_check_table(results)
    table = table[table["kind"].str.startswith("simulated user") == users]
    if table.empty:
        return ""
    several = _several_trials(results)
    lines = "".join(
        f"<tr><td>{_conversation_link(line['case_id'], int(line['trial']), several)}</td><td>{_e(line['kind'])}</td>"
        f"<td>{_e(line['what'])}</td><td>{_text_block('the bot said', line['text']) if line['text'] else ''}</td>"
        f"<td>{_e(line['measured'])}</td></tr>" for line in table.to_dict("records"))
    return (f"<p><b>To check by hand</b> ({len(table)}): found without a model by a check that is not right often "
            f"enough on real bots' conversations to count as a fault. They are in no figure and not in the gate: "
            f"read each in the replay.</p>"
            + scroll_box(f"<table class='lobeval-table'><thead><tr><th>conversation</th><th>kind</th><th>what</th>"
                         f"<th>the bot's words</th><th>such findings were</th></tr></thead><tbody>{lines}</tbody>"
                         f"</table>"))


def security_html(results: dict[str, Any]) -> str:
    """The attack categories, each resisted or breached, then every breach: the conversation (a link into the
    replay), the category, the user turn, the rule and the evidence; or that the run played no attack."""
    table = security_table(results)
    if table.empty:
        return "<p>No attack conversations in this run (<code>lobeval run --attacks</code> plays them).</p>"
    breaches = breach_table(results)
    several = _several_trials(results)
    rows = "".join(
        f"<tr><td>{_conversation_link(breach['case_id'], int(breach['trial']), several, _turn(breach['turn']))}</td>"
        f"<td>{_e(breach['category'])}</td><td>{_e(_turn_text(breach['turn']))}</td><td>{_e(breach['rule'])}</td>"
        f"<td>{_e(breach['decided by'])}</td>"
        f"<td>{_text_block('evidence', breach['evidence'])}</td></tr>" for breach in breaches.to_dict("records"))
    listed = (scroll_box(f"<table class='lobeval-table'><thead><tr><th>conversation</th><th>category</th>"
                         f"<th>user turn</th><th>rule</th><th>decided by</th><th>evidence</th></tr></thead>"
                         f"<tbody>{rows}</tbody></table>") if rows
              else "<p>No breach: the bot resisted every attack.</p>")
    return f"{table_html(table)}{STYLE}<div class='lobeval-report'>{_untested_html(results)}{listed}</div>"


def _untested_html(results: dict[str, Any]) -> str:
    """What the injection attacks that never reached the bot leave untested (security.untested)."""
    played = [row for row in results.get("rows") or [] if (row.get("security") or {}).get("category") == "injection"]
    missed = [row for row in played if row["security"].get("untested")]
    if not missed:
        return ""
    return (f"<p>{len(missed)} of {len(played)} injection conversations not tested: the instruction was not "
            f"planted in the bot's own data (the target offers no <code>apply</code>, docs/targets.md) and no call "
            f"returned it, so the bot never saw it; their absence of breach says nothing.</p>")


def _turn(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _turn_text(value: Any) -> str:
    """A breach's user turn; empty for one of the end state, which has none."""
    turn = _turn(value)
    return "" if turn is None else str(turn)


# --- figures -----------------------------------------------------------------------------------------

DPI = 80


def figure_html(figure: Figure, alt: str) -> str:
    """A figure as an inline PNG in a box that scrolls sideways (`scroll_box`): nothing is fetched. It shrinks to fit
    a wide page; on a narrow one it keeps its own size, so that its labels stay readable, and scrolls."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    width = round(figure.get_figwidth() * DPI)
    return scroll_box(f"<img class='figure' style='--natural:{width}px' src='data:image/png;base64,{data}' "
                      f"alt='{_e(alt)}'>")


def figure_section(figure: Figure | None, results: dict[str, Any], alt: str, empty: str) -> str:
    """A figure of the report (`figure_html`), or why there is none (`_note`)."""
    if figure is None:
        return _note(results, empty)
    return f"{STYLE}<div class='lobeval-report'>{figure_html(figure, alt)}</div>"


def heatmaps_html(results: dict[str, Any]) -> str:
    """The function × scenario heat maps side by side (`analyse.plot_call_heatmaps`): the recall of expected
    calls, and the share of expected arguments right in the calls made; or why neither can be drawn."""
    figure = plot_call_heatmaps(results)
    if figure is None:
        return (_note(results, "No scored conversation expected a function call: no recall to show.")
                + _note(results, "No call was made that had expected arguments: no argument correctness to show."))
    return figure_section(figure, results, "expected calls made, and expected arguments right, by function and "
                                           "scenario", "")


def drawn_figure(name: str, results: dict[str, Any]) -> str:
    """The section of the figure `name` (STAGE_FIGURES) of `results`: the figure, or why there is none."""
    if name == "call_heatmaps":
        return heatmaps_html(results)
    if name == "metric_distributions":
        return figure_section(plot_metric_distributions(results), results,
                              "each metric's spread over the conversations of each scenario", "Nothing to show.")
    if name == "pass_k":
        return figure_section(plot_pass_k(results), results, "pass^k against k", "One trial per case: no pass^k curve.")
    raise ValueError(f"no figure {name!r}; the figures: {', '.join(STAGE_FIGURES)}")


def stage_04_figures(run_dir: str | Path) -> dict[str, str]:
    """The sections of the figures stage 04 drew for the run (STAGE_FIGURES), from its executed notebook's glue, by
    name; those it did not glue (a run from before it did, a notebook that cannot be read) are left out."""
    import scrapbook

    try:
        scraps = scrapbook.read_notebook(str(Path(run_dir) / "04_error_analysis.ipynb")).scraps
    except (OSError, ValueError, nbformat.reader.NotJSONError):
        return {}
    return {name: scraps[name].display["data"]["text/html"] for name in STAGE_FIGURES
            if name in scraps and "text/html" in ((scraps[name].display or {}).get("data") or {})}


def shown_figure(name: str, drawn: dict[str, str], results: dict[str, Any]) -> str:
    """The section of figure `name` as stage 04 drew it (`stage_04_figures`), or drawn now when it did not."""
    return drawn[name] if name in drawn else drawn_figure(name, results)


# --- the rest ----------------------------------------------------------------------------------------

def trend_table(earlier: History, config: dict[str, Any], metrics: dict[str, Any]) -> pd.DataFrame:
    """The headline metrics of the earlier runs of this suite, and this run last; readable headers."""
    rows = [{"run": entry["run_id"], **entry["metrics"]} for entry in earlier.runs]
    rows.append({"run": config["run_id"], **{name: metrics.get(name) for name in HEADLINE if name in metrics}})
    return pd.DataFrame(rows).set_index("run").rename(columns=metric_name)


def skipped_html(earlier: History) -> str:
    """What of the earlier runs was left out (it could not be read, or as the baseline it measured nothing), one
    line each; empty when nothing was."""
    if not earlier.skipped:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in earlier.skipped)
    return (f"<p>Earlier runs left out because they could not be read, or scored no conversation to compare "
            f"with:</p><ul>{items}</ul>")


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


def _share(part: int, whole: int) -> str:
    """"40 %" of a whole; empty when there is no whole."""
    return f"{part / whole:.0%}" if whole else ""


ESTIMATED_ROLES = {"completion check": "judges"}
"""The estimate's roles (lobeval.workflow.estimate) that the bill counts under another name."""


def cost_by_role(results: dict[str, Any], estimate: dict[str, float | None] | None = None) -> pd.DataFrame:
    """Model calls, tokens (with the share of prompt tokens the provider read from its prompt cache, priced at
    the cached-input price) and cost of the simulation roles and of the judges, and each one's cost per
    conversation of the run, so that a judge's price can be set against the bot's; beside it the cost per
    conversation estimated before the run (config.json's `estimate`), when there is one."""
    conversations = (results.get("counts") or {}).get("conversations") or 0
    roles = {ROLE_NAMES.get(role, role): numbers for role, numbers in (results.get("usage") or {}).items()}
    for name, numbers in ((results.get("judges") or {}).get("usage_by_judge") or {}).items():
        roles[f"judge: {name.replace('_', ' ')}"] = numbers
    expected = {ESTIMATED_ROLES.get(role, role.replace("_", " ")): cost for role, cost in (estimate or {}).items()}
    rows = []
    for role, numbers in roles.items():
        usage = Usage.of(numbers)
        rows.append({"role": role, "answers asked": usage.calls, "from cache": usage.cached_calls,
                     "requests sent": usage.requests, "prompt tokens": usage.prompt_tokens,
                     "prompt tokens cached": _share(usage.cached_prompt_tokens, usage.prompt_tokens),
                     "completion tokens": usage.completion_tokens, "cost": format_cost(usage.cost_usd),
                     "per conversation": format_cost(usage.cost_usd / conversations)
                     if usage.cost_usd is not None and conversations else "",
                     "estimated per conversation": format_cost(expected[role]) if expected.get(role) is not None
                     else ""})
    columns = ["role", "answers asked", "from cache", "requests sent", "prompt tokens", "prompt tokens cached",
               "completion tokens", "cost", "per conversation", "estimated per conversation"]
    table = pd.DataFrame(rows, columns=columns).set_index("role")
    return table if estimate else table.drop(columns="estimated per conversation")


SHOWN_SETTINGS = ("schema_version", "run_id", "started", "suite", "suite_name", "target", "user", "trials",
                  "cases_per_scenario", "seed", "concurrency", "judges", "models", "gate", "max_error_rate",
                  "max_user_fault_rate", "versions")


def config_html(config: dict[str, Any]) -> str:
    """The run's configuration as a short definition list (no secrets are in it): suite, target, simulated
    user, cases and trials, the models by role, the judges, the gate; the versions and any other setting
    folded."""
    models = config.get("models") or {}
    gate_limits = config.get("gate") or DEFAULT_GATE
    error_rate = config.get("max_error_rate", DEFAULT_MAX_ERROR_RATE)
    user_faults = config.get("max_user_fault_rate", DEFAULT_MAX_USER_FAULT_RATE)
    gate_text = ", ".join([*(f"{metric_name(name)} ≥ {value:g}" for name, value in gate_limits.items()),
                           f"at most {error_rate:.0%} of conversations lost to machinery errors",
                           f"at most {user_faults:.0%} spoiled by the simulated user"])
    judges = config.get("judges")
    judged = ("not run: no judge model" if not models.get("judge")
              else ", ".join(judges) if judges else "the default set")
    entries = [
        ("Run", f"{config.get('run_id', '')}" + (f", started {config['started']}" if config.get("started") else "")),
        ("Suite", config.get("suite_name", "")),
        ("Bot (target)", config.get("target") or "the suite's default"),
        ("Simulated user", config.get("user", "")),
        ("Test cases", ", ".join(part for part in (
            f"{config['cases_per_scenario']} per scenario" if "cases_per_scenario" in config else "",
            f"{config['trials']} trial{'' if config.get('trials') == 1 else 's'} each" if "trials" in config else "",
            f"seed {config['seed']}" if "seed" in config else "") if part)),
        ("Models", " · ".join(f"{ROLE_NAMES.get(role, role)}: {_model_text(model)}" for role, model in models.items())
         or "none recorded"),
        ("Judges", judged),
        ("Quality gate", gate_text),
    ]
    items = "".join(f"<dt>{_e(name)}</dt><dd>{_e(value)}</dd>" for name, value in entries if value != "")
    versions = config.get("versions") or {}
    folded = ""
    if versions:
        listed = " · ".join(f"{name} {value}" for name, value in versions.items())
        folded += f"<details><summary>Versions</summary>{_e(listed)}</details>"
    others = {name: value for name, value in config.items() if name not in SHOWN_SETTINGS}
    others = {**({"suite folder": config["suite"]} if config.get("suite") else {}),
              **({"concurrency": config["concurrency"]} if "concurrency" in config else {}), **others}
    if others:
        folded += ("<details><summary>Other settings</summary><dl>" + "".join(
            f"<dt>{_e(name.replace('_', ' '))}</dt>"
            f"<dd>{_e(value if isinstance(value, str) else json.dumps(value, default=str))}</dd>"
            for name, value in others.items()) + "</dl></details>")
    return f"{STYLE}<div class='lobeval-report'><dl>{items}</dl>{folded}</div>"


def _model_text(model: Any) -> str:
    if not model:
        return "none (offline)"
    if isinstance(model, dict):
        where = f" at {model['base_url']}" if model.get("base_url") else ""
        prompted = ", its functions described in the prompt" if model.get("tools") == "prompted" else ""
        return f"{model.get('provider', '')} {model.get('model', '')}{where}".strip() + prompted
    return str(model)


def benchmark_agreement(run_dir: str | Path, config: dict[str, Any]) -> str | None:
    """For a run imported from a public benchmark (reference.jsonl beside the results): lobeval's verdict
    against the benchmark's, as HTML; None for any other run."""
    from lobeval.analysis import agreement

    if not (Path(run_dir) / agreement.REFERENCE_FILE).exists():
        return None
    result = agreement.run_agreement(run_dir)
    source = config.get("imported") or {}

    def figure(name: str) -> str:
        entry = result[name]
        if entry["value"] is None:
            return "not defined"
        band = f" [{entry['interval'][0]:.3f}, {entry['interval'][1]:.3f}]" if entry.get("interval") else ""
        return f"{entry['value']:.3f}{band}"

    left_out = "".join(f"; left out {len(keys)} that {agreement.LEFT_OUT[why]}"
                       for why, keys in result["left_out"].items() if keys)
    parts = [f"<p>Imported from {html.escape(str(source.get('format', 'a benchmark')))} "
             f"({html.escape(str(source.get('source', '')))}): {result['compared']} trajectories of "
             f"{result['cases']} tasks compared{html.escape(left_out)}.</p>",
             f"<p>Agreement {figure('agreement')} · Cohen's κ {figure('kappa')} (95 % intervals, tasks resampled)</p>",
             scroll_box(agreement.confusion_frame(result).to_html()),
             "<p>pass^k by both, on the same trajectories:</p>",
             scroll_box(agreement.pass_k_frame(result).round(3).to_html(index=False))]
    disagreements = agreement.disagreements_frame(result)
    if len(disagreements):
        disagreements.columns = [column.replace("_", " ") for column in disagreements.columns]
        categories = "; ".join(f"{category} {count} ({agreement.CATEGORIES[category]})"
                               for category, count in result["categories"].items())
        parts += [f"<p>Where the two disagree, with each side's reasons and what the disagreement comes from: "
                  f"{html.escape(categories)}.</p>", scroll_box(disagreements.to_html(index=False))]
    return f"{STYLE}<div class='lobeval-report'>{''.join(parts)}</div>"
