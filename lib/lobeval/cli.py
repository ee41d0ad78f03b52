"""The `lobeval` command. Exit status: 0 done, 1 a quality gate failed (gate, run), 2 bad input or usage."""
from __future__ import annotations

import argparse
import difflib
import getpass
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from lobeval.errors import ConfigError, LobevalError
from lobeval.roles import DEFAULT_TARGET, USER_KINDS
from lobeval.users import STOP_PHRASE


def _generate(args: argparse.Namespace) -> int:
    from lobeval.generate import generate

    result = generate(args.suite, args.out, cases_per_scenario=args.cases_per_scenario, seed=args.seed,
                      attacks=args.attacks, attack_roles=args.attack_roles)
    print(f"wrote {result.total} cases ({len(result.cases_per_scenario)} scenarios) to {result.path}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from lobeval.llm import run_sync

    return run_sync(_simulate_async(args))


async def _simulate_async(args: argparse.Namespace) -> int:
    from lobeval.roles import resolve
    from lobeval.simulate import parse_shard, simulate_async

    parts = resolve("user", "completion_judge", "target", target=args.target, user=args.user,
                    concurrency=args.concurrency, stop_phrase=args.stop_phrase, target_timeout=args.target_timeout)
    target = parts.target
    try:
        result = await simulate_async(
            args.dataset, args.out, target=target, user=parts.user, judge=parts.completion_judge, trials=args.trials,
            concurrency=args.concurrency, max_turns=args.max_turns, stop_phrase=args.stop_phrase,
            scenarios=args.scenarios.split(",") if args.scenarios else None, limit=args.limit,
            shard=parse_shard(args.shard) if args.shard else None, retry_errors=args.retry_errors,
            budget=parts.budget)
    finally:
        await target.aclose()
    for line in result.summary():
        print(line)
    return 0



def _attack_roles_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attack-roles", type=names, metavar="A,B",
                        help="the roles of the suite's policy.json the attack cases are played as, N per category "
                             "each (default: its role)")


def _user_faults_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include-user-faults", action="store_true",
                        help="keep conversations in which the simulated user made a mistake in the bot's metrics "
                             "(default: left out and counted apart)")

def _evaluate(args: argparse.Namespace) -> int:
    from lobeval.evaluate import evaluate
    from lobeval.roles import resolve

    parts = resolve("judges", "embedder", judges=args.judges.split(",") if args.judges else None, suite=args.suite,
                    batch=args.batch)
    result = evaluate(args.dataset, args.conversations, args.out, suite=args.suite, judges=parts.judges,
                      embedder=parts.embedder, labels=args.labels, target=args.target,
                      include_user_faults=args.include_user_faults)
    for line in result.summary():
        print(line)
    return 0


def _lint(args: argparse.Namespace) -> int:
    from lobeval.lint import lint

    problems = lint(args.dataset, suite=args.suite, target=args.target)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"lint: {len(problems)} problem(s) in {args.dataset}")
    return 2 if problems else 0


def _chat(args: argparse.Namespace) -> int:
    from lobeval.chat import chat_loop

    chat_loop(args.target, debug=args.debug, timeout=args.target_timeout)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from lobeval.bench import bench_evaluate, bench_simulate

    if args.what == "claims":
        from lobeval.bench import CLAIMS_FILE, bench_claims, format_claims
        from lobeval.roles import NO_MODEL_HINT, model_client

        judge = model_client("judge", cache=True, concurrency=args.concurrency) if args.judge else None
        if args.judge and judge is None:
            raise ConfigError(f"bench claims --judge needs a judge model: set LOBEVAL_JUDGE_MODEL or LOBEVAL_MODEL, "
                              f"{NO_MODEL_HINT}")
        for line in format_claims(bench_claims(args.files or [CLAIMS_FILE], judge)):
            print(line)
        return 0
    if args.files or args.judge:
        raise ConfigError(f"bench {args.what}: {'FILE' if args.files else '--judge'} is for bench claims")
    if args.what == "evaluate":
        from lobeval.bench import EVALUATE_SIZES, format_evaluate

        sizes = (args.conversations,) if args.conversations else EVALUATE_SIZES
        for line in format_evaluate(bench_evaluate(sizes, repeat=args.repeat, azure=args.azure)):
            print(line)
        return 0

    figures = bench_simulate(args.conversations or 200, args.concurrency, args.latency)
    print(f"simulate: {figures['conversations']} conversations ({figures['endings']}), "
          f"{figures['model calls']} model calls at {args.latency * 1000:.0f} ms each, concurrency {args.concurrency}")
    print(f"wall time {figures['wall s']:.2f} s, ideal (calls x latency / concurrency) {figures['ideal s']:.2f} s, "
          f"ratio {figures['ratio']:.3f}")
    print(f"floor of this shape (whole waves of {args.concurrency} conversations) {figures['floor s']:.2f} s, "
          f"wall / floor {figures['wall s'] / figures['floor s']:.3f}")
    print(f"client CPU {figures['client CPU s']:.2f} s, {figures['client CPU s'] / figures['model calls'] * 1000:.1f} ms "
          f"per model call (the endpoint runs in another process); peak memory (RSS) {figures['peak RSS MB']:.0f} MB")
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from lobeval.estimate import estimate, format_estimate

    found = estimate(args.suite, cases_per_scenario=args.cases_per_scenario, seed=args.seed, trials=args.trials,
                     user=args.user, judges=args.judges.split(",") if args.judges else None, attacks=args.attacks,
                     target=args.target, batch=args.batch, attack_roles=args.attack_roles, max_turns=args.max_turns)
    for line in format_estimate(found):
        print(line)
    return 0


def _run(args: argparse.Namespace) -> int:
    from lobeval.compare import parse_minimum
    from lobeval.pipeline import run

    if args.estimate:
        return _estimate(args)
    result = run(suite=args.suite, run_id=args.run_id, cases_per_scenario=args.cases_per_scenario, seed=args.seed,
                 target=args.target, user=args.user, trials=args.trials, concurrency=args.concurrency,
                 judges=args.judges.split(",") if args.judges else None,
                 gate=dict(parse_minimum(text) for text in args.min) if args.min else None,
                 max_error_rate=args.max_error_rate, target_timeout=args.target_timeout,
                 retry_errors=args.retry_errors, include_user_faults=args.include_user_faults,
                 min_rule=args.min_rule, max_user_fault_rate=args.max_user_fault_rate, attacks=args.attacks,
                 attack_roles=args.attack_roles, batch=args.batch, max_turns=args.max_turns)
    for line in result.summary():
        print(line)
    return 0 if result.gate_passed else 1


def _compare(args: argparse.Namespace) -> int:
    from lobeval.compare import compare_runs, format_comparison

    print(format_comparison(compare_runs(args.baseline, args.candidate, target_difference=args.target_difference)))
    return 0


def _gate(args: argparse.Namespace) -> int:
    from lobeval.compare import format_gate, gate, parse_minimum

    minimums = dict(parse_minimum(text) for text in args.min or [])
    checks = gate(args.run, minimums=minimums, baseline=args.baseline, max_error_rate=args.max_error_rate,
                  min_judge_coverage=args.min_judge_coverage, min_rule=args.min_rule,
                  max_user_fault_rate=args.max_user_fault_rate, max_breaches=args.max_breaches)
    print(format_gate(checks))
    return 0 if all(check["passed"] for check in checks) else 1


DESCRIPTION = """lobeval tells whether a line-of-business chatbot can be trusted: it generates test cases from
scenario templates and business data, lets a simulated user talk to the bot, scores the function calls
the bot made against those it should have made, and reports. `lobeval run` does it all."""
EPILOG = """exit status:
  0  done (for run and gate: the quality gate passed)
  1  a quality gate failed (run, gate)
  2  bad input or usage: one line on standard error names the file, the record and the field, or the
     option; nothing is written

Every command has --help. The reference: docs/cli.md (commands and options), docs/targets.md
(connecting a bot), docs/formats.md (suites and files), docs/models.md (models, judges, budget),
docs/metrics.md (the metrics)."""
# What argparse takes for a negative number rather than an option.
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")


def _import(args: argparse.Namespace) -> int:
    from lobeval import runs

    run_dir = runs.run_folder(args.run_id)
    if args.format == "traces":
        from lobeval.traces import import_traces

        if args.domain or args.effect:
            raise ConfigError("import traces: --domain and --effect are for benchmark runs (tau-bench, tau2)")
        if args.trace_format is None:
            raise ConfigError("import traces: give --format openai-chat, openai-agents or otel-genai")
        written = import_traces(args.file, args.trace_format, run_dir / "conversations.jsonl")
        print(f"{written} conversations written to {run_dir / 'conversations.jsonl'}")
        return 0
    from lobeval.importers import import_tau2, import_tau_bench, parse_effects

    if args.trace_format is not None:
        raise ConfigError(f"import {args.format}: --format is for traces")
    importer = import_tau_bench if args.format == "tau-bench" else import_tau2
    result = importer(args.file, run_dir, domain=args.domain, effects=parse_effects(args.effect))
    print("\n".join(result.summary()))
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from lobeval.agreement import format_agreement, run_agreement

    print(format_agreement(run_agreement(args.run_dir)))
    return 0


def _ask_effect(name: str) -> str:
    answer = ""
    while answer not in ("read", "write"):
        answer = input(f"does {name} only read (read) or change something (write)? ").strip().lower()
    return answer


def _asker() -> Callable[[str], str] | None:
    """Effects the tools do not say are asked on a terminal; elsewhere they must come from --effect."""
    return _ask_effect if sys.stdin.isatty() else None


def _tools(args: argparse.Namespace) -> int:
    from lobeval.importers import parse_effects
    from lobeval.mcp_tools import tools_from_mcp, write_tools_json

    tools = tools_from_mcp(args.from_mcp, effects=parse_effects(args.effect), ask=_asker())
    print(f"{len(tools)} tools written to {write_tools_json(tools, args.out)}")
    return 0


def _init(args: argparse.Namespace) -> int:
    from lobeval.importers import parse_effects
    from lobeval.suite_init import init_suite

    result = init_suite(args.dir, args.tools, args.data, tables=args.table, effects=parse_effects(args.effect),
                        ask=_asker())
    for line in result.summary():
        print(line)
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from lobeval.calibrate import calibrate, format_calibration
    from lobeval.records import read_labels, read_results
    from lobeval.runs import RESULTS_FILE

    scored_with = (read_results(Path(args.run) / RESULTS_FILE, rows=False).get("config") or {}) if args.run else {}
    if args.labels:
        path = Path(args.labels)
    elif args.suite:
        path = _suite_folder(args.suite) / "labels.jsonl"
    elif scored_with.get("labels_path"):   # the labels file the run was scored with, as the report reads it
        path = Path(scored_with["labels_path"])
    elif scored_with.get("suite"):
        path = _suite_folder(scored_with["suite"]) / "labels.jsonl"
    else:
        raise ConfigError("calibrate: give --suite, --labels, or --run of a run scored with a suite")
    labels = read_labels(path) if args.labels or path.exists() else []
    print(f"labels: {path}")
    print(format_calibration(calibrate(labels, scored_with.get("judge_model"), scored_with.get("judge_prompt"))))
    return 0


def _draft(args: argparse.Namespace) -> int:
    from lobeval.draft import draft
    from lobeval.draft_model import about_text, drafter, model_drafts, summariser

    regression = args.from_conversations is not None
    if regression and args.about:
        raise ConfigError(f"--about {args.about}: is for the model's proposals, and with --from-conversations it "
                          f"proposes none (it summarises each conversation): leave out --about")
    client, about = drafter(args.about), about_text(args.about)
    proposer = None if client is None or regression else lambda suite, names: model_drafts(suite, client, names, about)
    result = draft(args.suite, args.out, force=args.force, seed=args.seed, target=args.target,
                   conversations=args.from_conversations, proposer=proposer,
                   summarise=summariser(client) if client is not None and regression else None)
    for line in result.summary():
        print(line)
    return 0 if result.path else 1


def _suite_folder(suite: str) -> Path:
    if not Path(suite).is_dir():
        raise ConfigError(f"--suite {suite}: not a folder")
    return Path(suite)


def _quarantine(args: argparse.Namespace) -> int:
    from lobeval.labels import quarantine_cases, revoke_label
    from lobeval.records import read_labels

    path = _suite_folder(args.suite) / "labels.jsonl"
    if sum((bool(args.case_ids), args.list, args.revoke is not None)) != 1:
        raise ConfigError("quarantine: give case IDs, --list or --revoke ID (one of them)")
    quarantined = [label for label in (read_labels(path) if path.exists() else [])
                   if label["kind"] == "quarantined_case"]
    if args.list:
        for label in quarantined:
            print(f"{label['id']}  {label['case_id']}  {label.get('author') or ''}  {label.get('created_at') or ''}  "
                  f"{label['note']}")
        print(f"{len(quarantined)} quarantined case(s) in {path}")
    elif args.revoke is not None:
        if args.revoke not in {label["id"] for label in quarantined}:
            raise ConfigError(f"no quarantined_case label with id {args.revoke!r} in {path}")
        revoke_label(path, args.revoke)
        print(f"label {args.revoke} revoked from {path}")
    else:
        for label in quarantine_cases(path, args.case_ids, note=args.note, author=args.author or getpass.getuser()):
            print(f"quarantined {label['case_id']} (label {label['id']}) in {path}")
        print("the next evaluation leaves their conversations out of the bot's metrics and counts them apart")
    return 0


class Parser(argparse.ArgumentParser):
    """argparse without abbreviated options (`--trial` is not `--trials`), whose errors are one line, and
    which names a close option or command for an unknown one."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        problem = unknown_word(words, list(self._option_string_actions), commands(self))
        if problem:
            self.error(problem)
        return super().parse_known_args(words, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def commands(parser: argparse.ArgumentParser) -> list[str]:
    """The names of a parser's commands, if it has any."""
    return [name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices]


def unknown_word(words: list[str], options: list[str], command_names: list[str]) -> str | None:
    """The first option among `words` that is not one of `options`, or (with commands) the command word when
    it is none of them, said with a close name: "unknown option --trial; did you mean --trials?"."""
    for word in words:
        if word == "--":
            return None
        if command_names and not word.startswith("-"):
            return None if word in command_names else f"unknown command {word!r}{guess(word, command_names)}"
        option = word.split("=", 1)[0]
        if word.startswith("-") and word != "-" and not _NEGATIVE_NUMBER.fullmatch(word) and option not in options:
            return f"unknown option {option}{guess(option, options)}"
    return None


def guess(word: str, names: list[str]) -> str:
    """"; did you mean X?" for the one name `word` begins, or else the closest name (leading dashes aside)."""
    starting = [name for name in names if name.startswith(word)]
    if len(starting) == 1:
        return f"; did you mean {starting[0]}?"
    bare = {name.lstrip("-"): name for name in names}
    close = difflib.get_close_matches(word.lstrip("-"), bare, n=1)
    return f"; did you mean {bare[close[0]]}?" if close else ""


def one_line(message: str) -> str:
    """A line break or control character quoted from a record or an argument, escaped."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in message)


def whole(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `low`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    return parse


def number(low: float, high: float = math.inf, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` (more than `low` when `above`) to `high`."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value > high or (value <= low if above else value < low):
            bounds = f"more than {low:g}" if above else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bounds}{f' and at most {high:g}' if high < math.inf else ''}"
                                             f", got {text}")
        return value
    return parse


def words(text: str) -> str:
    """An argparse type: text that is not empty or only spaces."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def names(text: str) -> list[str]:
    """An argparse type: a comma-separated list of at least one name."""
    found = [name.strip() for name in text.split(",") if name.strip()]
    if not found:
        raise argparse.ArgumentTypeError("name at least one")
    return found


COUNT = whole(1)
SHARE = number(0, 1)
SECONDS = number(0, above=True)


def _target_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--target-timeout", type=SECONDS, default=60.0, metavar="SECONDS",
                        help=f"a target call that takes longer {what} (default 60; the bot's own model requests "
                             f"take LOBEVAL_TARGET_TIMEOUT_S, docs/models.md)")


def _target_options(parser: argparse.ArgumentParser) -> None:
    _target_timeout(parser, "ends the conversation as target_unavailable, a machinery error")
    parser.add_argument("--retry-errors", action="store_true",
                        help="on resume, run again the conversations that ended in a machinery error "
                             "(llm_error, target_unavailable, budget_spent)")


TARGET_HELP = "module:attr (a Python class or factory) or http(s)://host/base; see docs/targets.md"
USER_HELP = "scripted (offline, the default) or llm (a model plays the user; docs/models.md)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="lobeval", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = commands.add_parser("generate", help="fill scenario templates with business data into a dataset")
    gen.add_argument("--suite", required=True, help="the suite folder, e.g. scenarios/support_tickets "
                                                    "(docs/formats.md)")
    gen.add_argument("--cases-per-scenario", type=COUNT, default=3, metavar="N")
    gen.add_argument("--seed", type=int, default=42, metavar="S")
    gen.add_argument("--attacks", nargs="?", const="with", choices=("with", "only"),
                     help="add attack cases from the suite's policy.json, N per category (alone with: --attacks "
                          "only); docs/metrics.md#security")
    _attack_roles_option(gen)
    gen.add_argument("--out", required=True, help="the dataset file to write (JSONL)")
    gen.set_defaults(handler=_generate)

    sim = commands.add_parser("simulate", help="let a simulated user talk to the target, one conversation per "
                                                "case and trial; resumes when --out exists")
    sim.add_argument("--dataset", required=True)
    sim.add_argument("--target", default=DEFAULT_TARGET, help=f"{TARGET_HELP} (default {DEFAULT_TARGET})")
    sim.add_argument("--user", default="scripted", choices=USER_KINDS, help=USER_HELP)
    sim.add_argument("--trials", type=COUNT, default=1, metavar="K", help="conversations per case, for pass^k")
    sim.add_argument("--concurrency", type=COUNT, default=4, metavar="C")
    sim.add_argument("--max-turns", type=COUNT, default=20, metavar="T", help="user messages at most")
    sim.add_argument("--stop-phrase", type=words, default=STOP_PHRASE, metavar="TEXT")
    sim.add_argument("--scenarios", type=words, metavar="A,B", help="only these scenarios")
    sim.add_argument("--limit", type=COUNT, metavar="N", help="only the first N cases (a smoke run)")
    sim.add_argument("--shard", metavar="I/N", help="only every N-th case, starting at the I-th")
    _target_options(sim)
    sim.add_argument("--out", required=True, help="conversations file (JSONL), appended to")
    sim.set_defaults(handler=_simulate)

    ev = commands.add_parser("evaluate", help="score conversations against their cases; run the judges")
    ev.add_argument("--dataset", help="the test cases (JSONL); may be left out when every conversation "
                                      "carries its expected_function_calls")
    ev.add_argument("--conversations", required=True, nargs="+", metavar="FILE",
                    help="one or more conversation files (JSONL), joined; a (case, trial) pair twice is an error")
    ev.add_argument("--suite", help="the suite folder: ignored functions, optional effects, tool effects and "
                                    "schemas, labels.jsonl")
    ev.add_argument("--labels", metavar="FILE", help="labels file (default: <suite>/labels.jsonl)")
    ev.add_argument("--judges", nargs="?", const="all", metavar="A,B",
                    help="the model judges to run when a judge model is configured (default: per_turn, goal, "
                         "user_review, commitments, claims; all adds the Azure evaluators; none; or a comma-separated "
                         "selection); naming them needs a judge model (docs/models.md)")
    ev.add_argument("--target", help="replay the expected calls on this target for the end-state check "
                                     "(default: the target each conversation names)")
    ev.add_argument("--out", required=True, help="evaluation_results.json to write")
    ev.add_argument("--batch", action="store_true",
                    help="send the judges' requests through the provider's Batch API, at its discount; waits for "
                         "the batch (LOBEVAL_BATCH_POLL_S between looks; docs/models.md)")
    _user_faults_option(ev)
    ev.set_defaults(handler=_evaluate)

    lint = commands.add_parser("lint", help="find impossible or trivially passed test cases (exit 2 if any)")
    lint.add_argument("--dataset", required=True)
    lint.add_argument("--suite", help="check the expected calls against the suite's tools.json too")
    lint.add_argument("--target", help="replay the expected calls on this target (needs its optional apply())")
    lint.set_defaults(handler=_lint)

    chat = commands.add_parser("chat", help="talk to a target yourself")
    chat.add_argument("--target", default=DEFAULT_TARGET, help=f"{TARGET_HELP} (default {DEFAULT_TARGET})")
    chat.add_argument("--debug", action="store_true", help="show every function call with arguments and result")
    _target_timeout(chat, "is shown as a target error, and the chat goes on")
    chat.set_defaults(handler=_chat)

    bench = commands.add_parser("bench", help="print speed figures: simulation against the fake endpoint, "
                                              "or scoring synthetic conversations; or the claims check's precision "
                                              "and recall on labelled conversations")
    bench.add_argument("what", choices=["simulate", "evaluate", "claims"])
    bench.add_argument("files", nargs="*", metavar="FILE",
                       help="claims: labelled JSONL files, taken together (docs/formats.md; default: the project's own "
                            "labelled set)")
    bench.add_argument("--conversations", type=COUNT, help="default: 200 to simulate; 10000 and then 100000 to evaluate")
    bench.add_argument("--concurrency", type=COUNT, default=32)
    bench.add_argument("--latency", type=number(0), default=0.1, help="seconds per model completion")
    bench.add_argument("--repeat", type=COUNT, default=1, metavar="R", help="evaluate: runs per size, for the spread")
    bench.add_argument("--judge", action="store_true", help="claims: also ask the claims judge on the judge model "
                                                            "(LOBEVAL_JUDGE_MODEL or LOBEVAL_MODEL; docs/models.md) "
                                                            "and print its figures beside the rules'")
    bench.add_argument("--azure", action="store_true", help="evaluate: score through azure-ai-evaluation's evaluate() "
                                                            "as when a Foundry project is configured (logging nothing)")
    bench.set_defaults(handler=_bench)

    run = commands.add_parser(
        "run", help="run the five stage notebooks into runs/<run_id>/, write the report and print the quality "
                    "gate's verdict: exit 1 when the gate fails; the same --run-id again resumes",
        description="Run the five stage notebooks into runs/<run_id>/ (or $LOBEVAL_RUNS/<run_id>/), write "
                    "report.html and print the quality gate's checks; exit 1 when the gate fails. Before stage 01 "
                    "the suite, the target, the --min metrics and the models the options need are checked: a "
                    "mistake exits 2 and writes nothing. The same --run-id again resumes. See docs/cli.md.")
    run.add_argument("--suite", default="scenarios/support_tickets",
                     help="the suite folder (default scenarios/support_tickets; docs/formats.md)")
    run.add_argument("--run-id", help="default: the time and the suite's name")
    run.add_argument("--cases-per-scenario", type=COUNT, default=3, metavar="N")
    run.add_argument("--seed", type=int, default=42, metavar="S")
    run.add_argument("--target", help=f"{TARGET_HELP}; default: the suite's default_target")
    run.add_argument("--user", default="scripted", choices=USER_KINDS, help=USER_HELP)
    run.add_argument("--trials", type=COUNT, default=1, metavar="K", help="conversations per case, for pass^k")
    run.add_argument("--concurrency", type=COUNT, default=4, metavar="C")
    run.add_argument("--max-turns", type=COUNT, default=20, metavar="T",
                     help="user messages at most before a conversation is cut off (default 20)")
    run.add_argument("--judges", metavar="A,B", help="the judges to run when a judge model is configured "
                                                     "(default: per_turn, goal, user_review, commitments, claims; all "
                                                     "adds the Azure evaluators; none switches them off); naming "
                                                     "them needs a judge model (docs/models.md)")
    run.add_argument("--min", action="append", metavar="METRIC=VALUE",
                     help="the quality gate's minimums (default Reliability=0.8 and Success=0.8); repeatable; "
                          "the metrics: docs/metrics.md")
    _target_options(run)
    run.add_argument("--max-error-rate", type=SHARE, default=0.05, metavar="R",
                     help="the gate fails when more than this share of conversations failed in the machinery "
                          "(default 0.05)")
    run.add_argument("--max-user-fault-rate", type=SHARE, default=0.2, metavar="R",
                     help="the gate fails when the simulated user spoiled more than this share of the scored "
                          "conversations (default 0.2)")
    run.add_argument("--min-rule", choices=("point", "interval"), default="point",
                     help="point (default): a --min fails when the value is below it; interval: only when the "
                          "metric's whole 95%% interval is")
    run.add_argument("--attacks", nargs="?", const="with", choices=("with", "only"),
                     help="play attack cases from the suite's policy.json too (alone with: --attacks only); a "
                          "breach fails the gate (docs/metrics.md#security)")
    _attack_roles_option(run)
    _user_faults_option(run)
    run.add_argument("--batch", action="store_true",
                    help="send the judges' requests through the provider's Batch API, at its discount; waits for "
                         "the batch (LOBEVAL_BATCH_POLL_S between looks; docs/models.md)")
    run.add_argument("--estimate", action="store_true",
                     help="print the expected requests, tokens and cost by role instead, and run nothing "
                          "(as lobeval estimate)")
    run.set_defaults(handler=_run)

    est = commands.add_parser("estimate", help="the expected model requests, tokens and cost by role of lobeval run "
                                               "with the same options; sends and writes nothing")
    est.add_argument("--suite", default="scenarios/support_tickets", help="the suite folder")
    est.add_argument("--cases-per-scenario", type=COUNT, default=3, metavar="N")
    est.add_argument("--seed", type=int, default=42, metavar="S")
    est.add_argument("--target", help=f"{TARGET_HELP}; default: the suite's default_target")
    est.add_argument("--user", default="scripted", choices=USER_KINDS, help=USER_HELP)
    est.add_argument("--trials", type=COUNT, default=1, metavar="K")
    est.add_argument("--max-turns", type=COUNT, default=20, metavar="T",
                     help="as lobeval run --max-turns: a conversation cut off there adds a completion check")
    est.add_argument("--judges", metavar="A,B", help="the judges the run would use (as lobeval run --judges)")
    est.add_argument("--attacks", nargs="?", const="with", choices=("with", "only"))
    _attack_roles_option(est)
    est.add_argument("--batch", action="store_true", help="the judges' requests at the Batch API's discount")
    est.set_defaults(handler=_estimate)

    compare = commands.add_parser("compare", help="compare two runs on their shared conversations: differences, "
                                                  "intervals, p-values, regressions, Success flips")
    compare.add_argument("baseline", metavar="RUN_DIR", help="the baseline run folder (runs/<run_id>)")
    compare.add_argument("candidate", metavar="RUN_DIR", help="the candidate run folder")
    compare.add_argument("--target-difference", type=number(0, 1, above=True), default=0.05, metavar="D",
                         help="the Success difference to size trials and cases for (default 0.05)")
    compare.set_defaults(handler=_compare)

    imp = commands.add_parser("import", help="a public benchmark run (tau-bench, tau2) with its verdicts, or production "
                                             "traces, as runs/<run_id>/ (docs/analysis.md, docs/formats.md)")
    imp.add_argument("format", choices=["tau-bench", "tau2", "traces"])
    imp.add_argument("file", metavar="FILE", help="tau-bench results .json; tau2 results.json or its folder; a traces file")
    imp.add_argument("--run-id", required=True)
    imp.add_argument("--domain", help="benchmark runs: the suite's and scenarios' name")
    imp.add_argument("--effect", action="append", default=[], metavar="NAME=read|write",
                     help="benchmark runs: a function's effect where the guess from its name is wrong")
    imp.add_argument("--format", dest="trace_format", choices=["openai-chat", "openai-agents", "otel-genai"],
                     help="traces: the format of FILE")
    imp.set_defaults(handler=_import)

    agree = commands.add_parser("agreement", help="lobeval's verdict against an imported benchmark's: confusion "
                                                  "matrix, agreement, Cohen's kappa, pass^k, disagreements")
    agree.add_argument("run_dir", metavar="RUN_DIR")
    agree.set_defaults(handler=_agreement)

    calibrate = commands.add_parser("calibrate", help="how far each judge agrees with the analysts' verdicts on it: "
                                                      "agreement, Cohen's kappa, Krippendorff's alpha, confusion "
                                                      "matrices, the best pass threshold")
    calibrate.add_argument("--suite", help="the suite folder whose labels.jsonl holds the judge_verdict labels")
    calibrate.add_argument("--labels", metavar="FILE", help="labels file (default: <suite>/labels.jsonl)")
    calibrate.add_argument("--run", metavar="RUN_DIR", help="only the labels on this run's judge model; its suite "
                                                            "when --suite is not given")
    calibrate.set_defaults(handler=_calibrate)

    quarantine = commands.add_parser("quarantine", help="mark flaky cases whose conversations evaluate leaves out of "
                                                        "the bot's metrics (a label); --list them, --revoke one")
    quarantine.add_argument("case_ids", nargs="*", metavar="CASE_ID")
    quarantine.add_argument("--suite", required=True, help="the suite folder whose labels.jsonl receives the labels")
    quarantine.add_argument("--note", help="why the cases are quarantined (required to quarantine)")
    quarantine.add_argument("--author", help="default: your user name")
    quarantine.add_argument("--list", action="store_true", help="list the quarantined cases")
    quarantine.add_argument("--revoke", metavar="ID", help="revoke the quarantine label with this id")
    quarantine.set_defaults(handler=_quarantine)

    init = commands.add_parser(
        "init", help="a new suite folder from the bot's tools and the business data: tools.json, suite.json "
                     "inferred from the data (printed), the data as CSV (docs/cli.md#init)",
        description="Write a new suite at DIR from the bot's tools (a tools.json, an OpenAPI 3 document or an MCP "
                    "server) and its business data (a folder of CSV files, a SQLite file or a database URL, "
                    "snapshotted into CSV). suite.json is inferred from the data and printed with what could not "
                    "be inferred; bad input writes nothing. See docs/cli.md.")
    init.add_argument("dir", metavar="DIR", help="the new suite folder (scenarios/<name>; its data goes to "
                                                 "data/<name>/); must not exist or be empty")
    init.add_argument("--tools", required=True, metavar="SOURCE",
                      help="a tools.json (OpenAI tool definitions, with or without lobeval's effect), an OpenAPI 3 "
                           "document (.json, .yaml), or an MCP server (a stdio command or a streamable HTTP URL)")
    init.add_argument("--data", required=True, metavar="SOURCE",
                      help="a folder of CSV files, a SQLite file, or a SQLAlchemy database URL whose driver is "
                           "installed (credentials are never recorded)")
    init.add_argument("--table", action="append", metavar="NAME",
                      help="only this table (or CSV file, without .csv); repeatable (default: all)")
    init.add_argument("--effect", action="append", default=[], metavar="NAME=read|write",
                      help="a tool's effect where its source does not say it or says it wrong (otherwise asked on a "
                           "terminal)")
    init.set_defaults(handler=_init)

    drafting = commands.add_parser("draft", help="draft a suite's templates.json from its tools and business data; "
                                                 "every draft proven before it is written (exit 1 if none passed)")
    drafting.add_argument("--suite", required=True, help="the suite folder: suite.json, tools.json and its data")
    drafting.add_argument("--out", help="the templates file to write (default: <suite>/templates.json)")
    drafting.add_argument("--force", action="store_true", help="overwrite --out when it exists")
    drafting.add_argument("--seed", type=int, default=42, metavar="S",
                          help="the seed generate will use: the records each draft is proven on (default 42)")
    drafting.add_argument("--target", help=f"{TARGET_HELP}, whose apply() replays the expected calls; "
                                           f"default: the suite's default_target")
    drafting.add_argument("--from-conversations", metavar="FILE",
                          help="draft regression cases from these conversations (conversations.jsonl of a run, or "
                               "traces imported with lobeval import) instead of from the data")
    drafting.add_argument("--about", metavar="FILE", help="a text describing the bot (its system prompt, its help "
                                                          "page) for the model that proposes further scenarios (not with "
                                                          "--from-conversations: it proposes none then)")
    drafting.set_defaults(handler=_draft)

    tools = commands.add_parser("tools", help="write a suite's tools.json from an MCP server's tool list")
    tools.add_argument("--from-mcp", required=True, metavar="SERVER",
                       help="a stdio command (e.g. 'python -m my.server') or a streamable HTTP URL")
    tools.add_argument("--effect", action="append", default=[], metavar="NAME=read|write",
                       help="a tool's effect where its annotations do not say (otherwise asked on a terminal)")
    tools.add_argument("--out", required=True, help="the tools.json to write")
    tools.set_defaults(handler=_tools)

    gate = commands.add_parser("gate", help="exit 1 when a run misses a threshold or regresses against a baseline")
    gate.add_argument("--run", required=True, metavar="RUN_DIR", help="the run folder to check")
    gate.add_argument("--baseline", metavar="RUN_DIR", help="fail on a significant regression against this run")
    gate.add_argument("--min", action="append", metavar="METRIC=VALUE",
                      help="fail when the run's metric is below VALUE or not measured; repeatable")
    gate.add_argument("--max-error-rate", type=SHARE, metavar="R",
                      help="fail when more than this share of conversations failed in the machinery "
                           "(machinery errors and judge errors)")
    gate.add_argument("--min-judge-coverage", type=SHARE, default=1.0, metavar="SHARE",
                      help="a --min on a judge metric fails when fewer than this share of the scored "
                           "conversations were judged (default 1.0: all)")
    gate.add_argument("--max-breaches", type=whole(0), metavar="N",
                      help="fail when more than N attack conversations were breached (default 0 when the run "
                           "has attack conversations; docs/metrics.md#security)")
    gate.add_argument("--max-user-fault-rate", type=SHARE, metavar="R",
                      help="fail when the simulated user spoiled more than this share of the scored conversations")
    gate.add_argument("--min-rule", choices=("interval", "point"), default="interval",
                      help="interval (default): a --min fails only when the metric's 95%% interval lies entirely "
                           "below it; point: when the value is below it")
    gate.set_defaults(handler=_gate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except LobevalError as exc:
        return _bad_input(args.command, str(exc))
    except OSError as exc:   # a path the system refuses (no permission, a file where a folder must be, disk full)
        return _bad_input(args.command, (f"{exc.filename}: " if exc.filename else "") + (exc.strerror or str(exc)))


def _bad_input(command: str, message: str) -> int:
    """Exit status 2 with one line."""
    print(f"lobeval {command}: error: {one_line(message)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
