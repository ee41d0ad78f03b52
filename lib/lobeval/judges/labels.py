"""The analysts' labels (docs/formats.md): an unpaired call or an extra argument marked as legitimate, an
analyst's verdict on a judge's verdict, a flaky case quarantined.

`scenarios/<suite>/labels.jsonl` holds one label per line; scoring applies the penalty labels
(`lobeval evaluate`, or `evaluate.rescore_with_labels` without re-running anything else), evaluate leaves
quarantined cases out of the bot's metrics, and `lobeval.judges.calibrate` reads the judge verdicts. Every write
replaces the whole file through a temporary file, so a crash never leaves half a line behind.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import METRICS, PENALTY_KINDS, SCHEMA_VERSION, label_problem, read_labels, write_jsonl

LABEL_COLUMNS = ["id", "scenario_name", "functionName", "kind", "argument", "case_id", "note", "author", "created_at"]


def _read(path: Path) -> list[dict[str, Any]]:
    return read_labels(path) if path.exists() else []


def _new_label(path: Path, kind: str, note: str, author: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A label ready to write, checked with `label_problem` (a RecordError naming "new label" and the field)."""
    label = {"schema_version": SCHEMA_VERSION, "id": uuid.uuid4().hex[:12], "kind": kind, **fields, "note": note,
             "author": author, "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    problem = label_problem(label)
    if problem is not None:
        raise RecordError(path, "new label", *problem)
    return label


def _penalty_fields(*, function_name: str | None = None, scenario_name: str | None = None,
                    argument: str | None = None) -> dict[str, Any]:
    return {"scenario_name": scenario_name, "functionName": function_name,
            **({"argument": argument} if argument else {})}


def add_label(labels_path: str | Path, *, kind: str, note: str, author: str, **fields: Any) -> dict[str, Any]:
    """Append one label of any kind with its kind's fields (docs/formats.md), checked first.

    Penalty labels take `function_name`, `argument` and `scenario_name` (None, the default: the whole suite);
    judge_verdict and quarantined_case labels take their fields as the file names them (`case_id=`, `trial=`, ...).
    """
    path = Path(labels_path)
    label = _new_label(path, kind, note, author, _penalty_fields(**fields) if kind in PENALTY_KINDS else fields)
    write_jsonl(path, [*_read(path), label])
    return label


def quarantine_cases(labels_path: str | Path, case_ids: list[str], *, note: str, author: str) -> list[dict[str, Any]]:
    """One quarantined_case label per case, all written or none; a case already quarantined is a ConfigError."""
    path = Path(labels_path)
    labels = _read(path)
    quarantined = {label["case_id"]: label["id"] for label in labels if label["kind"] == "quarantined_case"}
    for case_id in case_ids:
        if case_id in quarantined:
            raise ConfigError(f"case {case_id!r} is already quarantined by label {quarantined[case_id]} in {path}")
    added = [_new_label(path, "quarantined_case", note, author, {"case_id": case_id})
             for case_id in dict.fromkeys(case_ids)]
    write_jsonl(path, [*labels, *added])
    return added


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
