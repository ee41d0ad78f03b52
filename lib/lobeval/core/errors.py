"""The exceptions lobeval raises for things a user must fix.

Every one of them means "bad input" (exit status 2 on the command line) and says where the
fault is: the file, the record within it, and the field. Two are not about input: `TargetUnavailable` (the
bot's infrastructure failed) and `StageCrashed` (lobeval's own fault).
"""
from __future__ import annotations

from typing import Any


class LobevalError(Exception):
    """Base class; `lobeval` turns it into exit status 2 and a one-line message."""


class ConfigError(LobevalError):
    """A parameter, an environment variable or a command-line option is wrong."""


class RecordError(LobevalError):
    """A record in a file is wrong: names the file, the record and the field."""

    def __init__(self, file: object, record: object, field: object, problem: str):
        self.file, self.record, self.field, self.problem = str(file), record, field, problem
        where = f"{self.file}: {record}" + (f": field '{field}'" if field not in (None, "") else "")
        super().__init__(f"{where}: {problem}")


class RoleError(LobevalError):
    """A target, simulated user or judge cannot be constructed from its spec."""


class TargetUnavailable(Exception):
    """Raise it from a target when its own infrastructure failed (its model endpoint, its database).

    The conversation is then a machinery error: left out of every metric, counted in the error
    rate and run again by `lobeval simulate --retry-errors`, never scored as the bot's failure.
    Over HTTP a target says the same with status 429, 502, 503 or 504. `usage` is what the turn's own
    model calls had used before it failed (as in a reply's usage), so that it is still counted;
    `function_calls` the calls the turn had already made (as in a reply), so that they stay in the record.
    """

    def __init__(self, message: str = "", *, usage: dict[str, float | None] | None = None,
                 function_calls: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.usage, self.function_calls = usage, function_calls or []


class StageCrashed(Exception):
    """A stage notebook raised what is no LobevalError: a fault in lobeval (exit status 70 on the command line), never
    bad input. `notebook`: the executed notebook, kept in the run folder; `traceback`: the kernel's, as text."""

    def __init__(self, stage: str, notebook: object, error: str, traceback: str):
        self.stage, self.notebook, self.traceback = stage, str(notebook), traceback
        super().__init__(error)


def import_failure(exc: BaseException) -> str:
    """Why user code could not be imported, in a few words."""
    if isinstance(exc, SystemExit):
        return (f"it calls sys.exit({exc.code!r}) when imported: keep a script's own code under "
                f"`if __name__ == \"__main__\":`")
    return f"{type(exc).__name__}: {exc}"
