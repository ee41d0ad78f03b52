"""`lobeval run`: the five stage notebooks, executed with papermill into runs/<run_id>/.

Each stage's executed notebook is kept in the run folder; what a stage hands the next is read
back from its scrapbook glue. A stage whose executed notebook already holds its glue is not run
again, so starting a run again with the same id resumes it (simulation also resumes inside its
stage); a notebook that cannot be read (torn by a kill while papermill wrote it) runs again. The
report is the last notebook exported to HTML; `runs/index.jsonl` lists finished runs.

Before stage 01, everything the chain needs is checked (`preflight`: the suite, the target, the gate's
metrics, the models the options ask for; an HTTP target and every model endpoint the run will ask answer one
request), so that a mistake or a stopped bot exits at once and writes nothing.
One process owns a run folder while the chain runs (`runs.owned`). The values of the key
variables never stay on disk: after every stage, whatever the run folder holds is scrubbed of them.
"""
from __future__ import annotations

import difflib
import logging
import os
import platform
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import nbformat
import papermill
import scrapbook
from nbconvert.filters import strip_ansi

from lobeval.core import checkout
from lobeval.workflow import roles
from lobeval.workflow.run_kernel import RunKernel
from lobeval.workspace import runs
from lobeval.analysis.compare import (DEFAULT_GATE, DEFAULT_MAX_ERROR_RATE, DEFAULT_MAX_USER_FAULT_RATE, GATE_METRICS,
                             check_line, check_min_rule)
from lobeval.core.errors import ConfigError, LobevalError, StageCrashed
from lobeval.generation.generate import build_cases
from lobeval.models.llm import ROLES, resolve_model, resolve_tools, run_sync
from lobeval.core.records import MACHINERY_ERRORS, SCHEMA_VERSION, iter_jsonl, read_results, write_json
from lobeval.core.stats import figure_lines, left_out_notes, unchecked_note
from lobeval.workspace.suite import Suite, load_suite
from lobeval.targets.targets import check_target, where_it_runs
from lobeval.core.vocabulary import AZURE_JUDGES, TURN_CRITERIA

# Each stage, and the glue the next stages need from it with its type (its presence marks the stage as done).
STAGES: dict[str, dict[str, type]] = {
    "01_generate": {"dataset_path": str},
    "02_simulate": {"conversations_path": str, "terminations": dict},
    "03_evaluate": {"results_path": str, "metrics": dict, "counts": dict},
    "04_error_analysis": {"top_clusters": list},
    "05_report": {"gate_passed": bool, "gate_checks": list, "verdict": str, "compared": str, "failing": list},
}
FIRST_STAGE = next(iter(STAGES))
MAX_TURNS = 20
OPTIONAL_OPTIONS = {"batch": False, "max_turns": MAX_TURNS}
"""Options config.json holds only when not at their default (shown here), so that a run begun before they existed
resumes."""
RECORDED_SINCE = ("suite_digest",)
"""What config.json records that a run begun before lobeval recorded it lacks: it resumes all the same."""
SCENARIOS = "scenarios"
LEDGER = "LOBEVAL_BUDGET_LEDGER"
PACKAGES = ("lobeval", "openai", "azure-ai-evaluation", "pandas", "papermill", "scrapbook", "nbconvert")
log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: Path
    report: Path
    metrics: dict[str, Any]
    counts: dict[str, Any]
    gate_passed: bool
    gate_checks: list[dict[str, Any]]
    results: dict[str, Any] = field(default_factory=dict)   # evaluation_results.json without its rows
    executed: list[Path] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the run says about itself before its stages: the options a resumed run changed and what it kept."""
    verdict: str = ""
    """The report's verdict in one sentence (`report.verdict_sentence`): the same words as on its first line."""
    compared: str = ""
    """Which earlier run the gate compared this one with and why, or that there was none (`report.comparison_text`)."""
    failing: list[str] = field(default_factory=list)
    """The failing conversations in a line or two (`report.failing_lines`); none when none failed."""

    def summary(self) -> list[str]:
        """What `lobeval run` prints: the stages, the verdict, the numbers, what the run was compared with, the gate's
        checks, the failing conversations, the gate, and the report last."""
        lines = list(self.notes)
        lines += [f"kept from the earlier attempt: {stage}" for stage in self.resumed]
        lines += [f"executed {path}" for path in self.executed]
        lines += [self.verdict] if self.verdict else []
        lines.append(f"{self.counts.get('scored', 0)} conversations scored, {self.counts.get('errors', 0)} machinery errors")
        lines += left_out_notes(self.counts)
        if self.counts.get("user_unchecked"):
            lines.append(unchecked_note(self.counts["user_unchecked"]))
        lines += figure_lines(self.results)
        lines += [f"baseline: {self.compared[:1].lower()}{self.compared[1:]}"] if self.compared else []
        lines += [check_line(check) for check in self.gate_checks]
        lines += self.failing
        lines.append(f"gate: {'passed' if self.gate_passed else 'FAILED'} · run folder {self.run_dir}")
        lines.append(str(self.report))
        return lines


def run(*, suite: str | Path, run_id: str | None = None, cases_per_scenario: int = 3, seed: int = 42,
        target: str | None = None, user: str = "scripted", trials: int = 1, concurrency: int = 4,
        judges: list[str] | None = None, gate: dict[str, float] | None = None,
        max_error_rate: float = DEFAULT_MAX_ERROR_RATE, target_timeout: float = 60.0,
        retry_errors: bool = False, include_user_faults: bool = False, min_rule: str = "point",
        max_user_fault_rate: float = DEFAULT_MAX_USER_FAULT_RATE, attacks: str | None = None,
        attack_roles: list[str] | None = None, batch: bool = False, max_turns: int = MAX_TURNS) -> RunResult:
    """Run the chain; the result carries the gate's verdict (the report's, so both always agree).
    Everything the chain needs is checked first (`preflight`): a mistake found there writes nothing.
    `include_user_faults`: keep the conversations with simulated-user faults in the bot's metrics.
    `min_rule`: how the gate reads a minimum (`compare.gate`); "point" here, so that a run of a few dozen
    conversations still fails a bot below its minimums."""
    notebooks_dir()
    if run_id is not None and imported_run(runs.run_folder(run_id)) is not None:
        return run_imported(runs.run_folder(run_id), judges=judges, gate=gate, max_error_rate=max_error_rate,
                            include_user_faults=include_user_faults, min_rule=min_rule,
                            max_user_fault_rate=max_user_fault_rate)
    spec = find_suite(suite)
    run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.name}"
    run_dir = runs.run_folder(run_id)
    config = {"run_id": run_id, "suite": str(spec.dir), "suite_name": spec.name,
              "suite_digest": runs.suite_digest(spec), "seed": seed,
              "cases_per_scenario": cases_per_scenario, "target": where_it_runs(target or spec.default_target),
              "user": user, "trials": trials, "concurrency": concurrency, "judges": judges,
              "gate": gate or DEFAULT_GATE,
              "max_error_rate": max_error_rate, "max_user_fault_rate": max_user_fault_rate, "min_rule": min_rule,
              "include_user_faults": include_user_faults, "attacks": attacks,
              **({"attack_roles": attack_roles} if attack_roles else {}),   # absent: a run begun before it resumes
              **({"batch": True} if batch else {}),   # absent when off: a run begun before --batch resumes
              **({"max_turns": max_turns} if max_turns != MAX_TURNS else {})}
    models = preflight(config, target_timeout)
    expected = estimate_by_role(config)
    with runs.owned(run_dir), budget_ledger(run_dir), kernel_pythonpath(), \
            environ(roles.BATCH_CHECKED, "1" if config.get("batch") else None):   # preflight looked
        resumption = start_or_resume(run_dir, config, models, expected)
        config = resumption.config
        secret_values = runs.secrets()
        runs.scrub_folder(run_dir, secret_values)   # what a killed attempt may have left
        parameters = {
            "01_generate": {"suite": config["suite"], "cases_per_scenario": cases_per_scenario, "seed": seed,
                            "attacks": attacks, "attack_roles": config.get("attack_roles"),
                            "out": str(run_dir / "dataset.jsonl")},
            "02_simulate": lambda glue: {"run_dir": str(run_dir), "dataset": glue["dataset_path"],
                                         "target": config["target"], "user": user, "trials": trials,
                                         "concurrency": concurrency, "target_timeout": target_timeout,
                                         "max_turns": max_turns,
                                         "retry_errors": retry_errors, "out": str(run_dir / "conversations.jsonl")},
        }
        again = "02_simulate" if retry_errors and machinery_errors(run_dir / "conversations.jsonl") else resumption.again
        result = evaluate_and_report(run_dir, config, parameters, secret_values, again=again)
        result.notes = resumption.notes + what_ran(config, models)
        return result


def what_ran(config: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """Which target, simulated user and judges ran, each role with its model and endpoint: a model named in the
    environment changes what runs (the sample bot runs its model policy when the target role has a model, and
    LOBEVAL_TOOLS, recorded with the target's model, how that model is given its functions)."""
    def model(role: str) -> str:
        found = models.get(role)
        return "no model" if not found else f"{found['model']} at {found.get('base_url') or found['provider']}"

    target = config["target"] or roles.DEFAULT_TARGET
    if target == roles.DEFAULT_TARGET:
        bot = f"its {'llm policy, ' + model('target') if models.get('target') else 'rules policy (no target model)'}"
    else:
        bot = f"the target role: {model('target')}, for a bot that asks for it (a model-and-prompt target)"
    if (models.get("target") or {}).get("tools") == "prompted":
        bot += ", its functions described in the prompt (LOBEVAL_TOOLS=prompted)"
    judges = config["judges"] or []
    judged = ("switched off (--judges none)" if judges == ["none"] else "not run (no judge model)"
              if not models.get("judge") else f"{', '.join(judges) or 'the default set'}, {model('judge')}")
    return [f"target {target}: {bot}",
            f"simulated user: {'scripted' if config['user'] == 'scripted' else model('user')}",
            f"judges: {judged}{' (--batch)' if config.get('batch') else ''}"]


def machinery_errors(conversations: Path) -> int:
    """How many conversations of an earlier attempt ended in a machinery error (none when there was no attempt)."""
    if not conversations.exists():
        return 0
    records = iter_jsonl(conversations, torn_end=True)
    return sum(record["termination"]["reason"] in MACHINERY_ERRORS for _, record in records)


def imported_run(run_dir: Path) -> dict[str, Any] | None:
    """The configuration of a run folder written by `lobeval import` (a benchmark run), or None."""
    if not (run_dir / runs.CONFIG_FILE).exists():
        return None
    config = runs.read_config(run_dir)
    return config if config.get("imported") else None


def run_imported(run_dir: Path, *, judges: list[str] | None, gate: dict[str, float] | None,
                 max_error_rate: float, include_user_faults: bool = False, min_rule: str = "point",
                 max_user_fault_rate: float = DEFAULT_MAX_USER_FAULT_RATE) -> RunResult:
    """An imported run has its dataset and conversations already: the chain starts at evaluation."""
    check_gate_metrics(gate or DEFAULT_GATE)
    check_min_rule(min_rule)
    roles.check(user="scripted", judges=judges)
    run_sync(roles.check_reachable(None, roles.models_used(judge=True, embedding=True)))
    with runs.owned(run_dir), budget_ledger(run_dir), kernel_pythonpath():
        earlier = runs.read_config(run_dir)
        config = {**earlier, "gate": gate or DEFAULT_GATE, "max_error_rate": max_error_rate,
                  "max_user_fault_rate": max_user_fault_rate, "min_rule": min_rule, "judges": judges,
                  "include_user_faults": include_user_faults}
        again = runs_again_from(changed_options(earlier, config))
        write_json(run_dir / runs.CONFIG_FILE, config)
        conversations = run_dir / "conversations.jsonl"
        given = {"01_generate": {"dataset_path": str(run_dir / "dataset.jsonl")},
                 "02_simulate": {"conversations_path": str(conversations), "terminations": dict(Counter(
                     record["termination"]["reason"] for _, record in iter_jsonl(conversations)))}}
        return evaluate_and_report(run_dir, config, {}, runs.secrets(), given, again)


def evaluate_and_report(run_dir: Path, config: dict[str, Any], parameters: dict[str, Any], secret_values: list[str],
                        given: dict[str, dict[str, Any]] | None = None, again: str | None = None) -> RunResult:
    """The stages from evaluation on (after `parameters`' earlier ones), the report, the index entry.
    `again`: the stage from which every stage runs again, finished or not."""
    index = runs.index_path()
    parameters = {
        **parameters,
        "03_evaluate": lambda glue: {"run_dir": str(run_dir), "dataset": glue["dataset_path"],
                                     "conversations": [glue["conversations_path"]], "suite": config["suite"],
                                     "judges": config["judges"], "include_user_faults": config["include_user_faults"],
                                     "batch": config.get("batch", False),
                                     "out": str(run_dir / "evaluation_results.json")},
        "04_error_analysis": lambda glue: {"results": glue["results_path"], "conversations": [glue["conversations_path"]],
                                           "suite": config["suite"], "out_dir": str(run_dir)},
        "05_report": lambda glue: {"run_dir": str(run_dir), "index": str(index)},
    }
    glue, executed, resumed = run_stages(run_dir, parameters, secret_values, given, again)
    report = export_report(run_dir / "05_report.ipynb", run_dir / "report.html", secret_values)
    runs.add_to_index(index, config, run_dir, glue["metrics"], glue["counts"])
    return RunResult(run_dir, report, glue["metrics"], glue["counts"], glue["gate_passed"], glue["gate_checks"],
                     read_results(glue["results_path"], rows=False), executed, resumed, verdict=glue["verdict"],
                     compared=glue["compared"], failing=glue["failing"])


def notebooks_dir() -> Path:
    """The stage notebooks: notebooks/ of the checkout (`checkout.root`)."""
    found = checkout.root()
    if found is None:
        raise ConfigError(f"no stage notebooks ({checkout.MARKER} ...) in {Path.cwd()} or a folder above it, nor "
                          f"beside the installed package: run lobeval inside its checkout")
    return found / checkout.NOTEBOOKS


def find_suite(suite: str | Path) -> Suite:
    """The suite; a folder without suite.json is named with the suites there are under scenarios/."""
    suite_dir = Path(suite).resolve()
    if (suite_dir / "suite.json").is_file():
        return load_suite(suite_dir)
    there = sorted(path.parent.name for path in ((checkout.root() or Path.cwd()) / SCENARIOS).glob("*/suite.json"))
    close = difflib.get_close_matches(suite_dir.name, there, n=1)
    guess = f"did you mean {SCENARIOS}/{close[0]}? " if close else ""
    listed = f"the suites under {SCENARIOS}/: {', '.join(there)}" if there else f"no suite under {SCENARIOS}/"
    raise ConfigError(f"--suite {suite}: no suite.json in {suite_dir}; {guess}{listed}")


def preflight(config: dict[str, Any], target_timeout: float) -> dict[str, Any]:
    """Check what the stages will need before any runs, so that a mistake costs no stage and writes nothing:
    the numbers, the gate's metric names, the target (imported, not built), the models the roles asked for
    need; last, that an HTTP target and the endpoint of every model the run will ask answer (one request each,
    `roles.check_reachable`). Returns the model of every role (what config.json records)."""
    for option, value in (("--cases-per-scenario", config["cases_per_scenario"]), ("--trials", config["trials"]),
                          ("--concurrency", config["concurrency"])):
        if value < 1:
            raise ConfigError(f"{option} {value}: must be at least 1")
    if not target_timeout > 0:
        raise ConfigError(f"--target-timeout {target_timeout:g}: must be more than 0 seconds")
    for option in ("max_error_rate", "max_user_fault_rate"):
        if not 0 <= config[option] <= 1:
            raise ConfigError(f"--{option.replace('_', '-')} {config[option]:g}: expected a share from 0 to 1")
    check_gate_metrics(config["gate"])
    check_min_rule(config["min_rule"])
    # every template, data file and the policy the attacks need
    build_cases(load_suite(config["suite"]), config["cases_per_scenario"], config["seed"], config["attacks"],
                config.get("attack_roles"))
    target = config["target"] or roles.DEFAULT_TARGET
    check_target(target, config["concurrency"])
    roles.check(user=config["user"], judges=config["judges"], batch=config.get("batch", False))
    run_sync(roles.check_reachable(target, roles.models_used(target=target, user=config["user"], judge=True,
                                                             embedding=True)))
    return resolved_models()


def check_gate_metrics(gate: dict[str, float]) -> None:
    """Every `--min` names a metric a run can measure (a close name is offered)."""
    known = gate_metrics()
    for name in gate:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            guess = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"--min {name}={gate[name]:g}: unknown metric {name!r}; {guess}"
                              f"known: {', '.join(known)} (docs/metrics.md)")


def gate_metrics() -> list[str]:
    """The metrics a gate can check: the scores, pass^1 and every judge figure."""
    judged = ("final_score", "turn_success_ratio", "goal", *TURN_CRITERIA, *AZURE_JUDGES)
    return list(dict.fromkeys((*GATE_METRICS, *(f"judge.{name}" for name in judged))))


def run_stages(run_dir: Path, parameters: dict[str, Any], secret_values: list[str],
               given: dict[str, dict[str, Any]] | None = None,
               again: str | None = None) -> tuple[dict[str, Any], list[Path], list[str]]:
    """Each stage not finished yet, in order: (the glue of all, the notebooks executed, the stages kept).
    `given`: the glue of stages whose records came from elsewhere (an imported run), which do not run.
    `again`: from this stage on, every stage runs even if it had finished."""
    glue: dict[str, Any] = {}
    executed, resumed = [], []
    rerun = list(STAGES)[list(STAGES).index(again):] if again else []
    kernel = RunKernel()
    try:
        for stage, needed in STAGES.items():
            if stage in (given or {}):
                glue.update(given[stage])
                continue
            output = run_dir / f"{stage}.ipynb"
            done = None if stage in rerun else finished_glue(output, needed)
            if done is not None:
                resumed.append(stage)
            else:
                stage_parameters = parameters[stage] if isinstance(parameters[stage], dict) else parameters[stage](glue)
                execute_stage(stage, run_dir, stage_parameters, secret_values, kernel=kernel)
                executed.append(output)
                done = finished_glue(output, needed)
                if done is None:
                    raise LobevalError(f"stage {stage} finished without gluing {', '.join(needed)}; "
                                       f"see the executed notebook {output}")
            glue.update(done)
    finally:
        kernel.close()
    return glue, executed, resumed


@contextmanager
def kernel_pythonpath() -> Iterator[None]:
    """The stage kernels run in the run folder: a relative PYTHONPATH entry (`PYTHONPATH=bots lobeval run`)
    must name there what it named here, or the bot that passed the pre-flight cannot be imported."""
    earlier = os.environ.get("PYTHONPATH")
    if earlier:
        os.environ["PYTHONPATH"] = os.pathsep.join(str(Path(entry).resolve()) if entry else entry
                                                   for entry in earlier.split(os.pathsep))
    try:
        yield
    finally:
        if earlier:
            os.environ["PYTHONPATH"] = earlier


def budget_ledger(run_dir: Path) -> AbstractContextManager[None]:
    """With a budget (LOBEVAL_BUDGET_USD), every stage of the run spends from one ledger, runs/<id>/budget.json."""
    return environ(LEDGER, str(run_dir / runs.BUDGET_FILE) if os.environ.get("LOBEVAL_BUDGET_USD") else None)


@contextmanager
def environ(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` in our environment, which papermill's kernels inherit, while the run lasts (None:
    left as it is)."""
    earlier = os.environ.get(name)
    if value is None:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        if earlier is None:
            del os.environ[name]
        else:
            os.environ[name] = earlier


def estimate_by_role(config: dict[str, Any]) -> dict[str, float | None]:
    """The estimated cost per conversation of each role (lobeval.workflow.estimate), kept in config.json so that the report
    sets it beside the bill."""
    from lobeval.workflow.estimate import estimate

    found = estimate(config["suite"], cases_per_scenario=config["cases_per_scenario"], seed=config["seed"],
                     trials=config["trials"], user=config["user"], judges=config["judges"], attacks=config["attacks"],
                     target=config["target"], batch=config.get("batch", False), attack_roles=config.get("attack_roles"),
                     max_turns=option(config, "max_turns"))
    return {row["role"]: row["per_conversation_usd"] for row in found.rows()}


RUNS_AGAIN_FROM = {"judges": "03_evaluate", "batch": "03_evaluate", "include_user_faults": "03_evaluate",
                   "gate": "05_report", "max_error_rate": "05_report", "max_user_fault_rate": "05_report",
                   "min_rule": "05_report", "concurrency": None}
"""The options a run that has begun may be resumed with changed, and the stage from which it then runs again (the
stages before it are kept: judging is redone without simulating again); None: it only sets the speed of the stages
still to run. Any other option changed (what is generated or simulated) is refused."""


@dataclass
class Resumption:
    """How a run starts or resumes: its configuration, the stage from which everything runs again (None: only what
    has not finished), and what to say about the options that changed."""

    config: dict[str, Any]
    again: str | None = None
    notes: list[str] = field(default_factory=list)


def start_or_resume(run_dir: Path, config: dict[str, Any], models: dict[str, Any],
                    expected: dict[str, float | None] | None = None) -> Resumption:
    """Write config.json for a new run (with `expected`, the estimated cost per conversation by role); for an
    existing one, compare the configuration asked for now: an option of RUNS_AGAIN_FROM changed runs the stages
    from the one it names again (config.json then records the new options); any other changed is a ConfigError,
    raised before anything is written, unless the first stage never finished: a run that failed at its start starts
    again with the configuration asked for now. A damaged config.json is a RecordError either way."""
    path = run_dir / runs.CONFIG_FILE
    if not path.exists():
        return Resumption(_write_config(path, config, models, expected))
    earlier = runs.read_config(run_dir)
    changed = changed_options(earlier, config)
    if not changed:
        return Resumption(earlier)
    if finished_glue(run_dir / f"{FIRST_STAGE}.ipynb", STAGES[FIRST_STAGE]) is None:
        return Resumption(_write_config(path, config, models, expected))
    refused = [key for key in changed if key not in RUNS_AGAIN_FROM]
    said = {key: f"{key}: {option(earlier, key)!r} then, {option(config, key)!r} now" for key in changed}
    if refused:
        raise ConfigError(f"run {config['run_id']} exists with another configuration "
                          f"({', '.join(said[key] for key in refused)}); resume it with the same options (only "
                          f"{', '.join(key for key in RUNS_AGAIN_FROM)} may change) or choose another --run-id")
    stages, again = list(STAGES), runs_again_from(changed)
    kept = [stage for stage in stages[:stages.index(again) if again else len(stages)]
            if finished_glue(run_dir / f"{stage}.ipynb", STAGES[stage]) is not None]
    notes = [f"resuming run {config['run_id']} with other options: {'; '.join(said.values())}",
             f"kept: {', '.join(kept) or 'nothing'}; "
             + (f"run again from {again} with the new options" if again else "the stages still to run use them")]
    written = _write_config(path, config, models, expected, started=earlier.get("started"))
    return Resumption(written, again, notes)


def runs_again_from(changed: list[str]) -> str | None:
    """The first stage the options `changed` make run again (RUNS_AGAIN_FROM), None when no finished stage must."""
    stages = list(STAGES)
    return min((RUNS_AGAIN_FROM[key] for key in changed if RUNS_AGAIN_FROM.get(key)), key=stages.index, default=None)


def changed_options(earlier: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The options of `config` whose value differs from a run's earlier config.json (of those recorded since a
    run began, RECORDED_SINCE, only those it recorded)."""
    return [key for key in dict.fromkeys([*config, *OPTIONAL_OPTIONS]) if option(earlier, key) != option(config, key)
            and (key in earlier or key not in RECORDED_SINCE)]


def option(config: dict[str, Any], key: str) -> Any:
    """An option's value in a run's configuration (those of OPTIONAL_OPTIONS are absent when at their default)."""
    return config.get(key, OPTIONAL_OPTIONS.get(key))


def _write_config(path: Path, config: dict[str, Any], models: dict[str, Any],
                  expected: dict[str, float | None] | None, started: str | None = None) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"schema_version": SCHEMA_VERSION, **config, "models": models, "estimate": expected or {},
                      "versions": versions(), "started": started or time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return config


def resolved_models() -> dict[str, Any]:
    """Each role's model (provider, name, endpoint; for the target role, `tools`: LOBEVAL_TOOLS): never a key, which
    lives only in the environment."""
    models = {}
    for role in ROLES:
        config = resolve_model(role)
        models[role] = config.describe() if config else None
    if models["target"] is not None:
        models["target"]["tools"] = resolve_tools()   # how the bot's model is given its functions (LOBEVAL_TOOLS)
    return models


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def finished_glue(notebook: Path, needed: dict[str, type]) -> dict[str, Any] | None:
    """The glue of an executed notebook that ran to the end, or None: also when the notebook cannot be
    read (torn by a kill while papermill wrote it) or its glue is not what the stage glues, so the stage
    runs again."""
    if not notebook.exists():
        return None
    try:
        book = scrapbook.read_notebook(str(notebook))
        scraps = {name: scrap.data for name, scrap in book.scraps.items()}
    except Exception as exc:  # nbformat, jsonschema and scrapbook each raise their own; any of them means "run again"
        log.warning("%s cannot be read (%s: %s): its stage runs again", notebook, type(exc).__name__, exc)
        return None
    if book.metadata.get("papermill", {}).get("exception"):
        return None
    if not all(name in scraps for name in needed):
        return None
    wrong = [name for name, kind in needed.items() if not isinstance(scraps[name], kind)]
    if wrong:
        log.warning("%s: glue %s is not what the stage glues: its stage runs again", notebook, ", ".join(wrong))
        return None
    return scraps


def execute_stage(stage: str, run_dir: Path, parameters: dict[str, Any], secret_values: list[str], *,
                  kernel: RunKernel) -> Path:
    """Execute one stage notebook into the run folder on the run's kernel, then scrub the folder of `secret_values`;
    a failure names the kept notebook. A LobevalError raised in the notebook is bad input, as in this process;
    anything else it raises is lobeval's fault (StageCrashed, with the kernel's traceback)."""
    source = notebooks_dir() / f"{stage}.ipynb"
    declared = papermill.inspect_notebook(str(source))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ConfigError(f"{source}: its parameters cell does not declare {', '.join(unknown)}")
    output = run_dir / f"{stage}.ipynb"
    try:
        papermill.execute_notebook(str(source), str(output), parameters=parameters, cwd=str(run_dir),
                                   **kernel.papermill_options(stage))
    except papermill.PapermillExecutionError as exc:
        error = runs.scrub(f"{exc.ename}: {exc.evalue}", secret_values)
        if exc.ename not in bad_input_names():
            trace = "\n".join(strip_ansi(line) for line in exc.traceback)
            raise StageCrashed(stage, output, error, runs.scrub(trace, secret_values)) from None
        raise LobevalError(f"stage {stage} failed ({error}); the executed notebook is kept at {output}") from None
    finally:
        runs.scrub_folder(run_dir, secret_values)
    return output


def bad_input_names() -> set[str]:
    """The names of LobevalError and its subclasses: a stage's exception is known by its class name alone (papermill's
    `ename`)."""
    names, classes = set(), [LobevalError]
    while classes:
        kind = classes.pop()
        names.add(kind.__name__)
        classes += kind.__subclasses__()
    return names


def export_report(notebook: Path, html: Path, secret_values: list[str]) -> Path:
    from lobeval.analysis.report import to_html

    report = runs.scrub(to_html(nbformat.read(str(notebook), as_version=4)), secret_values)
    tmp = html.with_suffix(".html.tmp")
    tmp.write_text(report, encoding="utf-8")
    tmp.replace(html)
    return html
