"""The chain: stages executed by papermill, their glue read back, resuming, owning a run, no key on disk."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, SAMPLE_SUITE, read_jsonl
from lobeval.workflow import pipeline
from lobeval.workflow.run_kernel import QUIET_KERNEL
from lobeval.workspace import runs
from lobeval.cli import main
from lobeval.core.errors import ConfigError
from lobeval.samples.support_tickets import SupportTicketBot
from lobeval.workspace.suite import load_suite

pytestmark = pytest.mark.slow


def test_generate_notebook_by_hand_writes_the_dataset_into_runs_dev_and_glues_its_path(tmp_path, monkeypatch):
    import papermill
    import scrapbook

    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    executed = tmp_path / "01_generate.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "01_generate.ipynb"), str(executed),
                               parameters={"cases_per_scenario": 2, "seed": 3}, cwd=str(REPO / "notebooks"),
                               **QUIET_KERNEL)
    scraps = scrapbook.read_notebook(str(executed)).scraps
    out = tmp_path / "runs" / "dev" / "dataset.jsonl"
    cases = read_jsonl(out)
    templates = json.loads((REPO / "scenarios" / "support_tickets" / "templates.json").read_text())
    assert scraps["dataset_path"].data == str(out)
    assert scraps["n_cases"].data == len(cases) == 2 * len(templates)
    assert scraps["cases_per_scenario"].data == {t["scenario_name"]: 2 for t in templates}


MODEL_VARS = ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
              "LOBEVAL_EMBEDDING_MODEL")


def by_hand(stage: str, runs_dir, executed) -> None:
    """Run a stage notebook as an analyst does in JupyterLab: no parameters, in notebooks/, with
    LOBEVAL_RUNS naming the runs folder."""
    import papermill

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOBEVAL_RUNS", str(runs_dir))
        for name in MODEL_VARS:
            patch.delenv(name, raising=False)
        papermill.execute_notebook(str(REPO / "notebooks" / f"{stage}.ipynb"), str(executed),
                                   cwd=str(REPO / "notebooks"), **QUIET_KERNEL)


@pytest.fixture(scope="module")
def latest(tmp_path_factory):
    """A runs folder holding one finished run, made in-process (no notebook): its dataset (one case per
    scenario), its conversations, its configuration, a results file and its index line."""
    from lobeval.generation.generate import generate
    from lobeval.core.records import write_json

    runs_dir = tmp_path_factory.mktemp("by-hand") / "runs"
    run_dir = runs_dir / "r1"
    generate(SAMPLE_SUITE, run_dir / "dataset.jsonl", cases_per_scenario=1)
    with pytest.MonkeyPatch.context() as patch:
        for name in MODEL_VARS:
            patch.delenv(name, raising=False)
        assert main(["simulate", "--dataset", str(run_dir / "dataset.jsonl"),
                     "--out", str(run_dir / "conversations.jsonl")]) == 0
    config = {"run_id": "r1", "suite_name": "support_tickets", "suite": str(SAMPLE_SUITE),
              "target": "lobeval.samples.support_tickets:SupportTicketBot"}
    write_json(run_dir / "config.json", config)
    write_json(run_dir / "evaluation_results.json", {})   # what the chain's 03 wrote: here only its mark
    runs.add_to_index(runs_dir / "index.jsonl", config, run_dir, {}, {})
    return run_dir


def files(folder) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def test_simulate_by_hand_starts_from_the_latest_run_and_writes_beside_it(latest, tmp_path):
    import scrapbook

    before = files(latest)
    by_hand("02_simulate", latest.parent, tmp_path / "02.ipynb")
    written = latest / "by-hand" / "conversations.jsonl"
    assert scrapbook.read_notebook(str(tmp_path / "02.ipynb")).scraps["conversations_path"].data == str(written)
    assert len(read_jsonl(written)) == len(read_jsonl(latest / "dataset.jsonl"))
    assert files(latest) == before


def test_evaluate_by_hand_scores_the_latest_run_and_writes_beside_it(latest, tmp_path):
    before = files(latest)
    by_hand("03_evaluate", latest.parent, tmp_path / "03.ipynb")
    results = json.loads((latest / "by-hand" / "evaluation_results.json").read_text())
    assert results["counts"]["scored"] == len(read_jsonl(latest / "conversations.jsonl"))
    # 13 conversations; in one the sample bot's deliberate weakness writes a due date a day early
    assert results["metrics"]["Success"] == pytest.approx(12 / 13)
    assert files(latest) == before


def test_error_analysis_by_hand_writes_into_by_hand_and_leaves_the_run_as_it_was(tmp_path):
    run_dir = tmp_path / "runs" / "r2"
    dataset, conversations = run_dir / "dataset.jsonl", run_dir / "conversations.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        for name in MODEL_VARS:
            patch.delenv(name, raising=False)
        assert main(["generate", "--suite", str(SAMPLE_SUITE), "--cases-per-scenario", "1", "--out", str(dataset)]) == 0
        assert main(["simulate", "--dataset", str(dataset), "--out", str(conversations)]) == 0
        assert main(["evaluate", "--dataset", str(dataset), "--conversations", str(conversations),
                     "--suite", str(SAMPLE_SUITE), "--out", str(run_dir / "evaluation_results.json")]) == 0
    (run_dir / "config.json").write_text(json.dumps({"run_id": "r2", "suite_name": "support_tickets"}))
    before = files(run_dir)
    by_hand("04_error_analysis", run_dir.parent, tmp_path / "04.ipynb")
    assert files(run_dir) == before
    assert sorted(path.name for path in (run_dir / "by-hand").iterdir()) == [
        "evaluation_results.labelled.json", "evaluation_rows.labelled.jsonl"]


def test_a_notebook_by_hand_with_no_finished_run_says_what_to_run_first(tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as failed:
        by_hand("02_simulate", tmp_path / "runs", tmp_path / "02.ipynb")
    assert failed.value.cell_index == 2     # the first cell after the parameters
    assert failed.value.ename == "ConfigError"
    assert failed.value.evalue == ("no finished run under runs/: run `make run` or `lobeval run` first, or set "
                                   "run_dir in the parameters cell")


def test_a_run_whose_first_stage_never_finished_starts_again_with_the_new_configuration(tmp_path):
    run_dir = tmp_path / "x"
    first = {"run_id": "x", "suite_name": "s", "seed": 1}
    pipeline.start_or_resume(run_dir, first, {})
    assert pipeline.start_or_resume(run_dir, {**first, "seed": 2}, {}).config["seed"] == 2
    assert runs.read_config(run_dir)["seed"] == 2
    finished(run_dir / "01_generate.ipynb", dataset_path="d.jsonl")
    with pytest.raises(ConfigError, match=r"run x exists with another configuration \(seed: 2 then, 3 now\)"):
        pipeline.start_or_resume(run_dir, {**first, "seed": 3}, {})
    assert pipeline.start_or_resume(run_dir, {**first, "seed": 2}, {}).config["seed"] == 2


SECRET = "sk-test-NEVER-WRITTEN-123456"
STAGES = ["01_generate", "02_simulate", "03_evaluate", "04_error_analysis", "05_report"]


def external_references(page: str) -> list[str]:
    """Every src/href, CSS url() and script import that would make a browser ask another host."""
    import re

    found = re.findall(r"""(?:src|href)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]+)""", page, re.IGNORECASE)
    found += re.findall(r"""url\(\s*["']?((?:https?:)?//[^"')]+)""", page, re.IGNORECASE)
    found += re.findall(r"""import\s*\(?\s*["']((?:https?:)?//[^"']+)""", page, re.IGNORECASE)
    return found


class LeakyBot(SupportTicketBot):
    """The sample bot, careless: it prints the API key (into the stage notebook's output) and its backend puts
    the key into every result it returns (into the conversations)."""

    async def start(self, case: dict):
        print(f"connecting with key {os.environ['OPENAI_API_KEY']}")
        session = await super().start(case)
        send = session.send

        async def send_and_leak(message: str):
            reply = await send(message)
            for call in reply.function_calls:
                if isinstance(call.get("result"), dict):
                    call["result"] = {**call["result"], "trace": os.environ["OPENAI_API_KEY"]}
            return reply

        session.send = send_and_leak
        return session


LEAKY = "test_pipeline:LeakyBot"


def chain_environment(patch: pytest.MonkeyPatch, runs_dir) -> None:
    """The repository as working folder, runs/ elsewhere, a key that must not leak, no model configured,
    and tests/ importable by the stage kernels (LeakyBot)."""
    patch.chdir(REPO)
    patch.setattr("lobeval.workspace.runs.RUNS", runs_dir)
    patch.setenv("OPENAI_API_KEY", SECRET)
    patch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), str(Path(__file__).parent),
                                                os.environ.get("PYTHONPATH", "")]))
    for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        patch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One whole offline run (1 case per scenario) with a key in the environment that the bot echoes."""
    runs_dir = tmp_path_factory.mktemp("chain") / "runs"
    with pytest.MonkeyPatch.context() as patch:
        chain_environment(patch, runs_dir)
        result = pipeline.run(suite="scenarios/support_tickets", run_id="t1", cases_per_scenario=1, target=LEAKY)
    return result, runs_dir


def test_the_chain_executes_all_stages_and_writes_the_report(finished_run):
    result, runs = finished_run
    assert result.run_dir == runs / "t1"
    assert [path.name for path in result.executed] == [f"{stage}.ipynb" for stage in STAGES]
    assert result.summary()[-1] == str(result.report) == str(runs / "t1" / "report.html")
    # the terminal says what failed, in the report's words, then which conversation and where to read why
    # (the bot's words about the date are a claims finding to check by hand offline, so the verdict does not use them)
    assert result.verdict.startswith("1 of 13 conversations failed, because the bot sent a due date one day earlier "
                                     "than it should have; the quality gate passed: ")
    lines = result.summary()
    assert lines[len(result.notes) + len(result.executed)] == result.verdict
    assert lines[-4:-2] == ["failing: 1 of 13 conversations, all of scenario reassign_action_item: "
                            "reassign_action_item-001", result.failing[1]] and lines[-2].startswith("gate: passed")
    n_cases = len(read_jsonl(result.run_dir / "dataset.jsonl"))
    assert len(read_jsonl(result.run_dir / "conversations.jsonl")) == n_cases == result.counts["scored"]
    # 13 conversations; in one (reassign_action_item) the sample bot's deliberate weakness writes the due date a day
    # early: its Success is 0 and its Reliability (1 + 2/3) / 2, the 12 others are perfect.
    assert result.metrics["Success"] == pytest.approx(12 / 13)
    assert result.metrics["Reliability"] == pytest.approx((12 + (1 + 2 / 3) / 2) / 13)
    config = json.loads((result.run_dir / "config.json").read_text())
    assert config["suite_name"] == "support_tickets" and config["seed"] == 42 and config["user"] == "scripted"
    assert config["models"]["judge"] is None and config["versions"]["python"].startswith("3.")
    [entry] = read_jsonl(runs / "index.jsonl")
    assert entry["run_id"] == "t1" and entry["metrics"]["Reliability"] == result.metrics["Reliability"]
    assert entry["counts"]["errors"] == 0


def test_no_file_of_the_run_holds_the_key(finished_run):
    result, _ = finished_run
    leaking = [path.name for path in result.run_dir.rglob("*") if path.is_file() and SECRET in path.read_text(errors="ignore")]
    assert leaking == []
    texts = {path.name: path.read_text(errors="ignore") for path in result.run_dir.rglob("*") if path.is_file()}
    assert '"trace":"***"' in texts["conversations.jsonl"]          # the bot did leak it, and it was scrubbed
    assert "connecting with key ***" in texts["02_simulate.ipynb"]


def test_the_report_is_self_contained_and_says_what_it_found(finished_run):
    result, _ = finished_run
    page = result.report.read_text(encoding="utf-8")
    assert external_references(page) == []
    for heading in ("Verdict", "Headline metrics", "By scenario", "Why it failed", "Judges", "Claimed but not done",
                    "Cost", "Replay of the failing conversations", "Trend", "Run configuration"):
        assert heading in page
    assert "Quality gate" in page and "PASSED" in page
    assert "not run: no judge model configured" in page
    assert "import scrapbook" not in page   # no code cells


def test_a_half_finished_run_resumes_without_duplicates(finished_run, monkeypatch):
    """Kill simulation halfway (half the conversations written, its notebook torn, later stages never run):
    the same id resumes."""
    result, runs_dir = finished_run
    run_dir = result.run_dir
    conversations = run_dir / "conversations.jsonl"
    lines = conversations.read_text().splitlines(keepends=True)
    # a transcript with markup must reach the report as text: put it in a conversation with a write
    suite = load_suite(REPO / "scenarios" / "support_tickets")
    writes = lambda record: [i for i, call in enumerate(record["function_calls"])
                             if suite.tool(call["functionName"])["effect"] == "write"]
    line = next(n for n, text in enumerate(lines) if writes(json.loads(text)))
    record = json.loads(lines[line])
    record["messages"][1]["content"] = "<script>alert('x')</script> please"
    index = writes(record)[0]
    made, name = record["function_calls"][index], next(iter(record["function_calls"][index]["arguments"]))
    in_message = [call for message in record["messages"] for call in message.get("function_calls") or []][index]
    made["arguments"][name] = in_message["arguments"][name] = "</script><script>alert('y')</script>"
    lines = [json.dumps(record) + "\n"] + lines[:line] + lines[line + 1:]    # first, so it is kept
    conversations.write_text("".join(lines[: len(lines) // 2]))
    simulation = run_dir / "02_simulate.ipynb"
    simulation.write_bytes(simulation.read_bytes()[: simulation.stat().st_size // 2])   # killed while written
    for stage in STAGES[2:]:
        (run_dir / f"{stage}.ipynb").unlink()
    (run_dir / "report.html").unlink()
    chain_environment(monkeypatch, runs_dir)
    again = pipeline.run(suite="scenarios/support_tickets", run_id="t1", cases_per_scenario=1, target=LEAKY)
    assert again.resumed == ["01_generate"]
    records = read_jsonl(conversations)
    assert len(records) == len({(r["case_id"], r["trial"]) for r in records}) == len(lines)
    listed, _ = runs.read_index(runs_dir / "index.jsonl")
    assert [entry["run_id"] for entry in listed] == ["t1"]    # listed once, with the figures it finished with now
    assert listed[0]["metrics"]["Success"] == again.metrics["Success"]
    assert again.metrics["Success"] < 1     # the edited conversation now fails, so the report replays it
    page = again.report.read_text(encoding="utf-8")
    assert "<script>alert(" not in page
    assert "\\u003cscript\\u003ealert('x')" in page    # in the replay's embedded data, as text
    with pytest.raises(ConfigError, match=r"run t1 exists with another configuration \(seed: 42 then, 7 now\)"):
        pipeline.run(suite="scenarios/support_tickets", run_id="t1", cases_per_scenario=1, seed=7, target=LEAKY)


def test_a_failing_stage_names_the_kept_notebook(tmp_path, monkeypatch):
    from lobeval.core.errors import LobevalError

    monkeypatch.chdir(REPO)
    monkeypatch.setattr("lobeval.workspace.runs.RUNS", tmp_path / "runs")
    from helpers import make_suite

    monkeypatch.setenv("PYTHONPATH", str(REPO / "tests"))   # the stage kernels import the bot from here
    suite = make_suite(tmp_path)
    with pytest.raises(LobevalError, match=r"stage 02_simulate failed \(.*no licence key in the environment"
                                           r".*kept at .*02_simulate.ipynb"):
        pipeline.run(suite=str(suite), run_id="broken", target="toy_leave_bot:UnbuildableBot", cases_per_scenario=1)
    assert (tmp_path / "runs" / "broken" / "02_simulate.ipynb").exists()


def stand_in(folder, stage: str, code: str) -> None:
    """A stand-in for a stage notebook in `folder`: the parameters cell of the real one, then `code`."""
    import nbformat
    import papermill

    declared = papermill.inspect_notebook(str(REPO / "notebooks" / f"{stage}.ipynb"))
    parameters = nbformat.v4.new_code_cell("\n".join(f"{name} = None" for name in declared))
    parameters.metadata["tags"] = ["parameters"]
    notebook = nbformat.v4.new_notebook(cells=[parameters, nbformat.v4.new_code_cell(code)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, str(folder / f"{stage}.ipynb"))


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """`lobeval run` with its stage notebooks taken from a temporary folder (filled with `stand_in`), its runs
    under another, no model configured."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    monkeypatch.chdir(REPO)
    monkeypatch.setattr("lobeval.workflow.pipeline.notebooks_dir", lambda: folder)
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    for name in MODEL_VARS:
        monkeypatch.delenv(name, raising=False)
    return folder


def test_bad_input_raised_in_a_stage_notebook_exits_2_with_its_one_line(stand_ins, tmp_path, capsys):
    stand_in(stand_ins, "01_generate", "from lobeval.core.errors import RecordError\n"
                                       "raise RecordError('data/hr/employees.csv', 'line 3', 'email', 'not an address')")
    assert main(["run", "--run-id", "x", "--cases-per-scenario", "1"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "lobeval run: error: stage 01_generate failed (RecordError: data/hr/employees.csv: line 3: "
                              "field 'email': not an address); the executed notebook is kept at "
                              f"{tmp_path}/runs/x/01_generate.ipynb\n")


def test_an_unexpected_exception_in_a_stage_notebook_is_an_internal_error_and_the_run_resumes(
        stand_ins, tmp_path, monkeypatch, capsys):
    import re
    from pathlib import Path

    from test_degenerate import glued

    stand_in(stand_ins, "02_simulate", "import os\nraise KeyError(os.environ['OPENAI_API_KEY'])")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    argv = ["run", "--run-id", "x", "--cases-per-scenario", "1"]
    run_dir = tmp_path / "runs" / "x"
    run_dir.mkdir(parents=True)
    glued(run_dir / "01_generate.ipynb", dataset_path=str(run_dir / "dataset.jsonl"))   # stage 01 has finished
    first = (run_dir / "01_generate.ipynb").read_bytes()
    assert main(argv) == 70
    out, err = capsys.readouterr()
    written = re.search(r"the command and the traceback are in (\S+): ", err).group(1)
    assert (out, err) == ("", "lobeval run: internal error in stage 02_simulate, a fault in lobeval and not in your "
                              "input or your bot (KeyError: '***'); the executed notebook is kept at "
                              f"{run_dir}/02_simulate.ipynb; the command and the traceback are in {written}: send that "
                              "file to whoever looks after lobeval for your team (README.md, section 'Reporting a "
                              "fault'); the run resumes with the same --run-id\n")
    trace = Path(written).read_text(encoding="utf-8")
    Path(written).unlink()
    assert trace.startswith("lobeval run --run-id x --cases-per-scenario 1\nlobeval ")
    assert f"\n\nstage 02_simulate, executed notebook {run_dir}/02_simulate.ipynb\n" in trace
    assert "raise KeyError(os.environ['OPENAI_API_KEY'])" in trace     # the kernel's traceback, not this process's
    assert trace.rstrip().endswith("KeyError: '***'")
    assert SECRET not in trace and "\x1b[" not in trace
    assert SECRET not in (run_dir / "02_simulate.ipynb").read_text(encoding="utf-8")
    # resumable: the lock released, the finished stage kept (stand_ins has no 01 to run), the crashed one run again
    assert sorted(path.name for path in run_dir.iterdir()) == ["01_generate.ipynb", "02_simulate.ipynb", "config.json"]
    assert (run_dir / "01_generate.ipynb").read_bytes() == first
    assert main(argv) == 70
    again = capsys.readouterr().err
    Path(re.search(r"the command and the traceback are in (\S+): ", again).group(1)).unlink()
    assert again.startswith("lobeval run: internal error in stage 02_simulate, ")
    assert (run_dir / "01_generate.ipynb").read_bytes() == first


@pytest.mark.parametrize("stage", STAGES)
def test_committed_notebooks_have_no_outputs_and_one_parameters_cell(stage):
    notebook = json.loads((REPO / "notebooks" / f"{stage}.ipynb").read_text(encoding="utf-8"))
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert [(cell["outputs"], cell["execution_count"]) for cell in code] == [([], None)] * len(code)
    assert sum("parameters" in cell.get("metadata", {}).get("tags", []) for cell in code) == 1


def finished(path, **glue):
    from test_degenerate import glued

    glued(path, **glue)
    return pipeline.finished_glue(path, {"dataset_path": str})


def test_a_stage_whose_notebook_is_torn_runs_again(tmp_path, caplog):
    notebook = tmp_path / "01_generate.ipynb"
    assert finished(notebook, dataset_path="d.jsonl") == {"dataset_path": "d.jsonl"}
    notebook.write_bytes(notebook.read_bytes()[:100])
    assert pipeline.finished_glue(notebook, {"dataset_path": str}) is None
    assert caplog.records[0].getMessage().startswith(f"{notebook} cannot be read (NotJSONError: ")
    assert finished(notebook, dataset_path=["not", "a", "path"]) is None


@pytest.mark.parametrize("text, problem", [
    ("{", "config.json: line 1: invalid JSON"),
    ('{"run_id": "x", "suite_name": 5}', "config.json: file: field 'suite_name': must be a string, got 5"),
])
def test_a_damaged_config_is_bad_input_and_changes_nothing(tmp_path, monkeypatch, capsys, text, problem):
    monkeypatch.chdir(REPO)
    monkeypatch.setattr("lobeval.workspace.runs.RUNS", tmp_path / "runs")
    run_dir = tmp_path / "runs" / "x"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(text)
    (run_dir / "dataset.jsonl").write_text("{}\n")
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    assert main(["run", "--suite", str(SAMPLE_SUITE), "--run-id", "x"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"lobeval run: error: {run_dir / problem}")
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()} == before


def test_a_second_process_is_refused_a_run_the_first_holds(tmp_path):
    (tmp_path / "notebooks").mkdir()   # a checkout: its runs/ is tmp_path's
    (tmp_path / "notebooks" / "01_generate.ipynb").write_text("{}")
    run_dir = (tmp_path / "runs" / "x").resolve()
    with runs.owned(run_dir):
        second = subprocess.run([sys.executable, "-m", "lobeval", "run", "--suite", str(SAMPLE_SUITE), "--run-id", "x"],
                                cwd=tmp_path, capture_output=True, text=True)
    assert second.returncode == 2
    assert second.stderr.splitlines() == [f"lobeval run: error: run x is in use by process {os.getpid()} "
                                          f"({run_dir / '.lock'}): wait for it to finish, or choose another --run-id"]
    assert not run_dir.exists()


def test_every_stage_of_a_run_with_a_budget_shares_one_ledger(tmp_path, monkeypatch):
    def kernel_sees() -> str:
        """What a process started now (as papermill starts a stage's kernel) finds in its environment."""
        return subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('LOBEVAL_BUDGET_LEDGER'))"],
                              capture_output=True, text=True).stdout.strip()

    monkeypatch.delenv("LOBEVAL_BUDGET_LEDGER", raising=False)
    monkeypatch.setenv("LOBEVAL_BUDGET_USD", "1.5")
    with pipeline.budget_ledger(tmp_path / "x"):
        assert kernel_sees() == str(tmp_path / "x" / "budget.json")
    assert "LOBEVAL_BUDGET_LEDGER" not in os.environ
    monkeypatch.delenv("LOBEVAL_BUDGET_USD")
    with pipeline.budget_ledger(tmp_path / "x"):
        assert kernel_sees() == "None"


def test_a_relative_pythonpath_names_the_same_folder_in_the_stage_kernels(tmp_path, monkeypatch):
    import os

    from lobeval.workflow.pipeline import kernel_pythonpath

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["bots", str(tmp_path / "abs")]))
    with kernel_pythonpath():
        assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "bots"), str(tmp_path / "abs")]
    assert os.environ["PYTHONPATH"] == os.pathsep.join(["bots", str(tmp_path / "abs")])


def test_a_suite_named_as_another_is_compared_only_with_runs_of_its_own_content(finished_run, tmp_path,
                                                                                 monkeypatch):
    import shutil

    _, sample_runs = finished_run
    shutil.copytree(sample_runs, tmp_path / "runs")   # t1: a run of the sample suite
    drafted = tmp_path / "scenarios" / "support_tickets"   # a drafted suite that kept the sample's name
    shutil.copytree(SAMPLE_SUITE, drafted)
    shutil.copytree(REPO / "data" / "support_tickets", tmp_path / "data" / "support_tickets")
    kept = json.loads((drafted / "templates.json").read_text())[:2]   # two of the sample's scenarios: shared cases
    (drafted / "templates.json").write_text(json.dumps(kept))
    chain_environment(monkeypatch, tmp_path / "runs")
    first = pipeline.run(suite=str(drafted), run_id="d1", cases_per_scenario=1, target=LEAKY)
    assert not [check for check in first.gate_checks if check["check"].startswith("no regression in")]
    assert "No earlier run of this bot on this suite to compare with" in first.report.read_text()
    # d2: d1 again, its stages 01-04 as d1 left them (the same cases, seed and bot give the same records), the report
    # and the index line made by the chain
    shutil.copytree(first.run_dir, tmp_path / "runs" / "d2")
    config = json.loads((tmp_path / "runs" / "d2" / "config.json").read_text())
    (tmp_path / "runs" / "d2" / "config.json").write_text(json.dumps({**config, "run_id": "d2"}))
    (tmp_path / "runs" / "d2" / "05_report.ipynb").unlink()
    again = pipeline.run(suite=str(drafted), run_id="d2", cases_per_scenario=1, target=LEAKY)
    assert again.resumed == ["01_generate", "02_simulate", "03_evaluate", "04_error_analysis"]
    assert [check for check in again.gate_checks if check["check"].startswith("no regression in")]
    assert "against run d1, finished " in again.report.read_text()
    assert again.compared.startswith("No regression against run d1, finished ")   # the terminal's baseline line
    digests = {entry["run_id"]: entry["suite_digest"] for entry in read_jsonl(tmp_path / "runs" / "index.jsonl")}
    assert digests["d1"] == digests["d2"] == runs.suite_digest(load_suite(drafted)) != digests["t1"]


def test_a_run_begun_before_suite_digests_resumes_and_one_whose_suite_changed_is_refused(tmp_path):
    from test_degenerate import glued

    run_dir = tmp_path / "x"
    before = {"run_id": "x", "suite_name": "s", "user": "scripted"}
    pipeline.start_or_resume(run_dir, before, {})
    glued(run_dir / "01_generate.ipynb", dataset_path="d.jsonl")
    resumed = pipeline.start_or_resume(run_dir, {**before, "suite_digest": "a1"}, {})
    assert resumed.again is None and resumed.notes == []
    (run_dir / "config.json").write_text(json.dumps({**before, "suite_digest": "a1"}))
    with pytest.raises(ConfigError, match=r"^run x exists with another configuration \(suite_digest: 'a1' then, "
                                          r"'b2' now\)"):
        pipeline.start_or_resume(run_dir, {**before, "suite_digest": "b2"}, {})
