"""Published benchmark runs (τ-bench, τ²-bench) as lobeval run folders, to check lobeval's verdicts against theirs.

`import_tau_bench` reads a τ-bench results file (what its `run.py` writes, or a file of its
`historical_trajectories/`); `import_tau2` reads a τ²-bench `results.json`, or its folder with
`results.json` and `simulations/*.json`. Each writes a run folder like any other (docs/formats.md):

- `suite/`: `suite.json` (the domain's name, no entities, reads optional, `think` ignored), `tools.json`
  (τ²-bench's tool definitions when the run kept them, else every function the run names, with the
  arguments seen) and an empty `templates.json`;
- `dataset.jsonl`: one case per task; `conversations.jsonl`: one per trajectory and trial;
- `reference.jsonl`: the benchmark's own verdict per (case, trial), for `lobeval.agreement`;
- `config.json`, naming the format and the source.

The folder is written whole or not at all: everything is read and checked first, written into a
staging folder beside it, read back with lobeval's own readers, and renamed into place.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from lobeval.agreement import REFERENCE_FILE, read_reference
from lobeval.benchmark_tools import known_effect
from lobeval.errors import ConfigError, RecordError
from lobeval.records import (
    SCHEMA_VERSION, STRICT, loads, read_cases, read_conversations, read_json, validated, write_json, write_jsonl,
)
from lobeval.runs import CONFIG_FILE, read_config
from lobeval.suite import EFFECTS, load_suite

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
    error: bool = False


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
        return lines


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
                     effects: Mapping[str, str] | None = None) -> ImportResult:
    """A τ-bench results file (a list of {task_id, trial, reward, info, traj}) as the run folder `run_dir`.

    The suite is named `domain` (default "tau-bench": τ-bench's files do not say theirs); every case's
    scenario is the domain too, as τ-bench's tasks have no category.
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
                      effects or {})


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
                effects: Mapping[str, str] | None = None) -> ImportResult:
    """A τ²-bench run (its results.json, or the folder holding results.json and simulations/) as `run_dir`.

    The suite is named `domain` (default: the run's domain_name); every case's scenario is the domain too.
    """
    results_file, raw, sources = _tau2_files(Path(path))
    results = validated(_Tau2Results, raw, results_file, "file")
    environment = results.info.environment_info
    domain = domain or environment.domain_name
    cases: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(results.tasks):
        task = validated(_Tau2Task, item, results_file, f"tasks[{index}]")
        if task.id in cases:
            raise RecordError(results_file, f"tasks[{index}]", "id", f"task {task.id!r} is defined twice")
        cases[task.id] = _tau2_case(task, domain)
    simulations = [(source, validated(_Tau2Simulation, item, source.file, source.where)) for source, item in sources]
    trials = _trial_numbers((source, str(simulation.task_id), simulation.trial) for source, simulation in simulations)
    agent = (results.info.agent_info or {}).get("llm") or (results.info.agent_info or {}).get("implementation")
    conversations, reference = [], []
    for (source, simulation), trial in zip(simulations, trials):
        case_id, file = str(simulation.task_id), source.file
        where = f"{source.where} (task {case_id}, trial {trial})"
        if case_id not in cases:
            raise RecordError(file, where, "task_id",
                              f"names task {case_id!r}, which {results_file.name} does not define")
        if simulation.messages is None:
            raise RecordError(file, where, "messages", "is missing: voice (full-duplex) simulations kept as ticks "
                                                       "are not supported")
        if simulation.reward_info is None:
            raise RecordError(file, where, "reward_info", "is missing: the simulation was not evaluated")
        messages, calls, turns = _transcript(_tau2_events(simulation.messages, file, where), file, where)
        reason = TAU2_ENDINGS[simulation.termination_reason]
        error = None if simulation.termination_reason in ("user_stop", "agent_stop", "max_steps") else (
            f"τ²-bench ended the simulation: {simulation.termination_reason}")
        conversations.append(_conversation(case_id, trial, domain, messages, calls, reason, turns, error,
                                           simulator="tau2-bench", target=agent, duration=simulation.duration))
        reference.append(_verdict(case_id, trial, simulation.reward_info.reward, simulation.reward_info.model_dump()))
    defined = {name: (tool.doc, tool.params) for name, tool in (environment.tool_defs or {}).items()}
    return _write_run(Path(run_dir), "tau2", Path(path), domain, defined, list(cases.values()), conversations,
                      reference, effects or {})


def _tau2_files(path: Path) -> tuple[Path, dict[str, Any], list[tuple[_Source, Any]]]:
    """(results.json, its content, each simulation record with where it was read). As τ²-bench decides: the
    simulations are the files of a `simulations/` folder beside results.json when there is one, else
    results.json's own `simulations` list."""
    results_file = path / "results.json" if path.is_dir() else path
    raw = read_json(results_file)
    if not isinstance(raw, dict):
        raise RecordError(results_file, "file", None,
                          "must be a τ²-bench results object ({info, tasks, simulations})")
    folder = results_file.parent / "simulations"
    if not folder.is_dir():
        simulations = raw.get("simulations") if isinstance(raw.get("simulations"), list) else []
        return results_file, raw, [(_Source(results_file, f"simulations[{index}]"), item)
                                   for index, item in enumerate(simulations)]
    files = sorted(folder.glob("*.json"))
    index = raw.get("simulation_index")
    if isinstance(index, list):
        listed = {entry.get("id") for entry in index if isinstance(entry, dict)}
        missing, extra = listed - {file.stem for file in files}, {file.stem for file in files} - listed
        if missing or extra:
            raise RecordError(results_file, "simulation_index", None,
                              f"does not match {folder}: " + "; ".join(
                                  part for part in (missing and f"no file for {', '.join(sorted(map(str, missing)))}",
                                                    extra and f"not listed: {', '.join(sorted(extra))}") if part))
    return results_file, raw, [(_Source(file, f"simulation {file.stem}"), read_json(file)) for file in files]


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
                    error = (answer.content or "the tool failed") if answer.error else None
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


def _tools(defined: Mapping[str, tuple[str, dict[str, Any] | None]], cases: list[dict[str, Any]],
           conversations: list[dict[str, Any]], effects: Mapping[str, str]) -> list[dict[str, Any]]:
    """tools.json: the benchmark's definitions, then every other function the tasks and trajectories name,
    with the arguments seen; each with its effect (`effect_of`); a guessed one is marked "guessed" until written."""
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
        description, parameters = defined.get(name, ("", None))
        seen_arguments = {"type": "object", "properties": {argument: {} for argument in sorted(seen.get(name, ()))}}
        effect, guessed = effect_of(name, effects)
        tools.append({"type": "function", "effect": effect,
                      "function": {"name": name, "description": description,
                                   "parameters": parameters or seen_arguments}})
        if guessed:
            tools[-1]["guessed"] = True
    return tools


def _write_run(run_dir: Path, kind: str, source: Path, domain: str, defined: Mapping[str, tuple[str, Any]],
               cases: list[dict[str, Any]], conversations: list[dict[str, Any]], reference: list[dict[str, Any]],
               effects: Mapping[str, str]) -> ImportResult:
    tools = _tools(defined, cases, conversations, effects)
    guessed = {tool["function"]["name"]: tool["effect"] for tool in tools if tool.pop("guessed", False)}
    suite = {"name": domain, "entities": {}, "ignored_functions": IGNORED_FUNCTIONS, "optional_effects": ["read"],
             "allowed_function_calls": []}
    config = {"schema_version": SCHEMA_VERSION, "run_id": run_dir.name, "suite": str(run_dir.resolve() / "suite"),
              "suite_name": domain, "target": next((c["target"] for c in conversations if c["target"]), None),
              "user": "imported", "trials": max((c["trial"] + 1 for c in conversations), default=0),
              "imported": {"format": kind, "source": str(source.resolve()), "guessed_effects": guessed},
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    files = {"suite/suite.json": suite, "suite/tools.json": tools, "suite/templates.json": [],
             "dataset.jsonl": cases, "conversations.jsonl": conversations, REFERENCE_FILE: reference,
             CONFIG_FILE: config}
    _publish(run_dir, files)
    return ImportResult(run_dir, kind, len(cases), len(conversations),
                        {tool["function"]["name"]: tool["effect"] for tool in tools}, guessed)


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
