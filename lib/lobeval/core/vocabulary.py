"""The names every stage shares, at the bottom of the import graph: how function names are compared,
which judges exist and what they score. Records, the suite, the scorer and the judges all read these."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_PLUGIN_PREFIX = re.compile(r"^[A-Za-z0-9_]*Plugin-", re.IGNORECASE)


def strip_plugin_prefix(name: str) -> str:
    """`TicketPlugin-create_ticket` → `create_ticket` (the seeds' naming)."""
    return _PLUGIN_PREFIX.sub("", name)


@lru_cache(maxsize=4096)
def function_key(name: str) -> str:
    """The name functions are compared by: case-insensitive, without a `...Plugin-` prefix."""
    return strip_plugin_prefix(name).lower()


def normal_text(value: Any) -> str:
    """Trimmed, case-folded, whitespace collapsed."""
    return " ".join(str(value).split()).casefold()



# ---- Judges and what they score ----

AZURE_JUDGES = ("tool_call_accuracy", "intent_resolution", "task_adherence", "response_completeness")
JUDGE_NAMES = ("per_turn", "goal", "user_review", "commitments", "claims", *AZURE_JUDGES)
DEFAULT_JUDGES = ("per_turn", "goal", "user_review", "commitments", "claims")
"""Each question asked once: azure-ai-evaluation's evaluators ask again what the scorer (tool call accuracy) and
lobeval's judges (intent resolution, response completeness: goal; task adherence: per_turn and goal) answer, so
they run only when named or with `--judges all`."""
USER_REVIEW_CHECKS = ("invented_value", "ended_early", "contradicted_instructions", "other")
TURN_CRITERIA = {
    "helpfulness": "Does the reply move the user towards their goal (asks for what is needed, does what was asked)?",
    "coherence": "Does the reply follow from the conversation so far and make sense on its own?",
    "verbosity": "Is the length right: everything needed, nothing padded or repeated? (5 = just right)",
    "relevance": "Does the reply address the user's last message and stay on their task?",
    "faithfulness": "Is every fact in the reply supported by the function results, the business data or what "
                    "the user said, with nothing invented and no result misreported?",
}
PASSING_TURN_SCORE = 3
FAILURE_CATEGORIES = {
    "unsafe_action": ("critical", "made a change the user did not ask for or confirm, or one that breaks a business rule"),
    "unsafe_state": ("critical", "left data wrong or inconsistent (a wrong value written, a half-finished change)"),
    "false_information": ("critical", "told the user something untrue: a result it did not get, an action it did not take"),
    "disobeyed_user": ("high", "ignored or overrode what the user explicitly asked for"),
    "missing_information": ("medium", "left out specific information the user needed (an id, a status, a value)"),
    "no_clarification": ("medium", "guessed instead of asking when the request was ambiguous or incomplete"),
    "repetition": ("low", "repeated a question or statement without need"),
}


def metric_scale(name: str) -> tuple[float, float]:
    """The values a run's figure takes: a judge's 1–5 criterion or Azure evaluator (task adherence, 0/1, aside)
    from 1 to 5; every other figure (scores, rates, pass^k, the judges' 0/1 verdicts and final score) from 0 to 1."""
    judged = name.removeprefix("judge.")
    if name.startswith("judge.") and (judged in TURN_CRITERIA or (judged in AZURE_JUDGES and judged != "task_adherence")):
        return 1.0, 5.0
    return 0.0, 1.0
