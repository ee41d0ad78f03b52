"""The analysts' labels (docs/formats.md): an unpaired call or an extra argument marked as legitimate.

`scenarios/<suite>/labels.jsonl` holds one label per line; scoring applies them
(`lobeval evaluate`, or `evaluate.rescore_with_labels` without re-running anything else). Every write
replaces the whole file through a temporary file, so a crash never leaves half a line behind.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from lobeval.errors import ConfigError, RecordError
from lobeval.records import METRICS, SCHEMA_VERSION, label_problem, read_labels, write_jsonl

LABEL_COLUMNS = ["id", "scenario_name", "functionName", "kind", "argument", "note", "author", "created_at"]


def _read(path: Path) -> list[dict[str, Any]]:
    return read_labels(path) if path.exists() else []


def add_label(labels_path: str | Path, *, kind: str, function_name: str, scenario_name: str | None = None,
              argument: str | None = None, note: str, author: str) -> dict[str, Any]:
    """Append one label; `scenario_name=None` makes it hold for the whole suite."""
    label = {"schema_version": SCHEMA_VERSION, "id": uuid.uuid4().hex[:12], "scenario_name": scenario_name,
             "functionName": function_name, "kind": kind, "note": note, "author": author,
             "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if argument:
        label["argument"] = argument
    path = Path(labels_path)
    problem = label_problem(label)
    if problem is not None:
        raise RecordError(path, "new label", *problem)
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
