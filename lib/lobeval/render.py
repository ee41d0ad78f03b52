"""How records look: transcripts and function calls as plain text (judge and root-cause prompts, the
terminal) and as HTML (notebooks, the report, the widgets). Every piece of record text put into HTML
is escaped. Plain text writes a result as `-> result`, a page as `→ result`.
"""
from __future__ import annotations

import html
import json
from typing import Any

RESULT_CHARS = 600     # of a call's result shown on a page
LINE_CHARS = 300       # of each piece of an excerpt line
EXCERPT_LINES = 40

_STYLE = ("<style>.lobeval-conv{font-family:sans-serif;font-size:13px;max-width:900px}"
          ".lobeval-conv .m{margin:4px 0;padding:6px 8px;border-radius:6px;white-space:pre-wrap}"
          ".lobeval-conv .user{background:#eef4ff}.lobeval-conv .assistant{background:#f4f4f4}"
          ".lobeval-conv .call{font-family:monospace;font-size:12px;color:#444;margin-left:16px}"
          ".lobeval-conv .err{color:#b00020}</style>")


# --- plain text --------------------------------------------------------------------------------------

def json_text(value: Any) -> str:
    """A value as one line of JSON, non-ASCII kept, anything JSON cannot hold as its str."""
    return json.dumps(value, ensure_ascii=False, default=str)


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width] + "…"


def one_line(value: Any, width: int) -> str:
    """Text (any other value as JSON) with its whitespace collapsed, shortened to `width` characters."""
    text = value if isinstance(value, str) else json_text(value)
    return shorten(" ".join(text.split()), width)


def call_text(call: dict[str, Any], width: int | None = None) -> str:
    """`name(arguments) -> result`, or `-> ERROR message` for a call that did not take effect; with
    `width`, the arguments and the outcome are each put on one line and shortened."""
    arguments = json_text(call.get("arguments"))
    outcome = str(call["error"]) if call.get("error") else json_text(call.get("result"))
    if width is not None:
        arguments, outcome = one_line(arguments, width), one_line(outcome, width)
    return f"{call.get('functionName')}({arguments}) -> {'ERROR ' if call.get('error') else ''}{outcome}"


def call_lines(calls: list[dict[str, Any]]) -> list[str]:
    """The calls of one bot turn, one indented line each, as a transcript and the terminal show them."""
    return [f"  [{call_text(call)}]" for call in calls]


def transcript_text(messages: list[dict[str, Any]], *, marked: int | None = None) -> str:
    """The conversation for a model to read: `ROLE: content`, each call of a message below it; the
    message at index `marked` starts with ">>> "."""
    lines = []
    for index, message in enumerate(messages):
        mark = ">>> " if index == marked else ""
        lines.append(f"{mark}{str(message.get('role')).upper()}: {message.get('content') or ''}")
        lines += call_lines(message.get("function_calls") or [])
    return "\n".join(lines)


def excerpt(conversation: dict[str, Any], *, width: int = LINE_CHARS, max_lines: int = EXCERPT_LINES) -> list[str]:
    """The transcript as numbered lines (user turn, then speaker or CALL), each piece on one line and
    shortened to `width`; calls are placed by their `turn`; at most `max_lines` lines."""
    lines, turn = [], 0
    calls: dict[int, list[dict[str, Any]]] = {}
    for call in conversation.get("function_calls", []):
        calls.setdefault(call.get("turn") if isinstance(call.get("turn"), int) else -1, []).append(call)

    def add_calls(at: int) -> None:
        lines.extend(f"[turn {at}] CALL {call_text(call, width)}" for call in calls.pop(at, []))

    for message in conversation.get("messages", []):
        if message.get("role") == "user":
            add_calls(turn)
            turn += 1
        content = one_line(message.get("content") or "", width)
        lines.append(f"[turn {turn}] {str(message.get('role')).upper()}: {content}")
    for at in sorted(calls):
        add_calls(at)
    return lines if len(lines) <= max_lines else [*lines[:max_lines], "... (cut)"]


# --- HTML --------------------------------------------------------------------------------------------

def escape(value: Any) -> str:
    """Any value as HTML text: markup in records is shown, never interpreted."""
    return html.escape(str(value))


def outcome_text(call: dict[str, Any], width: int = RESULT_CHARS) -> str:
    """How a call ended, as a page shows it: `→ result` (shortened) or `error: message`."""
    if call.get("error"):
        return f"error: {call['error']}"
    return "→ " + shorten(json_text(call.get("result")), width)


def call_html(call: dict[str, Any]) -> str:
    """One function call: name, arguments and how it ended (an error in red)."""
    outcome = escape(outcome_text(call))
    if call.get("error"):
        outcome = f"<span class='err'>{outcome}</span>"
    arguments = escape(json_text(call.get("arguments")))
    return f"<div class='call'>{escape(call.get('functionName'))}({arguments}) {outcome}</div>"


def conversation_html(record: dict[str, Any]) -> str:
    """One conversation record: messages, each bot turn's function calls, and how it ended."""
    ending = record.get("termination", {})
    head = (f"<p><b>{escape(record.get('case_id'))}</b> trial {escape(record.get('trial', 0))}"
            f" — ended: {escape(ending.get('reason'))} after {escape(ending.get('turns'))} turns")
    if record.get("error"):
        head += f" — <span class='err'>{escape(record['error'])}</span>"
    parts = [_STYLE, "<div class='lobeval-conv'>", head + "</p>"]
    for message in record.get("messages", []):
        role = "user" if message.get("role") == "user" else "assistant"
        parts.append(f"<div class='m {role}'><b>{role}:</b> {escape(message.get('content') or '')}</div>")
        parts += [call_html(call) for call in message.get("function_calls") or []]
    parts.append("</div>")
    return "".join(parts)
