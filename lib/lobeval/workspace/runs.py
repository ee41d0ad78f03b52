"""Run folders: `runs/<run_id>/` with its `config.json` and `.lock`, and `runs/index.jsonl`, the finished runs.

Everything that reads or writes a run folder as a whole goes through here, so the chain
(pipeline), the report and the comparisons agree on what a run is. The run being made is read
strictly (a fault is a RecordError); earlier runs are only history, so an index line that cannot
be read is skipped with a warning naming it, and listed for the report. One process at a time owns
a run folder (`owned`), and the values of key variables are scrubbed from what it holds (`scrub_folder`).
The run folders live in `runs_root()` ($LOBEVAL_RUNS, else runs/); a notebook run by hand starts from
`latest_run()`.
"""
from __future__ import annotations

import difflib
import hashlib
import html
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

from filelock import SoftFileLock, Timeout
from pydantic import BaseModel

from lobeval.core import checkout
from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import SCHEMA_VERSION, STRICT, json_line, read_json, read_results, read_text, validated
from lobeval.workspace.security import POLICY_FILE
from lobeval.workspace.suite import Suite

RUNS = Path("runs")
RUNS_VARIABLE = "LOBEVAL_RUNS"
INDEX = "index.jsonl"
CONFIG_FILE = "config.json"
RESULTS_FILE = "evaluation_results.json"
LOCK_FILE = ".lock"
BUDGET_FILE = "budget.json"
HEADLINE = ("Reliability", "Success", "Recall_fn", "Precision_fn", "Recall_args", "Precision_args", "pass^1",
            "judge.final_score")
SECRET_SUFFIXES = ("_KEY", "_TOKEN")
# A value this short is no credential worth hiding, and replacing it everywhere would mangle ordinary text.
MIN_SECRET_LENGTH = 8
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
log = logging.getLogger(__name__)


class RunConfig(BaseModel):
    """What the readers of `config.json` rely on; the chain writes more (models, versions, options)."""

    model_config = STRICT

    run_id: str
    suite_name: str
    suite_digest: str | None = None   # `suite_digest`; none in a run begun before it was recorded, or imported
    gate: dict[str, float] | None = None
    max_error_rate: float | None = None


class IndexEntry(BaseModel):
    """One line of `runs/index.jsonl`: a finished run and its headline numbers."""

    model_config = STRICT

    run_id: str
    suite_name: str
    suite_digest: str | None = None
    run_dir: str
    kind: dict[str, Any] | None = None   # `run_kind`; none in a line written before it was recorded
    metrics: dict[str, float | None] = {}
    counts: dict[str, Any] = {}


def check_run_id(run_id: str) -> str:
    """A run id is a plain name, so that `runs/<run_id>` stays inside runs/."""
    if not _RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise ConfigError(f"--run-id {run_id!r}: use a plain name of letters, digits, '-', '_' and '.' "
                          f"(not starting with '.' or '-', at most 128 characters)")
    return run_id


def runs_root() -> Path:
    """The folder of the run folders: $LOBEVAL_RUNS when set, else runs/ at the root of the checkout
    (`checkout.root`: from any folder inside it, notebooks/ where JupyterLab starts a notebook's kernel and a run
    folder where the chain does), else runs/ in the working folder."""
    chosen = os.environ.get(RUNS_VARIABLE)
    if chosen:
        return Path(chosen).resolve()
    return ((checkout.root() or Path.cwd()) / RUNS).resolve()


def run_folder(run_id: str) -> Path:
    return runs_root() / check_run_id(run_id)


def find_run(text: str, option: str) -> Path:
    """A run named on the command line (`option`, for the message): its folder, or its id, the name of a folder under
    `runs_root()`. A ConfigError names what is missing, and a close run id when there is one."""
    if Path(text).is_dir():
        return Path(text)
    root = runs_root()
    if _RUN_ID.fullmatch(text) and (root / text).is_dir():
        return root / text
    there = sorted(path.name for path in root.iterdir() if path.is_dir()) if root.is_dir() else []
    close = difflib.get_close_matches(Path(text).name, there, n=1)
    searched = (f"no run {text} under {root}" if _RUN_ID.fullmatch(text)
                else f"the folder {Path(text).resolve()} does not exist")
    raise ConfigError(f"{option} {text}: {searched}" + (f"; did you mean {close[0]}?" if close else ""))


def index_path() -> Path:
    return runs_root() / INDEX


def latest_run(runs_dir: Path | None = None) -> Path:
    """The newest finished run folder: the last run in `runs_dir`/index.jsonl whose folder still holds its
    evaluation_results.json, else the folder directly under `runs_dir` whose evaluation_results.json is the
    newest. `runs_dir` defaults to `runs_root()`. A notebook run by hand starts from it."""
    runs_dir = Path(runs_dir) if runs_dir is not None else runs_root()
    entries, _ = read_index(runs_dir / INDEX)
    listed = [Path(entry["run_dir"]) for entry in entries]
    finished = [folder for folder in listed if (folder / RESULTS_FILE).is_file()]
    if finished:
        return finished[-1]
    found = sorted(runs_dir.glob(f"*/{RESULTS_FILE}"), key=lambda path: path.stat().st_mtime_ns)
    if found:
        return found[-1].parent
    raise ConfigError("no finished run under runs/: run `make run` or `lobeval run` first, or set run_dir in the "
                      "parameters cell")


def read_config(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / CONFIG_FILE
    config = read_json(path)
    validated(RunConfig, config, path, "file")
    return config


def dataset_suite(dataset: str | Path) -> str | None:
    """The suite of the run whose folder holds `dataset` (a run's dataset.jsonl), as its config.json names it,
    when that folder still holds a suite; else None."""
    folder = Path(dataset).parent
    if not (folder / CONFIG_FILE).is_file():
        return None
    suite = read_config(folder).get("suite")
    return suite if suite and (Path(suite) / "suite.json").is_file() else None


def load_run_files(run_dir: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, evaluation results) of a run folder."""
    run_dir = Path(run_dir)
    return read_config(run_dir), read_results(run_dir / RESULTS_FILE)


def skipped(problem: str) -> str:
    """Log one line about something of an earlier run that cannot be read and is left out; that line."""
    line = f"skipped {problem}"
    log.warning("%s", line)
    return line


def read_index(index: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The finished runs, oldest first, and a line for each index line that could not be read. A run finished
    again (`lobeval run --retry-errors` on a finished run) is listed once, with its last figures, where it last finished."""
    path = Path(index)
    if not path.exists():
        return [], []
    try:
        lines = read_text(path).split("\n")
    except RecordError as exc:
        return [], [skipped(str(exc))]
    latest: dict[str, dict[str, Any]] = {}
    left_out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = _index_entry(line, path, number)
        except RecordError as exc:
            left_out.append(skipped(str(exc)))
            continue
        latest.pop(entry["run_id"], None)
        latest[entry["run_id"]] = entry
    return list(latest.values()), left_out


def _index_entry(line: str, path: Path, number: int) -> dict[str, Any]:
    entry = json_line(line, path, number)
    validated(IndexEntry, entry, path, f"line {number}")
    return entry


def add_to_index(index: Path, config: dict[str, Any], run_dir: Path, metrics: dict[str, Any],
                 counts: dict[str, Any]) -> None:
    """One line per finished run; a resumed run that had finished already with the same figures is not listed
    again (with new figures it is: the last line of a run is the one read). Runs finishing at once take turns,
    so that no two lines interleave."""
    index.parent.mkdir(parents=True, exist_ok=True)
    with SoftFileLock(index.with_name(f"{index.name}.lock"), timeout=60):
        entries, _ = read_index(index)
        figures = {"metrics": {name: metrics.get(name) for name in HEADLINE if name in metrics}, "counts": counts}
        if any(earlier["run_id"] == config["run_id"] and {key: earlier[key] for key in figures} == figures
               for earlier in entries):
            return
        entry = {"schema_version": SCHEMA_VERSION, "run_id": config["run_id"], "suite_name": config["suite_name"],
                 **({"suite_digest": config["suite_digest"]} if config.get("suite_digest") else {}),
                 "kind": run_kind(config), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "run_dir": str(run_dir),
                 **figures}
        with index.open("a+b") as handle:
            # After a line torn by a kill, start a line of our own so that this entry stays whole.
            handle.write((("\n" if _ends_mid_line(handle) else "") + json.dumps(entry) + "\n").encode("utf-8"))


def _ends_mid_line(handle: BinaryIO) -> bool:
    if handle.seek(0, os.SEEK_END) == 0:
        return False
    handle.seek(-1, os.SEEK_END)
    return handle.read(1) != b"\n"


def suite_digest(suite: Suite) -> str:
    """What tells two suites of one name apart (a drafted suite that kept the sample's name): a digest of the files
    that define its scenarios, suite.json, tools.json, templates.json and policy.json. The business data may
    change: the scenarios stay the same."""
    digest = hashlib.sha256()
    for path in (suite.suite_file, suite.tools_file, suite.templates_file, suite.dir / POLICY_FILE):
        digest.update(f"{path.name} {path.exists()}\n".encode() + (path.read_bytes() if path.exists() else b""))
    return digest.hexdigest()[:16]


def same_suite(entry: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """Whether an index entry (or a run's configuration) is of the suite of `config`: its name and its content
    (`suite_digest`; neither has one when both runs were imported)."""
    return (entry["suite_name"], entry.get("suite_digest")) == (config["suite_name"], config.get("suite_digest"))


RUN_KIND = ("target", "user", "attacks", "attack_roles")
"""What else two runs of one suite must share to be compared: the bot they talked to, the simulated user (scripted
or a model) and the kind of run (attack cases or not, played as which roles). A difference between runs that differ
in these is not a change of the bot."""


def run_kind(config: Mapping[str, Any]) -> dict[str, Any]:
    """The target and kind of a run (RUN_KIND) from its configuration; None where it records none."""
    return {key: config.get(key) for key in RUN_KIND}


def earlier_runs(index: str | Path, config: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The index entries of the other runs of the same suite (`same_suite`) against the same target and of the same
    kind (`run_kind`), oldest first, and the index lines skipped. An entry written before the index recorded its
    kind is told by its run's config.json; one whose config.json cannot be read is skipped."""
    entries, left_out = read_index(index)
    this = run_kind(config)
    found = []
    for entry in entries:
        if not same_suite(entry, config) or entry["run_id"] == config["run_id"]:
            continue
        kind = entry.get("kind")
        if kind is None:
            try:
                kind = run_kind(read_config(entry["run_dir"]))
            except RecordError as exc:
                left_out.append(skipped(f"earlier run {entry['run_id']}: its target cannot be told: {exc}"))
                continue
        if kind == this:
            found.append(entry)
    return found, left_out


@contextmanager
def owned(run_dir: Path) -> Iterator[None]:
    """Hold the run folder for this process: `.lock` records our PID (filelock's SoftFileLock); a lock
    whose process is gone is taken over, one whose process runs is a ConfigError naming it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    lock = SoftFileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        if lock.pid is None:
            raise RecordError(path, "file", "pid", "not a lock record naming a process (damaged?); if no lobeval "
                                                   "command is using this run, delete the file") from None
        raise ConfigError(f"run {run_dir.name} is in use by process {lock.pid} ({path}): wait for it to finish, "
                          f"or choose another --run-id") from None
    try:
        yield
    finally:
        lock.release()
        with suppress(OSError):   # a new run that failed before writing anything leaves no empty folder
            run_dir.rmdir()


def secrets(env: Mapping[str, str] = os.environ) -> list[str]:
    """The values of the key variables (OPENAI_API_KEY, AZURE_OPENAI_API_KEY, every *_KEY and *_TOKEN),
    longest first so that one containing another is replaced whole."""
    values = {value for name, value in env.items()
              if name.endswith(SECRET_SUFFIXES) and len(value) >= MIN_SECRET_LENGTH}
    return sorted(values, key=lambda value: (-len(value), value))


def _written_forms(value: str) -> set[str]:
    """A value as it may be written: plain, inside JSON (escaped, or as \\u escapes) and in HTML."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], html.escape(value)}


def scrub(text: str, values: list[str]) -> str:
    """`text` with every secret value replaced by ***."""
    for value in values:
        for form in _written_forms(value):
            text = text.replace(form, "***")
    return text


def scrub_folder(folder: Path, values: list[str]) -> None:
    """Rewrite every file under `folder` that holds a secret value, whole (temporary file, renamed)."""
    if not values:
        return
    for path in folder.rglob("*"):
        if not path.is_file() or path.name == LOCK_FILE:   # the lock holds a PID, and is released by its inode
            continue
        data = clean = path.read_bytes()
        for value in values:
            for form in _written_forms(value):
                clean = clean.replace(form.encode("utf-8"), b"***")
        if clean != data:
            _replace(path, clean)


def _replace(path: Path, data: bytes) -> None:
    """Write `data` over `path` whole or not at all, keeping its permissions."""
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            handle.write(data)
        os.chmod(handle.name, path.stat().st_mode)
        os.replace(handle.name, path)
    except BaseException:
        os.unlink(handle.name)
        raise
