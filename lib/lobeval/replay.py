"""Replay a scored conversation turn by turn: each call next to the expected call it was paired with.

`replay_data` turns result rows and their transcripts into display-ready records (every value
already a short string); two thin renderers lay them out: `replay_html`, static HTML with inline
JavaScript for the report (no kernel, no network), and `replay_widget`, ipywidgets for JupyterLab
with controls to label false-positive penalties.
"""
from __future__ import annotations

import getpass
import json
import uuid
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from lobeval.errors import LobevalError
from lobeval.labels import add_label
from lobeval.render import escape, json_text, outcome_text
from lobeval.scoring import METRICS

ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def outcome(row: dict[str, Any]) -> str:
    """"error" (the machinery failed, not scored), "passed" (Success 1) or "failed"."""
    if row.get("status") != "scored":
        return "error"
    return "passed" if row.get("Success") == 1 else "failed"


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


def _call_record(index: int, call: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    pair = verdict.get("pair")
    return {"index": index, "functionName": call.get("functionName", ""),
            "expected": pair["functionName"] if pair else "", "verdict": verdict.get("verdict", "ignored"),
            "arguments": _argument_rows(call, pair), "outcome": outcome_text(call)}


def _steps(conversation: dict[str, Any], row: dict[str, Any]) -> list[dict[str, Any]]:
    """Turn k = the k-th user message and the replies after it (turn 0: the greeting); calls go by their turn."""
    steps: list[dict[str, Any]] = [{"turn": 0, "messages": [], "calls": []}]
    for message in conversation.get("messages", []):
        if message.get("role") == "user":
            steps.append({"turn": len(steps), "messages": [], "calls": []})
        content = message.get("content")
        steps[-1]["messages"].append({"role": str(message.get("role", "")),
                                      "content": content if isinstance(content, str) else json_text(content)})
    verdicts = _verdicts(row)
    for index, call in enumerate(conversation.get("function_calls", [])):
        turn = call.get("turn")
        step = steps[turn] if isinstance(turn, int) and 0 <= turn < len(steps) else steps[-1]
        step["calls"].append(_call_record(index, call, verdicts.get(index, {})))
    return steps if steps[0]["messages"] or steps[0]["calls"] or len(steps) == 1 else steps[1:]


def replay_record(row: dict[str, Any], conversation: dict[str, Any] | None) -> dict[str, Any]:
    """One conversation ready to show: header values, what was missed, and its steps."""
    metrics = " · ".join(f"{metric} {row[metric]:.2f}" for metric in METRICS if row.get(metric) is not None)
    return {
        "id": f"{row['case_id']}#{row['trial']}", "case_id": row["case_id"], "trial": row["trial"],
        "scenario_name": row.get("scenario_name", ""), "outcome": outcome(row),
        "summary": " — ".join(part for part in (f"ended: {row.get('termination')}", metrics,
                                                f"error: {row['error']}" if row.get("error") else "") if part),
        "missed": [f"{call['functionName']}" + (" (optional)" if call.get("optional") else "")
                   for call in row.get("unpaired_expected", [])],
        "missing_outputs": [str(output) for output in row.get("missing_outputs", [])],
        "steps": _steps(conversation, row) if conversation is not None else [],
    }


def replay_data(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                case_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Replay records for the rows of `results` (only those of `case_ids` when given), in row order."""
    wanted = None if case_ids is None else set(case_ids)
    return [replay_record(row, conversations.get((row["case_id"], row["trial"])))
            for row in results["rows"] if wanted is None or row["case_id"] in wanted]


CSS = """
.lobeval-replay{font-family:sans-serif;font-size:13px;max-width:1000px}
.lobeval-replay .bar{display:flex;gap:6px;align-items:center;margin-bottom:6px}
.lobeval-replay .head{font-weight:bold}.lobeval-replay .summary{color:#555;margin:2px 0 6px}
.lobeval-replay .m{margin:4px 0;padding:6px 8px;border-radius:6px;white-space:pre-wrap}
.lobeval-replay .user{background:#eef4ff}.lobeval-replay .assistant{background:#f4f4f4}
.lobeval-replay .call{margin:4px 0 4px 16px;padding:4px 6px;border-left:3px solid #9bb}
.lobeval-replay .v-extra,.lobeval-replay .v-forbidden,.lobeval-replay .v-paired_failed{border-left-color:#c33}
.lobeval-replay .call table{border-collapse:collapse;font-family:monospace;font-size:12px}
.lobeval-replay .call td,.lobeval-replay .call th{border:1px solid #ddd;padding:2px 6px;text-align:left;
 vertical-align:top;white-space:pre-wrap}
.lobeval-replay .a-wrong td,.lobeval-replay .a-missing td,.lobeval-replay .a-extra td{background:#fde2e2}
.lobeval-replay .outcome{font-family:monospace;font-size:12px;color:#444;white-space:pre-wrap}
.lobeval-replay .warn{color:#b00020}
"""

# Renders from the embedded JSON with textContent only: transcript text is never parsed as HTML.
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
    pos.textContent = "turn " + shown.turn + " (" + (step + 1) + " of " + conv.steps.length + ")";
    shown.messages.forEach(function (m) { view.appendChild(el("div", "m " + (m.role === "user" ? "user" : "assistant"), m.role + ": " + m.content)); });
    shown.calls.forEach(function (call) { view.appendChild(callBlock(call)); });
  }
  data.forEach(function (conv, i) {
    var option = el("option", "", conv.id + " — " + conv.scenario_name + " — " + conv.outcome);
    option.value = String(i);
    select.appendChild(option);
  });
  select.addEventListener("change", function () { current = Number(select.value); step = 0; render(); });
  root.querySelector(".prev").addEventListener("click", function () { if (step > 0) { step -= 1; render(); } });
  root.querySelector(".next").addEventListener("click", function () {
    var conv = data[current];
    if (conv && step < conv.steps.length - 1) { step += 1; render(); }
  });
  render();
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

OUTCOMES = ("all", "failed", "passed", "error")
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
    return (f"<div class='call v-{escape(call['verdict'])}'><div class='head'>{escape(title)}</div>{table}"
            f"<div class='outcome'>{escape(call['outcome'])}</div></div>")


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
        for message in shown["messages"]:
            role = "user" if message["role"] == "user" else "assistant"
            parts.append(f"<div class='m {role}'>{escape(message['role'])}: {escape(message['content'])}</div>")
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


def label_request(item: dict[str, Any], row: dict[str, Any], *, scope: str, note: str,
                  author: str) -> dict[str, Any]:
    """The keyword arguments of `labels.add_label` for marking `item` legitimate in `scope` ("scenario"/"suite")."""
    return {"kind": item["kind"], "function_name": item["functionName"], "argument": item["argument"],
            "scenario_name": row["scenario_name"] if scope == "scenario" else None, "note": note, "author": author}


class ReplayWidget(widgets.VBox):
    """Pick a conversation (filtered by scenario and outcome), step through it, label false positives."""

    def __init__(self, results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                 suite_dir: str | Path | None = None):
        self.records = replay_data(results, conversations)
        self.rows = {f"{row['case_id']}#{row['trial']}": row for row in results["rows"]}
        self.labels_path = Path(suite_dir) / "labels.jsonl" if suite_dir is not None else None
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
        self.feedback = widgets.HTML()
        self.scenario.observe(self._filter, names="value")
        self.outcome.observe(self._filter, names="value")
        self.conversation.observe(self._pick, names="value")
        self.previous.on_click(lambda _: self._move(-1))
        self.next.on_click(lambda _: self._move(1))
        super().__init__([widgets.HBox([self.scenario, self.outcome]), self.conversation,
                          widgets.HBox([self.previous, self.next, self.position]), self.view,
                          widgets.HTML("<b>Mark a penalty legitimate</b> (appended to the suite's labels.jsonl; "
                                       "re-run evaluate to apply)"), self.author, self.labels, self.feedback])
        self._filter()

    def current(self) -> dict[str, Any] | None:
        return next((record for record in self.records if record["id"] == self.conversation.value), None)

    def _filter(self, _: Any = None) -> None:
        shown = filter_records(self.records, self.scenario.value, self.outcome.value)
        self.conversation.options = [(f"{r['id']} — {r['scenario_name']} — {r['outcome']}", r["id"]) for r in shown]
        self.conversation.value = shown[0]["id"] if shown else None   # ipywidgets 8 leaves it unselected
        self._pick()

    def _pick(self, _: Any = None) -> None:
        self.step = 0
        self._render()
        self.labels.children = self._label_controls()
        self.feedback.value = ""

    def _move(self, by: int) -> None:
        record = self.current()
        if record is not None and 0 <= self.step + by < len(record["steps"]):
            self.step += by
            self._render()

    def _render(self) -> None:
        record = self.current()
        if record is None:
            self.view.value, self.position.value = "<i>no conversation matches</i>", ""
            return
        self.view.value = step_html(record, self.step)
        steps = record["steps"]
        self.position.value = f"turn {steps[self.step]['turn']} ({self.step + 1} of {len(steps)})" if steps else ""

    def _label_controls(self) -> list[widgets.Widget]:
        row = self.rows.get(self.conversation.value)
        items = labelable_items(row) if row is not None else []
        if self.labels_path is None:
            return [widgets.HTML("<i>no suite given: labels cannot be saved</i>")] if items else []
        return [self._label_control(item, row) for item in items]

    def _label_control(self, item: dict[str, Any], row: dict[str, Any]) -> widgets.HBox:
        scope = widgets.Dropdown(options=SCOPES, value="scenario", layout=widgets.Layout(width="130px"))
        note = widgets.Text(placeholder="why it is legitimate")
        button = widgets.Button(description="mark legitimate")

        def mark(_: Any) -> None:
            try:
                label = add_label(self.labels_path, **label_request(item, row, scope=scope.value, note=note.value,
                                                                      author=self.author.value))
            except LobevalError as exc:
                self.feedback.value = f"<span style='color:#b00020'>{escape(exc)}</span>"
                return
            button.disabled, button.description = True, "labelled"
            self.feedback.value = escape(f"label {label['id']} added to {self.labels_path}")

        button.on_click(mark)
        return widgets.HBox([widgets.HTML(escape(item["text"]), layout=widgets.Layout(width="320px")), scope, note, button])


def replay_widget(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                  suite_dir: str | Path | None = None) -> ReplayWidget:
    """The replay for JupyterLab; with `suite_dir`, "mark legitimate" appends labels to its labels.jsonl."""
    return ReplayWidget(results, conversations, suite_dir)
