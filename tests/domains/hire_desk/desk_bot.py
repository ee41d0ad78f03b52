"""An equipment-hire desk for the suite `lobeval init` makes from this folder's openapi.yaml and data/: a bot the
scripted user was never written against (tests/simulation/test_scripted_user.py).

It asks in its own words, as the bots of issue 44 did: "What is the booking reference?", "Which booking would you
like to change?", "Please give me the booking id.", "Could you give me your customer account number?", "When does
the hire start?", each question's wording picked by the case (so that a run meets every one). It reads ids by
their prefixes and ISO dates wherever they are in a message, confirms a write with "Shall I go ahead?", and when
it has booked it names the new booking among other records: "Invoice INV-301 is on its way for booking BK-5001."
`SilentHireBot` never declines anything it cannot do: it says "You're welcome, goodbye!".
"""
from __future__ import annotations

import csv
import re
import zlib
from pathlib import Path
from typing import Any

from lobeval.core.protocol import Reply

HERE = Path(__file__).parent
STOP = "the session is finished"
REQUIRED = {"createBooking": ["customerId", "equipmentId", "startDate", "returnDate"],
            "changeBookingDates": ["bookingId", "startDate", "returnDate"], "cancelBooking": ["bookingId"],
            "getBooking": ["bookingId"], "getCustomer": ["customerId"]}
INTENTS = [("cancelBooking", r"\bcancel"), ("changeBookingDates", r"\b(move|change|reschedule|other dates)\b"),
           ("createBooking", r"\b(book|reserve)\b"), ("getCustomer", r"\baccount\b"),
           ("getBooking", r"\b(show|look up|see)\b")]
ASK = {"bookingId": ("What is the booking reference?", "Which booking would you like to change?",
                     "Please give me the booking id.", "Could you tell me the booking number?"),
       "customerId": ("Could you give me your customer account number?", "What is your account number?"),
       "equipmentId": ("Which piece of equipment would you like?", "What is the equipment code?"),
       "startDate": ("When does the hire start?", "What is the first day of the hire?"),
       "returnDate": ("When will the equipment come back?", "What is the return date?")}
IDS = {"customerId": r"\bCUS-\d+\b", "equipmentId": r"\bEQ-\d+\b", "bookingId": r"\bBK-\d+\b"}
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
SCOPE = "Sorry, I can only help with equipment hire: booking, moving or cancelling a hire, or looking one up."


def _rows(name: str) -> dict[str, dict[str, str]]:
    with (HERE / "data" / name).open(newline="", encoding="utf-8") as handle:
        return {row[next(iter(row))]: row for row in csv.DictReader(handle)}


class HireSession:
    declines = True

    def __init__(self, case: dict[str, Any]) -> None:
        self.customers, self.bookings = _rows("customers.csv"), _rows("bookings.csv")
        self.wording = zlib.crc32(str(case.get("case_id")).encode())
        self.task: str | None = None
        self.slots: dict[str, str] = {}
        self.pending: str | None = None
        self.made = 0

    async def greeting(self) -> Reply:
        return Reply("Welcome to the hire desk. How can I help?")

    async def send(self, message: str) -> Reply:
        self.calls: list[dict[str, Any]] = []
        return Reply(self._respond(message.strip()), self.calls)

    def _respond(self, text: str) -> str:
        if STOP in text.lower():
            return "Goodbye!"
        if self.task is None:
            self.task = next((task for task, words in INTENTS if re.search(words, text, re.I)), None)
            if self.task is None:
                return SCOPE if self.declines else "You're welcome, goodbye!"
            self.slots, self.pending = {}, None
        if self.pending == "confirm":
            if re.match(r"\W*(yes|y|sure|ok|go ahead)\b", text, re.I):
                return self._execute()
            self.pending = None
        self._absorb(text)
        missing = [name for name in REQUIRED[self.task] if name not in self.slots]
        if missing:
            self.pending = missing[0]
            variants = ASK[missing[0]]
            return variants[(self.wording + len(self.slots)) % len(variants)]
        if self.task.startswith("get"):
            return self._execute()
        self.pending = "confirm"
        said = ", ".join(f"{name} {value}" for name, value in self.slots.items())
        return f"To confirm: {self.task.replace('Booking', ' booking').lower()} with {said}. Shall I go ahead?"

    def _absorb(self, text: str) -> None:
        for name, pattern in IDS.items():
            if name in REQUIRED[self.task] and (found := re.search(pattern, text)):
                self.slots[name] = found.group(0)
        dates = DATE.findall(text)
        wanted = [name for name in ("startDate", "returnDate") if name in REQUIRED[self.task]]
        if self.pending in wanted and dates:
            self.slots[self.pending] = dates[0]
        elif len(dates) == len(wanted) == 2:
            self.slots.update(zip(wanted, dates))

    def _execute(self) -> str:
        task, arguments = self.task, dict(self.slots)
        self.task, self.pending = None, None
        record = {"functionName": task, "arguments": arguments, "result": None, "error": None}
        self.calls.append(record)
        booking = self.bookings.get(arguments.get("bookingId", ""))
        if "bookingId" in arguments and booking is None:
            record["error"] = f"no booking {arguments['bookingId']}"
            return f"Sorry, I could not find booking {arguments['bookingId']}. Anything else?"
        if task == "createBooking":
            self.made += 1
            booking_id, invoice = f"BK-{5000 + self.made}", f"INV-{300 + self.made}"
            self.bookings[booking_id] = {"booking_id": booking_id, "customer_id": arguments["customerId"],
                                         "equipment_id": arguments["equipmentId"], "status": "Confirmed"}
            record["result"] = {"bookingId": booking_id, "invoiceId": invoice}
            return (f"Booked {arguments['equipmentId']} for customer {arguments['customerId']} from "
                    f"{arguments['startDate']} to {arguments['returnDate']}. Invoice {invoice} is on its way for "
                    f"booking {booking_id}. Anything else?")
        if task == "getCustomer":
            customer = self.customers.get(arguments["customerId"])
            record["result"] = customer
            return f"Account {arguments['customerId']}: {customer['name']}, {customer['email']}. Anything else?"
        record["result"] = {"bookingId": arguments["bookingId"], **arguments}
        if task == "getBooking":
            return f"Booking {arguments['bookingId']} is {booking['status']}. Anything else?"
        verb = "cancelled" if task == "cancelBooking" else "moved"
        return f"Done: booking {arguments['bookingId']} is {verb}. Anything else?"


class SilentSession(HireSession):
    declines = False


class HireBot:
    session = HireSession

    async def start(self, case: dict[str, Any]) -> HireSession:
        return self.session(case)


class SilentHireBot(HireBot):
    session = SilentSession
