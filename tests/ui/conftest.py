"""Browser fixtures: headless Debian Chromium driven by Playwright, against live_server."""

import os
from pathlib import Path

import pytest

from tests.conftest import PASSWORD

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "screenshots"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 375, "height": 812}


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module. Playwright's sync API keeps an event loop running in
    this thread while it is open, so it must not outlive the browser tests: pytest-django
    runs the database-free tests (which start event loops of their own) after them, and
    `check --deploy` in a subprocess would inherit the async-unsafe switch below."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make system-deps)")
    from playwright.sync_api import sync_playwright

    # With that loop running, Django would refuse the ORM calls the test itself makes
    # (fixtures, assertions) as async-unsafe.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync"])
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def generous_sign_in(settings):
    """Browser tests sign in many times a minute from one address; the sign-in rate limit
    is tested on its own (tests/minds/test_views.py)."""
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login": "1000/min", "login_username": "1000/min"}}


@pytest.fixture
def page(browser, live_server, generous_sign_in):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url,
                                  permissions=["clipboard-read", "clipboard-write"])
    context.set_default_timeout(10_000)
    page = context.new_page()
    # Confirmation dialogs (revoke, revert) are answered yes.
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


@pytest.fixture
def phone(browser, live_server, generous_sign_in):
    context = browser.new_context(viewport=PHONE, base_url=live_server.url,
                                  device_scale_factor=2, is_mobile=True, has_touch=True)
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


def sign_in(page, username: str = "alice", password: str = PASSWORD) -> None:
    page.goto("/ui/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/")


@pytest.fixture
def screenshot():
    """Save a full-page screenshot to tests/screenshots/<name>.png (ignored by git)."""
    SCREENSHOTS.mkdir(exist_ok=True)

    def _shoot(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return _shoot
