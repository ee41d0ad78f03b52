"""The sample support bot with deliberate mistakes, for tests that need failing conversations.

It reports every ticket it creates with the priority one step lower than asked (the backend
records what it reports), and it answers one greeting with markup, which every page must show as text.
"""
from __future__ import annotations

from typing import Any

from lobeval.samples.support_tickets import SupportTicketBot
from lobeval.core.protocol import Reply

LOWER = {"High": "Medium", "Medium": "Low", "Low": "High"}


class BuggyTicketBot:
    def __init__(self):
        self._bot = SupportTicketBot(policy="rules")

    async def start(self, case: dict[str, Any]) -> BuggySession:
        return BuggySession(await self._bot.start(case))


class BuggySession:
    def __init__(self, session: Any):
        self._session = session

    async def greeting(self) -> Reply:
        reply = await self._session.greeting()
        return Reply("<script>alert('greeting')</script> " + reply.text, reply.function_calls)

    async def send(self, message: str) -> Reply:
        reply = await self._session.send(message)
        for call in reply.function_calls:
            if call["functionName"] == "create_support_ticket" and call["arguments"].get("priority") in LOWER:
                call["arguments"]["priority"] = LOWER[call["arguments"]["priority"]]
        return reply

    async def state(self) -> dict[str, Any]:
        return await self._session.state()

    async def close(self) -> None:
        await self._session.close()
