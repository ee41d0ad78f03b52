"""The policy used when a target model is configured: the model decides, the backend executes.

Each user turn runs a tool loop: the model sees the history and the tools of tools.json, every
tool call it makes is run on the backend and its result (or error) fed back, until it answers
in text. A model endpoint that gave up (LLMError) is raised as lobeval.TargetUnavailable: a failure
of the bot's infrastructure, not of the bot.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from lobeval.core.errors import TargetUnavailable
from lobeval.models.llm import LLMClient, LLMError, Usage
from lobeval.samples.support_tickets.backend import SupportBackend
from lobeval.samples.support_tickets.wording import GREETING
from lobeval.core.protocol import USAGE_FIELDS, Reply

MAX_ROUNDS = 8
GAVE_UP = "Sorry, I could not finish that request. Could you say again what you need, perhaps in other words?"
SYSTEM_PROMPT = """\
You are the support desk assistant of Contoso. You help employees with support tickets and their
action items, using the functions you are given, and nothing else.

How you work:
- Before any function that creates or changes something, list every value you will send and ask the
  user to confirm. Call it only after they say yes.
- Never invent an identifier, an email or a department code. Ticket ids look like TKT-1042 and action
  item ids like ACT-5017; take them from the user or from a function result.
- When a required value is missing, ask for it, one question at a time. When a value has a fixed set of
  options (department, priority, workflow type, status), show the valid options as a numbered list and
  accept the number or the name.
- If a function returns an error, tell the user plainly what was wrong and ask for a corrected value.
- After a change, tell the user what was done and the id of the ticket or action item concerned.
- When the user looks up a ticket, tell them its status, priority, title and department.
- If the user asks for something outside support tickets and action items (travel, weather, jokes,
  personal matters...), say politely that you cannot help with that and what you can do. Call no function.
- When the user says the session is finished or says goodbye, reply with a short goodbye. Do not call
  start_over then: it is only for a user who asks to abandon the current task and begin again.
"""


class LLMPolicy:
    """One conversation driven by a model: the chat history and the backend it acts on."""

    def __init__(self, backend: SupportBackend, client: LLMClient, tools: Iterable[dict[str, Any]]):
        self.backend, self.client = backend, client
        self.tools = [{key: value for key, value in tool.items() if key != "effect"} for tool in tools]
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]

    def greeting(self) -> Reply:
        self.messages.append({"role": "assistant", "content": GREETING})
        return Reply(GREETING)

    async def respond(self, message: str) -> Reply:
        self.messages.append({"role": "user", "content": message})
        calls: list[dict[str, Any]] = []
        spent = Usage()
        for _ in range(MAX_ROUNDS):
            try:
                result = await self.client.chat(self.messages, tools=self.tools)
            except LLMError as exc:   # its failed attempts were sent, and paid for, all the same
                spent.merge(exc.usage or Usage())
                raise TargetUnavailable(f"the bot's model endpoint gave up: {exc}", function_calls=calls,
                                        usage={name: getattr(spent, name) for name in USAGE_FIELDS}) from exc
            spent.merge(result.usage)
            answer = result.message
            self.messages.append(answer)
            if not answer.get("tool_calls"):
                return Reply(answer.get("content") or "", calls, {name: getattr(spent, name) for name in USAGE_FIELDS})
            for tool_call in answer["tool_calls"]:
                record = self._run(tool_call["function"])
                calls.append(record)
                outcome = record["result"] if record["error"] is None else {"error": record["error"]}
                self.messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": json.dumps(outcome)})
        self.messages.append({"role": "assistant", "content": GAVE_UP})
        return Reply(GAVE_UP, calls, {name: getattr(spent, name) for name in USAGE_FIELDS})

    def _run(self, function: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call; arguments that are not a JSON object make a failed call, not a crash."""
        name = function.get("name", "")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
            if not isinstance(arguments, dict):
                raise ValueError(f"expected an object, got {type(arguments).__name__}")
        except ValueError as exc:
            return {"functionName": name, "arguments": {}, "result": None,
                    "error": f"arguments are not valid JSON: {exc}"}
        return self.backend.call(name, arguments)
