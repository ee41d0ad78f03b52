"""The hire desk's bot for the equipment-hire domain the tests own (tests/domains/equipment_hire): a suite lobeval
was not written from, made the way a new user makes one (`lobeval init` from openapi.yaml and a SQLite database
built from equipment_hire.sql).

`HireBot` is correct: it calls the API's operations (openapi.yaml) on its own database, a fresh in-memory copy of
equipment_hire.sql per session, and keeps the business's rules: a hire cannot end before it starts, nor take more
units than are in stock; only a booking still to start can be cancelled or moved; a discount or a return is for a
booking not cancelled nor already returned, and equipment cannot come back before its hire starts; damage is not
reported on a cancelled booking. A request id (`X-Request-Id`) sent again is applied once. `PhoneCancelHireBot`
takes no cancellation at all.

It asks one plain question per missing value, reads "label: value" lines (the label an argument's name or its
description's words) and "The label is value." answers, confirms a write with "Shall I go ahead?"; state() and
apply() give the end-state check.
"""
from __future__ import annotations

import re
import sqlite3
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from lobeval.core.protocol import Reply

HERE = Path(__file__).parent
STOP = "the session is finished"
TABLES = {"customers": "customer_id", "equipment": "equipment_id", "bookings": "booking_id",
          "damage_reports": "report_id"}
IDS = {"customerId": r"\bCUS-\d+\b", "equipmentId": r"\bEQ-\d+\b", "bookingId": r"\bBK-\d+\b",
       "reportId": r"\bDR-\d+\b"}
INTENTS = [("cancelBooking", r"\bcancel"), ("changeBookingDates", r"\b(move|other dates|change booking dates)\b"),
           ("applyDiscount", r"\bdiscount"), ("updateDamageReport", r"\bupdate (a |the )?damage report"),
           ("reportDamage", r"\bdamage"), ("recordReturn", r"\b(came back|brought back|record return)\b"),
           ("updateContactDetails", r"\bcontact details\b"), ("createBooking", r"\b(book|reserve|hire)"),
           ("getBooking", r"\blook up (a |the )?booking"), ("getCustomer", r"\blook up (a |the )?customer"),
           ("listEquipment", r"\blist\b")]
SCOPE = "Sorry, I can only help with equipment hire: bookings, discounts, returns, damage and contact details."
LIVE = ("Booked", "On hire")


def _operations() -> dict[str, dict[str, Any]]:
    """Each operation's arguments: {name: (schema, required)}, as lobeval's init reads them."""
    from lobeval.workspace.openapi import functions_from_document

    path = HERE / "openapi.yaml"
    found = {}
    for function, _ in functions_from_document(path, yaml.safe_load(path.read_text(encoding="utf-8"))):
        parameters = function["parameters"]
        found[function["name"]] = {name: (schema, name in parameters.get("required", []))
                                   for name, schema in parameters["properties"].items()}
    return found


OPERATIONS = _operations()


def words(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").lower().strip()


def aliases(name: str, schema: dict[str, Any]) -> list[str]:
    """How a person may label an argument: its name in words, its description's first clause."""
    described = re.split(r",|;|\.\s", schema.get("description") or "")[0].strip().rstrip(".").lower()
    return [alias for alias in (words(name), described) if alias]


def value_of(name: str, schema: dict[str, Any], text: str) -> Any:
    """The value `text` gives for an argument, or None when it gives none."""
    text = text.strip().rstrip(".")
    for alias in aliases(name, schema):
        text = re.sub(rf"^(the\s+)?{re.escape(alias)}\s+(is|:)\s*", "", text, flags=re.I)
    if name in IDS:
        found = re.search(IDS[name], text)
        return found.group(0) if found else None
    if schema.get("format") == "date":
        found = re.search(r"\b\d{4}-\d{2}-\d{2}\b", text)
        return found.group(0) if found else None
    if schema.get("type") in ("integer", "number"):
        found = re.search(r"\d+(\.\d+)?", text)
        if not found:
            return None
        return int(float(found.group(0))) if schema["type"] == "integer" else float(found.group(0))
    if schema.get("enum"):
        return next((o for o in sorted(schema["enum"], key=len, reverse=True) if o.lower() in text.lower()), None)
    return text or None


class Refused(ValueError):
    """A call the business's rules refuse."""


class HireDesk:
    """The database and the API's operations on it."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.executescript((HERE / "equipment_hire.sql").read_text(encoding="utf-8"))
        self.numbers = {"bookings": 9001, "damage_reports": 9501}
        self.requests: dict[str, Any] = {}

    def call(self, function: str, arguments: dict[str, Any]) -> dict[str, Any]:
        record = {"functionName": function, "arguments": dict(arguments), "result": None, "error": None}
        request = arguments.get("X-Request-Id")
        try:
            if request in self.requests:
                record["result"] = self.requests[request]
            else:
                unknown = set(arguments) - set(OPERATIONS.get(function, {}))
                if function not in OPERATIONS or unknown:
                    raise Refused(f"no operation {function}" if function not in OPERATIONS
                                  else f"unknown arguments {sorted(unknown)}")
                values = {words(k).replace(" ", "_"): v for k, v in arguments.items() if k != "X-Request-Id"}
                record["result"] = getattr(self, re.sub(r"(?<!^)(?=[A-Z])", "_", function).lower())(**values)
                if request:
                    self.requests[request] = record["result"]
            self.db.commit()
        except (Refused, TypeError, ValueError) as exc:
            self.db.rollback()
            record["error"] = str(exc)
        return record

    def state(self) -> dict[str, Any]:
        return {table: {row[key]: dict(row) for row in self.db.execute(f"SELECT * FROM {table} ORDER BY {key}")}
                for table, key in TABLES.items()}

    def _row(self, table: str, key: Any) -> dict[str, Any]:
        row = self.db.execute(f"SELECT * FROM {table} WHERE {TABLES[table]} = ?", (key,)).fetchone()
        if row is None:
            raise Refused(f"no {table.rstrip('s').replace('_', ' ')} {key}")
        return dict(row)

    def _booking(self, booking_id: str, statuses: tuple[str, ...], doing: str) -> dict[str, Any]:
        booking = self._row("bookings", booking_id)
        if booking["status"] not in statuses:
            raise Refused(f"booking {booking_id} is {booking['status']}: it cannot be {doing}")
        return booking

    def _total(self, equipment_id: str, start: str, end: str, quantity: int, discount: int) -> float:
        days = _period(start, end)
        rate = self._row("equipment", equipment_id)["daily_rate"]
        return round(rate * days * quantity * (100 - discount) / 100, 2)

    def _update(self, table: str, key: Any, **values: Any) -> None:
        assignments = ", ".join(f"{column} = ?" for column in values)
        self.db.execute(f"UPDATE {table} SET {assignments} WHERE {TABLES[table]} = ?", (*values.values(), key))

    # the operations (openapi.yaml) ---------------------------------------------------------------------

    def get_customer(self, customer_id: str) -> dict[str, Any]:
        return self._row("customers", customer_id)

    def list_equipment(self, category: str | None = None) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM equipment WHERE ? IS NULL OR category = ?", (category, category))
        return [dict(row) for row in rows]

    def get_booking(self, booking_id: str) -> dict[str, Any]:
        return self._row("bookings", booking_id)

    def create_booking(self, customer_id: str, equipment_id: str, start_date: str, return_date: str,
                       quantity: int = 1) -> dict[str, Any]:
        self._row("customers", customer_id)
        stock = self._row("equipment", equipment_id)["units_in_stock"]
        if quantity > stock:
            raise Refused(f"only {stock} units of {equipment_id} can be hired")
        booking_id = f"BK-{self.numbers['bookings']}"
        self.numbers["bookings"] += 1
        total = self._total(equipment_id, start_date, return_date, quantity, 0)
        self.db.execute("INSERT INTO bookings VALUES (?, ?, ?, ?, ?, ?, ?, 0, NULL, 'Booked', NULL, NULL)",
                        (booking_id, customer_id, equipment_id, start_date, return_date, quantity, total))
        return {"bookingId": booking_id, "total": total}

    def cancel_booking(self, booking_id: str) -> dict[str, Any]:
        self._booking(booking_id, ("Booked",), "cancelled")
        self._update("bookings", booking_id, status="Cancelled")
        return {"bookingId": booking_id, "status": "Cancelled"}

    def change_booking_dates(self, booking_id: str, start_date: str, return_date: str) -> dict[str, Any]:
        booking = self._booking(booking_id, ("Booked",), "moved")
        total = self._total(booking["equipment_id"], start_date, return_date, booking["quantity"],
                            booking["discount_percent"])
        self._update("bookings", booking_id, start_date=start_date, return_date=return_date, total=total)
        return {"bookingId": booking_id, "total": total}

    def apply_discount(self, booking_id: str, discount_percent: int, reason: str) -> dict[str, Any]:
        booking = self._booking(booking_id, LIVE, "discounted")
        total = self._total(booking["equipment_id"], booking["start_date"], booking["return_date"],
                            booking["quantity"], discount_percent)
        self._update("bookings", booking_id, discount_percent=discount_percent, discount_reason=reason, total=total)
        return {"bookingId": booking_id, "total": total}

    def record_return(self, booking_id: str, returned_on: str, condition: str) -> dict[str, Any]:
        booking = self._booking(booking_id, LIVE, "returned")
        if date.fromisoformat(returned_on) < date.fromisoformat(booking["start_date"]):
            raise Refused(f"equipment cannot come back on {returned_on}, before its hire starts on "
                          f"{booking['start_date']}")
        self._update("bookings", booking_id, status="Returned", returned_on=returned_on, condition_on_return=condition)
        return {"bookingId": booking_id, "status": "Returned"}

    def report_damage(self, booking_id: str, description: str, severity: str,
                      repair_cost: float | None = None) -> dict[str, Any]:
        booking = self._row("bookings", booking_id)
        if booking["status"] == "Cancelled":
            raise Refused(f"booking {booking_id} was cancelled: nothing was hired")
        report_id = f"DR-{self.numbers['damage_reports']}"
        self.numbers["damage_reports"] += 1
        self.db.execute("INSERT INTO damage_reports VALUES (?, ?, ?, ?, ?, ?, 'Open')",
                        (report_id, booking_id, booking["returned_on"] or booking["start_date"], description, severity,
                         repair_cost or 0.0))
        return {"reportId": report_id}

    def update_damage_report(self, report_id: str, status: str | None = None,
                             repair_cost: float | None = None) -> dict[str, Any]:
        self._row("damage_reports", report_id)
        changes = {k: v for k, v in (("status", status), ("repair_cost", repair_cost)) if v is not None}
        if not changes:
            raise Refused("nothing to change")
        self._update("damage_reports", report_id, **changes)
        return {"reportId": report_id, **changes}

    def update_contact_details(self, customer_id: str, email: str | None = None,
                               phone: str | None = None) -> dict[str, Any]:
        self._row("customers", customer_id)
        changes = {k: v for k, v in (("email", email), ("phone", phone)) if v is not None}
        if not changes:
            raise Refused("nothing to change")
        self._update("customers", customer_id, **changes)
        return {"customerId": customer_id, **changes}


def _period(start: str, end: str) -> int:
    """Days of a hire; refused when it ends before it starts."""
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    if last < first:
        raise Refused(f"a hire cannot end ({end}) before it starts ({start})")
    return max((last - first).days, 1)


class HireSession:
    def __init__(self, desk: HireDesk) -> None:
        self.desk = desk
        self.task: str | None = None
        self.slots: dict[str, Any] = {}
        self.pending: str | None = None
        self.calls: list[dict[str, Any]] = []

    async def greeting(self) -> Reply:
        return Reply("Hello, this is the hire desk. I can book equipment, change or cancel a booking, give a "
                     "discount, record a return or damage, and update contact details. What do you need?")

    async def send(self, message: str) -> Reply:
        self.calls = []
        return Reply(self._respond(message.strip()), self.calls)

    async def state(self) -> dict[str, Any]:
        return self.desk.state()

    async def apply(self, function_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.desk.call(c["functionName"], c.get("arguments") or {}) for c in function_calls]

    def _respond(self, text: str) -> str:
        if STOP in text.lower():
            self.task = None
            return "Goodbye!"
        if self.task is None:
            spoken = words(text)
            self.task = next((task for task, pattern in INTENTS if re.search(pattern, spoken)), None)
            if self.task is None:
                return SCOPE
            self.slots, self.pending = {}, None
        if self.pending == "confirm" and re.match(r"\W*(yes|y|sure|ok|go ahead)\b", text, re.I):
            return self._execute()
        problem = self._absorb(text)
        return problem or self._next()

    def _arguments(self) -> dict[str, tuple[dict[str, Any], bool]]:
        return {k: v for k, v in OPERATIONS[self.task].items() if k != "X-Request-Id"}

    def _absorb(self, text: str) -> str | None:
        for name, (schema, _) in self._arguments().items():
            lines = [line for alias in aliases(name, schema)
                     for line in re.findall(rf"^\s*{re.escape(alias)}\s*:\s*(.+)$", text, re.I | re.M)]
            found = value_of(name, schema, lines[-1] if lines else text) if lines or name in IDS else None
            if found is not None:
                self.slots[name] = found
        if self.pending in self._arguments() and self.pending not in self.slots:
            schema = self._arguments()[self.pending][0]
            value = value_of(self.pending, schema, text)
            if value is None:
                return f"Sorry, that is not a valid {words(self.pending)}. {self._question(self.pending)}"
            self.slots[self.pending] = value
        return None

    def _question(self, name: str) -> str:
        schema = self._arguments()[name][0]
        options = f": {', '.join(schema['enum'][:-1])} or {schema['enum'][-1]}" if schema.get("enum") else ""
        return f"What is the {words(name)}{options}?"

    def _next(self) -> str:
        missing = [name for name, (_, required) in self._arguments().items() if required and name not in self.slots]
        if missing:
            self.pending = missing[0]
            return self._question(missing[0])
        if self.task.startswith("get") or self.task.startswith("list"):
            return self._execute()
        optional = any(not required for _, required in self._arguments().values())
        if not optional or any(name not in IDS for name in self.slots):
            self.pending = "confirm"
            summary = "\n".join(f"- {words(k)}: {v}" for k, v in self.slots.items())
            return f"Here is what I have:\n{summary}\nShall I go ahead?"
        self.pending = "changes"
        return "What should change?"

    def _execute(self) -> str:
        record = self.desk.call(self.task, dict(self.slots))
        self.calls.append(record)
        self.task, self.pending = None, None
        if record["error"]:
            return f"Sorry, that did not work: {record['error']}. Anything else?"
        result = record["result"]
        made = next((v for k, v in result.items() if k.endswith("Id")), "") if isinstance(result, dict) else ""
        return f"Done: {made} ({', '.join(f'{words(k)} {v}' for k, v in self.slots.items())}). Anything else?"


class HireBot:
    desk = HireDesk

    async def start(self, case: dict[str, Any]) -> HireSession:
        return HireSession(self.desk())


class PhoneOnlyDesk(HireDesk):
    def cancel_booking(self, booking_id: str) -> dict[str, Any]:
        raise Refused("cancellations are taken by phone")


class PhoneCancelHireBot(HireBot):
    """Takes no cancellation (they are taken by phone): a scenario no record can make pass."""

    desk = PhoneOnlyDesk
