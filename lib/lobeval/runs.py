"""Run folders: `runs/<run_id>/` with its `config.json`, and `runs/index.jsonl`, the finished runs.

Everything that reads or writes a run folder as a whole goes through here, so the chain
(pipeline), the report and the comparisons agree on what a run is.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from lobeval.errors import ConfigError, RecordError
from lobeval.records import SCHEMA_VERSION, read_json, read_results

RUNS = Path("runs")
INDEX = "index.jsonl"
CONFIG_FILE = "config.json"
RESULTS_FILE = "evaluation_results.json"
HEADLINE = ("Reliability", "Success", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args", "pass^1",
            "judge.final_score")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_run_id(run_id: str) -> str:
    """A run id is a plain name, so that `runs/<run_id>` stays inside runs/."""
    if not _RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise ConfigError(f"--run-id {run_id!r}: use a plain name of letters, digits, '-', '_' and '.' "
                          f"(not starting with '.' or '-', at most 128 characters)")
    return run_id


def run_folder(run_id: str) -> Path:
    return (RUNS / check_run_id(run_id)).resolve()


def index_path() -> Path:
    return (RUNS / INDEX).resolve()


def read_config(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / CONFIG_FILE
    config = read_json(path)
    if not isinstance(config, dict):
        raise RecordError(path, "file", None, "must be a JSON object")
    for field in ("run_id", "suite_name"):
        if not isinstance(config.get(field), str):
            raise RecordError(path, "file", field, "is required (a string)")
    return config


def load_run_files(run_dir: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, evaluation results) of a run folder."""
    run_dir = Path(run_dir)
    return read_config(run_dir), read_results(run_dir / RESULTS_FILE)


def read_index(index: str | Path) -> list[dict[str, Any]]:
    """The finished runs, oldest first."""
    path = Path(index)
    if not path.exists():
        return []
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(path, f"line {number}", None, f"invalid JSON: {exc.msg}") from None
        if not isinstance(entry, dict) or not all(isinstance(entry.get(key), str)
                                                  for key in ("run_id", "suite_name", "run_dir")):
            raise RecordError(path, f"line {number}", None, "must be an object with run_id, suite_name and run_dir")
        entries.append(entry)
    return entries


def add_to_index(index: Path, config: dict[str, Any], run_dir: Path, metrics: dict[str, Any],
                 counts: dict[str, Any]) -> None:
    """One line per finished run; a resumed run that had finished already is not listed twice."""
    if any(earlier["run_id"] == config["run_id"] for earlier in read_index(index)):
        return
    entry = {"schema_version": SCHEMA_VERSION, "run_id": config["run_id"], "suite_name": config["suite_name"],
             "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "run_dir": str(run_dir),
             "metrics": {name: metrics.get(name) for name in HEADLINE if name in metrics}, "counts": counts}
    index.parent.mkdir(parents=True, exist_ok=True)
    with index.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def earlier_runs(index: str | Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The index entries of the other runs of the same suite, oldest first."""
    return [entry for entry in read_index(index)
            if entry["suite_name"] == config["suite_name"] and entry["run_id"] != config["run_id"]]
