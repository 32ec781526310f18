"""`tether ui` in a real headless browser: Debian's chromium driven by Playwright (the
extra ``tether[browser]``; never ``playwright install``). Logs in with the printed token,
opens a session and its epochs, follows a recall hit to its turn, edits an identity entry
and finds the journal line, and sees a stored ``<script>`` and link stay inert. Writes a
screenshot of each view to ``build/ui-screens/`` (ignored by git) for the closing note.

Skipped, with the reason printed, where Playwright or chromium is absent."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ui_helpers import LINK, SCRIPT, Served, build_home, fresh_login, serve_ui
from web_helpers import serve_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENS = Path(__file__).resolve().parents[1] / "build" / "ui-screens"


def _why_no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is absent (pip install -e '.[browser]')"
    if shutil.which("chromium") is None and not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = _why_no_browser()
    if reason is not None:
        print(f"browser lane skipped: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = build_home(tmp_path_factory.mktemp("ui-browser"))
    with serve_ui(home) as s:
        yield s


@pytest.fixture
def page(browser: Browser, served: Served) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.goto(fresh_login(served))
    yield p
    context.close()


def shot(page: Page, name: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / f"{name}.png"), full_page=True)


def test_log_in_with_the_printed_token(browser: Browser, served: Served) -> None:
    context = browser.new_context()
    p = context.new_page()
    try:
        refused = p.goto(f"{served.base}/sessions")
        assert refused is not None
        assert refused.status == 403
        p.goto(served.login)
        assert p.url == f"{served.base}/"  # the token is gone from the address bar
        assert "Memory of" in p.inner_text("h1")
        shot(p, "01-overview")
        # The URL worked once: a second browser with it is refused.
        other = browser.new_context()
        again = other.new_page().goto(served.login)
        assert again is not None
        assert again.status == 403
        other.close()
    finally:
        context.close()


def test_open_a_session_and_see_its_epochs(page: Page, served: Served) -> None:
    page.click("text=sessions")
    shot(page, "02-sessions")
    page.click("a[href='/sessions/work']")
    epochs = page.locator("table.epochs tr[id^=epoch-]")
    assert epochs.count() == 2
    assert "Codename kumquat; staging box walrus." in epochs.nth(0).inner_text()
    assert ".seg-" in epochs.nth(0).inner_text()  # the banked segment of epoch 0
    assert "(current epoch)" in epochs.nth(1).inner_text()
    markers = page.locator("li.marker")
    assert markers.count() == 2
    assert "epoch 1 began after compaction" in markers.nth(1).inner_text()
    assert page.locator("li#turn-5").count() == 1
    shot(page, "03-session")
    page.locator("table.epochs a[href*='/segments/']").first.click()
    assert "kumquat" in page.inner_text("pre")
    shot(page, "04-segment")
    page.goto(f"{served.base}/sessions/reader")
    labels = page.locator("ol.log .label").all_inner_texts()
    assert "untrusted" in labels  # the fetched page
    assert "tainted" in labels  # the reply written after reading it


def test_search_and_follow_a_hit_to_its_turn(page: Page, served: Served) -> None:
    page.fill("input[name=q]", "walrus")
    page.click("button:has-text('recall')")
    hits = page.locator("tr.hit")
    assert hits.count() >= 1
    shot(page, "05-recall")
    source = page.locator("tr.hit a.source", has_text="work turn 2").first
    source.click()
    assert page.url.endswith("#turn-2")
    turn = page.locator("li#turn-2")
    assert "staging box is called walrus" in turn.inner_text()
    # A fact's provenance leads to its turn too.
    page.goto(f"{served.base}/facts")
    assert "direct_user_statement" in page.inner_text("table.facts")
    shot(page, "06-facts")
    page.click("table.facts a:has-text('work turn 1')")
    assert "kumquat as the release codename" in page.inner_text("li#turn-1")


def test_edit_an_identity_entry_and_see_the_journal_line(page: Page, served: Served) -> None:
    page.goto(f"{served.base}/memory")
    shot(page, "07-memory")
    row = page.locator("table.entries tr", has_text="prefers tea over coffee")
    row.locator("input[name=text]").fill("prefers rooibos over coffee")
    row.locator("button:has-text('save')").click()
    assert "prefers rooibos over coffee" in page.inner_text("table.entries")
    assert "prefers tea over coffee" not in page.inner_text("table.entries")
    page.goto(f"{served.base}/journal")
    first = page.locator("tr.entry").first.inner_text()
    assert "owner" in first
    assert "consolidate" in first
    assert "prefers tea over coffee" in first
    assert "prefers rooibos over coffee" in first
    shot(page, "08-journal")
    # memory.md itself changed, as `tether memory show` would show it.
    assert "- prefers rooibos over coffee" in (served.home / "memory" / "memory.md").read_text()


def test_a_stored_script_and_link_render_inert(page: Page, served: Served) -> None:
    for path in ("/memory", "/sessions/work?page=1", "/recall?q=pwned+click"):
        page.goto(served.base + path)
        assert page.title() != "pwned"
        assert page.locator("a[href*='evil.example']").count() == 0
        assert page.evaluate("document.scripts.length") == 0
        text = page.inner_text("main")
        assert "click me" in text
    page.goto(f"{served.base}/memory")
    body = page.inner_text("main")
    assert SCRIPT in body  # shown as text, exactly
    assert LINK in body
    page.goto(f"{served.base}/sessions/work?page=1")
    assert SCRIPT in page.inner_text("li#turn-5")


def test_other_views_render(page: Page, served: Served) -> None:
    for name, path, needle in [
        ("09-sweep", "/sweep", "alice"),
        ("10-jobs", "/jobs", "Scheduled jobs"),
        ("11-usage", "/usage", "Usage by kind"),
        ("12-secrets", "/scan", "memory.md"),
    ]:
        response = page.goto(served.base + path)
        assert response is not None, path
        assert response.status == 200, path
        assert needle in page.inner_text("main")
        shot(page, name)


def test_a_form_on_another_origin_is_refused(page: Page, served: Served) -> None:
    page.goto(f"{served.base}/memory")
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    row = page.locator("table.entries tr", has_text="writes").first
    eid = row.get_attribute("id")
    evil = (
        f'<form method="post" action="{served.base}/memory/identity/{eid}/edit">'
        f'<input type="hidden" name="csrf" value="{token}">'
        '<input type="hidden" name="text" value="hijacked by another site">'
        '<button id="go">go</button></form>'
    ).encode()
    with serve_page(evil) as url:
        page.goto(url)
        with page.expect_response(lambda r: "/edit" in r.url) as answer:
            page.click("#go")
        assert answer.value.status == 403
    page.goto(f"{served.base}/memory")
    assert "hijacked" not in page.inner_text("main")


def test_promote_remove_and_redact_as_the_cli_would(page: Page, served: Served) -> None:
    page.goto(f"{served.base}/memory")
    assert page.locator("tr#note-3 button").count() == 0  # the untrusted note: no promote
    assert "never promoted" in page.inner_text("tr#note-3")
    page.locator("table.notes tr", has_text="likes green tea").locator("button").click()
    assert "likes green tea" in page.inner_text("table.entries")
    page.locator("table.entries tr", has_text="likes green tea").locator(
        "button:has-text('remove')"
    ).click()
    assert "likes green tea" not in page.inner_text("table.entries")
    page.goto(f"{served.base}/journal")
    actions = [row.split("\t")[3] for row in page.locator("tr.entry").all_inner_texts()[:2]]
    assert actions == ["remove", "add"]
    page.goto(f"{served.base}/scan")
    assert "in clear" in page.inner_text("main")
    page.click("button:has-text('redact them')")
    assert "no secret in durable memory" in page.inner_text("main")
    shot(page, "13-secrets-redacted")
    text = (served.home / "memory" / "memory.md").read_text()
    assert "[REDACTED:" in text
    page.goto(f"{served.base}/journal")
    assert "redact" in page.locator("tr.entry").first.inner_text()
