"""The checkout lobeval works in: the folder holding notebooks/ (the stage notebooks), scenarios/ and runs/.

`lobeval` works from any folder inside it: the checkout is the nearest folder, from the working folder up, that
holds the stage notebooks; else the one the package was installed from (`pip install -e .`, as `make` installs it),
so that `lobeval run` works from anywhere on the machine. A relative path given on the command line (`--suite
scenarios/support_tickets`) is read from the working folder, or else from the checkout's root.
"""
from __future__ import annotations

from pathlib import Path

NOTEBOOKS = "notebooks"
MARKER = Path(NOTEBOOKS) / "01_generate.ipynb"
"""What tells a checkout: its first stage notebook (a folder named notebooks/ alone may be any project's)."""


def root(start: Path | None = None) -> Path | None:
    """The checkout holding `start` (default: the working folder), else the one the package was installed from;
    None when neither holds the stage notebooks."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / MARKER).is_file():
            return folder
    installed = Path(__file__).resolve().parents[3]   # lib/lobeval/core/checkout.py
    return installed if (installed / MARKER).is_file() else None


def in_checkout(path: str) -> str:
    """A relative path as given when it names something from the working folder, else the same path under the
    checkout's root when it names something there; as given otherwise, so that the error names what was typed."""
    found = root()
    if Path(path).is_absolute() or Path(path).exists() or found is None or not (found / path).exists():
        return path
    return str(found / path)
