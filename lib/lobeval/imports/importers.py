"""Published benchmark runs (τ-bench, τ²-bench) as lobeval run folders, to check lobeval's verdicts against theirs.

`import_tau_bench` reads a τ-bench results file (what its `run.py` writes, or a file of its
`historical_trajectories/`); `import_tau2` reads a τ²-bench run in any of the shapes it is published in: its
`results.json` (or the folder with `results.json` and `simulations/*.json`), a leaderboard submission's
`{domain, agent, model, simulations}` or a bare list of simulations (the last two without the tasks). Each
writes a run folder like any other (docs/formats.md):

- `suite/`: `suite.json` (the domain's name, no entities, reads optional, `think` ignored), `tools.json`
  (the functions of the tools source given, `--tools`, else τ²-bench's tool definitions when the run kept
  them, else every function the run names, with the arguments seen) and an empty `templates.json`;
- `dataset.jsonl`: one case per task, with what its user was told (`user_instructions`, `persona`), or
  `scenario_known: false` when the run does not publish it; `conversations.jsonl`: one per trajectory and
  trial, each call failed (`error`) however the run marks it;
- `reference.jsonl`: the benchmark's own verdict per (case, trial), for `lobeval.analysis.agreement`;
- `config.json`, naming the format, the source and what the import could not take from it (`imported.notes`).

The folder is written whole or not at all: everything is read and checked first, written into a
staging folder beside it, read back with lobeval's own readers, and renamed into place.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from lobeval.analysis.agreement import REFERENCE_FILE, read_reference
from lobeval.workspace.benchmark_tools import DOMAINS, known_effect
from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import (
    MACHINERY_ERRORS, SCHEMA_VERSION, STRICT, loads, read_cases, read_conversations, read_json, validated, write_json,
    write_jsonl,
)
from lobeval.workspace.runs import CONFIG_FILE, read_config
from lobeval.workspace.suite import EFFECTS, load_suite

SOLVED_TOLERANCE = 1e-6
"""Both benchmarks count a trial as solved when its reward is within this of 1."""
READ_PREFIXES = ("get_", "find_", "list_", "search_")
READ_NAMES = ("calculate", "think")
IGNORED_FUNCTIONS = ["think"]
"""Both benchmarks give the agent a `think` scratchpad that returns nothing and changes nothing, and neither
scores it: it is no function of the bot's business."""
RESPOND = "respond"
"""τ-bench writes the agent's replies to the user as actions of this name: they are messages, not calls."""
TAU_STOP = "###STOP###"
TAU_TOOL_ERRORS = ("Error:", "Unknown action")
"""τ-bench returns a tool's exception as text starting "Error:", and a call of a function it does not have
as "Unknown action <name>": either way the call was attempted but not done."""
TAU2_TOOL_ERROR = "Error:"
"""τ²-bench's environment answers a tool that raised with `ToolMessage(content=f"Error: {e}", error=True)`
(src/tau2/environment/environment.py, get_response); a run written by other code may keep the text and drop
the flag: either marks the call failed."""
TAU2_ENDINGS = {"user_stop": "user_finished", "agent_stop": "imported", "max_steps": "max_turns",
                "timeout": "max_turns", "too_many_errors": "target_error", "agent_error": "target_error",
                "unexpected_error": "target_error", "user_error": "llm_error",
                "infrastructure_error": "target_unavailable", "context_window_exceeded": "target_unavailable"}
"""τ²-bench's termination reasons as lobeval's. τ²-bench leaves infrastructure errors and an exceeded context
window out of its figures, and lobeval leaves machinery errors out: they map to target_unavailable. A failed
user simulator is lobeval's llm_error (never a score), although τ²-bench scores it 0. An unexpected error
cannot be told apart from the agent's own, and τ²-bench scores it 0: target_error."""
TAU2_INSTRUCTIONS = (("reason_for_call", "Reason for call"), ("known_info", "Known info"),
                     ("unknown_info", "Unknown info"), ("task_instructions", "Task instructions"))
RELINKS_SHOWN = 3
"""Simulations graded against another task than the one they name, listed in the import's summary (all of them
in config.json)."""
GRADED_CALLS = {"DB", "ACTION"}
"""A τ²-bench task's actions gate its reward only through these reward bases (the end state they leave, or
the calls themselves); with neither, they are one path among many and are imported as optional."""


# --- the benchmarks' records, as far as the import reads them -------------------------------------------

class _TauAction(BaseModel):
    model_config = STRICT

    name: str
    kwargs: dict[str, Any] = {}


class _TauTask(BaseModel):
    model_config = STRICT

    actions: list[_TauAction]
    instruction: str
    outputs: list[str] = []


class _TauInfo(BaseModel):
    model_config = STRICT

    task: _TauTask | None = None
    reward_info: dict[str, Any] | None = None
    error: str | None = None
    """Set by τ-bench's run.py when the agent raised: the record then has no task and no trajectory."""


class _TauFunction(BaseModel):
    model_config = STRICT

    name: str
    arguments: str | dict[str, Any] | None = None


class _TauToolCall(BaseModel):
    model_config = STRICT

    id: str | None = None
    function: _TauFunction


class _TauMessage(BaseModel):
    model_config = STRICT

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[_TauToolCall] | None = None
    tool_call_id: str | None = None


class _TauRecord(BaseModel):
    model_config = STRICT

    task_id: int | str
    trial: int | None = Field(None, ge=0)
    reward: float
    info: _TauInfo
    traj: list[_TauMessage]


class _Tau2Action(BaseModel):
    model_config = STRICT

    requestor: Literal["user", "assistant"] = "assistant"
    name: str
    arguments: dict[str, Any] = {}
    compare_args: list[str] | None = None


class _Tau2Criteria(BaseModel):
    model_config = STRICT

    actions: list[_Tau2Action] | None = None
    communicate_info: list[str] | None = None
    reward_basis: list[str] = ["DB", "COMMUNICATE"]


class _Tau2Scenario(BaseModel):
    model_config = STRICT

    persona: str | None = None
    instructions: str | dict[str, Any]


class _Tau2Task(BaseModel):
    model_config = STRICT

    id: str
    user_scenario: _Tau2Scenario
    evaluation_criteria: _Tau2Criteria | None = None


class _Tau2ToolCall(BaseModel):
    model_config = STRICT

    id: str = ""
    name: str
    arguments: str | dict[str, Any] | None = None


class _Tau2ToolResult(BaseModel):
    model_config = STRICT

    id: str = ""
    content: str | None = None
    requestor: Literal["user", "assistant"] = "assistant"
    error: bool | None = False


class _Tau2Message(_Tau2ToolResult):
    role: Literal["system", "user", "assistant", "tool"]
    tool_calls: list[_Tau2ToolCall] | None = None
    tool_messages: list[_Tau2ToolResult] | None = None
    """τ²-bench's MultiToolMessage: the results of several calls made at once."""


class _Tau2Reward(BaseModel):
    model_config = STRICT

    reward: float


class _Tau2Simulation(BaseModel):
    model_config = STRICT

    id: str
    task_id: str | int
    trial: int | None = Field(None, ge=0)
    termination_reason: Literal[tuple(TAU2_ENDINGS)]  # type: ignore[valid-type]
    reward_info: _Tau2Reward | None = None
    messages: list[_Tau2Message] | None = None
    duration: float | None = None


class _Tau2ToolDef(BaseModel):
    model_config = STRICT

    doc: str = ""
    params: dict[str, Any] | None = None


class _Tau2Environment(BaseModel):
    model_config = STRICT

    domain_name: str
    tool_defs: dict[str, _Tau2ToolDef] | None = None


class _Tau2Info(BaseModel):
    model_config = STRICT

    environment_info: _Tau2Environment
    agent_info: dict[str, Any] | None = None


class _Tau2Results(BaseModel):
    model_config = STRICT

    info: _Tau2Info
    tasks: list[dict[str, Any]]
    simulations: list[dict[str, Any]] | None = None
    simulation_index: list[dict[str, Any]] | None = None


class _Tau2Submission(BaseModel):
    """A leaderboard submission's trajectory file in its short form: the run's simulations, without the tasks."""

    model_config = STRICT

    domain: str | None = None
    agent: str | None = None
    model: str | None = None
    simulations: list[dict[str, Any]]


@dataclass(frozen=True)
class _Tau2Run:
    """A τ²-bench run as read: where, its domain and agent when it names them, its tasks (None: it publishes
    none), the tool definitions it kept, and each simulation record with where it was read."""

    file: Path
    domain: str | None
    agent: str | None
    tasks: list[dict[str, Any]] | None
    tool_defs: dict[str, _Tau2ToolDef]
    simulations: list[tuple[_Source, Any]]


# --- a transcript, whichever benchmark wrote it ---------------------------------------------------------

class _Said(NamedTuple):
    """A user's or the assistant's message; `calls` are (call id, function name, arguments)."""

    role: str
    content: str | None
    calls: list[tuple[str, str, dict[str, Any]]]


class _Result(NamedTuple):
    """A tool's answer to the call with `call_id`; `error` set when the call failed."""

    call_id: str
    content: str | None
    error: str | None
    field: str


@dataclass(frozen=True)
class _Source:
    """Where a benchmark record was read: the file, and the record's name within it."""

    file: Path
    where: str


@dataclass(frozen=True)
class ImportResult:
    run_dir: Path
    format: str
    cases: int
    conversations: int
    effects: dict[str, str]
    """Each function of the suite and its effect (read or write)."""
    guessed: dict[str, str]
    """The functions no published domain has and no --effect named: their effect guessed from the name."""
    notes: tuple[str, ...] = ()
    """What the import could not take from the run, one line each: tasks the file does not publish, simulations
    graded against another task than the one they name, tools without a source."""

    def summary(self) -> list[str]:
        writes = sorted(name for name, effect in self.effects.items() if effect == "write")
        reads = sorted(name for name, effect in self.effects.items() if effect == "read")
        lines = [f"imported {self.cases} tasks and {self.conversations} trajectories ({self.format}) "
                 f"into {self.run_dir}",
                 f"writes: {', '.join(writes) or 'none'}",
                 f"reads (optional): {', '.join(reads) or 'none'}"]
        if self.guessed:
            lines += [f"guessed from the name (not a tool of a published domain): "
                      f"{', '.join(f'{name}={effect}' for name, effect in sorted(self.guessed.items()))}",
                      "a function taken for the wrong effect is corrected with --effect NAME=read|write"]
        return lines + list(self.notes)


def effect_of(name: str, given: Mapping[str, str]) -> tuple[str, bool]:
    """(effect, guessed): an --effect option, else the benchmark's own (benchmark_tools), else a guess from the name."""
    if name in given:
        return given[name], False
    known = known_effect(name)
    return (known, False) if known else (guess_effect(name), True)


def guess_effect(name: str) -> str:
    """The effect a function's name suggests: look-ups (get_, find_, list_, search_, calculate, think) read."""
    return "read" if name.startswith(READ_PREFIXES) or name in READ_NAMES else "write"


def parse_effects(pairs: Iterable[str]) -> dict[str, str]:
    """`--effect NAME=read|write` options as {name: effect}."""
    effects = {}
    for pair in pairs:
        name, _, effect = pair.partition("=")
        if not name or effect not in EFFECTS:
            raise ConfigError(f"--effect {pair!r}: write it as NAME=read or NAME=write")
        effects[name] = effect
    return effects


def solved(reward: float) -> float:
    return 1.0 if abs(reward - 1.0) <= SOLVED_TOLERANCE else 0.0


# --- τ-bench --------------------------------------------------------------------------------------------

def import_tau_bench(path: str | Path, run_dir: str | Path, *, domain: str | None = None,
                     effects: Mapping[str, str] | None = None, tools: str | None = None) -> ImportResult:
    """A τ-bench results file (a list of {task_id, trial, reward, info, traj}) as the run folder `run_dir`.

    The suite is named `domain` (default "tau-bench": τ-bench's files do not say theirs); every case's
    scenario is the domain too, as τ-bench's tasks have no category. `tools`: as for `import_tau2`.
    """
    path = Path(path)
    raw = read_json(path)
    if not isinstance(raw, list):
        raise RecordError(path, "file", None,
                          "must be a list of τ-bench results ({task_id, trial, reward, info, traj})")
    domain = domain or "tau-bench"
    records = [(_Source(path, f"record {index}"), validated(_TauRecord, item, path, f"record {index}"))
               for index, item in enumerate(raw)]
    cases: dict[str, dict[str, Any]] = {}
    for _, record in records:
        if record.info.task is not None:
            cases.setdefault(str(record.task_id), _tau_case(str(record.task_id), record.info.task, domain))
    trials = _trial_numbers((source, str(record.task_id), record.trial) for source, record in records)
    conversations, reference = [], []
    for (source, record), trial in zip(records, trials):
        case_id = str(record.task_id)
        if case_id not in cases:
            raise RecordError(path, source.where, "info.task", f"is missing, and no other record of task {case_id} "
                                                               f"carries it ({record.info.error or 'no error given'})")
        where = f"{source.where} (task {case_id}, trial {trial})"
        messages, calls, turns = _transcript(_tau_events(record.traj, path, where), path, where)
        reason, error = _tau_ending(record, messages)
        conversations.append(_conversation(case_id, trial, domain, messages, calls, reason, turns, error,
                                           simulator="tau-bench"))
        reference.append(_verdict(case_id, trial, record.reward,
                                  record.info.reward_info or {"note": _tau_no_reward(record)}))
    return _write_run(Path(run_dir), "tau-bench", path, domain, {}, list(cases.values()), conversations, reference,
                      effects or {}, tools)


def _tau_case(case_id: str, task: _TauTask, domain: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "case_id": case_id, "scenario_name": domain,
            "user_instructions": task.instruction,
            "expected_function_calls": [{"functionName": action.name, "arguments": action.kwargs}
                                        for action in task.actions if action.name != RESPOND],
            "expected_outputs": list(task.outputs), "forbidden_function_calls": [], "ordered": False}


def _tau_events(traj: list[_TauMessage], file: Path, where: str) -> Iterator[_Said | _Result]:
    for index, message in enumerate(traj):
        field = f"traj[{index}]"
        if message.role == "user":
            yield _Said("user", message.content or "", [])
        elif message.role == "assistant":
            yield _Said("assistant", message.content, [
                (call.id or "", call.function.name,
                 _arguments(call.function.arguments, file, where, f"{field}.tool_calls[{number}].function.arguments"))
                for number, call in enumerate(message.tool_calls or [])])
        elif message.role == "tool":
            failed = (message.content or "").startswith(TAU_TOOL_ERRORS)
            yield _Result(message.tool_call_id or "", message.content, message.content if failed else None, field)


def _tau_ending(record: _TauRecord, messages: list[dict[str, Any]]) -> tuple[str, str | None]:
    """τ-bench computes a reward only when an episode is done (the user said ###STOP###, or the agent called a
    terminating function such as transfer_to_human_agents); without one the episode ran out of steps."""
    if record.info.error is not None:
        return "target_error", record.info.error
    if record.info.reward_info is None:
        return "max_turns", None
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return ("user_finished" if TAU_STOP in last_user else "imported"), None


def _tau_no_reward(record: _TauRecord) -> str:
    if record.info.error is not None:
        return f"no reward was computed: the agent raised: {record.info.error}"
    return "no reward was computed: the episode did not end within the step limit"


# --- τ²-bench -------------------------------------------------------------------------------------------

def import_tau2(path: str | Path, run_dir: str | Path, *, domain: str | None = None,
                effects: Mapping[str, str] | None = None, tools: str | None = None) -> ImportResult:
    """A τ²-bench run as `run_dir`: its results.json (or the folder holding results.json and simulations/), a
    leaderboard submission's `{domain, agent, model, simulations}` or a bare list of simulations. The last two
    publish no tasks: each case then says its user scenario is unknown and holds no expectation.

    The suite is named `domain` (default: the run's own name for it, else "tau2"); every case's scenario is the
    domain too. `tools`: where the functions' definitions come from (`lobeval init --tools`' sources, τ²-bench's
    tools.py among them).
    """
    run = _tau2_run(Path(path))
    domain = domain or run.domain or "tau2"
    simulations = [(source, item, validated(_Tau2Simulation, item, source.file, source.where))
                   for source, item in run.simulations]
    notes: list[str] = []
    if run.tasks is None:
        cases = {str(simulation.task_id): _unknown_case(str(simulation.task_id), domain)
                 for _, _, simulation in simulations}
        links = [(str(simulation.task_id), simulation.trial) for _, _, simulation in simulations]
        notes.append(f"{run.file.name} publishes no tasks: each case's user scenario and expected calls are unknown "
                     f"(scenario_known and reference false): its conversations are scored only by what needs no "
                     f"reference, and the simulated-user checks that need the scenario do not run")
    else:
        tasks = _tau2_tasks(run)
        cases = {task_id: _tau2_case(task, domain) for task_id, (task, _) in tasks.items()}
        links, relinked = [], []
        for source, item, simulation in simulations:
            case_id, trial, candidates = _graded_case(item, str(simulation.task_id), simulation.trial, tasks)
            if case_id not in cases and len(candidates) > 1:   # graded against one of several alike tasks
                cases[case_id] = _either_case(case_id, [cases[task_id] for task_id in candidates])
            if case_id != str(simulation.task_id):
                relinked.append(f"{source.where}: {simulation.task_id} → {case_id}")
            links.append((case_id, trial))
        if relinked:
            notes.append(f"{len(relinked)} simulations name one task but were graded by τ²-bench against another "
                         f"(their reward_info holds that task's criteria): imported under the task graded, e.g. "
                         + ", ".join(relinked[:RELINKS_SHOWN]) + (", …" if len(relinked) > RELINKS_SHOWN else "")
                         + " (config.json: imported.relinked lists them all)")
    trials = _trial_numbers((source, case_id, trial) for (source, _, _), (case_id, trial) in zip(simulations, links))
    conversations, reference = [], []
    for (source, _, simulation), (case_id, _), trial in zip(simulations, links, trials):
        where = f"{source.where} (task {simulation.task_id}, trial {trial})"
        if run.tasks is not None and str(simulation.task_id) not in cases:
            raise RecordError(source.file, where, "task_id",
                              f"names task {simulation.task_id!r}, which {run.file.name} does not define")
        if simulation.messages is None:
            raise RecordError(source.file, where, "messages", "is missing: voice (full-duplex) simulations kept as "
                                                              "ticks are not supported")
        reason = TAU2_ENDINGS[simulation.termination_reason]
        if simulation.reward_info is None and reason not in MACHINERY_ERRORS:
            raise RecordError(source.file, where, "reward_info", "is missing: the simulation was not evaluated")
        messages, calls, turns = _transcript(_tau2_events(simulation.messages, source.file, where), source.file, where)
        error = None if simulation.termination_reason in ("user_stop", "agent_stop", "max_steps") else (
            f"τ²-bench ended the simulation: {simulation.termination_reason}")
        conversations.append(_conversation(case_id, trial, domain, messages, calls, reason, turns, error,
                                           simulator="tau2-bench", target=run.agent, duration=simulation.duration))
        if simulation.reward_info is not None:   # a machinery error the benchmark did not grade: no verdict
            reference.append(_verdict(case_id, trial, simulation.reward_info.reward,
                                      simulation.reward_info.model_dump()))
    defined = {name: {"description": tool.doc, "parameters": tool.params} for name, tool in run.tool_defs.items()}
    return _write_run(Path(run_dir), "tau2", Path(path), domain, defined, list(cases.values()), conversations,
                      reference, effects or {}, tools, notes, {"relinked": relinked} if run.tasks is not None else {})


def _tau2_run(path: Path) -> _Tau2Run:
    """The run at `path`, in any of its three shapes. As τ²-bench decides for its results: the simulations are
    the files of a `simulations/` folder beside results.json when there is one, else its `simulations` list."""
    results_file = path / "results.json" if path.is_dir() else path
    raw = read_json(results_file)
    if isinstance(raw, list):
        return _Tau2Run(results_file, None, None, None, {}, _listed_simulations(results_file, raw, ""))
    if isinstance(raw, dict) and "info" not in raw and "tasks" not in raw and "simulations" in raw:
        submission = validated(_Tau2Submission, raw, results_file, "file")
        return _Tau2Run(results_file, submission.domain, submission.model or submission.agent, None, {},
                        _listed_simulations(results_file, submission.simulations, "simulations"))
    if not isinstance(raw, dict):
        raise RecordError(results_file, "file", None, "must be a τ²-bench run: a results object ({info, tasks, "
                                                      "simulations}), a submission ({domain, simulations}) or a "
                                                      "list of simulations")
    results = validated(_Tau2Results, raw, results_file, "file")
    environment, agent_info = results.info.environment_info, results.info.agent_info or {}
    folder = results_file.parent / "simulations"
    if not folder.is_dir():
        sources = _listed_simulations(results_file, results.simulations or [], "simulations")
    else:
        files = sorted(folder.glob("*.json"))
        _check_index(results_file, folder, results.simulation_index, files)
        sources = [(_Source(file, f"simulation {file.stem}"), read_json(file)) for file in files]
    return _Tau2Run(results_file, environment.domain_name, agent_info.get("llm") or agent_info.get("implementation"),
                    results.tasks, environment.tool_defs or {}, sources)


def _listed_simulations(file: Path, items: list[Any], field: str) -> list[tuple[_Source, Any]]:
    return [(_Source(file, f"{field}[{index}]" if field else f"record {index}"), item)
            for index, item in enumerate(items)]


def _check_index(results_file: Path, folder: Path, index: list[dict[str, Any]] | None, files: list[Path]) -> None:
    if not isinstance(index, list):
        return
    listed = {entry.get("id") for entry in index if isinstance(entry, dict)}
    missing, extra = listed - {file.stem for file in files}, {file.stem for file in files} - listed
    if missing or extra:
        raise RecordError(results_file, "simulation_index", None,
                          f"does not match {folder}: " + "; ".join(
                              part for part in (missing and f"no file for {', '.join(sorted(map(str, missing)))}",
                                                extra and f"not listed: {', '.join(sorted(extra))}") if part))


def _tau2_tasks(run: _Tau2Run) -> dict[str, tuple[_Tau2Task, dict[str, tuple[str, ...]]]]:
    """Each task of the run by id, with the checks its evaluation criteria make (`_criteria_checks`)."""
    tasks: dict[str, tuple[_Tau2Task, dict[str, tuple[str, ...]]]] = {}
    for index, item in enumerate(run.tasks or []):
        task = validated(_Tau2Task, item, run.file, f"tasks[{index}]")
        if task.id in tasks:
            raise RecordError(run.file, f"tasks[{index}]", "id", f"task {task.id!r} is defined twice")
        tasks[task.id] = (task, _criteria_checks(item.get("evaluation_criteria") or {}))
    return tasks


def _tau2_case(task: _Tau2Task, domain: str) -> dict[str, Any]:
    criteria = task.evaluation_criteria or _Tau2Criteria()
    basis = set(criteria.reward_basis)
    optional = {} if basis & GRADED_CALLS else {"optional": True}
    instructions = task.user_scenario.instructions
    return {"schema_version": SCHEMA_VERSION, "case_id": task.id, "scenario_name": domain,
            "user_instructions": instructions if isinstance(instructions, str) else "\n".join(
                f"{label}: {instructions[key]}" for key, label in TAU2_INSTRUCTIONS if instructions.get(key)),
            "persona": task.user_scenario.persona or "",
            # the user's own actions (τ²-bench's dual control) are the simulated user's, not the bot's
            "expected_function_calls": [{"functionName": action.name, "arguments": _compared(action), **optional}
                                        for action in criteria.actions or [] if action.requestor == "assistant"],
            "expected_outputs": list(criteria.communicate_info or []) if "COMMUNICATE" in basis else [],
            "forbidden_function_calls": [], "ordered": False}


def _unknown_case(case_id: str, domain: str) -> dict[str, Any]:
    """The case of a task the run does not publish: what its user was told and what it expected are unknown."""
    return {"schema_version": SCHEMA_VERSION, "case_id": case_id, "scenario_name": domain, "user_instructions": "",
            "scenario_known": False, "reference": False, "expected_function_calls": [], "expected_outputs": [],
            "forbidden_function_calls": [], "ordered": False}


def _either_case(case_id: str, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The case of conversations graded against one of several tasks whose criteria the grade cannot tell apart:
    their expectations when the tasks share them (else none), the scenario unknown (it was one of theirs)."""
    first = candidates[0]
    shared = all(case[key] == first[key] for case in candidates
                 for key in ("expected_function_calls", "expected_outputs"))
    if not shared:
        return _unknown_case(case_id, first["scenario_name"])
    return {**first, "case_id": case_id, "user_instructions": "", "persona": "", "scenario_known": False}


_CHECKS = {"nl_assertions": "nl_assertion", "communicate_checks": "info", "action_checks": "action",
           "env_assertions": "env_assertion"}
"""The checks of τ²-bench's reward_info that name the criterion they checked, and the field that names it."""


def _criteria_checks(criteria: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """The criteria of a task as the checks of its reward_info would name them, each kind sorted."""
    named = {"nl_assertions": criteria.get("nl_assertions"), "communicate_checks": criteria.get("communicate_info"),
             "action_checks": criteria.get("actions"), "env_assertions": criteria.get("env_assertions")}
    return {kind: tuple(sorted(_criterion(kind, item) for item in items or [])) for kind, items in named.items()}


def _criterion(kind: str, item: Any) -> str:
    if kind == "action_checks" and isinstance(item, dict):
        item = {"name": item.get("name"), "arguments": item.get("arguments")}
    return item if isinstance(item, str) else json.dumps(item, sort_keys=True, default=str)


def _graded_checks(reward_info: Any) -> dict[str, tuple[str, ...]]:
    """The criteria a simulation's reward_info shows it was graded against: each kind of check it holds."""
    graded = {}
    for kind, field in _CHECKS.items():
        checks = reward_info.get(kind) if isinstance(reward_info, dict) else None
        if isinstance(checks, list) and checks:
            graded[kind] = tuple(sorted(_criterion(kind, check.get(field)) for check in checks
                                        if isinstance(check, dict)))
    return graded


def _graded_case(item: Any, task_id: str, trial: int | None,
                 tasks: dict[str, tuple[_Tau2Task, dict[str, tuple[str, ...]]]]) -> tuple[str, int | None, list[str]]:
    """(case id, trial, candidate tasks) of a simulation: the task it names, unless its reward_info holds checks
    of criteria that task does not have. Then the one task whose criteria they are; several with the same
    criteria make a case "A|B" (trial numbered in turn); none: the named task, for the error it will raise."""
    graded = _graded_checks(item.get("reward_info") if isinstance(item, dict) else None)
    if task_id not in tasks or not graded:
        return task_id, trial, [task_id]

    def fits(checks: dict[str, tuple[str, ...]]) -> bool:
        return all(checks[kind] == criteria for kind, criteria in graded.items())

    if fits(tasks[task_id][1]):
        return task_id, trial, [task_id]
    candidates = [other for other, (_, checks) in tasks.items() if fits(checks)]
    if len(candidates) == 1:
        return candidates[0], trial, candidates
    if candidates:
        return "|".join(candidates), None, candidates
    return task_id, trial, [task_id]


def _compared(action: _Tau2Action) -> dict[str, Any]:
    """The arguments τ²-bench compares: those in compare_args when the action names them, else all."""
    keep = action.compare_args
    return {name: value for name, value in action.arguments.items() if keep is None or name in keep}


def _tau2_events(messages: list[_Tau2Message], file: Path, where: str) -> Iterator[_Said | _Result]:
    for index, message in enumerate(messages):
        field = f"messages[{index}]"
        if message.role == "user" and message.content:
            yield _Said("user", message.content, [])
        elif message.role == "assistant":
            yield _Said("assistant", message.content, [
                (call.id, call.name, _arguments(call.arguments, file, where, f"{field}.tool_calls[{number}].arguments"))
                for number, call in enumerate(message.tool_calls or [])])
        elif message.role == "tool":
            answers = message.tool_messages if message.tool_messages is not None else [message]
            for number, answer in enumerate(answers):
                if answer.requestor == "assistant":
                    failed = answer.error or (answer.content or "").startswith(TAU2_TOOL_ERROR)
                    error = (answer.content or "the tool failed") if failed else None
                    yield _Result(answer.id, answer.content, error,
                                  field if message.tool_messages is None else f"{field}.tool_messages[{number}]")


# --- shared -----------------------------------------------------------------------------------------

def _arguments(value: str | dict[str, Any] | None, file: Path, where: str, field: str) -> dict[str, Any]:
    """A call's arguments, parsed when they are the JSON string the model wrote."""
    if not isinstance(value, str):
        return value or {}
    try:
        parsed = loads(value)
    except ValueError as exc:
        raise RecordError(file, where, field, f"is not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise RecordError(file, where, field, "must be a JSON object")
    return parsed


def _result(content: str | None) -> Any:
    """A tool's answer: parsed when it is JSON, else the text."""
    if content is None:
        return None
    try:
        return loads(content)
    except ValueError:
        return content


def _transcript(events: Iterable[_Said | _Result], file: Path,
                where: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(messages, function calls, user turns) of a conversation. Each call is shared by its assistant message and
    the conversation's list; a tool's answer fills in the earliest unanswered call with its id (τ-bench's
    trajectories may reuse an id)."""
    messages: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    pending: list[tuple[str, dict[str, Any]]] = []
    turns = 0
    for event in events:
        if isinstance(event, _Result):
            call = _answered(pending, event, file, where)
            call["result"], call["error"] = (None, event.error) if event.error else (_result(event.content), None)
        elif event.role == "user":
            turns += 1
            messages.append({"role": "user", "content": event.content})
        else:
            made = [{"functionName": name, "arguments": arguments, "result": None, "error": None, "turn": turns}
                    for _, name, arguments in event.calls]
            pending += [(call_id, call) for (call_id, _, _), call in zip(event.calls, made)]
            calls += made
            messages.append({"role": "assistant", "content": event.content or "", "function_calls": made})
    return messages, calls, turns


def _answered(pending: list[tuple[str, dict[str, Any]]], result: _Result, file: Path, where: str) -> dict[str, Any]:
    for index, (call_id, _) in enumerate(pending):
        if call_id == result.call_id:
            return pending.pop(index)[1]
    raise RecordError(file, where, result.field, f"answers call {result.call_id!r}, which no earlier assistant "
                                                 f"message made (or which was answered already)")


def _trial_numbers(keys: Iterable[tuple[_Source, str, int | None]]) -> list[int]:
    """Each record's trial: its own, or when it has none (τ-bench's historical trajectories) the next after the
    task's earlier records. A (task, trial) pair twice is an error naming both records."""
    seen: dict[tuple[str, int], str] = {}
    following: dict[str, int] = {}
    numbers = []
    for source, case_id, trial in keys:
        trial = following.get(case_id, 0) if trial is None else trial
        if (case_id, trial) in seen:
            raise RecordError(source.file, source.where, "trial",
                              f"task {case_id} trial {trial} is also {seen[case_id, trial]}")
        seen[case_id, trial] = source.where
        following[case_id] = max(following.get(case_id, 0), trial + 1)
        numbers.append(trial)
    return numbers


def _conversation(case_id: str, trial: int, scenario: str, messages: list[dict[str, Any]], calls: list[dict[str, Any]],
                  reason: str, turns: int, error: str | None, *, simulator: str, target: str | None = None,
                  duration: float | None = None) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "case_id": case_id, "trial": trial, "scenario_name": scenario,
            "messages": messages, "function_calls": calls, "termination": {"reason": reason, "turns": turns},
            "error": error, "duration_s": duration, "target": target, "user_simulator": simulator}


def _verdict(case_id: str, trial: int, reward: float, reward_info: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "case_id": case_id, "trial": trial, "reward": solved(reward),
            "raw_reward": reward, "reward_info": reward_info}


def _tools(defined: Mapping[str, dict[str, Any]], cases: list[dict[str, Any]], conversations: list[dict[str, Any]],
           effects: Mapping[str, str]) -> list[dict[str, Any]]:
    """tools.json: the defined functions (a tools source's, else the benchmark's own definitions), then every
    other function the tasks and trajectories name, with the arguments seen; each with its effect: --effect,
    else its definition's, else `effect_of`'s; a guessed one is marked "guessed" until written."""
    seen: dict[str, set[str]] = {}
    for call in [*(c for case in cases for c in case["expected_function_calls"]),
                 *(c for conversation in conversations for c in conversation["function_calls"])]:
        seen.setdefault(call["functionName"], set()).update(call.get("arguments") or {})
    names = [*defined, *(name for name in seen if name not in defined)]
    for name, effect in effects.items():
        if effect not in EFFECTS:
            raise ConfigError(f"--effect {name}={effect}: the effect must be read or write")
        if name not in names:
            raise ConfigError(f"--effect {name}: the run has no function of that name (functions: {', '.join(names)})")
    tools = []
    for name in names:
        definition = defined.get(name) or {}
        seen_arguments = {"type": "object", "properties": {argument: {} for argument in sorted(seen.get(name, ()))}}
        effect, guessed = (effects[name], False) if name in effects else (
            (definition["effect"], bool(definition.get("guessed"))) if definition.get("effect")
            else effect_of(name, effects))
        tools.append({"type": "function", "effect": effect,
                      "function": {"name": name, "description": definition.get("description") or "",
                                   "parameters": definition.get("parameters") or seen_arguments}})
        if guessed:
            tools[-1]["guessed"] = True
    return tools


def source_tools(source: str) -> dict[str, dict[str, Any]]:
    """The functions of a tools source (`lobeval init --tools`' reader: tools.json, OpenAPI, τ²-bench's tools.py,
    an MCP server) by name: {description, parameters, effect, guessed}. A function the source gives no effect
    takes the benchmark's (benchmark_tools), else one guessed from its name, marked guessed."""
    from lobeval.drafting.suite_init import read_tools   # the database drivers `init` reads data with: only when asked

    guessed: set[str] = set()

    def ask(name: str) -> str:
        effect, was_guessed = effect_of(name, {})
        if was_guessed:
            guessed.add(name)
        return effect

    return {tool["function"]["name"]: {**tool["function"], "effect": tool["effect"],
                                       "guessed": tool["function"]["name"] in guessed}
            for tool in read_tools(source, {}, ask)}


def _write_run(run_dir: Path, kind: str, source: Path, domain: str, defined: Mapping[str, dict[str, Any]],
               cases: list[dict[str, Any]], conversations: list[dict[str, Any]], reference: list[dict[str, Any]],
               effects: Mapping[str, str], tools_source: str | None = None, notes: list[str] | None = None,
               imported: dict[str, Any] | None = None) -> ImportResult:
    notes = list(notes or [])
    if tools_source is not None:
        defined = source_tools(tools_source)
    elif not defined:
        folder = domain if domain in DOMAINS["tau2"] else "<domain>"
        notes.append(f"tools.json: no descriptions, argument types or enums (the run keeps no tool definitions): "
                     f"give --tools with τ²-bench's src/tau2/domains/{folder}/tools.py (also for τ-bench's "
                     f"ports), or the bot's tools.json, OpenAPI document or MCP server")
    tools = _tools(defined, cases, conversations, effects)
    undefined = [tool["function"]["name"] for tool in tools if tool["function"]["name"] not in defined]
    if tools_source is not None and undefined:
        notes.append(f"called but not defined by {tools_source} (only the arguments seen): {', '.join(undefined)}")
    guessed = {tool["function"]["name"]: tool["effect"] for tool in tools if tool.pop("guessed", False)}
    suite = {"name": domain, "entities": {}, "ignored_functions": IGNORED_FUNCTIONS, "optional_effects": ["read"],
             "allowed_function_calls": []}
    config = {"schema_version": SCHEMA_VERSION, "run_id": run_dir.name, "suite": str(run_dir.resolve() / "suite"),
              "suite_name": domain, "target": next((c["target"] for c in conversations if c["target"]), None),
              "user": "imported", "trials": max((c["trial"] + 1 for c in conversations), default=0),
              "imported": {"format": kind, "source": str(source.resolve()), "guessed_effects": guessed,
                           "tools": tools_source, "notes": notes, **(imported or {})},
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    files = {"suite/suite.json": suite, "suite/tools.json": tools, "suite/templates.json": [],
             "dataset.jsonl": cases, "conversations.jsonl": conversations, REFERENCE_FILE: reference,
             CONFIG_FILE: config}
    _publish(run_dir, files)
    return ImportResult(run_dir, kind, len(cases), len(conversations),
                        {tool["function"]["name"]: tool["effect"] for tool in tools}, guessed, tuple(notes))


def _publish(run_dir: Path, files: Mapping[str, Any]) -> None:
    """Write `files` into a staging folder beside `run_dir`, read them back, and rename it to `run_dir`."""
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise ConfigError(f"{run_dir} exists and is not empty: choose another --run-id")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = run_dir.parent / f".{run_dir.name}.{uuid.uuid4().hex}.tmp"
    staging.mkdir()
    try:
        for name, content in files.items():
            (write_jsonl if name.endswith(".jsonl") else write_json)(staging / name, content)
        load_suite(staging / "suite")
        read_cases(staging / "dataset.jsonl")
        read_conversations(staging / "conversations.jsonl")
        read_reference(staging)
        read_config(staging)
        try:
            os.replace(staging, run_dir)   # replaces an empty folder; refuses one that filled up meanwhile
        except OSError as exc:
            raise ConfigError(f"{run_dir}: cannot be written ({exc.strerror}): choose another --run-id") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
