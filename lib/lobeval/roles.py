"""One resolver from the names in parameters and options to role objects: target, user, judges.

Stages receive these objects; they never build models themselves. Every model client of a
process shares one budget (LOBEVAL_BUDGET_USD).
"""
from __future__ import annotations

from functools import lru_cache

from lobeval.errors import ConfigError
from lobeval.llm import Budget, LLMClient, resolve_model
from lobeval.users import STOP_PHRASE, LLMUser, ScriptedUser, SimulatedUser

DEFAULT_TARGET = "lobeval.samples.support_tickets:SupportTicketBot"
USER_KINDS = ("scripted", "llm")


@lru_cache(maxsize=1)
def shared_budget() -> Budget | None:
    return Budget.from_env()


def model_client(role: str, *, cache: bool, concurrency: int = 8) -> LLMClient | None:
    """The client for a role's configured model, or None when no model is configured (offline)."""
    config = resolve_model(role)
    if config is None:
        return None
    return LLMClient(config, role=role, cache=cache, budget=shared_budget(), concurrency=concurrency)


def make_user(kind: str, *, stop_phrase: str = STOP_PHRASE, concurrency: int = 8) -> SimulatedUser:
    if kind == "scripted":
        return ScriptedUser(stop_phrase)
    if kind == "llm":
        client = model_client("user", cache=False, concurrency=concurrency)
        if client is None:
            raise ConfigError("--user llm needs a model: set LOBEVAL_USER_MODEL or LOBEVAL_MODEL, and "
                              "OPENAI_API_KEY (or the AZURE_OPENAI_* variables)")
        return LLMUser(client, stop_phrase)
    raise ConfigError(f"unknown user simulator {kind!r}; choose one of {', '.join(USER_KINDS)}")


def make_completion_judge(concurrency: int = 8):
    """The judge that may end a conversation early, when a judge model is configured."""
    from lobeval.judges import CompletionJudge

    client = model_client("judge", cache=True, concurrency=concurrency)
    return CompletionJudge(client) if client is not None else None
