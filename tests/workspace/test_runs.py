"""Run folders, their configuration and the index of finished runs."""
import html
import json
import os
import subprocess
import sys

import pytest

from helpers import REPO
from lobeval.workspace import runs
from lobeval.core.errors import ConfigError, RecordError


@pytest.mark.parametrize("run_id", ["nightly", "2026-11-23_a.1", "A"])
def test_plain_run_ids_are_accepted(run_id):
    assert runs.check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", ["../x", "/tmp/x", "a/b", ".", "..", ".hidden", "-x", "", "a b", "x" * 129])
def test_a_run_id_that_is_not_a_plain_name_is_refused(run_id):
    with pytest.raises(ConfigError, match="use a plain name of letters, digits"):
        runs.check_run_id(run_id)


def test_the_index_lists_a_run_once(tmp_path):
    index = tmp_path / "index.jsonl"
    config = {"run_id": "a", "suite_name": "s"}
    for _ in range(2):
        runs.add_to_index(index, config, tmp_path / "a", {"Reliability": 0.5, "other": 1}, {"errors": 0})
    [entry], skipped = runs.read_index(index)
    assert entry["run_id"] == "a" and entry["metrics"] == {"Reliability": 0.5} and entry["schema_version"] == 1
    assert skipped == []
    runs.add_to_index(index, {"run_id": "b", "suite_name": "s"}, tmp_path / "b", {}, {})
    runs.add_to_index(index, {"run_id": "c", "suite_name": "other"}, tmp_path / "c", {}, {})
    earlier, _ = runs.earlier_runs(index, {"run_id": "b", "suite_name": "s"})
    assert [e["run_id"] for e in earlier] == ["a"]


def test_the_earlier_runs_of_a_suite_are_those_of_its_name_and_content(tmp_path):
    from helpers import make_suite
    from lobeval.workspace.suite import load_suite

    suite = load_suite(make_suite(tmp_path))
    digest = runs.suite_digest(suite)
    assert digest == runs.suite_digest(load_suite(suite.dir))   # the same files, the same digest
    index = tmp_path / "index.jsonl"
    runs.add_to_index(index, {"run_id": "a", "suite_name": "s", "suite_digest": digest}, tmp_path / "a", {}, {})
    suite.templates_file.write_text(suite.templates_file.read_text().replace("Create", "Open", 1))
    other = runs.suite_digest(suite)
    runs.add_to_index(index, {"run_id": "b", "suite_name": "s", "suite_digest": other}, tmp_path / "b", {}, {})
    runs.add_to_index(index, {"run_id": "c", "suite_name": "s"}, tmp_path / "c", {}, {})   # before digests, imported
    assert other != digest and [e.get("suite_digest") for e in runs.read_index(index)[0]] == [digest, other, None]
    for config, earlier in (({"run_id": "d", "suite_name": "s", "suite_digest": other}, ["b"]),
                            ({"run_id": "d", "suite_name": "s", "suite_digest": digest}, ["a"]),
                            ({"run_id": "d", "suite_name": "t", "suite_digest": digest}, []),
                            ({"run_id": "d", "suite_name": "s"}, ["c"])):
        assert [e["run_id"] for e in runs.earlier_runs(index, config)[0]] == earlier


def test_the_earlier_runs_of_a_run_are_those_against_the_same_target_user_and_attacks(tmp_path, caplog):
    index = tmp_path / "index.jsonl"
    plain = {"suite_name": "s", "target": "bots:Good", "user": "scripted", "attacks": None}
    for run_id, config in (("good", plain), ("unsafe", {**plain, "target": "bots:Unsafe"}),
                           ("attacked", {**plain, "attacks": "only"}), ("modelled", {**plain, "user": "llm"}),
                           ("as manager", {**plain, "attacks": "only", "attack_roles": ["manager"]})):
        runs.add_to_index(index, {"run_id": run_id, **config}, tmp_path / run_id, {}, {})
    assert runs.read_index(index)[0][0]["kind"] == {"target": "bots:Good", "user": "scripted", "attacks": None,
                                                     "attack_roles": None}
    for config, earlier in ((plain, ["good"]), ({**plain, "target": "bots:Unsafe"}, ["unsafe"]),
                            ({**plain, "target": "bots:Unsafe", "attacks": "only"}, []),
                            ({**plain, "attacks": "only"}, ["attacked"]), ({**plain, "user": "llm"}, ["modelled"])):
        assert [e["run_id"] for e in runs.earlier_runs(index, {"run_id": "new", **config})[0]] == earlier

    # a line written before the index recorded the kind: told by the run's config.json, skipped when it cannot be
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text(json.dumps({"run_id": "old", **plain}))
    with index.open("a") as handle:
        for run_id in ("old", "gone"):
            handle.write(json.dumps({"run_id": run_id, "suite_name": "s", "run_dir": str(tmp_path / run_id)}) + "\n")
    earlier, skipped = runs.earlier_runs(index, {"run_id": "new", **plain})
    assert [e["run_id"] for e in earlier] == ["good", "old"]
    assert skipped == [f"skipped earlier run gone: its target cannot be told: {tmp_path / 'gone' / 'config.json'}: "
                       f"file: not found"]
    assert [record.getMessage() for record in caplog.records] == skipped


@pytest.mark.parametrize("line, problem", [
    ("{oops", "line 2: invalid JSON"),
    ("[1, 2]", "line 2: must be a JSON object"),
    ('{"run_id": "a"}', "line 2: field 'suite_name': is required"),
    ('{"run_id": "a", "suite_name": "s", "run_dir": "x", "metrics": {"Success": "high"}}',
     "line 2: field 'metrics.Success': must be a number"),
])
def test_a_damaged_index_line_is_skipped_with_a_warning_naming_it(tmp_path, caplog, line, problem):
    index = tmp_path / "index.jsonl"
    good = {"run_id": "ok", "suite_name": "s", "run_dir": str(tmp_path / "ok")}
    index.write_text(json.dumps(good) + "\n" + line + "\n")
    entries, skipped = runs.read_index(index)
    assert [entry["run_id"] for entry in entries] == ["ok"]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipped {index}: {problem}")
    assert [record.getMessage() for record in caplog.records] == skipped


def test_a_run_after_a_torn_index_line_is_listed_whole(tmp_path):
    index = tmp_path / "index.jsonl"
    index.write_text('{"run_id": "a", "suite_name": "s", "run_dir": "x"}\n{"run_id": "torn", "sui')
    runs.add_to_index(index, {"run_id": "b", "suite_name": "s"}, tmp_path / "b", {"Success": 1.0}, {})
    entries, skipped = runs.read_index(index)
    assert [entry["run_id"] for entry in entries] == ["a", "b"] and len(skipped) == 1


@pytest.mark.parametrize("text, problem", [
    ("{", r"config.json: line 1: invalid JSON"),
    ("[]", r"config.json: file: must be a JSON object"),
    (json.dumps({"run_id": "a"}), r"config.json: file: field 'suite_name': is required"),
    (json.dumps({"run_id": "a", "suite_name": "s", "gate": {"Success": "high"}}),
     r"config.json: file: field 'gate.Success': must be a number"),
])
def test_a_damaged_config_is_named(tmp_path, text, problem):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(RecordError, match=problem):
        runs.read_config(tmp_path)


def test_a_run_folder_is_owned_by_one_process(tmp_path):
    run_dir = tmp_path / "x"
    with runs.owned(run_dir):
        assert (run_dir / ".lock").read_text().splitlines()[0] == str(os.getpid())
        with pytest.raises(ConfigError, match=rf"^run x is in use by process {os.getpid()} \("):
            with runs.owned(run_dir):
                pass
        (run_dir / "config.json").write_text("{}")
    assert sorted(path.name for path in run_dir.iterdir()) == ["config.json"]


def test_a_new_run_that_failed_before_writing_leaves_no_folder(tmp_path):
    with pytest.raises(ConfigError):
        with runs.owned(tmp_path / "new"):
            raise ConfigError("bad option")
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    run_dir = tmp_path / "x"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from lobeval.workspace import runs; "
                               "held = runs.owned(Path(sys.argv[1])); held.__enter__(); print('held', flush=True); "
                               "sys.stdin.read()",   # holds the lock until it is killed
         str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(ConfigError, match=f"in use by process {holder.pid} "):
        with runs.owned(run_dir):
            pass
    holder.kill()
    holder.wait()
    holder.stdin.close()
    holder.stdout.close()
    with runs.owned(run_dir):
        assert (run_dir / ".lock").read_text().splitlines()[0] == str(os.getpid())


def test_a_damaged_lock_is_named(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / ".lock").write_text("not a lock")
    with pytest.raises(RecordError, match=r"x/.lock: file: field 'pid': not a lock record naming a process"):
        with runs.owned(tmp_path / "x"):
            pass


def test_the_values_of_key_variables_are_the_secrets():
    env = {"OPENAI_API_KEY": "sk-abcdefgh", "AZURE_OPENAI_API_KEY": "az-0123456789", "GITHUB_TOKEN": "ghp_secret1",
           "SHORT_KEY": "abc", "LOBEVAL_MODEL": "gpt-4o-mini-secretish", "KEYBOARD": "us-international"}
    assert runs.secrets(env) == ["az-0123456789", "ghp_secret1", "sk-abcdefgh"]


def test_secrets_are_scrubbed_as_text_json_and_html(tmp_path):
    secret = 'sk-"quoted"&<tag>'
    text = f"{secret} {json.dumps({'k': secret})} {html.escape(secret)} {json.dumps(secret)}"
    assert runs.scrub(text, [secret]) == '*** {"k": "***"} *** "***"'
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "results.json").write_text(json.dumps({"error": f"refused {secret}"}))
    (tmp_path / "clean.txt").write_text("nothing here")
    (tmp_path / "sub" / "results.json").chmod(0o600)
    runs.scrub_folder(tmp_path, [secret])
    assert json.loads((tmp_path / "sub" / "results.json").read_text()) == {"error": "refused ***"}
    assert (tmp_path / "sub" / "results.json").stat().st_mode & 0o777 == 0o600
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["clean.txt", "results.json", "sub"]


def finished_folder(runs_dir, name: str, mtime: int):
    """A run folder holding its evaluation_results.json, last written at `mtime`."""
    results = runs_dir / name / runs.RESULTS_FILE
    results.parent.mkdir(parents=True)
    results.write_text("{}")
    os.utime(results, (mtime, mtime))
    return runs_dir / name


def test_the_latest_run_is_the_last_finished_in_the_index(tmp_path):
    older, newer = finished_folder(tmp_path, "a", 2_000), finished_folder(tmp_path, "b", 1_000)
    gone = tmp_path / "deleted"
    for folder in (older, newer, gone):
        runs.add_to_index(tmp_path / runs.INDEX, {"run_id": folder.name, "suite_name": "s"}, folder, {}, {})
    assert runs.latest_run(tmp_path) == newer     # the index's order, not the files' times; a deleted run is passed


def test_without_an_index_the_latest_run_is_the_newest_folder_with_results(tmp_path):
    finished_folder(tmp_path, "a", 1_000)
    newest = finished_folder(tmp_path, "b", 2_000)
    (tmp_path / "c").mkdir()                                   # started, never finished
    finished_folder(tmp_path / "b", "by-hand", 3_000)          # a hand run inside a run is no run
    assert runs.latest_run(tmp_path) == newest


@pytest.mark.parametrize("make", [lambda root: None, lambda root: (root / "dev").mkdir(parents=True)])
def test_no_finished_run_says_what_to_run_first(tmp_path, make):
    make(tmp_path / "runs")
    with pytest.raises(ConfigError, match=r"^no finished run under runs/: run `make run` or `lobeval run` first, "
                                          r"or set run_dir in the parameters cell$"):
        runs.latest_run(tmp_path / "runs")


def test_the_runs_folder_is_at_the_checkouts_root_or_named_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(runs.RUNS_VARIABLE, raising=False)
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path)   # a folder named notebooks/ alone is no checkout: the installed package's is used
    assert runs.runs_root() == REPO / "runs"
    (tmp_path / "notebooks" / "01_generate.ipynb").write_text("{}")
    assert runs.runs_root() == tmp_path.resolve() / "runs"
    monkeypatch.chdir(tmp_path / "notebooks")       # where JupyterLab runs a notebook's kernel
    assert runs.runs_root() == tmp_path.resolve() / "runs"
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "runs" / "r1")     # where the chain runs a stage's kernel
    assert runs.runs_root() == tmp_path.resolve() / "runs"
    assert runs.run_folder("x") == tmp_path.resolve() / "runs" / "x"
    monkeypatch.setenv(runs.RUNS_VARIABLE, str(tmp_path / "elsewhere"))
    assert runs.runs_root() == tmp_path.resolve() / "elsewhere"
    assert runs.index_path() == tmp_path.resolve() / "elsewhere" / "index.jsonl"
    with pytest.raises(ConfigError, match="no finished run"):
        runs.latest_run()
