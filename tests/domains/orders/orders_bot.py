"""A second domain the drafter was not written from: an online shop's orders-and-returns bot with rules, and
a deliberately buggy one (it ships everything Standard and refunds everything as store credit, while telling
the user what they asked for).

It asks one plain question per missing value, reads "label: value" lines and "The label is value."
answers, confirms a write with "Shall I go ahead?", and keeps its records in memory (fresh per session,
from the CSV files beside it): state() and apply() give the end-state check.
"""
from __future__ import annotations

import csv
import itertools
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from lobeval.core.protocol import Reply

HERE = Path(__file__).parent
STOP = "the session is finished"
REQUIRED = {"place_order": ["customer_id", "product", "quantity", "shipping_speed"], "change_order": ["order_id"],
            "request_return": ["order_id", "reason", "refund_method", "pickup_date"], "get_order": ["order_id"]}
CHANGEABLE = ["quantity", "shipping_speed", "delivery_date"]
OPTIONS = {"shipping_speed": ["Standard", "Express", "Overnight"],
           "reason": ["Damaged", "Wrong size", "No longer needed"],
           "refund_method": ["Original payment", "Store credit"]}
QUESTIONS = {"customer_id": "What is your customer id?", "product": "Which product would you like?",
             "quantity": "What quantity do you need?",
             "shipping_speed": "Which shipping speed: Standard, Express or Overnight?",
             "order_id": "What is the order id?", "reason": "What is the reason for the return?",
             "refund_method": "Which refund method would you like: Original payment or Store credit?",
             "pickup_date": "Which pickup date suits you?", "delivery_date": "Which delivery date?"}
INTENTS = [("request_return", r"\breturn"), ("change_order", r"\b(change|update|modify|move|switch|reschedule)\b"),
           ("place_order", r"\b(place|buy|new order|purchase)\b"), ("get_order", r"\b(look up|status|where is)\b")]
SCOPE = "Sorry, I can only help with orders: placing, changing, returning or looking one up."
IDS = {"customer_id": r"\bCUST-\d+\b", "order_id": r"\bORD-\d+\b"}


def _rows(name: str) -> list[dict[str, str]]:
    with (HERE / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def label(name: str) -> str:
    return name.replace("_", " ")


def normal(name: str, text: str) -> Any:
    """The value `text` gives for a field, or None when it gives none."""
    text = re.sub(rf"^\s*(the\s+)?{label(name)}\s+(is|:)\s*", "", text.strip(), flags=re.I).strip().rstrip(".")
    if name in IDS:
        found = re.search(IDS[name], text)
        return found.group(0) if found else None
    if name == "quantity":
        found = re.search(r"\b\d+\b", text)
        return int(found.group(0)) if found and int(found.group(0)) >= 1 else None
    if name in OPTIONS:
        return next((o for o in sorted(OPTIONS[name], key=len, reverse=True) if o.lower() in text.lower()), None)
    if name.endswith("_date"):
        found = re.search(r"\b\d{4}-\d{2}-\d{2}\b", text)
        return found.group(0) if found else None
    return text or None


def buggy(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The buggy bot's calls: shipped Standard, refunded as store credit, a changed delivery date a day late."""
    wrong = {k: v for k, v in (("shipping_speed", "Standard"), ("refund_method", "Store credit")) if k in arguments}
    if function == "change_order" and "delivery_date" in arguments:
        wrong["delivery_date"] = (date.fromisoformat(arguments["delivery_date"]) + timedelta(days=1)).isoformat()
    return {**arguments, **wrong}


class Shop:
    """The records and the functions on them."""

    def __init__(self) -> None:
        self.customers = {r["customer_id"]: r for r in _rows("customers.csv")}
        self.orders = {r["order_id"]: {**r, "quantity": int(r["quantity"])} for r in _rows("orders.csv")}
        self.returns = {r["return_id"]: r for r in _rows("returns.csv")}
        self.numbers = itertools.count(9001)

    def call(self, function: str, arguments: dict[str, Any]) -> dict[str, Any]:
        record = {"functionName": function, "arguments": dict(arguments), "result": None, "error": None}
        try:
            record["result"] = getattr(self, function)(**arguments)
        except (KeyError, TypeError, ValueError) as exc:
            record["error"] = str(exc)
        return record

    def _order(self, order_id: str) -> dict[str, Any]:
        if order_id not in self.orders:
            raise KeyError(f"no order {order_id}")
        return self.orders[order_id]

    def place_order(self, customer_id: str, product: str, quantity: int, shipping_speed: str) -> dict[str, Any]:
        if customer_id not in self.customers:
            raise KeyError(f"no customer {customer_id}")
        order_id = f"ORD-{next(self.numbers)}"
        self.orders[order_id] = {"order_id": order_id, "customer_id": customer_id, "product": product,
                                 "quantity": quantity, "shipping_speed": shipping_speed, "delivery_date": "",
                                 "status": "Placed"}
        return {"order_id": order_id}

    def change_order(self, order_id: str, **changes: Any) -> dict[str, Any]:
        order = self._order(order_id)
        order.update(changes)
        return {"order_id": order_id, "changed": sorted(changes)}

    def request_return(self, order_id: str, reason: str, refund_method: str, pickup_date: str) -> dict[str, Any]:
        self._order(order_id)
        return_id = f"RET-{next(self.numbers)}"
        self.returns[return_id] = {"return_id": return_id, "order_id": order_id, "reason": reason,
                                   "refund_method": refund_method, "pickup_date": pickup_date}
        return {"return_id": return_id}

    def get_order(self, order_id: str) -> dict[str, Any]:
        return dict(self._order(order_id))


class OrdersSession:
    bugs = False

    def __init__(self) -> None:
        self.shop = Shop()
        self.task: str | None = None
        self.slots: dict[str, Any] = {}
        self.pending: str | None = None

    async def greeting(self) -> Reply:
        return Reply("Hello! I can place, change or return an order, or look one up. What do you need?")

    async def send(self, message: str) -> Reply:
        self.calls: list[dict[str, Any]] = []
        return Reply(self._respond(message.strip()), self.calls)

    async def state(self) -> dict[str, Any]:
        return {"orders": {k: dict(v) for k, v in self.shop.orders.items()},
                "returns": {k: dict(v) for k, v in self.shop.returns.items()}}

    async def apply(self, function_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.shop.call(c["functionName"], c.get("arguments") or {}) for c in function_calls]

    def _respond(self, text: str) -> str:
        if STOP in text.lower():
            self.task = None
            return "Goodbye!"
        if self.task is None:
            self.task = next((task for task, words in INTENTS if re.search(words, text, re.I)), None)
            if self.task is None:
                return SCOPE
            self.slots, self.pending = {}, None
        if self.pending == "confirm" and re.match(r"\W*(yes|y|sure|ok|go ahead)\b", text, re.I):
            return self._execute()
        problem = self._absorb(text)
        return problem or self._next()

    def _fields(self) -> list[str]:
        return REQUIRED[self.task] + (CHANGEABLE if self.task == "change_order" else [])

    def _absorb(self, text: str) -> str | None:
        for name in self._fields():
            pairs = re.findall(rf"^\s*{label(name)}\s*:\s*(.+)$", text, re.I | re.M)
            found = normal(name, pairs[-1]) if pairs else normal(name, text) if name in IDS else None
            if found is not None:
                self.slots[name] = found
        if self.pending in self._fields() and self.pending not in self.slots:
            value = normal(self.pending, text)
            if value is None:
                return f"Sorry, that is not a valid {label(self.pending)}. {QUESTIONS[self.pending]}"
            self.slots[self.pending] = value
        return None

    def _next(self) -> str:
        missing = [name for name in REQUIRED[self.task] if name not in self.slots]
        if missing:
            self.pending = missing[0]
            return QUESTIONS[missing[0]]
        if self.task == "change_order" and len(self.slots) == 1:
            self.pending = "changes"
            return f"What should change on order {self.slots['order_id']}?"
        if self.task == "get_order":
            return self._execute()
        self.pending = "confirm"
        summary = "\n".join(f"- {label(k)}: {v}" for k, v in self.slots.items())
        return f"Here is what I have:\n{summary}\nShall I go ahead?"

    def _execute(self) -> str:
        arguments = dict(self.slots)
        if self.bugs:
            arguments = buggy(self.task, arguments)
        record = self.shop.call(self.task, arguments)
        self.calls.append(record)
        task, self.task, self.pending = self.task, None, None
        if record["error"]:
            return f"Sorry, that did not work: {record['error']}. Anything else?"
        said = ", ".join(f"{label(k)} {v}" for k, v in self.slots.items())
        made = record["result"].get("return_id") or record["result"].get("order_id")
        return f"Done: {made} ({label(task)}: {said}). Anything else?"


class BuggyOrdersSession(OrdersSession):
    bugs = True


class OrdersBot:
    session = OrdersSession

    async def start(self, case: dict[str, Any]) -> OrdersSession:
        return self.session()


class BuggyOrdersBot(OrdersBot):
    session = BuggyOrdersSession
