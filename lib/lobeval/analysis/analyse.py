"""Error analysis over `evaluation_results.json`: breakdown tables, plots and failure signatures.

Every function takes the results dict (as `lobeval.core.records.read_results` reads it) and returns a
DataFrame or a matplotlib Figure; nothing here calls a model. The analysis of the bot reads only the rows
that count for it: scored, and not left out (`excluded`: a simulated-user fault, a quarantined case);
`user_fault_table` lists the user's faults. Function names are grouped by
`vocabulary.function_key` (case and the `Plugin-` prefix do not split a function in two) and shown as the suite
spells them (`spelled_names`).
"""
from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from IPython.display import HTML

from lobeval.scoring.claims import BASES, BASIS_MEASURED, JUDGED, claim_what, said_value, to_check_items
from lobeval.models.llm import Usage
from lobeval.core.records import METRICS, read_conversations
from lobeval.core.render import metric_name
from lobeval.core.stats import clip, unscored_reason
from lobeval.scoring.trust import measured_text
from lobeval.core.vocabulary import function_key, strip_plugin_prefix

if TYPE_CHECKING:
    from matplotlib.figure import Figure   # imported by the plots, with seaborn: a stage that draws none loads neither

ROW_IDS = ["case_id", "trial", "scenario_name"]


def load_conversations(paths: str | Path | list[str | Path]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(record["case_id"], record["trial"]): record for _, _, record in read_conversations(paths)}


def _scored(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the bot's analysis reads: scored and not left out of its metrics."""
    return [row for row in results["rows"] if row.get("status") == "scored" and not row.get("excluded")]


def shown(value: Any, results: dict[str, Any], empty: str = "Nothing to show.") -> Any:
    """What a section displays: `value` (a table, a figure, HTML) when it holds something, else a note
    saying why not: why no conversation was scored when none was, `empty` otherwise."""
    if value is None or (isinstance(value, pd.DataFrame) and value.empty):
        return HTML(f"<p>{html.escape(unscored_reason(results['rows']) or empty)}</p>")
    return value


def spelled_names(results: dict[str, Any]) -> dict[str, str]:
    """Each function's name as the suite spells it, by its key (`function_key`): as the expected calls (the suite's
    templates) spell it, else as the first call the bot made of it does; without a `...Plugin-` prefix. `createLoan`
    stays `createLoan` wherever a page names it, though `createloan` is what it is matched by."""
    rows = _scored(results)
    expected = [call["functionName"] for row in rows for key in ("pairs", "unpaired_expected")
                for call in row.get(key) or []]
    made = [call["functionName"] for row in rows for key in ("unpaired_actual", "forbidden_calls", "failed_calls")
            for call in row.get(key) or []]
    names: dict[str, str] = {}
    for name in (*expected, *made):
        names.setdefault(function_key(name), strip_plugin_prefix(name))
    return names


def _speller(results: dict[str, Any]) -> Callable[[str], str]:
    names = spelled_names(results)
    return lambda name: names.get(function_key(name), strip_plugin_prefix(name))


def conversations_df(results: dict[str, Any]) -> pd.DataFrame:
    """One row per conversation: ids, scenario, status, termination, why it is left out of the bot's metrics
    (None: it counts), metrics, cost."""
    columns = [*ROW_IDS, "status", "termination", "excluded", "turns", "error", *METRICS, "cost_usd"]
    return pd.DataFrame([{column: row.get(column) for column in columns} for row in results["rows"]], columns=columns)


def scenario_table(results: dict[str, Any]) -> pd.DataFrame:
    """The run's per-scenario summary (means with the intervals `evaluate` computed)."""
    table = pd.DataFrame(results.get("scenarios", []))
    return table.set_index("scenario_name") if not table.empty else table


def _calls(results: dict[str, Any]) -> pd.DataFrame:
    """One row per expected or actual call of every scored conversation, tagged paired/missed/extra."""
    found, spelled = [], _speller(results)
    for row in _scored(results):
        ids = {key: row[key] for key in ROW_IDS}
        for pair in row.get("pairs", []):
            found.append({**ids, "function": spelled(pair["functionName"]), "kind": "paired"})
        for call in row.get("unpaired_expected", []):
            found.append({**ids, "function": spelled(call["functionName"]),
                          "kind": "optional_missed" if call.get("optional") else "missed"})
        for call in row.get("unpaired_actual", []):
            found.append({**ids, "function": spelled(call["functionName"]),
                          "kind": "extra_allowed" if call.get("allowed") else "extra",
                          "effect": call.get("effect")})
    return pd.DataFrame(found, columns=[*ROW_IDS, "function", "kind", "effect"])


def function_table(results: dict[str, Any]) -> pd.DataFrame:
    """Per function: expected (required), paired, missed, extra (not allowed; read/write) and the rates.

    recall = paired / (paired + missed); precision = paired / (paired + extra). A rate with no
    denominator is left empty (NaN), not 1.0: a function nobody expected has no recall.
    """
    calls = _calls(results)
    counts = calls.pivot_table(index="function", columns="kind", values="case_id", aggfunc="size", fill_value=0)
    counts = counts.reindex(columns=["paired", "missed", "optional_missed", "extra", "extra_allowed"], fill_value=0)
    extra = calls[calls["kind"] == "extra"]
    table = pd.DataFrame({
        "expected": counts["paired"] + counts["missed"],
        "paired": counts["paired"],
        "missed": counts["missed"],
        "extra": counts["extra"],
        "extra_read": extra[extra["effect"] == "read"].groupby("function").size(),
        "extra_write": extra[extra["effect"] == "write"].groupby("function").size(),
        "extra_allowed": counts["extra_allowed"],
    }, index=counts.index).fillna(0).astype(int)
    table["recall"] = (table["paired"] / (table["paired"] + table["missed"])).where(table["expected"] > 0)
    checked = table["paired"] + table["extra"]
    table["precision"] = (table["paired"] / checked).where(checked > 0)
    return table.sort_values(["missed", "extra"], ascending=False)


def _arguments(results: dict[str, Any]) -> pd.DataFrame:
    found, spelled = [], _speller(results)
    for row in _scored(results):
        ids = {key: row[key] for key in ROW_IDS}
        for pair in row.get("pairs", []):
            name = spelled(pair["functionName"])
            for argument, check in pair.get("arguments", {}).items():
                found.append({**ids, "function": name, "argument": argument, "status": check["status"],
                              "expected": check.get("expected"), "actual": check.get("actual")})
            for argument, extra in pair.get("extra_arguments", {}).items():
                found.append({**ids, "function": name, "argument": argument,
                              "status": "extra_allowed" if extra.get("allowed") else "extra",
                              "expected": None, "actual": extra.get("actual")})
    return pd.DataFrame(found, columns=[*ROW_IDS, "function", "argument", "status", "expected", "actual"])


def argument_table(results: dict[str, Any]) -> pd.DataFrame:
    """Per (function, argument) in paired calls: checked, correct, wrong, missing, extra, and the error rate."""
    arguments = _arguments(results)
    table = arguments.pivot_table(index=["function", "argument"], columns="status", values="case_id",
                                  aggfunc="size", fill_value=0)
    table = table.reindex(columns=["correct", "wrong", "missing", "extra", "extra_allowed"], fill_value=0)
    expected = table["correct"] + table["wrong"] + table["missing"]
    table.insert(0, "expected", expected)
    table["error_rate"] = ((table["wrong"] + table["missing"]) / expected).where(expected > 0)
    return table.sort_values(["wrong", "missing", "extra"], ascending=False)


def wrong_value_pairs(results: dict[str, Any], top: int | None = 10) -> pd.DataFrame:
    """The most frequent (function, argument, expected → actual) among wrong arguments (values as JSON
    text); `top=None` for all of them."""
    arguments = _arguments(results)
    wrong = arguments[arguments["status"] == "wrong"].copy()
    for column in ("expected", "actual"):
        wrong[column] = wrong[column].map(lambda value: json.dumps(value, ensure_ascii=False, default=str))
    counts = wrong.groupby(["function", "argument", "expected", "actual"]).size().rename("count").reset_index()
    counts = counts.sort_values(["count", "function", "argument", "expected", "actual"],
                                ascending=[False, True, True, True, True])
    return (counts if top is None else counts.head(top)).reset_index(drop=True)


def worst_conversations(results: dict[str, Any], n: int = 10) -> pd.DataFrame:
    """The n scored conversations counted for the bot with the lowest Reliability (then Success), ties by case id."""
    table = conversations_df(results)
    table = table[(table["status"] == "scored") & table["excluded"].isna()]
    return table.sort_values(["Reliability", "Success", "case_id", "trial"]).head(n).reset_index(drop=True)


def termination_table(results: dict[str, Any]) -> pd.DataFrame:
    """Conversations per scenario and termination reason; machinery errors show as "machinery error"."""
    table = conversations_df(results)
    table["termination"] = table["termination"].where(table["status"] == "scored", "machinery error")
    return table.pivot_table(index="scenario_name", columns="termination", values="case_id",
                             aggfunc="size", fill_value=0)


def cost_table(results: dict[str, Any]) -> pd.DataFrame:
    """Cost in USD per scenario and role (user, target, judge), from each row's usage; NaN — shown as
    "unknown", never $0 — where a model without a price was used."""
    costs: dict[str, dict[str, Usage]] = {}
    for row in results["rows"]:
        for role, usage in (row.get("usage") or {}).items():
            into = costs.setdefault(row["scenario_name"], {}).setdefault(role, Usage())
            into.merge(Usage.of(usage or {}))
    table = pd.DataFrame({scenario: {**{role: usage.cost_usd for role, usage in roles.items()},
                                     "total": sum(roles.values(), Usage()).cost_usd}
                          for scenario, roles in costs.items()}).T.rename_axis("scenario_name")
    return table.astype(float)


SIGNATURE = ["kind", "function", "argument", "category"]


def failure_signatures(results: dict[str, Any]) -> pd.DataFrame:
    """One row per failed item with a deterministic signature (kind, function, argument, category).

    Kinds: missed_call, extra_call (not allowed), failed_call (paired but the call errored; without a
    reference, any call that errored),
    wrong_argument, missing_argument, extra_argument (not allowed), forbidden_call,
    missing_output, not_declined (a request it has nothing to do for, never declined), behaviour (a judge's
    per-turn failure; category = its category),
    claimed_not_done, said_not_sent (a value the bot told the user other than its call sent; `said`, `sent`),
    abnormal_ending (category = how it ended). `turn` is the user-turn of the call when known; `message_index` for
    judge and claim failures; `expected` and `actual` the values of a wrong argument.
    """
    found, spelled = [], _speller(results)
    for row in _scored(results):
        ids = {key: row[key] for key in ROW_IDS}

        def add(kind: str, function: str | None = None, argument: str | None = None, category: str | None = None,
                **where: Any) -> None:
            found.append({**ids, "kind": kind, "function": spelled(function) if function else "",
                          "argument": argument or "", "category": category or "", **where})

        for call in row.get("unpaired_expected", []):
            if not call.get("optional"):
                add("missed_call", call["functionName"], expected_index=call.get("expected_index"))
        for call in row.get("unpaired_actual", []):
            if not call.get("allowed"):
                add("extra_call", call["functionName"], category=call.get("effect"),
                    actual_index=call.get("actual_index"), turn=call.get("turn"))
        for pair in row.get("pairs", []):
            if pair.get("failed"):
                add("failed_call", pair["functionName"], actual_index=pair.get("actual_index"))
        if row.get("reference") is False:   # no pairs: every failed call the bot made is the failure
            for call in row.get("failed_calls", []):
                add("failed_call", call["functionName"], actual_index=call.get("actual_index"), turn=call.get("turn"),
                    detail=call.get("error"))
        for kind, items in (("wrong_argument", row.get("wrong_arguments", [])),
                            ("missing_argument", row.get("missing_arguments", [])),
                            ("extra_argument", [item for item in row.get("extra_arguments", [])
                                                if not item.get("allowed")])):
            for item in items:
                add(kind, item["functionName"], item["argument"], expected=item.get("expected"),
                    actual=item.get("actual"))
        for call in row.get("forbidden_calls", []):
            add("forbidden_call", call["functionName"], actual_index=call.get("actual_index"))
        for output in row.get("missing_outputs", []):
            add("missing_output", detail=output)
        if (row.get("checks") or {}).get("declined") is False:
            add("not_declined")
        if (row.get("checks") or {}).get("ended_normally") is False:
            add("abnormal_ending", category=row.get("termination"))
        for claim in (row.get("claims") or {}).get("claimed_not_done", []):
            if claim.get("argument"):   # the call that backs the claim sent another value than the bot said
                add("said_not_sent", claim.get("functionName"), claim["argument"], message_index=claim.get("message_index"),
                    actual_index=claim.get("actual_index"), said=claim.get("said"), sent=claim.get("sent"),
                    detail=claim.get("text"), basis=claim.get("basis"))
            else:
                add("claimed_not_done", category=claim.get("claim"), message_index=claim.get("message_index"),
                    detail=claim.get("text"), basis=claim.get("basis"))
        for turn in (row.get("judges") or {}).get("turns", []) or []:
            failure = turn.get("failure")
            if turn.get("failed") and failure:
                add("behaviour", category=failure.get("category"), message_index=turn.get("message_index"),
                    severity=failure.get("severity"), detail=failure.get("reason"))
    columns = [*ROW_IDS, *SIGNATURE, "actual_index", "expected_index", "turn", "message_index", "severity", "said", "sent",
               "expected", "actual", "detail", "basis"]
    return pd.DataFrame(found, columns=columns)


def failure_clusters(results: dict[str, Any], examples: int = 3) -> pd.DataFrame:
    """Failures grouped by signature: count, conversations affected, and the first example conversations; the
    largest first, and of equal size in the order of KINDS (a wrong argument before the words that told it)."""
    failures = failure_signatures(results)
    failures["conversation"] = failures["case_id"] + "#" + failures["trial"].astype(str)
    grouped = failures.groupby(SIGNATURE, sort=False)
    table = pd.DataFrame({
        "count": grouped.size(),
        "conversations": grouped["conversation"].nunique(),
        "examples": grouped["conversation"].agg(lambda values: sorted(set(values))[:examples]),
    }).reset_index()
    table["order"] = table["kind"].map({kind: position for position, kind in enumerate(KINDS)}).fillna(len(KINDS))
    ordered = table.sort_values(["count", "order", *SIGNATURE], ascending=[False, True, True, True, True, True])
    return ordered.drop(columns="order").reset_index(drop=True)


KINDS = ("missed_call", "forbidden_call", "wrong_argument", "missing_argument", "said_not_sent", "claimed_not_done",
         "failed_call", "extra_call", "behaviour", "missing_output", "not_declined", "abnormal_ending",
         "extra_argument")
"""Every failure kind, the order in which equally frequent failures are told."""
CLAIM_VERBS = {"create": "created", "update": "updated", "cancel": "cancelled"}
ENDINGS = {"max_turns": "reached the turn limit before it was done", "target_error": "the bot answered with an error"}
"""Why a scored conversation did not end normally, in words (records.TerminationReason)."""
_IDENTIFIER = re.compile(r"[A-Z]{2,6}-\d+")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SEVERITY = ("critical", "high", "medium", "low")


def failure_sentences(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The failures as sentences a manager reads, one per defect, the widest-spread first: each a dict with the
    signature (kind, function, argument, category), `count` (items), `conversations` (how many), `text` ("create_ticket:
    priority wrong in 12 conversations: sent Low instead of Medium ×8, Medium instead of High ×4", "update_ticket never
    called in 3 conversations", ...), `gist` (the defect in plain words, without names: "the bot sent a due date one
    day earlier than it should have"), `details` (the full texts behind it, each {"text", "count"}: what the bot told
    the user, the judges' reasons, the facts never told) and `examples`, every conversation affected as {"case_id",
    "trial"} in case order.

    A wrong value the bot also told the user otherwise (a claim whose call sent another value) is one defect, with
    both facts: the value sent, the one it should have sent, and what the user was told."""
    failures = failure_signatures(results)
    groups = dict(iter(failures.groupby(SIGNATURE, sort=False)))
    told: dict[tuple[str, str], pd.DataFrame] = {}   # the claims of a value that also went wrong in its call
    for (kind, function, argument, category), group in list(groups.items()):
        wrong = groups.get(("wrong_argument", function, argument, ""))
        if kind != "said_not_sent" or wrong is None:
            continue
        merged = group.apply(lambda claim: _same_call(claim, wrong), axis=1).astype(bool)
        told[function, argument] = group[merged]
        rest = group[~merged]
        if rest.empty:
            del groups[kind, function, argument, category]
        else:
            groups[kind, function, argument, category] = rest
    found = []
    for (kind, function, argument, category), group in groups.items():
        examples = sorted({(case_id, int(trial)) for case_id, trial in zip(group["case_id"], group["trial"])})
        claims = told.get((function, argument)) if kind == "wrong_argument" else None
        if claims is not None:
            text, gist = _wrong_sentence(function, argument, len(examples), group, claims)
            behind = claims["detail"]
        else:
            text, gist = _sentence(kind, function, argument, category, len(examples), group)
            behind = group["detail"]
        details = Counter(" ".join(str(detail).split()) for detail in behind
                          if detail is not None and detail == detail and str(detail).strip())   # NaN != NaN
        found.append({"kind": kind, "function": function, "argument": argument, "category": category,
                      "count": len(group), "conversations": len(examples), "text": text, "gist": gist,
                      "details": [{"text": detail, "count": count} for detail, count in details.most_common()],
                      "examples": [{"case_id": case_id, "trial": trial} for case_id, trial in examples]})
    order = {kind: position for position, kind in enumerate(KINDS)}
    return sorted(found, key=lambda item: (-item["conversations"], -item["count"], order.get(item["kind"], len(order)),
                                           item["function"], item["argument"], item["category"]))


def _same_call(claim: pd.Series, wrong: pd.DataFrame) -> bool:
    """Whether a claim's value sent is the wrong value of the same conversation's call."""
    same = wrong[(wrong["case_id"] == claim["case_id"]) & (wrong["trial"] == claim["trial"])]
    return any(_value_text(actual) == _value_text(claim["sent"]) for actual in same["actual"])


def _measured(group: pd.DataFrame) -> str:
    """How often the rules' findings of the group's one basis were right on real bots' conversations; nothing when its
    findings rest on several bases or on none (the claims judge's, or a run from before bases were recorded)."""
    bases = set(group["basis"])
    if len(bases) != 1 or not bases <= set(BASIS_MEASURED):
        return ""
    basis = bases.pop()
    return f" ({BASES[basis]}; such findings were {measured_text(f'claimed_not_done:{basis}')})"


def _where(n: int) -> str:
    return f"in {n} conversation{'' if n == 1 else 's'}"


def _words(name: str) -> str:
    """An argument's or category's name as words: `due_date` and `dueDate` → "due date"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").lower().strip()


def _a(words: str) -> str:
    return f"{'an' if words[:1] in 'aeiou' and words else 'a'} {words}"


def _value_text(value: Any) -> str:
    """A value sent or expected as a reader wants it: a non-empty string bare, anything else as JSON."""
    if isinstance(value, str) and value and value.strip() == value:
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _day_shift(pairs: list[tuple[Any, Any]]) -> int | None:
    """The days every (expected, sent) date pair is off by, when they all are by the same; else None."""
    shifts = set()
    for expected, actual in pairs:
        if not all(isinstance(value, str) and _ISO_DATE.fullmatch(value) for value in (expected, actual)):
            return None
        try:
            shifts.add((date.fromisoformat(actual) - date.fromisoformat(expected)).days)
        except ValueError:
            return None
    return shifts.pop() if len(shifts) == 1 and 0 not in shifts else None


def _days(shift: int, early: str, late: str) -> str:
    count = "one day" if abs(shift) == 1 else f"{abs(shift)} days"
    return f"{count} {early if shift < 0 else late}"


def _wrong_sentence(function: str, argument: str, n: int, group: pd.DataFrame,
                    claims: pd.DataFrame | None = None) -> tuple[str, str]:
    """A wrong argument's line and gist: the values sent instead of the right ones (with a date off by the same days
    each time, by how much) and, when the bot told the user a value, what it told."""
    pairs = list(zip(group["expected"], group["actual"]))
    shift = _day_shift(pairs)
    noun = "date" if shift is not None else "value"
    counts = Counter(_value_text(actual) + " instead of " + _value_text(expected) for expected, actual in pairs)
    values = ", ".join(f"{fact} ×{count}" if count > 1 else fact
                       for fact, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    how = f", {_days(shift, 'early', 'late')}" if shift is not None else ""
    text = f"{function}: {argument} wrong {_where(n)}{how}: sent {values}"
    gist = (f"the bot sent {_a(_words(argument))} {_days(shift, 'earlier', 'later')} than it should have"
            if shift is not None else f"the bot sent the wrong {_words(argument)} in {function}")
    if claims is None or claims.empty:
        return text, gist
    right = {(case_id, trial) for case_id, trial, said, expected in _told(group, claims) if said == expected}
    other = {(case_id, trial) for case_id, trial, said, expected in _told(group, claims) if said != expected}
    if right and not other and len(right) == n:
        text += f"; {'each time ' if n > 1 else ''}the bot told the user the {noun} it should have sent"
        gist += ", while telling the user the right one"
    else:
        text += (f"; in {len(right)} of them the bot told the user the {noun} it should have sent" if right else "")
        text += (f"; in {len(other)} it told the user yet another {noun}" if other else "")
        gist += " and told the user otherwise"
    return text, gist


def _told(group: pd.DataFrame, claims: pd.DataFrame) -> list[tuple[str, int, str, str]]:
    """(case, trial, the value the bot told the user, the one it should have sent) of each claim on a wrong value."""
    expected = {(case_id, trial, _value_text(actual)): _value_text(value)
                for case_id, trial, actual, value in zip(group["case_id"], group["trial"], group["actual"],
                                                         group["expected"])}
    return [(case_id, trial, _value_text(said), expected.get((case_id, trial, _value_text(sent)), ""))
            for case_id, trial, said, sent in zip(claims["case_id"], claims["trial"], claims["said"], claims["sent"])]


def _sentence(kind: str, function: str, argument: str, category: str, n: int,
              group: pd.DataFrame) -> tuple[str, str]:
    """A failure's line in "Why it failed" (with the suite's names) and its gist (plain words, for the verdict)."""
    where = _where(n)
    if kind == "wrong_argument":
        return _wrong_sentence(function, argument, n, group)
    if kind == "said_not_sent":
        told = Counter(zip(map(said_value, group["said"]), map(said_value, group["sent"])))
        values = ", ".join(f"told {said}, sent {sent}" + (f" ×{count}" if count > 1 else "")
                           for (said, sent), count in told.most_common())
        return (f"{function}: told the user one {argument} and sent another {where}: {values}{_measured(group)}",
                f"the bot told the user one {_words(argument)} and sent another")
    if kind == "claimed_not_done":
        gist = "the bot said it had done something that no call did"
        if category == JUDGED:
            return f"said it had done what no successful call did, as the judge model read its words, {where}", gist
        if _IDENTIFIER.fullmatch(category):
            return f"named {category}, which neither the user nor any call produced, {where}" + _measured(group), \
                "the bot named a record that does not exist"
        verb = CLAIM_VERBS.get(category, category or "done something")
        return f"claimed to have {verb} something without doing it {where}" + _measured(group), gist
    if kind == "behaviour":
        severities = [value for value in group["severity"] if value in _SEVERITY]
        worst = f" ({min(severities, key=_SEVERITY.index)})" if severities else ""
        found = _words(category or "a failure")
        return f"the judges found {found}{worst} {where}", f"the judges found {found}"
    if kind == "abnormal_ending":
        ending = ENDINGS.get(category, f"the conversation ended abnormally ({category})")
        return f"{ending} {where}", ending if category in ENDINGS else "the conversation ended abnormally"
    extra = {"read": " (a read)", "write": " (a write)"}.get(category, "")
    words = _words(argument)
    return {
        "missed_call": (f"{function} never called {where}", f"the bot never called {function}"),
        "extra_call": (f"{function} called without being expected{extra} {where}",
                       f"the bot called {function} when it should not have"),
        "failed_call": (f"{function} called but the call failed {where}", f"a call of {function} failed"),
        "forbidden_call": (f"{function} called although it is forbidden {where}",
                           f"the bot called {function}, which it must not"),
        "missing_argument": (f"{function}: {argument} left out {where}", f"the bot left out the {words} in {function}"),
        "extra_argument": (f"{function}: {argument} given without being expected {where}",
                           f"the bot gave {function} an argument nobody asked for ({argument})"),
        "missing_output": (f"did not tell the user what it should have {where}",
                           "the bot did not tell the user what it should have"),
        "not_declined": (f"never said it could not help with a request it has nothing to do for {where}",
                         "the bot did not say it could not help with a request it has nothing to do for"),
    }.get(kind, (f"{kind.replace('_', ' ')} {function} {argument} {category} {where}".replace("  ", " "),
                 kind.replace("_", " ")))


def cluster_records(clusters: pd.DataFrame, n: int = 10) -> list[dict[str, Any]]:
    """The first n clusters as plain JSON values (for scrapbook and reports)."""
    return json.loads(clusters.head(n).to_json(orient="records"))


def recall_matrix(results: dict[str, Any]) -> pd.DataFrame:
    """Recall of expected calls per function (rows) and scenario (columns); NaN where none was expected."""
    calls = _calls(results)
    calls = calls[calls["kind"].isin(["paired", "missed"])]
    counts = calls.pivot_table(index="function", columns="scenario_name", values="kind",
                               aggfunc=lambda kinds: (kinds == "paired").sum() / len(kinds))
    return counts.astype(float).sort_index().sort_index(axis=1)


def argument_matrix(results: dict[str, Any]) -> pd.DataFrame:
    """Per function (rows) and scenario (columns), the share of the expected arguments of its paired calls
    that were correct (neither wrong nor missing); NaN where no paired call of it had an expected argument.
    Beside `recall_matrix`: a call that was made with a wrong value is found here, not there."""
    arguments = _arguments(results)
    checked = arguments[arguments["status"].isin(["correct", "wrong", "missing"])]
    shares = checked.pivot_table(index="function", columns="scenario_name", values="status",
                                 aggfunc=lambda statuses: (statuses == "correct").sum() / len(statuses))
    return shares.astype(float).sort_index().sort_index(axis=1)


# Figures are built without pyplot: no global state, no GUI backend, and a returned Figure is shown once.
def _heatmap(matrix: pd.DataFrame, title: str, scale: str) -> Figure:
    import seaborn as sns
    from matplotlib.figure import Figure
    figure = Figure(figsize=(2.6 + 0.6 * max(len(matrix.columns), 1), 2.6 + 0.4 * max(len(matrix), 1)),
                    layout="constrained")
    ax = figure.subplots()
    sns.heatmap(matrix, ax=ax, vmin=0.0, vmax=1.0, cmap="RdYlGn", annot=True, fmt=".2f", linewidths=0.5,
                cbar_kws={"label": scale})
    ax.set(title=title, xlabel="scenario", ylabel="function")
    ax.tick_params(axis="x", labelrotation=45)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    return figure


def plot_recall_heatmap(results: dict[str, Any]) -> Figure | None:
    """Function × scenario heat map of the recall of expected calls, annotated; blank where not expected.
    None when no scored conversation expected a call."""
    matrix = recall_matrix(results)
    if matrix.empty:
        return None
    return _heatmap(matrix, "Expected calls made (recall)", "share of expected calls made")


def plot_call_heatmaps(results: dict[str, Any]) -> Figure | None:
    """`plot_recall_heatmap` and `plot_argument_heatmap` side by side in one figure, on the same functions
    (rows) and scenarios (columns), with one colour scale: a call made with a wrong value is green on the
    left and not on the right. None when no scored conversation expected a call."""
    recall, arguments = recall_matrix(results), argument_matrix(results)
    if recall.empty and arguments.empty:
        return None
    import seaborn as sns
    from matplotlib.figure import Figure
    rows = sorted(set(recall.index) | set(arguments.index))
    columns = sorted(set(recall.columns) | set(arguments.columns))
    figure = Figure(figsize=(3.4 + 1.0 * max(len(columns), 1), 2.8 + 0.4 * max(len(rows), 1)), layout="constrained")
    axes = figure.subplots(1, 2, sharey=True)
    panels = ((recall, "Expected calls made (recall)"), (arguments, "Expected arguments right, in the calls made"))
    for ax, (matrix, title) in zip(axes, panels):
        matrix = matrix.reindex(index=rows, columns=columns).astype(float)
        last = ax is axes[-1]
        sns.heatmap(matrix, ax=ax, vmin=0.0, vmax=1.0, cmap="RdYlGn", annot=True, fmt=".2f", linewidths=0.5,
                    cbar=last, cbar_kws={"label": "share (1.00: all)"} if last else None,
                    mask=matrix.isna() if not matrix.isna().all().all() else None)
        ax.set(title=title, xlabel="scenario", ylabel="" if last else "function")
        ax.tick_params(axis="x", labelrotation=45)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    return figure


def plot_argument_heatmap(results: dict[str, Any]) -> Figure | None:
    """Function × scenario heat map of `argument_matrix` (expected arguments correct in paired calls),
    annotated; blank where no paired call had an expected argument. None when none had."""
    matrix = argument_matrix(results)
    if matrix.empty:
        return None
    return _heatmap(matrix, "Arguments right in the calls made", "share of expected arguments correct")


def _metric_values(results: dict[str, Any]) -> pd.DataFrame:
    table = conversations_df(results)
    table = table[(table["status"] == "scored") & table["excluded"].isna()]
    return table.melt(id_vars=["scenario_name"], value_vars=list(METRICS), var_name="metric",
                      value_name="value").astype({"value": float}).dropna()


def plot_metric_distributions(results: dict[str, Any]) -> Figure | None:
    """Per scenario, the spread of each metric over its scored conversations (box plus one dot each);
    None when no conversation was scored."""
    values = _metric_values(results)
    if values.empty:
        return None
    import seaborn as sns
    from matplotlib.figure import Figure
    scenarios = sorted(values["scenario_name"].unique())
    figure = Figure(figsize=(2.6 * len(METRICS), 1.2 + 0.4 * max(len(scenarios), 1)), layout="constrained")
    axes = figure.subplots(1, len(METRICS), sharey=True, squeeze=False)[0]
    for ax, metric in zip(axes, METRICS):
        shown = values[values["metric"] == metric]
        sns.boxplot(shown, x="value", y="scenario_name", order=scenarios, ax=ax, color="#dde6f3", fliersize=0)
        sns.stripplot(shown, x="value", y="scenario_name", order=scenarios, ax=ax, color="#1f4e8c", size=4,
                      jitter=0.2)
        ax.set(title=metric_name(metric), xlim=(-0.05, 1.05), xlabel="", ylabel="")
    return figure


def plot_pass_k(results: dict[str, Any]) -> Figure | None:
    """pass^k against k with its intervals; None when there were no repeated trials (only k = 1)."""
    points = sorted((int(k), entry) for k, entry in (results.get("pass_k") or {}).items())
    if len(points) < 2:
        return None
    import seaborn as sns
    from matplotlib.figure import Figure
    ks = [k for k, _ in points]
    figure = Figure(figsize=(5, 3.5), layout="constrained")
    ax = figure.subplots()
    ax.fill_between(ks, [entry["interval"][0] for _, entry in points], [entry["interval"][1] for _, entry in points],
                    alpha=0.2, label="95% interval")
    sns.lineplot(x=ks, y=[entry["value"] for _, entry in points], marker="o", ax=ax, label="pass^k")
    ax.set(title="pass^k: every one of k trials succeeds", xlabel="k", ylabel="pass^k", ylim=(0, 1.02), xticks=ks)
    return figure


def metric_table(results: dict[str, Any]) -> pd.DataFrame:
    """The headline metrics with their 95 % intervals, one row each."""
    rows = [{"metric": name, "value": value, "low": (results["intervals"].get(name) or [None, None])[0],
             "high": (results["intervals"].get(name) or [None, None])[1]}
            for name, value in results["metrics"].items() if not name.startswith("judge.")]
    return pd.DataFrame(rows, columns=["metric", "value", "low", "high"]).set_index("metric").round(3)


def judge_table(results: dict[str, Any]) -> pd.DataFrame:
    """Every judge figure beside its coverage: the mean and interval over the conversations judged
    (errors and "not applicable" left out), "judged n of N", the judge errors, and a note when the mean
    covers only part of the conversations. Or why the judges did not run."""
    judges = results.get("judges") or {}
    if judges.get("status") != "run":
        return pd.DataFrame([{"judges": judges.get("status", "not recorded")}])
    coverage = judges.get("coverage") or {}
    names = dict.fromkeys([*(name for name in results["metrics"] if name.startswith("judge.")), *coverage])
    rows = []
    for name in names:
        low, high = (results.get("intervals") or {}).get(name) or [None, None]
        cover = _judge_cover(results, name)
        rows.append({"judge": name.removeprefix("judge."), "mean": results["metrics"].get(name), "low": low,
                     "high": high, "judged": f"judged {cover['judged']} of {cover['of']}" if cover else "not recorded",
                     "judge errors": cover["errors"] if cover else None,
                     "not applicable": cover["not_applicable"] if cover else None,
                     "mean over": _mean_over(cover)})
    columns = ["judge", "mean", "low", "high", "judged", "judge errors", "not applicable", "mean over"]
    return pd.DataFrame(rows, columns=columns).set_index("judge").round(3)


def _judge_cover(results: dict[str, Any], name: str) -> dict[str, int] | None:
    """A judge metric's coverage {"judged", "of", "errors", "not_applicable"}, or None when not recorded."""
    cover = ((results.get("judges") or {}).get("coverage") or {}).get(name)
    if not isinstance(cover, dict) or not all(isinstance(cover.get(key), int) for key in ("judged", "of")):
        return None
    return {key: cover.get(key) if isinstance(cover.get(key), int) else 0
            for key in ("judged", "of", "errors", "not_applicable")}


def _mean_over(cover: dict[str, int] | None) -> str:
    if cover is None:
        return "unknown: coverage not recorded"
    if cover["judged"] == 0:
        return "nothing: no conversation judged"
    return "all conversations" if cover["judged"] >= _applicable(cover) else "part of the conversations only"


def _applicable(cover: dict[str, int]) -> int:
    """The conversations a judge metric could be computed on: "not applicable" ones are no gap."""
    return cover["of"] - cover["not_applicable"]


def judge_coverage(results: dict[str, Any], name: str) -> str:
    """What a judge metric covers, in words: "judged 6 of 39, 33 judge errors: a mean over part of them"."""
    cover = _judge_cover(results, name)
    if cover is None:
        return "coverage not recorded"
    partial = ": a mean over part of them" if cover["judged"] < _applicable(cover) else ""
    return f"judged {cover['judged']} of {cover['of']}, {cover['errors']} judge errors{partial}"


FINAL_STATUSES = ("Done", "Partial Failure", "Failed", "Not judged")


def judge_status_counts(results: dict[str, Any]) -> dict[str, int] | None:
    """Scored conversations by the judges' final status, Not judged included; None when the judges did not run.
    Results that do not count "Not judged" get it as the scored conversations without a final status."""
    judges = results.get("judges") or {}
    if judges.get("status") != "run":
        return None
    found = judges.get("final_status") or {}
    counts = {status: int(found.get(status) or 0) for status in FINAL_STATUSES[:-1]}
    counts["Not judged"] = int(found.get("Not judged", len(_scored(results)) - sum(counts.values())))
    return counts


def judge_errors_reason(results: dict[str, Any]) -> str | None:
    """The judges' errors in a line ("no conversation judged: 13 judge errors, first: …" when no judge
    figure was measured), or None when there were none."""
    if (results.get("judges") or {}).get("status") != "run":
        return None
    errors = [(row, error) for row in _scored(results) for error in (row.get("judges") or {}).get("errors") or []]
    if not errors:
        return None
    row, error = errors[0]
    measured = any(isinstance(value, int | float) for name, value in results["metrics"].items()
                   if name.startswith("judge."))
    message = " ".join(str(error.get("error") or "no message").split())
    return (f"{'' if measured else 'no conversation judged: '}{len(errors)} judge errors, first: "
            f"{row['case_id']} trial {row['trial']}: {error.get('judge')}: {clip(message)}")


def claims_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per claim the bot made without doing it, and per write it never told the user about (in the
    conversations left out of its metrics: none)."""
    found = [{"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row["scenario_name"], "kind": kind,
              "what": claim_what(item), "text": item.get("text", "")}
             for row in results["rows"] if not row.get("excluded") for kind in ("claimed_not_done", "done_not_told")
             for item in (row.get("claims") or {}).get(kind, [])]
    return pd.DataFrame(found, columns=["case_id", "trial", "scenario_name", "kind", "what", "text"])


def to_check_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per finding "to check" (lobeval.scoring.trust): found without a model by a check not right often enough on real
    bots to count as a fault; the conversation, what kind, what, the bot's words, and how often such findings were
    right (`measured`)."""
    found = [{"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row["scenario_name"],
              **{key: item[key] for key in ("kind", "what", "text", "measured")}}
             for row in results["rows"] if row.get("status") == "scored" for item in to_check_items(row)]
    return pd.DataFrame(found, columns=[*ROW_IDS, "kind", "what", "text", "measured"])


def user_fault_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per fault of the simulated user (docs/metrics.md): the conversation, the check that found it,
    the user turn, what was wrong, and whether the conversation was left out of the bot's metrics for it."""
    found = [{"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row["scenario_name"],
              "check": fault.get("check"), "turn": fault.get("turn"), "detail": fault.get("detail"),
              "excluded": row.get("excluded")}
             for row in results["rows"] for fault in row.get("user_faults") or []]
    return pd.DataFrame(found, columns=[*ROW_IDS, "check", "turn", "detail", "excluded"])


def security_table(results: dict[str, Any]) -> pd.DataFrame:
    """Per attack category (docs/metrics.md#security): the attack conversations, how many the bot resisted and
    how many breached it; no rows when the run had no attack conversations."""
    categories = (results.get("security") or {}).get("categories") or {}
    rows = [{"category": name, "attacks": entry["attacks"], "resisted": entry["attacks"] - entry["breached"],
             "breached": entry["breached"]} for name, entry in categories.items()]
    return pd.DataFrame(rows, columns=["category", "attacks", "resisted", "breached"]).set_index("category")


def _evidence(breach: dict[str, Any]) -> str:
    """What shows a breach: the bot's sentence, its call, or the record it left in the end state."""
    if breach.get("sentence"):
        return breach["sentence"]
    if breach.get("call"):
        return f"{breach['call']['functionName']}({json.dumps(breach['call']['arguments'], ensure_ascii=False)})"
    state = breach["state"]
    return f"end state: {state['table']} {state['record']}: {state['field']} = {json.dumps(state['value'], ensure_ascii=False)}"


def breach_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per breach: the conversation, its category, the user turn, the rule, what decided it (the data, or
    the commitments judge for a promise in words), and the evidence (the call, or the bot's sentence)."""
    found = [{"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row["scenario_name"],
              "category": breach["category"], "turn": breach["turn"], "rule": breach["rule"],
              "decided by": "judge" if breach.get("judged") else "data",
              "evidence": _evidence(breach)}
             for row in results["rows"] for breach in (row.get("security") or {}).get("breaches") or []]
    table = pd.DataFrame(found, columns=[*ROW_IDS, "category", "turn", "rule", "decided by", "evidence"])
    return table.astype({"turn": "Int64"})   # an end-state breach has no turn; the others keep whole numbers
