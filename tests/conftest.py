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
