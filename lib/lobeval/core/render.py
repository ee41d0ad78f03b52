"""How records look: transcripts and function calls as plain text (judge and root-cause prompts, the
terminal) and as HTML (notebooks, the report, the widgets). Every piece of record text put into HTML
is escaped. Plain text writes a result as `-> result`, a page as `→ result`.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any

from lobeval.core.protocol import reply_text

RESULT_CHARS = 600     # of a call's result shown on a page
LINE_CHARS = 300       # of each piece of an excerpt line
EXCERPT_LINES = 40

_STYLE = ("<style>.lobeval-conv{font-family:sans-serif;font-size:13px;max-width:900px}"
          ".lobeval-conv .m{margin:4px 0;padding:6px 8px;border-radius:6px;white-space:pre-wrap}"
          ".lobeval-conv .user{background:#eef4ff}.lobeval-conv .assistant{background:#f4f4f4}"
          ".lobeval-conv .call{font-family:monospace;font-size:12px;color:#444;margin-left:16px}"
          ".lobeval-conv .err{color:#b00020}</style>")


# --- plain text --------------------------------------------------------------------------------------

METRIC_NAMES = {"Reliability": "Reliability", "Success": "Success", "Recall_fn": "Function recall",
                "Precision_fn": "Function precision", "Recall_args": "Argument recall",
                "Precision_args": "Argument precision", "pass^1": "pass^1", "judge.final_score": "Judges' final score"}
"""The metrics as a reader knows them, wherever a page names them."""


def metric_name(name: str) -> str:
    """A metric as a reader knows it: "Function recall" for Recall_fn, "goal" for judge.goal."""
    return METRIC_NAMES.get(name) or name.removeprefix("judge.").replace("_", " ")


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


def said(message: dict[str, Any]) -> str:
    """A message's text as lobeval reads it: the bot's through `reply_text` (a reply written as JSON as its text),
    the user's as written."""
    content = message.get("content")
    if message.get("role") == "assistant":
        return reply_text(content)
    return content if isinstance(content, str) else ("" if content is None else json_text(content))


def call_lines(calls: list[dict[str, Any]]) -> list[str]:
    """The calls of one bot turn, one indented line each, as a transcript and the terminal show them."""
    return [f"  [{call_text(call)}]" for call in calls]


def transcript_text(messages: list[dict[str, Any]]) -> str:
    """The conversation for a model to read: `ROLE: content`, each call of a message below it."""
    lines = []
    for message in messages:
        lines.append(f"{str(message.get('role')).upper()}: {said(message)}")
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
        content = one_line(said(message), width)
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
        parts.append(f"<div class='m {role}'><b>{role}:</b> {escape(said(message))}</div>")
        parts += [call_html(call) for call in message.get("function_calls") or []]
    parts.append("</div>")
    return "".join(parts)


# --- a small markdown subset, for what a bot writes ------------------------------------------------

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*(\d{1,9})[.)]\s+(.*)$")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*)$")


def _inline_markdown(text: str) -> str:
    """One line as HTML: escaped first, then `code`, **bold** and *italic* marked up (nothing inside code)."""
    parts = _CODE_SPAN.split(text)   # odd items are the insides of code spans
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f"<code>{escape(part)}</code>")
        else:
            part = _BOLD.sub(r"<strong>\1</strong>", escape(part))
            out.append(_ITALIC.sub(r"<em>\1</em>", part))
    return "".join(out)


def markdown_html(text: Any) -> str:
    """What a bot wrote, as HTML: the markdown bots use — paragraphs and line breaks, `-`/`*` and `1.` lists,
    `#` headings (as bold lines), **bold**, *italic* and `code` — and nothing else. Every character of the
    text is escaped before any tag is added, so markup in it (raw HTML, scripts) is shown, never run; links
    stay text."""
    blocks: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    kind = ""
    start = 1

    def end_paragraph() -> None:
        if paragraph:
            blocks.append("<p>" + "<br>".join(paragraph) + "</p>")
            paragraph.clear()

    def end_list() -> None:
        nonlocal kind
        if items:
            opening = f"<ol start='{start}'>" if kind == "ol" and start != 1 else f"<{kind}>"
            blocks.append(opening + "".join(f"<li>{item}</li>" for item in items) + f"</{kind}>")
            items.clear()
        kind = ""

    for line in str(text if text is not None else "").replace("\r\n", "\n").split("\n"):
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        if bullet or numbered:
            end_paragraph()
            wanted = "ul" if bullet else "ol"
            if kind != wanted:
                end_list()
                kind = wanted
                start = int(numbered.group(1)) if numbered else 1
            items.append(_inline_markdown(bullet.group(1) if bullet else numbered.group(2)))
        elif not line.strip():
            end_paragraph()
            end_list()
        else:
            end_list()
            heading = _HEADING.match(line)
            paragraph.append(f"<strong>{_inline_markdown(heading.group(1))}</strong>" if heading
                             else _inline_markdown(line))
    end_paragraph()
    end_list()
    return "".join(blocks)
