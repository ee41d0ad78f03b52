import asyncio
import signal

import pytest

from lobeval.targets.chat import STATE_CHARS, chat_loop, chat_widget
from lobeval.core.render import markdown_html
from lobeval.core.protocol import Reply


class Recorder:
    """Answers "ok", writes down every message it is sent and whether its session was closed."""

    log: list = []

    async def start(self, case):
        return self

    async def send(self, message):
        self.log.append(message)
        return Reply("ok")

    async def close(self):
        self.log.append("(closed)")


class InterruptedRecorder(Recorder):
    """The person presses Ctrl-C while the bot is busy answering."""

    async def send(self, message):
        self.log.append(message)
        signal.raise_signal(signal.SIGINT)
        await asyncio.Event().wait()


class Ledger:
    """A state of a thousand accounts, of which each message changes a few."""

    async def start(self, case):
        self.accounts, self.messages = {f"A{i}": {"owner": f"owner {i}", "balance": i} for i in range(1000)}, 0
        return self

    async def send(self, message):
        self.accounts["A1"] = {**self.accounts["A1"], "balance": 0}
        self.accounts["A999"] = {"owner": "x" * 500, "balance": 1}
        del self.accounts["A2"]
        self.accounts["A1000"] = {"owner": "new", "balance": 5}
        self.messages += 1
        return Reply("done")

    async def state(self):
        return {"accounts": self.accounts, "messages": self.messages}


@pytest.fixture
def log(monkeypatch):
    monkeypatch.setattr(Recorder, "log", [])
    return Recorder.log


@pytest.fixture
def ctrl_c_interrupts(monkeypatch):
    """Ctrl-C as in a terminal program, whatever the test runner did with SIGINT."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def chat(spec, lines, debug=False):
    """Run chat_loop reading `lines` (an exception among them is raised by that read); what it wrote."""
    feed, shown = iter(lines), []

    def read(prompt):
        line = next(feed)
        if isinstance(line, BaseException):
            raise line
        return line

    chat_loop(spec, debug=debug, read=read, write=shown.append)
    return shown


def test_chat_loop_shows_replies_and_in_debug_every_call_and_state_change_until_quit():
    shown = chat("toy_leave_bot:LeaveBot", ["1", "ana@example.org", "2026-12-21", "2026-12-24", "1", "yes", "/quit",
                                            "never read"], debug=True)
    assert shown[0].startswith("bot> Hi, I'm the HR helper")
    call = next(line for line in shown if line.startswith("  [book_leave("))
    assert '"employee_email": "ana@example.org"' in call and '-> {"booking_id": "LV-101"}' in call
    assert shown[-3].startswith("bot> Booked! Your reference is LV-101")
    assert shown[-2:] == ['  [state bookings LV-101: added {"employee_email": "ana@example.org", "start_date": '
                          '"2026-12-21", "end_date": "2026-12-24", "leave_type": "Vacation"}]', "bye"]
    assert not any(line.startswith("  [state") for line in shown[:-2])   # turns that changed nothing


def test_debug_shows_only_what_a_turn_changed_each_briefly():
    shown = chat("test_chat:Ledger", ["pay", "/quit"], debug=True)
    assert shown[:4] == ["bot> done",
                         "  [state accounts A1: balance 1 → 0]",
                         '  [state accounts A1000: added {"owner": "new", "balance": 5}]',
                         "  [state accounts A2: removed]"]
    long = shown[4]   # shortened to STATE_CHARS
    assert long.startswith('  [state accounts A999: balance 999 → 1, owner "owner 999" → "xxx')
    assert long.endswith("x…]")
    assert len(long) == len("  [state accounts A999: ]") + STATE_CHARS + 1
    assert shown[5:] == ["  [state messages: 1]", "bye"]


def test_help_lists_the_commands_and_is_not_sent(log):
    shown = chat("test_chat:Recorder", ["/help", "/nope", "", "hi", "/quit"])
    assert shown == ["/help  list these commands", "/quit  end the chat (so do /exit, Ctrl-D and Ctrl-C)",
                     "[unknown command /nope: /help lists the commands]", "bot> ok", "bye"]
    assert log == ["hi", "(closed)"]


def test_end_of_input_says_bye_and_closes_the_session(log):
    assert chat("test_chat:Recorder", ["hi", EOFError()]) == ["bot> ok", "\nbye"]
    assert log == ["hi", "(closed)"]


def test_ctrl_c_at_the_prompt_ends_the_chat_at_once(log):
    assert chat("test_chat:Recorder", ["hi", KeyboardInterrupt(), "never read"]) == ["bot> ok", "\nbye"]
    assert log == ["hi", "(closed)"]


def test_ctrl_c_while_the_bot_answers_ends_the_chat_at_once(log, ctrl_c_interrupts):
    assert chat("test_chat:InterruptedRecorder", ["hi", "never read"]) == ["\nbye"]
    assert log == ["hi", "(closed)"]


def test_a_target_error_is_shown_and_the_chat_goes_on():
    shown = chat("test_targets:FaultyBot", ["hi", "/quit"])
    assert shown == ["[target error: send failed: RuntimeError: backend down try later]", "bye"]


def test_chat_widget_sends_on_enter_and_shows_escaped_text_and_every_call():
    async def talk(messages):
        log, box = chat_widget("toy_leave_bot:LeaveBot").children
        for message in messages:
            box.value = message
            assert box.value == ""          # cleared for the next message
            await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
        return log.value

    page = asyncio.run(talk(["<b>1</b>", "1", "ana@example.org", "2026-12-21", "2026-12-24", "1", "yes"]))
    # the newest message stays in view without a script: a scroll box laid out bottom-up
    assert page.startswith("<div class='lobeval-chat' style='display:flex;flex-direction:column-reverse;"
                           "max-height:420px;overflow-y:auto;")
    messages = page.split("<div class='lobeval-msg'")
    assert messages[1].startswith(" style='margin:4px 0'><b>bot:</b> <p>Hi, I&#x27;m the HR helper")
    assert messages[2].startswith(" style='margin:4px 0;padding:4px 6px;background:#eef4ff;border-radius:6px'>"
                                  "<b>you:</b> &lt;b&gt;1&lt;/b&gt;</div>")
    assert "[book_leave({&quot;employee_email&quot;: &quot;ana@example.org&quot;" in page
    assert "Booked! Your reference is LV-101" in page
    assert page.endswith("</div></div>") and "<script" not in page


class Markdown:
    """Answers in the markdown bots write, with markup of its own in it."""

    async def start(self, case):
        return self

    async def send(self, message):
        return Reply("What is the **priority**?\n1. Low\n2. High <img src=x onerror=alert(1)>\n\n"
                     "- `<b>` stays *text*\n[link](javascript:alert(1))")


def test_chat_widget_renders_the_bots_markdown_and_never_its_markup():
    async def talk():
        log, box = chat_widget("test_chat:Markdown", debug=False).children
        box.value = "hi **there**"
        await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
        return log.value

    page = asyncio.run(talk())
    assert "<b>you:</b> hi **there**</div>" in page   # what you type is text
    assert ("<b>bot:</b> <p>What is the <strong>priority</strong>?</p><ol><li>Low</li>"
            "<li>High &lt;img src=x onerror=alert(1)&gt;</li></ol>"
            "<ul><li><code>&lt;b&gt;</code> stays <em>text</em></li></ul><p>[link](javascript:alert(1))</p>") in page
    assert "<img" not in page and "<a " not in page


def test_markdown_is_escaped_before_any_tag_is_added():
    assert markdown_html("a **b** *c* `d*e*`\nnext line") == (
        "<p>a <strong>b</strong> <em>c</em> <code>d*e*</code><br>next line</p>")
    assert markdown_html("3. three\n4. four\n* dot\n# Title\n\ncreate_support_ticket a*b*c 2 * 3 * 4") == (
        "<ol start='3'><li>three</li><li>four</li></ol><ul><li>dot</li></ul><p><strong>Title</strong></p>"
        "<p>create_support_ticket a*b*c 2 * 3 * 4</p>")
    assert markdown_html("**<script>alert(1)</script>**") == (
        "<p><strong>&lt;script&gt;alert(1)&lt;/script&gt;</strong></p>")
    assert markdown_html("") == "" and markdown_html(None) == ""


class Stuck(Recorder):
    """Its first answer never comes (an event nobody sets); its next ones do."""

    async def send(self, message):
        self.log.append(message)
        if len(self.log) == 1:
            await asyncio.Event().wait()
        return Reply("ok")


def test_chat_takes_the_target_deadline_it_is_given_and_goes_on_after_it(log, monkeypatch):
    shown, feed = [], iter(["slow question", "again", "/quit"])
    chat_loop(f"{__name__}:Stuck", read=lambda prompt: next(feed), write=shown.append, timeout=0.2)
    assert shown == ["[target error: send failed: timed out after 0.2 s]", "bot> ok", "bye"]


def test_lobeval_chat_passes_target_timeout_and_the_bots_model_reads_its_roles_variables(monkeypatch, capsys,
                                                                                         tmp_path):
    from lobeval.cli import main
    from lobeval.samples.support_tickets import SupportTicketBot

    given = {}
    monkeypatch.setattr("lobeval.targets.chat.chat_loop", lambda spec, **kw: given.update(spec=spec, **kw))
    assert main(["chat", "--target", "toy_leave_bot:LeaveBot", "--target-timeout", "1800"]) == 0
    assert given == {"spec": "toy_leave_bot:LeaveBot", "debug": False, "timeout": 1800.0}
    with pytest.raises(SystemExit) as refused:
        main(["chat", "--target-timeout", "0"])
    assert refused.value.code == 2 and "--target-timeout: must be more than 0, got 0" in capsys.readouterr().err
    for name, value in {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "LOBEVAL_MODEL": "m",
                        "LOBEVAL_TIMEOUT_S": "300", "LOBEVAL_TARGET_TIMEOUT_S": "600",
                        "LOBEVAL_CACHE_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("LOBEVAL_TARGET_MODEL", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    client = SupportTicketBot()._client   # the bot chat talks to, with its model from the environment
    assert (client.timeout, client.deadline) == (600.0, 1500.0)
