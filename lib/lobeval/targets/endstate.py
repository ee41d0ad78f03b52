"""The end-state check (τ-bench style): replay a case's expected calls on a fresh session as a perfect
agent would, and compare the state they leave with the state a conversation left."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from lobeval.core.operators import concrete, resolver
from lobeval.targets.targets import Session, Target, TargetError, load_target


async def replay_expected(session: Session, case: dict[str, Any]) -> dict[str, Any] | None:
    """Run the case's expected calls on a fresh session as a perfect agent; None without apply()."""
    initial = await session.state()
    made: list[dict[str, Any]] = []
    for call in case.get("expected_function_calls") or []:
        done = await session.apply([{"functionName": call["functionName"],
                                     "arguments": concrete(call.get("arguments") or {}, resolver(made))}])
        if done is None or initial is None:
            return None
        made += done
    return {"initial": initial, "expected": await session.state(), "calls": made,
            "replay_errors": [{"functionName": c["functionName"], "error": c["error"]} for c in made if c.get("error")]}


async def replay_cases(wanted: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any] | None]:
    """Replay each case on its own fresh session, keyed like `wanted` ((target spec, case_id) → case):
    the replay, None when the target offers no apply(), or {"error": ...} when the target failed."""
    targets: dict[str, Target] = {}
    found: dict[tuple[str, str], dict[str, Any] | None] = {}
    try:
        for (spec, case_id), case in wanted.items():
            if spec not in targets:
                targets[spec] = load_target(spec)
            found[spec, case_id] = await _replay_on(targets[spec], case)
    finally:
        for target in targets.values():
            await target.aclose()
    return found


async def _replay_on(target: Target, case: dict[str, Any]) -> dict[str, Any] | None:
    session = None
    try:
        session = await target.start(case)
        return await replay_expected(session, case)
    except TargetError as exc:
        return {"error": f"replaying the expected calls failed: {exc}"}
    finally:
        if session is not None:
            await session.close()


_TIMESTAMP = re.compile(r"(^|_)(at|time|timestamp|created|updated|modified)$")


def state_differences(initial: dict[str, Any], expected: dict[str, Any], actual: dict[str, Any]) -> list[dict[str, Any]]:
    """Field-by-field differences between two end states of tables `{table: {id: record}}`, as τ-bench
    checks them. Records new since `initial` carry generated IDs: they are paired by content, every
    generated ID is read as the same placeholder, and timestamp fields are ignored everywhere."""
    differences: list[dict[str, Any]] = []
    generated = {key for table in set(expected) | set(actual) for side in (expected, actual)
                 if isinstance(side.get(table), dict) for key in side[table]
                 if key not in (initial.get(table) or {})}
    for table in sorted(set(expected) | set(actual)):
        before, want, got = initial.get(table) or {}, expected.get(table) or {}, actual.get(table) or {}
        if not all(isinstance(t, dict) for t in (before, want, got)):
            if want != got:
                differences.append({"path": table, "expected": want, "actual": got})
            continue
        for key in sorted(set(before) & (set(want) | set(got))):
            differences += _record_differences(f"{table}.{key}", want.get(key), got.get(key), generated)
        new_want, new_got = sorted(set(want) - set(before)), sorted(set(got) - set(before))
        cost = np.array([[len(_record_differences("", want[a], got[b], generated)) for b in new_got] for a in new_want])
        pairs = list(zip(*linear_sum_assignment(cost))) if cost.size else []
        for i, j in pairs:
            differences += _record_differences(f"{table}.<new {new_want[i]}>", want[new_want[i]], got[new_got[j]],
                                               generated)
        differences += [{"path": f"{table}.<new {new_want[i]}>", "expected": want[new_want[i]], "actual": None}
                        for i in range(len(new_want)) if i not in {p[0] for p in pairs}]
        differences += [{"path": f"{table}.<new {new_got[j]}>", "expected": None, "actual": got[new_got[j]]}
                        for j in range(len(new_got)) if j not in {p[1] for p in pairs}]
    return differences


def _record_differences(path: str, want: Any, got: Any, generated: set[str]) -> list[dict[str, Any]]:
    if not isinstance(want, dict) or not isinstance(got, dict):
        return [] if _same(want, got, generated) else [{"path": path, "expected": want, "actual": got}]
    return [{"path": f"{path}.{field}", "expected": want.get(field), "actual": got.get(field)}
            for field in sorted(set(want) | set(got))
            if not _TIMESTAMP.search(field) and not _same(want.get(field), got.get(field), generated)]


def _same(want: Any, got: Any, generated: set[str]) -> bool:
    def plain(value: Any) -> Any:
        return "<generated id>" if isinstance(value, str) and value in generated else value
    return plain(want) == plain(got)
