"""Stage 2 machinery: termination, failures as data, resume (also after kill -9), selection."""
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from http_target import serve
from lobeval.cli import main
from lobeval.models.llm import BudgetExceeded, LLMClient, Usage, resolve_model
from lobeval.core.records import Case, appending, write_jsonl
from lobeval.simulation.simulate import converse, finished_pairs, overview, select_cases, simulate_async
from lobeval.targets.targets import load_target
from lobeval.models.testing import FakeOpenAI, json_reply
from lobeval.simulation.users import LLMUser, ScriptedUser
from helpers import read_jsonl
from test_users import BOOKING, leave_case
from toy_leave_bot import BrokenBot, GatedLeaveBot, LeaveBot, UnavailableBot


def leave_dataset(path, n=6):
    cases = [leave_case().model_copy(update={"case_id": f"book_leave-{i:03d}",
                                             "scenario_name": "book_leave" if i % 2 else "other"}).model_dump()
             for i in range(n)]
    return write_jsonl(path, cases)


def run_sim(dataset, out, **kw):
    kw.setdefault("target", load_target("toy_leave_bot:LeaveBot"))
    kw.setdefault("user", ScriptedUser())
    return asyncio.run(simulate_async(dataset, out, progress=False, **kw))


def test_every_case_and_trial_is_written_once_with_the_spec_fields(tmp_path):
    dataset = leave_dataset(tmp_path / "d.jsonl")
    result = run_sim(dataset, tmp_path / "c.jsonl", trials=2, concurrency=3)
    records = read_jsonl(tmp_path / "c.jsonl")
    assert result.written == 12 and result.skipped == 0
    assert sorted((r["case_id"], r["trial"]) for r in records) == \
        sorted((f"book_leave-{i:03d}", t) for i in range(6) for t in range(2))
    record = records[0]
    assert {"case_id", "trial", "scenario_name", "messages", "function_calls", "termination", "usage", "error",
            "duration_s", "target", "user_simulator"} <= record.keys()
    assert record["function_calls"][0]["turn"] == record["termination"]["turns"] - 1   # the "yes" turn
    assert record["usage"]["target"]["calls"] == record["termination"]["turns"] - 1
    assert result.terminations == {"user_finished": 12}


def test_target_usage_adds_up_what_each_reply_reports(tmp_path, monkeypatch):
    class Costly:
        def start(self, case):
            return self

        def send(self, message):
            return {"text": "Noted. Anything else?", "usage": {"prompt_tokens": 100, "completion_tokens": 7,
                                                              "cost_usd": 0.25}}

    monkeypatch.setattr(sys.modules[__name__], "Costly", Costly, raising=False)
    dataset = leave_dataset(tmp_path / "d.jsonl", n=1)
    run_sim(dataset, tmp_path / "c.jsonl", target=load_target(f"{__name__}:Costly"), max_turns=2)
    [record] = read_jsonl(tmp_path / "c.jsonl")
    usage = record["usage"]["target"]
    assert record["termination"] == {"reason": "max_turns", "turns": 2}
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"], usage["cost_usd"]) == (2, 200, 14, 0.5)


def test_the_cached_prompt_tokens_an_http_bot_reports_as_openai_does_reach_the_reports_cost_table(tmp_path):
    from lobeval.core.protocol import Reply
    from lobeval.analysis.report import cost_by_role

    class Cached:   # behind HTTP: its replies' usage as its model endpoint reported it, 90 % read from cache
        async def start(self, case):
            return self

        async def send(self, message):
            return Reply("Noted. Anything else?", usage={"prompt_tokens": 1000, "completion_tokens": 7,
                                                         "prompt_tokens_details": {"cached_tokens": 900}})

    dataset = leave_dataset(tmp_path / "d.jsonl", n=1)
    with serve(Cached()) as server:
        run_sim(dataset, tmp_path / "c.jsonl", target=load_target(server.url), max_turns=2)
    [record] = read_jsonl(tmp_path / "c.jsonl")
    usage = record["usage"]["target"]
    assert (usage["prompt_tokens"], usage["cached_prompt_tokens"]) == (2000, 1800)
    table = cost_by_role({"usage": record["usage"]})
    assert table.loc["bot (target)", "prompt tokens cached"] == "90%"


def test_rerun_resumes_skipping_finished_pairs_and_cuts_a_torn_last_line(tmp_path):
    dataset = leave_dataset(tmp_path / "d.jsonl")
    out = tmp_path / "c.jsonl"
    run_sim(dataset, out, limit=3)
    with out.open("a") as handle:
        handle.write('{"case_id": "book_leave-005", "tri')           # killed in the middle of a write
    assert finished_pairs(out) == {(f"book_leave-{i:03d}", 0) for i in range(3)}
    result = run_sim(dataset, out)
    assert (result.written, result.skipped) == (3, 3)
    assert sorted(r["case_id"] for r in read_jsonl(out)) == [f"book_leave-{i:03d}" for i in range(6)]


def complete_lines(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_resume_survives_kill_9(tmp_path):
    dataset = leave_dataset(tmp_path / "d.jsonl", n=40)
    out, gate = tmp_path / "c.jsonl", tmp_path / "gate"
    command = [sys.executable, "-m", "lobeval", "simulate", "--dataset", str(dataset), "--out", str(out),
               "--target", "toy_leave_bot:GatedLeaveBot", "--concurrency", "2", "--trials", "2"]
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__)), "TOY_GATE": str(gate)}
    # The first conversations finish; every later one waits at the gate, so the run is killed
    # mid-way, with conversations under way, however fast or slow this machine is.
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120   # generous: only a broken run takes this long
        while complete_lines(out) < GatedLeaveBot.OPEN and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    partial = read_jsonl(out)
    assert GatedLeaveBot.OPEN <= len(partial) < 80
    assert [r["termination"]["reason"] for r in partial[:GatedLeaveBot.OPEN]] == ["user_finished"] * GatedLeaveBot.OPEN
    partial = [(r["case_id"], r["trial"]) for r in partial]
    gate.touch()
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=300)
    pairs = [(r["case_id"], r["trial"]) for r in read_jsonl(out)]
    assert pairs[:len(partial)] == partial
    assert len(pairs) == len(set(pairs)) == 80


def test_select_by_scenario_shard_and_limit():
    cases = [Case(case_id=f"c{i}", scenario_name="a" if i < 4 else "b", user_instructions="x") for i in range(8)]
    assert [c.case_id for c in select_cases(cases, scenarios=["b"])] == ["c4", "c5", "c6", "c7"]
    shards = [[c.case_id for c in select_cases(cases, shard=(i, 3))] for i in (1, 2, 3)]
    assert shards == [["c0", "c3", "c6"], ["c1", "c4", "c7"], ["c2", "c5"]]
    assert [c.case_id for c in select_cases(cases, scenarios=["a"], limit=2)] == ["c0", "c1"]


def test_unknown_scenario_and_bad_shard_are_bad_input(tmp_path, capsys):
    dataset = leave_dataset(tmp_path / "d.jsonl")
    base = ["simulate", "--dataset", str(dataset), "--out", str(tmp_path / "c.jsonl"),
            "--target", "toy_leave_bot:LeaveBot"]
    assert main(base + ["--scenarios", "nope"]) == 2
    assert "unknown scenario(s) nope; the dataset has: book_leave, other" in capsys.readouterr().err
    assert main(base + ["--shard", "4/3"]) == 2
    assert "--shard '4/3': I must be between 1 and N" in capsys.readouterr().err
    assert not (tmp_path / "c.jsonl").exists()


def test_a_malformed_dataset_line_is_bad_input_naming_the_line(tmp_path, capsys):
    dataset = leave_dataset(tmp_path / "d.jsonl")
    with dataset.open("a") as handle:
        handle.write('{"case_id": "x"}\n')
    assert main(["simulate", "--dataset", str(dataset), "--out", str(tmp_path / "c.jsonl"),
                 "--target", "toy_leave_bot:LeaveBot"]) == 2
    assert "d.jsonl: line 7 (case x): field 'scenario_name': is required" in capsys.readouterr().err


def test_a_broken_target_is_recorded_on_the_conversation_not_raised(tmp_path):
    record = asyncio.run(converse(leave_case(), 0, load_target("toy_leave_bot:BrokenBot"), ScriptedUser()))
    assert record["termination"]["reason"] == "target_error"
    assert record["error"] == "send failed: RuntimeError: database connection lost"
    assert [m["role"] for m in record["messages"]] == ["assistant", "user", "assistant", "user"]


def test_a_target_whose_infrastructure_failed_is_a_machinery_error():
    record = asyncio.run(converse(leave_case(), 0, load_target("toy_leave_bot:UnavailableBot"), ScriptedUser()))
    assert record["termination"]["reason"] == "target_unavailable"
    assert record["error"] == "send failed: TargetUnavailable: database connection lost"
    assert [m["role"] for m in record["messages"]] == ["assistant", "user", "assistant", "user"]


def test_an_http_target_answering_503_is_a_machinery_error():
    async def talk(url):
        target = load_target(url)
        try:
            return await converse(leave_case(), 0, target, ScriptedUser())
        finally:
            await target.aclose()

    with serve(UnavailableBot()) as server:
        record = asyncio.run(talk(server.url))
    assert record["termination"]["reason"] == "target_unavailable"
    assert record["error"] == "send failed: HTTP 503: Service Unavailable database connection lost"


def test_an_http_bot_that_stops_mid_run_loses_the_rest_to_machinery_errors_and_retry_errors_runs_them(tmp_path):
    async def simulate(url, **kw):
        target = load_target(url, timeout=5)
        try:
            return await simulate_async(dataset, out, target=target, user=ScriptedUser(), concurrency=1,
                                        progress=False, **kw)
        finally:
            await target.aclose()

    dataset, out = leave_dataset(tmp_path / "d.jsonl", n=5), tmp_path / "c.jsonl"
    with serve(LeaveBot(), stop_after=2) as server:   # serves two conversations, then refuses every connection
        url, port = server.url, server.server_address[1]
        result = asyncio.run(simulate(url))
    assert dict(result.terminations) == {"user_finished": 2, "target_unavailable": 3}
    lost = [record for record in read_jsonl(out) if record["termination"]["reason"] == "target_unavailable"]
    assert [record["error"] for record in lost] == [
        f"start failed: POST {url}/sessions: ConnectError: All connection attempts failed"] * 3
    assert all(record["messages"] == [] and record["function_calls"] == [] for record in lost)

    with serve(LeaveBot(), port=port):   # back, at the same address
        result = asyncio.run(simulate(url, retry_errors=True))
    assert (result.written, result.skipped, result.retried) == (3, 2, 3)
    assert {record["termination"]["reason"] for record in read_jsonl(out)} == {"user_finished"}


def test_a_target_that_misses_the_deadline_is_a_machinery_error():
    target = load_target("toy_leave_bot:HangingBot", timeout=0.01)
    record = asyncio.run(converse(leave_case(), 0, target, ScriptedUser()))
    assert record["termination"]["reason"] == "target_unavailable"
    assert record["error"] == "send failed: timed out after 0.01 s"


def test_a_spent_budget_ends_the_conversation_as_budget_spent():
    class Broke:
        name = "llm:fake-model"

        def start(self, case):
            return self

        async def reply(self, bot_text):
            raise BudgetExceeded("budget of $1.00 spent ($1.0020)")

    record = asyncio.run(converse(leave_case(), 0, load_target("toy_leave_bot:LeaveBot"), Broke()))
    assert (record["termination"]["reason"], record["error"]) == ("budget_spent", "budget of $1.00 spent ($1.0020)")


def test_retry_errors_reruns_only_the_machinery_errors_of_the_selection(tmp_path, monkeypatch):
    class Flaky:
        """book_leave-001 and -003: the backend is down; -002: the bot itself fails; the rest work."""

        async def start(self, case):
            number = int(case["case_id"][-1])
            return await {1: UnavailableBot, 2: BrokenBot, 3: UnavailableBot}.get(number, LeaveBot)().start(case)

    monkeypatch.setattr(sys.modules[__name__], "Flaky", Flaky, raising=False)
    dataset, out = leave_dataset(tmp_path / "d.jsonl", n=4), tmp_path / "c.jsonl"
    run_sim(dataset, out, target=load_target(f"{__name__}:Flaky"))
    first = out.read_text().splitlines()
    endings = {r["case_id"]: r["termination"]["reason"] for r in read_jsonl(out)}
    assert endings == {"book_leave-000": "user_finished", "book_leave-001": "target_unavailable",
                       "book_leave-002": "target_error", "book_leave-003": "target_unavailable"}

    assert run_sim(dataset, out).written == 0                         # a plain resume skips them
    result = run_sim(dataset, out, limit=2, retry_errors=True)      # only book_leave-001 is selected
    assert (result.written, result.skipped, result.retried) == (1, 1, 1)
    assert "(1 already there, 1 machinery errors run again)" in result.summary()[0]
    result = run_sim(dataset, out, retry_errors=True)
    assert (result.written, result.skipped, result.retried) == (1, 3, 1)

    records = read_jsonl(out)
    assert sorted((r["case_id"], r["trial"]) for r in records) == [(f"book_leave-{i:03d}", 0) for i in range(4)]
    assert {r["case_id"]: r["termination"]["reason"] for r in records} == {
        "book_leave-000": "user_finished", "book_leave-001": "user_finished",
        "book_leave-002": "target_error", "book_leave-003": "user_finished"}
    kept = [line for line in first if '"book_leave-000"' in line or '"book_leave-002"' in line]
    assert out.read_text().splitlines()[:2] == kept                 # the other records are left as they were


@pytest.fixture
def model_env(monkeypatch, tmp_path):
    def configure(server):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LOBEVAL_MODEL", "fake-model")
        monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    return configure


def user_model_policy(request):
    """A fake user model: answers the leave bot from the business values in its system prompt."""
    system, last = request["messages"][0]["content"], request["messages"][-1]["content"]
    assert "ana@example.org" in system and "the session is finished" in system
    if "What do you need?" in last:
        return "I need to book some leave."
    if "(y/n)" in last:
        return "yes"
    if "Booked" in last:
        return "Great, the session is finished."
    return "\n".join(f"{k.replace('_', ' ')}: {v}" for k, v in BOOKING.items())


def test_llm_user_sees_only_text_with_roles_swapped_and_completes_the_task(model_env):
    with FakeOpenAI(user_model_policy) as server:
        model_env(server)
        user = LLMUser(LLMClient(resolve_model("user"), role="user", cache=False))
        case = leave_case(business_data={"employee": {"email": "ana@example.org"}})
        record = asyncio.run(converse(case, 0, load_target("toy_leave_bot:LeaveBot"), user))
        requests = list(server.requests)
    assert record["termination"]["reason"] == "user_finished"
    assert [c["arguments"] for c in record["function_calls"]] == [BOOKING]
    assert record["user_simulator"] == "llm:fake-model" and record["usage"]["user"]["calls"] == len(requests) == 4
    last = requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert "book_leave" not in json.dumps(last)    # tool traffic is never shown to the user


def test_llm_errors_mark_the_conversation_as_a_machinery_error(model_env):
    with FakeOpenAI(user_model_policy) as server:
        model_env(server)
        server.fail_next("500", times=10)
        client = LLMClient(resolve_model("user"), role="user", cache=False, max_attempts=2, backoff=(0.01, 0.02))
        record = asyncio.run(converse(leave_case(), 0, load_target("toy_leave_bot:LeaveBot"), LLMUser(client)))
    assert record["termination"]["reason"] == "llm_error"
    assert "after 2 attempts" in record["error"]


@pytest.mark.parametrize("max_turns, verdict, reason, judged", [
    (20, {"reason": "booked", "complete": True}, "user_finished", 0),    # the user said it: no request at all
    (6, {"reason": "booked", "complete": True}, "judged_complete", 1),   # cut off with the goal met
    (6, {"reason": "not yet", "complete": "no"}, "max_turns", 1),
    (6, {"score": 3}, "max_turns", 1),                                   # an unusable verdict never ends it well
])
def test_the_completion_judge_is_asked_once_and_only_about_a_conversation_cut_off_at_the_turn_limit(
        model_env, max_turns, verdict, reason, judged):
    from lobeval.judges.judges import CompletionJudge

    def policy(request):
        assert request["response_format"] == {"type": "json_object"}
        done = "Booked!" in request["messages"][1]["content"]
        return json_reply(verdict if done else {"reason": "nothing booked yet", "complete": False})

    with FakeOpenAI(policy) as server:
        model_env(server)
        judge = CompletionJudge(LLMClient(resolve_model("judge"), role="judge", cache=True))
        record = asyncio.run(converse(leave_case(task_completion="Leave is booked."), 0,
                                      load_target("toy_leave_bot:LeaveBot"), ScriptedUser(), judge=judge,
                                      max_turns=max_turns))
        asked = judged * (2 if "score" in verdict else 1)   # an unusable verdict is asked again
        assert server.count == asked
    assert record["termination"]["reason"] == reason
    assert len(record["function_calls"]) == 1
    if reason == "judged_complete":
        assert record["termination"]["judge_reason"] == "booked"
    assert (record["usage"]["judge"]["calls"], record["usage"]["judge"]["requests"]) == (judged, asked)


def test_bench_simulate_prints_its_figures(capsys, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LOBEVAL_MODEL", "LOBEVAL_CACHE_DIR", "LOBEVAL_STREAM"):
        monkeypatch.setenv(name, os.environ.get(name, ""))   # the bench sets them; restored afterwards
    assert main(["bench", "simulate", "--conversations", "8", "--concurrency", "4", "--latency", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("simulate: 8 conversations ({'user_finished': 8}), 48 model calls at 10 ms each, "
                        "concurrency 4")
    assert "ideal (calls x latency / concurrency) 0.12 s, ratio " in lines[1]
    assert lines[2].startswith("floor of this shape (whole waves of 4 conversations) 0.12 s, wall / floor ")
    assert lines[3].startswith("client CPU ") and "ms per model call" in lines[3] and "peak memory (RSS)" in lines[3]


def simulate_command(dataset, out):
    return [sys.executable, "-m", "lobeval", "simulate", "--dataset", str(dataset), "--out", str(out),
            "--target", "toy_leave_bot:LeaveBot"]


def test_a_second_simulate_on_the_same_out_is_refused_naming_the_holder(tmp_path):
    dataset, out = leave_dataset(tmp_path / "d.jsonl", n=2), tmp_path / "c.jsonl"
    run_sim(dataset, out, limit=1)
    before = out.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__))}
    with appending(out):      # this process is the first writer; the second is a real lobeval process
        second = subprocess.run(simulate_command(dataset, out), env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"lobeval simulate: error: {out}: file: is being appended to by process {os.getpid()}, which holds "
        f"{out}.lock: wait for it to finish"]
    assert out.read_bytes() == before
    assert run_sim(dataset, out).written == 1 and not (tmp_path / "c.jsonl.lock").exists()


def test_a_lock_left_by_a_killed_simulate_is_taken_over(tmp_path):
    dataset, out = leave_dataset(tmp_path / "d.jsonl", n=2), tmp_path / "c.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from lobeval.core.records import appending\n"
                               "with appending(Path(sys.argv[1])):\n print('held', flush=True); sys.stdin.read()",
         str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
    finally:
        holder.kill()
        holder.wait()
    assert str(holder.pid) in (tmp_path / "c.jsonl.lock").read_text()
    assert run_sim(dataset, out).written == 2
    assert not (tmp_path / "c.jsonl.lock").exists()


def test_an_out_that_holds_other_records_is_refused_and_left_as_it_was(tmp_path, capsys):
    dataset = leave_dataset(tmp_path / "d.jsonl", n=1)
    for out in (dataset, tmp_path / "results.json", tmp_path / "one_line.json"):
        if out.name == "results.json":
            out.write_text(json.dumps({"rows": [], "metrics": {}}, indent=1))
        elif out.name == "one_line.json":
            out.write_text('{"case_id": "book_leave-000"}')          # no newline: not a torn conversation either
        before = out.read_bytes()
        assert main(simulate_command(dataset, out)[3:]) == 2
        assert f"{out}: --out: " in capsys.readouterr().err
        assert out.read_bytes() == before


def test_the_overview_of_no_conversations_is_an_empty_table_and_of_one_a_line(tmp_path):
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    assert overview(empty).empty and list(overview(empty).columns) == ["scenario", "mean turns", "mean calls",
                                                                       "mean failed calls"]
    one = tmp_path / "one.jsonl"
    write_jsonl(one, [{"scenario_name": "s", "termination": {"reason": "user_stop", "turns": 3},
                       "function_calls": [{"functionName": "f", "error": "boom"}, {"functionName": "g"}]}])
    assert overview(one).to_dict("records") == [{"scenario": "s", "user_stop": 1, "mean turns": 3.0,
                                                 "mean calls": 2.0, "mean failed calls": 1.0}]


def test_the_summary_says_how_many_requests_each_role_sent_and_which_tokens_lobeval_estimated(tmp_path):
    from collections import Counter

    from lobeval.simulation.simulate import SimulationResult

    usage = {"user": Usage(calls=2, requests=5, prompt_tokens=900, completion_tokens=40, cost_usd=None).to_dict(),
             "target": Usage(calls=1, requests=1, prompt_tokens=300, completion_tokens=12, estimated_tokens=312,
                             cost_usd=None).to_dict()}
    lines = SimulationResult(tmp_path / "c.jsonl", 1, 0, Counter(user_finished=1), usage, 1.0).summary()
    assert lines[2:4] == ["usage user: 2 calls (0 cached), 5 requests, 900+40 tokens, unknown",
                          "usage target: 1 calls (0 cached), 1 requests, 300+12 tokens (312 estimated), unknown"]
