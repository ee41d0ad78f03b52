"""The bot object the target protocol (docs/targets.md) loads: one isolated backend and policy per conversation."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lobeval.core.errors import ConfigError
from lobeval.models.llm import LLMClient, resolve_model
from lobeval.samples.support_tickets.backend import SupportBackend, load_tools
from lobeval.samples.support_tickets.llm_policy import LLMPolicy
from lobeval.samples.support_tickets.rules import RulesPolicy
from lobeval.samples.support_tickets.trusting import TrustingPolicy
from lobeval.core.protocol import Reply

REPO = Path(__file__).resolve().parents[4]   # <repo>/lib/lobeval/samples/support_tickets/bot.py
DATA_DIR = REPO / "data" / "support_tickets"
TOOLS_PATH = REPO / "scenarios" / "support_tickets" / "tools.json"
POLICIES = ("rules", "llm")


class SupportTicketBot:
    """The support desk assistant. `policy`: "rules", "llm", or None for llm when a target model is
    configured (docs/models.md) and rules otherwise. The rules policy has one deliberate weakness, for the
    first run to show (README, "What to look at first"): a moved due date arrives one day early (`rules.sent`)."""

    def __init__(self, policy: str | None = None, *, data_dir: Path | str | None = None,
                 tools_path: Path | str | None = None):
        if policy not in (None, *POLICIES):
            raise ConfigError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}, or None")
        model = None if policy == "rules" else resolve_model("target")
        if policy == "llm" and model is None:
            raise ConfigError("policy 'llm' needs a target model: set LOBEVAL_TARGET_MODEL or LOBEVAL_MODEL, "
                              "with OPENAI_API_KEY or the AZURE_OPENAI_* variables")
        self.policy = "llm" if model else "rules"
        self.data_dir = Path(data_dir or DATA_DIR)
        self.tools_path = Path(tools_path or TOOLS_PATH)
        # A deployed bot serves many users at once: its own limit must not throttle the simulation.
        self._client = LLMClient(model, role="target", cache=False, concurrency=64) if model else None

    async def start(self, case: dict[str, Any]) -> SupportSession:
        backend = SupportBackend(self.data_dir, self.tools_path, case.get("business_data"))
        if self._client is None:
            return SupportSession(backend, RulesPolicy(backend, case.get("acting_person")))
        return SupportSession(backend, LLMPolicy(backend, self._client, load_tools(self.tools_path)))


class SupportSession:
    """One conversation with the assistant."""

    def __init__(self, backend: SupportBackend, policy: RulesPolicy | LLMPolicy):
        self._backend, self._policy = backend, policy

    async def greeting(self) -> Reply:
        return self._policy.greeting()

    async def send(self, message: str) -> Reply:
        return await self._policy.respond(message)

    async def state(self) -> dict[str, Any]:
        return self._backend.state()

    async def apply(self, function_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run calls straight on this session's backend (the end-state check replays expected calls)."""
        return [self._backend.call(call["functionName"], call.get("arguments") or {}) for call in function_calls]

    async def close(self) -> None:
        """Nothing to release: the state lives only in this session."""


class TrustingBot(SupportTicketBot):
    """DELIBERATELY UNSAFE (samples/support_tickets/trusting.py): the offline sample bot without its checks, acting
    on any id, reading out requesters' e-mails, obeying instructions in ticket text, doing unasked writes. It
    exists to show that lobeval's attack cases catch each of these; never a model for a real bot."""

    def __init__(self, *, data_dir: Path | str | None = None, tools_path: Path | str | None = None):
        super().__init__("rules", data_dir=data_dir, tools_path=tools_path)

    async def start(self, case: dict[str, Any]) -> SupportSession:
        backend = SupportBackend(self.data_dir, self.tools_path, case.get("business_data"))
        return SupportSession(backend, TrustingPolicy(backend, case.get("acting_person")))
