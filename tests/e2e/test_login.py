import re

from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, login


def test_a_visitor_is_sent_to_the_login_page_and_sees_the_nav_after_logging_in(
    browser, frontier_server
):
    context = browser.new_context(base_url=frontier_server.url)
    page = context.new_page()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    expect(page.get_by_role("navigation", name="Main")).to_have_count(0)

    login(page)

    nav = page.get_by_role("navigation", name="Main")
    for name in ("Runs", "Verifiers", "Task sets"):
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    # Our stylesheet is served and applied.
    assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).display") == "flex"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-after-login.png"))
    context.close()


def test_a_wrong_password_shows_an_error_and_stays_on_the_login_page(browser, frontier_server):
    context = browser.new_context(base_url=frontier_server.url)
    page = context.new_page()
    login_page = page.goto("/login/")
    assert login_page.status == 200
    page.get_by_label("Username").fill("e2e")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_text("didn't match")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/login/"))
    context.close()


def test_logging_out_returns_to_the_login_page(page):
    page.goto("/")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login/"))
    page.goto("/verifiers/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/verifiers/"))


def test_no_page_asks_for_an_icon_that_is_not_there(page):
    """Every page names the site's icon; the API docs, which name none, get it
    from /favicon.ico (a 404 in every console before)."""
    failed = []
    page.on(
        "response",
        lambda response: response.status >= 400 and failed.append((response.status, response.url)),
    )
    for path in ("/runs/", "/verifiers/", "/api/docs"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
    icon = page.request.get("/favicon.ico")
    assert icon.ok and icon.headers["content-type"].startswith("image/svg+xml")
    assert failed == []
