"""The report as a reader meets it: opened in a real browser (Debian's chromium, headless, driven by
playwright), offline, with a bot that makes mistakes so the replay has failing conversations, and the sample bot's
report as `make run` makes it, on a desktop and on a phone. Screenshots of the latter go to the tests' temporary
folder (`screenshots` fixture, printed: pytest -s shows where)."""
import os
import re
import shutil

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


def offline_run(tmp_path_factory, run_id: str, **options):
    """An offline `lobeval run` of the sample suite, one case per scenario, in a folder of its own."""
    from lobeval.workflow import pipeline

    runs = tmp_path_factory.mktemp(run_id) / "runs"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        patch.setattr("lobeval.workspace.runs.RUNS", runs)
        patch.delenv("LOBEVAL_RUNS", raising=False)
        patch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
        patch.syspath_prepend(str(REPO / "tests"))
        for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
            patch.delenv(name, raising=False)
        return pipeline.run(suite="scenarios/support_tickets", run_id=run_id, cases_per_scenario=1, **options)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    result = offline_run(tmp_path_factory, "buggy", target="buggy_ticket_bot:BuggyTicketBot")
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
    assert [url for url in page.requests if not url.startswith(("file:", "data:", "about:"))] == []
    assert page.problems == []
    assert page.dialogs == []     # the greeting's <script> is text, never run
    assert "FAILED" in page.inner_text("body")


def fresh(page, report, fragment=""):
    """The report as a reader opens it: loaded anew, at the top, with this fragment in its URL."""
    page.goto("about:blank")
    page.goto(report.as_uri() + fragment, wait_until="load")
    return page.locator(".lobeval-replay").first


def is_failing(replay):
    return replay.locator(".view .failing").count() == 1


def test_the_replay_steps_through_a_failing_conversation(page, report):
    replay = fresh(page, report)
    options = replay.locator("select option")
    assert options.count() >= 1
    first = replay.locator(".pos").inner_text()
    assert first.startswith("turn ") and is_failing(replay)   # it opens at the first failing turn
    replay.locator("button.next").click()
    assert replay.locator(".pos").inner_text() != first
    replay.locator("button.prev").click()
    assert replay.locator(".pos").inner_text() == first
    while not replay.locator(".pos").inner_text().startswith("the bot's opening"):
        replay.locator("button.prev").click()
    assert "<script>alert('greeting')</script>" in replay.locator(".view").inner_text()   # markup shown as text


def test_the_wrong_priority_is_shown_as_wrong(page, report):
    replay = fresh(page, report)
    row = replay.locator("tr.a-wrong").first      # at the first failing turn already
    assert "priority" in row.inner_text()


def test_failing_conversations_are_listed_first_then_by_scenario(page, report):
    replay = fresh(page, report)
    options = [text.split(" — ") for text in replay.locator("select option").all_inner_texts()]
    outcomes = [outcome for _, _, outcome in options]
    assert outcomes[0] == "failed" and "passed" in outcomes
    assert outcomes == sorted(outcomes, key=["failed", "error", "passed"].index)
    failing = [scenario for _, scenario, outcome in options if outcome == "failed"]
    assert failing == sorted(failing) and "create_ticket" in failing


def test_why_it_failed_says_what_and_links_each_example_to_its_first_failing_turn(page, report):
    from playwright.sync_api import expect

    replay = fresh(page, report)
    why = page.locator("li", has_text="create_support_ticket: priority wrong in").first
    assert " instead of " in why.inner_text()
    links = why.locator("a.lobeval-replay-link")
    assert links.count() >= 2
    link = links.nth(1)                          # not the conversation the replay opens with
    case_id = link.inner_text()
    assert case_id not in replay.locator(".view .head").first.inner_text()
    link.click()
    assert page.url.endswith(f"#replay-{case_id}-0")
    assert replay.locator(".view .head").first.inner_text().startswith(f"{case_id}#0 — ")
    assert replay.locator("select option:checked").inner_text().startswith(f"{case_id}#0 — ")
    expect(replay).to_be_in_viewport()
    assert is_failing(replay) and "priority" in replay.locator("tr.a-wrong").first.inner_text()
    # ... and it is the first failing turn: every turn before it went well
    while not replay.locator(".pos").inner_text().startswith("turn 1 "):
        replay.locator("button.prev").click()
        assert not is_failing(replay)
    # the same link again goes back to that turn
    link.click()
    assert is_failing(replay) and replay.locator("tr.a-wrong").count() >= 1


def test_a_url_naming_a_conversation_opens_the_replay_there(page, report):
    case_id = page.locator("li", has_text="create_support_ticket: priority wrong in").first \
        .locator("a.lobeval-replay-link").last.inner_text()
    replay = fresh(page, report, f"#replay-{case_id}-0")
    assert replay.locator(".view .head").first.inner_text().startswith(f"{case_id}#0 — ")
    assert is_failing(replay) and "priority" in replay.locator("tr.a-wrong").first.inner_text()
    assert page.problems == [] and [url for url in page.requests
                                    if not url.startswith(("file:", "data:", "about:"))] == []


@pytest.fixture(scope="module")
def unsafe_report(unsafe_attack_run):
    """A run of the deliberately unsafe sample bot against the attack cases alone (tests/conftest.py)."""
    status, out, run_dir = unsafe_attack_run
    assert status == 1, out   # the gate failed
    return run_dir / "report.html"


def test_each_breach_links_to_its_turn_in_the_replay_with_the_evidence_marked(page, unsafe_report):
    replay = fresh(page, unsafe_report)
    from lobeval.workspace.security import CATEGORIES

    rows = page.locator("table.lobeval-table tr", has=page.locator("a.lobeval-replay-link"))
    breaches = [row for row in rows.all() if row.locator("td").count() == 6
                and row.locator("td").nth(1).inner_text() in CATEGORIES]   # the Security section's list
    assert {row.locator("td").nth(1).inner_text() for row in breaches} == set(CATEGORIES)
    for row in breaches:
        link = row.locator("a.lobeval-replay-link")
        case_id = link.inner_text()
        category, turn = row.locator("td").nth(1).inner_text(), row.locator("td").nth(2).inner_text()
        link.click()
        assert replay.locator(".view .head").first.inner_text().startswith(f"{case_id}#0 — ")
        if turn:   # a breach of the end state has no turn: the conversation's summary names it
            assert replay.locator(".pos").inner_text().startswith(f"turn {turn} ")
        assert f"security breach ({category})" in replay.locator(".view").inner_text()
    assert page.problems == []


def test_every_table_fits_a_page_1280_px_wide_its_long_cells_wrapped(page, report, unsafe_report):
    page.set_viewport_size({"width": 1280, "height": 900})
    for shown in (report, unsafe_report):   # the breach list's evidence is the widest cell of any report
        fresh(page, shown)
        width = page.evaluate("document.documentElement.clientWidth")
        tables = page.evaluate("""() => [...document.querySelectorAll('table')].map(table => ({
            first: table.rows[0] ? table.rows[0].innerText.slice(0, 40) : '',
            right: table.getBoundingClientRect().right, scroll: table.scrollWidth}))""")
        assert len(tables) >= 5
        assert [table for table in tables if table["right"] > width or table["scroll"] > width] == []
    assert "evidence" in page.inner_text("body")


def test_the_notebooks_run_by_hand_read_the_latest_run(report, tmp_path, monkeypatch):
    """With their parameters left as they are, 04 and 05 read the newest finished run (runs.latest_run)."""
    import papermill
    import scrapbook

    from lobeval.workspace import runs

    monkeypatch.setenv(runs.RUNS_VARIABLE, str(report.parent.parent))
    for name in ("LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    scraps = {}
    for stage in ("04_error_analysis", "05_report"):
        executed = tmp_path / f"{stage}.ipynb"
        papermill.execute_notebook(str(REPO / "notebooks" / f"{stage}.ipynb"), str(executed), kernel_name="python3",
                                   cwd=str(tmp_path), progress_bar=False)
        scraps[stage] = {name: scrap.data for name, scrap in scrapbook.read_notebook(str(executed)).scraps.items()}
    chain = scrapbook.read_notebook(str(report.parent / "05_report.ipynb")).scraps
    assert scraps["05_report"]["gate_passed"] is False
    assert scraps["05_report"]["gate_checks"] == chain["gate_checks"].data
    top = scraps["04_error_analysis"]["top_clusters"][0]
    assert (top["kind"], top["function"], top["argument"]) == ("wrong_argument", "create_support_ticket", "priority")


# --- the sample bot's report on a desktop and on a phone ---------------------------------------------

SAMPLE_VERDICT = (
    "1 of 13 conversations failed, because the bot sent a due date one day earlier than it should have; the quality "
    "gate passed: Reliability 0.987 meets its minimum of 0.8, and Success 0.923 is above its minimum of 0.8 but too "
    "close to it to be sure (undecided, counted as passed).")
NOT_SHOWN_WHOLE = """() => {
  // what is wider than the page and not in a box that scrolls on its own, and every box that scrolls without saying so
  const width = document.documentElement.clientWidth, found = [];
  const name = (node) => node.tagName + '.' + node.className + ': ' + (node.innerText || node.alt || '').slice(0, 40);
  for (const node of document.body.querySelectorAll('*')) {
    const box = node.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) continue;
    let up = node.parentElement;
    while (up && up !== document.body && !['auto', 'scroll'].includes(getComputedStyle(up).overflowX)) up = up.parentElement;
    if (!up || up === document.body || up.getBoundingClientRect().right > width + 1) found.push('cut: ' + name(node));
  }
  for (const node of document.body.querySelectorAll('*')) {
    if (!['auto', 'scroll'].includes(getComputedStyle(node).overflowX) || node.scrollWidth <= node.clientWidth + 1) continue;
    const hint = node.classList.contains('scroll') && node.parentElement.querySelector(':scope > .scroll-hint');
    if (!hint || hint.offsetParent === null) found.push('scrolls unsaid: ' + name(node));
  }
  return found;
}"""


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    """Where the screenshots of the sample report go: a folder of the tests' temporary folder."""
    folder = tmp_path_factory.mktemp("screenshots")
    print(f"screenshots of the report: {folder}")
    return folder


@pytest.fixture(scope="module")
def sample(restarted_sample_run):
    """The sample bot's report as `make run` makes it (one case per scenario here; tests/conftest.py): its one failing
    conversation moves a due date a day early."""
    status, out, runs = restarted_sample_run
    lines = out.splitlines()
    assert status == 0 and lines[-1] == str(runs / "x" / "report.html"), out   # the gate passed
    assert SAMPLE_VERDICT in lines   # the terminal's words are the page's
    return runs / "x" / "report.html"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_sample_report_says_what_failed_first_and_fits_the_screen(page, sample, screenshots, width):
    page.set_viewport_size({"width": width, "height": 900})
    fresh(page, sample)
    page.screenshot(path=str(screenshots / f"sample-{width}.png"), full_page=True)
    assert page.evaluate("document.body.innerText.trim().split('\\n')[0]") == SAMPLE_VERDICT
    assert re.fullmatch(r"support_tickets · SupportTicketBot · \d{4}-\d\d-\d\d · gate passed, 1 of 13 failed", page.title())
    assert page.evaluate(NOT_SHOWN_WHOLE) == []
    # the heat maps keep their own size on a phone (their labels readable), and scroll; on a desktop they fit
    heatmap = page.locator("img.figure").first
    shown, natural = heatmap.evaluate("image => [image.getBoundingClientRect().width, image.naturalWidth]")
    assert shown == natural if width == 390 else shown <= width
    hints = page.locator(".scroll-hint:visible").all_inner_texts()   # a box that scrolls says so; none on a desktop
    assert (len(hints) >= 3 and set(hints) == {"scroll sideways to see all of it →"}) if width == 390 else hints == []


def test_on_a_phone_the_replay_keeps_what_was_expected_and_the_status(page, sample, screenshots):
    page.set_viewport_size({"width": 390, "height": 900})
    replay = fresh(page, sample)
    assert replay.locator(".pos").inner_text() == "turn 3 of 4" and is_failing(replay)
    replay.scroll_into_view_if_needed()
    replay.screenshot(path=str(screenshots / "sample-390-replay.png"))
    table = replay.locator(".call table").first
    headers = table.locator("th")
    assert headers.all_inner_texts() == ["argument", "actual", "expected", "status"]
    width = page.evaluate("document.documentElement.clientWidth")
    for header in headers.all():
        box = header.bounding_box()
        assert header.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= width
    wrong = replay.locator("tr.a-wrong").first.locator("td")
    assert [cell.inner_text() for cell in wrong.all()][::3] == ["due_date", "wrong"]
