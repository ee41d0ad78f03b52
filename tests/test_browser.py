"""The report as a reader meets it: opened in a real browser (Debian's chromium, headless, driven by
playwright), offline, with a bot that makes mistakes so the replay has failing conversations."""
import os
import shutil
import sys

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:
    # .ci/run installs Debian's chromium; on a developer's machine without it the test says so.
    if os.environ.get("CI"):
        raise RuntimeError("chromium is missing: .ci/run should have installed Debian's chromium package")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

# As the workplace runs it: no sandbox as root, and none of chromium's own background traffic.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from lobeval import pipeline

    runs = tmp_path_factory.mktemp("browser") / "runs"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        patch.setattr("lobeval.runs.RUNS", runs)
        patch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
        patch.syspath_prepend(str(REPO / "tests"))
        for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
            patch.delenv(name, raising=False)
        result = pipeline.run(suite="scenarios/support_tickets", run_id="buggy", cases_per_scenario=1,
                              target="buggy_ticket_bot:BuggyTicketBot")
    assert not result.gate_passed
    return result.report


@pytest.fixture(scope="module")
def page(report):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()
        page.requests, page.problems, page.dialogs = [], [], []
        page.on("request", lambda request: page.requests.append(request.url))
        page.on("console", lambda message: page.problems.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: page.problems.append(str(error)))
        page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(report.as_uri(), wait_until="load")
        yield page
        browser.close()


def test_the_page_asks_no_other_host_and_has_no_script_errors(page, report):
    assert [url for url in page.requests if not url.startswith(("file:", "data:"))] == []
    assert page.problems == []
    assert page.dialogs == []     # the greeting's <script> is text, never run
    assert "FAILED" in page.inner_text("body")


def test_the_replay_steps_through_a_failing_conversation(page):
    replay = page.locator(".lobeval-replay").first
    options = replay.locator("select option")
    assert options.count() >= 1
    first = replay.locator(".pos").inner_text()
    replay.locator("button.next").click()
    assert replay.locator(".pos").inner_text() != first
    replay.locator("button.prev").click()
    assert replay.locator(".pos").inner_text() == first
    assert "<script>alert('greeting')</script>" in replay.locator(".view").inner_text()   # markup shown as text


def test_the_wrong_priority_is_shown_as_wrong(page):
    replay = page.locator(".lobeval-replay").first
    for _ in range(12):
        if replay.locator("tr.a-wrong").count():
            break
        replay.locator("button.next").click()
    row = replay.locator("tr.a-wrong").first
    assert "priority" in row.inner_text()
