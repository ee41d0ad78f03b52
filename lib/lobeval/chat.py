"""Talk to a target yourself: a terminal loop (`lobeval chat`) and a small ipywidgets chat."""
from __future__ import annotations

import asyncio
import json
from typing import Any

from lobeval.render import call_lines, escape
from lobeval.targets import Reply, Session, TargetError, load_target


async def chat_loop(spec: str, *, debug: bool = False, read=input, write=print) -> None:
    """Read a line, send it, print the reply, until end of input or "/quit"."""
    target = load_target(spec)
    session = await target.start({"case_id": "chat", "scenario_name": "chat", "business_data": {}})
    try:
        greeting = await session.greeting()
        if greeting is not None:
            _show(greeting, debug, write)
        while True:
            try:
                line = await asyncio.to_thread(read, "you> ")
            except EOFError:
                break
            if line.strip() in ("/quit", "/exit"):
                break
            try:
                _show(await session.send(line), debug, write)
            except TargetError as exc:
                write(f"[target error: {exc}]")
        if debug:
            write(f"[end state: {json.dumps(await session.state(), default=str)[:2000]}]")
    finally:
        await session.close()
        await target.aclose()


def _show(reply: Reply, debug: bool, write) -> None:
    if debug:
        for line in call_lines(reply.function_calls):
            write(line)
    write(f"bot> {reply.text}")


def chat_widget(spec: str, *, debug: bool = True) -> Any:
    """An ipywidgets chat with a target, for a notebook cell (needs a running kernel)."""
    import ipywidgets as widgets

    target = load_target(spec)
    log = widgets.HTML(layout=widgets.Layout(border="1px solid #ccc", padding="6px", max_height="420px",
                                             overflow="auto"))
    box = widgets.Text(placeholder="Type a message and press Enter", continuous_update=False,
                       layout=widgets.Layout(width="100%"))
    state: dict[str, Session | None] = {"session": None}
    lines: list[str] = []

    def add(who: str, text: str, calls: list[str] = ()) -> None:
        lines.append(f"<p><b>{who}:</b> {escape(text).replace(chr(10), '<br>')}</p>")
        lines.extend(f"<pre style='margin:0;color:#666'>{escape(c)}</pre>" for c in calls)
        log.value = "".join(lines)

    async def send(message: str) -> None:
        if state["session"] is None:
            state["session"] = await target.start({"case_id": "chat", "scenario_name": "chat", "business_data": {}})
            greeting = await state["session"].greeting()
            if greeting is not None:
                add("bot", greeting.text)
        add("you", message)
        try:
            reply = await state["session"].send(message)
            add("bot", reply.text, call_lines(reply.function_calls) if debug else [])
        except TargetError as exc:
            add("error", str(exc))

    def on_enter(change: dict) -> None:
        if change["new"].strip():
            box.value = ""   # fires this observer again with "", which is ignored
            asyncio.ensure_future(send(change["new"]))

    box.observe(on_enter, names="value")
    return widgets.VBox([log, box])
