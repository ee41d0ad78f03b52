"""Reviewing drafts before they become a suite's templates (notebooks/00_draft.ipynb): accept, edit or reject
each; only the accepted ones are written. `DraftReview` holds the decisions as plain Python (testable without a
kernel); `ReviewWidget` is its ipywidgets face."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from lobeval.drafting.draft import Draft, DraftResult, check_out, prove
from lobeval.core.errors import LobevalError
from lobeval.core.records import write_json
from lobeval.workspace.suite import Suite

DECISIONS = ("undecided", "accepted", "rejected")


class DraftReview:
    """The drafts of one `lobeval.drafting.draft.propose` and the analyst's decision on each."""

    def __init__(self, suite: Suite, result: DraftResult, *, seed: int = 42, target: str | None = None):
        self.suite, self.seed, self.target = suite, seed, target
        self.drafts: dict[str, Draft] = {d.name: d for d in result.accepted}
        self.decisions: dict[str, str] = {name: "undecided" for name in self.drafts}

    def accept(self, name: str) -> None:
        self.decisions[self._known(name)] = "accepted"

    def reject(self, name: str) -> None:
        self.decisions[self._known(name)] = "rejected"

    def edit(self, name: str, text: str) -> str | None:
        """Replace a draft by the template `text` (JSON) and accept it when it passes the gates again; else the
        reason, and the draft stays as it was."""
        self._known(name)
        try:
            template = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        if not isinstance(template, dict):
            return "not a template: give one JSON object"
        template = {**template, "scenario_name": name}
        passed, rejected = prove(self.suite, [Draft(template, "edited")], self.seed, self.target or
                                 self.suite.default_target)
        if rejected:
            return rejected[0][1]
        self.drafts[name] = passed[0]
        self.decisions[name] = "accepted"
        return None

    def accepted(self) -> list[dict[str, Any]]:
        return [self.drafts[name].template for name, decision in self.decisions.items() if decision == "accepted"]

    def save(self, out: str | Path | None = None, force: bool = False) -> Path:
        """Write the accepted drafts (and nothing else) to `out`, default the suite's templates.json, where
        `lobeval draft` would write them (`force`: over a file that holds templates)."""
        return write_json(check_out(self.suite, out, force), self.accepted())

    def _known(self, name: str) -> str:
        if name not in self.drafts:
            raise KeyError(f"no draft named {name!r} (drafts: {', '.join(self.drafts)})")
        return name


def draft_html(item: Draft) -> str:
    """A draft as the reviewer reads it: its instructions, expected calls and first case, escaped."""
    template = item.template
    case = item.cases[0] if item.cases else {}
    calls = json.dumps(template["expected_function_calls"], indent=1, ensure_ascii=False)
    filled = case.get("user_instructions", "")
    return (f"<h4>{html.escape(item.name)} <small>({html.escape(item.kind)})</small></h4>"
            f"<p><b>Instructions</b></p><pre>{html.escape(template['user_instructions'])}</pre>"
            f"<p><b>Filled, first case</b></p><pre>{html.escape(filled)}</pre>"
            f"<p><b>Expected calls</b></p><pre>{html.escape(calls)}</pre>")


class ReviewWidget(widgets.VBox):
    """Pick a draft, read it, accept / edit (the template as JSON, proven again) / reject it, and write the
    accepted ones (`out`, `force`: as `DraftReview.save`)."""

    def __init__(self, review: DraftReview, out: str | Path | None = None, force: bool = False):
        self.review, self.out, self.force = review, out, force
        self.pick = widgets.Dropdown(options=list(review.drafts), description="draft",
                                     layout=widgets.Layout(width="520px"))
        self.view = widgets.HTML()
        self.text = widgets.Textarea(layout=widgets.Layout(width="100%", height="220px"))
        self.status = widgets.HTML()
        buttons = {"accept": self._accept, "save edit": self._edit, "reject": self._reject,
                   "write accepted drafts": self._save}
        row = []
        for description, handler in buttons.items():
            button = widgets.Button(description=description)
            button.on_click(lambda _, handler=handler: handler())
            row.append(button)
        self.pick.observe(lambda _: self._show(), names="value")
        super().__init__([self.pick, self.view, self.text, widgets.HBox(row), self.status])
        self._show()

    def _show(self, message: str = "", keep_text: bool = False) -> None:
        name = self.pick.value
        if name is None:
            self.view.value, self.text.value = "<p>No draft passed its gates.</p>", ""
        else:
            self.view.value = draft_html(self.review.drafts[name])
            if not keep_text:   # an edit that failed its gates stays in the box, to be fixed
                self.text.value = json.dumps(self.review.drafts[name].template, indent=1, ensure_ascii=False)
        counts = {d: list(self.review.decisions.values()).count(d) for d in DECISIONS}
        decided = f"{self.review.decisions[name]}. " if name else ""
        self.status.value = html.escape(f"{message}{decided}" + ", ".join(f"{n} {d}" for d, n in counts.items()))

    def _accept(self) -> None:
        if self.pick.value:
            self.review.accept(self.pick.value)
        self._show()

    def _reject(self) -> None:
        if self.pick.value:
            self.review.reject(self.pick.value)
        self._show()

    def _edit(self) -> None:
        if self.pick.value:
            problem = self.review.edit(self.pick.value, self.text.value)
            self._show(f"Not saved: {problem} " if problem else "Edit saved. ", keep_text=bool(problem))

    def _save(self) -> None:
        try:
            path = self.review.save(self.out, self.force)
        except LobevalError as exc:
            self._show(f"Not written: {exc}. ")
            return
        self._show(f"Wrote {len(self.review.accepted())} accepted drafts to {path}. ")
