"""How far `lobeval estimate` is from the bill, before a first run (its range and midpoint) and before a second
one (from the first run's measured usage): the sample suite, one case per scenario, against the role-playing fake
endpoint with provider-style prompt caching, for the sample bot and a bot that asks for every value at once, with
the scripted user and a model as the user. The second run plays other cases (`--seed 7`) of the same scenarios.
Prints figures only: nothing here asserts (tests/workflow/test_estimate.py does).

    .venv/bin/python tests/estimate_figures.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from lobeval.workflow.estimate import estimate  # noqa: E402
from roleplay import Roleplay  # noqa: E402
from test_estimate import PRICE, billed, total  # noqa: E402
from test_model_run import cli, model_endpoint  # noqa: E402

SUITE = "scenarios/support_tickets"


def measure(asks_all: bool, user: str) -> str:
    """One line: the first run's range, midpoint and bill; the second run's estimate and bill."""
    with tempfile.TemporaryDirectory() as root, pytest.MonkeyPatch.context() as patch, model_endpoint(
            patch, Path(root), Roleplay(seed=15, bot_asks_all=asks_all), price=PRICE, prompt_cache=True) as fake:
        first = estimate(SUITE, cases_per_scenario=1, user=user)
        status, out = cli("run", "--user", user, "--cases-per-scenario", "1", "--run-id", "first")
        if status not in (0, 1):
            raise SystemExit(out)
        bill = sum(billed(list(fake.answers))[0].values())
        second = estimate(SUITE, cases_per_scenario=1, seed=7, user=user)
        before = fake.count
        status, out = cli("run", "--user", user, "--cases-per-scenario", "1", "--seed", "7", "--run-id", "second")
        if status not in (0, 1):
            raise SystemExit(out)
        then = sum(billed(list(fake.answers)[before:])[0].values())
        low, high = (total(end) for end in first.range)
        return (f"| {'asks for every value at once' if asks_all else 'the sample bot'} | {user} | {low:.4f} .. "
                f"{high:.4f} | {total(first):.4f} | {bill:.4f} | {total(second):.4f} | {then:.4f} | "
                f"{total(second) / then - 1:+.1%} |")


def main() -> None:
    print(f"every model at ${PRICE['input']:.2f} in (${PRICE['cached_input']:.2f} cached) / ${PRICE['output']:.2f} "
          f"out per 1M tokens")
    print("| bot | user | first run: range USD | midpoint | bill | second run: estimate | bill | off by |")
    print("|---|---|---|---|---|---|---|---|")
    for asks_all in (False, True):
        for user in ("scripted", "llm"):
            print(measure(asks_all, user), flush=True)


if __name__ == "__main__":
    main()
