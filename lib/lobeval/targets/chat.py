"""Talk to a target yourself: a terminal loop (`lobeval chat`) and a small ipywidgets chat."""
from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from lobeval.core.records import state_changes
from lobeval.core.render import call_lines, escape, json_text, one_line
from lobeval.targets.targets import Session, TargetError, load_target
from lobeval.core.protocol import Reply, reply_text

CHAT_CASE = {"case_id": "chat", "scenario_name": "chat", "business_data": {}}
COMMANDS = {"/help": "list these commands", "/quit": "end the chat (so do /exit, Ctrl-D and Ctrl-C)"}
STATE_CHARS = 160
"""Of each change to the target's state shown with --debug."""
_COMMAND = re.compile(r"/\w+")


def chat_loop(spec: str, *, debug: bool = False, read: Callable[[str], str] = input,
              write: Callable[[str], Any] = print, timeout: float = 60.0) -> None:
    """Read a line, send it, print the reply, until "/quit", end of input or Ctrl-C; with `debug`,
    also each function call and what the turn changed in the target's state. Every call into the target is
    bounded by `timeout` seconds, as in `lobeval run` (--target-timeout); a bot's own model requests by its role's
    settings (LOBEVAL_TARGET_TIMEOUT_S, docs/models.md).

    Synchronous on purpose: `read` runs on the main thread, where Ctrl-C interrupts it at once (in
    asyncio.run, Ctrl-C only cancels the task, which a read blocked in a thread notices at Enter).
    Each call into the target runs on its own in an asyncio.Runner, and is cancelled by Ctrl-C.
    """
    target = load_target(spec, workers=1, timeout=timeout)
    with asyncio.Runner() as runner:
        session = None
        try:
            session = runner.run(target.start(CHAT_CASE))
            _converse(session, runner.run, debug, read, write)
        except KeyboardInterrupt:
            write("\nbye")
        except TargetError as exc:   # start or greeting: there is nothing to talk to
            write(f"[target error: {exc}]")
        finally:
            if session is not None:
                runner.run(session.close())
            runner.run(target.aclose())


def _converse(session: Session, run: Callable[[Any], Any], debug: bool, read: Callable[[str], str],
              write: Callable[[str], Any]) -> None:
    greeting = run(session.greeting())
    if greeting is not None:
        _show(greeting, debug, write)
    state = run(session.state()) if debug else None
    while True:
        try:
            line = read("you> ")
        except EOFError:
            write("\nbye")
            return
        command = line.strip()
        if command in ("/quit", "/exit"):
            write("bye")
            return
        if command == "/help":
            for name, meaning in COMMANDS.items():
                write(f"{name}  {meaning}")
        elif _COMMAND.fullmatch(command):
            write(f"[unknown command {command}: /help lists the commands]")
        elif command:
            try:
                _show(run(session.send(line)), debug, write)
                if debug:
                    before, state = state, run(session.state())
                    for change in _change_lines(before, state):
                        write(change)
            except TargetError as exc:
                write(f"[target error: {exc}]")


def _show(reply: Reply, debug: bool, write: Callable[[str], Any]) -> None:
    if debug:
        for line in call_lines(reply.function_calls):
            write(line)
    write(f"bot> {reply_text(reply.text)}")


def _change_lines(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """What a turn changed in the target's state (records.state_changes), one short line a record."""
    lines = []
    for table, changed in (state_changes(before, after) or {}).items():
        old = before.get(table)
        if isinstance(old, dict) and isinstance(changed, dict):
            lines += [f"  [state {table} {key}: {_record_change(old.get(key), new)}]" for key, new in changed.items()]
        else:
            lines.append(f"  [state {table}: {one_line(changed, STATE_CHARS)}]")
    return lines


def _record_change(old: Any, new: Any) -> str:
    if new is None:
        return "removed"
    if old is None:
        return "added " + one_line(new, STATE_CHARS)
    if isinstance(old, dict) and isinstance(new, dict):
        fields = sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))
        changes = (f"{name} {json_text(old.get(name))} → {json_text(new.get(name))}" for name in fields)
        return one_line(", ".join(changes), STATE_CHARS)
    return one_line(f"{json_text(old)} → {json_text(new)}", STATE_CHARS)


def chat_widget(spec: str, *, debug: bool = True, timeout: float = 60.0) -> Any:
    """An ipywidgets chat with a target, for a notebook cell (needs a running kernel).

    The bot's replies are rendered from the markdown bots write (`render.markdown_html`: escaped first,
    raw HTML never let through); what you type is shown as text. The log keeps its newest message in
    view without any script: its messages sit in a scroll box laid out bottom-up (CSS
    `flex-direction: column-reverse`), which a browser keeps scrolled to the end as it grows."""
    import ipywidgets as widgets

    from lobeval.core.render import markdown_html

    scroller = ("display:flex;flex-direction:column-reverse;max-height:420px;overflow-y:auto;"
                "border:1px solid #ccc;padding:6px;font-family:sans-serif;font-size:13px")
    looks = {"you": "margin:4px 0;padding:4px 6px;background:#eef4ff;border-radius:6px",
             "bot": "margin:4px 0", "error": "margin:4px 0;color:#b00020"}
    target = load_target(spec, timeout=timeout)
    log = widgets.HTML(layout=widgets.Layout(width="100%"))
    box = widgets.Text(placeholder="Type a message and press Enter", continuous_update=False,
                       layout=widgets.Layout(width="100%"))
    state: dict[str, Session | None] = {"session": None}
    lines: list[str] = []

    def add(who: str, text: str, calls: list[str] = ()) -> None:
        shown = markdown_html(text) if who == "bot" else "<br>".join(escape(line) for line in text.split("\n"))
        lines.append(f"<div class='lobeval-msg' style='{looks[who]}'><b>{who}:</b> {shown}</div>")
        lines.extend(f"<pre style='margin:0;color:#666;white-space:pre-wrap'>{escape(c)}</pre>" for c in calls)
        log.value = f"<div class='lobeval-chat' style='{scroller}'><div>{''.join(lines)}</div></div>"

    async def send(message: str) -> None:
        if state["session"] is None:
            state["session"] = await target.start(CHAT_CASE)
            greeting = await state["session"].greeting()
            if greeting is not None:
                add("bot", reply_text(greeting.text))
        add("you", message)
        try:
            reply = await state["session"].send(message)
            add("bot", reply_text(reply.text), call_lines(reply.function_calls) if debug else [])
        except TargetError as exc:
            add("error", str(exc))

    def on_enter(change: dict) -> None:
        if change["new"].strip():
            box.value = ""   # fires this observer again with "", which is ignored
            asyncio.ensure_future(send(change["new"]))

    box.observe(on_enter, names="value")
    return widgets.VBox([log, box])
