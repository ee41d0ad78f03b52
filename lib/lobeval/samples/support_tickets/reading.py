"""Reading the arguments of a function out of what a user wrote, for the rule-based policy."""
from __future__ import annotations

import re
from typing import Any

from lobeval.samples.support_tickets import parsing as p
from lobeval.samples.support_tickets.backend import ENUMS, SupportBackend

FREE_TEXT = {"title", "description", "expected_outcome", "query"}
# "an action item for it": the ticket just created
FOR_IT = (r"\bfor (?:it|this|that)\b|\b(?:this|that|the new|the same) (?:support )?ticket\b|\bjust created\b|"
          r"^\s*(?:it|this|that|this one|that one|the same)\W*$")
_FILLER = r"(?:(?:for|the|a|an|all|my|me|it|one|support|tickets?)\b\W*)*+"
_QUERY_AFTER = (rf"\b(?:about|titled|called|named|regarding|mentioning|containing)\s+{_FILLER}(.+)",
                rf"\b(?:search|find|look(?:ing)? for|locate)\s+{_FILLER}(.+)",
                rf"\bfor\s+{_FILLER}(.+)")
# where a search phrase ends: "... about X and set its status to Y"
_CLAUSE_END = r"\s+(?:and|then)\s+(?:set|change|update|mark|move|make|raise)\b|[.?!;](?:\s|$)"


class Reader:
    """Candidate argument values for the functions of a backend; the backend's checks decide validity."""

    def __init__(self, backend: SupportBackend):
        self.params = {name: schema["properties"] for name, schema in backend.schemas.items()}
        self.departments = backend.departments
        self.last_ticket: str | None = None   # the ticket created last in this conversation

    def extract(self, text: str, function: str, free: bool = False) -> dict[str, Any]:
        """Argument values in `text`: labelled pairs always; ids, emails, dates and option words too,
        unless `text` answers a free-text question."""
        names = self.params[function]
        found = {name: self.read(name, value) for name, value in p.labelled_pairs(text, names).items()}
        if not free:
            head = p.without_quotes(text[: p.first_label_at(text, names)])
            for name, value in self._spotted(text, head, function).items():
                found.setdefault(name, value)
        return found

    def _spotted(self, text: str, head: str, function: str) -> dict[str, Any]:
        """Values recognisable without a label; `head` is `text` before any pair, quotes removed.

        A search message is mostly the words searched for, so there a filter counts only when its
        field is named ("status Blocked", "department IT"), never from a bare word like "Finance".
        """
        names = self.params[function]
        loose = function != "search_support_tickets"
        tickets, date = p.ticket_ids(text), p.find_date(head)
        found = {"ticket_id": tickets, "parent_ticket_id": tickets, "action_item_id": p.action_ids(text),
                 "assignee": p.emails(head)[-1:], "due_date": [date] if date else []}
        spotted = {name: values[0] for name, values in found.items() if name in names and values}
        if "parent_ticket_id" in names and not tickets and self.last_ticket and re.search(FOR_IT, text, re.I):
            spotted["parent_ticket_id"] = self.last_ticket
        for name in (n for n in ENUMS if n in names):
            if option := p.field_option(head, name, ENUMS[name]) or (
                    loose and p.option_in(head, ENUMS[name], common_too=False)):
                spotted[name] = option
        if "department_code" in names and (code := self._department_in(head, loose)):
            spotted["department_code"] = code
        if function.startswith("create") and (titles := p.quoted(text)):
            spotted["title"] = titles[0]
            # 'Title' (details) -- details in brackets right after a quoted title are its description
            if "description" in names and (details := re.search(r"['\"’”]\s*\(([^)]+)\)", text)):
                spotted["description"] = details.group(1).strip()
        if function == "search_support_tickets" and (query := self.query(text)):
            spotted["query"] = query
        return spotted

    def _department_in(self, text: str, loose: bool = True) -> str | None:
        """A department named in free text: 'department MKTG'; if `loose`, also 'IT' or 'Finance' alone."""
        if named := re.search(r"(?i:\bdepartment(?:\s+code)?)\s*(?:is\s+|of\s+)?([A-Z]{2,5})\b", text):
            return named.group(1)
        if not loose:
            return None
        for code, department in self.departments.items():
            if re.search(rf"\b{code}\b", text) or re.search(rf"\b{re.escape(department['name'])}\b", text, re.I):
                return code
        return None

    def query(self, text: str) -> str | None:
        """Search words: a quoted phrase, else what follows 'about', 'titled', ..., or 'search tickets'."""
        if quoted := p.quoted(text):
            return quoted[0]
        for pattern in _QUERY_AFTER:
            if match := re.search(pattern, text, re.I):
                words = re.split(_CLAUSE_END, match.group(1))[0].strip(" .?!")
                return words or None
        return None

    def read(self, name: str, text: str) -> Any:
        """A candidate value for argument `name` from one answer; backend.check decides if it is valid."""
        value = p.strip_lead_in(text, name, free=name in FREE_TEXT)
        if name == "title":
            return value.rstrip(". ")   # a title is not a sentence
        if name in ENUMS:
            number = p.option_number(value, len(ENUMS[name]))
            return ENUMS[name][number - 1] if number else p.option_in(value, ENUMS[name]) or value
        if name == "department_code":
            codes = list(self.departments)
            number = p.option_number(value, len(codes))
            return codes[number - 1] if number else self._department_in(value) or value.strip(" .")
        if name == "customer_visible":
            answer = p.as_boolean(value)
            return value if answer is None else answer
        if name == "parent_ticket_id" and self.last_ticket and re.search(FOR_IT, value, re.I):
            return self.last_ticket
        if name == "due_date":
            return p.as_date(value) or value
        if name == "assignee":
            return (p.emails(value) or [value])[-1]
        ids = {"ticket_id": p.ticket_ids, "parent_ticket_id": p.ticket_ids, "action_item_id": p.action_ids}
        return (ids[name](value) or [value])[0] if name in ids else value
