"""The `lobeval` command (SPEC §7). Exit status: 0 done, 1 gate failed, 2 bad input."""
from __future__ import annotations

import argparse
import sys

from lobeval.errors import LobevalError


def _generate(args: argparse.Namespace) -> int:
    from lobeval.generate import generate

    result = generate(args.suite, args.out, cases_per_scenario=args.cases_per_scenario, seed=args.seed)
    print(f"wrote {result.total} cases ({len(result.cases_per_scenario)} scenarios) to {result.path}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from lobeval.pipeline import run

    result = run(suite=args.suite, run_id=args.run_id, cases_per_scenario=args.cases_per_scenario,
                 seed=args.seed)
    for line in result.summary():
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lobeval", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = commands.add_parser("generate", help="fill scenario templates with business data into a dataset")
    gen.add_argument("--suite", required=True, help="the suite folder, e.g. scenarios/support_tickets")
    gen.add_argument("--cases-per-scenario", type=int, default=3, metavar="N")
    gen.add_argument("--seed", type=int, default=42, metavar="S")
    gen.add_argument("--out", required=True, help="the dataset file to write (JSONL)")
    gen.set_defaults(handler=_generate)

    run = commands.add_parser("run", help="run the notebook chain into runs/<run_id>/")
    run.add_argument("--suite", default="scenarios/support_tickets")
    run.add_argument("--run-id", help="default: the time and the suite's name")
    run.add_argument("--cases-per-scenario", type=int, default=3, metavar="N")
    run.add_argument("--seed", type=int, default=42, metavar="S")
    run.set_defaults(handler=_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except LobevalError as exc:
        print(f"lobeval {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
