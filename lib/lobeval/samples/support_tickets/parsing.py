"""Reading argument values out of what a user wrote: labelled pairs, ids, emails, dates, option words."""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from dateutil import parser as dateparser

ALIASES = {"department": "department_code", "workflow": "workflow_type", "customer visibility": "customer_visible"}
OPTION_ALIASES = {"done": "Completed", "finished": "Completed", "canceled": "Cancelled", "in-progress": "In Progress"}
# Everyday words that name an option only when the field is named too ("priority high", "high priority").
COMMON_WORDS = {"open", "low", "medium", "high", "standard"}
YES = {"yes", "y", "yeah", "yep", "sure", "true", "ok", "okay", "correct", "confirm", "confirmed", "right",
       "visible", "proceed"}
NO = {"no", "n", "nope", "false", "not", "don't", "dont", "hidden", "wrong", "invisible"}
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DATES = re.compile(rf"\b\d{{4}}-\d{{1,2}}-\d{{1,2}}\b|\b\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{4}}\b"
                    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"
                    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+\d{{4}}\b", re.I)
_QUOTED = re.compile(r"(?:^|(?<=[\s(:]))(['\"‘“])(.+?)(?:['\"’”])(?=[\s.,;:)!?]|$)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_LEAD_IN = re.compile(r"^(?:it'?s|it is|that'?s|that is|please use|use|make it|set it to)\s+", re.I)


def label(name: str) -> str:
    """How an argument is named to the user: department_code -> department code."""
    return name.replace("_", " ")


def labelled_pairs(text: str, names: Iterable[str]) -> dict[str, str]:
    """'label: value' / 'label = value' / 'the label should be value' pairs for the given argument names; a value
    runs to the next label."""
    labels, matches = _label_matches(text, names)
    pairs = {}
    for match, after in zip(matches, [*matches[1:], None]):
        value = text[match.end(): after.start() if after else len(text)]
        value = re.sub(r"[,;]?\s*(?:and\s+)?the\s*$", "", value, flags=re.I).strip(" \t\n;,")   # "X, the due date"
        if value:
            pairs[labels[" ".join(match.group(1).lower().replace("_", " ").split())]] = value
    return pairs


def first_label_at(text: str, names: Iterable[str]) -> int:
    """Where the first 'label:' pair starts (len(text) when there is none)."""
    _, matches = _label_matches(text, names)
    return matches[0].start() if matches else len(text)


def _label_matches(text: str, names: Iterable[str]) -> tuple[dict[str, str], list[re.Match[str]]]:
    """The labels of `names` (label -> name, aliases too) and where 'label:' occurs in `text`."""
    names = list(names)
    labels = {label(name): name for name in names} | {a: n for a, n in ALIASES.items() if n in names}
    if not labels:
        return labels, []
    spelled = "|".join(r"[ _]+".join(map(re.escape, lab.split())) for lab in sorted(labels, key=len, reverse=True))
    return labels, list(re.finditer(rf"(?<!\w)({spelled})\s*(?:[:=]|should be\b)", text, re.I))


def ticket_ids(text: str) -> list[str]:
    return [m.upper() for m in re.findall(r"\bTKT-\d+\b", text, re.I)]


def action_ids(text: str) -> list[str]:
    return [m.upper() for m in re.findall(r"\bACT-\d+\b", text, re.I)]


def emails(text: str) -> list[str]:
    return _EMAIL.findall(text)


def quoted(text: str) -> list[str]:
    return [m.group(2).strip() for m in _QUOTED.finditer(text)]


def without_quotes(text: str) -> str:
    return _QUOTED.sub(" ", text)


def find_date(text: str) -> str | None:
    """The first date written in a common format, as YYYY-MM-DD."""
    for match in _DATES.finditer(text):
        try:
            return dateparser.parse(match.group(0).replace(" of ", " ")).date().isoformat()
        except (ValueError, OverflowError):
            continue
    return None


def as_date(text: str) -> str | None:
    """A date in `text`, or `text` itself read as a date; None when it is not one."""
    found = find_date(text)
    if found or not re.search(r"\d", text):
        return found
    try:
        return dateparser.parse(text.strip().rstrip(".")).date().isoformat()
    except (ValueError, OverflowError):
        return None


def as_boolean(text: str) -> bool | None:
    words = set(re.findall(r"[\w']+", text.lower()))
    if words & NO:
        return False
    return True if words & YES else None


def option_number(text: str, count: int) -> int | None:
    """The 1-based option picked by a message like '2', '#2', 'option 2' or '2.'; None otherwise."""
    match = re.fullmatch(r"\s*(?:option|number|no\.?|#)?\s*(\d{1,2})\s*[.)]?\s*", text, re.I)
    if match and 1 <= int(match.group(1)) <= count:
        return int(match.group(1))
    return None


def option_in(text: str, options: Sequence[str], *, common_too: bool = True) -> str | None:
    """The option named last in `text` ('from Open to Blocked' -> Blocked), case-insensitively."""
    spelled = {o.lower(): o for o in options} | {a: o for a, o in OPTION_ALIASES.items() if o in options}
    if not common_too:
        spelled = {word: o for word, o in spelled.items() if word not in COMMON_WORDS}
    hits = [(m.start(), spelled[m.group(0).lower()]) for word in spelled
            for m in re.finditer(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.I)]
    return max(hits)[1] if hits else None


def field_option(text: str, field: str, options: Sequence[str]) -> str | None:
    """An option tied to its field in free text: 'priority to Critical', 'Expedited workflow'."""
    name = label(field).split()[0]
    for clause in re.split(r"[.;\n]| and ", text):
        if re.search(rf"\b{name}\b", clause, re.I):
            found = option_in(clause, options)
            if found:
                return found
    return None


def strip_lead_in(text: str, name: str, free: bool) -> str:
    """The answer without 'The title is' (or, for a short value, 'It's'); a fully quoted answer unwrapped."""
    words = r"[ _]+".join(map(re.escape, label(name).split()))
    value = re.sub(rf"^(?:the\s+)?{words}\s*(?:is|should be|will be|[:=])\s*", "", text.strip(), count=1, flags=re.I)
    if not free:
        value = _LEAD_IN.sub("", value, count=1)
    match = _QUOTED.fullmatch(value.rstrip("."))
    return match.group(2).strip() if match else value
