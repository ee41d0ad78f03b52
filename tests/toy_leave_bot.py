"""A second, unrelated domain: a leave-booking bot with its own wording, for testing simulated users.

It asks its questions in plain sentences (no bold, no field names in code style), confirms with
(y/n), and uses its own id scheme (LV-...).
"""
from __future__ import annotations

import asyncio
import itertools
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lobeval import TargetUnavailable
from lobeval.core.protocol import Reply

MENU = "Hi, I'm the HR helper. I can:\n1) Book leave\n2) Cancel a leave booking\n3) Check a leave balance\nWhat do you need?"
QUESTIONS = {"employee_email": "Sure. What is your employee email?",
             "start_date": "Which start date should the leave begin on?",
             "end_date": "And the end date?",
             "leave_type": "What kind of leave is it? Options:\n1) Vacation\n2) Sick\n3) Parental"}
TYPES = ["Vacation", "Sick", "Parental"]


@dataclass
class LeaveSession:
    bookings: dict = field(default_factory=lambda: {"LV-7": {"employee_email": "kim@example.org"}})
    task: str | None = None
    slots: dict = field(default_factory=dict)
    confirming: bool = False
    asked: str | None = None

    async def greeting(self) -> Reply:
        return Reply(MENU)

    async def send(self, message: str) -> Reply:
        return self.answer(message)

    def answer(self, message: str) -> Reply:
        text = message.strip()
        if self.task is None:
            if text == "1" or re.search(r"\bbook\b", text, re.I):
                self.task = "book"
            elif text == "2" or "cancel" in text.lower():
                self.task = "cancel"
            else:
                return Reply("Sorry, I only handle leave. " + MENU)
        if self.confirming:
            if text.lower() in ("y", "yes") or text.lower().startswith("yes"):
                return self._execute()
            self.confirming = False
            return Reply("OK, not booked. What do you need?")
        if self.asked:
            self._fill(self.asked, text)
        self._extract(text)
        return self._next()

    def _extract(self, text: str) -> None:
        for key, value in re.findall(r"(employee email|start date|end date|leave type|booking id)\s*[:=]\s*(.+)", text, re.I):
            self._fill(key.lower().replace(" ", "_"), value.strip())
        booking = re.search(r"\bLV-\d+\b", text)
        if booking:
            self.slots["booking_id"] = booking.group(0)

    def _fill(self, name: str, text: str) -> None:
        value = re.sub(r"^the [a-z ]+ is ", "", text.strip().rstrip("."), flags=re.I)
        if name == "leave_type" and value.isdigit() and 1 <= int(value) <= 3:
            value = TYPES[int(value) - 1]
        if name == "employee_email" and "@" not in value:
            self.asked = name
            return
        self.slots[name] = value

    def _next(self) -> Reply:
        needed = ["booking_id"] if self.task == "cancel" else ["employee_email", "start_date", "end_date", "leave_type"]
        for name in needed:
            if name not in self.slots:
                self.asked = name
                return Reply(QUESTIONS.get(name, "Which booking id?"))
        self.asked, self.confirming = None, True
        summary = ", ".join(f"{k}={v}" for k, v in self.slots.items())
        return Reply(f"I'll {self.task} leave with {summary}. Shall I go ahead (y/n)?")

    def _execute(self) -> Reply:
        if self.task == "book":
            booking = f"LV-{len(self.bookings) + 100}"
            self.bookings[booking] = dict(self.slots)
            call = {"functionName": "book_leave", "arguments": dict(self.slots),
                    "result": {"booking_id": booking}, "error": None}
            text = f"Booked! Your reference is {booking}. Anything else?"
        else:
            removed = self.bookings.pop(self.slots["booking_id"], None)
            call = {"functionName": "cancel_leave", "arguments": dict(self.slots),
                    "result": {"cancelled": removed is not None}, "error": None if removed else "no such booking"}
            text = "Cancelled. Anything else?" if removed else "I could not find that booking. Anything else?"
        self.task, self.slots, self.confirming = None, {}, False
        return Reply(text, [call])

    async def state(self) -> dict:
        return {"bookings": self.bookings}


class LeaveBot:
    async def start(self, case: dict) -> LeaveSession:
        return LeaveSession()


class GatedLeaveBot(LeaveBot):
    """The same bot, but only its first OPEN conversations start at once: every later one waits at
    its start until the file named by $TOY_GATE exists. A run stops making progress at a known
    point, to be killed there, whatever order the conversations run in."""

    OPEN = 10

    def __init__(self) -> None:
        self.started = 0

    async def start(self, case: dict) -> LeaveSession:
        self.started += 1
        gate = Path(os.environ["TOY_GATE"])
        while self.started > self.OPEN and not gate.exists():
            await asyncio.sleep(0.01)
        return await super().start(case)


class BrokenBot:
    """Fails on the second message: a target error mid-conversation."""

    async def start(self, case: dict) -> "BrokenSession":
        return BrokenSession()


class BrokenSession(LeaveSession):
    async def send(self, message: str) -> Reply:
        if any(self.slots.values()) or self.task:
            raise RuntimeError("database connection lost")
        return await super().send(message)


class UnavailableBot:
    """Like BrokenBot, but says that its own infrastructure failed: a machinery error, not the bot's."""

    async def start(self, case: dict) -> "UnavailableSession":
        return UnavailableSession()


class UnavailableSession(LeaveSession):
    async def send(self, message: str) -> Reply:
        if any(self.slots.values()) or self.task:
            raise TargetUnavailable("database connection lost")
        return await super().send(message)


class HangingBot:
    """Never answers the second message (until cancelled): it misses any deadline."""

    async def start(self, case: dict) -> "HangingSession":
        return HangingSession()


class HangingSession(LeaveSession):
    async def send(self, message: str) -> Reply:
        if any(self.slots.values()) or self.task:
            await asyncio.Event().wait()
        return await super().send(message)


class StuckSyncLeaveBot:
    """Synchronous, and its first STUCK conversations never answer a message: each such call waits
    on `release` (which only a test may set), misses any deadline and keeps its thread."""

    STUCK = 3
    release = threading.Event()

    def __init__(self) -> None:
        self._numbers = itertools.count(1)   # start() runs on several threads at once

    def start(self, case: dict) -> "SyncLeaveSession":
        return SyncLeaveSession(stuck=next(self._numbers) <= self.STUCK, release=self.release)


class SyncLeaveSession(LeaveSession):
    def __init__(self, *, stuck: bool, release: threading.Event):
        super().__init__()
        self.stuck, self.release = stuck, release

    def greeting(self) -> Reply:
        return Reply(MENU)

    def send(self, message: str) -> Reply:
        if self.stuck:
            self.release.wait()
        return self.answer(message)

    def state(self) -> dict:
        return {"bookings": self.bookings}


class ExitingBot(LeaveBot):
    """Its first conversation raises SystemExit at the first message, as a careless bot might."""

    def __init__(self) -> None:
        self.started = 0

    async def start(self, case: dict) -> LeaveSession:
        self.started += 1
        return ExitingSession() if self.started == 1 else await super().start(case)


class ExitingSession(LeaveSession):
    async def send(self, message: str) -> Reply:
        raise SystemExit("configuration missing")


class UnbuildableBot:
    """A bot that cannot be built: its constructor fails, as with a missing licence key (the pre-flight imports
    a target but never builds it, so stage 02 is where this shows)."""

    def __init__(self) -> None:
        raise RuntimeError("no licence key in the environment")
