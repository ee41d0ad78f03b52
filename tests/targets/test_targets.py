"""The target protocol: loading specs, the Python and HTTP adapters, and how failures surface."""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import read_jsonl
from http_target import Status, serve
from sockets import closed_port, resetting, silent
from lobeval.targets import targets
from lobeval.core.errors import RoleError, TargetUnavailable
from lobeval.core.records import write_jsonl
from lobeval.simulation.simulate import simulate_async
from lobeval.targets.targets import TargetError, TargetUnavailableError, load_target
from lobeval.core.protocol import Reply
from lobeval.simulation.users import ScriptedUser
from test_users import leave_case
from toy_leave_bot import StuckSyncLeaveBot

CASE = {"case_id": "c-1", "business_data": {"ticket": {"id": 7}}}
ECHO_HI = Reply("echo 1: hi", [{"functionName": "echo", "arguments": {"message": "hi"},
                               "result": {"n": 1}, "error": None}])
NOT_A_BOT = 3


# --- toy targets -------------------------------------------------------------------------

class EchoSession:
    def __init__(self, case: dict):
        self.case, self.count = case, 0

    async def greeting(self) -> Reply:
        return Reply(f"Hello, about ticket {self.case['business_data']['ticket']['id']}.")

    async def send(self, message: str) -> Reply:
        self.count += 1
        call = {"functionName": "echo", "arguments": {"message": message}, "result": {"n": self.count}}
        return Reply(f"echo {self.count}: {message}", [call])

    async def state(self) -> dict:
        return {"count": self.count}


class EchoBot:
    """Async; counts messages per session, to prove sessions are isolated."""

    async def start(self, case: dict) -> EchoSession:
        return EchoSession(case)


class SyncSession:
    def send(self, message: str) -> dict:
        return {"text": message.upper(), "function_calls": []}


class SyncBot:
    """Sync only; no greeting, no state, no close."""

    def start(self, case: dict) -> SyncSession:
        return SyncSession()


class ParrotSession:
    """Greets with a plain str; replies with whatever JSON it is sent."""

    def greeting(self) -> str:
        return "Hi."

    async def send(self, message: str) -> object:
        return json.loads(message)


class _Parrot:
    def start(self, case: dict) -> ParrotSession:
        return ParrotSession()


def parrot_bot() -> _Parrot:
    """A factory rather than a class."""
    return _Parrot()


class FaultySession:
    async def send(self, message: str) -> Reply:
        if message == "hang":
            await asyncio.Event().wait()   # until the deadline cancels it
        if message == "down":
            raise TargetUnavailable("model endpoint gave up after 5 attempts")
        raise RuntimeError("backend down\ntry later")

    def state(self) -> list:
        return [1, 2]

    def close(self) -> None:
        raise OSError("socket gone")


class FaultyBot:
    async def start(self, case: dict) -> FaultySession:
        if case.get("fail"):
            raise ValueError("no such ticket")
        return FaultySession()


# --- helpers -----------------------------------------------------------------------------

def run(coroutine):
    return asyncio.run(coroutine)


def target(attr: str, timeout: float = 60.0, workers: int = 8):
    return load_target(f"{__name__}:{attr}", timeout=timeout, workers=workers)


def adhoc_target(monkeypatch, factory, timeout: float = 60.0, workers: int = 8):
    """Load a bot defined inside a test, through a real module:attr spec."""
    monkeypatch.setattr(sys.modules[__name__], "adhoc_bot", factory, raising=False)
    return target("adhoc_bot", timeout, workers)


def started(cls):
    """Give a session class a start() that returns the instance itself, making it a bot."""
    async def start(self, case):
        return self
    return type(cls.__name__, (cls,), {"start": start})


def in_session(bot, act, case=CASE):
    """Start one session of `bot`, return what `act(session)` gives, then release the target."""
    async def go():
        try:
            return await act(await bot.start(case))
        finally:
            await bot.aclose()
    return run(go())


async def exchange(session):
    """Greeting, two messages, state and close; returns the first four results."""
    results = [await session.greeting(), await session.send("hi"), await session.send("again"),
               await session.state()]
    await session.close()
    return results


async def two_sessions(bot):
    """Two messages in one session, one in another; returns both states."""
    try:
        first, second = await bot.start(CASE), await bot.start(CASE)
        for session, message in [(first, "a"), (first, "b"), (second, "c")]:
            await session.send(message)
        return await first.state(), await second.state()
    finally:
        await bot.aclose()


def send_json(reply):
    return in_session(target("parrot_bot"), lambda session: session.send(json.dumps(reply)))


def leave_dataset(path, n):
    return write_jsonl(path, [leave_case().model_copy(update={"case_id": f"leave-{i:03d}"}).model_dump()
                              for i in range(n)])


def simulate(bot, dataset, out, *, timeout=60.0, concurrency=2):
    """Run the scripted user against the toy bot `bot` with as many workers as conversations at once."""
    async def go():
        loaded = load_target(f"toy_leave_bot:{bot}", timeout=timeout, workers=concurrency)
        try:
            await simulate_async(dataset, out, target=loaded, user=ScriptedUser(), concurrency=concurrency,
                                 progress=False)
        finally:
            await loaded.aclose()
    run(go())
    return read_jsonl(out)


# --- load_target -------------------------------------------------------------------------

def test_unknown_module_names_the_module_the_import_error_and_where_the_kernel_looks():
    with pytest.raises(RoleError, match="cannot import module 'no_such_bots': ModuleNotFoundError") as info:
        load_target("no_such_bots:Bot")
    assert "the stage notebooks' kernel must import it too" in str(info.value)
    assert "PYTHONPATH" in str(info.value) and "JupyterLab" in str(info.value)


def test_missing_attribute_offers_the_close_name_and_lists_the_classes_defined():
    with pytest.raises(RoleError, match=r"has no attribute 'EchoBott'; did you mean EchoBot\? "
                                        r"The classes it defines: .*\bEchoBot\b") as info:
        target("EchoBott")
    assert "SyncBot" in str(info.value)
    assert "_Parrot" not in str(info.value)
    assert "Reply" not in str(info.value)  # imported, not defined there
    with pytest.raises(RoleError, match=r"has no attribute 'Parrot_Bot'; did you mean parrot_bot\b"):
        target("Parrot_Bot")    # a factory function is offered too, whatever the case


def test_a_package_offers_the_classes_it_takes_from_its_own_modules():
    with pytest.raises(RoleError, match=r"has no attribute 'SupportTicketBott'; did you mean SupportTicketBot\?"):
        targets.check_target("lobeval.samples.support_tickets:SupportTicketBott")


def test_checking_a_target_imports_it_but_builds_nothing(monkeypatch):
    built = []
    monkeypatch.setattr(EchoBot, "__init__", lambda self: built.append(self))
    targets.check_target(f"{__name__}:EchoBot")
    assert built == []
    target("EchoBot")
    assert len(built) == 1


@pytest.mark.parametrize("url, problem", [
    ("http://", "it names no host"),
    ("https://:8000/v1", "it names no host"),
    ("http://host:80a/v1", "Port could not be cast to integer value"),
    ("http://host:99999", "Port out of range"),
    ("http://host/v1?key=1", "a base URL has no ?query or #fragment"),
    ("http://my host/v1", "it contains white space"),
    ("http://[::1/v1", "Invalid IPv6 URL"),
])
def test_a_malformed_url_is_refused_before_any_request(url, problem):
    with pytest.raises(RoleError, match=rf"not a well-formed base URL \({re.escape(problem)}"):
        targets.check_target(url)
    with pytest.raises(RoleError, match="not a well-formed base URL"):
        load_target(url)


def test_attribute_that_is_not_callable_is_refused():
    with pytest.raises(RoleError, match="NOT_A_BOT is a number, not a class or factory"):
        target("NOT_A_BOT")


def test_object_without_start_is_refused():
    with pytest.raises(RoleError, match=r"SyncSession\(\) gave a SyncSession, which has no start"):
        target("SyncSession")


@pytest.mark.parametrize("spec", ["echo_bot", "bots:", "bots:a:b", "ftp://bots.example", ":EchoBot"])
def test_spec_of_no_form_shows_every_form(spec):
    with pytest.raises(RoleError, match=r"expected 'module:attr' .*, an http:// or https:// base URL, or the path "
                                        r"of a model-and-prompt target's .json file"):
        load_target(spec)


def test_a_prompt_target_file_that_does_not_exist_is_named(tmp_path):
    with pytest.raises(RoleError, match="no such file .a model-and-prompt target is a JSON file"):
        load_target(str(tmp_path / "bot.json"))


def test_workers_must_be_at_least_one():
    with pytest.raises(RoleError, match="workers must be at least 1, not 0"):
        target("SyncBot", workers=0)


def test_name_is_the_spec():
    assert target("EchoBot").name == f"{__name__}:EchoBot"
    assert load_target("http://127.0.0.1:9/v1").name == "http://127.0.0.1:9/v1"


# --- Python adapter ----------------------------------------------------------------------

def test_async_target_full_exchange():
    greeting, first, second, state = in_session(target("EchoBot"), exchange)
    assert greeting == Reply("Hello, about ticket 7.")
    assert first == ECHO_HI and second.text == "echo 2: again" and state == {"count": 2}


def test_sync_target_without_greeting_or_state():
    greeting, first, _, state = in_session(target("SyncBot"), exchange)
    assert (greeting, first, state) == (None, Reply("HI"), None)


def test_factory_target_with_a_plain_string_greeting():
    assert in_session(target("parrot_bot"), lambda session: session.greeting()) == Reply("Hi.")


def test_sessions_do_not_share_state():
    assert run(two_sessions(target("EchoBot"))) == ({"count": 2}, {"count": 1})


def test_target_cannot_alter_the_case(monkeypatch):
    class Meddler:
        def start(self, case):
            case["business_data"]["ticket"]["id"] = 8
            return SyncSession()

    run(adhoc_target(monkeypatch, Meddler).start(CASE))
    assert CASE["business_data"]["ticket"]["id"] == 7


def test_usage_of_a_turn_is_read_and_a_missing_field_counts_zero():
    reply = send_json({"reply": "ok", "usage": {"prompt_tokens": 120, "cost_usd": 0.002, "other": "ignored"}})
    assert reply.usage == {"requests": 0, "prompt_tokens": 120, "completion_tokens": 0, "cost_usd": 0.002,
                           "cached_prompt_tokens": 0, "estimated_tokens": 0}
    assert send_json({"reply": "ok"}).usage is None
    unknown = send_json({"reply": "ok", "usage": {"requests": 2, "prompt_tokens": 9, "cost_usd": None}})
    assert unknown.usage == {"requests": 2, "prompt_tokens": 9, "completion_tokens": 0, "cost_usd": None,
                             "cached_prompt_tokens": 0, "estimated_tokens": 0}
    # cached prompt tokens as OpenAI reports them, or in lobeval's own name
    openai_style = send_json({"reply": "ok", "usage": {"prompt_tokens": 1000,
                                                       "prompt_tokens_details": {"cached_tokens": 900}}})
    assert openai_style.usage["cached_prompt_tokens"] == 900
    assert send_json({"reply": "ok", "usage": {"prompt_tokens": 9, "cached_prompt_tokens": 4}}).usage[
        "cached_prompt_tokens"] == 4


def test_arguments_given_as_a_json_string_are_parsed():
    call = {"functionName": "f", "arguments": '{"a": 1}', "result": [1]}
    reply = send_json({"reply": "ok", "function_calls": [call]})
    assert reply == Reply("ok", [{"functionName": "f", "arguments": {"a": 1}, "result": [1], "error": None}])


@pytest.mark.parametrize(("reply", "problem"), [
    ([], "got a list"),
    ({"function_calls": []}, "text is missing"),
    ({"text": 3}, "text is a number"),
    ({"text": "ok", "function_calls": None}, "function_calls is null"),
    ({"text": "ok", "function_calls": [{"functionName": "f", "arguments": {}},
                                       {"functionName": "g", "arguments": [1]}]},
     "function_calls[1].arguments is a list"),
    ({"text": "ok", "function_calls": ["f"]}, "function_calls[0] is a string"),
    ({"text": "ok", "function_calls": [{"arguments": {}}]}, "function_calls[0].functionName is missing"),
    ({"text": "ok", "function_calls": [{"functionName": "f"}]}, "function_calls[0].arguments is missing"),
    ({"text": "ok", "function_calls": [{"functionName": "f", "arguments": "{a"}]},
     "function_calls[0].arguments is a string that is not JSON"),
    ({"text": "ok", "function_calls": [{"functionName": "f", "arguments": "[1]"}]},
     "function_calls[0].arguments is a list"),
    ({"text": "ok", "function_calls": [{"functionName": "f", "arguments": {}, "error": 500}]},
     "function_calls[0].error is a number"),
    ({"text": "ok", "usage": [12]}, "usage is a list"),
    ({"text": "ok", "usage": {"prompt_tokens": "12"}}, "usage.prompt_tokens is a string, expected a number >= 0"),
    ({"text": "ok", "usage": {"cost_usd": -1}}, "usage.cost_usd is a number, expected a number >= 0 or null (unknown)"),
    ({"text": "ok", "usage": {"prompt_tokens_details": 5}}, "usage.prompt_tokens_details is a number"),
    ({"text": "ok", "usage": {"prompt_tokens_details": {"cached_tokens": "9"}}},
     "usage.cached_prompt_tokens is a string, expected a number >= 0"),
])
def test_malformed_reply_names_what_is_wrong(reply, problem):
    with pytest.raises(TargetError) as info:
        send_json(reply)
    assert str(info.value) == f"send failed: malformed reply: {problem}"


def test_result_that_is_not_json_is_malformed(monkeypatch):
    @started
    class Clock:
        async def send(self, message):
            return Reply("ok", [{"functionName": "now", "arguments": {}, "result": datetime.date(2026, 1, 1)}])

    with pytest.raises(TargetError) as info:
        in_session(adhoc_target(monkeypatch, Clock), lambda session: session.send("hi"))
    assert str(info.value) == "send failed: malformed reply: function_calls[0].result is not JSON"


def test_exception_in_send_names_the_operation_and_the_cause():
    with pytest.raises(TargetError) as info:
        in_session(target("FaultyBot"), lambda session: session.send("hi"))
    assert str(info.value) == "send failed: RuntimeError: backend down try later"
    assert info.value.reason == "target_error" and not isinstance(info.value, TargetUnavailableError)


def test_a_target_whose_infrastructure_failed_is_unavailable():
    with pytest.raises(TargetUnavailableError) as info:
        in_session(target("FaultyBot"), lambda session: session.send("down"))
    assert str(info.value) == "send failed: TargetUnavailable: model endpoint gave up after 5 attempts"
    assert info.value.reason == "target_unavailable"


def test_exception_in_start():
    with pytest.raises(TargetError, match="^start failed: ValueError: no such ticket$"):
        run(target("FaultyBot").start({"fail": True}))


def test_a_call_that_misses_the_deadline_is_unavailable():
    with pytest.raises(TargetUnavailableError, match=r"^send failed: timed out after 0\.01 s$"):
        in_session(target("FaultyBot", timeout=0.01), lambda session: session.send("hang"))


def test_an_async_bot_that_swallows_its_cancellation_still_misses_the_deadline(monkeypatch):
    """The deadline ends the wait even when the bot's coroutine ignores being cancelled: it is left behind, and
    run_sync, which `lobeval simulate` runs in, gives such a task SHUTDOWN_GRACE to end instead of waiting on."""
    from lobeval.models import llm

    cancelled = []

    @started
    class Stubborn:
        async def send(self, message):
            while True:
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    cancelled.append(message)   # ... and on it goes

    bot = adhoc_target(monkeypatch, Stubborn, timeout=0.01)
    monkeypatch.setattr(llm, "SHUTDOWN_GRACE", 0.01)

    async def act():
        session = await bot.start(CASE)
        with pytest.raises(TargetUnavailableError, match=r"^send failed: timed out after 0\.01 s$"):
            await session.send("hi")
        return "ended"

    assert llm.run_sync(act()) == "ended"
    assert cancelled and set(cancelled) == {"hi"}   # asked to stop at the deadline and again at shutdown


def test_a_sync_call_that_misses_the_deadline_is_unavailable(monkeypatch):
    release = threading.Event()

    @started
    class Stuck:
        def send(self, message):
            release.wait(60)   # bounded only so that a broken test cannot hang the suite
            return Reply("late")

    bot = adhoc_target(monkeypatch, Stuck, timeout=60)   # the session starts, however busy the machine

    async def act(session):
        try:
            bot.timeout = 0.01
            return await session.send("hi")
        finally:
            release.set()   # let the abandoned thread end (nothing waits for it)

    with pytest.raises(TargetUnavailableError, match=r"^send failed: timed out after 0\.01 s$"):
        in_session(bot, act)


def test_a_sync_call_that_missed_the_deadline_gives_up_its_worker(monkeypatch):
    release = threading.Event()

    @started
    class SometimesStuck:
        def send(self, message):
            if message == "hang":
                release.wait()
            return Reply(message)

    bot = adhoc_target(monkeypatch, SometimesStuck, timeout=60, workers=1)   # the session starts, however busy

    async def act(session):
        try:
            bot.timeout = 0.01   # "hang" never returns in time: any deadline passes
            with pytest.raises(TargetUnavailableError, match="timed out"):
                await session.send("hang")
            bot.timeout = 60   # from now on only a starved call would miss the deadline
            return await session.send("hi")
        finally:
            release.set()

    assert in_session(bot, act) == Reply("hi")


def test_past_a_bound_on_stuck_calls_a_sync_call_fails_at_once(monkeypatch):
    monkeypatch.setattr(targets, "MAX_STUCK_CALLS", 1)
    release = threading.Event()

    @started
    class AlwaysStuck:
        def send(self, message):
            release.wait()
            return Reply(message)

    bot = adhoc_target(monkeypatch, AlwaysStuck, timeout=60, workers=1)   # the session starts, however busy the machine

    async def act(session):
        try:
            bot.timeout = 0.01   # the call never returns: any deadline passes
            with pytest.raises(TargetUnavailableError, match="timed out"):
                await session.send("a")
            bot.timeout = 60   # the next call must fail without waiting for a deadline
            with pytest.raises(TargetUnavailableError) as info:
                await session.send("b")
            return str(info.value)
        finally:
            release.set()

    assert in_session(bot, act) == "send failed: too many calls stuck: 1 missed their deadline and never returned"


def test_a_sync_bot_stuck_in_some_conversations_never_starves_the_others(tmp_path, monkeypatch):
    monkeypatch.setattr(StuckSyncLeaveBot, "release", threading.Event())
    try:
        records = simulate("StuckSyncLeaveBot", leave_dataset(tmp_path / "d.jsonl", 8), tmp_path / "c.jsonl",
                           timeout=0.5, concurrency=2)
    finally:
        StuckSyncLeaveBot.release.set()
    endings = sorted((r["termination"]["reason"], r["error"]) for r in records)
    assert endings == [("target_unavailable", "send failed: timed out after 0.5 s")] * 3 + [("user_finished", None)] * 5


@pytest.mark.slow
def test_a_simulation_with_a_bot_stuck_for_ever_exits_by_itself(tmp_path):
    dataset, out = leave_dataset(tmp_path / "d.jsonl", 4), tmp_path / "c.jsonl"
    command = [sys.executable, "-m", "lobeval", "simulate", "--dataset", str(dataset), "--out", str(out),
               "--target", "toy_leave_bot:StuckSyncLeaveBot", "--concurrency", "2", "--target-timeout", "0.5"]
    # The timeout is only a safety net: a process that hangs fails the test instead of the suite.
    done = subprocess.run(command, cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(r["termination"]["reason"] for r in read_jsonl(out)) == ["target_unavailable"] * 3 + ["user_finished"]


@pytest.mark.parametrize("error", [SystemExit("configuration missing"), KeyboardInterrupt("configuration missing")])
@pytest.mark.parametrize("sync", [True, False])
def test_a_bot_raising_a_base_exception_fails_only_its_call(monkeypatch, error, sync):
    def send(self, message):
        raise error

    async def send_async(self, message):
        raise error

    bot = started(type("Quitter", (), {"send": send if sync else send_async}))
    with pytest.raises(TargetError) as info:
        in_session(adhoc_target(monkeypatch, bot), lambda session: session.send("hi"))
    assert str(info.value) == f"send failed: {type(error).__name__}: configuration missing"
    assert info.value.reason == "target_error"


def test_a_bot_raising_system_exit_ends_its_conversation_and_the_batch_goes_on(tmp_path):
    records = simulate("ExitingBot", leave_dataset(tmp_path / "d.jsonl", 3), tmp_path / "c.jsonl")
    endings = sorted((r["termination"]["reason"], r["error"]) for r in records)
    assert endings == [("target_error", "send failed: SystemExit: configuration missing"),
                       ("user_finished", None), ("user_finished", None)]


def test_state_that_is_not_an_object():
    with pytest.raises(TargetError, match="^state failed: malformed state: a list, not an object$"):
        in_session(target("FaultyBot"), lambda session: session.state())


def test_close_never_raises_but_logs(caplog):
    with caplog.at_level(logging.DEBUG, logger="lobeval.targets.targets"):
        assert in_session(target("FaultyBot"), lambda session: session.close()) is None
    assert "close failed: OSError: socket gone" in caplog.text


# --- HTTP adapter (a real server on 127.0.0.1) -------------------------------------------

def test_http_full_exchange():
    with serve(EchoBot()) as server:
        greeting, first, second, state = in_session(load_target(server.url), exchange)
        assert server.sessions == {}  # closed with DELETE
    assert greeting == Reply("Hello, about ticket 7.")
    assert first == ECHO_HI and second.text == "echo 2: again" and state == {"count": 2}


def test_http_sessions_do_not_share_state():
    with serve(EchoBot()) as server:
        assert run(two_sessions(load_target(server.url))) == ({"count": 2}, {"count": 1})


def test_http_without_state_or_greeting():
    @started
    class Shouter:
        async def send(self, message):
            return Reply(message.upper())

    async def act(session):
        results = await exchange(session)
        await session.close()  # the second DELETE answers 404: ignored
        return results

    with serve(Shouter()) as server:
        greeting, first, _, state = in_session(load_target(server.url), act)
    assert (greeting, first, state) == (None, Reply("HI"), None)


def test_http_error_status_names_the_status_and_body():
    with serve(FaultyBot()) as server, pytest.raises(TargetError) as info:
        in_session(load_target(server.url), lambda session: session.send("hi"))
    assert str(info.value) == "send failed: HTTP 500: Internal Server Error RuntimeError: backend down try later"
    assert info.value.reason == "target_error"


@pytest.mark.parametrize("status, reason", [(429, "target_unavailable"), (502, "target_unavailable"),
                                            (503, "target_unavailable"), (504, "target_unavailable"),
                                            (400, "target_error"), (501, "target_error")])
def test_http_statuses_that_say_the_target_is_unavailable(status, reason):
    @started
    class Gateway:
        async def send(self, message):
            raise Status(status)

    with serve(Gateway()) as server, pytest.raises(TargetError) as info:
        in_session(load_target(server.url), lambda session: session.send("hi"))
    assert (str(info.value), info.value.reason) == (f"send failed: HTTP {status}: status {status}", reason)


def test_http_body_that_is_not_json():
    @started
    class Gateway:
        async def send(self, message):
            return "<html><body>Bad Gateway</body></html>"

    with serve(Gateway()) as server, pytest.raises(TargetError) as info:
        in_session(load_target(server.url), lambda session: session.send("hi"))
    assert str(info.value) == "send failed: response is not JSON: <html><body>Bad Gateway</body></html>"


def test_http_reply_body_over_the_limit_is_refused_declared_or_streamed(monkeypatch):
    """A body larger than MAX_BODY_BYTES is a target error, whether its Content-Length says so up front or it
    arrives in chunks with no length (then reading stops at the limit)."""
    monkeypatch.setattr(targets, "MAX_BODY_BYTES", 1000)

    @started
    class Talker:
        async def send(self, message):
            return Reply("words " * 300)

    with serve(Talker()) as server, pytest.raises(TargetError) as info:
        in_session(load_target(server.url), lambda session: session.send("hi"))
    assert str(info.value) == ("send failed: POST /sessions/s1/messages: the response body is too large "
                               "(1,850 bytes declared; at most 1,000 bytes, MAX_BODY_BYTES)")
    assert info.value.reason == "target_error"

    class Endless(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(100):   # 100 chunks of 400 bytes; the client stops reading after the third
                    self.wfile.write(b"190\r\n" + b"x" * 400 + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        with pytest.raises(TargetError, match=r"start failed: POST /sessions: the response body is too large "
                                              r"\(more than 1,000 bytes sent"):
            run(load_target(f"http://127.0.0.1:{server.server_address[1]}/bot").start({"case_id": "c"}))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_http_long_error_body_is_clipped_to_one_line():
    @started
    class Verbose:
        async def send(self, message):
            raise RuntimeError("x" * 500)

    with serve(Verbose()) as server, pytest.raises(TargetError) as info:
        in_session(load_target(server.url), lambda session: session.send("hi"))
    message = str(info.value)
    assert "\n" not in message and message.endswith("x…") and len(message) < 260


class _HeadersOnly(BaseHTTPRequestHandler):
    """Sends a status, headers and the first byte of the body, then nothing until the test ends."""

    def do_POST(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "40")
        self.end_headers()
        self.wfile.write(b"{")
        self.wfile.flush()
        self.server.headers_sent.set()
        self.server.release.wait()

    def log_message(self, format, *args):
        """Keep test output quiet."""


@contextlib.contextmanager
def headers_only_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HeadersOnly)
    server.daemon_threads = True
    server.headers_sent, server.release = threading.Event(), threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def test_http_a_body_that_never_arrives_misses_the_deadline():
    async def start(bot):
        try:
            return await bot.start(CASE)
        finally:
            await bot.aclose()

    with headers_only_server() as server:
        with pytest.raises(TargetUnavailableError, match=r"^start failed: timed out after 1 s$"):
            run(start(load_target(f"http://127.0.0.1:{server.server_address[1]}/v1", timeout=1)))
        assert server.headers_sent.is_set()   # the deadline passed while the body was being read


def test_http_a_server_nothing_listens_on_is_unavailable_not_the_bots_failure():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(TargetUnavailableError) as info:
        in_session(load_target(url, timeout=5), lambda session: session.close())
    assert str(info.value) == f"start failed: POST {url}/sessions: ConnectError: All connection attempts failed"
    assert info.value.reason == "target_unavailable"


def test_http_a_name_that_does_not_resolve_and_a_failed_tls_handshake_are_unavailable():
    # .invalid never resolves (RFC 2606); https to a server that speaks plain HTTP fails its handshake
    with pytest.raises(TargetUnavailableError, match=r"^start failed: POST http://bot\.invalid/v1/sessions: "
                                                     r"ConnectError: "):
        in_session(load_target("http://bot.invalid/v1", timeout=5), lambda session: session.close())
    with serve(EchoBot()) as server:
        tls = server.url.replace("http://", "https://")
        with pytest.raises(TargetUnavailableError, match=rf"^start failed: POST {re.escape(tls)}/sessions: "
                                                         r"ConnectError: .*SSL"):
            in_session(load_target(tls, timeout=5), lambda session: session.close())


def test_http_a_connection_reset_before_the_answer_is_unavailable():
    with resetting() as server, pytest.raises(TargetUnavailableError) as info:
        in_session(load_target(f"http://127.0.0.1:{server.port}/v1", timeout=5), lambda session: session.close())
    assert server.accepted == 1
    assert re.fullmatch(rf"start failed: POST http://127\.0\.0\.1:{server.port}/v1/sessions: "
                        r"(ReadError|RemoteProtocolError): .+", str(info.value)), str(info.value)


def test_http_a_bot_that_stops_mid_conversation_is_unavailable_from_then_on():
    with serve(EchoBot()) as server:
        target = load_target(server.url, timeout=5)

        async def talk():
            session = await target.start(CASE)
            first = await session.send("hi")
            server.shutdown()
            server.server_close()
            try:
                await session.send("again")
            finally:
                await target.aclose()
            return first

        with pytest.raises(TargetUnavailableError, match=r"^send failed: POST .*/sessions/s1/messages: "):
            run(talk())


@pytest.mark.parametrize("answer, problem", [
    (None, None), (Status(503), "answered HTTP 503"), (Status(502), "answered HTTP 502"), (Status(404), None),
    (Status(401), None)])
def test_the_preflight_probe_of_an_http_target_takes_any_answer_but_a_gateway_failure(answer, problem):
    class Base(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(answer.code if answer else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Base)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        assert run(targets.probe(f"http://127.0.0.1:{server.server_address[1]}/bot", 5)) == problem
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_preflight_probe_says_why_an_http_target_does_not_answer():
    port = closed_port()
    assert run(targets.probe(f"http://127.0.0.1:{port}/bot", 5)) == \
        "cannot connect (ConnectError: All connection attempts failed)"
    with resetting() as server:
        assert run(targets.probe(f"http://127.0.0.1:{server.port}/bot", 5)).startswith("cannot connect (")
    with silent() as port:
        assert run(targets.probe(f"http://127.0.0.1:{port}/bot", 0.2)) == "no answer within 0.2 s"
    # the example server answers its base URL (404): it is running
    with serve(EchoBot()) as server:
        assert run(targets.probe(server.url, 5)) is None
    # a Python target is built by the stage: nothing to ask
    assert run(targets.probe("lobeval.samples.support_tickets:SupportTicketBot", 5)) is None


def test_a_prompt_targets_file_is_named_for_the_stage_kernels_in_the_run_folder(tmp_path, monkeypatch):
    """`lobeval run --target bots/desk.json` from the team's folder: the pre-flight finds the file there, and stage 02,
    whose kernel runs in the run folder, must find the same one."""
    from lobeval.targets.targets import where_it_runs

    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "desk.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert where_it_runs("bots/desk.json") == str(tmp_path / "bots" / "desk.json")
    assert where_it_runs("bots/missing.json") == "bots/missing.json"   # the pre-flight names it as given
    for spec in ("http://127.0.0.1:8000/v1/x.json", "lobeval.samples.support_tickets:SupportTicketBot", None):
        assert where_it_runs(spec) == spec
