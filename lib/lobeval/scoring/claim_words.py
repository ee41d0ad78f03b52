"""How the claims check (lobeval.scoring.claims) reads the bot's words: the suite's action words, who did an action and
when, whether a clause negates it, and the values a sentence states. No model is needed; the rules are in
docs/metrics.md (section 9)."""
from __future__ import annotations

import calendar
import functools
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from lobeval.scoring.scoring import calendar_dates, number, numbers_agree
from lobeval.simulation.user_faults import stated_values, texts
from lobeval.core.vocabulary import function_key, strip_plugin_prefix

# Action words of every suite, grouped by what they do; a suite's own words join the groups of the words they
# share with them. A claim word and a call are of one action when they share a word or a group.
GROUPS: dict[str, tuple[str, ...]] = {
    "create": ("create", "add", "new", "open", "log", "raise", "file", "submit", "register", "book", "schedule",
               "place", "insert", "lodge", "record", "generate", "issue", "reserve", "start", "make", "post",
               "enter", "initiate", "order", "purchase", "buy"),
    "update": ("update", "change", "modify", "edit", "set", "move", "adjust", "amend", "correct", "bump", "raise",
               "lower", "increase", "decrease", "reduce", "extend", "shorten", "switch", "rename", "reschedule",
               "mark", "flag", "assign", "reassign", "transfer", "escalate", "upgrade", "downgrade", "reopen",
               "replace", "patch", "postpone", "push", "revert", "restore"),
    "cancel": ("cancel", "delete", "remove", "revoke", "withdraw", "void", "drop", "discard", "archive", "close",
               "terminate", "retract", "rescind", "release", "deactivate", "disable", "unlink", "unsubscribe", "detach",
               "waive"),
    "complete": ("complete", "resolve", "close", "finish", "fulfil", "fulfill"),
    "approve": ("approve", "accept", "grant", "authorise", "authorize"),
    "reject": ("reject", "decline", "deny", "refuse"),
    "send": ("send", "email", "mail", "notify", "page", "reship", "dispatch", "resend", "forward", "inform", "alert",
             "post", "reply", "message"),
    "refund": ("refund", "reimburse", "credit"),
    "exchange": ("exchange", "swap"),
    "any": ("process", "action", "handle", "sort", "apply", "save", "submit", "put", "confirm"),
}
"""`any`: words that say some change was made, whichever."""
LEXICON = frozenset(word for words in GROUPS.values() for word in words)
_IRREGULAR = {"set": "set", "sent": "send", "made": "make", "put": "put", "reset": "reset", "shut": "shut",
              "withdrawn": "withdraw", "withdrew": "withdraw", "undone": "undo", "paid": "pay", "frozen": "freeze",
              "written": "write", "taken": "take", "given": "give", "held": "hold", "begun": "begin",
              "unfrozen": "unfreeze", "bought": "buy", "built": "build", "rebuilt": "rebuild", "sold": "sell",
              "split": "split", "cut": "cut", "withheld": "withhold", "overridden": "override", "forgiven": "forgive"}
_READ_PREFIXES = ("get", "list", "search", "find", "lookup", "read", "fetch", "query", "check", "show", "view")
_ADVERBS = {"already", "just", "now", "successfully", "also", "then", "finally", "both", "all", "really", "indeed",
            "quickly", "immediately", "officially", "correctly", "properly", "duly", "since", "recently", "fully",
            "still", "only"}
_MODALS = {"will", "would", "could", "can", "may", "might", "should", "shall", "must", "going", "gonna", "if",
           "once", "unless", "whenever", "until", "when", "able", "need", "needs", "want", "wants", "try", "about",
           "ready", "plan", "to", "before", "cannot", "let", "why", "whether", "possible", "possibly", "perhaps",
           "maybe", "probably", "likely"}
_ABILITY = {"will", "would", "could", "can", "may", "might", "able"}
_NOT_YET = {"when", "while", "before", "until", "till", "once", "unless", "whenever"}
"""A verb in a clause these open tells when something else happens, not what was done."""
_BEFORE_A_VALUE = {"in", "into", "to", "as", "from"}
"""An action word after these is a value: "in Completed status", "marked as Closed" (the verb is "marked")."""
_BEFORE_TO = {"going", "able", "need", "needs", "want", "wants", "try", "ready", "plan", "about"}
_BOT = {"i", "we"}
_OTHERS = {"you", "he", "she", "they", "someone", "somebody", "anyone", "nobody", "everyone", "who", "manager",
           "team", "customer", "colleague", "agent", "admin", "administrator", "supervisor", "system", "airline",
           "carrier", "courier", "warehouse", "bank", "hotel", "pharmacy", "doctor", "engineer", "technician", "crew",
           "provider", "vendor", "partner", "hr", "finance", "approver", "requester", "caller", "user"}
DETERMINERS = {"as", "the", "a", "an", "your", "my", "our", "this", "that", "these", "those", "his", "her", "their",
                "its", "any", "some", "every", "each", "newly", "recently", "previously", "already"}
_ACKNOWLEDGED = {"confirmed", "noted", "understood", "sorted"}
"""A clause of this one word acknowledges what was said ("Confirmed: no changes have been made")."""
_COORDINATORS = {"and", "or", "but", "so", "then", "which", "who", "while", "because"}
"""A passive's agent ("by ...") follows it before any of these: "reset and ... sent to your phone by SMS"."""
_BOUNDARIES = {"after", "before", "when", "and", "or", "because", "since", "while", "as", "once", "that", "which",
               "who", "so", "then", "but"}
_SPECIFIC = {"your", "the", "this", "that", "it", "my", "our", "they", "both"}
_OBJECTS = {"it", "them", "him", "her", "that", "this", "these", "those", "the", "a", "an", "your", "my", "our", "his",
            "their", "its", "me", "us", "you", "both", "all"}
_NOT_AGENTS = {"end", "time", "deadline", "weekend", "morning", "afternoon", "evening", "close", "date", "default",
               "email", "e-mail", "phone", "mail", "post", "hand", "mistake", "accident", "noon", "tomorrow",
               "today", "sms", "text", "letter", "courier", "chat", "app", "monday", "tuesday", "wednesday",
               "thursday", "friday", "saturday", "sunday", "then", "now"}
_DISCOURSE = {"done", "ok", "okay", "sure", "great", "all", "set", "so", "and", "then", "also", "perfect", "right",
              "good", "news", "there", "alright", "excellent", "yes", "successfully", "now"}
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
HISTORY = re.compile(
    rf"\b(?:yesterday|ago|earlier|previously|originally|already|last|later|the next day|the day before|according to|"
    rf"this morning|this afternoon|this week|at the same time|"
    rf"^\W*on\s+(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}|{_MONTHS}\s+\d{{1,2}}|\d{{1,2}}/\d{{1,2}})\b|"
    rf"back in|since|history|log "
    rf"shows|in {_MONTHS}|at \d{{1,2}}(?::\d\d)?\s*(?:am|pm)?)\b|"
    rf"^\W*(?:\d{{1,2}}[/.]\d{{1,2}}(?:[/.]\d{{2,4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}|{_MONTHS}\s+\d{{1,2}}|"
    rf"\d{{4}}-\d\d-\d\d)\W*\s[—–-]\s", re.IGNORECASE)
"""What was done before ("already", "last week"), or an entry of a dated list: "**19/11** – a refund was issued"."""
ON_A_DAY = re.compile(rf"\b(?:\w+ed|set|made|sent|put)\b(?:(?!\b(?:to|for|until|till|by)\b)[\w\s,]){{0,12}}?"
                       rf"(?:\bon\s+(?:the\s+)?)?\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}|{_MONTHS}\s+\d|"
                       rf"(?:on\s+)(?:\d|(?:mon|tues|wednes|thurs|fri|satur|sun)day))|"
                       rf"\b(?:\w+ed|set|made|sent|put)\s+(?:to|for)\s+(?:the\s+|(?-i:(?=[A-Z0-9]))|"
                       rf"(?!(?:end|start|run|expire|begin|finish|close|open|be|take)\b)(?=[a-z]))"
                       rf"(?:(?!\b(?:until|till|by|on)\b)[\w\s]){{1,30}}?"
                       rf"\bon\s+(?:the\s+)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}|{_MONTHS}\s+\d)", re.IGNORECASE)
"""The day an act was done: "cancelled on 3 March", "reassigned to Tier 2 on 5 March" (not "moved to 5 March", "updated to end on 5 March")."""
_GENERAL = re.compile(r"\b(?:usually|normally|typically|generally|always|automatically|whenever|every|each time|"
                      r"on (?:mon|tues|wednes|thurs|fri|satur|sun)days|(?:at|on) weekends|on weekdays|"
                      r"any time|in general|by default|as a rule|policy|per[\s-](?:copy|kilometre|kilometer|km|mile|hour|day|"
                      r"night|"
                      r"week|month|year|item|person|head))\b", re.IGNORECASE)
_TARGET = re.compile(r"\b(?:within|after) \d+ (?:business |working )?(?:minutes?|hours?|days?|weeks?)\b", re.IGNORECASE)
"""A service level: "P2: acknowledged within 1 hour", "closed after 10 business days" (not said by the bot of itself)."""
NEGATION = re.compile(r"\b(?:not|never|no longer|nothing|none|nobody|neither|nor|unable|failed|fail|fails|cannot|"
                       r"without|unsuccessful(?:ly)?|no(?!\s+(?:problem|worries|worry)\b)(?=\s+\w))\b", re.IGNORECASE)
NEW_STATE = re.compile(r"\bnow\b|\bnew\b", re.IGNORECASE)
IDENTIFIER = re.compile(r"(?<![\w-])(?:[A-Z]{2,6}-)*(?:[A-Z]{2,6}-\d+|[A-Z]{2,6}\d{3,})(?:-[A-Z0-9]+)*(?![\w-])|"
                        r"(?<=#)\d{3,}\b|"
                        r"(?<![\w./:+-])\d{2,}-(?:\d{3,}|[A-Z]{1,3})(?![\w-])(?!\s\d)")
"""A record's identifier, in the shapes teams give them: TKT-4, INC0049002, #50112 (without its #), 55-7712, 7781-KX,
KST-STD-9034-NC."""
_QUOTE = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’|(?<!\w)'[^'\n]+'(?!\w)|`[^`\n]*`")
_HEADER = re.compile(rf"\W*(?:(?:(?![A-Za-z]+ed\s)[A-Za-z]+\s+)?#?[A-Z]{{2,6}}-?\d{{2,}}|\d{{1,2}}[/.]\d{{1,2}}(?:[/.]\d{{2,4}})?|"
                     rf"\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?|\d{{4}}-\d\d-\d\d)\W*",
                     re.IGNORECASE)
"""A record's identifier or a day alone, heading what a dash joins to it: "INC0034700 — Status: Closed", "**19/11** –
a partial refund was issued" (history)."""
_MONTH_DOT = r"\b(?i:jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec)\."   # three letters: a look-behind's fixed width
_SENTENCE_END = re.compile(rf"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!{_MONTH_DOT})\s+|(?<={_MONTH_DOT})\s+(?!\d)|"
                           r"\s+[—–]\s+|\s+-\s+|\n+|"
                           r"(?<=[\u2600-\u27bf\U0001f300-\U0001faff])\ufe0f?\s+(?=\S)")
"""Where a sentence ends: also after an emoji, which chatty bots use as a full stop ("Sent to ana@ ✅ chloe@ bounced");
not after a month's abbreviation before its day ("Dec. 28th")."""
CLAUSE = re.compile(r"(?<!\d),|,(?!\d{3}(?!\d))|[;()]|(?<!\d):|:(?!\d)|\s+(?:but|however|although|though|whereas|so|"
                    r"because|since)\s+|\s+(?=while\s)|"
                    r"\s+and\s+(?=(?:i|it|we|you|they|nothing|none|no|he|she)\b)", re.IGNORECASE)
EXAMPLE = re.compile(r"\be\.g\b|\bfor (?:example|instance)\b|\bsuch as\b|\blike\s+(?:[\"'“‘(]|[A-Z]{2,6}-\d)",
                      re.IGNORECASE)
_ASK = r"(?:give|provide|enter|send|share|tell|type|confirm|specify|choose|select|pick|reply|supply|paste|describe|" \
       r"let me know)\b"
REQUEST = re.compile(rf"^\W*(?:(?:ok(?:ay)?|sure|great|alright|now|next|then|so|and|also|finally)\W+)*"
                      rf"(?:please\s+|kindly\s+)?{_ASK}|\bplease\s+{_ASK}|^\W*(?:can|could|would|will)\s+you\b",
                      re.IGNORECASE)
_CLOSING_OFFER = re.compile(r"\b(?:anything|something) else\b|\bother (?:question|request)s?\b|\bhelp (?:you )?with\b",
                            re.IGNORECASE)
_ASKS = re.compile(r"^\W*(?:would|do|which|should|shall|what|how)\b.*:\s*$|"
                   r"\b(?:i need|i'll need|we need|please (?:provide|send|confirm|give|tell))\b[^.!?]*:\s*$",
                   re.IGNORECASE)
_HISTORY_INTRO = re.compile(r"\b(?:history|timeline|audit|log|what happened)\b", re.IGNORECASE)
"""A line that introduces a record's history: its list or table reads back what was done before."""
_OFFERS = re.compile(r"\b(?:can|could|will|would|may|might|able to|options?)\b[^.!?]*(?::\W*|\*\*\s*)$", re.IGNORECASE)
"""A line that introduces what can be done: "Besides password resets, I can:", "Your options are:", "**Things I can do
for you**"."""
_DONE_INTRO = re.compile(r"\b(?:i|we)(?:'ve| have)\b(?!\s+(?:not|never)\b)|\bwhat i did\b", re.IGNORECASE)
"""A line that introduces what was done: its list is no proposal, whatever question follows it."""
_CONFIRM_REQUEST = re.compile(r"\b(?:please (?:confirm|reply|respond|let me know)|(?:reply|respond|answer) (?:with )?\W*yes\b|"
                              r"if you(?:'d| would)? (?:want|like) me to)", re.IGNORECASE)
"""A request to go ahead after a list, as a question would ask it: "If you want me to proceed ..., please reply yes."."""
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]\s+|\d{1,2}[.)]\s+|\|)")
"""A bulleted or numbered item, or a table row: a table before a question is a proposal too."""
TOKEN = re.compile(r"(?:[A-Z]{2,6}-)*[A-Z]{2,6}-?\d+(?:-[A-Z0-9]+)*|\d{2,}-(?:\d{3,}|[A-Z]{1,3})\b|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|[A-Za-z]+|\d[\d.,:/-]*")
_CONTRACTIONS = [(re.compile(pattern, re.IGNORECASE), new) for pattern, new in (
    (r"\bre-(?=[a-z]{3})", ""),   # "re-sent" is "sent"
    (r"\bcan't\b", "can not"), (r"\bwon't\b", "will not"), (r"n't\b", " not"), (r"'ve\b", " have"), (r"'ll\b", " will"),
    (r"\b(i|you|we|they|he|she|it|that|there|who)'d\b", r"\1 would"), (r"'d\b", "ed"), (r"'s been\b", " has been"), (r"'re\b", " are"), (r"'m\b", " am"),
    (r"\b(it|that|this|he|she|there|what|who|everything)'s\b", r"\1 is"),
    (r"\b(\w+)'s(?=\s+(?:now|already|all|on|in|through|underway|yours|open|live)\b)", r"\1 is"),
    (r"\b(has|have) gone through\b", r"\1 been processed"), (r"\bwent through\b", "was processed"),
    (r"\be-mail", "email"), (r"\b(took|taken) care of\b", "handled"),
    (r"\bleft (him |her |them |you )?(a|an) (comment|note|message|reply)\b", r"added \1\2 \3"),
    (r"\bmade (?:the following |these |those |some |a few |the )?changes?\b", "changed"), (r"\bthe moment\b", "when"), (r"\b(?:fully|already) booked up\b|\bfully booked\b", "full"))]
_YEARLESS = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTHS})(?!,?\s*\d{{4}})|\b({_MONTHS})\s+(\d{{1,2}})"
                       rf"(?:st|nd|rd|th)?\b(?!,?\s*\d{{4}})", re.IGNORECASE)
_WEEKDAY_DAY = re.compile(rf"\b(mon|tues|wednes|thurs|fri|satur|sun)day\s+the\s+(\d{{1,2}})(?:st|nd|rd|th)\b"
                          rf"(?!\s+(?:of\s+)?{_MONTHS})", re.IGNORECASE)
"""A day said by its weekday and day of the month alone: "Friday the 14th"."""
_WEEKDAYS = ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun")


# ---- The suite's vocabulary ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Function:
    """What a write function's calls are about: its action words, entity words and parameters' schemas."""

    name: str
    actions: frozenset[str]
    entities: frozenset[str]
    parameters: dict[str, dict[str, Any]] = field(hash=False, compare=False)


def name_words(name: str) -> list[str]:
    """The words of a function's, an argument's or a result key's name, lower case: `tempPasswordSentTo` → temp,
    password, sent, to."""
    return [word.lower() for word in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", strip_plugin_prefix(name)) if word]


def singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def lemmas(word: str) -> tuple[str, ...]:
    """The base forms a past form may have: "cancelled" → cancell, cancel; "created" → creat, create."""
    word = word.lower()
    if word in _IRREGULAR:
        return (_IRREGULAR[word],)
    if word.endswith("ied"):
        return (word[:-3] + "y",)
    if not word.endswith("ed") or len(word) < 4:
        return ()
    found = [word[:-2], word[:-1]]
    if len(word) > 4 and word[-3] == word[-4]:
        found.append(word[:-3])
    return tuple(found)


def base_forms(word: str) -> tuple[str, ...]:
    """The base forms of a past form worth matching: the general action word when one is among them
    ("cancelled" → cancel), else every candidate ("shipped" → shipp, shippe, ship)."""
    found = lemmas(word)
    known = tuple(lemma for lemma in found if lemma in LEXICON)
    return known or found


def is_write(function_name: str, tools: dict[str, dict[str, Any]]) -> bool:
    tool = tools.get(function_key(function_name))
    if tool and tool.get("effect"):
        return tool["effect"] == "write"
    return not function_key(function_name).startswith(_READ_PREFIXES)


@functools.lru_cache(maxsize=1024)
def _function(name: str, description: str, parameters_json: str) -> Function:
    parameters = json.loads(parameters_json)
    words = name_words(name)
    verbs = {words[0]} if words else set()
    first = re.match(r"\s*([A-Za-z]+)", description)
    if first:
        verbs.add(first.group(1).lower())
    for schema in parameters.values():
        for value in schema.get("enum") or []:
            if isinstance(value, str):
                verbs.update(base_forms(value))
    entities = {singular(word) for word in words if word not in verbs
                and word not in _READ_PREFIXES and word not in {"a", "an", "the", "by", "for", "to", "of", "in", "on",
                                                                 "with", "from", "and", "or", "my", "id", "ids"}}
    return Function(name, frozenset(verbs), frozenset(entities), parameters)


def function_of(function_name: str, tools: dict[str, dict[str, Any]]) -> Function:
    """A function's vocabulary from its tools.json entry (or its name alone)."""
    spec = (tools.get(function_key(function_name)) or {}).get("function") or {}
    parameters = (spec.get("parameters") or {}).get("properties") or {}
    return _function(function_name, spec.get("description") or "", json.dumps(parameters, sort_keys=True))


@functools.lru_cache(maxsize=4096)
def groups_of(word: str) -> frozenset[str]:
    return frozenset(group for group, words in GROUPS.items() if word in words)


def _owners(functions: list[Function]) -> dict[str, set[str]]:
    owners: dict[str, set[str]] = {}
    for function in functions:
        verb = next(iter(name_words(function.name)), "")
        if verb in function.actions and len(groups_of(verb)) < 2:
            owners.setdefault(verb, set()).add(function.name)
    return owners


def _enums(functions: list[Function]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for function in functions:
        for name, schema in function.parameters.items():
            found.setdefault(name, set()).update(value for value in schema.get("enum") or [] if isinstance(value, str))
    return found


@dataclass
class Vocabulary:
    """Every action word of the suite's write functions and the general ones; the entity words of the writes."""

    actions: set[str]
    entities: set[str]
    records: set[str]
    """What a passive about this conversation's records may have as its subject: the entities and parameter words."""
    labels: set[str]
    """The write functions' parameters as the bot names them: follow_up and followUp → "follow up"."""
    enums: dict[str, set[str]]
    """Each write function parameter's enum values."""
    owners: dict[str, set[str]]
    """The write functions named for each verb: "reassign" → reassign_incident (not a verb of two groups: "raise")."""

    @classmethod
    def of(cls, tools: dict[str, dict[str, Any]], calls: list[dict[str, Any]]) -> Vocabulary:
        names = {(tool.get("function") or {}).get("name") or key for key, tool in tools.items()}
        names |= {call.get("functionName") or "" for call in calls}
        writes = [function_of(name, tools) for name in names if name and is_write(name, tools)]
        entities = {entity for function in writes for entity in function.entities}
        names = {name for function in writes for name in function.parameters}
        return cls(set(LEXICON) | {verb for function in writes for verb in function.actions | function.entities},
                   entities, entities | {singular(word) for name in names for word in name.lower().split("_")},
                   {" ".join(name_words(name)) for name in names}, _enums(writes),
                   _owners(writes))

    def action(self, word: str) -> str | None:
        """The base form of an action word said in its past form, or None."""
        return next((lemma for lemma in base_forms(word) if lemma in self.actions), None)


# ---- Reading what the bot said ---------------------------------------------------------------------------------


def statements(text: str) -> Iterator[str]:
    """The bot's sentences that may state something: not the items of a list of options that ends (or is
    introduced) with a question."""
    lines = text.split("\n")
    skip: set[int] = set()
    index = 0
    while index < len(lines):
        if not _LIST_ITEM.match(lines[index]):
            index += 1
            continue
        end = index
        while end < len(lines) and (_LIST_ITEM.match(lines[end]) or not lines[end].strip()):
            end += 1
        before = next((line for line in reversed(lines[:index]) if line.strip()), "")
        after = next((line for line in lines[end:] if line.strip()), "")
        last = next((line for line in reversed(lines[index:end]) if line.strip()), "")
        done = _DONE_INTRO.search(before) and not _OFFERS.search(before)   # "Here's what I've done:" .. "Want a bag?"
        if (("?" in after or _CONFIRM_REQUEST.search(after)) and not _CLOSING_OFFER.search(after) and not done) \
                or before.rstrip().endswith("?") \
                or last.rstrip().endswith("?") or _ASKS.search(before) or _OFFERS.search(before) \
                or _HISTORY_INTRO.search(before):
            skip.update(range(index, end))
        index = end
    for number_, line in enumerate(lines):
        if number_ in skip:
            continue
        yield from _sentences(_LIST_ITEM.sub("", line))


_RANGE_BEFORE = re.compile(r"(?:\d|\b[ap]\.?m\.?|\b[A-Z]{1,3}\d)\**$", re.IGNORECASE)
_RANGE_AFTER = re.compile(r"\**\d|\**[A-Z][a-z]+\b(?!\s+(?:is|are|was|were|has|have|will)\b)")
"""A dash between two ends of a range ("22:00 – 01:00"), or in an enum value ("P1 – Critical"), splits nothing."""


def _sentences(line: str) -> Iterator[str]:
    """The sentences of a line, never split inside a quotation ("Laptop stolen – not reported")."""
    masked = _QUOTE.sub(lambda match: "\0" * len(match.group()), line)
    start = 0
    for end in [*_SENTENCE_END.finditer(masked), None]:
        sentence = line[start: end.start() if end else len(line)].strip()
        if end and end.group().strip() in ("—", "–", "-") and (
                _HEADER.fullmatch(sentence) or _RANGE_BEFORE.search(line[:end.start()])
                and _RANGE_AFTER.match(line[end.end():]) or line[:end.start()].count("**") % 2):
            continue   # one statement: "INC0034700 — Status: Closed", "8:00 PM – 12:00 AM", "P1 – Critical",
            #              "**Velo – London**"
        if sentence:
            yield sentence
        start = end.end() if end else start


def expand(text: str) -> str:
    text = text.replace("’", "'").replace("‘", "'")
    for pattern, new in _CONTRACTIONS:
        text = pattern.sub(new, text)
    return text


@functools.lru_cache(maxsize=4096)
def value_pattern(value: str) -> re.Pattern[str]:
    """A value as said, whole: `not_recognised` is "Not recognised" too, "Network" is not "Network Security"; a dash
    is any dash, and a value that starts with a number may be said with a letter before it ("1 - Critical" is
    "P1 – Critical")."""
    words = _DASHES.join(map(re.escape, re.split(_DASHES, value.strip())))
    prefix = r"(?:[a-z]{1,3}(?=\d))?" if value.strip()[:1].isdigit() else ""
    # a non-breaking hyphen joins words too: "economy" is not said in "basic‑economy"
    return re.compile(rf"(?<![\w\-\u2010\u2011]){prefix}{words}(?![\w\-\u2010\u2011])(?!\W{{0,2}} (?-i:[A-Z][a-z]))",
                      re.IGNORECASE)


_DASHES = r"[\s_\-–—\u2010\u2011]+"


def named_values(sentence: str, vocabulary: Vocabulary, words: re.Pattern[str] = NEGATION) -> str:
    """The sentence with each enum value that holds one of `words` as a placeholder: a value named negates nothing
    ("Not recognised"), nor says a state is new ("from New to Open")."""
    for value in sorted({value for values in vocabulary.enums.values() for value in values}, key=len, reverse=True):
        if words.search(value.replace("_", " ")):
            sentence = value_pattern(value).sub(" VALUE ", sentence)
    return sentence


def unquoted(sentence: str) -> str:
    """The sentence with every quotation (a title, the user's words) replaced by a placeholder."""
    return _QUOTE.sub(" QUOTATION ", sentence)


@dataclass(frozen=True)
class Said:
    """One action word the bot said, and how: `claim` (the bot did it, in the past), or only `tell` (it names
    the action: a present passive, an adjective, a report a read may explain) — never an accusation."""

    word: str
    lemma: str
    claim: bool
    passive: bool
    span: str
    """The words from the action word before it (or the clause's start) to the one after it: what it is about."""
    subject: tuple[str, ...]
    """The words of its clause before the verb and its auxiliaries."""


_CONDITION_FIRST = re.compile(r"\W*(?:(?:just\s+)?to confirm\b|(?:so\s+)?you(?:'d| would)?\s+(?:want|like)\b|"
                              r"i (?:understand|see|can see|gather)\b|it (?:looks|seems) like\b|apparently\b|"
                              r"\**[A-Z][\w -]*\**\s+(?:is for|means|is used for)\b|"
                              r"(?:(?:please\s+)?(?:be aware|note|caveat|tip|heads up|reminder|important)\W+)?"
                              r"(?:(?:if|once|unless|whenever|when|as soon as)\b|"
                              r"(?:according to|as per|per|under)\b[^,;:]*\b(?:policy|rules|terms|guidelines)\b)"
                              r"[^,;:]*[,;:])", re.IGNORECASE)
"""A sentence that opens with a condition, a policy, a definition, what someone else reported, or the user's request
said back claims nothing in any of its clauses: "Once a ticket is set to Critical, the duty manager is paged and a
bridge call is opened", "According to the equipment policy, laptops are replaced every 4 years and requests above EUR
500 are escalated", "Expedited is for work that can't wait: the on-call lead is notified", "I understand his request
has been approved", "Just to confirm: you want TKT-1 set to Completed"."""


_LABEL = re.compile(r"^\W*([A-Za-z]+(?:\s+[A-Za-z]+){1,2})\s*:\s*")


_APPOSITION = re.compile(r",\s*(?:[A-Z][a-z'-]+\s+)+[A-Z][a-z'-]+\s*,(?=\s+(?:has|have|had|was|is|[a-z]+ed)\b)")
"""A name between commas before the verb names the subject's person: "Your manager, Sofia Brennan, has assigned ..."."""


def actions_said(sentence: str, vocabulary: Vocabulary, said_by_user: str) -> list[Said]:
    """Each action word of a statement whose doer is the bot (or may be), with whether it claims or only tells."""
    found = []
    if _CONDITION_FIRST.match(sentence):
        return found
    first = CLAUSE.split(expand(sentence))[0]
    if _GENERAL.search(first) and not re.search(r"\b(?:i|we|your|my|our|this)\b", first, re.IGNORECASE) \
            and not IDENTIFIER.search(first) and not re.search(r"\b(?:I|we) have\b", expand(sentence)):
        return found   # "Security tickets are kept internal by default, and they are made visible after review"
        # (not "Normally there's a €25 fee, but I've waived it")
    label = _LABEL.match(sentence)
    if label and " ".join(label.group(1).lower().split()[1:]) in vocabulary.labels:
        sentence = sentence[label.end():]   # "Assigned group: Network Operations" names a field
    carried = False   # the clause before said what can be done, or not: "I can swap your SIM, change your plan, ..."
    sentence = _APPOSITION.sub(" ", sentence)
    for clause in CLAUSE.split(expand(named_values(unquoted(sentence), vocabulary))):
        if not clause or not clause.strip() or REQUEST.search(clause):
            continue
        tokens = TOKEN.findall(clause)
        lowered = [token.lower() for token in tokens]
        first = next((word for word in lowered if word not in ("and", "or", "nor", "also", "then")), "")
        if carried and (first in LEXICON or vocabulary.action(first)):
            continue   # "I can swap your SIM, change your plan" / "I have not closed, reassigned or commented on it"
        carried = any(word in _ABILITY and _modal(lowered, index) for index, word in enumerate(lowered)) \
            or bool(NEGATION.search(clause))
        positions = [position for position, token in enumerate(lowered) if vocabulary.action(token)
                     and not (position and lowered[position - 1] in _BEFORE_A_VALUE)
                     and not _describes_a_class(tokens, position)]
        for before, position, after in zip([-1, *positions], positions, [*positions[1:], len(tokens)]):
            if _negated(lowered, position) or (len(tokens) == 1 and lowered[0] in _ACKNOWLEDGED) \
                    or set(lowered) <= _DISCOURSE:   # "All set!": ready, of nothing named
                continue
            how = None if _named_before(tokens, position) else _how(lowered, position)
            if how is not None:
                claim, passive, subject = how
                claim = claim and not _checked(lowered, position, vocabulary, passive)
                # The user's own words said back tell what a call did, and claim nothing alone (a title).
                found.append(Said(tokens[position], vocabulary.action(lowered[position]) or "",
                                  claim and not _GENERAL.search(clause) and not _echoed(lowered, position, said_by_user)
                                  and not (_TARGET.search(clause) and not set(subject) & _BOT),
                                  passive,
                                  " ".join(tokens[_verb_start(lowered, before, position):
                                                  _clause_end(lowered, position, after)]), subject))
    return found


def _describes_a_class(tokens: list[str], position: int) -> bool:
    """A participle first in its clause before a plural noun, with no record named, describes a kind: "Expedited
    tickets skip the queue", "saved addresses stay attached" (not "Cancelled orders ORD-1 and ORD-2")."""
    following = tokens[position + 1] if position + 1 < len(tokens) else ""
    return not any(word.lower() not in ("and", "or", "your", "the", "all") for word in tokens[:position]) \
        and len(following) > 3 and following.endswith("s") and not following.endswith("ss") \
        and following.lower() not in _OBJECTS and not any(IDENTIFIER.fullmatch(word) for word in tokens)


def _named_before(tokens: list[str], position: int) -> bool:
    """A person named right before the verb did it: "Priya Nair approved LV0044981", "Kim Doyle downgraded"."""
    name = tokens[position - 1] if position > 1 else ""
    return bool(re.fullmatch(r"[A-Z][a-z]+", name)) and bool(re.fullmatch(r"[A-Z][a-z]+", tokens[position - 2]))


def _negated(tokens: list[str], position: int) -> bool:
    """A negation in the clause of the action word: before it, or after it unless it is of what came with the act ("I
    applied a credit for the days without data")."""
    after = " ".join(tokens[position + 1:])
    return bool(NEGATION.search(" ".join(tokens[:position + 1])) or NEGATION.search(_WITHOUT.sub(" ", after)))


_WITHOUT = re.compile(r"\b(?:without|no)\b(?:\s+\w+)?")


def _verb_start(tokens: list[str], before: int, position: int) -> int:
    """Where the action word's words start: after the previous action word, or at the action word itself when it is
    a second verb of the same doer ("I've logged INC-1 for the VPN drop-outs and assigned it ...")."""
    back = position - 1
    while back > before and tokens[back] in _ADVERBS | _PREDICATE_AUXILIARIES:
        back -= 1
    return back + 1 if back > before and tokens[back] in ("and", "or", "then") else before + 1


_PREDICATE_AUXILIARIES = {"is", "are", "was", "were", "has", "have", "had", "been"}
"""A second predicate of the same subject: "HD-7 now shows Low priority and is assigned to Sam" (its words start at
"is")."""


def _clause_end(tokens: list[str], position: int, after: int) -> int:
    """Where the action word's words end: at "and" (or "or", "but") that starts a clause of its own, with a subject and
    a verb ("BK-3 is cancelled and Room 2.11 is booked"), else at the next action word."""
    for index in range(position + 1, after):
        if tokens[index] in ("and", "or", "but") and any(
                word in {"is", "are", "was", "were", "has", "have", "had"} for word in tokens[index + 1: after + 1]):
            return index
    return after


def _echoed(tokens: list[str], position: int, said_by_user: str) -> bool:
    """The action word with its neighbours is the user's own wording ("Title: our registered trademark ...")."""
    words = tokens[max(0, position - 1): position + 3]
    return len(words) >= 3 and f" {' '.join(words)} " in said_by_user


def _how(tokens: list[str], position: int) -> tuple[bool, bool, tuple[str, ...]] | None:
    """(claims, passive, the words before the verb and its auxiliaries) for the action word at `position`, or
    None when the bot is not its doer or it is not said as done (future, conditional, ability, an infinitive: in
    the whole clause before it)."""
    if any(word in _MODALS - {"to", "about", "before", "when", "until", "let"} and _modal(tokens, index)
           for index, word in enumerate(tokens[:position])):
        return None
    if {"still", "remains", "remain", "stays", "already", "currently"} & set(tokens[:position]):
        return None   # "FP-1 is still at Tier 2 and assigned to Endpoint Eng", "line already dispatched": as it was
    if {"thinking", "thought", "believed", "assumed", "hoped", "expected"} & set(tokens[:position]):
        return None   # "after thinking it was resolved": a belief
    if _planned(tokens, position):
        return None   # "Let me get that transfer started", "I need your address confirmed"
    subordinate = next((index for index in range(position - 1, -1, -1) if tokens[index] in _NOT_YET), None)
    if subordinate is not None and not any(lemmas(word) for word in tokens[subordinate + 1: position]):
        return None   # "... the moment the return is approved", "just before my request went through"
    auxiliaries: list[str] = []
    back = position - 1
    while back >= 0:
        word = tokens[back]
        if word in _MODALS and _modal(tokens, back):
            return None
        if word in {"been", "be", "being", "have", "has", "had", "was", "were", "is", "are", "am", "got", "get",
                    "gets", "getting", "did"}:
            auxiliaries.append(word)
        elif word in ("and", "or") and back > 0 and lemmas(tokens[back - 1]):
            back -= 1   # "are reviewed and approved": the second verb has the first one's auxiliaries
        elif word in ("it", "them") and back > 0 and tokens[back - 1] in ("have", "has", "had", "get", "got"):
            pass        # "I can have it reassigned"
        elif word not in _ADVERBS and not _LY_ADVERB.fullmatch(word):
            break
        back -= 1
    subject = tokens[back] if back >= 0 else None
    start = back
    while start >= 0 and tokens[start] not in _BOUNDARIES and not lemmas(tokens[start]):
        start -= 1
    before = tuple(tokens[start + 1: back + 1])   # its subject: "... after the card was declined" → the card
    after = tokens[position + 1] if position + 1 < len(tokens) else None
    if auxiliaries:
        if "be" in auxiliaries or "being" in auxiliaries or auxiliaries[0] in ("get", "gets", "getting"):
            return None
        if "been" in auxiliaries or auxiliaries[0] in ("was", "were", "got", "is", "are", "am"):
            if _named_agent(tokens[position + 1:]):
                return None
            if auxiliaries[0] in ("is", "are", "am"):   # a record of this conversation, not "Items ... are refunded"
                yours = tokens[0] == "you" and tokens[position - 1:position + 1] != ["all", "set"]   # "you're booked"
                return (specific(tokens[0]) or yours) and not {"already", "still"} & set(tokens[:position]), True, before
            return "already" not in tokens[:position], True, before   # "TKT-4 was already Completed": as it was
        # perfect or emphatic past, active: whose?
        if subject in _BOT or subject is None or subject in _DISCOURSE:
            return True, False, before
        return None
    if subject in _BOT:
        return True, False, before
    if subject in ("and", "or") and _first_verb_claims_nothing(tokens, back):
        return None   # "P1 incidents are acknowledged within 15 minutes and resolved within 4 hours"
    if _named_agent(tokens[position + 1:]):
        return None   # "urgency raised to High by the Service Desk"
    later = tokens[position + 1:]
    described = any(word in {"is", "are", "was", "were", "will", "has", "have", "can", "may", "get", "gets"}
                    for word in later)   # "Requests logged after 6 pm are handled ...", "Closed cases are archived"
    if subject is None or subject in _DISCOURSE:
        return None if described and subject is None else (True, True, before)
    if subject in DETERMINERS:
        return False, True, before   # "your updated ticket": names the action, claims nothing
    if sum(word in DETERMINERS - {"as"} for word in before) > 1 and not {"and", "or"} & set(before):
        return None   # "Note the time the symptoms started": a clause inside another's object
    if _a_class(tokens, back, position):
        return None
    if subject in _OTHERS or after in _OBJECTS or (after and IDENTIFIER.fullmatch(after.upper())):
        return None
    if described:
        return None
    return True, True, before


_LY_ADVERB = re.compile(r"(?!(?:july|reply|supply|apply|family|rely|italy|ally|assembly)$)[a-z]{3,}ly")
"""An adverb between a subject and its verb: "User explicitly declined", "it was quickly reissued"."""
_CHECKING = {"confirm", "confirmed", "confirming", "verify", "verified", "verifying", "check", "checked", "checking",
             "ensure", "ensured", "double-checked"}
_COPULAS = {"is", "are", "was", "were", "has", "have", "had", "will", "would", "can", "could", "qualifies"}
_CAUSATIVES = {"get", "gets", "getting", "have", "having", "need", "needs", "want", "wants"}


def _checked(tokens: list[str], position: int, vocabulary: Vocabulary, passive: bool) -> bool:
    """The action word says what was checked, not what was done: in a content clause after a verb of checking ("I
    confirmed that the flight was cancelled", "To verify ... and confirm that the flight was canceled"), a verb of
    checking said as what a thing is ("HAT018 is confirmed as delayed"), or said by the bot of a fact ("I confirmed your
    membership is gold", "What I confirmed:") or of nothing the suite writes ("I confirmed the facts"); not "Your
    refund is confirmed"."""
    if any(word in _CHECKING and tokens[index + 1: index + 2] and tokens[index + 1] in ("that", "whether", "if")
           and not _performative(tokens, index) for index, word in enumerate(tokens[:position])):
        return True
    if tokens[position] not in _CHECKING:
        return False
    after = tokens[position + 1:]
    if after[:1] == ["as"] or passive:
        return after[:1] == ["as"]
    if not after or after[0] in ("that", "whether", "if") or _COPULAS & set(after):
        return True
    named = {singular(word) for word in after} & (vocabulary.entities | vocabulary.records)
    return not named and not any(IDENTIFIER.fullmatch(word.upper()) for word in after)


def _performative(tokens: list[str], index: int) -> bool:
    """A verb of checking that tells rather than checks: "I'd like to confirm that TKT-9 has been created", "I can
    confirm that ...", "We confirm that ..."."""
    before = tokens[max(0, index - 2): index]
    return before[-1:] in (["can"], ["hereby"]) or (before[-1:] in (["i"], ["we"]) and tokens[index] == "confirm") \
        or (before[-1:] == ["to"] and before[:1] in (["like"], ["happy"], ["glad"], ["pleased"], ["want"]))


def _planned(tokens: list[str], position: int) -> bool:
    """A proposal or a request, not a deed: "let me" / "let us" before the word, or a causative not in the past with
    something between it and the participle ("get that prescription sent", "need your user ID confirmed")."""
    before = tokens[:position]
    if any(word == "let" and before[index + 1: index + 2] in (["me"], ["us"]) for index, word in enumerate(before)):
        return True
    # "MB-71 now gets notices and is assigned to Sam": a predicate of its own, not what "gets" acts on
    return any(word in _CAUSATIVES and index + 1 < position and _names_a_thing(before[index + 1])
               and not _NEW_PREDICATE & set(before[index + 1:]) for index, word in enumerate(before))


_NEW_PREDICATE = {"and", "or", "is", "are", "was", "were", "be", "been", "has", "had"}


def _names_a_thing(word: str) -> bool:
    """A word that may start what a causative acts on ("get [that transfer] started"), not a verb form or an adverb
    after an auxiliary ("have [gone] ahead and refunded", "have [also] sent")."""
    return not (lemmas(word) or word in _ADVERBS or _LY_ADVERB.fullmatch(word)
                or word in {"been", "be", "being", "gone", "done", "got", "gotten", "to", "not", "ahead"})


def _first_verb_claims_nothing(tokens: list[str], joined: int) -> bool:
    """A participle after "and" at `joined` shares the doer and tense of the verb before it: when that one is said
    of a class or not as done, so is this one."""
    earlier = next((index for index in range(joined - 1, -1, -1) if lemmas(tokens[index])), None)
    if earlier is None or any(word in _BOUNDARIES for word in tokens[earlier + 1: joined]):
        return False
    how = _how(tokens, earlier)
    return how is None or not how[0]


def _a_class(tokens: list[str], back: int, position: int) -> bool:
    """A participle after a bare plural, with more said after it, describes a class: "Plan changes made before
    the 20th apply from the next bill" (not "Changes saved", nor "your tickets updated ...")."""
    subject = tokens[back] if back >= 0 else ""
    determined = back > 0 and (tokens[back - 1] in DETERMINERS | _SPECIFIC or tokens[back - 1][:1].isdigit())
    return (len(subject) > 3 and subject.endswith("s") and not subject.endswith("ss") and not determined
            and not IDENTIFIER.fullmatch(subject.upper()) and len(tokens) - position > 3)


def specific(word: str) -> bool:
    """A clause that starts with this word is about a record of this conversation: "your", "it", an id, a day."""
    return (word in _SPECIFIC or bool(IDENTIFIER.fullmatch(word.upper())) or word[:1].isdigit()
            or bool(re.fullmatch(rf"{_MONTHS}|(?:mon|tues|wednes|thurs|fri|satur|sun)day", word)))


def _modal(tokens: list[str], index: int) -> bool:
    """Not the month in "4 May 2026", nor "would like", nor a noun or adjective that says the future only before
    "to" ("your plan change" against "we plan to change it")."""
    if tokens[index] in _BEFORE_TO and tokens[index + 1: index + 2] != ["to"]:
        return False
    neighbours = tokens[max(0, index - 1): index] + tokens[index + 1: index + 2]
    if tokens[index] == "may" and any(word[:1].isdigit() for word in neighbours):
        return False
    return not (tokens[index] == "would" and tokens[index + 1: index + 2] in (["like"], ["love"]))


def _named_agent(after: list[str]) -> bool:
    """A passive's "by ..." names someone other than the bot ("by the night shift", "by Ana", not "by Friday")."""
    # "cancelled due to health reasons covered by your travel insurance": the agent of "covered", not of the claim
    after = after[:next((index for index, word in enumerate(after) if index and word.endswith("ed") and lemmas(word)
                         and after[index - 1] not in ("and", "or")), len(after))]
    joined = [word for index, word in enumerate(after)   # "approved and issued by Dr Patel"
              if not (word in ("and", "or") and index + 1 < len(after) and lemmas(after[index + 1]))]
    after = list(itertools.takewhile(lambda word: word not in _COORDINATORS, joined))
    if "by" not in after:
        return False
    following = after[after.index("by") + 1: after.index("by") + 3]
    if not following or following[0] in ("me", "us", "myself", "ourselves"):
        return False
    if following[0] in _NOT_AGENTS or re.fullmatch(r"\d.*", following[0]) or re.fullmatch(_MONTHS, following[0]):
        return False
    if following[0] in {"the", "a", "an", "your", "his", "her", "their", "our", "another"}:
        return len(following) > 1 and following[1] not in _NOT_AGENTS
    return True


# ---- Values a sentence states ----------------------------------------------------------------------------------


_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")


def value_text(sentence: str) -> str:
    """The parts of a sentence whose values describe what was done: not clauses about later or others' acts ("has been
    issued and will be deducted": the first). A comma inside a number ("1,450", "€5,00") parts no clauses."""
    masked = _DIGIT_COMMA.sub("\0", expand(sentence))
    parts = [part for clause in CLAUSE.split(masked) if clause
             for part in re.split(r"\s+and\s+(?=(?:will|would|could|can|should|may|might)\b)", clause,
                                  flags=re.IGNORECASE)]
    kept = [clause for clause in parts
            if clause and not re.search(r"\b(?:will(?!.*\bnow\b)|would|could|can|(?<!\d\s)may(?!\s+\d)|might|should|by)\b",
                                        clause, re.IGNORECASE)]
    return " ; ".join(kept).replace("\0", ",")


DateKey = frozenset[date] | frozenset[tuple[int, int]]
"""The days a date as said may be: calendar dates, or (month, day) pairs when it has no year."""
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DOTTED = re.compile(r"(?<![\d.])\d{1,2}\.\d{1,2}\.\d{4}(?!\d|\.\d)")
_DAY_MONTH = re.compile(r"(?<![\d/.,-])(\d{1,2})/(\d{2})(?![\d/])")
"""A day and month without year, both ways: "27/11" is 27 November, "12/01" 1 December or 12 January."""
_WEEKDAY_BEFORE = re.compile(r"\b(mon|tues|wednes|thurs|fri|satur|sun)day,?\s+(?:the\s+)?$", re.IGNORECASE)
_TODAY = re.compile(r"\btoday\W{0,3}$|^\W{0,3}today\b", re.IGNORECASE)


def dates_in(text: str) -> list[tuple[str, DateKey]]:
    """Each date the text states, with the days it may be (docs/metrics.md, "Values agree")."""
    return [(written, key) for _, _, written, key in dates_at(text)]


def dates_at(text: str) -> list[tuple[int, int, str, DateKey]]:
    """(start, end, as written, days) of each date in the text: a full date in any format ("26.11.2026" too); a day
    and month alone ("14 May", "May 14", "27/11"), on its weekday when one is said before it ("Saturday 15 March":
    the years whose 15 March is a Saturday); "Friday the 14th". A date said as today's ("today (26.11.2026)") is
    not a value of a call."""
    found: list[tuple[int, int, str, DateKey]] = []
    cursor = 0
    for kind, written, key in stated_values(text):
        start = text.find(written, cursor)
        cursor = start + len(written)
        if kind == "date" and key:
            found.append((start, cursor, written, key))
    found += [(match.start(), match.end(), match.group(), calendar_dates(match.group()))
              for match in _DOTTED.finditer(text)]
    for match in _YEARLESS.finditer(text):
        day, month = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
        found.append(_day_of_month(text, match, {(_MONTH_NAMES.index(month[:3].lower()) + 1, int(day))}))
    for match in _DAY_MONTH.finditer(text):
        first, second = int(match.group(1)), int(match.group(2))
        pairs = {(month, day) for month, day in ((second, first), (first, second))
                 if 1 <= month <= 12 and 1 <= day <= 31}
        if pairs:
            found.append(_day_of_month(text, match, pairs))
    for match in _WEEKDAY_DAY.finditer(text):
        found.append((match.start(), match.end(), match.group(), _on_weekday(
            _WEEKDAYS.index(match.group(1).lower()), {(month, int(match.group(2))) for month in range(1, 13)})))
    return sorted((start, end, written, key) for start, end, written, key in found
                  if not (_TODAY.search(text[max(0, start - 10): start]) or _TODAY.search(text[end: end + 10])))


def _day_of_month(text: str, match: re.Match[str], pairs: set[tuple[int, int]]) -> tuple[int, int, str, DateKey]:
    weekday = _WEEKDAY_BEFORE.search(text[max(0, match.start() - 16): match.start()])
    key = _on_weekday(_WEEKDAYS.index(weekday.group(1).lower()), pairs) if weekday else frozenset(pairs)
    return match.start(), match.end(), match.group().strip().rstrip("."), key


def _on_weekday(weekday: int, pairs: set[tuple[int, int]]) -> frozenset[date]:
    """The days within ten years of today that fall on `weekday` (Monday 0) and on one of the (month, day) pairs."""
    today = date.today()
    return frozenset(day for year in range(today.year - 10, today.year + 11) for month, dom in pairs
                     if 1 <= dom <= calendar.monthrange(year, month)[1]
                     for day in (date(year, month, dom),) if day.weekday() == weekday)


def date_matches(key: DateKey, dates: set[date]) -> bool:
    return any(day in key or (day.month, day.day) in key for day in dates)


def call_dates(value: Any) -> set[date]:
    return {day for text in texts(value) if re.search(r"\d", text) and len(text) <= 40
            and re.search(rf"\d{{4}}-\d|\d/\d|{_MONTHS}", text, re.IGNORECASE) for day in calendar_dates(text)}


@dataclass(frozen=True)
class Disagreement:
    argument: str
    said: str
    sent: Any


def disagreement(sentence: str, call: dict[str, Any], function: Function, context: str) -> Disagreement | None:
    """The first value the sentence states that the call, which backs its claim, did not send; None when they
    agree. `context`: what the reads returned, lower case (an old value read back may be said too)."""
    sentence = without_former(sentence)
    text = value_text(unquoted(sentence))
    return (_enum_disagreement(sentence, text, call, function) or _date_disagreement(text, call, context)
            or _time_disagreement(text, call, context) or _moment_disagreement(text, call)
            or _email_disagreement(text, call) or _ending_disagreement(text, call, context)
            or _number_disagreement(value_text(_RESTATED.sub(r"\1", unquoted(sentence))), call, context))


_FORMER = re.compile(r"\((?:previously|formerly|originally|was|were|before|old|from)\b[^()]*\)|"
                     r"\b(?:moved|changed|rescheduled|switched|updated|raised|lowered|increased|decreased|reduced|"
                     r"bumped|amended)\s+from\s+[^,;()]*?(?=\s+(?:to|→|->)\s)|"
                     r"\b(?:previously|formerly|originally|instead of|rather than)\b[^,;()]*", re.IGNORECASE)
"""A value said as the old one ("by 2 days (previously due Friday 12 September)", "instead of 08:00–12:00",
"moved from Fri 11 Dec to Mon 14 Dec"): not compared."""
def without_former(text: str) -> str:
    return _FORMER.sub(" ", text)


_RESTATED = re.compile(r"(\d\s*[^\W\d]+\s*)\([^()]*\)")
"""A parenthesis right after a number and its unit says it in other terms ("1,450 points (worth $14.50)", "800 points
(−€8,00)"): not compared."""


def _enum_disagreement(sentence: str, text: str, call: dict[str, Any], function: Function) -> Disagreement | None:
    arguments = call.get("arguments") or {}
    joined = re.sub(r"(?<=[a-z])-(?=[a-z])", "", text, flags=re.IGNORECASE)   # "on-site" is `onsite`
    for argument, schema in function.parameters.items():
        if argument not in arguments or not isinstance(arguments[argument], str):
            continue
        options = [value for value in schema.get("enum") or [] if isinstance(value, str)]
        said = [value for value in options if any(map(value_pattern(value).search, (text, joined)))]
        said = said or _quoted_options(sentence, argument, options)
        if said and arguments[argument].casefold() not in {value.casefold() for value in said}:
            return Disagreement(argument, said[0], arguments[argument])
    return None


def _date_disagreement(text: str, call: dict[str, Any], context: str) -> Disagreement | None:
    """A date said must be one the call sent, its result or a read returned."""
    arguments = call.get("arguments") or {}
    dated = {name: call_dates(value) for name, value in arguments.items() if call_dates(value)}
    if not dated:
        return None
    everything = set().union(*dated.values()) | call_dates(call.get("result")) | call_dates(context)
    for _, _, written, key in dates_at(text):
        if not date_matches(key, everything):
            argument = next(iter(dated))
            return Disagreement(argument, written, arguments[argument])
    return None


def _moment_disagreement(text: str, call: dict[str, Any]) -> Disagreement | None:
    """A date said with a time ("Saturday 15 March, 22:00 – 01:00") must be a date-time the call sent, when it sent
    any: not the date of one and the time of another."""
    arguments = call.get("arguments") or {}
    moments = {name: moment for name, value in arguments.items() for moment in _moments(value)}
    for _, end, written, key in dates_at(text) if moments else ():
        time = _TIME_AFTER_DATE.match(text, end)
        clock = time and _said_clock(time.group(1))
        if clock and not any(date_matches(key, {day}) and at == clock for day, at in moments.values()):
            argument = next(iter(moments))
            return Disagreement(argument, f"{written} {time.group(1).strip()}", arguments[argument])
    return None


_TIME_AFTER_DATE = re.compile(r"[\s,;*]*(?:(?:at|from|between)\s+)?\**(\d{1,2}(?::\d\d)?\s*(?:[ap]\.?m\b\.?)?)",
                              re.IGNORECASE)
_ISO_MOMENT = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d{1,2}:\d\d)")


def _moments(value: Any) -> list[tuple[date, str]]:
    """The (day, HH:MM) of each date-time in a sent value ("2025-03-14T22:00:00Z"; not "2025-02-30T10:00")."""
    return [(day, _pad(match.group(2))) for text in texts(value) if len(text) <= 40
            for match in _ISO_MOMENT.finditer(text) for day in calendar_dates(match.group(1))]


_SAID_TIME = re.compile(r"(?<![\d:.,/-])(\d{1,2})(?:[:.](\d\d))?\s*([ap])\.?m\b\.?|"
                        r"(?<![\d:.,/-])(\d{1,2}):(\d\d)(?![\d:])|\b(noon|midnight)\b", re.IGNORECASE)
"""A time of day as said: "14:00", "9:00", "8:00 PM", "6pm", "3.15pm", "noon"."""
_RANGE_LINK = re.compile(r"\s*(?:[-–—]|to|until|till|and)\s*", re.IGNORECASE)
_SENT_TIME = re.compile(r"(?<![\d:+-])(\d{1,2}):(\d\d)(?!\d)")
_SENT_RANGE = re.compile(r"(?<![\d:T])(\d{1,2}:\d\d)(?::\d\d)?\s*[-–—]\s*(?:\d{4}-\d\d-\d\dT?\s*)?"
                         r"(\d{1,2}:\d\d)(?!\d)")
"""A time window sent as text: "13:00-18:00", "2026-04-10 08:00-12:00"."""


def _said_clock(written: str) -> str | None:
    match = _SAID_TIME.fullmatch(written.strip())
    if not match:
        return None
    if match.group(6):
        return "12:00" if match.group(6).lower() == "noon" else "00:00"
    if match.group(4):
        return f"{int(match.group(4)):02d}:{match.group(5)}"
    hour = int(match.group(1)) % 12 + (12 if match.group(3).lower() == "p" else 0)
    return f"{hour:02d}:{match.group(2) or '00'}"


def _said_times(text: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Each time of day or window said: as written, its HH:MM ends and each end as written. "8:00 PM – 12:00 AM" is
    (20:00, 00:00), "between 08:00 and 12:00" (08:00, 12:00)."""
    found: list[tuple[int, str, tuple[str, ...], tuple[str, ...]]] = []
    for match in _SAID_TIME.finditer(text):
        clock = _said_clock(match.group())
        if clock is None:
            continue
        if found and len(found[-1][2]) == 1 and _RANGE_LINK.fullmatch(text[found[-1][0]: match.start()]):
            end, written, (first,), (first_written,) = found.pop()
            hour = int(first[:2])
            if match.group(3) and match.group(3).lower() == "p" and not re.search(r"[ap]\.?m", first_written, re.I) \
                    and hour < 12 and hour + 12 <= int(clock[:2]):
                first = f"{hour + 12:02d}{first[2:]}"   # "2:00–4:00 pm" is 14:00–16:00
            found.append((match.end(), written + text[end: match.end()], (first, clock),
                          (first_written, match.group())))
        else:
            found.append((match.end(), match.group(), (clock,), (match.group(),)))
    return [(written, clocks, parts) for _, written, clocks, parts in found]


def _clocks(text: str) -> tuple[set[str], set[tuple[str, ...]]]:
    """The times of day and the windows a sent or read text holds."""
    ranges = {(_pad(match.group(1)), _pad(match.group(2))) for match in _SENT_RANGE.finditer(text)}
    times = {f"{int(match.group(1)):02d}:{match.group(2)}" for match in _SENT_TIME.finditer(text)}
    return times | {clock for window in ranges for clock in window}, ranges


def _pad(clock: str) -> str:
    return clock.zfill(5)


def _time_disagreement(text: str, call: dict[str, Any], context: str) -> Disagreement | None:
    """A time said must be one the call sent (or its result); a window said, one it sent when it sent windows
    ("13:00-18:00"). One a read returned may be said too, beside one the call sent (the old value)."""
    arguments = call.get("arguments") or {}
    timed = {name: value for name, value in arguments.items() if isinstance(value, str) and _clocks(value)[0]}
    if not timed:
        return None
    times, ranges = _clocks(" ".join(texts([arguments, call.get("result")])))
    read_times, read_ranges = _clocks(context)
    said = _said_times(text)

    def sent(clocks: tuple[str, ...]) -> bool:
        return clocks in ranges if len(clocks) == 2 and ranges else all(clock in times for clock in clocks)

    old_too = any(sent(clocks) for _, clocks, _ in said)
    for written, clocks, parts in said:
        read = clocks in read_ranges if len(clocks) == 2 and ranges else all(clock in read_times for clock in clocks)
        if not sent(clocks) and not (old_too and read):
            if not (len(clocks) == 2 and ranges):   # compared end by end: the end not sent
                written = next(part for clock, part in zip(clocks, parts) if clock not in times)
            argument = next(iter(timed))
            return Disagreement(argument, written, arguments[argument])
    return None


def _email_disagreement(text: str, call: dict[str, Any]) -> Disagreement | None:
    arguments = call.get("arguments") or {}
    emails = _emails(arguments)
    sent_text = " ".join(texts([arguments, call.get("result")])).casefold()
    for kind, written, key in stated_values(text) if emails else ():
        if kind == "email" and key not in sent_text:
            argument = next(iter(emails))
            return Disagreement(argument, written, arguments[argument])
    return None


_ENDING = re.compile(r"\bending(?:\s+in)?\s+[*#]*(\d[\d ]*\d)", re.IGNORECASE)
"""The last digits of a number said in its place: "your card ending 8802", "the IBAN ending in 3249 31"."""


def _ending_disagreement(text: str, call: dict[str, Any], context: str) -> Disagreement | None:
    """The last digits said of a card, account or phone number must end a number the call (with a string argument
    of three digits or more), its result or a read holds."""
    arguments = call.get("arguments") or {}
    numbered = [name for name, value in arguments.items()
                if isinstance(value, str) and len(re.sub(r"\D", "", value)) >= 3]
    held = [re.sub(r"\D", "", leaf) for leaf in texts([arguments, call.get("result")])] + re.findall(r"\d+", context)
    for match in _ENDING.finditer(text) if numbered else ():
        digits = match.group(1).replace(" ", "")
        if len(digits) >= 3 and not any(number.endswith(digits) for number in held):
            return Disagreement(numbered[0], match.group(1), arguments[numbered[0]])
    return None


_NUMBER = re.compile(r"(?<![\w.,/@-])\d+(?:[.,]\d+)*(?![\w/@-]|[.,]\d)")
_COUNTS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10, "eleven": 11, "twelve": 12, "both": 2}
_COUNT = re.compile(rf"\b(?<!\bthe )(?<!\bthis )(?<!\bthat )(?<!\bwhich )(?<!\bnew )(?<!\bold )(?<!\bany )(?<!\beach )"
                    rf"({'|'.join(_COUNTS)})\s+(?!(?:of|the|a|an|more|other|another|at|by|or|and|to|in|on|for|"
                    rf"with|is|are|was|were|has|have|last|time)\b)[a-z]", re.IGNORECASE)
"""A count said as a word before what it counts: "one monitor", "both pairs" (not "the new one", "one of")."""


def numbers_said(text: str) -> set[Decimal]:
    """Every number the text may state, dates aside, in each of its readings."""
    return {reading for match in _NUMBER.finditer(_without_dates(text)) for reading in readings(match.group())}


def readings(written: str) -> set[Decimal]:
    """The numbers a number as written may be: "1,450" is 1450 or, with a decimal comma, 1.45; "€5,00" is 5;
    "1.450,50" is 1450.5."""
    parts, separators = re.split(r"[.,]", written), re.findall(r"[.,]", written)
    if not separators:
        return {Decimal(written)}
    found = set()
    grouped = all(len(part) == 3 for part in parts[1:-1])
    if grouped and len(set(separators[:-1])) <= 1 and (len(separators) == 1 or separators[-1] != separators[0]):
        found.add(Decimal(f"{''.join(parts[:-1])}.{parts[-1]}"))   # the last mark is the decimal one
    if len(set(separators)) == 1 and len(parts[0]) <= 3 and all(len(part) == 3 for part in parts[1:]):
        found.add(Decimal("".join(parts)))                             # every mark groups thousands
    return found


def _number_disagreement(text: str, call: dict[str, Any], context: str) -> Disagreement | None:
    """A number said (in any of its readings) must be one the call sent as a number, or that its arguments, its result
    or a read hold; a count said as a word, a whole number up to twelve the call sent or its result holds as a
    number."""
    arguments = call.get("arguments") or {}
    numbers = {name: number(value) for name, value in arguments.items()
               if isinstance(value, int | float) and not isinstance(value, bool)}
    if not numbers:
        return None
    known = {sent for sent in numbers.values() if sent is not None} | {
        Decimal(found) for found in re.findall(r"\d+(?:\.\d+)?", " ".join(texts([arguments, call.get("result")]))
                                               + " " + context)}
    argument = next(iter(numbers))
    for match in _NUMBER.finditer(_without_durations(_without_dates(text), arguments)):
        if not any(numbers_agree(said, sent) for said in readings(match.group()) for sent in known):
            return Disagreement(argument, match.group(), arguments[argument])
    counts = {sent for sent in {*numbers.values(), *_numbers_in(call.get("result"))}
              if sent is not None and sent == sent.to_integral_value() and 0 < sent <= 12}
    for match in _COUNT.finditer(text) if counts else ():
        if Decimal(_COUNTS[match.group(1).lower()]) not in counts:
            return Disagreement(argument, match.group(1), arguments[argument])
    return None


_DURATION = re.compile(r"\b\d+(?:[.,]\d+)?(?:\s*[-–]\s*\d+)?\s*(?:business\s+|working\s+)?"
                       r"(minute|min|hour|hr|day|week|month|year|second)s?\b", re.IGNORECASE)


def _without_durations(text: str, arguments: dict[str, Any]) -> str:
    """The text without its durations when no argument is one: "within 15 minutes" says nothing of `attendees=6`; "72
    hours" may be `valid_hours`."""
    named = {singular(word) for name in arguments for word in name_words(name)}
    if named & {"minute", "min", "hour", "hr", "day", "week", "month", "year", "second", "duration", "time", "night"}:
        return text   # `timeSpentMinutes=90`: "2 hours logged" says another
    return _DURATION.sub(" ", text)


def _numbers_in(value: Any) -> set[Decimal | None]:
    """The numbers a JSON value holds as numbers (not in text); a negative amount is said without its sign ("a credit
    of £212.50" for `amount=-212.5`)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(_numbers_in(item) for item in value))
    if not isinstance(value, int | float) or isinstance(value, bool):
        return set()
    return {number(value), number(abs(value))}


def _quoted_options(sentence: str, argument: str, options: list[str]) -> list[str]:
    """The enum values said in quotation marks: whole ('with the reason "damaged"'), with their words in any order and
    cut short ('the "EU Roaming 5GB" add-on' is `ROAM_EU_5GB`), or inside a quotation right after the argument's name
    ("the reason 'arrived damaged'" says `damaged`). A quotation is else the user's words or a title, which state
    nothing."""
    label = r"[\s_]+".join(map(re.escape, argument.split("_")))
    found = []
    for match in _QUOTE.finditer(sentence):
        quoted = match.group()[1:-1].strip()
        words = [word.casefold() for word in re.split(_DASHES, quoted) if word]
        labelled = re.search(rf"\b{label}\W*$", sentence[:match.start()], re.IGNORECASE)
        found += [value for value in options if _same_words(words, [word.casefold() for word in re.split(_DASHES, value)
                                                                   if word])
                  or labelled and value_pattern(value).search(quoted)]
    return list(dict.fromkeys(found))


def _same_words(said: list[str], value: list[str]) -> bool:
    """Each word of the value starts a word said, one to one, in any order."""
    left = list(said)
    for word in value:
        match = next((index for index, other in enumerate(left) if other.startswith(word)), None)
        if match is None:
            return False
        left.pop(match)
    return not left


def _without_dates(text: str) -> str:
    """The text without its dates, times, e-mails and identifiers, nor its bare runs of three digits or more (an
    order or phone number; "1,450" and "125.00" stay)."""
    for start, end, _, _ in reversed(dates_at(text)):
        text = text[:start] + " " + text[end:]
    text = _DOTTED.sub(" ", text)   # today's date too: "today (26.11.2026)"
    for kind, written, _ in stated_values(text):
        if kind != "number" or written.isdigit():
            text = text.replace(written, " ")
    text = IDENTIFIER.sub(" ", text)
    return re.sub(r"\b\d{1,2}:\d\d\b|\b\d{1,2}\s*(?:am|pm)\b|[\w.+-]+@[\w-]+(?:\.[\w-]+)+", " ", text,
                  flags=re.IGNORECASE)


def _emails(arguments: dict[str, Any]) -> dict[str, str]:
    return {name: value for name, value in arguments.items() if isinstance(value, str) and "@" in value}


_NAME_AFTER = re.compile(r"\bto\s+[*_]{0,2}([\w.+-]+@[\w-]+(?:\.[\w-]+)+|[A-Z][^\W\d_]+(?:\s+[A-Z][^\W\d_]+)?)")


def assigned_name(said: Said, sentence: str, call: dict[str, Any]) -> Disagreement | None:
    """An action word that names an argument the call set ("assigned" → assignee, assigned_to), or one of giving
    work to someone ("reassigned", "transferred") when the call sent an e-mail: the name said after "to" must be
    one sent — every word of it, unless an e-mail was sent."""
    arguments = call.get("arguments") or {}
    named = [name for name, value in arguments.items()
             if names_argument(said.lemma, {name: None}) and isinstance(value, str)]
    if not named and said.lemma in ("assign", "reassign", "transfer"):
        named = list(_emails(arguments))[:1]
    if not named:
        return None
    match = _NAME_AFTER.search(unquoted(sentence)[unquoted(sentence).find(said.word):])
    if match is None:
        return None
    name = match.group(1)
    if name.split()[0].casefold() in ("the", "a", "an", "your"):
        return None
    if any(_same_name(name, arguments[argument].casefold()) for argument in named):
        return None
    return Disagreement(named[0], name, arguments[named[0]])


def _same_name(name: str, sent: str) -> bool:
    """An e-mail said is the one sent; a name, when every word of it is in the name sent (any word of it in an
    e-mail sent)."""
    if "@" in name:
        return name.casefold() == sent
    return (any if "@" in sent else all)(word.casefold() in sent for word in name.split())


def names_argument(lemma: str, arguments: dict[str, Any]) -> bool:
    """The action word is the start of an argument's name: "assigned" and `assignee`; not of a record's identifier
    ("booked" and `booking_id`)."""
    return len(lemma) >= 4 and any(name.lower().startswith(lemma) and not re.search(r"(?:^|_)ids?$", name.lower())
                                   for name in arguments)
