"""What each kind of finding lobeval makes without a model is worth on real bots' conversations, and so whether it is
reported as a fault or shown as "to check" (docs/metrics.md, "What the offline findings are worth on real bots").

A kind whose findings were right at least PRECISION_NEEDED of the time, on at least FEWEST of them, on hand-labelled
conversations of real bots is a fault: it counts in the metrics (ClaimsBacked, the simulated-user exclusion and the
user-fault rate of the gate), "Why it failed" and the replay's marks. Any other kind is "to check": kept in the row
beside the faults with its measured precision, shown as a lead for a person to read, and counted nowhere. With the
claims judge (a model), the judge's findings are the row's claims and this table does not apply to them; the
user-review judge's faults are always faults.
"""
from __future__ import annotations

from typing import Any

PRECISION_NEEDED = 0.9
FEWEST = 5
"""Fewer findings than this say nothing of a kind's precision: it is "to check" until more are measured."""

MEASURED_ON = "dev and held-out"
"""Which labelled sets PRECISION comes from: the dev part (tests/fixtures/real/dev.jsonl, the one the rules were fixed
on) and the held-out part (held_out.jsonl, measured once after the rules were final), added together."""
SET = ("173 conversations of nine bots on eight models (τ²-bench airline and medical triage), each labelled in full by "
       "two people (tests/fixtures/real/dev.jsonl and held_out.jsonl)")
COMMAND = "lobeval bench claims tests/fixtures/real/held_out.jsonl"
"""The command that prints the held-out figures (its "offline findings" lines); dev.jsonl gives the rest."""

PRECISION: dict[str, tuple[int, int]] = {
    "claimed_not_done:failed_call": (0, 6),
    "claimed_not_done:value": (0, 4),
    "claimed_not_done:identifier": (0, 0),
    "claimed_not_done:other_calls": (0, 12),
    "claimed_not_done:no_call": (0, 7),
    "done_not_told": (5, 10),
    "user_fault:invented_value": (14, 15),
    "user_fault:ended_early": (0, 0),
    "user_fault:contradicted_instructions": (0, 0),
}
"""Per kind of offline finding, (right, found) on MEASURED_ON, disputed labels counted neither way: claimed but not
done by its basis (lobeval.scoring.claims.BASES), done but not told, and each simulated-user check."""


def claim_kind(direction: str, item: dict[str, Any]) -> str:
    """The kind of a finding of the claims rules: "done_not_told", or "claimed_not_done:<its basis>"."""
    return direction if direction == "done_not_told" else f"{direction}:{item.get('basis') or 'unknown'}"


def fault_kind(fault: dict[str, Any]) -> str:
    return f"user_fault:{fault.get('check')}"


def reported(kind: str) -> bool:
    """Whether findings of this kind are faults (else "to check")."""
    right, found = PRECISION.get(kind, (0, 0))
    return found >= FEWEST and right / found >= PRECISION_NEEDED


def measured_text(kind: str, precision: list[int] | tuple[int, int] | None = None) -> str:
    """What a kind's findings were worth (`precision` [right, found] as a row recorded it, else the table's), in
    words a manager reads: "right 5 of 9 times on real bots' conversations"."""
    right, found = precision if precision else PRECISION.get(kind, (0, 0))
    where = "on real bots' conversations"
    if not found:
        return f"never measured {where}"
    return f"right {right} of {found} time{'' if found == 1 else 's'} {where}"


def _to_check(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "precision": list(PRECISION.get(kind, (0, 0)))}


def offline_claims(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The row's `claims` from the rules' findings (claims.find_claims): the findings of kinds that are faults, and
    under `to_check` the others, each with its `precision` [right, found]; `backed_measured` false when no basis of
    claimed but not done is a fault, so that ClaimsBacked is not measured offline (not a made-up 1.0)."""
    claims: dict[str, Any] = {"source": "rules", "to_check": {}}
    for direction in ("claimed_not_done", "done_not_told"):
        items = found.get(direction) or []
        claims[direction] = [item for item in items if reported(claim_kind(direction, item))]
        claims["to_check"][direction] = [_to_check(claim_kind(direction, item), item) for item in items
                                         if not reported(claim_kind(direction, item))]
    claims["backed_measured"] = any(reported(kind) for kind in PRECISION if kind.startswith("claimed_not_done:"))
    return claims


def rules_findings(claims: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """All the rules' findings of an offline row's `claims` (`offline_claims`), faults and to check together, without
    their `precision`, in transcript order: what the claims judge's row keeps under "rules"."""
    found = {}
    for direction, order in (("claimed_not_done", "message_index"), ("done_not_told", "actual_index")):
        items = [*(claims.get(direction) or []), *((claims.get("to_check") or {}).get(direction) or [])]
        found[direction] = sorted(({key: value for key, value in item.items() if key != "precision"} for item in items),
                                  key=lambda item: item.get(order) or 0)
    return found


def offline_faults(faults: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(faults, to check) of the simulated-user checks' findings; a judge's (check "user_review:...") is a fault."""
    kept, to_check = [], []
    for fault in faults:
        if str(fault.get("check", "")).startswith("user_review:") or reported(fault_kind(fault)):
            kept.append(fault)
        else:
            to_check.append(_to_check(fault_kind(fault), fault))
    return kept, to_check
