"""The command line: usage mistakes and `lobeval run`'s pre-flight, each refused in one line with exit
status 2 before anything runs or is written; help that says where to read on, every option with its default as
docs/cli.md gives it; runs named by id; a fault of lobeval's own told apart from a verdict and from bad input."""
import argparse
import json
import re
import shlex

import pytest

from pathlib import Path

from helpers import REPO, SAMPLE_SUITE, TEMPLATE, make_suite
from lobeval import cli
from lobeval.cli import main
from lobeval.core.errors import ConfigError

MODEL_VARS = ["LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
              "LOBEVAL_EMBEDDING_MODEL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD"]


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """The repository as working folder, run folders under a temporary LOBEVAL_RUNS, no model configured."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path / "runs"))
    for name in MODEL_VARS:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "runs"


@pytest.fixture
def no_stage(monkeypatch):
    """Any stage executed fails the test: a pre-flight mistake must be found before stage 01."""
    def refuse(stage, *args, **kwargs):
        raise AssertionError(f"stage {stage} was executed")

    monkeypatch.setattr("lobeval.workflow.pipeline.execute_stage", refuse)


def one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    return line


def usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_status:
        main(argv)
    assert exit_status.value.code == 2
    return one_error_line(capsys)


# --- usage ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, line", [
    (["run", "--trial", "3"], "lobeval run: error: unknown option --trial; did you mean --trials?"),
    (["run", "--trial=3"], "lobeval run: error: unknown option --trial; did you mean --trials?"),
    (["run", "--suites", "scenarios/x"], "lobeval run: error: unknown option --suites; did you mean --suite?"),
    (["run", "--min", "Success=0.5", "--bogus"], "lobeval run: error: unknown option --bogus (see"),
    (["rn"], "lobeval: error: unknown command 'rn'; did you mean run?"),
    (["gen", "--suite", "x"], "lobeval: error: unknown command 'gen'; did you mean generate?"),
    (["generate", "--suite", "x", "--outt", "d.jsonl"],
     "lobeval generate: error: unknown option --outt; did you mean --out?"),
    (["run", "--trials", "many"], "lobeval run: error: argument --trials: expected a whole number, got 'many'"),
    (["run", "--trials", "0"], "lobeval run: error: argument --trials: must be at least 1, got 0"),
    (["run", "--target-timeout", "0"], "lobeval run: error: argument --target-timeout: must be more than 0, got 0"),
    (["run", "--max-error-rate", "5"],
     "lobeval run: error: argument --max-error-rate: must be at least 0 and at most 1, got 5"),
])
def test_bad_usage_exits_2_with_one_line_naming_a_close_option_or_command(capsys, argv, line):
    error = usage_error(capsys, argv)
    assert error.startswith(line)
    assert error.endswith("--help)")


def test_negative_numbers_are_values_not_options():
    args = cli.build_parser().parse_args(["run", "--seed", "-5"])
    assert args.seed == -5


@pytest.mark.parametrize("command", ["", "generate", "simulate", "evaluate", "lint", "chat", "bench", "run",
                                     "compare", "gate"])
def test_help_names_no_spec_section(capsys, command):
    with pytest.raises(SystemExit) as exit_status:
        main([command, "--help"] if command else ["--help"])
    assert exit_status.value.code == 0
    text = capsys.readouterr().out
    assert "SPEC" not in text and "§" not in text


def test_the_top_level_help_gives_the_exit_statuses_and_the_docs(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 done" in text and "1 a quality gate failed" in text and "2 bad input or usage" in text
    assert "70 an internal error, a fault in lobeval itself" in text
    assert "docs/cli.md" in text and "docs/targets.md" in text


def test_a_bare_lobeval_prints_the_help_and_exits_0_as_pip_does(capsys):
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: lobeval [-h] COMMAND ...") and "exit status:" in out and err == ""


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    return next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if not isinstance(action, argparse._HelpAction)]


def has_default(action: argparse.Action) -> bool:
    return action.default not in (None, False, [])


DANGLING = {"is", "are", "the", "a", "an", "of", "and", "or", "its", "than"}


def test_every_option_of_every_command_has_help_with_its_default():
    for name, parser in command_parsers().items():
        shown = " ".join(parser.format_help().split())
        assert parser.description, f"lobeval {name} --help has no description"
        for action in options(parser):
            where = f"lobeval {name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{where}: no help"
            assert action.help.rstrip(")").split()[-1].lower() not in DANGLING, f"{where}: cut off: {action.help}"
            if action.option_strings and has_default(action):
                assert f"(default: {action.default})" in shown, where
            elif action.option_strings and not action.required and action.nargs != 0:
                # no default of its own: the help says in words what happens without it
                assert "default" in action.help or "required" in action.help, f"{where}: {action.help}"


def test_a_help_text_once_cut_off_and_the_draft_description():
    texts = {name: " ".join(parser.format_help().split()) for name, parser in command_parsers().items()}
    assert ("--min-rule {point,interval} point: a --min fails when the value is below it; interval: only when the "
            "metric's whole 95% interval lies below it (default: point)") in texts["run"]
    assert "--cases-per-scenario N test cases drawn per scenario template (default: 3)" in texts["run"]
    assert texts["draft"].split("options:")[0].endswith(
        "Draft the scenario templates of a suite (its templates.json, or --out) from its suite.json, tools.json and "
        "business data: for every write function, scenarios whose expected calls take their values from the data, a "
        "variant where the user leaves out a required value, and a request no function serves; with a judge model "
        "configured, the model's proposals too. Every draft is proven before it is written (generate's checks, the "
        "lint, a replay of its expected calls on --target); each rejected one is printed with its reason, then what "
        "the drafts cover. Exit 1 when no draft passed. See docs/cli.md#a-suite-for-your-own-bot. ")


def heading_anchors(doc) -> set[str]:
    """GitHub's anchors of a markdown file's headings: lower case, punctuation but '-' and '_' dropped, spaces '-'."""
    headings = re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


DOCS_LINK = re.compile(r"docs/(\w+\.md)(?:#([\w-]+))?")


def test_every_docs_link_lobeval_prints_names_a_file_and_heading_that_exist():
    texts = [cli.build_parser().format_help(), *(parser.format_help() for parser in command_parsers().values())]
    texts += [path.read_text(encoding="utf-8") for path in (REPO / "lib" / "lobeval").rglob("*.py")]
    links = {match.groups() for text in texts for match in DOCS_LINK.finditer(text)}
    assert ("cli.md", "a-new-suite-init") in links and ("metrics.md", "security") in links
    for name, anchor in sorted(links, key=str):
        doc = REPO / "docs" / name
        assert doc.is_file(), f"docs/{name}"
        assert anchor is None or anchor in heading_anchors(doc), f"docs/{name}#{anchor}: no such heading"


def documented_usage() -> dict[str, tuple[set[str], dict[str, str]]]:
    """Per command, the options docs/cli.md's code blocks name on its lines (usage and examples, with their
    continuation lines) and the defaults its `defaults:` lines give."""
    found: dict[str, tuple[set[str], dict[str, str]]] = {}
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for block in re.findall(r"^```\n(.*?)^```", text, re.M | re.S):
        command, in_defaults = None, False
        for line in block.splitlines():
            start = re.match(r"lobeval ([a-z]+)", line)
            if start:
                command, in_defaults = start.group(1), False
                found.setdefault(command, (set(), {}))
            elif command is None or not line.startswith(" "):
                command = None
                continue
            if line.strip().startswith("defaults:"):
                in_defaults = True
            named, defaults = found[command]
            if in_defaults:
                for option, value in re.findall(r'(--[a-z-]+) ("[^"]*"|[^,\s]+)', line):
                    defaults[option] = shlex.split(value)[0]
            else:
                named.update(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line.split("#")[0]))
    return found


def test_docs_cli_md_names_every_option_of_every_command_with_its_default():
    documented = documented_usage()
    for name, parser in command_parsers().items():
        assert name in documented, f"docs/cli.md has no usage line of lobeval {name}"
        named, defaults = documented[name]
        actual = {action.option_strings[0]: action for action in options(parser) if action.option_strings}
        assert named == set(actual), f"lobeval {name}: docs/cli.md names {sorted(named)}, --help {sorted(actual)}"
        with_default = {option: action.default for option, action in actual.items() if has_default(action)}
        assert set(defaults) == set(with_default), f"lobeval {name}: the defaults docs/cli.md gives"
        for option, value in with_default.items():
            same = (float(defaults[option]) == value if isinstance(value, (int, float))
                    else defaults[option] == value)
            assert same, f"lobeval {name} {option}: docs/cli.md says {defaults[option]}, --help {value}"


# --- lobeval run: the pre-flight ----------------------------------------------------------

PREFLIGHT = [
    pytest.param(["--suite", "scenarios/support_ticket"],
                 "--suite scenarios/support_ticket: no suite.json in ", ["did you mean scenarios/support_tickets?",
                                                                         "the suites under scenarios/: "],
                 id="unknown suite"),
    pytest.param(["--target", "lobeval.samples.support_tickets:SupportTicketBott"],
                 "target 'lobeval.samples.support_tickets:SupportTicketBott': module 'lobeval.samples.support_tickets' "
                 "has no attribute 'SupportTicketBott'; did you mean SupportTicketBot?",
                 ["The classes it defines: "], id="unknown target class"),
    pytest.param(["--target", "no_such_bots:Bot"], "target 'no_such_bots:Bot': cannot import module 'no_such_bots'",
                 ["PYTHONPATH", "JupyterLab"], id="target module not importable"),
    pytest.param(["--target", "http://:8080/v1"], "target 'http://:8080/v1': not a well-formed base URL",
                 ["it names no host"], id="target URL without a host"),
    pytest.param(["--min", "Reliabilty=0.9"], "--min Reliabilty=0.9: unknown metric 'Reliabilty'; "
                                              "did you mean Reliability?", [], id="mistyped --min"),
    pytest.param(["--min", "Success"], "--min 'Success': expected METRIC=NUMBER", [], id="--min without a value"),
    pytest.param(["--user", "llm"], "--user llm needs a model: set LOBEVAL_USER_MODEL or LOBEVAL_MODEL", [],
                 id="llm user without a model"),
    pytest.param(["--judges", "goal"], "--judges goal needs a judge model", [], id="judges named without a model"),
    pytest.param(["--judges", "gaol"], "unknown judge(s) gaol", [], id="unknown judge"),
]


@pytest.mark.parametrize("options, message, also", PREFLIGHT)
def test_a_preflight_mistake_exits_2_before_stage_01_and_writes_nothing(runs_dir, no_stage, capsys, options,
                                                                       message, also):
    assert main(["run", "--run-id", "x", *options]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"lobeval run: error: {message}"), line
    assert all(part in line for part in also), line
    assert not runs_dir.exists()


def test_a_model_named_without_credentials_is_found_before_stage_01(runs_dir, no_stage, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOBEVAL_JUDGE_MODEL", "gpt-4o-mini")
    assert main(["run", "--run-id", "x"]) == 2
    assert "a model is named for role 'judge' ('gpt-4o-mini') but no credentials are set" in one_error_line(capsys)
    assert not runs_dir.exists()


def test_a_preflight_mistake_leaves_an_earlier_run_as_it_was(runs_dir, no_stage, capsys):
    earlier = runs_dir / "x"
    earlier.mkdir(parents=True)
    (earlier / "config.json").write_text('{"run_id": "x", "suite_name": "s"}')
    assert main(["run", "--run-id", "x", "--min", "Reliabilty=0.9"]) == 2
    assert "did you mean Reliability?" in one_error_line(capsys)
    assert sorted(path.name for path in runs_dir.rglob("*")) == ["config.json", "x"]


def test_the_estimate_refuses_what_run_refuses_and_needs_only_a_model_name(runs_dir, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for argv in (["run", "--user", "llm", "--estimate"], ["estimate", "--user", "llm"], ["run", "--user", "llm"]):
        assert main(argv) == 2
        assert one_error_line(capsys) == (f"lobeval {argv[0]}: error: --user llm needs a model: set LOBEVAL_USER_MODEL "
                                          f"or LOBEVAL_MODEL, and OPENAI_API_KEY (or the AZURE_OPENAI_* variables); see "
                                          f"docs/models.md")
    assert main(["run", "--judges", "goal", "--estimate"]) == 2
    assert "--judges goal needs a judge model" in one_error_line(capsys)
    monkeypatch.setenv("LOBEVAL_MODEL", "gpt-4o-mini")   # no key: the estimate sends nothing
    assert main(["run", "--user", "llm", "--estimate", "--cases-per-scenario", "1"]) == 0
    out = capsys.readouterr().out
    assert "  user: gpt-4o-mini at USD 0.15 prompt, 0.6 completion per 1M tokens\n" in out
    assert "every role runs offline" not in out
    monkeypatch.setenv("LOBEVAL_USER_MODEL", "my-local-model")
    assert main(["estimate", "--user", "llm", "--cases-per-scenario", "1"]) == 0
    assert ("  user: my-local-model, no price known: its cost is unknown (give it in LOBEVAL_PRICES; docs/models.md)\n"
            in capsys.readouterr().out)
    assert not runs_dir.exists()


def test_lobeval_run_works_from_any_folder_of_the_checkout_and_from_outside_it(runs_dir, tmp_path, monkeypatch,
                                                                                capsys):
    from lobeval.core import checkout
    from lobeval.workflow import pipeline

    started = []

    def first_stage(stage, run_dir, parameters, secret_values, *, kernel):
        started.append((stage, (pipeline.notebooks_dir() / f"{stage}.ipynb").is_file(), parameters["suite"]))
        raise ConfigError("stopped at the first stage")

    monkeypatch.setattr("lobeval.workflow.pipeline.execute_stage", first_stage)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for folder in (REPO / "docs", REPO / "notebooks", outside):
        monkeypatch.chdir(folder)
        assert checkout.root() == REPO
        assert main(["run", "--run-id", folder.name]) == 2
        assert one_error_line(capsys) == "lobeval run: error: stopped at the first stage"
    assert started == [("01_generate", True, str(SAMPLE_SUITE))] * 3
    monkeypatch.delenv("LOBEVAL_RUNS")
    monkeypatch.chdir(outside)
    from lobeval.workspace.runs import runs_root

    assert runs_root() == REPO / "runs"


def test_a_crash_is_an_internal_error_not_a_verdict_and_the_run_resumes(runs_dir, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-NEVER-WRITTEN-123456")

    def crash(stage, *args, **kwargs):
        raise KeyError("sk-test-NEVER-WRITTEN-123456")

    monkeypatch.setattr("lobeval.workflow.pipeline.execute_stage", crash)
    assert main(["run", "--run-id", "x", "--cases-per-scenario", "1"]) == cli.INTERNAL_ERROR == 70
    line = one_error_line(capsys)
    written = re.search(r"the command and the traceback are in (\S+): ", line).group(1)
    assert line == ("lobeval run: internal error, a fault in lobeval and not in your input or your bot (KeyError: "
                    f"'***'); the command and the traceback are in {written}: send that file to whoever looks after "
                    "lobeval for your team (README.md, section 'Reporting a fault'); the run resumes with the same "
                    "--run-id")
    assert "reporting-a-fault" in heading_anchors(REPO / "README.md")
    trace = Path(written).read_text()
    assert trace.startswith("lobeval run --run-id x --cases-per-scenario 1\nlobeval ")
    assert "in crash\n" in trace and "KeyError: '***'" in trace and "NEVER-WRITTEN" not in trace
    Path(written).unlink()
    # resumable: the configuration stays, the lock is released, the same id goes on
    assert sorted(path.name for path in (runs_dir / "x").iterdir()) == ["config.json"]
    monkeypatch.setattr("lobeval.workflow.pipeline.execute_stage", lambda *args, **kwargs: (_ for _ in ()).throw(ConfigError("again")))
    assert main(["run", "--run-id", "x", "--cases-per-scenario", "1"]) == 2
    assert one_error_line(capsys) == "lobeval run: error: again"


# --- no noise on a normal run -------------------------------------------------------------------------

def test_a_stage_kernel_is_shut_down_without_an_interrupt():
    """jupyter_client sends SIGINT before a shutdown request; landing in papermill's last request, ipykernel logs
    `[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.` on the run's standard error."""
    import asyncio

    from lobeval.workflow.run_kernel import QUIET_KERNEL, FinishedKernelManager

    manager, sent = FinishedKernelManager(), []

    async def signal_kernel(signum):
        sent.append(signum)

    manager._async_signal_kernel = signal_kernel
    manager.shutting_down = True
    asyncio.run(manager._async_interrupt_kernel())
    assert sent == []
    manager.shutting_down = False   # an interrupt asked for otherwise is jupyter_client's as ever
    with pytest.raises(RuntimeError, match="No kernel is running"):
        asyncio.run(manager._async_interrupt_kernel())
    assert QUIET_KERNEL["kernel_manager_class"] is FinishedKernelManager
    assert QUIET_KERNEL["config"]["KernelManager"]["transport"] == "ipc"   # no "running over TCP" warning


def test_make_echoes_no_pip_command():
    recipes = [line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("\t")]
    installs = [line for line in recipes if "pip install" in line and "/tmp/lobeval-lock" not in line]
    assert len(installs) == 2 and all(line.startswith("\t@") for line in installs)
    assert "\t$(BIN)/lobeval run" in recipes   # what make runs for `make run` is still shown


@pytest.mark.slow
def test_a_run_that_failed_at_its_start_reruns_under_its_id_with_a_fixed_configuration(runs_dir, tmp_path, capsys,
                                                                                      restarted_sample_run):
    broken = make_suite(tmp_path, templates=[{**TEMPLATE, "user_instructions": "{nope.x}"}])
    assert main(["run", "--run-id", "x", "--suite", str(broken)]) == 2
    assert "unknown placeholder {nope.x}" in one_error_line(capsys)   # the pre-flight builds the cases
    assert not (runs_dir / "x").exists()
    # an attempt that died in stage 01 left its configuration (toy, 3 cases) and no finished notebook; run x again
    # with the sample suite, one case per scenario (tests/conftest.py)
    status, out, runs = restarted_sample_run
    assert status == 0 and out.splitlines()[-2].startswith("gate: passed"), out
    config = json.loads((runs / "x" / "config.json").read_text())
    assert (config["suite_name"], config["cases_per_scenario"]) == ("support_tickets", 1)
    [entry] = [json.loads(line) for line in (runs / "index.jsonl").read_text().splitlines()]
    assert entry["run_id"] == "x"


def test_import_traces_writes_the_conversations_of_a_run(tmp_path, monkeypatch, capsys):
    from helpers import REPO
    from lobeval.cli import main

    monkeypatch.setenv("LOBEVAL_RUNS", str(tmp_path))
    traces = REPO / "tests" / "fixtures" / "traces" / "openai_chat.jsonl"
    assert main(["import", "traces", str(traces), "--run-id", "logs"]) == 2
    assert "give --format openai-chat, openai-agents or otel-genai" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()
    assert main(["import", "traces", str(traces), "--format", "openai-chat", "--run-id", "logs"]) == 0
    written = (tmp_path / "logs" / "conversations.jsonl").read_text().splitlines()
    assert capsys.readouterr().out.startswith(f"{len(written)} conversations written")


@pytest.mark.slow
def test_tools_from_an_mcp_server_are_the_suites_tools(tmp_path):
    import json
    import sys

    from helpers import SAMPLE_SUITE
    from lobeval.cli import main

    out = tmp_path / "tools.json"
    server = f"{sys.executable} -m lobeval.samples.support_tickets.mcp_server"
    assert main(["tools", "--from-mcp", server, "--out", str(out)]) == 0
    listed = {tool["function"]["name"]: tool["effect"] for tool in json.loads(out.read_text())}
    assert listed == {tool["function"]["name"]: tool["effect"]
                      for tool in json.loads((SAMPLE_SUITE / "tools.json").read_text())}


# --- lobeval calibrate and lobeval quarantine ---------------------------------------------------------

def judge_label(case_id, judge_value, human_value, judge_model):
    return {"kind": "judge_verdict", "case_id": case_id, "trial": 0, "judge": "goal", "criterion": "goal",
            "judge_value": judge_value, "verdict": "agree" if judge_value == human_value else "disagree",
            "human_value": human_value, "judge_model": judge_model, "run_id": "r1", "id": case_id}


@pytest.mark.parametrize("command", ["calibrate", "quarantine"])
def test_calibrate_and_quarantine_have_help(capsys, command):
    with pytest.raises(SystemExit) as exit_status:
        main([command, "--help"])
    text = capsys.readouterr().out
    assert exit_status.value.code == 0 and "--suite" in text and "SPEC" not in text


def test_calibrate_without_judge_labels_says_how_to_add_them(tmp_path, capsys):
    assert main(["calibrate", "--suite", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0 labels" in out and "replay widget" in out


def test_calibrate_a_run_whose_labels_were_all_given_on_other_judges_says_how_many_and_why(tmp_path, capsys):
    from helpers import RESULTS, make_run
    from lobeval.core.records import write_jsonl

    write_jsonl(tmp_path / "labels.jsonl", [{**judge_label("c-1", 1, 1, "judge-a"), "judge_prompt": "aaaa11112222"},
                                            {**judge_label("c-2", 1, 0, "judge-a"), "judge_prompt": "aaaa11112222"},
                                            {**judge_label("c-3", 0, 0, "judge-b"), "judge_prompt": "bbbb33334444"}])
    run = make_run(tmp_path, "r1", {**RESULTS, "config": {"suite": str(tmp_path), "judge_model": "judge-b",
                                                          "judge_prompt": "cccc55556666"}})
    assert main(["calibrate", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert "no judge labels yet" not in out
    assert ("no judge label counts for this run (judge model judge-b with prompts cccc55556666): all 3 were left "
            "out, 2 on another judge model and 1 on other judge prompts: a label is about the verdict of the judge "
            "model and prompts that gave it") in out
    assert "replay widget" in out


def test_calibrate_a_run_counts_only_the_labels_on_its_judge_model(tmp_path, capsys):
    from helpers import RESULTS, make_run
    from lobeval.core.records import write_jsonl

    write_jsonl(tmp_path / "labels.jsonl", [judge_label("c-1", 1, 1, "judge-a"), judge_label("c-2", 1, 0, "judge-a"),
                                            judge_label("c-3", 0, 0, "judge-a"), judge_label("c-4", 1, 1, "judge-b")])
    run = make_run(tmp_path, "r1", {**RESULTS, "config": {"suite": str(tmp_path), "judge_model": "judge-a"}})
    assert main(["calibrate", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert "3 labels (judge model judge-a); left out: 1 on another judge model" in out
    assert "goal/goal (0/1): 3 labels, agreement 0.67 [" in out and ", κ 0.40 [" in out
    assert "goal/goal: rows the analyst's value, columns the judge's" in out
    # a run scored with another labels file (evaluate --labels) is calibrated on that file, as its report is
    other = tmp_path / "other"
    other.mkdir()
    write_jsonl(other / "mine.jsonl", [judge_label("c-9", 1, 1, "judge-a")])
    run = make_run(tmp_path, "r2", {**RESULTS, "config": {"suite": str(tmp_path), "judge_model": "judge-a",
                                                          "labels_path": str(other / "mine.jsonl")}})
    assert main(["calibrate", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"labels: {other / 'mine.jsonl'}" in out and "1 label (judge model judge-a)" in out
    assert main(["calibrate", "--labels", str(tmp_path / "labels.jsonl")]) == 0
    assert "4 labels (every judge model)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, named", [
    (["calibrate"], "give --suite, --labels, or --run"),
    (["calibrate", "--suite", "no/such/suite"], "--suite no/such/suite: not a folder"),
    (["calibrate", "--labels", "no/such/labels.jsonl"], "no/such/labels.jsonl"),
    (["calibrate", "--run", "no/such/run"], "--run no/such/run: the folder "),
])
def test_calibrate_refuses_what_it_cannot_read(capsys, argv, named):
    assert main(argv) == 2
    assert named in one_error_line(capsys)


def test_calibrate_names_the_line_and_field_of_a_bad_label(tmp_path, capsys):
    (tmp_path / "labels.jsonl").write_text(json.dumps({**judge_label("c-1", 1, 1, None), "judge_value": 3}) + "\n")
    assert main(["calibrate", "--suite", str(tmp_path)]) == 2
    assert one_error_line(capsys) == (f"lobeval calibrate: error: {tmp_path / 'labels.jsonl'}: line 1: field "
                                      "'judge_value': must be one of 0, 1 (the 0/1 scale), got 3")


def test_quarantine_adds_lists_and_revokes(tmp_path, capsys):
    from lobeval.core.records import read_labels

    path = tmp_path / "labels.jsonl"
    assert main(["quarantine", "t-001", "t-002", "--suite", str(tmp_path), "--note", "flaky", "--author", "ana"]) == 0
    first, second = read_labels(path)
    assert (first["kind"], first["case_id"], second["case_id"], first["note"], first["author"]) == (
        "quarantined_case", "t-001", "t-002", "flaky", "ana")
    assert f"quarantined t-001 (label {first['id']})" in capsys.readouterr().out
    assert main(["quarantine", "--suite", str(tmp_path), "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith(f"{first['id']}  t-001  ana  ") and listed[0].endswith("flaky")
    assert listed[-1] == f"2 quarantined case(s) in {path}"
    assert main(["quarantine", "--suite", str(tmp_path), "--revoke", first["id"]]) == 0
    assert [label["case_id"] for label in read_labels(path)] == ["t-002"]


@pytest.mark.parametrize("argv, named", [
    (["t-001"], "field 'note': is required: why the case is quarantined"),
    (["t-001", "--note", "flaky", "--list"], "give case IDs, --list or --revoke ID (one of them)"),
    ([], "give case IDs, --list or --revoke ID"),
    (["--revoke", "nope"], "no quarantined_case label with id 'nope'"),
    (["t-002", "--note", "again"], "case 't-002' is already quarantined by label"),
])
def test_quarantine_refuses_bad_input_and_writes_nothing(tmp_path, capsys, argv, named):
    from lobeval.core.records import write_jsonl

    path = write_jsonl(tmp_path / "labels.jsonl", [{"kind": "quarantined_case", "case_id": "t-002", "note": "flaky",
                                                    "id": "q1"}])
    before = path.read_bytes()
    assert main(["quarantine", *argv, "--suite", str(tmp_path)]) == 2
    assert named in one_error_line(capsys)
    assert path.read_bytes() == before
