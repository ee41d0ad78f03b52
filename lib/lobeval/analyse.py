"""Error analysis over `evaluation_results.json`: breakdown tables and failure signatures.

Every function takes the results dict (as written by `lobeval evaluate`) and returns a DataFrame;
nothing here calls a model. Function names are grouped by `suite.function_key` (case and the
`Plugin-` prefix do not split a function in two).
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Literal

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from pydantic import BaseModel, Field, ValidationError

from lobeval.errors import RecordError
from lobeval.records import read_conversations
from lobeval.scoring import METRICS
from lobeval.suite import function_key

ROW_IDS = ["case_id", "trial", "scenario_name"]


def load_results(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(path, "file", None, "not found") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, "file", None, f"invalid JSON: {exc.msg}") from None
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list):
        raise RecordError(path, "file", "rows", "is required (a list of conversation rows)")
    return results


def load_conversations(paths: str | Path | list[str | Path]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(record["case_id"], record["trial"]): record for _, _, record in read_conversations(paths)}


def _scored(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for row in results["rows"] if row.get("status") == "scored"]


def conversations_df(results: dict[str, Any]) -> pd.DataFrame:
    """One row per conversation: ids, scenario, status, termination, metrics, cost."""
    columns = [*ROW_IDS, "status", "termination", "turns", "error", *METRICS, "cost_usd"]
    return pd.DataFrame([{column: row.get(column) for column in columns} for row in results["rows"]], columns=columns)


def scenario_table(results: dict[str, Any]) -> pd.DataFrame:
    """The run's per-scenario summary (means with the intervals `evaluate` computed)."""
    table = pd.DataFrame(results.get("scenarios", []))
    return table.set_index("scenario_name") if not table.empty else table


def _calls(results: dict[str, Any]) -> pd.DataFrame:
    """One row per expected or actual call of every scored conversation, tagged paired/missed/extra."""
    found = []
    for row in _scored(results):
        ids = {key: row[key] for key in ROW_IDS}
        for pair in row.get("pairs", []):
            found.append({**ids, "function": function_key(pair["functionName"]), "kind": "paired"})
        for call in row.get("unpaired_expected", []):
            found.append({**ids, "function": function_key(call["functionName"]),
                          "kind": "optional_missed" if call.get("optional") else "missed"})
        for call in row.get("unpaired_actual", []):
            found.append({**ids, "function": function_key(call["functionName"]),
                          "kind": "extra_allowed" if call.get("allowed") else "extra",
                          "effect": call.get("effect")})
    return pd.DataFrame(found, columns=[*ROW_IDS, "function", "kind", "effect"])


def function_table(results: dict[str, Any]) -> pd.DataFrame:
    """Per function: expected (required), paired, missed, extra (not allowed; read/write) and the rates.

    recall = paired / (paired + missed); precision = paired / (paired + extra). A rate with no
    denominator is left empty (NaN), not 1.0: a function nobody expected has no recall.
    """
    calls = _calls(results)
    counts = calls.pivot_table(index="function", columns="kind", values="case_id", aggfunc="size", fill_value=0)
    counts = counts.reindex(columns=["paired", "missed", "optional_missed", "extra", "extra_allowed"], fill_value=0)
    extra = calls[calls["kind"] == "extra"]
    table = pd.DataFrame({
        "expected": counts["paired"] + counts["missed"],
        "paired": counts["paired"],
        "missed": counts["missed"],
        "extra": counts["extra"],
        "extra_read": extra[extra["effect"] == "read"].groupby("function").size(),
        "extra_write": extra[extra["effect"] == "write"].groupby("function").size(),
        "extra_allowed": counts["extra_allowed"],
    }, index=counts.index).fillna(0).astype(int)
    table["recall"] = (table["paired"] / (table["paired"] + table["missed"])).where(table["expected"] > 0)
    checked = table["paired"] + table["extra"]
    table["precision"] = (table["paired"] / checked).where(checked > 0)
    return table.sort_values(["missed", "extra"], ascending=False)


def _arguments(results: dict[str, Any]) -> pd.DataFrame:
    found = []
    for row in _scored(results):
        ids = {key: row[key] for key in ROW_IDS}
        for pair in row.get("pairs", []):
            name = function_key(pair["functionName"])
            for argument, check in pair.get("arguments", {}).items():
                found.append({**ids, "function": name, "argument": argument, "status": check["status"],
                              "expected": check.get("expected"), "actual": check.get("actual")})
            for argument, extra in pair.get("extra_arguments", {}).items():
                found.append({**ids, "function": name, "argument": argument,
                              "status": "extra_allowed" if extra.get("allowed") else "extra",
                              "expected": None, "actual": extra.get("actual")})
    return pd.DataFrame(found, columns=[*ROW_IDS, "function", "argument", "status", "expected", "actual"])


def argument_table(results: dict[str, Any]) -> pd.DataFrame:
    """Per (function, argument) in paired calls: checked, correct, wrong, missing, extra, and the error rate."""
    arguments = _arguments(results)
    table = arguments.pivot_table(index=["function", "argument"], columns="status", values="case_id",
                                  aggfunc="size", fill_value=0)
    table = table.reindex(columns=["correct", "wrong", "missing", "extra", "extra_allowed"], fill_value=0)
    expected = table["correct"] + table["wrong"] + table["missing"]
    table.insert(0, "expected", expected)
    table["error_rate"] = ((table["wrong"] + table["missing"]) / expected).where(expected > 0)
    return table.sort_values(["wrong", "missing", "extra"], ascending=False)


def wrong_value_pairs(results: dict[str, Any], top: int = 10) -> pd.DataFrame:
    """The most frequent (function, argument, expected → actual) among wrong arguments."""
    arguments = _arguments(results)
    wrong = arguments[arguments["status"] == "wrong"].copy()
    for column in ("expected", "actual"):
        wrong[column] = wrong[column].map(lambda value: json.dumps(value, ensure_ascii=False))
    counts = wrong.groupby(["function", "argument", "expected", "actual"]).size().rename("count").reset_index()
    return counts.sort_values(["count", "function", "argument"], ascending=[False, True, True]).head(top) \
        .reset_index(drop=True)


def worst_conversations(results: dict[str, Any], n: int = 10) -> pd.DataFrame:
    """The n scored conversations with the lowest Reliability (then Success), ties by case id."""
    table = conversations_df(results)
    table = table[table["status"] == "scored"]
    return table.sort_values(["Reliability", "Success", "case_id", "trial"]).head(n).reset_index(drop=True)


def termination_table(results: dict[str, Any]) -> pd.DataFrame:
    """Conversations per scenario and termination reason; machinery errors show as "machinery error"."""
    table = conversations_df(results)
    table["termination"] = table["termination"].where(table["status"] == "scored", "machinery error")
    return table.pivot_table(index="scenario_name", columns="termination", values="case_id",
                             aggfunc="size", fill_value=0)


def cost_table(results: dict[str, Any]) -> pd.DataFrame:
    """Cost in USD per scenario and role (user, target, judge), from each row's usage."""
    found = []
    for row in results["rows"]:
        for role, usage in (row.get("usage") or {}).items():
            found.append({"scenario_name": row["scenario_name"], "role": role,
                          "cost_usd": float((usage or {}).get("cost_usd") or 0.0)})
    table = pd.DataFrame(found, columns=["scenario_name", "role", "cost_usd"])
    table = table.pivot_table(index="scenario_name", columns="role", values="cost_usd", aggfunc="sum", fill_value=0.0)
    table["total"] = table.sum(axis=1)
    return table


SIGNATURE = ["kind", "function", "argument", "category"]


def failure_signatures(results: dict[str, Any]) -> pd.DataFrame:
    """One row per failed item with a deterministic signature (kind, function, argument, category).

    Kinds: missed_call, extra_call (not allowed), failed_call (paired but the call errored),
    wrong_argument, missing_argument, extra_argument (not allowed), forbidden_call,
    missing_output, behaviour (a judge's per-turn failure; category = its category),
    claimed_not_done. `turn` is the user-turn of the call when known; `message_index` for
    judge and claim failures.
    """
    found = []
    for row in _scored(results):
        ids = {key: row[key] for key in ROW_IDS}

        def add(kind: str, function: str | None = None, argument: str | None = None, category: str | None = None,
                **where: Any) -> None:
            found.append({**ids, "kind": kind, "function": function_key(function) if function else "",
                          "argument": argument or "", "category": category or "", **where})

        for call in row.get("unpaired_expected", []):
            if not call.get("optional"):
                add("missed_call", call["functionName"], expected_index=call.get("expected_index"))
        for call in row.get("unpaired_actual", []):
            if not call.get("allowed"):
                add("extra_call", call["functionName"], category=call.get("effect"),
                    actual_index=call.get("actual_index"), turn=call.get("turn"))
        for pair in row.get("pairs", []):
            if pair.get("failed"):
                add("failed_call", pair["functionName"], actual_index=pair.get("actual_index"))
        for kind, items in (("wrong_argument", row.get("wrong_arguments", [])),
                            ("missing_argument", row.get("missing_arguments", [])),
                            ("extra_argument", [item for item in row.get("extra_arguments", [])
                                                if not item.get("allowed")])):
            for item in items:
                add(kind, item["functionName"], item["argument"])
        for call in row.get("forbidden_calls", []):
            add("forbidden_call", call["functionName"], actual_index=call.get("actual_index"))
        for output in row.get("missing_outputs", []):
            add("missing_output", detail=output)
        for claim in (row.get("claims") or {}).get("claimed_not_done", []):
            add("claimed_not_done", category=claim.get("claim"), message_index=claim.get("message_index"),
                detail=claim.get("text"))
        for turn in (row.get("judges") or {}).get("turns", []) or []:
            failure = turn.get("failure")
            if turn.get("failed") and failure:
                add("behaviour", category=failure.get("category"), message_index=turn.get("message_index"),
                    severity=failure.get("severity"), detail=failure.get("reason"))
    columns = [*ROW_IDS, *SIGNATURE, "actual_index", "expected_index", "turn", "message_index", "severity", "detail"]
    return pd.DataFrame(found, columns=columns)


def failure_clusters(results: dict[str, Any], examples: int = 3) -> pd.DataFrame:
    """Failures grouped by signature: count, conversations affected, and the first example conversations."""
    failures = failure_signatures(results)
    failures["conversation"] = failures["case_id"] + "#" + failures["trial"].astype(str)
    grouped = failures.groupby(SIGNATURE, sort=False)
    table = pd.DataFrame({
        "count": grouped.size(),
        "conversations": grouped["conversation"].nunique(),
        "examples": grouped["conversation"].agg(lambda values: sorted(set(values))[:examples]),
    }).reset_index()
    return table.sort_values(["count", *SIGNATURE], ascending=[False, True, True, True, True]).reset_index(drop=True)


# ---- plots (seaborn; each returns its Figure) ----

def recall_matrix(results: dict[str, Any]) -> pd.DataFrame:
    """Recall of each expected function (rows) in each scenario (columns); NaN where it is not expected."""
    calls = _calls(results)
    expected = calls[calls["kind"].isin(["paired", "missed"])]
    if expected.empty:
        return pd.DataFrame()
    paired = (expected["kind"] == "paired").groupby([expected["function"], expected["scenario_name"]]).mean()
    return paired.unstack("scenario_name")


def plot_recall_heatmap(results: dict[str, Any]) -> plt.Figure | None:
    matrix = recall_matrix(results)
    if matrix.empty:
        return None
    figure, axes = plt.subplots(figsize=(1.2 + 0.9 * matrix.shape[1], 1.0 + 0.45 * matrix.shape[0]))
    sns.heatmap(matrix, annot=True, fmt=".2f", vmin=0, vmax=1, cmap="RdYlGn", cbar_kws={"label": "recall"},
                linewidths=0.5, ax=axes)
    axes.set_xlabel("scenario")
    axes.set_ylabel("expected function")
    axes.tick_params(axis="x", labelrotation=35)
    plt.setp(axes.get_xticklabels(), ha="right")
    figure.tight_layout()
    plt.close(figure)
    return figure


def plot_metric_distributions(results: dict[str, Any], metrics: tuple[str, ...] = ("Reliability", "Recall_args",
                                                                                    "Precision_fn")) -> plt.Figure | None:
    """Each scored conversation as a point, per scenario, one panel per metric."""
    table = conversations_df(results)
    table = table[table["status"] == "scored"]
    if table.empty:
        return None
    long = table.melt(id_vars=["scenario_name"], value_vars=list(metrics), var_name="metric", value_name="value")
    long["value"] = long["value"].astype(float)
    grid = sns.catplot(long, x="value", y="scenario_name", col="metric", kind="strip", jitter=0.15, alpha=0.6,
                       height=0.35 * long["scenario_name"].nunique() + 1.5, aspect=1.0)
    grid.set(xlim=(-0.05, 1.05))
    grid.set_axis_labels("", "")
    plt.close(grid.figure)
    return grid.figure


def plot_pass_k(results: dict[str, Any]) -> plt.Figure | None:
    """pass^k against k with its intervals; None with one trial per case."""
    table = pass_k_frame(results)
    if len(table) < 2:
        return None
    figure, axes = plt.subplots(figsize=(5, 3))
    axes.errorbar(table["k"], table["value"], yerr=[table["value"] - table["low"], table["high"] - table["value"]],
                  marker="o", capsize=3)
    axes.set_xticks(table["k"])
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("k (trials that must all succeed)")
    axes.set_ylabel("pass^k")
    figure.tight_layout()
    plt.close(figure)
    return figure


def pass_k_frame(results: dict[str, Any]) -> pd.DataFrame:
    rows = [{"k": int(k), "value": entry["value"], "low": (entry.get("interval") or [entry["value"]] * 2)[0],
             "high": (entry.get("interval") or [entry["value"]] * 2)[1], "cases": entry.get("cases")}
            for k, entry in (results.get("pass_k") or {}).items()]
    return pd.DataFrame(rows, columns=["k", "value", "low", "high", "cases"]).sort_values("k").reset_index(drop=True)


# ---- the static replay (no kernel, no network) ----

def replay_data(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                case_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Per conversation: its messages, and each actual call with the expected call it was paired with."""
    wanted = set(case_ids) if case_ids is not None else None
    found = []
    for row in results["rows"]:
        if wanted is not None and row["case_id"] not in wanted:
            continue
        conversation = conversations.get((row["case_id"], row["trial"])) or {}
        pairs = {pair["actual_index"]: pair for pair in row.get("pairs") or []}
        unpaired = {call["actual_index"]: call for call in row.get("unpaired_actual") or []}
        messages, actual = [], 0
        for message in conversation.get("messages") or []:
            calls = []
            for call in message.get("function_calls") or []:
                pair = pairs.get(actual)
                calls.append({"functionName": call["functionName"], "arguments": call.get("arguments"),
                              "result": call.get("result"), "error": call.get("error"),
                              "paired": pair is not None,
                              "checks": (pair or {}).get("arguments") or {},
                              "extra_arguments": (pair or {}).get("extra_arguments") or {},
                              "unexpected": actual in unpaired and not unpaired[actual].get("allowed")})
                actual += 1
            messages.append({"role": message["role"], "content": message.get("content") or "", "calls": calls})
        found.append({"id": f"{row['case_id']}#{row['trial']}", "scenario": row["scenario_name"],
                      "status": row["status"], "Reliability": row.get("Reliability"), "Success": row.get("Success"),
                      "missed": [call["functionName"] for call in row.get("unpaired_expected") or []],
                      "messages": messages})
    return found


def embedded_json(value: Any) -> str:
    """JSON safe inside <script type="application/json">: no "<", ">" or "&" can end the element."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def replay_html(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                case_ids: list[str] | None = None) -> str:
    """A self-contained replay: pick a conversation, step through its turns. The data is embedded
    as escaped JSON and rendered with textContent only, so transcript text cannot become markup."""
    element = f"lobeval-replay-{uuid.uuid4().hex[:8]}"
    return REPLAY_TEMPLATE.replace("ELEMENT", element).replace("DATA", embedded_json(replay_data(results, conversations,
                                                                                                 case_ids)))


REPLAY_TEMPLATE = """<div id="ELEMENT" class="lobeval-replay">
<style>
#ELEMENT { font-family: system-ui, sans-serif; font-size: 14px; border: 1px solid #ccc; padding: 8px; }
#ELEMENT .msg { margin: 4px 0; padding: 6px 8px; border-radius: 6px; white-space: pre-wrap; }
#ELEMENT .user { background: #eef4ff; } #ELEMENT .assistant { background: #f4f4f4; }
#ELEMENT .call { font-family: monospace; font-size: 12px; margin: 2px 0 2px 16px; padding: 4px; border-left: 3px solid #999; }
#ELEMENT .unexpected { border-left-color: #b3261e; } #ELEMENT .paired { border-left-color: #1b7f3b; }
#ELEMENT .wrong { background: #ffd9d6; } #ELEMENT .missing { background: #fff1c2; }
#ELEMENT .head { margin: 6px 0; color: #444; }
</style>
<select class="pick"></select> <button class="prev">&#9664; previous turn</button>
<button class="next">next turn &#9654;</button> <button class="all">whole conversation</button>
<div class="head"></div><div class="turns"></div>
<script type="application/json" class="data">DATA</script>
<script>
(function () {
  var root = document.getElementById("ELEMENT");
  var data = JSON.parse(root.querySelector(".data").textContent);
  var pick = root.querySelector(".pick"), turns = root.querySelector(".turns"), head = root.querySelector(".head");
  var shown = 0;
  function el(tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text; return e; }
  data.forEach(function (c, i) { var o = el("option", null, c.id + " · " + c.scenario + " · Success " + c.Success);
    o.value = i; pick.appendChild(o); });
  function render() {
    var c = data[pick.value]; turns.textContent = "";
    if (!c) { head.textContent = "No conversation to show."; return; }
    head.textContent = c.id + " · Reliability " + c.Reliability + " · Success " + c.Success +
      (c.missed.length ? " · expected but never called: " + c.missed.join(", ") : "");
    c.messages.slice(0, shown).forEach(function (m) {
      var box = el("div", "msg " + m.role, m.role + ": " + m.content);
      m.calls.forEach(function (call) {
        var line = el("div", "call " + (call.paired ? "paired" : call.unexpected ? "unexpected" : ""));
        line.appendChild(el("div", null, "call " + call.functionName + (call.paired ? " (paired with the expected call)" :
          call.unexpected ? " (not expected)" : " (allowed extra)")));
        Object.keys(call.arguments || {}).forEach(function (name) {
          var check = call.checks[name], extra = call.extra_arguments[name];
          var text = "  " + name + " = " + JSON.stringify(call.arguments[name]);
          if (check && check.status !== "correct") text += "   expected " + JSON.stringify(check.expected);
          if (extra && !extra.allowed) text += "   (extra argument)";
          line.appendChild(el("div", check && check.status !== "correct" ? "wrong" : "", text));
        });
        Object.keys(call.checks).forEach(function (name) { if (call.checks[name].status === "missing")
          line.appendChild(el("div", "missing", "  " + name + " missing, expected " + JSON.stringify(call.checks[name].expected))); });
        line.appendChild(el("div", null, "  -> " + (call.error ? "ERROR " + call.error : JSON.stringify(call.result))));
        box.appendChild(line);
      });
      turns.appendChild(box);
    });
  }
  function show(n) { var c = data[pick.value]; shown = Math.max(1, Math.min(n, c ? c.messages.length : 0)); render(); }
  pick.onchange = function () { show(2); };
  root.querySelector(".prev").onclick = function () { show(shown - 2); };
  root.querySelector(".next").onclick = function () { show(shown + 2); };
  root.querySelector(".all").onclick = function () { show(1e9); };
  show(2);
})();
</script>
</div>"""


# ---- root causes (needs a model) ----

ROOT_CAUSE_PROMPT = """You analyse the failures of a business chatbot that acts through function calls, found by
an automatic evaluation. Below are failure clusters (a signature: kind, function, argument, category;
how often; in which conversations), each with short excerpts of example conversations.

Write the distinct root causes behind these failures: merge clusters that share a cause, split one
whose examples show different causes. For each root cause give a short title, a description of
what goes wrong and why, a severity (critical: wrong or unsafe changes to data or false statements;
high: the user's request is not carried out; medium: missing or unclear information; low: style),
the conversations (ids exactly as given, e.g. "create_ticket-003#0") and the user turns where it
shows, and a concrete suggested fix for the bot (its prompt, its tool descriptions or its code).

Answer with a JSON object and nothing else:
{"root_causes": [{"title": "...", "description": "...", "severity": "critical|high|medium|low",
  "conversations": ["..."], "turns": [1, 2], "suggested_fix": "..."}]}"""


class RootCause(BaseModel):
    title: str = Field(min_length=1)
    description: str = Field(min_length=1)
    severity: Literal["critical", "high", "medium", "low"]
    conversations: list[str]
    turns: list[int] = []
    suggested_fix: str = Field(min_length=1)


class RootCauses(BaseModel):
    root_causes: list[RootCause]


def root_cause_prompt(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                      top: int = 15, excerpt_chars: int = 1200) -> str:
    from lobeval.judges import render_transcript

    clusters = failure_clusters(results).head(top)
    parts = []
    for number, cluster in enumerate(clusters.itertuples(), 1):
        signature = ", ".join(f"{name}={getattr(cluster, name)}" for name in SIGNATURE if getattr(cluster, name))
        parts.append(f"## Cluster {number}: {signature} — {cluster.count} times in {cluster.conversations} conversations")
        for example in cluster.examples[:2]:
            case_id, _, trial = example.rpartition("#")
            messages = (conversations.get((case_id, int(trial))) or {}).get("messages") or []
            parts.append(f"### {example}\n{render_transcript(messages)[:excerpt_chars]}")
    return "\n\n".join(parts)


def root_causes(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                client: Any, attempts: int = 2) -> list[dict[str, Any]]:
    """The model's deduplicated root causes of the run's failures; [] when nothing failed. A reply that
    stays invalid raises LLMError (never made-up causes)."""
    from lobeval.llm import LLMError, parse_json_object, run_sync

    if failure_signatures(results).empty:
        return []
    prompt = [{"role": "system", "content": ROOT_CAUSE_PROMPT},
              {"role": "user", "content": root_cause_prompt(results, conversations)}]
    problem = ""
    for attempt in range(attempts):
        reply = run_sync(client.chat(prompt, response_format={"type": "json_object"}, temperature=0.0, seed=attempt))
        try:
            parsed = RootCauses.model_validate(parse_json_object(reply.message.get("content") or ""))
            return [cause.model_dump() for cause in parsed.root_causes]
        except (ValueError, ValidationError) as exc:
            problem = (f"{'.'.join(map(str, exc.errors()[0]['loc']))}: {exc.errors()[0]['msg']}"
                       if isinstance(exc, ValidationError) else str(exc))
    raise LLMError(f"root causes: the model's reply stayed unusable after {attempts} attempts: {problem}")
