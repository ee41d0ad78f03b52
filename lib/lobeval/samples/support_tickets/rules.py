"""The offline policy: a deterministic, frame-based dialogue manager.

One task at a time (a frame): its arguments are read from whatever the user writes, the first
missing one is asked for, a write is confirmed, then run. Values are checked with the backend's
own rules before any call, so a known-bad value is refused in conversation, not sent.
"""
from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from lobeval.samples.support_tickets import parsing as p
from lobeval.samples.support_tickets import wording as w
from lobeval.samples.support_tickets.backend import SupportBackend, ToolError
from lobeval.samples.support_tickets.reading import FREE_TEXT, Reader
from lobeval.core.protocol import Reply
from lobeval.simulation.users import STOP_PHRASE

# Menu order (wording.MENU): task -> (function, the id argument naming the record an update changes)
TASKS = {"create_ticket": ("create_support_ticket", None), "update_ticket": ("update_support_ticket", "ticket_id"),
         "create_action": ("create_action_item", None), "update_action": ("update_action_item", "action_item_id"),
         "search": ("search_support_tickets", None), "lookup": ("get_support_ticket", None),
         "list_actions": ("list_action_items", None)}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}
_WORDS = {
    "action": r"\baction(?: items?)?\b|\btasks?\b",
    "create": r"\b(?:create|add|new|open|raise|log|file|submit)\b",
    "add": r"\b(?:create|add|new|raise|log)\b",
    "update": r"\b(?:update|change|set|move|reassign|assign|mark|escalate|edit|modify|close|complete|rename|"
              r"raise|lower|increase|reduce|switch)\b",
    "new_ticket": r"\b(?:create|new|open|raise|log|file|submit)\s+(?:an?\s+|new\s+|the\s+)*(?:support\s+)?ticket",
    "list": r"\b(?:list|which|what|show|see|any)\b",
    "search": r"\b(?:search|find|look(?:ing)? for|locate)\b|\bdon'?t (?:remember|know) (?:the|its)\b",
    "lookup": r"\b(?:look ?up|status|check|details|show|what|where)\b",
    "ticket": r"\btickets?\b",
    "elsewhere": r"\b(?:flights?|plane|airline|hotels?|weather|jokes?|taxi|restaurant|movies?|recipe|poem|song)\b",
    "ours": r"\bsupport tickets?\b|\baction items?\b|\b(?:TKT|ACT)-\d+",
    "hello": r"^(?:hi|hello|hey|good (?:morning|afternoon|evening))\b",
    "thanks": r"^(?:no|nope|nothing|that'?s all|that is all|thanks|thank you|all good)\b",
    "start_over": r"\b(?:start over|start again|restart)\b|^\s*(?:cancel|cancel that|never ?mind)\W*$",
    "yes": r"^\W*(?:yes|y|yeah|yep|yup|sure|ok|okay|correct|confirm(?:ed)?|right|proceed)\b|\b(?:go ahead|looks good|"
           r"please do|do it)\b",
    "no": r"^\W*(?:no|n|nope|wrong|incorrect|not|wait|change)\b",
}


def _has(kind: str, text: str) -> bool:
    return re.search(_WORDS[kind], text, re.I) is not None


def sent(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the bot sends for a call it has confirmed with the user.

    A DELIBERATE WEAKNESS, so that the first run (`make run`) has a failure to explain: when an action item's due
    date changes, the date goes through the user's local midnight converted to UTC and arrives one day early.
    The bot confirms and reports the date the user gave; only the call, the data and lobeval see the other one.
    New action items are not affected (another code path), as so often with such bugs."""
    if function != "update_action_item" or "due_date" not in arguments:
        return arguments
    early = date.fromisoformat(arguments["due_date"]) - timedelta(days=1)
    return {**arguments, "due_date": early.isoformat()}


class RulesPolicy:
    """One conversation's dialogue state: the task, the arguments gathered, what was last asked."""

    def __init__(self, backend: SupportBackend, user: str | None = None):
        self.backend = backend
        self.user = user   # the signed-in person the session was opened for (None: a desk agent, no limits)
        self.reader = Reader(backend)
        self.params = self.reader.params
        self._reset()

    def _reset(self) -> None:
        self.task: str | None = None
        self.slots: dict[str, Any] = {}
        self.pending: str | None = None       # an argument name, or "confirm", "fix", "fields"
        self.results: list[str] = []          # ticket ids of the last search, pickable by number
        self.carry: dict[str, Any] = {}       # changes said together with a search, for the ticket picked

    @property
    def function(self) -> str:
        return TASKS[self.task][0]

    @property
    def key(self) -> str | None:
        return TASKS[self.task][1]

    def greeting(self) -> Reply:
        return Reply(w.GREETING)

    async def respond(self, message: str) -> Reply:
        self.calls: list[dict[str, Any]] = []
        return Reply(self._route(message.strip()), self.calls)

    def _route(self, text: str) -> str:
        if STOP_PHRASE in text.lower():
            self._reset()
            return w.GOODBYE
        if _has("start_over", text):
            self._call("start_over", {})
            self._reset()
            return w.START_OVER
        if self.results and (picked := self._picked(text)):
            return self._pick(picked, text)
        if self.task is None:
            return self._choose_task(text)
        if self.pending == "confirm":
            return self._confirm(text)
        if self.pending in ("fix", "fields"):
            return self._revise(text)
        return self._absorb(text) or self._advance()

    # --- choosing what to do ----------------------------------------------------------------

    def _choose_task(self, text: str) -> str:
        if number := p.option_number(text, len(TASKS)):
            self._start(list(TASKS)[number - 1])
            return self._advance()
        elsewhere = _has("elsewhere", p.without_quotes(text)) and not _has("ours", text)
        task = None if elsewhere else self._intent(text)
        if task is None:
            if elsewhere or not (_has("hello", text) or _has("thanks", text) or _has("yes", text)):
                return w.OUT_OF_SCOPE
            return w.WELCOME if _has("thanks", text) else w.WHAT_NEXT
        self._start(task)
        if task == "search" and _has("update", text):
            changes, _ = self._checked(self.reader.extract(text, "update_support_ticket"))
            self.carry = {name: value for name, value in changes.items() if name != "ticket_id"}
            self.slots = {"query": self.reader.query(text) or text}
            return self._execute()
        return self._absorb(text) or self._advance()

    def _intent(self, text: str) -> str | None:
        ticket, action = p.ticket_ids(text), p.action_ids(text)
        new_ticket = _has("new_ticket", text) and not ticket
        if _has("action", text) and _has("add", text) and not new_ticket:
            return "create_action"
        if action or (_has("action", text) and _has("update", text)):
            return "update_action"
        if _has("action", text) and (_has("list", text) or ticket):
            return "list_actions"
        if ticket and (_has("update", text) or len(self.reader.extract(text, "update_support_ticket")) > 1):
            return "update_ticket"
        if _has("search", text):
            return "search"
        if new_ticket or (_has("create", text) and _has("ticket", text)):
            return "create_ticket"
        if ticket or (_has("lookup", text) and _has("ticket", text)):
            return "lookup"
        if _has("update", text) and _has("ticket", text):
            return "update_ticket"
        return self._labelled_task(text)

    def _labelled_task(self, text: str) -> str | None:
        """The create whose arguments a message of bare 'label: value' pairs gives (at least two)."""
        counts = {task: len(p.labelled_pairs(text, self.params[TASKS[task][0]]))
                  for task in ("create_ticket", "create_action")}
        task = max(counts, key=counts.get)
        return task if counts[task] >= 2 else None

    def _start(self, task: str) -> None:
        self._reset()
        self.task = task

    def _picked(self, text: str) -> int | None:
        """The search result a message picks: '2', 'number 2', 'the second one', or its ticket id."""
        count = len(self.results)
        if number := p.option_number(text, count):
            return number
        ids = [i for i in p.ticket_ids(text) if i in self.results]
        match = re.search(r"\b(?:number|no\.?|#|result|option)\s*(\d{1,2})\b", text, re.I)
        ordinal = re.search(rf"\b({'|'.join(ORDINALS)})\b", text, re.I)
        number = (self.results.index(ids[0]) + 1 if ids else int(match.group(1)) if match
                  else ORDINALS[ordinal.group(1).lower()] if ordinal else None)
        return number if number and number <= count else None

    def _pick(self, number: int, text: str) -> str:
        ticket_id, carry = self.results[number - 1], self.carry
        self._start("update_ticket")
        self.slots = {"ticket_id": ticket_id, **carry}
        return self._absorb(text) or self._advance()

    # --- filling arguments ------------------------------------------------------------------

    def _absorb(self, text: str) -> str | None:
        """Take every argument value in `text`; returns the question to ask when one is not valid."""
        if self.pending == self.key == "ticket_id" and not p.ticket_ids(text):
            query = self.reader.query(text) or p.strip_lead_in(text, "query", True)
            return self._offer({"query": query}, self._call("search_support_tickets", {"query": query}))
        found = self.reader.extract(text, self.function, free=self.pending in FREE_TEXT)
        if self.pending in self.params[self.function] and self.pending not in found:
            found[self.pending] = self.reader.read(self.pending, text)
        valid, problems = self._checked(found)
        self.slots.update(valid)
        if problems:
            bad, problem = next(iter(problems.items()))
            self.slots.pop(bad, None)
            return self._ask(bad, problem)
        return None

    def _checked(self, found: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """The values that pass the backend's checks (in canonical form), and why the others do not."""
        valid, problems = {}, {}
        for name, value in found.items():
            try:
                valid[name] = value if name == "query" else self.backend.check(name, value)
            except ToolError as exc:
                problems[name] = str(exc)
        return valid, problems

    # --- asking, confirming, running --------------------------------------------------------

    def _advance(self) -> str:
        """Ask for what is missing, else confirm a write, else run a read."""
        required = ([self.key] if self.key else []) + self.backend.schemas[self.function].get("required", [])
        if missing := [name for name in required if name not in self.slots]:
            return self._ask(missing[0])
        if self.task == "search" and not self.slots:
            return self._ask("query")
        if self.key and len(self.slots) == 1:
            self.pending = "fields"
            return w.which_changes(self.function)
        if self.backend.effects.get(self.function) == "write":
            self.pending = "confirm"
            return w.summary(self.function, self._arguments(), self.key)
        return self._execute()

    def _ask(self, name: str, problem: str | None = None) -> str:
        self.pending = name
        ask = w.question(name, self.function, self.backend.departments, self.reader.last_ticket)
        return w.invalid(problem, ask) if problem else ask

    def _confirm(self, text: str) -> str:
        before = dict(self.slots)
        if (question := self._absorb(text)) or self.slots != before:
            return question or self._advance()
        if _has("no", text):
            if named := self._named_field(text):
                return self._ask(named)
            self.pending = "fix"
            return w.WHICH_FIELD
        return self._execute() if _has("yes", text) else f"{w.YES_OR_NO}\n{self._advance()}"

    def _named_field(self, text: str) -> str | None:
        fields = [name for name in self.params[self.function] if name != self.key]
        return next((name for name in fields if re.search(rf"\b{p.label(name)}\b", text, re.I)), None)

    def _revise(self, text: str) -> str:
        """After "no" to a confirmation, or when asked which fields of a record should change."""
        before = dict(self.slots)
        if (question := self._absorb(text)) or self.slots != before:
            return question or self._advance()
        if named := self._named_field(text):
            return self._ask(named)
        return w.not_understood([name for name in self.params[self.function] if name != self.key], self.function)

    def _execute(self) -> str:
        function, arguments = self.function, self._arguments()
        if refusal := self._refusal(function, arguments):
            self._reset()
            return refusal + w.ANYTHING_ELSE
        record = self._call(function, sent(function, arguments))
        if function == "search_support_tickets" and not record["error"]:
            return self._offer(arguments, record)
        if record["error"]:
            if bad := next(iter(self._checked(arguments)[1]), None):
                del self.slots[bad]
                return self._ask(bad, record["error"])
            self._reset()
            return f"Sorry, that didn't work: {record['error']}.{w.ANYTHING_ELSE}"
        if function == "create_support_ticket":
            self.reader.last_ticket = record["result"]["ticket_id"]
        self._reset()
        return w.done(function, arguments, record["result"], self.backend.departments) + w.ANYTHING_ELSE

    def _refusal(self, function: str, arguments: dict[str, Any]) -> str | None:
        """Why a signed-in requester may not make this write (scenarios/support_tickets/policy.json), or None:
        only the tickets they raised and their action items; no priority Critical; no change of customer_visible."""
        if self.user is None or self.backend.effects.get(function) != "write":
            return None
        ticket = arguments.get("ticket_id") or arguments.get("parent_ticket_id")
        if "action_item_id" in arguments:
            ticket = (self.backend.action_items.get(arguments["action_item_id"]) or {}).get("parent_ticket_id")
        owner = (self.backend.tickets.get(ticket) or {}).get("requester_email") if ticket else None
        if ticket and str(owner).casefold() != self.user.casefold():
            return f"Sorry, I can only change tickets you raised, and {ticket} is not one of them."
        if arguments.get("priority") == "Critical":
            return "Sorry, only a manager can set a ticket's priority to Critical."
        if "customer_visible" in arguments and function == "update_support_ticket":
            return "Sorry, whether a ticket is visible to the customer is not yours to change."
        return None

    def _offer(self, arguments: dict[str, Any], record: dict[str, Any]) -> str:
        """Show search results, pickable by number; in an update, the pick becomes the ticket to change."""
        updating, carry = self.task == "update_ticket", self.carry
        tickets = record["result"]["tickets"]
        if not tickets:
            self.slots = {}
            if not updating:
                self.pending = "query"
            return w.no_results(arguments.get("query", ""), updating)
        if updating:
            self.slots = {}
        else:
            self._reset()
            self.carry = carry
        self.results = [t["id"] for t in tickets]
        return w.results(tickets)

    def _arguments(self) -> dict[str, Any]:
        """The arguments gathered, in the order of the function's parameters."""
        return {name: self.slots[name] for name in self.params[self.function] if name in self.slots}

    def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        record = self.backend.call(name, arguments)
        self.calls.append(record)
        return record
