"""HTML views of records for notebooks and the report. Every piece of record text is escaped."""
from __future__ import annotations

import html
import json
from typing import Any

_STYLE = ("<style>.lobeval-conv{font-family:sans-serif;font-size:13px;max-width:900px}"
          ".lobeval-conv .m{margin:4px 0;padding:6px 8px;border-radius:6px;white-space:pre-wrap}"
          ".lobeval-conv .user{background:#eef4ff}.lobeval-conv .assistant{background:#f4f4f4}"
          ".lobeval-conv .call{font-family:monospace;font-size:12px;color:#444;margin-left:16px}"
          ".lobeval-conv .err{color:#b00020}</style>")


def _call_html(call: dict[str, Any]) -> str:
    args = html.escape(json.dumps(call.get("arguments"), ensure_ascii=False, default=str))
    if call.get("error"):
        outcome = f"<span class='err'>error: {html.escape(str(call['error']))}</span>"
    else:
        outcome = "→ " + html.escape(json.dumps(call.get("result"), ensure_ascii=False, default=str)[:300])
    return f"<div class='call'>{html.escape(call['functionName'])}({args}) {outcome}</div>"


def conversation_html(record: dict[str, Any]) -> str:
    """One conversation: messages, each bot turn's function calls, and how it ended."""
    ending = record.get("termination", {})
    head = (f"<p><b>{html.escape(str(record.get('case_id')))}</b> trial {html.escape(str(record.get('trial', 0)))}"
            f" — ended: {html.escape(str(ending.get('reason')))} after {html.escape(str(ending.get('turns')))} turns")
    if record.get("error"):
        head += f" — <span class='err'>{html.escape(str(record['error']))}</span>"
    parts = [_STYLE, "<div class='lobeval-conv'>", head + "</p>"]
    for message in record.get("messages", []):
        role = "user" if message.get("role") == "user" else "assistant"
        parts.append(f"<div class='m {role}'><b>{role}:</b> {html.escape(str(message.get('content', '')))}</div>")
        parts += [_call_html(call) for call in message.get("function_calls") or []]
    parts.append("</div>")
    return "".join(parts)
