"""One resolver from configuration (environment, command-line options, notebook parameters) to the
parts a stage combines: target, simulated user, completion judge, conversation judges, embedder,
root-cause model.

Stages receive these objects and build none themselves. Every model client of a process shares one
budget (LOBEVAL_BUDGET_USD). A role asked for explicitly whose model is not configured is a
ConfigError naming the variables to set; one asked for implicitly is simply left off. A part's
module is imported only when the part is built, so a command pays only for the parts it uses
(`lobeval gate` loads no model client).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from lobeval.core.errors import ConfigError
from lobeval.simulation.users import STOP_PHRASE, ScriptedUser, SimulatedUser

DEFAULT_TARGET = "lobeval.samples.support_tickets:SupportTicketBot"
USER_KINDS = ("scripted", "llm")
PARTS = ("target", "user", "completion_judge", "judges", "embedder", "root_cause_model")
NO_MODEL_HINT = "and OPENAI_API_KEY (or the AZURE_OPENAI_* variables); see docs/models.md"
USER_NEEDS_MODEL = f"--user llm needs a model: set LOBEVAL_USER_MODEL or LOBEVAL_MODEL, {NO_MODEL_HINT}"
BATCH_CHECKED = "LOBEVAL_BATCH_CHECKED"
"""Set by `lobeval run` while its stages run, once its pre-flight (`check`) found the Batch API: the judges of its
evaluate stage do not look again."""


@dataclass
class Parts:
    """What a stage is given. A part not asked for, or whose model is not configured, is None;
    `judges` is then the reason the conversation judges do not run."""

    target: Any = None
    user: SimulatedUser | None = None
    completion_judge: Any = None
    judges: Any = None
    embedder: Any = None
    root_cause_model: Any = None
    budget: Any = None
    """The run's budget (`lobeval.models.llm.Budget`, from LOBEVAL_BUDGET_USD), or None: unlimited."""


@lru_cache(maxsize=1)
def shared_budget() -> Any:
    from lobeval.models.llm import Budget

    return Budget.from_env()


def model_client(role: str, *, cache: bool, concurrency: int = 8) -> Any:
    """The client (`lobeval.models.llm.LLMClient`) for a role's configured model, or None when no model is
    configured (offline)."""
    from lobeval.models.llm import LLMClient, resolve_model

    config = resolve_model(role)
    if config is None:
        return None
    return LLMClient(config, role=role, cache=cache, budget=shared_budget(), concurrency=concurrency)


def resolve(*parts: str, target: str | None = None, user: str = "scripted", judges: list[str] | None = None,
            suite: str | Path | None = None, concurrency: int = 8, stop_phrase: str = STOP_PHRASE,
            target_timeout: float = 60.0, batch: bool = False) -> Parts:
    """Build the named parts (see PARTS). `judges`: None runs the default judges when a judge model is
    configured; a list names them (["none"] switches them off); `batch` sends their requests through the
    provider's Batch API (lobeval.models.batch)."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ConfigError(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    built = Parts(budget=shared_budget())
    if "target" in parts:
        from lobeval.targets.targets import load_target

        built.target = load_target(target or DEFAULT_TARGET, timeout=target_timeout, workers=concurrency,
                                   concurrency=concurrency)
    if "user" in parts:
        built.user = make_user(user, stop_phrase=stop_phrase, concurrency=concurrency, suite=suite)
    if "completion_judge" in parts:
        built.completion_judge = make_completion_judge(concurrency)
    if "judges" in parts:
        built.judges = make_judges(judges, suite, concurrency, batch)
    if "embedder" in parts:
        built.embedder = model_client("embedding", cache=True, concurrency=concurrency)
    if "root_cause_model" in parts:
        built.root_cause_model = model_client("judge", cache=True, concurrency=concurrency)
    return built


def make_user(kind: str, *, stop_phrase: str = STOP_PHRASE, concurrency: int = 8,
              suite: str | Path | None = None) -> SimulatedUser:
    """The simulated user; the scripted one hears and says the functions and arguments in the words of the
    `suite`'s tools.json when given one."""
    if kind == "scripted":
        from lobeval.workspace.suite import load_suite

        return ScriptedUser(stop_phrase, tools=load_suite(suite, templates=False).tools if suite else {})
    if kind == "llm":
        from lobeval.simulation.users import LLMUser

        client = model_client("user", cache=False, concurrency=concurrency)
        if client is None:
            raise ConfigError(USER_NEEDS_MODEL)
        return LLMUser(client, stop_phrase)
    raise ConfigError(_unknown_user(kind))


def _unknown_user(kind: str) -> str:
    return f"unknown user simulator {kind!r}; choose one of {', '.join(USER_KINDS)}"


def _judges_need_model(selection: list[str]) -> str:
    return (f"--judges {','.join(selection)} needs a judge model: set LOBEVAL_JUDGE_MODEL or LOBEVAL_MODEL, "
            f"{NO_MODEL_HINT}")


def check(*, user: str = "scripted", judges: list[str] | None = None, batch: bool = False) -> None:
    """Refuse what `resolve` would refuse when it builds the simulated user and the conversation judges,
    without building them (`lobeval run` checks this before its first stage): a bad LOBEVAL_BUDGET_USD, request
    limit or LOBEVAL_TOOLS, an unknown user kind or judge, a model asked for (`--user llm`, `--judges` by name) but not
    configured, a model named without credentials, `--batch` on an endpoint without a Batch API."""
    from lobeval.judges.judges import selected_judges
    from lobeval.models.llm import ROLES, Budget, resolve_limits, resolve_model, resolve_tools

    Budget.from_env()
    for role in ROLES:
        resolve_limits(role)
    resolve_tools()
    check_named(user=user, judges=judges)
    if user == "llm":
        resolve_model("user")
    judge_model = resolve_model("judge")
    if batch and selected_judges(judges) and judge_model is not None:
        from lobeval.models.batch import check_batch_api

        check_batch_api(judge_model)


def check_named(*, user: str = "scripted", judges: list[str] | None = None) -> None:
    """Refuse, as `check` does, an unknown user kind or judge and a model asked for (`--user llm`, `--judges` by
    name) but not named; credentials are not looked at (the estimate, which sends nothing, needs only the names)."""
    from lobeval.judges.judges import selected_judges
    from lobeval.models.llm import named_model

    if user not in USER_KINDS:
        raise ConfigError(_unknown_user(user))
    if user == "llm" and named_model("user") is None:
        raise ConfigError(USER_NEEDS_MODEL)
    if selected_judges(judges) and judges is not None and named_model("judge") is None:
        raise ConfigError(_judges_need_model(judges))


PROBE_TIMEOUT_S = 10.0
"""How long the pre-flight waits for the target or a model endpoint to answer its one request."""
ASKED_BY = {"user": "the simulated user's", "target": "the bot's", "judge": "the judges'",
            "embedding": "the embedder's"}
"""Whose requests go to a model endpoint, as the pre-flight names them."""


def models_used(*, target: str | None = None, user: str = "scripted", judge: bool = False,
                embedding: bool = False) -> dict[str, Any]:
    """The model (`lobeval.models.llm.ModelConfig`) of each role a command will ask, by role: the simulated user's with
    `user` "llm"; the bot's when `target` is one lobeval runs a model for (the sample bot with a target model, a
    model-and-prompt target); with `judge` the judge model (the judges, the completion check, the root causes), with
    `embedding` the embedder's, each when configured."""
    from lobeval.models.llm import resolve_model

    found = {"user": resolve_model("user") if user == "llm" else None,
             "judge": resolve_model("judge") if judge else None,
             "embedding": resolve_model("embedding") if embedding else None}
    if target == DEFAULT_TARGET:
        found["target"] = resolve_model("target")
    elif target is not None and target.endswith(".json"):
        from lobeval.targets.prompt_target import read_config, target_model

        found["target"] = target_model(read_config(Path(target)).model, Path(target))
    return {role: config for role, config in found.items() if config is not None}


async def check_reachable(target: str | None, models: dict[str, Any], timeout: float = PROBE_TIMEOUT_S) -> None:
    """ConfigError (exit 2, before anything is written) naming the URL, what happened and "is it running?" when an
    HTTP `target` or the endpoint of one of `models` (`models_used`) does not answer one request within `timeout`;
    a model endpoint that refuses the key says so. An endpoint several roles share is asked once."""
    from lobeval.models.llm import endpoint_url, probe as probe_model
    from lobeval.targets.targets import probe as probe_target

    problem = await probe_target(target, timeout) if target else None
    if problem:
        raise ConfigError(f"target {target}: {problem}: is it running?")
    shared: dict[tuple[Any, ...], list[str]] = {}
    for role, config in models.items():
        shared.setdefault((config.provider, endpoint_url(config), config.api_version), []).append(role)
    for (_, url, _), asking in shared.items():
        problem = await probe_model(models[asking[0]], timeout)
        if problem:
            whose = ", ".join(ASKED_BY[role] for role in asking)
            advice = "check the key" if problem.startswith("refused the key") else "is it running?"
            raise ConfigError(f"model endpoint {url} ({whose}): {problem}: {advice}")


def make_completion_judge(concurrency: int = 8) -> Any:
    """The judge that may end a conversation early, when a judge model is configured."""
    from lobeval.judges.judges import CompletionJudge

    client = model_client("judge", cache=True, concurrency=concurrency)
    return CompletionJudge(client) if client is not None else None


def make_judges(selection: list[str] | None, suite: str | Path | None, concurrency: int = 8,
                batch: bool = False) -> Any:
    """The conversation judges, or the reason ("not run: ...") they do not run."""
    from lobeval.evaluation.evaluate import JUDGES_OFF, NO_JUDGE_MODEL
    from lobeval.judges.judges import ConversationJudges, selected_judges

    names = selected_judges(selection)
    if not names:
        return JUDGES_OFF
    client = model_client("judge", cache=True, concurrency=concurrency)
    if client is None:
        if selection is not None:
            raise ConfigError(_judges_need_model(selection))
        return NO_JUDGE_MODEL
    if batch and not os.environ.get(BATCH_CHECKED):
        from lobeval.models.batch import check_batch_api

        check_batch_api(client.config)
    tools = []
    if suite is not None:
        from lobeval.workspace.suite import load_suite

        tools = list(load_suite(suite).tools.values())
    return ConversationJudges(client, names, tools, batch=batch)
