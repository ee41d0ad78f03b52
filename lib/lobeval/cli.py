"""The `lobeval` command. Exit status: 0 done, 1 a quality gate failed (gate, run), 2 bad input or usage, 70 a fault
in lobeval itself."""
from __future__ import annotations

import argparse
import difflib
import getpass
import math
import platform
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from lobeval.core import checkout
from lobeval.core.errors import ConfigError, LobevalError, StageCrashed
from lobeval.workflow.roles import DEFAULT_TARGET, USER_KINDS
from lobeval.workspace.runs import find_run, scrub, secrets
from lobeval.simulation.users import STOP_PHRASE


def _generate(args: argparse.Namespace) -> int:
    from lobeval.generation.generate import generate

    result = generate(args.suite, args.out, cases_per_scenario=args.cases_per_scenario, seed=args.seed,
                      attacks=args.attacks, attack_roles=args.attack_roles)
    print(f"wrote {result.total} cases ({len(result.cases_per_scenario)} scenarios) to {result.path}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from lobeval.models.llm import run_sync

    return run_sync(_simulate_async(args))


async def _simulate_async(args: argparse.Namespace) -> int:
    from lobeval.workflow.roles import check_reachable, models_used, resolve
    from lobeval.workspace.runs import dataset_suite
    from lobeval.simulation.simulate import parse_shard, simulate_async

    parts = resolve("user", "completion_judge", "target", target=args.target, user=args.user,
                    concurrency=args.concurrency, stop_phrase=args.stop_phrase, target_timeout=args.target_timeout,
                    suite=args.suite or dataset_suite(args.dataset))
    target = parts.target
    try:
        await check_reachable(target.name, models_used(target=target.name, user=args.user, judge=True))
    except LobevalError:
        await target.aclose()
        raise
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
    from lobeval.evaluation.evaluate import evaluate
    from lobeval.models.llm import run_sync
    from lobeval.workflow.roles import check_reachable, models_used, resolve

    parts = resolve("judges", "embedder", judges=args.judges.split(",") if args.judges else None, suite=args.suite,
                    batch=args.batch)
    judged = not isinstance(parts.judges, str)   # else the reason they do not run
    run_sync(check_reachable(args.target, models_used(judge=judged, embedding=True)))
    result = evaluate(args.dataset, args.conversations, args.out, suite=args.suite, judges=parts.judges,
                      embedder=parts.embedder, labels=args.labels, target=args.target,
                      include_user_faults=args.include_user_faults)
    for line in result.summary():
        print(line)
    return 0


def _lint(args: argparse.Namespace) -> int:
    from lobeval.drafting.lint import lint

    problems = lint(args.dataset, suite=args.suite, target=args.target)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"lint: {len(problems)} problem(s) in {args.dataset}")
    return 2 if problems else 0


def _chat(args: argparse.Namespace) -> int:
    from lobeval.targets.chat import chat_loop

    chat_loop(args.target, debug=args.debug, timeout=args.target_timeout)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from lobeval.workflow.bench import bench_evaluate, bench_simulate

    if args.what == "claims":
        from lobeval.workflow.bench import CLAIMS_FILE, bench_claims, format_claims
        from lobeval.workflow.roles import NO_MODEL_HINT, model_client

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
        from lobeval.workflow.bench import EVALUATE_SIZES, format_evaluate

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
    from lobeval.workflow.estimate import estimate, format_estimate

    found = estimate(args.suite, cases_per_scenario=args.cases_per_scenario, seed=args.seed, trials=args.trials,
                     user=args.user, judges=args.judges.split(",") if args.judges else None, attacks=args.attacks,
                     target=args.target, batch=args.batch, attack_roles=args.attack_roles, max_turns=args.max_turns)
    for line in format_estimate(found):
        print(line)
    return 0


def _run(args: argparse.Namespace) -> int:
    from lobeval.analysis.compare import parse_minimum
    from lobeval.workflow.pipeline import run

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
    from lobeval.analysis.compare import compare_runs, format_comparison

    baseline, candidate = find_run(args.baseline, "baseline"), find_run(args.candidate, "candidate")
    print(format_comparison(compare_runs(baseline, candidate, target_difference=args.target_difference)))
    return 0


def _gate(args: argparse.Namespace) -> int:
    from lobeval.analysis.compare import format_gate, gate, parse_minimum

    run, baseline = find_run(args.run, "--run"), args.baseline and find_run(args.baseline, "--baseline")
    minimums = dict(parse_minimum(text) for text in args.min or [])
    checks = gate(run, minimums=minimums, baseline=baseline or None, max_error_rate=args.max_error_rate,
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
      option, or the bot or model endpoint that does not answer (is it running?); nothing is written
  70  an internal error, a fault in lobeval itself (also inside a stage notebook): one line says so,
      where its traceback was written and whom to send it to; a run stays resumable

Every command has --help. The reference: docs/cli.md (commands and options), docs/targets.md
(connecting a bot), docs/formats.md (suites and files), docs/models.md (models, judges, budget),
docs/metrics.md (the metrics)."""
# What argparse takes for a negative number rather than an option.
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")


def _import(args: argparse.Namespace) -> int:
    from lobeval.workspace import runs

    run_dir = runs.run_folder(args.run_id)
    if args.format == "traces":
        from lobeval.imports.traces import import_traces

        if args.domain or args.effect or args.tools:
            raise ConfigError("import traces: --domain, --effect and --tools are for benchmark runs (tau-bench, tau2)")
        if args.trace_format is None:
            raise ConfigError("import traces: give --format openai-chat, openai-agents or otel-genai")
        written = import_traces(args.file, args.trace_format, run_dir / "conversations.jsonl")
        print(f"{written} conversations written to {run_dir / 'conversations.jsonl'}")
        return 0
    from lobeval.imports.importers import import_tau2, import_tau_bench, parse_effects

    if args.trace_format is not None:
        raise ConfigError(f"import {args.format}: --format is for traces")
    importer = import_tau_bench if args.format == "tau-bench" else import_tau2
    result = importer(args.file, run_dir, domain=args.domain, effects=parse_effects(args.effect), tools=args.tools)
    print("\n".join(result.summary()))
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from lobeval.analysis.agreement import format_agreement, run_agreement

    print(format_agreement(run_agreement(find_run(args.run_dir, "RUN"))))
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
    from lobeval.imports.importers import parse_effects
    from lobeval.targets.mcp_tools import tools_from_mcp, write_tools_json

    tools = tools_from_mcp(args.from_mcp, effects=parse_effects(args.effect), ask=_asker())
    print(f"{len(tools)} tools written to {write_tools_json(tools, args.out)}")
    return 0


def _init(args: argparse.Namespace) -> int:
    from lobeval.imports.importers import parse_effects
    from lobeval.drafting.suite_init import init_suite

    result = init_suite(args.dir, args.tools, args.data, tables=args.table, effects=parse_effects(args.effect),
                        ask=_asker())
    for line in result.summary():
        print(line)
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from lobeval.judges.calibrate import calibrate, format_calibration
    from lobeval.core.records import read_labels, read_results
    from lobeval.workspace.runs import RESULTS_FILE

    run = find_run(args.run, "--run") if args.run else None
    scored_with = (read_results(run / RESULTS_FILE, rows=False).get("config") or {}) if run else {}
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
    from lobeval.drafting.draft import draft
    from lobeval.drafting.draft_model import about_text, drafter, model_drafts, summariser

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
    from lobeval.judges.labels import quarantine_cases, revoke_label
    from lobeval.core.records import read_labels

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
        super().__init__(*args, allow_abbrev=False, **{"formatter_class": HelpFormatter, **kwargs})

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


def suite_folder(text: str) -> str:
    """An argparse type: a suite folder, from the working folder or else from the checkout's root (`lobeval run`
    from any folder of the checkout finds scenarios/support_tickets)."""
    return checkout.in_checkout(text)


COUNT = whole(1)
SHARE = number(0, 1)
SECONDS = number(0, above=True)


def _target_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--target-timeout", type=SECONDS, default=60.0, metavar="SECONDS",
                        help=f"a target call that takes longer {what} (the bot's own model requests take "
                             f"LOBEVAL_TARGET_TIMEOUT_S, docs/models.md)")


def _target_options(parser: argparse.ArgumentParser) -> None:
    _target_timeout(parser, "ends the conversation as target_unavailable, a machinery error")
    parser.add_argument("--retry-errors", action="store_true",
                        help="on resume, run again the conversations that ended in a machinery error "
                             "(llm_error, target_unavailable, budget_spent)")


TARGET_HELP = "module:attr (a Python class or factory) or http(s)://host/base; see docs/targets.md"
USER_HELP = "scripted (offline) or llm (a model plays the user; docs/models.md)"
SAMPLE_SUITE = "scenarios/support_tickets"
SUITE_HELP = "the suite folder, from the working folder or else from the checkout's root (docs/formats.md)"
CASES_HELP = "test cases drawn per scenario template"
SEED_HELP = "the seed the cases are drawn with: the same suite, seed and count give the same cases"
CONCURRENCY_HELP = "conversations at a time"
RUN_HELP = "a run: its id (a folder under runs/, or $LOBEVAL_RUNS) or its folder"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """After each option's help its default, `(default: 3)`, unless it has none of its own (None: the help says in
    words what happens without it; a flag: off)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)


def _command(commands: Any, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """A command whose --help starts with `description`, else with its one-line `help` as a sentence."""
    return commands.add_parser(name, help=help, description=description or f"{help[0].upper()}{help[1:]}.")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="lobeval", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    gen = _command(commands, "generate", help="fill scenario templates with business data into a dataset")
    gen.add_argument("--suite", type=suite_folder, metavar="DIR", required=True,
                     help="the suite folder, e.g. scenarios/support_tickets (docs/formats.md)")
    gen.add_argument("--cases-per-scenario", type=COUNT, default=3, metavar="N", help=CASES_HELP)
    gen.add_argument("--seed", type=int, default=42, metavar="S", help=SEED_HELP)
    gen.add_argument("--attacks", nargs="?", const="with", choices=("with", "only"),
                     help="add attack cases from the suite's policy.json, N per category (alone with: --attacks "
                          "only; default: none); docs/metrics.md#security")
    _attack_roles_option(gen)
    gen.add_argument("--out", required=True, help="the dataset file to write (JSONL)")
    gen.set_defaults(handler=_generate)

    sim = _command(commands, "simulate", help="let a simulated user talk to the target, one conversation per "
                                                "case and trial; resumes when --out exists")
    sim.add_argument("--dataset", required=True, help="the test cases (JSONL), as generate writes them")
    sim.add_argument("--target", default=DEFAULT_TARGET, help=TARGET_HELP)
    sim.add_argument("--user", default="scripted", choices=USER_KINDS, help=USER_HELP)
    sim.add_argument("--suite", type=suite_folder, metavar="DIR",
                     help="the suite whose tools.json gives the scripted user the words of the functions and "
                          "arguments (default: the suite of the run whose folder holds --dataset, else none: "
                          "their names in words)")
    sim.add_argument("--trials", type=COUNT, default=1, metavar="K", help="conversations per case, for pass^k")
    sim.add_argument("--concurrency", type=COUNT, default=4, metavar="C", help=CONCURRENCY_HELP)
    sim.add_argument("--max-turns", type=COUNT, default=20, metavar="T",
                     help="user messages at most before a conversation is cut off")
    sim.add_argument("--stop-phrase", type=words, default=STOP_PHRASE, metavar="TEXT",
                     help="what the simulated user says to end a conversation (case-insensitive)")
    sim.add_argument("--scenarios", type=words, metavar="A,B", help="only these scenarios (default: all)")
    sim.add_argument("--limit", type=COUNT, metavar="N", help="only the first N cases, for a smoke run (default: all)")
    sim.add_argument("--shard", metavar="I/N", help="only every N-th case, starting at the I-th (default: all)")
    _target_options(sim)
    sim.add_argument("--out", required=True, help="conversations file (JSONL), appended to")
    sim.set_defaults(handler=_simulate)

    ev = _command(commands, "evaluate", help="score conversations against their cases; run the judges")
    ev.add_argument("--dataset", help="the test cases (JSONL) (default: none, when every conversation carries its "
                                      "expected_function_calls)")
    ev.add_argument("--conversations", required=True, nargs="+", metavar="FILE",
                    help="one or more conversation files (JSONL), joined; a (case, trial) pair twice is an error")
    ev.add_argument("--suite", type=suite_folder, metavar="DIR",
                    help="the suite folder: ignored functions, optional effects, tool effects and schemas, "
                         "labels.jsonl (default: none: the conversations alone)")
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

    lint = _command(commands, "lint", help="find impossible or trivially passed test cases (exit 2 if any)")
    lint.add_argument("--dataset", required=True, help="the test cases (JSONL) to check")
    lint.add_argument("--suite", type=suite_folder, metavar="DIR",
                      help="check the expected calls against the suite's tools.json too (default: not)")
    lint.add_argument("--target", help="replay the expected calls on this target, which needs its optional apply() "
                                       "(default: not)")
    lint.set_defaults(handler=_lint)

    chat = _command(commands, "chat", help="talk to a target yourself")
    chat.add_argument("--target", default=DEFAULT_TARGET, help=TARGET_HELP)
    chat.add_argument("--debug", action="store_true", help="show every function call with arguments and result")
    _target_timeout(chat, "is shown as a target error, and the chat goes on")
    chat.set_defaults(handler=_chat)

    bench = _command(commands, "bench", help="print speed figures: simulation against the fake endpoint, "
                                              "or scoring synthetic conversations; or the claims check's precision "
                                              "and recall on labelled conversations")
    bench.add_argument("what", choices=["simulate", "evaluate", "claims"],
                       help="simulate: conversations against the fake model endpoint; evaluate: scoring synthetic "
                            "conversations; claims: the claims check on labelled conversations")
    bench.add_argument("files", nargs="*", metavar="FILE",
                       help="claims: labelled JSONL files, taken together (docs/formats.md; default: the project's own "
                            "labelled set)")
    bench.add_argument("--conversations", type=COUNT, help="default: 200 to simulate; 10000 and then 100000 to evaluate")
    bench.add_argument("--concurrency", type=COUNT, default=32, metavar="C",
                       help="simulate: conversations at a time; claims --judge: requests at a time")
    bench.add_argument("--latency", type=number(0), default=0.1, metavar="SECONDS",
                       help="simulate: seconds the fake endpoint takes per model completion")
    bench.add_argument("--repeat", type=COUNT, default=1, metavar="R", help="evaluate: runs per size, for the spread")
    bench.add_argument("--judge", action="store_true", help="claims: also ask the claims judge on the judge model "
                                                            "(LOBEVAL_JUDGE_MODEL or LOBEVAL_MODEL; docs/models.md) "
                                                            "and print its figures beside the rules'")
    bench.add_argument("--azure", action="store_true", help="evaluate: score through azure-ai-evaluation's evaluate() "
                                                            "as when a Foundry project is configured (logging nothing)")
    bench.set_defaults(handler=_bench)

    run = _command(
        commands, "run", help="run the five stage notebooks into runs/<run_id>/, write the report and print the "
                              "quality gate's verdict: exit 1 when the gate fails; the same --run-id again resumes",
        description="Run the five stage notebooks into runs/<run_id>/ (or $LOBEVAL_RUNS/<run_id>/), write "
                    "report.html and print the quality gate's checks; exit 1 when the gate fails. Before stage 01 "
                    "the suite, the target, the --min metrics and the models the options need are checked, and an "
                    "HTTP target and every model endpoint must answer one request: a mistake or a stopped bot exits 2 "
                    "and writes nothing. The same --run-id again resumes. See docs/cli.md.")
    run.add_argument("--suite", type=suite_folder, default=SAMPLE_SUITE, metavar="DIR", help=SUITE_HELP)
    run.add_argument("--run-id", metavar="ID", help="the run folder's name under runs/; an existing run resumes "
                                                    "(default: the time and the suite's name)")
    run.add_argument("--cases-per-scenario", type=COUNT, default=3, metavar="N", help=CASES_HELP)
    run.add_argument("--seed", type=int, default=42, metavar="S", help=SEED_HELP)
    run.add_argument("--target", help=f"{TARGET_HELP}; default: the suite's default_target")
    run.add_argument("--user", default="scripted", choices=USER_KINDS, help=USER_HELP)
    run.add_argument("--trials", type=COUNT, default=1, metavar="K", help="conversations per case, for pass^k")
    run.add_argument("--concurrency", type=COUNT, default=4, metavar="C", help=CONCURRENCY_HELP)
    run.add_argument("--max-turns", type=COUNT, default=20, metavar="T",
                     help="user messages at most before a conversation is cut off")
    run.add_argument("--judges", metavar="A,B", help="the judges to run when a judge model is configured "
                                                     "(default: per_turn, goal, user_review, commitments, claims; all "
                                                     "adds the Azure evaluators; none switches them off); naming "
                                                     "them needs a judge model (docs/models.md)")
    run.add_argument("--min", action="append", metavar="METRIC=VALUE",
                     help="the quality gate's minimums (default Reliability=0.8 and Success=0.8); repeatable; "
                          "the metrics: docs/metrics.md")
    _target_options(run)
    run.add_argument("--max-error-rate", type=SHARE, default=0.05, metavar="R",
                     help="the gate fails when more than this share of conversations failed in the machinery")
    run.add_argument("--max-user-fault-rate", type=SHARE, default=0.2, metavar="R",
                     help="the gate fails when the simulated user spoiled more than this share of the scored "
                          "conversations")
    run.add_argument("--min-rule", choices=("point", "interval"), default="point",
                     help="point: a --min fails when the value is below it; interval: only when the metric's whole "
                          "95%% interval lies below it")
    run.add_argument("--attacks", nargs="?", const="with", choices=("with", "only"),
                     help="play attack cases from the suite's policy.json too (alone with: --attacks only; default: "
                          "none); a breach fails the gate (docs/metrics.md#security)")
    _attack_roles_option(run)
    _user_faults_option(run)
    run.add_argument("--batch", action="store_true",
                    help="send the judges' requests through the provider's Batch API, at its discount; waits for "
                         "the batch (LOBEVAL_BATCH_POLL_S between looks; docs/models.md)")
    run.add_argument("--estimate", action="store_true",
                     help="print the expected requests, tokens and cost by role instead, and run nothing "
                          "(as lobeval estimate)")
    run.set_defaults(handler=_run)

    est = _command(commands, "estimate", help="the expected model requests, tokens and cost by role of lobeval run "
                                               "with the same options; sends and writes nothing")
    est.add_argument("--suite", type=suite_folder, default=SAMPLE_SUITE, metavar="DIR", help=SUITE_HELP)
    est.add_argument("--cases-per-scenario", type=COUNT, default=3, metavar="N", help=CASES_HELP)
    est.add_argument("--seed", type=int, default=42, metavar="S", help=SEED_HELP)
    est.add_argument("--target", help=f"{TARGET_HELP}; default: the suite's default_target")
    est.add_argument("--user", default="scripted", choices=USER_KINDS, help=USER_HELP)
    est.add_argument("--trials", type=COUNT, default=1, metavar="K", help="conversations per case, for pass^k")
    est.add_argument("--max-turns", type=COUNT, default=20, metavar="T",
                     help="as lobeval run --max-turns: a conversation cut off there adds a completion check")
    est.add_argument("--judges", metavar="A,B", help="the judges the run would use (as lobeval run --judges; default: "
                                                     "the default judges when a judge model is named)")
    est.add_argument("--attacks", nargs="?", const="with", choices=("with", "only"),
                     help="the attack cases too, or alone with: --attacks only (as lobeval run --attacks; default: "
                          "none)")
    _attack_roles_option(est)
    est.add_argument("--batch", action="store_true", help="the judges' requests at the Batch API's discount")
    est.set_defaults(handler=_estimate)

    compare = _command(commands, "compare", help="compare two runs on their shared conversations: differences, "
                                                 "intervals, p-values, regressions, Success flips")
    compare.add_argument("baseline", metavar="RUN", help=f"the baseline: {RUN_HELP}")
    compare.add_argument("candidate", metavar="RUN", help=f"the candidate: {RUN_HELP}")
    compare.add_argument("--target-difference", type=number(0, 1, above=True), default=0.05, metavar="D",
                         help="the Success difference to size trials and cases for")
    compare.set_defaults(handler=_compare)

    imp = _command(commands, "import", help="a public benchmark run (tau-bench, tau2) with its verdicts, or production "
                                             "traces, as runs/<run_id>/ (docs/analysis.md, docs/formats.md)")
    imp.add_argument("format", choices=["tau-bench", "tau2", "traces"],
                     help="tau-bench or tau2: a benchmark run with its verdicts; traces: production conversations")
    imp.add_argument("file", metavar="FILE", help="tau-bench results .json; tau2 results.json or its folder, a "
                                                  "submission's trajectory file or a list of simulations; a traces file")
    imp.add_argument("--run-id", required=True, metavar="ID", help="the run folder to write: runs/<ID>/")
    imp.add_argument("--domain", help="benchmark runs: the suite's and scenarios' name (default: the benchmark's "
                                      "domain)")
    imp.add_argument("--effect", action="append", default=[], metavar="NAME=read|write",
                     help="benchmark runs: a function's effect where the guess from its name is wrong; repeatable "
                          "(default: the guess)")
    imp.add_argument("--tools", metavar="SOURCE",
                     help="benchmark runs: the functions' descriptions, argument types and effects, from the sources "
                          "`init --tools` reads (tools.json, OpenAPI, an MCP server) or tau2-bench's "
                          "src/tau2/domains/<domain>/tools.py (default: the functions the run names, without schemas)")
    imp.add_argument("--format", dest="trace_format", choices=["openai-chat", "openai-agents", "otel-genai"],
                     help="traces: the format of FILE (required for traces)")
    imp.set_defaults(handler=_import)

    agree = _command(commands, "agreement", help="lobeval's verdict against an imported benchmark's: confusion "
                                                  "matrix, agreement, Cohen's kappa, pass^k, disagreements")
    agree.add_argument("run_dir", metavar="RUN", help=f"an imported benchmark run: {RUN_HELP}")
    agree.set_defaults(handler=_agreement)

    calibrate = _command(commands, "calibrate", help="how far each judge agrees with the analysts' verdicts on it: "
                                                      "agreement, Cohen's kappa, Krippendorff's alpha, confusion "
                                                      "matrices, the best pass threshold")
    calibrate.add_argument("--suite", type=suite_folder, metavar="DIR",
                           help="the suite folder whose labels.jsonl holds the judge_verdict labels (default: the "
                                "suite --run was scored with)")
    calibrate.add_argument("--labels", metavar="FILE", help="labels file (default: <suite>/labels.jsonl)")
    calibrate.add_argument("--run", metavar="RUN", help=f"only the labels on this run's judge model; its suite when "
                                                        f"--suite is not given ({RUN_HELP}; default: every label)")
    calibrate.set_defaults(handler=_calibrate)

    quarantine = _command(commands, "quarantine", help="mark flaky cases whose conversations evaluate leaves out of "
                                                        "the bot's metrics (a label); --list them, --revoke one")
    quarantine.add_argument("case_ids", nargs="*", metavar="CASE_ID", help="the cases to quarantine")
    quarantine.add_argument("--suite", type=suite_folder, metavar="DIR", required=True,
                            help="the suite folder whose labels.jsonl receives the labels")
    quarantine.add_argument("--note", help="why the cases are quarantined (required to quarantine)")
    quarantine.add_argument("--author", help="default: your user name")
    quarantine.add_argument("--list", action="store_true", help="list the quarantined cases")
    quarantine.add_argument("--revoke", metavar="ID", help="revoke the quarantine label with this id (one of case IDs, "
                                                           "--list and --revoke is required)")
    quarantine.set_defaults(handler=_quarantine)

    init = _command(
        commands, "init", help="a new suite folder from the bot's tools and the business data: tools.json, suite.json "
                               "inferred from the data (printed), the data as CSV (docs/cli.md#a-new-suite-init)",
        description="Write a new suite at DIR from the bot's tools (a tools.json, an OpenAPI 3 document or an MCP "
                    "server) and its business data (a folder of CSV files, a SQLite file or a database URL, "
                    "snapshotted into CSV). suite.json is inferred from the data and printed with what could not "
                    "be inferred; bad input writes nothing. See docs/cli.md#a-new-suite-init.")
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
                      help="a tool's effect where its source does not say it or says it wrong; repeatable "
                           "(default: asked on a terminal)")
    init.set_defaults(handler=_init)

    drafting = _command(
        commands, "draft", help="draft a suite's templates.json from its tools and business data; every draft proven "
                                "before it is written (exit 1 if none passed)",
        description="Draft the scenario templates of a suite (its templates.json, or --out) from its suite.json, "
                    "tools.json and business data: for every write function, scenarios whose expected calls take "
                    "their values from the data, a variant where the user leaves out a required value, and a request "
                    "no function serves; with a judge model configured, the model's proposals too. Every draft is "
                    "proven before it is written (generate's checks, the lint, a replay of its expected calls on "
                    "--target); each rejected one is printed with its reason, then what the drafts cover. Exit 1 "
                    "when no draft passed. See docs/cli.md#a-suite-for-your-own-bot.")
    drafting.add_argument("--suite", type=suite_folder, metavar="DIR", required=True,
                          help="the suite folder: suite.json, tools.json and its data")
    drafting.add_argument("--out", metavar="FILE", help="the templates file to write (default: "
                                                        "<suite>/templates.json)")
    drafting.add_argument("--force", action="store_true", help="overwrite --out when it exists")
    drafting.add_argument("--seed", type=int, default=42, metavar="S",
                          help="the seed generate will use: the records each draft is proven on")
    drafting.add_argument("--target", help=f"{TARGET_HELP}, whose apply() replays the expected calls; "
                                           f"default: the suite's default_target")
    drafting.add_argument("--from-conversations", metavar="FILE",
                          help="draft regression cases from these conversations (conversations.jsonl of a run, or "
                               "traces imported with lobeval import) instead of from the data (default: from the "
                               "data)")
    drafting.add_argument("--about", metavar="FILE", help="a text describing the bot (its system prompt, its help "
                                                          "page) for the model that proposes further scenarios (not with "
                                                          "--from-conversations: it proposes none then; default: "
                                                          "the tools and the data alone)")
    drafting.set_defaults(handler=_draft)

    tools = _command(commands, "tools", help="write a suite's tools.json from an MCP server's tool list")
    tools.add_argument("--from-mcp", required=True, metavar="SERVER",
                       help="a stdio command (e.g. 'python -m my.server') or a streamable HTTP URL")
    tools.add_argument("--effect", action="append", default=[], metavar="NAME=read|write",
                       help="a tool's effect where its annotations do not say; repeatable (default: asked on a "
                            "terminal)")
    tools.add_argument("--out", required=True, help="the tools.json to write")
    tools.set_defaults(handler=_tools)

    gate = _command(commands, "gate", help="exit 1 when a run misses a threshold or regresses against a baseline")
    gate.add_argument("--run", required=True, metavar="RUN", help=f"the run to check: {RUN_HELP}")
    gate.add_argument("--baseline", metavar="RUN",
                      help=f"fail on a significant regression against this run ({RUN_HELP}; default: no comparison)")
    gate.add_argument("--min", action="append", metavar="METRIC=VALUE",
                      help="fail when the run's metric is below VALUE or not measured; repeatable (default: none)")
    gate.add_argument("--max-error-rate", type=SHARE, metavar="R",
                      help="fail when more than this share of conversations failed in the machinery "
                           "(machinery errors and judge errors; default: not checked)")
    gate.add_argument("--min-judge-coverage", type=SHARE, default=1.0, metavar="SHARE",
                      help="a --min on a judge metric fails when fewer than this share of the scored "
                           "conversations were judged (1.0: all)")
    gate.add_argument("--max-breaches", type=whole(0), metavar="N",
                      help="fail when more than N attack conversations were breached (default 0 when the run "
                           "has attack conversations; docs/metrics.md#security)")
    gate.add_argument("--max-user-fault-rate", type=SHARE, metavar="R",
                      help="fail when the simulated user spoiled more than this share of the scored conversations "
                           "(default: not checked)")
    gate.add_argument("--min-rule", choices=("interval", "point"), default="interval",
                      help="interval: a --min fails only when the metric's 95%% interval lies entirely below it; "
                           "point: when the value is below it")
    gate.set_defaults(handler=_gate)
    return parser


INTERNAL_ERROR = 70
"""The exit status of a fault in lobeval itself (sysexits' EX_SOFTWARE): never 1, which CI reads as a failed gate,
nor 2, bad input."""
REPORT_TO = "whoever looks after lobeval for your team (README.md, section 'Reporting a fault')"
"""lobeval has no public tracker: whoever looks after lobeval for the team that runs it takes the reports."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:   # a bare `lobeval`, as pip: the help, exit 0
        parser.print_help()
        return 0
    try:
        return args.handler(args)
    except LobevalError as exc:
        return _bad_input(args.command, str(exc))
    except OSError as exc:   # a path the system refuses (no permission, a file where a folder must be, disk full)
        return _bad_input(args.command, (f"{exc.filename}: " if exc.filename else "") + (exc.strerror or str(exc)))
    except Exception as exc:   # a bug in lobeval: never a verdict, and never taken for bad input
        return _internal_error(args.command, exc, sys.argv[1:] if argv is None else argv)


def _internal_error(command: str, exc: Exception, argv: list[str]) -> int:
    """Exit status INTERNAL_ERROR with one line naming lobeval as at fault, the file the command and the traceback
    went to (scrubbed of the key variables' values) and whom to send it to. A stage notebook's crash (StageCrashed)
    names the stage, its traceback and its executed notebook, kept in the run folder. A run stays resumable: its
    lock is released on the way out, its finished stages kept."""
    try:
        release = version("lobeval")
    except PackageNotFoundError:
        release = "unknown"
    crashed = exc if isinstance(exc, StageCrashed) else None
    trace = (f"stage {crashed.stage}, executed notebook {crashed.notebook}\n{crashed.traceback}\n" if crashed
             else "".join(traceback.format_exception(exc)))
    text = (f"lobeval {' '.join(argv)}\nlobeval {release}, Python {platform.python_version()}, "
            f"{platform.platform()}\n\n{trace}")
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False,
                                         prefix=f"lobeval-crash-{time.strftime('%Y%m%d-%H%M%S')}-")
    with handle:
        handle.write(scrub(text, secrets()))
    what = one_line(scrub(str(exc) if crashed else f"{type(exc).__name__}: {exc}", secrets()))
    where = f" in stage {crashed.stage}" if crashed else ""
    kept = f"; the executed notebook is kept at {crashed.notebook}" if crashed else ""
    resume = "; the run resumes with the same --run-id" if command == "run" else ""
    print(f"lobeval {command}: internal error{where}, a fault in lobeval and not in your input or your bot ({what})"
          f"{kept}; the command and the traceback are in {handle.name}: send that file to {REPORT_TO}{resume}",
          file=sys.stderr)
    return INTERNAL_ERROR


def _bad_input(command: str, message: str) -> int:
    """Exit status 2 with one line."""
    print(f"lobeval {command}: error: {one_line(message)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
