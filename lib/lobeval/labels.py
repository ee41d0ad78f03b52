"""The analysts' labels (SPEC §3): an unpaired call or an extra argument marked as legitimate.

`scenarios/<suite>/labels.jsonl` holds one label per line; `lobeval evaluate` applies them when it
re-scores. Every write replaces the whole file through a temporary file, so a crash never leaves
half a line behind.
"""
from __future__ import annotations

import html
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from lobeval.errors import ConfigError
from lobeval.records import LABEL_KINDS, read_labels, write_jsonl
from lobeval.scoring import METRICS

LABEL_COLUMNS = ["id", "scenario_name", "functionName", "kind", "argument", "note", "author", "created_at"]


def _read(path: Path) -> list[dict[str, Any]]:
    return read_labels(path) if path.exists() else []


def add_label(labels_path: str | Path, *, kind: str, function_name: str, scenario_name: str | None = None,
              argument: str | None = None, note: str, author: str) -> dict[str, Any]:
    """Append one label; `scenario_name=None` makes it hold for the whole suite."""
    if kind not in LABEL_KINDS:
        raise ConfigError(f"label kind must be one of {', '.join(LABEL_KINDS)}, got {kind!r}")
    if not function_name:
        raise ConfigError("a label needs the function name")
    if (kind == "allowed_extra_argument") != bool(argument):
        raise ConfigError("an argument is required for allowed_extra_argument labels, and only for them")
    label = {"id": uuid.uuid4().hex[:12], "scenario_name": scenario_name, "functionName": function_name,
             "kind": kind, "note": note, "author": author,
             "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if argument:
        label["argument"] = argument
    path = Path(labels_path)
    write_jsonl(path, [*_read(path), label])
    return label


def list_labels(labels_path: str | Path) -> pd.DataFrame:
    return pd.DataFrame(_read(Path(labels_path)), columns=LABEL_COLUMNS)


def revoke_label(labels_path: str | Path, label_id: str) -> None:
    path = Path(labels_path)
    labels = _read(path)
    kept = [label for label in labels if label.get("id") != label_id]
    if len(kept) == len(labels):
        raise ConfigError(f"no label with id {label_id!r} in {path}")
    write_jsonl(path, kept)


def compare_labels(before: dict[str, Any], after: dict[str, Any]) -> pd.DataFrame:
    """The run's metrics before and after the labels were applied, with the change."""
    table = pd.DataFrame({"before": {metric: before["metrics"].get(metric) for metric in METRICS},
                          "after": {metric: after["metrics"].get(metric) for metric in METRICS}}, dtype=float)
    table["change"] = table["after"] - table["before"]
    return table


def labelable_items(row: dict[str, Any]) -> list[dict[str, Any]]:
    """What in a scored row an analyst may mark as legitimate: unexpected calls that were not
    allowed, and extra arguments that were not allowed."""
    items = [{"kind": "allowed_extra_call", "function_name": call["functionName"], "argument": None,
              "what": f"unexpected call {call['functionName']} (turn {call.get('turn')})"}
             for call in row.get("unpaired_actual") or [] if not call.get("allowed")]
    items += [{"kind": "allowed_extra_argument", "function_name": item["functionName"], "argument": item["argument"],
               "what": f"extra argument {item['argument']} = {item.get('actual')!r} in {item['functionName']}"}
              for item in row.get("extra_arguments") or [] if not item.get("allowed")]
    return items


def replay_widget(results: dict[str, Any], conversations: dict[tuple[str, int], dict[str, Any]],
                  labels_path: str | Path | None, author: str = "analyst") -> Any:
    """Pick a conversation (filtered by scenario and status), read it with its calls, and mark an
    unexpected call or extra argument as legitimate for this scenario or the whole suite."""
    import ipywidgets as widgets

    from lobeval.views import conversation_html

    rows = {f"{row['case_id']}#{row['trial']}": row for row in results["rows"]}
    scenario = widgets.Dropdown(options=["all", *sorted({row["scenario_name"] for row in rows.values()})],
                                description="scenario")
    status = widgets.Dropdown(options=["all", "failed", "passed", "error"], description="status")
    pick = widgets.Dropdown(description="conversation")
    view, controls, said = widgets.HTML(), widgets.VBox(), widgets.HTML()

    def matches(row: dict[str, Any]) -> bool:
        verdict = "error" if row["status"] == "error" else "passed" if row.get("Success") == 1 else "failed"
        return scenario.value in ("all", row["scenario_name"]) and status.value in ("all", verdict)

    def refilter(*_: Any) -> None:
        pick.options = [key for key, row in rows.items() if matches(row)]

    def show(*_: Any) -> None:
        row = rows.get(pick.value)
        if row is None:
            view.value, controls.children = "<p>No conversation matches.</p>", ()
            return
        view.value = conversation_html(conversations.get((row["case_id"], row["trial"])) or {})
        controls.children = tuple(label_control(item, row) for item in labelable_items(row))

    def label_control(item: dict[str, Any], row: dict[str, Any]) -> Any:
        scope = widgets.ToggleButtons(options=["this scenario", "whole suite"])
        note = widgets.Text(placeholder="why this is legitimate")
        button = widgets.Button(description="mark legitimate", disabled=labels_path is None)

        def mark(_: Any) -> None:
            label = add_label(labels_path, kind=item["kind"], function_name=item["function_name"],
                              argument=item["argument"], note=note.value, author=author,
                              scenario_name=row["scenario_name"] if scope.value == "this scenario" else None)
            said.value = f"<p>label {html.escape(label['id'])} added; re-run the evaluation to apply it.</p>"
            button.disabled = True

        button.on_click(mark)
        return widgets.HBox([widgets.Label(item["what"]), scope, note, button])

    scenario.observe(refilter, "value")
    status.observe(refilter, "value")
    pick.observe(show, "value")
    refilter()
    show()
    return widgets.VBox([widgets.HBox([scenario, status]), pick, view, controls, said])
