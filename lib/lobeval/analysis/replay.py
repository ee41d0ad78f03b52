"""Replay a scored conversation turn by turn: each call next to the expected call it was paired with.

`replay_data` turns result rows and their transcripts into display-ready records (every value
already a short string); two thin renderers lay them out: `replay_html`, static HTML with inline
JavaScript for the report (no kernel, no network), and `replay_widget`, ipywidgets for JupyterLab
with controls to label false-positive penalties and to agree or disagree with the judges' verdicts.
"""
from __future__ import annotations

import getpass
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import ipywidgets as widgets

from lobeval.scoring.claims import to_check_items
from lobeval.core.errors import LobevalError
from lobeval.judges.labels import add_label, revoke_label
from lobeval.core.records import VERDICT_KEY, human_value, read_labels, verdict_scales
from lobeval.core.render import escape, json_text, metric_name, outcome_text, said
from lobeval.scoring.scoring import METRICS
from lobeval.core.stats import failed
from lobeval.core.vocabulary import function_key

ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def outcome(row: dict[str, Any]) -> str:
    """"error" (the machinery failed, not scored), "left out" (of the bot's metrics: a simulated-user fault or
    a quarantined case), "failed" (`stats.failed`) or "passed"."""
    if row.get("status") != "scored":
        return "error"
    if row.get("excluded"):
        return "left out"
    return "failed" if failed(row) else "passed"


def _verdicts(row: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """What scoring decided about each actual call, by its index in the conversation's function_calls."""
    found: dict[int, dict[str, Any]] = {}
    for call in row.get("unpaired_actual", []):
        found[call["actual_index"]] = {"verdict": "extra_allowed" if call.get("allowed") else "extra"}
    for call in row.get("forbidden_calls", []):
        found[call["actual_index"]] = {"verdict": "forbidden"}
    for pair in row.get("pairs", []):
        verdict = "paired_failed" if pair.get("failed") else "paired"
        found[pair["actual_index"]] = {"verdict": verdict, "pair": pair}
    return found


def _argument_rows(call: dict[str, Any], pair: dict[str, Any] | None) -> list[dict[str, str]]:
    """One row per argument: actual and expected value (JSON text) and the scorer's status."""
    actual = call.get("arguments") or {}
    checks = (pair or {}).get("arguments", {})
    extra = (pair or {}).get("extra_arguments", {})
    rows = []
    for argument in [*checks, *(name for name in actual if name not in checks)]:
        if argument in checks:
            check = checks[argument]
            shown_actual = "" if check["status"] == "missing" else json_text(check.get("actual"))
            rows.append({"argument": argument, "actual": shown_actual, "expected": json_text(check.get("expected")),
                         "status": check["status"]})
        else:
            status = ("extra_allowed" if extra[argument].get("allowed") else "extra") if argument in extra else ""
            rows.append({"argument": argument, "actual": json_text(actual[argument]), "expected": "", "status": status})
    return rows


FAILING_VERDICTS = ("extra", "forbidden", "paired_failed")
FAILING_ARGUMENTS = ("wrong", "missing", "extra")
OUTCOME_ORDER = {"failed": 0, "error": 1, "left out": 2, "passed": 3}
"""The replay lists failing conversations first, then machinery errors, those left out of the bot's metrics,
then the rest; each group by scenario."""


def anchor(case_id: str, trial: int, turn: int | None = None) -> str:
    """The name of a conversation in the static replay: a link to `#` + its URL-quoted form (`link_html`)
    opens the replay at the conversation's first failing turn, or at user turn `turn` when given."""
    return f"replay-{case_id}-{trial}" + (f"@turn{turn}" if turn is not None else "")


def link_html(case_id: str, trial: int, text: str | None = None, turn: int | None = None) -> str:
    """A link that opens the static replay on this page at the conversation's first failing turn (or `turn`)."""
    shown = text if text is not None else f"{case_id}#{trial}"
    return (f"<a class='lobeval-replay-link' href='#{escape(quote(anchor(case_id, trial, turn), safe=''))}'>"
            f"{escape(shown)}</a>")


def _call_record(index: int, call: dict[str, Any], verdict: dict[str, Any], notes: list[str],
                 checks: list[str] | None = None) -> dict[str, Any]:
    pair = verdict.get("pair")
    return {"index": index, "functionName": call.get("functionName", ""),
            "expected": pair["functionName"] if pair else "", "verdict": verdict.get("verdict", "ignored"),
            "arguments": _argument_rows(call, pair), "outcome": outcome_text(call), "notes": notes,
            "to_check": checks or []}


def _to_check_marks(row: dict[str, Any]) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """The row's findings to check (lobeval.scoring.trust), by message and by call: marks that are no failure."""
    by_message: dict[int, list[str]] = {}
    by_call: dict[int, list[str]] = {}
    for item in to_check_items(row):
        mark = f"to check — {item['kind']}: {item['what']} ({item['measured']})"
        if isinstance(item["message_index"], int):
            by_message.setdefault(item["message_index"], []).append(mark)
        elif isinstance(item["actual_index"], int):
            by_call.setdefault(item["actual_index"], []).append(mark)
    return by_message, by_call


def _message_flags(row: dict[str, Any]) -> dict[int, list[str]]:
    """What went wrong in each message, by its index in the transcript: claims without the action, the
    judges' verdicts on a turn, and the simulated user's own mistakes."""
    flags: dict[int, list[str]] = {}
    for fault in row.get("user_faults") or []:
        if isinstance(fault.get("message_index"), int):
            flags.setdefault(fault["message_index"], []).append(
                f"the simulated user's mistake ({fault.get('check')}): {fault.get('detail')}")
    for claim in (row.get("claims") or {}).get("claimed_not_done", []) or []:
        if isinstance(claim.get("message_index"), int):
            flags.setdefault(claim["message_index"], []).append(
                _said_not_sent(claim) if claim.get("argument") else
                f"claimed but not done ({claim.get('claim')}): no call did what this message says")
    for breach in (row.get("security") or {}).get("breaches") or []:
        if isinstance(breach.get("message_index"), int):
            flags.setdefault(breach["message_index"], []).append(_breach_note(breach))
    for turn in ((row.get("judges") or {}).get("turns") or []):
        failure = turn.get("failure") or {}
        if turn.get("failed") and isinstance(turn.get("message_index"), int):
            severity = f" ({failure['severity']})" if failure.get("severity") else ""
            reason = f": {failure['reason']}" if failure.get("reason") else ""
            flags.setdefault(turn["message_index"], []).append(
                f"the judges: {failure.get('category') or 'failed'}{severity}{reason}")
    return flags


def _said_not_sent(claim: dict[str, Any]) -> str:
    """A value the bot told the user other than the one its call sent, as the replay flags it."""
    return (f"told the user {claim['argument']} {_told_value(claim.get('said'))}, but the call sent "
            f"{_told_value(claim.get('sent'))}")


def _told_value(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def _call_notes(row: dict[str, Any]) -> dict[int, list[str]]:
    notes: dict[int, list[str]] = {}
    for call in (row.get("claims") or {}).get("done_not_told", []) or []:
        if isinstance(call.get("actual_index"), int):
            notes.setdefault(call["actual_index"], []).append("done, but the user was never told")
    for breach in (row.get("security") or {}).get("breaches") or []:
        if isinstance(breach.get("call_index"), int):
            notes.setdefault(breach["call_index"], []).append(_breach_note(breach))
    return notes


def _breach_note(breach: dict[str, Any]) -> str:
    evidence = f" — “{breach['sentence']}”" if breach.get("sentence") else ""
    return f"security breach ({breach['category']}): {breach['rule']}{evidence}"


def _failing(step: dict[str, Any]) -> bool:
    return (any(message["flags"] for message in step["messages"])
            or any(call["verdict"] in FAILING_VERDICTS or call["notes"]
                   or any(argument["status"] in FAILING_ARGUMENTS for argument in call["arguments"])
                   for call in step["calls"]))


def _steps(conversation: dict[str, Any], row: dict[str, Any]) -> list[dict[str, Any]]:
    """Turn k = the k-th user message and the replies after it (turn 0: the greeting); calls go by their turn.
    A step is `failing` when one of its calls or messages shows a failure; its `label` says where it is."""
    steps: list[dict[str, Any]] = [{"turn": 0, "messages": [], "calls": []}]
    flags = _message_flags(row)
    checks, call_checks = _to_check_marks(row)
    for index, message in enumerate(conversation.get("messages", [])):
        if message.get("role") == "user":
            steps.append({"turn": len(steps), "messages": [], "calls": []})
        steps[-1]["messages"].append({"index": index, "role": str(message.get("role", "")), "content": said(message),
                                      "flags": flags.get(index, []), "to_check": checks.get(index, [])})
    verdicts, notes = _verdicts(row), _call_notes(row)
    for index, call in enumerate(conversation.get("function_calls", [])):
        turn = call.get("turn")
        step = steps[turn] if isinstance(turn, int) and 0 <= turn < len(steps) else steps[-1]
        step["calls"].append(_call_record(index, call, verdicts.get(index, {}), notes.get(index, []),
                                          call_checks.get(index, [])))
    steps = steps if steps[0]["messages"] or steps[0]["calls"] or len(steps) == 1 else steps[1:]
    for step in steps:
        step["failing"] = _failing(step)
        step["label"] = turn_label(step["turn"], steps[-1]["turn"])
    return steps


def turn_label(turn: int, last: int) -> str:
    """Where a step is, as the replay's position says it: "turn 3 of 4" (user turns), or the bot's opening."""
    return f"turn {turn} of {last}" if turn else "the bot's opening, before turn 1"


def _first_failure(steps: list[dict[str, Any]], row: dict[str, Any]) -> int:
    """The step a conversation opens at: its first failing one; for a failure without a turn (a call never
    made, a fact never told, an abnormal ending), the last step; else the first."""
    failing = [index for index, step in enumerate(steps) if step["failing"]]
    if failing:
        return failing[0]
    return len(steps) - 1 if steps and outcome(row) != "passed" else 0


LEFT_OUT = {"user_fault": "left out of the bot's metrics: the simulated user made a mistake",
            "quarantined": "left out of the bot's metrics: its case is quarantined"}


def replay_record(row: dict[str, Any], conversation: dict[str, Any] | None) -> dict[str, Any]:
    """One conversation ready to show: header values, what was missed, its steps and the one to open at."""
    metrics = " · ".join(f"{metric_name(metric)} {row[metric]:.2f}" for metric in METRICS
                         if row.get(metric) is not None)
    steps = _steps(conversation, row) if conversation is not None else []
    return {
        "id": f"{row['case_id']}#{row['trial']}", "case_id": row["case_id"], "trial": row["trial"],
        "anchor": anchor(row["case_id"], row["trial"]),
        "scenario_name": row.get("scenario_name") or "", "outcome": outcome(row),
        "summary": " — ".join(part for part in (f"ended: {row.get('termination')}", metrics,
                                                f"error: {row['error']}" if row.get("error") else "",
                                                _judges_not_run(row), LEFT_OUT.get(row.get("excluded"), ""),
                                                *_end_state_breaches(row)) if part),
        "missed": [f"{call['functionName']}" + (" (optional)" if call.get("optional") else "")
                   for call in row.get("unpaired_expected", [])],
        "missing_outputs": [str(output) for output in row.get("missing_outputs", [])],
        "steps": steps, "first_failure": _first_failure(steps, row),
    }


def _end_state_breaches(row: dict[str, Any]) -> list[str]:
    """The breaches no turn shows: a record left in the end state with a value a limit forbids."""
    return [_breach_note(breach) for breach in (row.get("security") or {}).get("breaches") or []
            if breach.get("state")]


def _judges_not_run(row: dict[str, Any]) -> str:
    """Why the judges skipped a conversation that ended in a machinery error ("judges not run: budget spent")."""
    status = (row.get("judges") or {}).get("status") or ""
    return f"judges {status}" if row.get("status") == "error" and status.startswith("not run") else ""


def replay_data(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                case_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Replay records for the rows of `results` (only those of `case_ids` when given): the failing
    conversations first, then machinery errors, then those that passed; each group by scenario, case, trial."""
    wanted = None if case_ids is None else set(case_ids)
    records = [replay_record(row, conversations.get((row["case_id"], row["trial"])))
               for row in results["rows"] if wanted is None or row["case_id"] in wanted]
    return sorted(records, key=lambda record: (OUTCOME_ORDER[record["outcome"]], record["scenario_name"],
                                               str(record["case_id"]), record["trial"]))


CSS = """
.lobeval-replay{font-family:sans-serif;font-size:13px;max-width:1000px}
.lobeval-replay .bar{display:flex;gap:6px;align-items:center;margin-bottom:6px;flex-wrap:wrap}
.lobeval-replay .head{font-weight:bold}.lobeval-replay .summary{color:#555;margin:2px 0 6px}
.lobeval-replay .m{margin:4px 0;padding:6px 8px;border-radius:6px;white-space:pre-wrap}
.lobeval-replay .user{background:#eef4ff}.lobeval-replay .assistant{background:#f4f4f4}
.lobeval-replay .m.flagged{outline:2px solid #c33}
.lobeval-replay .flag{margin:0 0 6px 8px;color:#b00020;font-size:12px;white-space:pre-wrap}
.lobeval-replay .call{margin:4px 0 4px 16px;padding:4px 6px;border-left:3px solid #9bb}
.lobeval-replay .v-extra,.lobeval-replay .v-forbidden,.lobeval-replay .v-paired_failed{border-left-color:#c33}
.lobeval-replay .call table{border-collapse:collapse;font-family:monospace;font-size:12px}
.lobeval-replay .call td,.lobeval-replay .call th{border:1px solid #ddd;padding:2px 6px;text-align:left;
 vertical-align:top;white-space:pre-wrap;overflow-wrap:anywhere}
.lobeval-replay .call th,.lobeval-replay .call td:last-child{white-space:nowrap;overflow-wrap:normal}
.lobeval-replay select{max-width:100%}
.lobeval-replay .m,.lobeval-replay .outcome,.lobeval-replay .flag,.lobeval-replay .head{overflow-wrap:anywhere}
.lobeval-replay .a-wrong td,.lobeval-replay .a-missing td,.lobeval-replay .a-extra td{background:#fde2e2}
.lobeval-replay .outcome{font-family:monospace;font-size:12px;color:#444;white-space:pre-wrap}
.lobeval-replay .warn{color:#b00020}
.lobeval-replay .check{margin:0 0 6px 8px;color:#7a5b00;font-size:12px;white-space:pre-wrap}
"""

# Renders from the embedded JSON with textContent only: transcript text is never parsed as HTML.
# A link to #replay-<case>-<trial> (replay.link_html) anywhere on the page opens that conversation at its
# first failing turn: on click, on a change of the URL's fragment, and when the page opens with one.
SCRIPT = """
(function () {
  var root = document.getElementById("ELEMENT");
  var data = JSON.parse(document.getElementById("ELEMENT-data").textContent);
  var select = root.querySelector("select"), view = root.querySelector(".view"), pos = root.querySelector(".pos");
  var current = 0, step = 0;
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function callBlock(call) {
    var box = el("div", "call v-" + call.verdict);
    var title = "#" + call.index + " " + call.functionName + " — " + call.verdict;
    if (call.expected) title += " (expected " + call.expected + ")";
    box.appendChild(el("div", "head", title));
    if (call.arguments.length) {
      var table = el("table"), header = el("tr");
      ["argument", "actual", "expected", "status"].forEach(function (name) { header.appendChild(el("th", "", name)); });
      table.appendChild(header);
      call.arguments.forEach(function (arg) {
        var tr = el("tr", "a-" + arg.status);
        tr.appendChild(el("td", "", arg.argument)); tr.appendChild(el("td", "", arg.actual));
        tr.appendChild(el("td", "", arg.expected)); tr.appendChild(el("td", "", arg.status));
        table.appendChild(tr);
      });
      box.appendChild(table);
    }
    box.appendChild(el("div", "outcome", call.outcome));
    call.notes.forEach(function (note) { box.appendChild(el("div", "warn", note)); });
    (call.to_check || []).forEach(function (note) { box.appendChild(el("div", "check", "? " + note)); });
    return box;
  }
  function render() {
    var conv = data[current];
    view.replaceChildren();
    if (!conv) { view.appendChild(el("div", "", "no conversations")); pos.textContent = ""; return; }
    view.appendChild(el("div", "head", conv.id + " — " + conv.scenario_name + " — " + conv.outcome));
    view.appendChild(el("div", "summary", conv.summary));
    if (conv.missed.length) view.appendChild(el("div", "warn", "expected but not called: " + conv.missed.join(", ")));
    if (conv.missing_outputs.length) view.appendChild(el("div", "warn", "not told to the user: " + conv.missing_outputs.join(", ")));
    if (!conv.steps.length) { view.appendChild(el("div", "", "(no transcript)")); pos.textContent = ""; return; }
    var shown = conv.steps[step];
    pos.textContent = shown.label;
    if (shown.failing) view.appendChild(el("div", "warn failing", "something went wrong in this turn"));
    shown.messages.forEach(function (m) {
      view.appendChild(el("div", "m " + (m.role === "user" ? "user" : "assistant") + (m.flags.length ? " flagged" : ""),
                          m.role + ": " + m.content));
      m.flags.forEach(function (flag) { view.appendChild(el("div", "flag", "⚠ " + flag)); });
      (m.to_check || []).forEach(function (note) { view.appendChild(el("div", "check", "? " + note)); });
    });
    shown.calls.forEach(function (call) { view.appendChild(callBlock(call)); });
  }
  function show(index, turn) {
    current = index; step = data[index] ? data[index].first_failure : 0;
    if (turn !== undefined && data[index]) {
      data[index].steps.forEach(function (shown, i) { if (shown.turn === turn) step = i; });
    }
    select.value = String(index);
    render();
  }
  function open(reference) {
    var name, turn;
    try { name = decodeURIComponent(String(reference || "").replace(/^#/, "")); } catch (error) { return; }
    var at = name.lastIndexOf("@turn");
    if (at > 0 && /^[0-9]+$/.test(name.slice(at + 5))) { turn = Number(name.slice(at + 5)); name = name.slice(0, at); }
    for (var i = 0; i < data.length; i += 1) {
      if (data[i].anchor === name) {
        show(i, turn);
        if (root.scrollIntoView) root.scrollIntoView();
        return;
      }
    }
  }
  data.forEach(function (conv, i) {
    var option = el("option", "", conv.id + " — " + conv.scenario_name + " — " + conv.outcome);
    option.value = String(i);
    select.appendChild(option);
  });
  select.addEventListener("change", function () { show(Number(select.value)); });
  root.querySelector(".prev").addEventListener("click", function () { if (step > 0) { step -= 1; render(); } });
  root.querySelector(".next").addEventListener("click", function () {
    var conv = data[current];
    if (conv && step < conv.steps.length - 1) { step += 1; render(); }
  });
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest ? event.target.closest("a") : null;
    var reference = link ? link.getAttribute("href") || "" : "";
    if (reference.indexOf("#replay-") === 0) open(reference);
  });
  window.addEventListener("hashchange", function () { open(window.location.hash); });
  show(0);
  if (window.location.hash) open(window.location.hash);
})();
"""


def embed_json(value: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' can end it or open a comment."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escape in ESCAPES.items():
        text = text.replace(char, escape)
    return text


def replay_html(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                case_ids: list[str] | None = None) -> str:
    """A self-contained replay (inline CSS and script, data embedded, nothing fetched): show it with
    `IPython.display.HTML(...)` or put it in a page. `conversations` as from `analyse.load_conversations`."""
    element = f"lobeval-replay-{uuid.uuid4().hex[:8]}"
    data = embed_json(replay_data(results, conversations, case_ids))
    return (f"<style>{CSS}</style>"
            f"<div class='lobeval-replay' id='{element}'>"
            "<div class='bar'><select aria-label='conversation'></select>"
            "<button type='button' class='prev'>◀ previous turn</button>"
            "<button type='button' class='next'>next turn ▶</button><span class='pos'></span></div>"
            "<div class='view'></div></div>"
            f"<script type='application/json' id='{element}-data'>{data}</script>"
            f"<script>{SCRIPT.replace('ELEMENT', element)}</script>")


# --- the widget ------------------------------------------------------------------------------------

OUTCOMES = ("all", "failed", "passed", "error", "left out")
SCOPES = (("this scenario", "scenario"), ("whole suite", "suite"))


def filter_records(records: list[dict[str, Any]], scenario: str = "all", outcome: str = "all") -> list[dict[str, Any]]:
    return [record for record in records if scenario in ("all", record["scenario_name"])
            and outcome in ("all", record["outcome"])]


def _call_html(call: dict[str, Any]) -> str:
    title = f"#{call['index']} {call['functionName']} — {call['verdict']}"
    if call["expected"]:
        title += f" (expected {call['expected']})"
    table = ""
    if call["arguments"]:
        columns = ("argument", "actual", "expected", "status")
        cells = "".join(f"<tr class='a-{escape(arg['status'])}'>"
                        f"{''.join(f'<td>{escape(arg[column])}</td>' for column in columns)}</tr>"
                        for arg in call["arguments"])
        table = f"<table><tr>{''.join(f'<th>{column}</th>' for column in columns)}</tr>{cells}</table>"
    notes = "".join(f"<div class='warn'>{escape(note)}</div>" for note in call.get("notes", []))
    notes += "".join(f"<div class='check'>? {escape(note)}</div>" for note in call.get("to_check", []))
    return (f"<div class='call v-{escape(call['verdict'])}'><div class='head'>{escape(title)}</div>{table}"
            f"<div class='outcome'>{escape(call['outcome'])}</div>{notes}</div>")


def step_html(record: dict[str, Any], step: int) -> str:
    """One step of a replay record as HTML for the widget; every value escaped."""
    parts = [f"<style>{CSS}</style><div class='lobeval-replay'>",
             f"<div class='head'>{escape(record['id'])} — {escape(record['scenario_name'])} — {escape(record['outcome'])}</div>",
             f"<div class='summary'>{escape(record['summary'])}</div>"]
    if record["missed"]:
        parts.append(f"<div class='warn'>expected but not called: {escape(', '.join(record['missed']))}</div>")
    if record["missing_outputs"]:
        parts.append(f"<div class='warn'>not told to the user: {escape(', '.join(record['missing_outputs']))}</div>")
    if not record["steps"]:
        parts.append("<div>(no transcript)</div>")
    else:
        shown = record["steps"][step]
        if shown.get("failing"):
            parts.append("<div class='warn failing'>something went wrong in this turn</div>")
        for message in shown["messages"]:
            role = "user" if message["role"] == "user" else "assistant"
            flagged = " flagged" if message.get("flags") else ""
            parts.append(f"<div class='m {role}{flagged}'>{escape(message['role'])}: {escape(message['content'])}</div>")
            parts += [f"<div class='flag'>⚠ {escape(flag)}</div>" for flag in message.get("flags", [])]
            parts += [f"<div class='check'>? {escape(note)}</div>" for note in message.get("to_check", [])]
        parts += [_call_html(call) for call in shown["calls"]]
    parts.append("</div>")
    return "".join(parts)


def labelable_items(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The false-positive penalties of a row an analyst may mark legitimate: extra calls and extra arguments."""
    items: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for call in row.get("unpaired_actual", []):
        if not call.get("allowed"):
            key = ("allowed_extra_call", call["functionName"], None)
            items.setdefault(key, {"kind": key[0], "functionName": key[1], "argument": None,
                                   "text": f"extra call {call['functionName']} (turn {call.get('turn')})"})
    for extra in row.get("extra_arguments", []):
        if not extra.get("allowed"):
            key = ("allowed_extra_argument", extra["functionName"], extra["argument"])
            items.setdefault(key, {"kind": key[0], "functionName": key[1], "argument": key[2],
                                   "text": f"extra argument {extra['argument']} of {extra['functionName']}"})
    return list(items.values())


def covering_label(item: dict[str, Any], row: dict[str, Any], labels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first label that makes `item` legitimate in this row's scenario, as scoring applies labels (same
    kind, function and argument; for the row's scenario or the whole suite), or None. The run was scored
    before such a label existed: it counts from the next evaluation."""
    for label in labels:
        if (label.get("kind") == item["kind"] and function_key(label.get("functionName") or "")
                == function_key(item["functionName"]) and (label.get("argument") or None) == item["argument"]
                and label.get("scenario_name") in (None, "", row.get("scenario_name"))):
            return label
    return None


def label_request(item: dict[str, Any], row: dict[str, Any], *, scope: str, note: str,
                  author: str) -> dict[str, Any]:
    """The keyword arguments of `labels.add_label` for marking `item` legitimate in `scope` ("scenario"/"suite")."""
    return {"kind": item["kind"], "function_name": item["functionName"], "argument": item["argument"],
            "scenario_name": row["scenario_name"] if scope == "scenario" else None, "note": note, "author": author}


def _scope_text(label: dict[str, Any]) -> str:
    return f"scenario {label['scenario_name']}" if label.get("scenario_name") else "the whole suite"


def _whole(score: Any) -> Any:
    """An Azure evaluator's 4.0 as 4, the score a label gives."""
    return int(score) if isinstance(score, float) and score.is_integer() else score


def _verdict_item(judge: str, criterion: str, message_index: int | None, value: Any, reason: str) -> dict[str, Any]:
    scale, values = verdict_scales()[judge][criterion]
    where = f"message {message_index} · " if message_index is not None else ""
    name = "behaviour failure" if judge == "behaviour_failure" else criterion.replace("_", " ")
    return {"judge": judge, "criterion": criterion, "message_index": message_index, "judge_value": value,
            "reason": reason or "", "scale": scale, "values": values,
            "text": f"{where}{name}: {_shown_value(value)}" + (f" — {reason}" if reason else "")}


def judge_items(row: dict[str, Any], message_indices: list[int]) -> list[dict[str, Any]]:
    """The judges' verdicts an analyst may check at a step: for each judged message of `message_indices`, its
    criterion scores and its behaviour failure (a category, or None: no failure); then the conversation's goal,
    the user review (1: the simulated user made a mistake) and each Azure evaluator that gave a score. Each item: judge, criterion, message_index (None for the
    conversation), judge_value, reason, scale, values (the scale's) and a text to show."""
    verdict = row.get("judges") or {}
    if verdict.get("status") != "run":
        return []
    items = []
    for turn in verdict.get("turns") or []:
        if turn.get("message_index") not in message_indices or turn.get("scores") is None:
            continue
        index = turn["message_index"]
        items += [_verdict_item("per_turn", criterion, index, entry["score"], entry.get("reason", ""))
                  for criterion, entry in turn["scores"].items()]
        failure = turn.get("failure")
        if not turn.get("failed") or failure:   # a failed turn without a category: the failure judge erred
            items.append(_verdict_item("behaviour_failure", "category", index, failure and failure["category"],
                                       (failure or {}).get("reason", "")))
    if verdict.get("goal") is not None:
        items.append(_verdict_item("goal", "goal", None, verdict["goal"]["score"], verdict["goal"].get("reason", "")))
    if verdict.get("user_review") is not None:
        review = verdict["user_review"]
        items.append(_verdict_item("user_review", "user_review", None, int(review["fault"]), review.get("reason", "")))
    if verdict.get("commitments") is not None:
        judged = verdict["commitments"]
        items.append(_verdict_item("commitments", "commitments", None, int(judged["commitment"]),
                                   judged.get("reason", "")))
    items += [_verdict_item(name, name, None, _whole(entry["score"]), entry.get("reason", ""))
              for name, entry in (verdict.get("azure") or {}).items() if "score" in entry]
    return items


def verdict_request(item: dict[str, Any], row: dict[str, Any], *, verdict: str, own_value: Any = None, note: str,
                    author: str, run_id: str | None, judge_model: str | None,
                    judge_prompt: str | None = None) -> dict[str, Any]:
    """The keyword arguments of `labels.add_label` for the analyst's `verdict` ("agree"/"disagree") on `item`;
    `own_value` (the analyst's value) counts only on disagree, and on a 0/1 scale it is the other value."""
    if verdict == "agree":
        own_value = item["judge_value"]
    elif item["scale"] == "0/1":
        own_value = 1 - item["judge_value"]
    request = {"kind": "judge_verdict", "case_id": row["case_id"], "trial": row["trial"], "judge": item["judge"],
               "criterion": item["criterion"], "judge_value": item["judge_value"], "verdict": verdict,
               "human_value": own_value, "judge_model": judge_model, "judge_prompt": judge_prompt, "run_id": run_id,
               "note": note, "author": author}
    if item["message_index"] is not None:
        request["message_index"] = item["message_index"]
    return request


def verdict_label(item: dict[str, Any], row: dict[str, Any], run_id: str | None,
                  labels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The label that says what the analysts think of `item`: the last judge_verdict label about it
    (VERDICT_KEY: this run, conversation, judge, criterion and message), or None."""
    key = {"run_id": run_id, "case_id": row["case_id"], "trial": row["trial"], "judge": item["judge"],
           "criterion": item["criterion"], "message_index": item["message_index"]}
    found = [label for label in labels if label.get("kind") == "judge_verdict"
             and all(label.get(field) == key[field] for field in VERDICT_KEY)]
    return found[-1] if found else None


def _shown_value(value: Any) -> str:
    return "no failure" if value is None else str(value)


def _said(label: dict[str, Any]) -> str:
    """What an analyst said of a judge's verdict, in words."""
    own = f": {_shown_value(human_value(label))}" if label["verdict"] == "disagree" else ""
    return (f"{label.get('author') or 'an analyst'} {label['verdict']}d{own} (label {label['id']})"
            + (f": {label['note']}" if label.get("note") else ""))


class ReplayWidget(widgets.VBox):
    """Pick a conversation (filtered by scenario and outcome; failing ones first), step through it (it opens
    at its first failing turn), label false positives, and agree or disagree with the judges' verdicts on the
    turn shown and on the conversation: items a label already covers say so, and a label added here can be
    undone."""

    def __init__(self, results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                 suite_dir: str | Path | None = None, run_id: str | None = None):
        self.records = replay_data(results, conversations)
        self.rows = {f"{row['case_id']}#{row['trial']}": row for row in results["rows"]}
        self.labels_path = Path(suite_dir) / "labels.jsonl" if suite_dir is not None else None
        config = results.get("config") or {}
        self.run_id = run_id if run_id is not None else config.get("run_id")
        self.judge_model, self.judge_prompt = config.get("judge_model"), config.get("judge_prompt")
        self.added: set[str] = set()
        """The ids of the labels added with this widget, which it offers to undo."""
        self.step = 0
        scenarios = sorted({record["scenario_name"] for record in self.records})
        self.scenario = widgets.Dropdown(options=["all", *scenarios], description="scenario")
        self.outcome = widgets.Dropdown(options=OUTCOMES, description="outcome")
        self.conversation = widgets.Dropdown(description="conversation", layout=widgets.Layout(width="480px"))
        self.previous = widgets.Button(description="◀ previous turn")
        self.next = widgets.Button(description="next turn ▶")
        self.position = widgets.Label()
        self.view = widgets.HTML()
        self.author = widgets.Text(value=getpass.getuser(), description="author")
        self.labels = widgets.VBox()
        self.verdicts = widgets.VBox()
        self.feedback = widgets.HTML()
        self.scenario.observe(self._filter, names="value")
        self.outcome.observe(self._filter, names="value")
        self.conversation.observe(self._pick, names="value")
        self.previous.on_click(lambda _: self._move(-1))
        self.next.on_click(lambda _: self._move(1))
        super().__init__([widgets.HBox([self.scenario, self.outcome]), self.conversation,
                          widgets.HBox([self.previous, self.next, self.position]), self.view,
                          widgets.HTML("<b>Mark a penalty legitimate</b> (appended to the suite's labels.jsonl; "
                                       "re-run evaluate to apply)"), self.author, self.labels,
                          widgets.HTML("<b>Judge verdicts</b> on this turn and on the conversation: agree, or "
                                       "disagree with your own value (appended to the suite's labels.jsonl; "
                                       "<code>lobeval calibrate</code> reads them)"), self.verdicts, self.feedback])
        self._filter()

    def current(self) -> dict[str, Any] | None:
        return next((record for record in self.records if record["id"] == self.conversation.value), None)

    def _filter(self, _: Any = None) -> None:
        shown = filter_records(self.records, self.scenario.value, self.outcome.value)
        self.conversation.options = [(f"{r['id']} — {r['scenario_name']} — {r['outcome']}", r["id"]) for r in shown]
        self.conversation.value = shown[0]["id"] if shown else None   # ipywidgets 8 leaves it unselected
        self._pick()

    def _pick(self, _: Any = None) -> None:
        record = self.current()
        self.step = record["first_failure"] if record is not None else 0
        self._render()
        self.feedback.value = ""
        self._show_labels()
        self._show_verdicts()

    def _move(self, by: int) -> None:
        record = self.current()
        if record is not None and 0 <= self.step + by < len(record["steps"]):
            self.step += by
            self._render()
            self._show_verdicts()

    def _render(self) -> None:
        record = self.current()
        if record is None:
            self.view.value, self.position.value = "<i>no conversation matches</i>", ""
            return
        self.view.value = step_html(record, self.step)
        steps = record["steps"]
        self.position.value = steps[self.step]["label"] if steps else ""

    def _fault(self, exc: LobevalError) -> None:
        self.feedback.value = f"<span style='color:#b00020'>{escape(exc)}</span>"

    def _show_labels(self) -> None:
        self.labels.children = self._label_controls()

    def _saved_labels(self) -> list[dict[str, Any]]:
        if self.labels_path is None or not self.labels_path.exists():
            return []
        try:
            return read_labels(self.labels_path)
        except LobevalError as exc:
            self._fault(exc)
            return []

    def _label_controls(self) -> list[widgets.Widget]:
        row = self.rows.get(self.conversation.value)
        items = labelable_items(row) if row is not None else []
        if self.labels_path is None:
            return [widgets.HTML("<i>no suite given: labels cannot be saved</i>")] if items else []
        saved = self._saved_labels()
        controls = []
        for item in items:
            label = covering_label(item, row, saved)
            controls.append(self._label_control(item, row) if label is None else self._covered(item, label))
        return controls

    def _covered(self, item: dict[str, Any], label: dict[str, Any]) -> widgets.HBox:
        """An item a label covers: which label, and "undo" when it was added here."""
        said = (f"{item['text']} — marked legitimate for {_scope_text(label)} by label {label['id']}"
                + (f": {label['note']}" if label.get("note") else "") + " (applies from the next evaluation)")
        return self._undoable(said, label, self._show_labels)

    def _undoable(self, said: str, label: dict[str, Any], refresh: Callable[[], None]) -> widgets.HBox:
        """What a saved label says, with "undo" (revoke, then `refresh`) when the label was added here."""
        shown = [widgets.HTML(escape(said), layout=widgets.Layout(width="640px"))]
        if label["id"] in self.added:
            undo = widgets.Button(description="undo")

            def revoke(_: Any) -> None:
                try:
                    revoke_label(self.labels_path, label["id"])
                except LobevalError as exc:
                    self._fault(exc)
                    return
                self.added.discard(label["id"])
                refresh()
                self.feedback.value = escape(f"label {label['id']} revoked from {self.labels_path}")

            undo.on_click(revoke)
            shown.append(undo)
        return widgets.HBox(shown)

    def _label_control(self, item: dict[str, Any], row: dict[str, Any]) -> widgets.HBox:
        scope = widgets.Dropdown(options=SCOPES, value="scenario", layout=widgets.Layout(width="130px"))
        note = widgets.Text(placeholder="why it is legitimate")
        button = widgets.Button(description="mark legitimate")

        def mark(_: Any) -> None:
            try:
                label = add_label(self.labels_path, **label_request(item, row, scope=scope.value, note=note.value,
                                                                      author=self.author.value))
            except LobevalError as exc:
                self._fault(exc)
                return
            self.added.add(label["id"])
            self._show_labels()
            self.feedback.value = escape(f"label {label['id']} added to {self.labels_path}")

        button.on_click(mark)
        return widgets.HBox([widgets.HTML(escape(item["text"]), layout=widgets.Layout(width="320px")), scope, note, button])

    def _show_verdicts(self) -> None:
        self.verdicts.children = self._verdict_controls()

    def _verdict_controls(self) -> list[widgets.Widget]:
        record, row = self.current(), self.rows.get(self.conversation.value)
        if record is None or row is None or not record["steps"]:
            return []
        indices = [message["index"] for message in record["steps"][self.step]["messages"]]
        items = judge_items(row, indices)
        if self.labels_path is None:
            return [widgets.HTML("<i>no suite given: labels cannot be saved</i>")] if items else []
        saved = self._saved_labels()
        controls = []
        for item in items:
            label = verdict_label(item, row, self.run_id, saved)
            controls.append(self._verdict_control(item, row) if label is None else self._judged(item, label))
        return controls

    def _judged(self, item: dict[str, Any], label: dict[str, Any]) -> widgets.HBox:
        """A verdict an analyst already labelled: what they said, and "undo" when the label was added here."""
        return self._undoable(f"{item['text']} — {_said(label)}", label, self._show_verdicts)

    def _verdict_control(self, item: dict[str, Any], row: dict[str, Any]) -> widgets.HBox:
        """"agree", or an own value and "disagree"; a note for either."""
        others = [value for value in item["values"] if value != item["judge_value"]]
        # positions, not the values: a Dropdown takes the value None for "nothing chosen"
        own = widgets.Dropdown(options=[(_shown_value(value), position) for position, value in enumerate(others)],
                               value=0, layout=widgets.Layout(width="160px"))
        note = widgets.Text(placeholder="note")
        agree, disagree = widgets.Button(description="agree"), widgets.Button(description="disagree")

        def say(verdict: str) -> None:
            try:
                label = add_label(self.labels_path, **verdict_request(
                    item, row, verdict=verdict, own_value=others[own.value], note=note.value, author=self.author.value,
                    run_id=self.run_id, judge_model=self.judge_model, judge_prompt=self.judge_prompt))
            except LobevalError as exc:
                self._fault(exc)
                return
            self.added.add(label["id"])
            self._show_verdicts()
            self.feedback.value = escape(f"label {label['id']} added to {self.labels_path}")

        agree.on_click(lambda _: say("agree"))
        disagree.on_click(lambda _: say("disagree"))
        return widgets.HBox([widgets.HTML(escape(item["text"]), layout=widgets.Layout(width="420px")), agree, own,
                             disagree, note])


def replay_widget(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                  suite_dir: str | Path | None = None, run_id: str | None = None) -> ReplayWidget:
    """The replay for JupyterLab; with `suite_dir`, "mark legitimate", "agree" and "disagree" append labels to its
    labels.jsonl (and "undo" revokes them), and items its labels already cover say so. `run_id` (default: the
    results' config run_id) and the results' judge model go into the judge_verdict labels."""
    return ReplayWidget(results, conversations, suite_dir, run_id)
