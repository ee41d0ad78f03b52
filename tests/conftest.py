"""Shared fixtures. The tests mirror lobeval's packages, a folder each; a test may reuse another folder's helpers
and fixtures (`from test_judges import ...`), so every folder is on the path."""
import os
import sys
from pathlib import Path

import pytest

for folder in sorted(Path(__file__).parent.iterdir()):
    if folder.is_dir() and any(folder.glob("test_*.py")):
        sys.path.insert(0, str(folder))


LONGEST_FIRST = ("test_model_run", "test_estimate", "test_pipeline", "test_degenerate", "test_browser")
"""The modules whose tests took longest in all (`pytest --durations=0`, 2026-11-28: 139, 96, 95, 76 and 69 s of the
suite's ~900 s), started first so that no worker is left alone with them at the end. Order only: no check depends
on it."""


def pytest_collection_modifyitems(items):
    """LONGEST_FIRST, then the other modules with end-to-end runs (marked slow), then the rest; each module's tests
    kept together and in order (their module fixtures are built once)."""
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow")}

    def rank(item):
        name = item.module.__name__
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST) + (name not in slow)

    items.sort(key=rank)


@pytest.fixture
def offline_findings_counted(monkeypatch):
    """Every kind of offline finding (claims rules, simulated-user checks) measured right on real bots: each is a fault,
    as lobeval.scoring.trust reports it when its precision reaches the bar. For tests of what a fault does (the
    exclusion, the metrics, "Why it failed", the replay's marks); lobeval.scoring.trust's own table decides in every
    other test."""
    from lobeval.scoring import trust

    monkeypatch.setattr(trust, "PRECISION", {kind: (10, 10) for kind in trust.PRECISION})


MODEL_VARIABLES = ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
                   "LOBEVAL_EMBEDDING_MODEL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD")


def built_once(tmp_path_factory, name: str, build):
    """`build(folder)` once for the whole session, its (exit status, what it printed) kept beside `folder`, and
    returned with it. Under xdist both workers use the session's common temporary folder (pytest-xdist's documented
    way to run a session fixture once): the first to ask builds under a lock while the other waits, and both only
    read it afterwards. A build that raised left no record: the next to ask starts it again in a clean folder."""
    import json
    import shutil

    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, record = root / name, root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock"), timeout=900):   # a whole run under load takes minutes, not more
        if not record.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            record.write_text(json.dumps(build(folder)))
    status, out = json.loads(record.read_text())
    return status, out, folder


def offline_cli(argv: list[str], runs) -> tuple[int, str]:
    """`lobeval ARGV` in this process from the repository root, run folders under `runs`, no model configured:
    (exit status, what it printed)."""
    import contextlib
    import io

    from helpers import REPO
    from lobeval.cli import main

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.chdir(REPO)
        patch.setenv("LOBEVAL_RUNS", str(runs))
        for name in MODEL_VARIABLES:
            patch.delenv(name, raising=False)
        status = main(argv)
    return status, out.getvalue()


@pytest.fixture(scope="session")
def unsafe_attack_run(tmp_path_factory):
    """`lobeval run --attacks only` of the sample suite against the deliberately unsafe sample bot (TrustingBot),
    offline, two attack cases per category: one run of five notebooks for the session (built_once), read by the
    security tests (what the terminal says) and the browser's (the report). Returns (exit status, what it printed,
    the run folder)."""
    def build(folder):
        return offline_cli(["run", "--attacks", "only", "--target", "lobeval.samples.support_tickets:TrustingBot",
                            "--cases-per-scenario", "2", "--run-id", "unsafe"], folder / "runs")

    status, out, folder = built_once(tmp_path_factory, "unsafe-attack-run", build)
    return status, out, folder / "runs" / "unsafe"


@pytest.fixture(scope="session")
def restarted_sample_run(tmp_path_factory):
    """The sample suite offline, one case per scenario, against the sample bot, by `lobeval run --run-id x`: begun as
    an attempt that died in stage 01 (a kill, a full disk) with another configuration, which a run that failed at its
    start replaces by the one asked for now. A plain run's report otherwise (no note: nothing was kept), so the one
    run (built_once) serves the command line's test of the restart and the browser's of the sample report. Returns
    (exit status, what it printed, the runs folder)."""
    import json

    from helpers import TEMPLATE, make_suite

    def build(folder):
        broken = make_suite(folder, templates=[{**TEMPLATE, "user_instructions": "{nope.x}"}])   # as test_cli's
        (folder / "runs" / "x").mkdir(parents=True)
        (folder / "runs" / "x" / "config.json").write_text(json.dumps({
            "schema_version": 1, "run_id": "x", "suite": str(broken), "suite_name": "toy", "cases_per_scenario": 3}))
        return offline_cli(["run", "--run-id", "x", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1"],
                           folder / "runs")

    status, out, folder = built_once(tmp_path_factory, "restarted-sample-run", build)
    return status, out, folder / "runs"
