"""Claimed but not done, and done but not told: a deterministic check of what the bot said
against the calls it made. No model is needed; the rules are in docs/metrics.md ("Claims").

A sentence claims an action when an action word (a verb of the suite's write functions — their names,
the first word of their descriptions, the enum values they set — or of the general action words
below, in its past form) is said with the bot as its doer (first person; no subject, "Done: created
TKT-5"; a passive whose agent is not named), in the past or perfect (no "will", "can", "once", "to"),
with no negation in its clause, outside quotation marks, and not in a question, an example, a request
or a list of options that ends with a question. A passive that reports what a read returned ("The
priority was changed on 3 March", "it has already been cancelled", a word a read returned) is no
claim; neither is a general rule ("Requests logged after 6 pm are handled the next day").

A claim is backed by a successful write made in that message or before it whose words (name,
description, enum values it set, arguments it set) share the claim's word or its action group, on
the entity and identifiers the sentence names. A backed claim must also agree with the call on every
value the sentence states (a date, an enum value of one of its parameters, an e-mail, a number, the
name it was assigned to): a disagreement is claimed but not done, with what was said and what was sent.
A statement of a new state ("TKT-1 is now Critical") is checked against the writes the same way.
A write is told by any sentence that names its action (also in the present: "your leave is booked")
or the new state it set; reading out its identifier alone does not tell the user what was done.
"""
from __future__ import annotations

import json
import re
from decimal import Decimal
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from rapidfuzz import fuzz

from lobeval.scoring import trust
from lobeval.scoring.scoring import number, numbers_agree
from lobeval.scoring.claim_words import (CLAUSE, DETERMINERS, EXAMPLE, HISTORY, IDENTIFIER, LEXICON, NEGATION, NEW_STATE,
                                ON_A_DAY, REQUEST, TOKEN, Function, Said, Vocabulary, actions_said, assigned_name,
                                call_dates, date_matches, dates_at, dates_in, disagreement, expand, function_of,
                                groups_of, is_write, lemmas, name_words, named_values, names_argument, numbers_said,
                                readings, singular, specific, statements, unquoted, value_pattern, value_text,
                                without_former)

BASES = {"failed_call": "a write of the same reply failed", "value": "the call that did it sent another value",
         "identifier": "it names an identifier nobody produced", "other_calls": "the reply's calls do not back it",
         "no_call": "the reply made no call"}
"""What a claimed-but-not-done finding of the rules rests on (its `basis`)."""
BASIS_MEASURED = {basis: trust.PRECISION.get(f"claimed_not_done:{basis}", (0, 0)) for basis in BASES}
"""How many findings of each basis were right, of how many, on real bots' conversations labelled by hand
(lobeval.scoring.trust.PRECISION, docs/metrics.md §9)."""


def _rules_measured() -> str:
    right = sum(right for right, _ in BASIS_MEASURED.values())
    found = sum(found for _, found in BASIS_MEASURED.values())
    counted = any(trust.reported(f"claimed_not_done:{basis}") for basis in BASES)
    return (f"without the claims judge, the rules' claimed-but-not-done findings were right {right} times of {found} "
            f"on real bots' conversations (docs/metrics.md §9): "
            + ("check each in the replay" if counted else "they are listed to check by hand, not counted, and "
                                                           "ClaimsBacked needs the claims judge"))


RULES_MEASURED = _rules_measured()
"""What the rules' findings are worth on real bots' conversations labelled by hand (lobeval.scoring.trust), for the report."""

_NAMED_ACTION = re.compile(r"(?:^\W*|\b(?:your|the|this|my|our)\s+)(?:[a-z]+\s+)??([a-z]+)(?=\s+(?:of|to|for|from|on|is|are|"
                           r"was|were|has|have|takes|took|will|went)\b|\s*[.,;:!?*]|\s*$)", re.IGNORECASE)
"""An action named as the head of a noun phrase after a determiner or first in the sentence: "your refund of", "the
plan change to", "Refund of $60 done"; not "the refund policy"."""
_CHANGED = re.compile(r"\bno longer\b|\bnow\b", re.IGNORECASE)
"""A state said as new: "EU Roaming is no longer on your line", "TKT-1 is now Critical"."""
_LATER = re.compile(r"\b(?:will|would|could|can|(?<!\d\s)may(?!\s+\d)|might|should|if|once|when)\b", re.IGNORECASE)
_IN_PLACE = re.compile(r"\b(?:is|are)\s+(?:(?:now|already|all)\s+)*(?:in\b(?!\s+[a-z])|through|underway|yours|open|live|"
                       r"in\s+place|on\s+hold|(?:in|on)\s+(?:your|the)\s+account|on\s+(?:its|their|the)\s+way)\b",
                       re.IGNORECASE)
"""A record said to be in place: "your request is in", "a replacement is on its way", "the room is yours", "your
return is open", "the override is in place", "ORD-4 is on hold", "your store credit is already in your account"."""


# ---- The check ---------------------------------------------------------------------------------------------


def backs(said: Said, call: dict[str, Any], function: Function, sentence: str, vocabulary: Vocabulary) -> bool:
    """Whether a successful write `call` did the action `said` in `sentence`: not when the suite has a function of
    its own for the word ("reassigned" and `reassign_incident`, when the call was `reopen_incident`), nor when the
    words state a value of a parameter the call did not set ("set to Urgent" and `escalate_ticket(tier=...)`)."""
    arguments = call.get("arguments") or {}
    near = " ".join(said.span[said.span.find(said.word) + len(said.word):].split()[:6])   # "set to Urgent"
    if _owned_elsewhere(said, call, function, vocabulary) or _sets_otherwise(near, call, vocabulary) \
            or _names_anothers_field(near, function, vocabulary):
        return False
    entities = vocabulary.entities
    words = set(function.actions | function.entities)
    for argument, value in arguments.items():
        if isinstance(value, str) and (function.parameters.get(argument) or {}).get("enum"):
            words.update((*lemmas(value), value.lower()))
    words.update(_reported_effects(call.get("result")))
    # "$2,580 has been refunded to your gift card" after `cancel_reservation`, whose result holds the refund
    moved = _moves_money(said) and any(numbers_agree(one, other) for one in _money_said(sentence)
                                       for other in _moved_amounts(call.get("result")))
    if moved:
        words.update(_MONEY_WORDS)
    named_field = _names_argument_label(sentence, call)
    same = (said.lemma in words or groups_of(said.lemma) & {group for word in words for group in groups_of(word)}
            or "any" in groups_of(said.lemma) or names_argument(said.lemma, arguments)
            or named_field or ("update" in groups_of(said.lemma) and _states_a_value(said.span, call)) or moved)
    # "The extension costs £78.00, added to your invoice": an amount its result returned ({"extra_charge": 78})
    same = same or any(numbers_agree(one, other) for one in numbers_said(sentence) for other in _returned_numbers(call))
    # "£212.50 credited" and `prorateCharge(amount=-212.5)`: an amount the call sent, with a word of money moved
    same = same or "refund" in groups_of(said.lemma) and _sent_an_amount_said(call, sentence)
    undone = {action[2:] for action in function.actions if action.startswith("un")}
    if not same and (undone & _acted_on(said) and "remove" in groups_of(said.lemma) | {said.lemma}
                     or said.lemma in _GENERAL_VERBS and not TOKEN.findall(said.span.replace(said.word, " ", 1))):
        same = True   # "Removed the freeze from crd_5151" (`unfreeze_card`); "Updated ✅" after any write
    if not same and said.claim and not _opposed(said.lemma, words):
        # Another verb for what the call did, on the thing it acted on or with a value it sent: "Sent the reply"
        # (`post_reply`), "a temporary password was sent by SMS" (`reset_password(delivery="sms")`).
        same = bool(_acted_on(said) & (function.entities | function.actions)) or _states_a_value(said.span, call)
    # A record heading the sentence is what its clauses are about: "**VIS-2** (boiler service): moved to 20 April".
    headed = not IDENTIFIER.search(said.span) and re.match(rf"\W*{_RECORD}", sentence)
    named = sentence if headed else said.span + "".join(   # a "#50112" its words lost the "#" of
        f" #{number}" for number in re.findall(r"#(\d{3,})\b", sentence) if _holds(said.span, number))
    return bool(same) and fits(call, _PURPOSE.split(said.span)[0], entities, function, named,
                               "create" in groups_of(said.lemma)) \
        and _subject_action_agrees(said, words, vocabulary.records)


_MONEY_WORDS = {"refund", "credit", "charge", "bill", "pay", "debit", "deduct", "reimburse"}
_MONEY_KEY = re.compile(r"amount|refund|credit|charge|total|balance|fee|price|cost|paid|payment", re.IGNORECASE)


def _moves_money(said: Said) -> bool:
    """A word that says money was moved, or that something was done: refunded, credited, charged, processed, applied."""
    return said.lemma in _MONEY_WORDS or bool(groups_of(said.lemma) & {"refund", "any"})


_MONEY = re.compile(r"[$€£]\s?(\d[\d.,]*\d|\d)|(\d[\d.,]*\d|\d)\s?(?:USD|EUR|GBP|dollars|euros|pounds)\b", re.IGNORECASE)


def _money_said(text: str) -> set[Decimal]:
    """The amounts of money a text states with their currency: "$2,580", "€42,40", "186 EUR"."""
    return {reading for match in _MONEY.finditer(text) for reading in readings(match.group(1) or match.group(2))}


def _moved_amounts(value: Any, key: str = "", sign: int = 0, listed: bool = False) -> list[Decimal]:
    """The amounts of money a write's result holds as entries of a list (a payment history, the transactions), under a
    key that names money, sign aside (or only the negative ones, `sign` -1: refunds): the refund in a cancellation's
    payment history ({"payment_history": [{"payment_id": "gift_card_7", "amount": -567}]}); not a field such as
    {"refund_amount": 98.9}, which may say what will be refunded."""
    if isinstance(value, dict):
        return [amount for name, item in value.items() for amount in _moved_amounts(item, str(name), sign, listed)]
    if isinstance(value, list):
        return [amount for item in value for amount in _moved_amounts(item, key, sign, True)]
    if listed and isinstance(value, int | float) and not isinstance(value, bool) and value and _MONEY_KEY.search(key) \
            and not _REFERENCE.search(key) and (sign >= 0 or value < 0):
        return [abs(Decimal(str(value)))]
    return []


_PURPOSE = re.compile(r"\b(?:to (?:let|tell|say|confirm|explain|ask|inform|apologi[sz]e|make sure|remind|thank)|"
                      r"so that)\b", re.IGNORECASE)
"""Where a claim's purpose starts: what it names ("e-mailed the requester to let them know about the credit") is no
record it acted on."""


_GENERAL_VERBS = {"add", "create", "make", "open", "set", "update", "change", "edit", "modify", "apply", "remove"}
"""Verbs too general for the function named after them to own when it was not called: "Set tier to Plus" is
`update_member`'s although the suite has `set_notices`."""


def _acted_on(said: Said) -> set[str]:
    """The words of what the action was done to: a passive's subject, else the words after the verb ("Added a travel
    notice to ...")."""
    words = " ".join(said.subject) if said.passive and said.subject \
        else said.span[said.span.find(said.word) + len(said.word):]
    return {singular(word.lower()) for word in TOKEN.findall(words)}


def _owned_elsewhere(said: Said, call: dict[str, Any], function: Function, vocabulary: Vocabulary) -> bool:
    """The word is the name of another function of the suite's, and not said of what this call acted on ("a £10
    credit has been added" is `issueGoodwillCredit`'s although the suite has `addInternalNote`)."""
    if _acted_on(said) & function.entities or said.lemma in _GENERAL_VERBS:
        return False
    owners = vocabulary.owners.get(said.lemma, set())
    sent = {word.lower() for value in (call.get("arguments") or {}).values() if isinstance(value, str)
            for word in TOKEN.findall(value)}   # "reason: Changed mind" says what `start_return` sent
    return bool(owners) and said.lemma not in function.actions and "any" not in groups_of(said.lemma) \
        and said.word.lower() not in sent and not names_argument(said.lemma, call.get("arguments") or {})


def _sets_otherwise(span: str, call: dict[str, Any], vocabulary: Vocabulary) -> bool:
    arguments = call.get("arguments") or {}
    said = {name for name, values in vocabulary.enums.items() for value in values if _spelt(value, span)}
    return bool(said) and not said & set(arguments)


def _names_anothers_field(span: str, function: Function, vocabulary: Vocabulary) -> bool:
    """The words after the action word name a field of several words that another write function of the suite has
    and this one has not: "Priya has been added as a secondary resource" is `reassignTicket(secondaryResources=...)`'s,
    not `create_ticket`'s."""
    own = {" ".join(name_words(name)) for name in function.parameters}
    words = f" {' '.join(singular(word.lower()) for word in TOKEN.findall(span))} "
    return any(f" {' '.join(map(singular, label.split()))} " in words for label in vocabulary.labels - own
               if " " in label)


def _subject_action_agrees(said: Said, words: set[str], records: set[str]) -> bool:
    """A passive whose subject names an action ("your refund has been issued") is backed only by a call of that
    action: `create_return` issued no refund. A word the suite names records by (`order_id`), or before an identifier,
    names a record: "your order has been split", "the rug on order 55510"."""
    subject = said.subject
    named = {word for word, after in zip(subject, [*subject[1:], ""]) if word in LEXICON and word not in records
             and not (after[:1].isdigit() or IDENTIFIER.fullmatch(after.upper()))}
    groups = {group for word in words for group in groups_of(word)} - {"any"}
    return not named or bool(named & words) or any(groups_of(word) & groups for word in named)


_UNDOING = {"cancel", "reject"}


def _opposed(lemma: str, words: set[str]) -> bool:
    """A claim that undoes (cancel, reject) against a call that does, or the reverse."""
    return bool(groups_of(lemma) & _UNDOING) != bool({group for word in words for group in groups_of(word)} & _UNDOING)


def _reported_effects(result: Any) -> set[str]:
    """What a write's result says it did besides: {"label_emailed": true} → email, {"credited": 1020.0} → credit,
    {"tempPasswordSentTo": "dev@..."} → send."""
    if not isinstance(result, dict):
        return set()
    return {lemma for key, value in result.items() if value is True or isinstance(value, int | float | str)
            and not isinstance(value, bool) and value
            for word in name_words(key) for lemma in lemmas(word)}


def fits(call: dict[str, Any], sentence: str, entities: set[str], function: Function, records: str = "",
         made: bool = False) -> bool:
    """Whether `sentence` can be about `call`: the entities it names (of `entities`, the suite's writes') include
    one of the call's — or of the records it names by an identifier argument, unless the sentence says one was `made`
    (`schedule_visit(request_id=...)` made no request) — and the identifiers it (or `records`, when given) gives one
    of the call's."""
    named = {singular(word.lower()) for word in re.findall(r"[A-Za-z]+", sentence)} & entities
    if named and not named & (function.entities | (set() if made else _records_referred(call))):
        return False
    identifiers = set(IDENTIFIER.findall(records or sentence))
    sent = _values_text(call)
    return not identifiers or any(_holds(sent, identifier) for identifier in identifiers)


def _values_text(call: dict[str, Any]) -> str:
    return json.dumps([call.get("arguments"), call.get("result")], default=str)


def _holds(text: str, identifier: str) -> bool:
    """Whether the text has the identifier as a whole word: "7720" in `{"ticket_id": "7720"}` or `card_7720`, not in
    "77201"."""
    return re.search(rf"(?<![A-Za-z0-9-]){re.escape(identifier)}(?![\w-])", text) is not None


_REFERENCE = re.compile(r"(?:^|_)(?i:id|no|number|ref|key)$|(?<=[a-z])(?:Id|ID|No|Number|Ref|Key)$")
"""An argument that names the record a call is on: `number`, `order_id`, `case_no`, `LicenseKey`, `orderId`."""


def _records_referred(call: dict[str, Any]) -> set[str]:
    """The records a call names by an identifier argument: `issue_refund(order_id=...)` is about an order too ("I've
    refunded €20 on order 7781")."""
    return {singular(_REFERENCE.sub("", name).rstrip("_").lower()) for name in call.get("arguments") or {}
            if _REFERENCE.search(name) and _REFERENCE.sub("", name)}


@dataclass
class _Conversation:
    """What is known while reading a conversation in order."""

    tools: dict[str, dict[str, Any]]
    vocabulary: Vocabulary
    said_by_user: str = " "
    read: str = ""         # what successful reads returned, lower case
    known: str = " "      # what the user said and the calls sent and returned: the identifiers in it are known
    writes: list[dict[str, Any]] = field(default_factory=list)    # successful writes so far
    reads: list[dict[str, Any]] = field(default_factory=list)     # successful reads so far
    failed: list[dict[str, Any]] = field(default_factory=list)    # failed writes so far
    told: set[int] = field(default_factory=set)
    turn: int = 0
    message_index: int = 0


def find_claims(conversation: dict[str, Any], tools: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The row's `claims`: claimed_not_done [{message_index, claim, text}, plus for a value the call did not send
    {functionName, actual_index, argument, said, sent}] and done_not_told [{actual_index, functionName, turn}].
    `tools` maps function keys to tools.json entries; without an entry, a name that starts with
    get/list/search/... is a read."""
    calls = _with_their_words(calls_by_message(conversation), conversation.get("messages") or [])
    state = _Conversation(tools, Vocabulary.of(tools, [c["call"] for made in calls.values() for c in made]))
    claimed_not_done = []
    for index, message in enumerate(conversation.get("messages") or []):
        text = message.get("content") or ""
        if message.get("role") != "assistant":
            state.turn += message.get("role") == "user"
            state.said_by_user += " ".join(re.findall(r"[a-z0-9]+", expand(text).lower())) + " "
            state.known += text + " "
            continue
        state.message_index = index
        for made in calls.get(index, []):
            made = {**made, "message_index": index}
            call = made["call"]
            state.known += f"{_values_text(call)} {call.get('error') or ''} "
            write = is_write(call["functionName"], tools)
            if write:
                (state.failed if call.get("error") else state.writes).append(
                    {**made, "turn": call.get("turn") if call.get("turn") is not None else state.turn})
            elif not call.get("error"):
                state.reads.append(made)
                state.read += " " + json.dumps(call.get("result"), default=str).lower()
        claimed_not_done += [{"message_index": index, **found, "basis": _basis(found, calls.get(index, []), tools)}
                             for found in _message_claims(text, state)]
    done_not_told = [{"actual_index": made["actual_index"], "functionName": made["call"]["functionName"],
                      "turn": made["turn"]} for made in state.writes if made["actual_index"] not in state.told]
    return {"claimed_not_done": claimed_not_done, "done_not_told": done_not_told}


def _basis(found: dict[str, Any], made: list[dict[str, Any]], tools: dict[str, dict[str, Any]]) -> str:
    """What the finding rests on, a key of BASES: the reply's own calls (`made`)."""
    if found.get("argument"):
        return "value"
    if IDENTIFIER.fullmatch(found["claim"]):
        return "identifier"
    if any(item["call"].get("error") and is_write(item["call"]["functionName"], tools) for item in made):
        return "failed_call"
    return "other_calls" if made else "no_call"


def _with_their_words(calls: dict[int, list[dict[str, Any]]],
                      messages: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The calls of an assistant message with no text belong to the assistant message right after it, which says
    what they did (a transcript in the chat API's shape: the tool calls, then the reply)."""
    moved: dict[int, list[dict[str, Any]]] = {}
    for index in sorted(calls):
        target = index
        while not (messages[target].get("content") or "").strip() and target + 1 < len(messages) \
                and messages[target + 1].get("role") == "assistant":
            target += 1
        moved.setdefault(target, []).extend(calls[index])
    return moved


_FIELD = re.compile(r"^\W*(?!(?:all\s+)?(?:done|set|sorted|success|confirmed|complete|update|good news)\W*:)"
                    r"(?![^:]*\b(?:i|we)(?:'ve|'m)?\s)"
                    r"[A-Za-z][\w()/&' -]{0,40}?(?<!ed)\W*:(?!.*\b(?:i|i've|we|we've|has|have|had|been|was|were|is|are)\b)"
                    r"\s*\S", re.IGNORECASE)
"""A field shown with its value: "**Assigned to:** marcus@contoso.example" (not "Note added: ...", "Good news: TKT-1 has
been closed")."""
_INTRODUCES = re.compile(r"\b(?:following|here is|here's|below)\b.*:\W*$", re.IGNORECASE)
"""A sentence that introduces a list ("Here's what I've set up for you:") claims what its items say."""


def _message_claims(text: str, state: _Conversation) -> list[dict[str, Any]]:
    """The sentences' problems, and each identifier that neither the user nor a call produced, said of the user's or
    where the sentence claims an action."""
    found = []
    tried = any(made["message_index"] == state.message_index for made in [*state.writes, *state.failed])
    introduced = False   # by a claim ending in a colon: "I've opened disputes for both issues:"
    for sentence in statements(text):
        if sentence.endswith("?") or EXAMPLE.search(sentence) or _HEADING.match(sentence):
            continue
        actions = actions_said(sentence, state.vocabulary, state.said_by_user)
        claims = any(said.claim for said in actions)
        problem = _sentence_problem(sentence, actions, state) or (
            _failed_value(sentence, state) if claims or _SAID_DONE.search(sentence)
            or introduced and not re.search(r"\b(?:is|are|was|were|have|has|do|does)\b", sentence) else None)
        introduced = introduced or claims and sentence.rstrip("*_ ").endswith(":")
        if not tried and _FIELD.match(sentence):
            continue   # "**Workflow:** Expedited" shows a record read, or one about to be made: its introduction claims
        if problem and not (tried and _INTRODUCES.search(sentence) and not problem.get("argument")):
            found.append({**problem, "text": sentence[:200]})
        if not re.search(rf"\byour\s+(?:\w+\s+)?{_RECORD}", sentence, re.IGNORECASE) and not claims:
            continue   # "There's a knowledge article for that: KB0017" cites; "Your ticket TKT-999 is ..." claims one
        stated = unquoted(sentence)
        stated = "; ".join(clause for clause in CLAUSE.split(stated) if clause and not REQUEST.search(clause))
        for identifier in dict.fromkeys(IDENTIFIER.findall(stated)):
            if not _holds(state.known, identifier):
                found.append({"claim": identifier, "text": sentence[:200]})
    return found


_SAID_DONE = re.compile(r"✅|✔|→|->|\bnow\b", re.IGNORECASE)


def _failed_value(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """A value only a failed write of this message sent, said as done ("2. **Item not received** — TX-55790, £89.00"
    under "I've opened disputes for both issues:", after `dispute_transaction(transaction_id="TX-55790")` failed):
    claimed but not done. Not in a sentence that tells the failure, negates or says what may happen."""
    if NEGATION.search(sentence) or _FAILURE.search(sentence) or _LATER.search(sentence):
        return None
    done = " ".join(_values_text(made["call"]) for made in state.writes)
    for made in state.failed:
        if made["message_index"] != state.message_index:
            continue
        for name, value in (made["call"].get("arguments") or {}).items():
            if not isinstance(value, str) or len(value) < 3 or not re.search(r"[A-Za-z]", value) \
                    or _holds(done, value) or name in str(made["call"].get("error")):
                continue   # "pay_period must match YYYY-MM": the error named it, and a retry sends it otherwise
            if _holds(sentence, value) if IDENTIFIER.fullmatch(value) else value_pattern(value).search(sentence):
                return {"claim": value}
    return None


def _sentence_problem(sentence: str, actions: list[Said], state: _Conversation) -> dict[str, Any] | None:
    """What is wrong with the sentence's claims of an action (`actions`, as `actions_said` reads them) or of a state
    (the first thing), or None; every write the sentence tells is marked told either way."""
    problems = []
    for said in map(partial(_act_of_its_subject, vocabulary=state.vocabulary), actions):
        backing = [made for made in state.writes
                   if backs(said, made["call"], function_of(made["call"]["functionName"], state.tools), sentence,
                            state.vocabulary)]
        owners = state.vocabulary.owners.get(said.lemma, set())
        if any(made["call"]["functionName"] in owners for made in backing):   # "updated" and `update_payroll_...`
            backing = [made for made in backing if made["call"]["functionName"] in owners]
        if not backing:
            state.told.update(_told_all_the_same(said, sentence, state))
        backing = _not_by_kin(said, sentence, backing, state)
        if said.passive and _read_back_history(sentence, backing, state) \
                or said.passive and "reject" in groups_of(said.lemma) and state.failed:
            continue   # "my first attempt was rejected": the failure told
        present = bool(re.search(rf"\b(?:is|are|am)\s+(?:\w+\s+)?{re.escape(said.word)}\b", expand(sentence),
                                 re.IGNORECASE))
        if backing:
            problems.append(_agreement(said, sentence, backing, state) or _records_left_out(said, sentence, backing, state))
        elif said.claim and not (said.passive and _reported(said, sentence, state)) \
                and not (present and NEW_STATE.search(sentence)) and not _tells_a_failure(said, sentence, state) \
                and not _done_by_its_namesake(said, state) and not _moved_in_all(said, sentence, state):
            problems.append({"claim": said.word.lower()})
    problems.append(_state_problem(sentence, state))
    problems.append(_all_of_a_batch(sentence, state))
    problems.append(_field_row(sentence, state))
    problems.append(_dated_argument(sentence, state))
    problems.append(_near_miss(sentence, state))
    problems.append(_named_action_problem(sentence, state))
    problems.append(_tell_states(sentence, state))
    _tell_by_values(sentence, state)
    _tell_already(sentence, state)
    return next((problem for problem in problems if problem), None)


def _moved_in_all(said: Said, sentence: str, state: _Conversation) -> bool:
    """A total of the money the conversation's writes moved, said with a word of money moved: "Total refunded: $23,553"
    over five cancellations whose results hold the refunds."""
    if not _moves_money(said) or len(state.writes) < 2:
        return False
    latest = {json.dumps({name: value for name, value in (made["call"].get("arguments") or {}).items()
                          if _REFERENCE.search(name)}, sort_keys=True, default=str): made for made in state.writes}
    # each record's latest result: a payment history is given whole again by every later write on the record
    refunds = sum((amount for made in latest.values() for amount in _moved_amounts(made["call"].get("result"), sign=-1)),
                  Decimal(0))
    return any(numbers_agree(said_amount, refunds) for said_amount in _money_said(sentence)) if refunds else False


def _done_by_its_namesake(said: Said, state: _Conversation) -> bool:
    """A successful call that is no write, named for the act said: "I've transferred you to a human agent" after
    `transfer_to_human_agents`, which changes no record."""
    return any(said.lemma == next(iter(name_words(made["call"]["functionName"])), None) for made in state.reads)


_FAILURE = re.compile(r"\b(?:error|errors|failed|failure|rejected|declined|refused|timed out|bounced|"
                      r"(?:did not|didn't) (?:go through|work))\b", re.IGNORECASE)


def _tells_a_failure(said: Said, sentence: str, state: _Conversation) -> bool:
    """The attempt of a call of this message that failed, told with its failure: "I sent the wipe command twice, and
    both times the MDM returned an error", "The system rejected the change"."""
    failed = [made for made in state.failed if made["message_index"] == state.message_index]
    if "reject" in groups_of(said.lemma) and failed:
        return True
    return any(match.group().lower() != said.word.lower() for match in _FAILURE.finditer(sentence)) and any(
        backs(said, made["call"], function_of(made["call"]["functionName"], state.tools), sentence, state.vocabulary)
        for made in failed)


_RECORD = rf"#?(?:{IDENTIFIER.pattern})"
_RECORDS = re.compile(rf"{_RECORD}(?:\s*,\s*{_RECORD})*,?\s+(?:and|&)\s+(?:also\s+)?{_RECORD}")
_BETWEEN = re.compile(r"[\s,*]*(?:(?:have|has|had|been|are|were|is|was|now|all|both|also|successfully|just|already)"
                      r"[\s,*]+)*")


def _records_left_out(said: Said, sentence: str, backing: list[dict[str, Any]],
                      state: _Conversation) -> dict[str, Any] | None:
    """An action said of several records named together ("Both orders, ORD-1 and ORD-2, have been cancelled",
    "Refunded $15.00 on both INV-7012 and INV-7013") must be backed on each of them, with the values it states: one
    that no backing write names makes it claimed but not done; one whose writes all sent other values, said but not
    sent."""
    text = unquoted(sentence)
    at = text.find(said.word)
    for match in _RECORDS.finditer(text):
        before, after = text[match.end(): at], text[at + len(said.word): match.start()]
        if not (at >= match.end() and _BETWEEN.fullmatch(before) or at < match.start() and len(after.split()) <= 4
                and not re.search(r"\b(?:and|or|but|is|are|was|were|has|have)\b|[;:]|\.(?!\d)", after)):
            continue
        named = {record: [made for made in backing if _holds(_values_text(made["call"]), record)]
                 for record in IDENTIFIER.findall(match.group())}
        if any(named.values()) and not all(named.values()):
            return {"claim": said.word.lower()}
        for writes in filter(None, named.values()):
            found = [disagreement(sentence, made["call"], function_of(made["call"]["functionName"], state.tools),
                                  _besides(made, state)) for made in writes]
            if all(found):
                return {"claim": said.word.lower(), "functionName": writes[0]["call"]["functionName"],
                        "actual_index": writes[0]["actual_index"], "argument": found[0].argument,
                        "said": found[0].said, "sent": found[0].sent}
    return None


_EVERY = re.compile(r"\b(?:both|all|each|every|everything)\b(?![\s_-]+(?:day|night|week|month|year|morning|afternoon|"
                    r"evening)\b)", re.IGNORECASE)   # not a time's extent: "(all day)"


def _all_of_a_batch(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """"All three incidents have been resolved", "Both Sam and Alex now have Power BI Pro": said of a batch of
    writes of this message of which one failed and was not done again, it is claimed but not done."""
    text = re.sub(r"\([^()]*\)", " ", expand(unquoted(sentence)))   # "Economy (both passengers)": whom a value is for
    clause = next((clause for clause in CLAUSE.split(text) if clause and _EVERY.search(clause)), "")
    every = _EVERY.search(clause)
    if not every or NEGATION.search(text) or re.search(r"\b(?:will(?!.*\bnow\b)|would|could|can|should)\b", clause):
        return None
    done = [made for made in state.writes if made["message_index"] == state.message_index]
    for failed in state.failed:
        call = failed["call"]
        function = function_of(call["functionName"], state.tools)
        if failed["message_index"] == state.message_index \
                and any(made["call"]["functionName"] == call["functionName"] for made in done) \
                and not any(made["call"].get("arguments") == call.get("arguments") for made in done) \
                and (function.entities & {singular(word.lower()) for word in TOKEN.findall(text)}
                     or IDENTIFIER.search(text) and fits(call, text, set(), function) or _states_a_value(text, call)):
            state.told.update(made["actual_index"] for made in done if made["call"]["functionName"] == call["functionName"])
            return {"claim": every.group().lower()}
    return None


def _told_all_the_same(said: Said, sentence: str, state: _Conversation) -> set[int]:
    """The writes a claim no write backs tells all the same: said with an identifier nobody produced ("I've opened
    ticket INC-40999" after `create_incident` returned INC-40310), or a change said of the record a write of this
    message made, with values it did not send ("Your callback is set for 20 March" after `schedule_callback` sent
    19 March)."""
    said_known = replace(said, span=_known_identifiers(said.span, state))
    words = {singular(word.lower()) for word in TOKEN.findall(said.span)}
    told = set()
    for made in state.writes:
        function = function_of(made["call"]["functionName"], state.tools)
        changed = made["message_index"] == state.message_index and "update" in groups_of(said.lemma) \
            and function.entities & words and fits(made["call"], said.span, state.vocabulary.entities, function)
        if changed or backs(said_known, made["call"], function, _known_identifiers(sentence, state), state.vocabulary):
            told.add(made["actual_index"])
    return told


def _read_back_history(sentence: str, backing: list[dict[str, Any]], state: _Conversation) -> bool:
    """A passive dated, after a read, on a day no backing write sent is what the read returned, and tells nothing:
    "Priority set to Medium on 2 March" read from the audit log while `update_incident` set the status."""
    dated = ON_A_DAY.search(sentence) or HISTORY.search(sentence)
    days = [key for _, key in dates_in(sentence)]
    return bool(state.read and dated and days) and not any(
        date_matches(key, call_dates(made["call"].get("arguments"))) for key in days for made in backing)


def _known_identifiers(text: str, state: _Conversation) -> str:
    """The text without the identifiers that neither the user nor any call produced."""
    return IDENTIFIER.sub(lambda match: match.group() if _holds(state.known, match.group()) else " ", text)


def _not_by_kin(said: Said, sentence: str, backing: list[dict[str, Any]], state: _Conversation) -> list[dict[str, Any]]:
    """After a write of this message whose own action word the claim is failed, the writes that back the claim by
    that word, not by its group: `assign_incident` failed, so `update_incident` does not back "I've assigned it"."""
    def own(made: dict[str, Any]) -> bool:
        call = made["call"]
        return said.lemma in function_of(call["functionName"], state.tools).actions \
            or names_argument(said.lemma, call.get("arguments") or {})

    failed = [made for made in state.failed if made["message_index"] == state.message_index and own(made)
              and fits(made["call"], sentence, state.vocabulary.entities,
                       function_of(made["call"]["functionName"], state.tools))]
    return [made for made in backing if own(made)] if failed else backing


def _named_action_problem(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """An action of this message's writes named as a noun ("Your refund of €29.99 is on its way", "Your switch to
    Basic 10GB takes effect on 1 June"), in each part of the sentence with a doer of its own ("Refund of $60 done and
    I added the tag"): the values it states must be the ones sent; one it sent tells it ("your new ticket is TKT-5"
    alone does not)."""
    parts = re.split(r"\s+and\s+(?=(?:i|we)\b)", sentence, flags=re.IGNORECASE)
    return next(filter(None, (_named_action_in(part, state) for part in parts)), None)


def _named_action_in(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    text = value_text(unquoted(sentence))
    nouns = [match.group(1).lower() for match in _NAMED_ACTION.finditer(text)
             if match.group(1).lower() not in state.vocabulary.entities]   # "Order 5073-US": a record, no act
    for made in reversed(state.writes):
        call = made["call"]
        function = function_of(call["functionName"], state.tools)
        own = {group for word in function.actions for group in groups_of(word)} - {"any"}
        noun = next((noun for noun in nouns if noun in function.actions or groups_of(noun) & own), None)
        if made["message_index"] != state.message_index or noun is None \
                or not fits(call, sentence, state.vocabulary.entities, function):
            continue
        found = disagreement(sentence, call, function, _besides(made, state))
        if found or _states_a_value(text, call) or _states_a_number(text, call):
            state.told.add(made["actual_index"])
        if found:
            return {"claim": noun, "functionName": call["functionName"], "actual_index": made["actual_index"],
                    "argument": found.argument, "said": found.said, "sent": found.sent}
    return None


_FIELD_ROW = re.compile(r"^\W*?([A-Za-z][A-Za-z _-]*?)\W*\s*(?:\||:)[^\w€$£]*([\w€$£][\w .,€$£-]*?)\W*$")
"""A field and its value as a table row or a label: "| Priority | High |", "**Priority:** Critical"."""
_HEADED = re.compile(rf"^\W*(?:(?![A-Za-z]+ed\s)[A-Za-z]+\s+)?#?({IDENTIFIER.pattern})\W*?\s+[—–-]\s+(.+)$")
"""A record's identifier as a header of what follows: "INC0034700 — Status: Closed", "**INC-3** — On Hold"."""


def _field_row(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """A field of a write of this message shown with an enum value of its parameter or a number, as a table row or a
    label, or a value under the record's identifier as a header ("INC-3 — On Hold, waiting on the vendor"): the value
    it sent tells the write; another value is claimed but not done."""
    headed = _HEADED.match(sentence.strip())
    record, rest = (headed.group(1), headed.group(2).strip()) if headed else (None, sentence.strip())
    cells = [cell.strip() for cell in rest.strip("| ").split("|")]
    if len(cells) > 1:   # a table row: its field, then the value it has now in the last column ("| Priority | High | Low |")
        rest = f"{cells[0]}: {cells[-1]}"
    changed = re.split(r"\s*(?:→|->|=>)\s*", rest)
    if len(changed) > 1 and ":" in changed[0]:   # "Priority: High → Low"
        rest = f"{changed[0].split(':')[0]}: {changed[-1]}"
    row = _FIELD_ROW.match(rest)
    noted = _FIELD_ROW.match(re.sub(r"\s*\([^()]*\)\W*$", "", rest))   # "Checked bags: 2 (no charge)"
    if not row and not noted and not record:
        return None
    for made in reversed(state.writes):
        call = made["call"]
        if made["message_index"] != state.message_index or record and record not in json.dumps(
                [call.get("arguments"), call.get("result")], default=str):
            continue
        function = function_of(call["functionName"], state.tools)
        for name, sent in (call.get("arguments") or {}).items():
            days = dates_in(row.group(2)) if row and _labels(row.group(1), name) else []
            if days and call_dates(sent):   # "Due: Tuesday, 1 December" and `due_date="2026-12-08"`
                state.told.add(made["actual_index"])
                if not any(date_matches(key, call_dates(sent)) for _, key in days):
                    return {"claim": "set", "functionName": call["functionName"], "actual_index": made["actual_index"],
                            "argument": name, "said": days[0][0], "sent": sent}
            if noted and isinstance(sent, int | float) and not isinstance(sent, bool) and _same_head(noted.group(1), name) \
                    and any(numbers_agree(said, Decimal(str(sent))) for said in numbers_said(noted.group(2))):
                state.told.add(made["actual_index"])   # "Checked bags: 2" and `total_baggages=2` (told, never compared)
            if row and isinstance(sent, int | float) and not isinstance(sent, bool) \
                    and _names_argument_label(row.group(1), {"arguments": {name: sent}}):   # "Amount: EUR 125.00"
                state.told.add(made["actual_index"])
                found = disagreement(row.group(2), {"arguments": {name: sent}, "result": call.get("result")}, function,
                                     _besides(made, state))
                if found:
                    return {"claim": "set", "functionName": call["functionName"], "actual_index": made["actual_index"],
                            "argument": name, "said": found.said, "sent": sent}
            options = (function.parameters.get(name) or {}).get("enum") or []
            if not isinstance(sent, str) or sent not in options or not row and not record:
                continue
            if row:
                if not _names_argument_label(row.group(1), {"arguments": {name: sent}}):
                    continue
                said = next((option for option in options if option.casefold() == row.group(2).strip().casefold()), None)
            else:
                said = next((option for option in options if value_pattern(option).match(rest.lstrip("*_ "))), None)
                if said is None:
                    continue
            state.told.add(made["actual_index"])
            if said and said != sent:
                return {"claim": "set", "functionName": call["functionName"], "actual_index": made["actual_index"],
                        "argument": name, "said": said, "sent": sent}
    return None


def _same_head(label: str, argument: str) -> bool:
    """A field's label and an argument name the same thing by their last words, one a short form of the other: "Checked
    bags" and `total_baggages`."""
    said, named = TOKEN.findall(label.lower())[-1:], name_words(argument)[-1:]
    return bool(said and named) and len(singular(said[0])) >= 3 and singular(named[0]).startswith(singular(said[0]))


def _dated_argument(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """A date said right after the words of a date argument of a write of this message ("It's due Thursday 3
    December", `due_date="2026-12-04"`) tells the write when it is the one sent; another is claimed but not done."""
    if NEGATION.search(sentence):
        return None
    sentence = without_former(sentence)
    for start, _, written, key in dates_at(sentence):
        before = " ".join(TOKEN.findall(sentence[:start])[-2:])
        dated = [(made, name, sent) for made in reversed(state.writes) if made["message_index"] == state.message_index
                 and fits(made["call"], sentence, set(), function_of(made["call"]["functionName"], state.tools))
                 for name, sent in (made["call"].get("arguments") or {}).items()
                 if call_dates(sent) and _labels(before, name)]
        agree = [made for made, _, sent in dated if date_matches(key, call_dates(sent))]
        state.told.update(made["actual_index"] for made in agree or [made for made, _, _ in dated])
        if dated and not agree:
            made, name, sent = dated[0]
            return {"claim": "set", "functionName": made["call"]["functionName"], "actual_index": made["actual_index"],
                    "argument": name, "said": written, "sent": sent}
    return None


_NAME = re.compile(r"[A-Z][a-zà-ÿ'-]+(?:\s+[A-Z][a-zà-ÿ'-]+){1,3}")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def _near_miss(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """A name or an e-mail said in any tense that is nearly, not exactly, one a write of this message sent ("The driver
    will ask for Martha Kowalska", sent `contact_name="Marta Kowalski"`): a slip, claimed but not done. Not one the
    user, a call or a read gave."""
    if NEGATION.search(sentence):
        return None
    said = [*_EMAIL.findall(sentence), *_NAME.findall(re.sub(r"['’]s\b", "", _EMAIL.sub(" ", sentence)))]
    for made in state.writes:
        if made["message_index"] != state.message_index:
            continue
        for name, sent in (made["call"].get("arguments") or {}).items():
            if not isinstance(sent, str) or not (_EMAIL.fullmatch(sent) or _NAME.fullmatch(sent)):
                continue
            for word in said:
                if word.casefold() != sent.casefold() and fuzz.ratio(word.casefold(), sent.casefold()) >= 85 \
                        and word.casefold() not in state.known.casefold():
                    state.told.add(made["actual_index"])
                    return {"claim": "set", "functionName": made["call"]["functionName"],
                            "actual_index": made["actual_index"], "argument": name, "said": word, "sent": sent}
    return None


def _labels(label: str, argument: str) -> bool:
    """Whether a field's label names the date argument: "Due" `due_date`, "New start" `startDate`."""
    words = set(name_words(argument)) - {"date", "day", "time", "at", "on"}
    return bool(words & {singular(word.lower()) for word in TOKEN.findall(label)})


def _spelt(value: str, text: str) -> bool:
    """The enum value said as the suite spells it ("Sick", not "sick days"), underscores as spaces; a value of several
    words in any case ("in progress")."""
    def words(written: str) -> str:
        spaced = re.sub(r"[\s_-]+", " ", written.strip())
        return spaced.casefold() if " " in spaced else spaced
    return any(words(match.group()) == words(value) for match in value_pattern(value).finditer(text))


def _tell_states(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """A write is told by a statement of a new state, not about later, naming a value it set from the suite's enums
    ("EU Roaming is no longer on your line"; "ACT-3 is Open" alone may be what it was, unless a write of this message
    set it), or by its record said to be
    in place ("Your request #ABS-1310 is in", "A replacement is on its way", "HD-4 is open again" after
    `reopenTicket`) naming the identifier its result returned or its entity. A record said to be in place that no
    successful write of the message made, when one of the message's writes on it failed ("Room 7.02 is yours" after `book_room` failed), or that names what a write
    function of the suite does when none did it, is claimed but not done."""
    clauses = [clause for clause in CLAUSE.split(expand(unquoted(sentence.replace("*", ""))))   # **emphasis** aside
               if clause and not _LATER.search(clause)]
    if sentence.endswith("?"):
        return None
    text = " ; ".join(clauses)
    affirmed = " ; ".join(clause for clause in clauses if _CHANGED.search(clause)
                          and not NEGATION.search(_CHANGED.sub(" ", clause)))
    words = {singular(word.lower()) for word in TOKEN.findall(text)}
    plain = " ; ".join(clause for clause in clauses if not NEGATION.search(clause))
    arrived = next(filter(None, (_IN_PLACE.search(clause) for clause in clauses if not NEGATION.search(clause))), None)
    in_place = False
    for made in state.writes:
        call = made["call"]
        function = function_of(call["functionName"], state.tools)
        arguments = call.get("arguments") or {}
        new = set(IDENTIFIER.findall(json.dumps(call.get("result"), default=str))) - set(
            IDENTIFIER.findall(json.dumps(arguments, default=str)))
        said = f"{plain} ; {affirmed}" if made["message_index"] == state.message_index else affirmed   # "ACT-5 is Done"
        stated = fits(call, sentence, set(), function) and any(
            isinstance(value, str) and (function.parameters.get(name) or {}).get("enum")
            and _spelt(value, said) and (said is affirmed or f'"{value.lower()}"' not in state.read)
            for name, value in arguments.items())
        again = {action[2:] for action in function.actions if action.startswith("re")} if "again" in words else set()
        named = arrived and (new & set(IDENTIFIER.findall(text))
                             or (function.entities | function.actions | again) & words
                             or any(isinstance(value, str) and (function.parameters.get(name) or {}).get("enum")
                                    and _spelt(value, text.replace(arrived.group(), " "))
                                    for name, value in arguments.items()))   # "ACT-3 is Open" may be as it was
        in_place = in_place or bool(named) and made["message_index"] == state.message_index
        if stated or named:
            state.told.add(made["actual_index"])
        found = named and made["message_index"] == state.message_index and disagreement(sentence, call, function,
                                                                                        state.read)
        if found:
            return {"claim": arrived.group().lower(), "functionName": call["functionName"],
                    "actual_index": made["actual_index"], "argument": found.argument, "said": found.said,
                    "sent": found.sent}
    tried = [made for made in state.failed if made["message_index"] == state.message_index
             and function_of(made["call"]["functionName"], state.tools).entities & words]
    if arrived and not in_place and (tried or _names_what_none_did(arrived.string, state)):
        return {"claim": arrived.group().lower()}
    return None


def _names_what_none_did(clause: str, state: _Conversation) -> bool:
    """Whether the clause names the thing or act of one of the suite's write functions ("a reset link is on its
    way") that no call of this message (a read may tell it) and no write before was about."""
    words = {singular(word.lower()) for word in TOKEN.findall(clause)}
    suite = [function_of((tool.get("function") or {}).get("name") or key, state.tools)
             for key, tool in state.tools.items() if is_write(key, state.tools)]
    done = [function_of(made["call"]["functionName"], state.tools) for made in [*state.writes, *state.reads]
            if made["message_index"] == state.message_index or made in state.writes]
    return any((function.entities | function.actions) & words for function in suite) \
        and not any((function.entities | function.actions) & words for function in done)


_ALREADY = re.compile(r"\balready\s+([A-Za-z]+)", re.IGNORECASE)


def _tell_already(sentence: str, state: _Conversation) -> None:
    """A write of the conversation is told by its act said to be done already ("Travel certificate – already created
    (ID certificate_3221322)", "the original itinerary (already cancelled)"): what a read returned otherwise."""
    for match in _ALREADY.finditer(sentence):
        lemma = state.vocabulary.action(match.group(1).lower())
        if lemma is None:
            continue
        said = Said(match.group(1), lemma, False, True, sentence, ())
        state.told.update(made["actual_index"] for made in state.writes
                          if backs(said, made["call"], function_of(made["call"]["functionName"], state.tools), sentence,
                                   state.vocabulary))


_ACT_NOUN = (("ellation", "el"), ("ification", "ify"), ("ation", "ate"), ("ation", ""), ("ion", "e"), ("ion", ""),
             ("ment", ""), ("al", "e"), ("ing", ""), ("ing", "e"))
"""How an act's noun is made from its verb: cancellation, modification, creation, deletion, assignment, removal,
booking."""
_GENERIC = {"complete", "process", "handle", "action", "finalise", "finalize", "apply", "confirm", "submit", "execute"}


def _act_of_its_subject(said: Said, vocabulary: Vocabulary) -> Said:
    """A generic verb said of an act named by its subject is that act: "The cancellation of your reservation has been
    completed" claims a cancellation, "Your booking has been processed" a booking (not a record of the suite's: "the
    reservation has been processed" stays as said)."""
    if said.lemma not in _GENERIC or not said.passive:
        return said
    for word in said.subject:
        if word in vocabulary.entities or word in vocabulary.records:
            continue
        base = word if word in LEXICON else next(
            (word[:-len(ending)] + new for ending, new in _ACT_NOUN if word.endswith(ending)
             and len(word) > len(ending) + 2 and (word[:-len(ending)] + new) in vocabulary.actions), None)
        if base and base in vocabulary.actions and base not in _GENERIC:
            return replace(said, lemma=base)
    return said


def _tell_by_values(sentence: str, state: _Conversation) -> None:
    """A write of this message is told by the day it sent, in any tense ("Thursday 9 April at 11:00 it is — an
    engineer will call you then"), or by a value it sent after an arrow ("Seats dropped from 12 → 11")."""
    days = [key for _, key in dates_in(sentence)]
    changed = re.split(r"→|->|=>", sentence)
    said = numbers_said(sentence)
    for made in state.writes:
        sent = call_dates(made["call"].get("arguments"))
        if made["message_index"] == state.message_index and (
                any(date_matches(key, sent) for key in days) or len(changed) > 1 and (
                _states_a_value(changed[-1], made["call"]) or _states_a_number(changed[-1], made["call"]))
                or any(numbers_agree(one, other) for one in said for other in _returned_numbers(made["call"]))):
            state.told.add(made["actual_index"])


def _returned_numbers(call: dict[str, Any]) -> set[Decimal]:
    """The amounts a write's result returned and its arguments did not send ("discount": 6.4, "new_total": 57.59): said,
    they tell it ("that's 6,40 € off, making your new total 57,59 €")."""
    returned = set(_amounts(call.get("result")).values()) - set(_amounts(call.get("arguments")).values())
    return {value for value in returned if value not in (0, 1)}


def _sent_an_amount_said(call: dict[str, Any], sentence: str) -> bool:
    """The sentence says an amount (10 or more, its sign aside) the call sent as a number: `amount=-212.5` and "a credit
    of £212.50"."""
    sent = [abs(value) for value in _amounts(call.get("arguments")).values() if abs(value) >= 10]
    return any(numbers_agree(said, value) for said in numbers_said(sentence) for value in sent)


def _amounts(value: Any) -> dict[str, Decimal]:
    """The numbers of a JSON object held as numbers, but a record's identifier ("order_id": 5501)."""
    return {key: Decimal(str(item)) for key, item in (value if isinstance(value, dict) else {}).items()
            if isinstance(item, int | float) and not isinstance(item, bool) and not _REFERENCE.search(key)}


def _agreement(said: Said, sentence: str, backing: list[dict[str, Any]], state: _Conversation) -> dict[str, Any] | None:
    """Tell the backing writes; the disagreement with the latest when none agrees with every value said (a write
    that did not set the argument another one disagrees on agrees with nothing: `create_incident` without a
    priority does not back "raised to Critical" when `update_incident` sent High)."""
    state.told.update(other["actual_index"] for other in _the_ones_said(sentence, backing))
    backing = [made for made in backing if _sent_an_amount_said(made["call"], sentence)] \
        or backing   # "a credit of £212.50 has been applied" is about the write that sent 212.5
    found = [(made, disagreement(sentence, made["call"], function_of(made["call"]["functionName"], state.tools),
                                 _besides(made, state)) or assigned_name(said, sentence, made["call"]))
             for made in reversed(backing)]
    differ = {problem.argument for _, problem in found if problem}
    if not found or any(problem is None and differ <= set(made["call"].get("arguments") or {})
                        for made, problem in found):
        return None
    made, found = next((made, problem) for made, problem in found if problem)
    return {"claim": said.word.lower(), "functionName": made["call"]["functionName"],
            "actual_index": made["actual_index"], "argument": found.argument, "said": found.said,
            "sent": found.sent}


def _the_ones_said(sentence: str, backing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of several backing calls of one function, those whose values the sentence states, when it states any: "VPN
    access revoked (removed from VPN-Users)" tells `revoke_access(group="VPN-Users")`, not the one on the share."""
    told = []
    for name in dict.fromkeys(made["call"]["functionName"] for made in backing):
        calls = [made for made in backing if made["call"]["functionName"] == name]
        stated = [made for made in calls if _states_a_value(sentence, made["call"])]
        told += stated if len(calls) > 1 and stated else calls
    return told


def _besides(made: dict[str, Any], state: _Conversation) -> str:
    """What the reads returned and the other writes of the message sent and returned, lower case: values a sentence
    may state of them ("The vase (qty 1) is off your order, your new total is $42.00, and the $18.00 difference has
    been refunded")."""
    batch = [other for other in state.writes if other["message_index"] == made["message_index"]]
    others = [_values_text(other["call"]) for other in batch if other is not made]
    return " ".join([state.read, *others, *map(str, _derived(made, batch))]).lower()


def _derived(made: dict[str, Any], batch: list[dict[str, Any]]) -> set[Decimal]:
    """Amounts a sentence may state that no call holds as such: the total of an argument over the message's calls of
    one function ("**Total credited: £75.00**" over three credit notes), and a product of two of the call's numbers
    ("80 reams at £3.45, line total £276.00")."""
    call = made["call"]
    own = {**_amounts(call.get("result")), **_amounts(call.get("arguments"))}
    same = [_amounts(other["call"].get("arguments")) for other in batch
            if other["call"]["functionName"] == call["functionName"]]
    totals = {sum(values.get(key, Decimal(0)) for values in same) for key in _amounts(call.get("arguments"))}
    products = {one * other for index, one in enumerate(own.values()) for other in list(own.values())[index + 1:]}
    return totals | (products if len(own) <= 6 else set())


def _reported(said: Said, sentence: str, state: _Conversation) -> bool:
    """A passive the bot reads back: after a read, about something that is no record of the suite's writes, or with
    a time in the past, or with a word of its action (or its group) that the read returned ("amended": true,
    "assignee": ...)."""
    if not state.read:
        return False
    if said.subject and not any(specific(word) and word not in DETERMINERS or singular(word) in state.vocabulary.records
                                for word in said.subject):
        return True   # "the card was declined": not a record of this conversation
    if HISTORY.search(sentence) or ON_A_DAY.search(sentence) or any(
            _spelt(value, sentence) and value.lower() in state.read
            for values in state.vocabulary.enums.values() for value in values):
        return True   # "It's marked Blocked because ..." after a read returned "Blocked"
    returned = {lemma for word in re.findall(r"[a-z]+", state.read) for lemma in lemmas(word)}
    groups = {group for word in returned for group in groups_of(word)} - {"any"}
    return f'"{said.lemma}' in state.read or said.lemma in returned or bool(groups_of(said.lemma) & groups)


def _state_problem(sentence: str, state: _Conversation) -> dict[str, Any] | None:
    """A statement of a new state ("TKT-1 is now Critical", "LV-3 now starts on 3 March 2026"): tells the latest
    write that set what it says; one that set it otherwise, or a value only a failed write tried to set, is
    claimed but not done."""
    # "will now arrive on 2 July" says what a write just did; "will be" is yet to happen; "if", "let me" and "need to"
    # say what may be or is planned; a sentence opened by "Now, ..." says what comes next
    expanded = " ; ".join(clause for clause in CLAUSE.split(expand(unquoted(_NOT_NEW.sub(" ", sentence))))
                          if clause and not re.search(r"\b(?:will(?!.*\bnow\b)|would|could|can|(?<!\d\s)may(?!\s+\d)|"
                                                      r"might|should|must)\b", clause, re.IGNORECASE)
                          and not _PLANNED.search(clause))
    if not NEW_STATE.search(named_values(expanded, state.vocabulary, NEW_STATE)) or NEGATION.search(expanded):
        return None
    problem = None
    for made in reversed(state.writes):
        call, function = made["call"], function_of(made["call"]["functionName"], state.tools)
        if not fits(call, sentence, state.vocabulary.entities, function):
            continue
        found = disagreement(sentence, call, function, _besides(made, state))
        if found:
            state.told.add(made["actual_index"])
            problem = problem or {"claim": "set", "functionName": call["functionName"],
                                  "actual_index": made["actual_index"], "argument": found.argument,
                                  "said": found.said, "sent": found.sent}
        elif _states_a_value(expanded, call) or function.actions & {word.lower() for word in TOKEN.findall(expanded)} \
                or _names_argument_label(expanded, call) or isinstance(call.get("result"), dict) \
                and _states_a_number(expanded, {"arguments": call["result"]}):
            state.told.add(made["actual_index"])
            return None
    if problem:
        return problem
    if _on_another_record(expanded, sentence, state):
        return {"claim": "set"}
    tried = [made for made in state.failed if _states_a_value(expanded, made["call"])
             and fits(made["call"], sentence, state.vocabulary.entities,
                      function_of(made["call"]["functionName"], state.tools))]
    if tried or _contradicts_read(expanded, sentence, state):
        return {"claim": "set"}
    # Said of a record with nothing done in this message, or only a failed attempt on it, and nothing read or done
    # on it before: "CS-7002 is now owned by jo@acme.example", "Delivery of ORD-1202 is now set for Saturday".
    attempts = [made for made in state.failed if made["message_index"] == state.message_index]
    if _names_a_change(expanded, state) and all(
            fits(made["call"], sentence, set(), function_of(made["call"]["functionName"], state.tools))
            for made in attempts) and not any(
            fits(made["call"], sentence, set(), function_of(made["call"]["functionName"], state.tools))
            for made in [*state.writes, *state.reads]) and not any(
            made["message_index"] == state.message_index for made in [*state.writes, *state.reads]):
        return {"claim": "set"}
    return None


_NOT_NEW = re.compile(r"^\W*now\b(?=\s*,|\s+(?:let|i|we|here|that|since|so|for|to|there)\b)|"
                      r"\b(?:for|until|till|up to|by|right) now\b", re.IGNORECASE)
""""Now, let me ...", "Now I have all the prices": what comes next; "for now", "until now": for the time being. No state
said to be new."""
_PLANNED = re.compile(r"\b(?:if|unless|let (?:me|us)|let's|(?:need|needs|about|plan|plans|want|wants) to|"
                      r"propos(?:e|ed|al|ing))\b", re.IGNORECASE)
_HEADING = re.compile(r"^\W*[A-Za-z]+ed(?:\s+(?!(?:the|your|my|our|this|these|those|a|an|all)\b)[\w'\u2010\u2011-]+){1,3}"
                      r"(?:\s*\([^()]*\))?\W*:\W*$", re.IGNORECASE)
"""A heading of a participle and what it names: "Updated action details:" (what follows says what it is)."""


def _on_another_record(text: str, sentence: str, state: _Conversation) -> bool:
    """The value a write of this message set, said of a record no call of the message is on: "TKT-1028 is now
    Blocked" after `update_ticket(ticket_id="TKT-1082", status="Blocked")`."""
    named = set(IDENTIFIER.findall(unquoted(sentence)))
    this = [made for made in [*state.writes, *state.reads, *state.failed]
            if made["message_index"] == state.message_index]
    return bool(named) and any(made in state.writes and _states_a_value(text, made["call"]) for made in this) \
        and not any(_holds(_values_text(made["call"]), identifier) for made in this for identifier in named)


def _contradicts_read(text: str, sentence: str, state: _Conversation) -> bool:
    """A new state no write made whose value a read of the record returned otherwise: read "severity": "Major",
    said "CS-8 is Urgent now" (the record named: "Now I need the prices for economy" names none)."""
    if not IDENTIFIER.search(unquoted(sentence)):
        return False
    for made in state.reads:
        result = made["call"].get("result")
        if not isinstance(result, dict) or not fits(made["call"], sentence, set(), Function("", frozenset(),
                                                                                           frozenset(), {})):
            continue
        for key, value in result.items():
            said = {option.casefold() for option in state.vocabulary.enums.get(key, ())
                    if value_pattern(option).search(text)}
            if isinstance(value, str) and said and value.casefold() not in said:
                return True
    return False


def _names_a_change(text: str, state: _Conversation) -> bool:
    """Whether a new state is said of a record of this conversation (an identifier) with a field of the suite's
    writes ("... is now the owner of CS-7002") or an action word ("... is now set for Saturday")."""
    if not IDENTIFIER.search(text):
        return False
    words = " ".join(word.lower() for word in TOKEN.findall(text))
    return any(f" {label} " in f" {words} " for label in state.vocabulary.labels) \
        or any(state.vocabulary.action(word) for word in words.split())


def _names_argument_label(text: str, call: dict[str, Any]) -> bool:
    """Whether the text names an argument the call set, other than the record's identifier ("the address")."""
    return any(re.search(r"\b" + r"[\s_-]".join(map(re.escape, name.split("_"))) + r"\b", text, re.IGNORECASE)
               or isinstance(value, bool) and re.search(rf"\b{re.escape(_last_word(name))}\b", text, re.IGNORECASE)
               for name, value in (call.get("arguments") or {}).items()
               if not (isinstance(value, str) and IDENTIFIER.fullmatch(value)))


def _last_word(name: str) -> str:
    """A flag's own word: `customer_visible` and `customerVisible` → visible ("TKT-1 is now visible to them")."""
    return (name_words(name) or [""])[-1]


def _states_a_value(text: str, call: dict[str, Any]) -> bool:
    """Whether the text says a value the call sent: a word (not an identifier) or a date."""
    for name, value in (call.get("arguments") or {}).items():
        if _REFERENCE.search(name):
            continue   # "INC0034500 is with Network Operations now" says nothing of what was set on INC0034500
        if isinstance(value, str) and not IDENTIFIER.fullmatch(value) and re.search(r"[A-Za-z]", value) \
                and value_pattern(value).search(text):
            return True
        dates = call_dates(value)
        if dates and any(date_matches(key, dates) for _, key in dates_in(text)):
            return True
    return False


def _states_a_number(text: str, call: dict[str, Any]) -> bool:
    """Whether the text says a number the call sent, not a record's identifier: "Refund of $60 done" (`amount=60`)."""
    sent = [number(value) for name, value in (call.get("arguments") or {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool) and not _REFERENCE.search(name)]
    return any(numbers_agree(said, value) for said in map(number, re.findall(r"\d+(?:\.\d+)?", text))
               if said is not None for value in sent if value is not None)


def said_value(value: Any) -> str:
    """A value said or sent as a reader wants it: text bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


JUDGED = "judge"
"""The `claim` of a claimed-but-not-done item the claims judge found (its `text` is the sentence, `reason` its why)."""


def claim_what(item: dict[str, Any]) -> str:
    """What a claims item is about: the word claimed, the call never told, or the value said and the one sent; what
    the claims judge found, with its reason."""
    if item.get("argument"):
        said, sent = said_value(item.get("said")), said_value(item.get("sent"))
        return f"{item.get('functionName')}: {item['argument']} said {said}, sent {sent}"
    what = item.get("functionName") if "actual_index" in item else item.get("claim")
    return f"{what or ''}: {item['reason']}" if item.get("reason") else what or ""


def judged_claims(verdict: dict[str, Any], conversation: dict[str, Any], rules: dict[str, Any]) -> dict[str, Any]:
    """The row's `claims` from the claims judge's verdict (judges.parse_claims) in the rules' shape, the rules'
    own findings (`find_claims`) kept under "rules": a sentence of reply r is claimed but not done at that
    reply's message (`claim` JUDGED); call i is done but not told with its function and turn (the call's, or the
    user turns before its message, as the rules give it)."""
    messages = conversation.get("messages") or []
    replies = [index for index, message in enumerate(messages) if message.get("role") == "assistant"]
    calls = {made["actual_index"]: (index, made["call"]) for index, made_list in calls_by_message(conversation).items()
             for made in made_list}

    def turn(index: int, call: dict[str, Any]) -> int:
        return call["turn"] if call.get("turn") is not None else sum(m.get("role") == "user" for m in messages[:index])

    return {"claimed_not_done": [{"message_index": replies[item["reply"] - 1], "claim": JUDGED, "text": item["sentence"],
                                  "reason": item["reason"]} for item in verdict["claimed_not_done"]],
            "done_not_told": [{"actual_index": item["call"], "functionName": calls[item["call"]][1]["functionName"],
                               "turn": turn(*calls[item["call"]]), "reason": item["reason"]}
                              for item in verdict["done_not_told"]],
            "source": "judge", "rules": rules}


def calls_by_message(conversation: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Each assistant message's calls with their index in the conversation's `function_calls` list.
    An imported transcript may carry calls only at the top level: each goes to the first assistant
    message after its `turn`-th user message."""
    messages = conversation.get("messages") or []
    by_message: dict[int, list[dict[str, Any]]] = {}
    if any(message.get("function_calls") for message in messages):
        actual = 0
        for index, message in enumerate(messages):
            for call in message.get("function_calls") or []:
                by_message.setdefault(index, []).append({"actual_index": actual, "call": call})
                actual += 1
        return by_message
    for actual, call in enumerate(conversation.get("function_calls") or []):
        users = 0
        for index, message in enumerate(messages):
            users += message.get("role") == "user"
            if message.get("role") == "assistant" and users >= (call.get("turn") or 0):
                by_message.setdefault(index, []).append({"actual_index": actual, "call": call})
                break
    return by_message


def to_check_items(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's findings to check, as {kind, what, message_index, actual_index, text, precision}, in transcript order:
    what the replay marks and the report's "To check" section list."""
    found = []
    claims = (row.get("claims") or {}).get("to_check") or {}
    for item in claims.get("claimed_not_done") or []:
        found.append({"kind": "claimed but not done", "what": claim_what(item), "text": item.get("text", ""),
                      "message_index": item.get("message_index"), "actual_index": None,
                      "measured": trust.measured_text(trust.claim_kind("claimed_not_done", item),
                                                      item.get("precision"))})
    for item in claims.get("done_not_told") or []:
        found.append({"kind": "done but not told", "what": item.get("functionName", ""), "text": "",
                      "message_index": None, "actual_index": item.get("actual_index"),
                      "measured": trust.measured_text("done_not_told", item.get("precision"))})
    for fault in row.get("user_faults_to_check") or []:
        found.append({"kind": f"simulated user: {str(fault.get('check', '')).replace('_', ' ')}",
                      "what": fault.get("detail", ""), "text": "", "message_index": fault.get("message_index"),
                      "actual_index": None,
                      "measured": trust.measured_text(trust.fault_kind(fault), fault.get("precision"))})
    return found
