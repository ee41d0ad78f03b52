"""Shared fixtures. The tests mirror lobeval's packages, a folder each; a test may reuse another folder's helpers
and fixtures (`from test_judges import ...`), so every folder is on the path."""
import sys
from pathlib import Path

import pytest

for folder in sorted(Path(__file__).parent.iterdir()):
    if folder.is_dir() and any(folder.glob("test_*.py")):
        sys.path.insert(0, str(folder))


@pytest.fixture
def offline_findings_counted(monkeypatch):
    """Every kind of offline finding (claims rules, simulated-user checks) measured right on real bots: each is a fault,
    as lobeval.scoring.trust reports it when its precision reaches the bar. For tests of what a fault does (the
    exclusion, the metrics, "Why it failed", the replay's marks); lobeval.scoring.trust's own table decides in every
    other test."""
    from lobeval.scoring import trust

    monkeypatch.setattr(trust, "PRECISION", {kind: (10, 10) for kind in trust.PRECISION})


@pytest.fixture(scope="session")
def unsafe_attack_run(tmp_path_factory):
    """`lobeval run --attacks only` of the sample suite against the deliberately unsafe sample bot (TrustingBot),
    offline, two attack cases per category: one run of five notebooks, read by the security tests (what the terminal
    says) and the browser's (the report). Built once per pytest process (each xdist worker its own); its readers
    only read it. Returns (exit status, what it printed, the run folder)."""
    import contextlib
    import io

    from helpers import REPO
    from lobeval.cli import main

    runs = tmp_path_factory.mktemp("unsafe") / "runs"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.chdir(REPO)
        patch.setenv("LOBEVAL_RUNS", str(runs))
        for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
            patch.delenv(name, raising=False)
        status = main(["run", "--attacks", "only", "--target", "lobeval.samples.support_tickets:TrustingBot",
                       "--cases-per-scenario", "2", "--run-id", "unsafe"])
    return status, out.getvalue(), runs / "unsafe"


@pytest.fixture(scope="session")
def restarted_sample_run(tmp_path_factory):
    """The sample suite offline, one case per scenario, against the sample bot, by `lobeval run --run-id x`: begun as
    an attempt that died in stage 01 (a kill, a full disk) with another configuration, which a run that failed at its
    start replaces by the one asked for now. A plain run's report otherwise (no note: nothing was kept), so the one
    run serves the command line's test of the restart and the browser's of the sample report. Built once per pytest
    process; its readers only read it. Returns (exit status, what it printed, the runs folder)."""
    import contextlib
    import io
    import json

    from helpers import REPO, TEMPLATE, make_suite
    from lobeval.cli import main

    root = tmp_path_factory.mktemp("restarted")
    broken = make_suite(root, templates=[{**TEMPLATE, "user_instructions": "{nope.x}"}])   # as test_cli's
    runs = root / "runs"
    (runs / "x").mkdir(parents=True)
    (runs / "x" / "config.json").write_text(json.dumps({"schema_version": 1, "run_id": "x", "suite": str(broken),
                                                         "suite_name": "toy", "cases_per_scenario": 3}))
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.chdir(REPO)
        patch.setenv("LOBEVAL_RUNS", str(runs))
        for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
                     "LOBEVAL_EMBEDDING_MODEL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD"):
            patch.delenv(name, raising=False)
        status = main(["run", "--run-id", "x", "--suite", "scenarios/support_tickets", "--cases-per-scenario", "1"])
    return status, out.getvalue(), runs
