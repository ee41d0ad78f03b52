"""Shared fixtures."""
import pytest


@pytest.fixture
def offline_findings_counted(monkeypatch):
    """Every kind of offline finding (claims rules, simulated-user checks) measured right on real bots: each is a fault,
    as lobeval.trust reports it when its precision reaches the bar. For tests of what a fault does (the exclusion, the
    metrics, "Why it failed", the replay's marks); lobeval.trust's own table decides in every other test."""
    from lobeval import trust

    monkeypatch.setattr(trust, "PRECISION", {kind: (10, 10) for kind in trust.PRECISION})
