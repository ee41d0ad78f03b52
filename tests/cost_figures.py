"""What a model-backed run costs, by role, as the endpoint bills it: `make cost-figures` (issue 29's table).

One `lobeval run --user llm --cases-per-scenario 1` of the sample suite per judge selection, against the
role-playing fake endpoint (tests/roleplay.py) with provider-style prompt caching, every model priced alike
(PRICE, USD per 1M tokens). The bill is counted from the endpoint's own log, never from lobeval's records.
Prints figures only: nothing here asserts a cost. With --each, what each of lobeval's judges adds to the request
they share: the run's conversations judged again (`lobeval evaluate`, on a fresh endpoint) by the others alone.

    .venv/bin/python tests/cost_figures.py [--judges default|all|...]... [--batch] [--each]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from lobeval.judges.judges import LOBEVAL_JUDGES, selected_judges  # noqa: E402
from lobeval.models.llm import BATCH_DISCOUNT  # noqa: E402
from roleplay import Roleplay, role_of  # noqa: E402
from test_model_run import CASES, cli, model_endpoint  # noqa: E402

PRICE = {"input": 5.00, "output": 15.00, "cached_input": 2.50}
GROUPS = {"bot": "bot (target)", "user": "simulated user", "attacker": "simulated user",
          "completion_judge": "completion check", "root_causes": "root causes"}
JUDGING = ("lobeval's judges", "Azure evaluators", "completion check", "root causes", "embeddings")


def group_of(request: dict[str, Any]) -> str:
    role = role_of(request)
    if role.startswith("azure:"):
        return "Azure evaluators"
    return GROUPS.get(role, "lobeval's judges")


def bill(answers: list[dict[str, Any]]) -> dict[str, Counter]:
    """Requests, tokens and USD by group, as the endpoint billed them (cached prompt tokens at their price)."""
    rows: dict[str, Counter] = {}
    for answer in answers:
        usage = answer["usage"] or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        kind = "embeddings" if "input" in answer["request"] else group_of(answer["request"])
        row = rows.setdefault(kind, Counter())
        row.update(requests=1, prompt=prompt, cached=cached, completion=completion)
        row["usd"] += ((prompt - cached) * PRICE["input"] + cached * PRICE["cached_input"]
                       + completion * PRICE["output"]) / 1e6 * (BATCH_DISCOUNT if answer.get("batch") else 1.0)
    return rows


def measure(judges: str, root: Path, batch: bool) -> dict[str, Counter]:
    with pytest.MonkeyPatch.context() as patch, model_endpoint(patch, root, Roleplay(seed=15), price=PRICE,
                                                               prompt_cache=True) as fake:
        argv = ["run", "--user", "llm", "--cases-per-scenario", "1", "--concurrency", "4", "--run-id", "cost"]
        patch.setenv("LOBEVAL_BATCH_POLL_S", "0")
        status, out = cli(*argv, *([] if judges == "default" else ["--judges", judges]), *(["--batch"] if batch else []))
        if status not in (0, 1):
            raise SystemExit(out)
        return bill(list(fake.answers))


def each_judge(judges: str, root: Path, batch: bool, whole: Counter) -> dict[str, Counter]:
    """By each of lobeval's judges of the selection, what its bill (`whole`: their shared request's) loses when the run's
    conversations are judged again without it."""
    own = [name for name in selected_judges(None if judges == "default" else judges.split(",")) if name in LOBEVAL_JUDGES]
    run, found = root / "runs" / "cost", {}
    for name in own if len(own) > 1 else []:
        with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch, model_endpoint(
                patch, Path(folder), Roleplay(seed=15), price=PRICE, prompt_cache=True) as fake:
            patch.setenv("LOBEVAL_BATCH_POLL_S", "0")
            status, out = cli("evaluate", "--dataset", str(run / "dataset.jsonl"), "--conversations",
                              str(run / "conversations.jsonl"), "--suite", "scenarios/support_tickets",
                              "--out", str(Path(folder) / "results.json"),
                              "--judges", ",".join(other for other in own if other != name), *(["--batch"] if batch else []))
            if status not in (0, 1):
                raise SystemExit(out)
            without = bill(list(fake.answers)).get("lobeval's judges", Counter())
        found[name] = Counter({key: whole[key] - without[key] for key in ("prompt", "cached", "completion")},
                              usd=round(whole["usd"] - without["usd"], 9) + 0.0)   # no "-0.0000" from a sum's rounding
    return found


def show(judges: str, rows: dict[str, Counter], batch: bool) -> None:
    bot = rows.get("bot (target)", Counter())["usd"]
    judging = sum(rows.get(name, Counter())["usd"] for name in JUDGING)
    print(f"\n--judges {judges}{' --batch' if batch else ''}: {CASES} conversations, every model at ${PRICE['input']:.2f} in "
          f"(${PRICE['cached_input']:.2f} cached) / ${PRICE['output']:.2f} out per 1M tokens")
    print(f"| role | requests | prompt tokens | of them cached | completion tokens | billed USD | per conversation |")
    print("|---|---|---|---|---|---|---|")
    for name, row in sorted(rows.items(), key=lambda item: -item[1]["usd"]):
        print(f"| {name} | {row['requests']} | {row['prompt']} | {row['cached']} | {row['completion']} | "
              f"{row['usd']:.4f} | {row['usd'] / CASES:.5f} |")
    print(f"judging (judges, evaluators, completion check, root causes, embeddings) = ${judging:.4f} = "
          f"{judging / bot:.2f} × the bot's ${bot:.4f}; the simulated user "
          f"{rows.get('simulated user', Counter())['usd'] / bot:.2f} × the bot")


def show_each(found: dict[str, Counter]) -> None:
    print("what each of lobeval's judges adds to their shared request (the conversations judged again without it):")
    print("| judge | prompt tokens | of them cached | completion tokens | billed USD | per conversation |")
    print("|---|---|---|---|---|---|")
    for name, row in found.items():
        print(f"| {name} | {row['prompt']} | {row['cached']} | {row['completion']} | {row['usd']:.4f} | "
              f"{row['usd'] / CASES:.5f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", action="append", help="a judge selection (default: default and all)")
    parser.add_argument("--batch", action="store_true", help="each selection also with --batch")
    parser.add_argument("--each", action="store_true", help="what each of lobeval's judges adds to their request")
    args = parser.parse_args()
    for judges in args.judges or ["default", "all"]:
        for batch in (False, True) if args.batch else (False,):
            with tempfile.TemporaryDirectory() as folder:
                rows = measure(judges, Path(folder), batch)
                show(judges, rows, batch)
                if args.each:
                    show_each(each_judge(judges, Path(folder), batch, rows.get("lobeval's judges", Counter())))


if __name__ == "__main__":
    main()
