"""Benchmarks that print figures (never tests that assert a time): `lobeval bench ...`."""
from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import re
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from lobeval.models.testing import FakeOpenAI, tool_calls

CLAIMS_FILE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "claims" / "labelled.jsonl"
"""The project's own labelled conversations (`lobeval bench claims` without a FILE)."""
BENCH_TICKET = {"title": "Printer on floor 3 prints blank pages", "description": "Every job comes out blank.",
                "department_code": "IT", "priority": "Medium", "workflow_type": "Standard",
                "expected_outcome": "Printing works again.", "customer_visible": False}


def scripted_models(request: dict[str, Any]) -> Any:
    """The fake endpoint's script for both roles: the bot's model (it sends tools) and the user's."""
    messages = request["messages"]
    last = messages[-1]
    if request.get("tools"):
        if last["role"] == "tool":
            return "Done: your ticket is created. Anything else?"
        if sum(m["role"] == "user" for m in messages) >= 2:
            return tool_calls([("create_support_ticket", BENCH_TICKET)])
        return "Sure. What is the title of the ticket?"
    if "Done" in (last.get("content") or ""):
        return "Thanks, the session is finished."
    if "title" in (last.get("content") or ""):
        return f"The title is: {BENCH_TICKET['title']}"
    return "I need a new support ticket."


def _serve(latency: float, pipe: Connection) -> None:
    """The fake endpoint in a process of its own, as a real endpoint would be: its CPU is not the client's."""
    with FakeOpenAI(scripted_models, latency=latency) as server:
        pipe.send(server.base_url)
        pipe.recv()
        pipe.send(server.count)


@contextlib.contextmanager
def _endpoint(latency: float) -> Iterator[tuple[str, Callable[[], int]]]:
    """Start the fake endpoint in another process; yield its base URL and a function counting its calls."""
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=_serve, args=(latency, theirs), daemon=True)
    process.start()
    theirs.close()   # so that a server that dies ends our recv() with EOFError instead of a hang
    try:
        yield ours.recv(), lambda: (ours.send("count"), ours.recv())[1]
    finally:
        process.terminate()
        process.join()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _simulate_bench(conversations: int, concurrency: int, latency: float) -> dict[str, float]:
    from lobeval.generation.generate import generate
    from lobeval.workflow.roles import make_user
    from lobeval.simulation.simulate import simulate_async
    from lobeval.targets.targets import load_target

    suite = Path(__file__).resolve().parents[3] / "scenarios" / "support_tickets"
    with _endpoint(latency) as (base_url, count_calls), tempfile.TemporaryDirectory() as tmp:
        # A hosted model's latency: its requests are not streamed, as a hosted endpoint's are not (LOBEVAL_STREAM).
        os.environ.update({"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": base_url, "LOBEVAL_STREAM": "off",
                           "LOBEVAL_MODEL": "bench-model", "LOBEVAL_CACHE_DIR": str(Path(tmp) / "cache")})
        dataset = generate(suite, Path(tmp) / "dataset.jsonl", cases_per_scenario=conversations).path
        # With a model configured the sample bot runs its llm policy, so both roles hit the endpoint.
        target = load_target("lobeval.samples.support_tickets:SupportTicketBot")
        started, cpu = time.perf_counter(), time.process_time()
        result = await simulate_async(dataset, Path(tmp) / "conversations.jsonl", target=target,
                                      user=make_user("llm", concurrency=concurrency), concurrency=concurrency,
                                      scenarios=["create_ticket"], progress=False)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        await target.aclose()
        calls = count_calls()
    ideal = calls * latency / concurrency
    # Every bench conversation makes the same calls one after another, so they run in waves of
    # `concurrency`; no scheduler finishes before the last wave does.
    floor = math.ceil(result.written / concurrency) * calls / result.written * latency
    return {"conversations": result.written, "endings": dict(result.terminations), "model calls": calls,
            "wall s": wall, "client CPU s": cpu, "ideal s": ideal, "ratio": wall / ideal, "floor s": floor,
            "peak RSS MB": _peak_rss_mb()}


def bench_simulate(conversations: int = 200, concurrency: int = 32, latency: float = 0.1) -> dict[str, Any]:
    return asyncio.run(_simulate_bench(conversations, concurrency, latency))


def synthetic_work(conversations: int, seed: int = 0) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(conversation, case) pairs, one at a time: 5 expected calls and 6 actual ones (one extra), 5 arguments
    each, of every kind the scorer compares (text, ID, number, date, boolean); some values wrong."""
    import random

    rng = random.Random(seed)
    for n in range(conversations):
        expected, actual = [], []
        for f in range(5):
            arguments = {"title": f"Printer {n} on floor {f} prints blank pages", "ticket_id": f"TKT-{n}-{f}",
                         "hours": f + 1, "due_date": f"2026-0{f + 1}-1{f}", "visible": bool(f % 2)}
            expected.append({"functionName": f"function_{f}", "arguments": arguments})
            made = dict(arguments)
            if rng.random() < 0.3:
                made["title"] = made["title"].replace("blank", "empty")
            if rng.random() < 0.2:
                made["hours"] = f + 2
            made["due_date"] = f"1{f} {['Jan', 'Feb', 'Mar', 'Apr', 'May'][f]} 2026"
            actual.append({"functionName": f"function_{f}", "arguments": made, "result": {"ok": True},
                           "error": None, "turn": f + 1})
        actual.insert(rng.randrange(6), {"functionName": "function_0", "arguments": {"title": "again"},
                                         "result": {}, "error": None, "turn": 3})
        case = {"case_id": f"case-{n}", "scenario_name": f"scenario_{n % 10}", "expected_function_calls": expected,
                "expected_outputs": [f"TKT-{n}-0"]}
        conversation = {"case_id": case["case_id"], "trial": 0, "scenario_name": case["scenario_name"],
                        "function_calls": actual, "messages": [{"role": "assistant", "content": f"Done: TKT-{n}-0."}],
                        "termination": {"reason": "user_finished", "turns": 6}}
        yield conversation, case


def synthetic_scoring_work(conversations: int, seed: int = 0) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """`synthetic_work` as a list."""
    return list(synthetic_work(conversations, seed))


def write_synthetic(folder: str | Path, conversations: int, seed: int = 0) -> tuple[Path, Path]:
    """dataset.jsonl and conversations.jsonl of `synthetic_work` in `folder`, written one line at a time."""
    import orjson

    folder = Path(folder)
    dataset, transcripts = folder / "dataset.jsonl", folder / "conversations.jsonl"
    with dataset.open("wb") as cases, transcripts.open("wb") as talks:
        for conversation, case in synthetic_work(conversations, seed):
            cases.write(orjson.dumps({**case, "user_instructions": "Create the tickets."},
                                     option=orjson.OPT_APPEND_NEWLINE))
            talks.write(orjson.dumps(conversation, option=orjson.OPT_APPEND_NEWLINE))
    return dataset, transcripts


EVALUATE_SIZES = (10_000, 100_000)
_AZURE_CHILD = ("import functools, sys\n"
                "import lobeval.evaluation.evaluate\n"
                "lobeval.evaluation.evaluate.evaluate = functools.partial(lobeval.evaluation.evaluate.evaluate, azure=True)\n"
                "from lobeval.cli import main\n"
                "sys.exit(main())\n")
"""The child for --azure: `lobeval evaluate` as when a Foundry project is configured, but logging nothing."""
_TIME_LINE = re.compile(r"^time: [\d.]+ s in evaluate: (.*)$", re.MULTILINE)
_PHASE = re.compile(r"([a-z][a-z ]*?) (\d+(?:\.\d+)?) s")


def bench_evaluate(sizes: tuple[int, ...] = EVALUATE_SIZES, repeat: int = 1, azure: bool = False,
                   folder: str | Path | None = None) -> list[dict[str, Any]]:
    """`lobeval evaluate` on synthetic conversations (`synthetic_work`), the whole process in a subprocess,
    `repeat` times per size: per run its wall time, CPU time, peak memory (the child's ru_maxrss), rows per
    second and the seconds of each phase (evaluate's own "time:" line; "startup" is the rest: imports,
    options, the parts). The dataset and conversations files are written first, outside the measurement.
    `azure`: score through azure-ai-evaluation's evaluate() as when a Foundry project is configured (locally)."""
    found = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="lobeval-bench-", dir=folder) as tmp:
            dataset, transcripts = write_synthetic(tmp, size)
            runs = [_evaluate_once(Path(tmp), dataset, transcripts, size, azure) for _ in range(repeat)]
            results = Path(tmp) / "evaluation_results.json"
            from lobeval.core.records import read_results, rows_path

            summary = read_results(results, rows=False)
            found.append({"conversations": size, "runs": runs, "Reliability": summary["metrics"]["Reliability"],
                          "scored": summary["counts"]["scored"],
                          "results MB": results.stat().st_size / 1e6, "rows MB": rows_path(results).stat().st_size / 1e6,
                          "input MB": (dataset.stat().st_size + transcripts.stat().st_size) / 1e6})
    return found


def _evaluate_once(folder: Path, dataset: Path, transcripts: Path, size: int, azure: bool) -> dict[str, Any]:
    """One `lobeval evaluate` in a child process, its rusage taken with os.wait4 (the child's own ru_maxrss:
    what getrusage(RUSAGE_CHILDREN) reports after this child alone)."""
    import subprocess
    import sys

    env = {name: value for name, value in os.environ.items() if not name.startswith("LOBEVAL_EMBEDDING")}
    command = ["-c", _AZURE_CHILD] if azure else ["-m", "lobeval"]
    argv = [sys.executable, *command, "evaluate", "--dataset", str(dataset), "--conversations", str(transcripts),
            "--judges", "none", "--out", str(folder / "evaluation_results.json")]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        said, complained = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if child.returncode != 0:
        raise RuntimeError(f"lobeval evaluate exited {child.returncode}: {complained[-2000:]}")
    phases = _phases(said)
    phases["startup"] = max(wall - sum(phases.values()), 0.0)
    return {"wall s": wall, "CPU s": usage.ru_utime + usage.ru_stime, "peak MB": usage.ru_maxrss / 1024,
            "rows/s": size / wall, "phases": phases}


def _phases(output: str) -> dict[str, float]:
    """The seconds by phase of `lobeval evaluate`'s "time:" line."""
    line = _TIME_LINE.search(output)
    if line is None:
        raise RuntimeError(f"lobeval evaluate printed no time line: {output[-2000:]}")
    return {name: float(seconds) for name, seconds in _PHASE.findall(line.group(1))}


PHASE_GROUPS = {"startup": ("startup",), "read": ("read", "embeddings"), "azure": ("azure",), "score": ("score",),
                "claims/end states/judges": ("claims", "end states", "judges"), "summary": ("summary",),
                "write": ("write",)}
"""How the bench reports the phases: "startup" is the process's time outside evaluate() (imports, options)."""


def format_evaluate(figures: list[dict[str, Any]]) -> list[str]:
    """The bench's lines: per size, the median of the runs with their range, and the phases' shares."""
    def spread(values: list[float], fmt: str) -> str:
        middle = statistics.median(values)
        return format(middle, fmt) + (f" ({format(min(values), fmt)}–{format(max(values), fmt)})"
                                      if len(values) > 1 else "")

    lines = []
    for entry in figures:
        runs = entry["runs"]
        lines.append(f"evaluate: {entry['conversations']} synthetic conversations (5 expected calls, 6 actual, "
                     f"5 arguments each; {entry['input MB']:.0f} MB of input), the whole `lobeval evaluate` process, "
                     f"{len(runs)} run(s); Reliability {entry['Reliability']:.3f}")
        lines.append(f"  wall {spread([r['wall s'] for r in runs], '.2f')} s, CPU {spread([r['CPU s'] for r in runs], '.2f')} s, "
                     f"peak memory (RSS) {spread([r['peak MB'] for r in runs], '.0f')} MB, "
                     f"{spread([r['rows/s'] for r in runs], '.0f')} rows/s")
        shares = []
        for group, names in PHASE_GROUPS.items():
            values = [sum(r["phases"].get(name, 0.0) for name in names) / r["wall s"] * 100 for r in runs]
            if any(r["phases"].keys() & set(names) for r in runs):
                shares.append(f"{group} {spread(values, '.0f')} %")
        lines.append("  share of the wall time: " + ", ".join(shares))
        lines.append(f"  written: evaluation_results.json {entry['results MB'] * 1000:.0f} kB, "
                     f"evaluation_rows.jsonl {entry['rows MB']:.0f} MB")
    return lines


def bench_claims(paths: Sequence[str | Path], judge: Any = None, *, progress: bool = True) -> dict[str, Any]:
    """The claims check against labelled files taken together (docs/formats.md, "Claims benchmark"): right and
    wrong findings and misses in both directions (a disputed label counts neither way), by basis, the false alarms by
    the kind of conversation they came from, and, over the lines whose simulated-user faults are labelled and whose
    case is given, the simulated-user checks (`user_faults`). With `judge` (an LLMClient for the judge model), the
    claims judge too, on every conversation (lobeval.judges.judges, its cache, concurrency and budget): under "judge", the
    conversations it answered, its errors, and its figures and the rules' over the conversations it answered."""
    from lobeval.scoring.claims import find_claims, judged_claims
    from lobeval.models.llm import run_sync
    from lobeval.core.protocol import read_replies
    from lobeval.core.records import LabelledClaims, iter_jsonl, validated

    # the bot's replies read as evaluate reads them (a reply written as JSON as its text)
    labelled = [read_replies(validated(LabelledClaims, record, path, f"line {line}").model_dump())
                for path in paths for line, record in iter_jsonl(path)]
    rules = [find_claims(conversation, _tools_of(conversation)) for conversation in labelled]
    figures = {"conversations": len(labelled), **_claims_tally(labelled, rules),
               "user_faults": _user_fault_tally(labelled)}
    if judge is not None:
        verdicts = run_sync(_judge_claims(judge, labelled, progress))
        answered = [n for n, verdict in enumerate(verdicts) if verdict.get("claims") is not None]
        figures["judge"] = {
            "model": judge.config.model, "answered": len(answered),
            "errors": [f"{labelled[n]['case_id']}: {verdict['errors'][0]['error']}"
                       for n, verdict in enumerate(verdicts) if verdict.get("claims") is None],
            **_claims_tally([labelled[n] for n in answered],
                            [judged_claims(verdicts[n]["claims"], labelled[n], rules[n]) for n in answered]),
            "rules": _claims_tally([labelled[n] for n in answered], [rules[n] for n in answered])}
    return figures


def _tools_of(conversation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from lobeval.core.vocabulary import function_key

    return {function_key((tool.get("function") or {}).get("name") or ""): tool for tool in conversation["tools"]}


async def _judge_claims(client: Any, labelled: list[dict[str, Any]], progress: bool) -> list[dict[str, Any]]:
    """The claims judge's verdict (the row's `judges` shape) on each labelled conversation, with its own tools."""
    from tqdm.auto import tqdm

    from lobeval.judges.judges import ConversationJudges

    with tqdm(total=len(labelled), desc="claims judge", unit="conv", disable=not progress) as bar:
        async def one(conversation: dict[str, Any]) -> dict[str, Any]:
            verdict = await ConversationJudges(client, ["claims"], conversation["tools"]).judge(conversation, {})
            bar.update()
            return verdict

        return await asyncio.gather(*(one(conversation) for conversation in labelled))


def _claims_tally(labelled: list[dict[str, Any]], found: list[dict[str, Any]]) -> dict[str, Any]:
    """Each labelled conversation's findings (`found`, a row's `claims` shape) against its truth: a sentence found
    matches a labelled one when one holds the other (whitespace aside); a write by its call index. A finding that
    matches only a disputed label, and a disputed label, count neither way (`disputed`: how many findings did)."""
    tally = {direction: {"found": 0, "false": 0, "missed": 0, "disputed": 0}
             for direction in ("claimed_not_done", "done_not_told")}
    false_by_kind: dict[str, int] = {}
    by_basis: dict[str, list[int]] = {}
    for conversation, claims in zip(labelled, found):
        expected = conversation["expected"]
        bases: dict[str, str | None] = {}
        for item in claims["claimed_not_done"]:
            bases.setdefault(" ".join(item["text"].split()), item.get("basis"))
        truth = [" ".join(sentence.split()) for sentence in expected["claimed_not_done"]]
        disputed = [" ".join(sentence.split()) for sentence in expected.get("disputed") or []]
        verdicts = {text: "right" if _matches(text, truth) else "disputed" if _matches(text, disputed) else "wrong"
                    for text in bases}
        for text, basis in bases.items():
            if basis and verdicts[text] != "disputed":
                counts = by_basis.setdefault(basis, [0, 0])
                counts[0] += verdicts[text] == "right"
                counts[1] += 1
        writes = {item["actual_index"] for item in claims["done_not_told"]}
        untold, arguable = set(expected["done_not_told"]), set(expected.get("done_not_told_disputed") or [])
        for direction, right, wrong, neither, missed in (
                ("claimed_not_done", sum(v == "right" for v in verdicts.values()),
                 sum(v == "wrong" for v in verdicts.values()), sum(v == "disputed" for v in verdicts.values()),
                 sum(not _matches(sentence, list(bases)) for sentence in truth)),
                ("done_not_told", len(writes & untold), len(writes - untold - arguable), len(writes & arguable - untold),
                 len(untold - writes))):
            counts = tally[direction]
            counts["found"] += right
            counts["false"] += wrong
            counts["disputed"] += neither
            counts["missed"] += missed
        false = sum(v == "wrong" for v in verdicts.values()) + len(writes - untold - arguable)
        if false:
            false_by_kind[conversation["kind"]] = false_by_kind.get(conversation["kind"], 0) + false
    return {"directions": tally, "false_by_kind": false_by_kind, "by_basis": by_basis}


def _matches(text: str, sentences: list[str]) -> bool:
    return any(text in sentence or sentence in text for sentence in sentences)


def _user_fault_tally(labelled: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The simulated-user checks (lobeval.simulation.user_faults) on the lines whose faults are labelled (`user_faults` not null)
    and whose `case` is given: per check, the faults it flagged that a labeller put at that message (right; the
    conversation is spoiled there whatever check they named), at a message only a disputed label names (counted
    neither way) or at none (wrong); per labelled check, how many labelled faults a flag found at their message.
    None when no line has both."""
    from lobeval.simulation.user_faults import CHECKS, MARK_ONLY, user_faults

    lines = [conversation for conversation in labelled
             if conversation.get("user_faults") is not None and conversation.get("case") is not None]
    if not lines:
        return None
    # a mark only lobeval's scripted user leaves is no check of a labelled conversation's user
    flagged = {check: {"right": 0, "wrong": 0, "disputed": 0} for check in CHECKS if check not in MARK_ONLY}
    labels: dict[str, list[int]] = {}
    for conversation in lines:
        found = user_faults(conversation, conversation["case"], _tools_of(conversation))
        faulted = {fault["message_index"] for fault in conversation["user_faults"]}
        arguable = {fault["message_index"] for fault in conversation.get("user_faults_disputed") or []}
        for fault in found:
            where = fault["message_index"]
            flagged.setdefault(fault["check"], {"right": 0, "wrong": 0, "disputed": 0})[
                "right" if where in faulted else "disputed" if where in arguable else "wrong"] += 1
        hit = {fault["message_index"] for fault in found}
        for fault in conversation["user_faults"]:
            counts = labels.setdefault(fault["check"], [0, 0])
            counts[0] += fault["message_index"] in hit
            counts[1] += 1
    return {"conversations": len(lines), "flagged": flagged, "labelled": labels}


def wilson(right: int, total: int) -> tuple[float, float] | None:
    """The Wilson 95 % interval of right / total (scipy's), None when total is 0."""
    if not total:
        return None
    from scipy.stats import binomtest

    band = binomtest(right, total).proportion_ci(confidence_level=0.95, method="wilson")
    return float(band.low), float(band.high)


def share(right: int, total: int) -> str:
    """"0.556 [0.267, 0.811] (5 of 9)": a share with its Wilson interval and counts; "— (0 of 0)" of nothing."""
    band = wilson(right, total)
    if band is None:
        return f"— ({right} of {total})"
    return f"{right / total:.3f} [{band[0]:.3f}, {band[1]:.3f}] ({right} of {total})"


def format_claims(figures: dict[str, Any]) -> list[str]:
    """`bench_claims` as printed lines: precision and recall per direction, each with its Wilson 95 % interval (what
    disputed labels left uncounted said apart), then the false alarms by kind, the precision of claimed but not done
    by basis, the simulated-user checks when their faults are labelled, and each kind of offline finding against
    lobeval.scoring.trust's bar; with the claims judge, how many conversations it answered (and its errors), then its
    figures and the rules' over those conversations."""
    lines = [f"claims: {figures['conversations']} labelled conversations", *_claims_lines(figures)]
    if figures.get("user_faults"):
        lines += _user_fault_lines(figures["user_faults"])
    lines += _offline_lines(figures)
    judged = figures.get("judge")
    if judged is None:
        return lines
    from lobeval.core.stats import clip

    errors = judged["errors"]
    lines.append(f"claims judge ({judged['model']}): answered {judged['answered']} of {figures['conversations']} "
                 f"conversations" + (f"; {len(errors)} error{'' if len(errors) == 1 else 's'}: "
                                     + "; ".join(clip(" ".join(error.split())) for error in errors[:3])
                                     + ("; ..." if len(errors) > 3 else "") if errors else ""))
    if not judged["answered"]:
        return [*lines, "no figures of the judge: it answered no conversation"]
    lines.append(f"over the {judged['answered']} conversations the judge answered, the judge then the rules:")
    lines += [f"judge: {line}" for line in _claims_lines(judged)]
    lines += [f"rules: {line}" for line in _claims_lines(judged["rules"])]
    return lines


def _claims_lines(figures: dict[str, Any]) -> list[str]:
    lines = []
    for direction, counts in figures["directions"].items():
        found, false, missed = counts["found"], counts["false"], counts["missed"]
        aside = f"; {counts['disputed']} found only a disputed label" if counts.get("disputed") else ""
        lines.append(f"{direction.replace('_', ' ')}: precision {share(found, found + false)}, "
                     f"recall {share(found, found + missed)}{aside}")
    alarms = sorted(figures["false_by_kind"].items(), key=lambda item: (-item[1], item[0]))
    lines.append("false alarms by kind: " + (", ".join(f"{kind} {count}" for kind, count in alarms) or "none"))
    if figures["by_basis"]:
        lines.append("claimed not done, precision by basis: " + ", ".join(
            f"{basis} {share(right, total)}" for basis, (right, total) in sorted(
                figures["by_basis"].items(), key=lambda item: (-item[1][0] / item[1][1], item[0]))))
    return lines


def _user_fault_lines(tally: dict[str, Any]) -> list[str]:
    lines = [f"simulated-user checks: {tally['conversations']} conversations with labelled user faults"]
    for check, counts in tally["flagged"].items():
        right, wrong = counts["right"], counts["wrong"]
        found, total = tally["labelled"].get(check, [0, 0])
        aside = f"; {counts['disputed']} at a disputed label" if counts["disputed"] else ""
        lines.append(f"{check.replace('_', ' ')}: right {share(right, right + wrong)} of flagged, "
                     f"recall {share(found, total)} of labelled{aside}")
    others = {check: counts for check, counts in tally["labelled"].items() if check not in tally["flagged"]}
    if others:
        lines.append("labelled with no check of lobeval's: " + ", ".join(
            f"{check} {total} (flagged by another check at that message: {found})"
            for check, (found, total) in sorted(others.items())))
    return lines


def _offline_lines(figures: dict[str, Any]) -> list[str]:
    """Each kind of offline finding measured here, right of found, against lobeval.scoring.trust's bar: a fault or "to
    check" with these figures (the lines lobeval.scoring.trust.PRECISION is filled from)."""
    from lobeval.scoring import trust

    kinds = {f"claimed_not_done:{basis}": tuple(counts) for basis, counts in figures["by_basis"].items()}
    told = figures["directions"]["done_not_told"]
    kinds["done_not_told"] = (told["found"], told["found"] + told["false"])
    for check, counts in ((figures.get("user_faults") or {}).get("flagged") or {}).items():
        kinds[f"user_fault:{check}"] = (counts["right"], counts["right"] + counts["wrong"])
    lines = []
    for kind, (right, found) in sorted(kinds.items()):
        why = [*(["below %g" % trust.PRECISION_NEEDED] if not found or right / found < trust.PRECISION_NEEDED else []),
               *([f"fewer than {trust.FEWEST} found"] if found < trust.FEWEST else [])]
        lines.append(f"offline finding {kind}: right {right} of {found}: "
                     + (f"to check ({', '.join(why)})" if why else "a fault"))
    return lines
