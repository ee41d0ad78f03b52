"""What a target hands back for one turn, below both kinds of target (a Python or HTTP bot in `targets`,
a model and a prompt in `prompt_target`) and the sample bots: docs/targets.md."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """One turn of the target: what it said and the function calls it made, in order.

    Each call is `{"functionName", "arguments", "result"}` plus `"error"` (a message, or None)
    when the backend refused or raised: such a call was attempted but not done. `usage`, optional,
    is what the turn cost the target in its own model calls: any of USAGE_FIELDS, numbers.
    """

    text: str
    function_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, float] | None = None


USAGE_FIELDS = ("requests", "prompt_tokens", "completion_tokens", "cost_usd", "cached_prompt_tokens",
                "estimated_tokens")
"""What a reply may report of the turn's own model calls (all optional): requests sent, tokens, cost, of the
prompt tokens those the provider read from its prompt cache (also read as OpenAI reports them:
`prompt_tokens_details.cached_tokens`), and of all tokens those counted by the bot rather than reported by its
model's server."""
