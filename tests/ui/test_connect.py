"""The "Connect an agent" page in headless Chromium: the owner's snippets carry the live
server's URL, a key created there is filled in once, and nobody else sees the page."""

import json
import re

import pytest
from playwright.sync_api import expect

from minds.models import MindKey
from minds.services import mind_create
from tests.conftest import make_user
from tests.ui.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = re.compile(r"mk_[A-Za-z0-9]{52}")


def test_the_owner_connects_an_agent_with_a_key_shown_once(page, live_server, alice_mind,
                                                           screenshot):
    mcp_url = f"{live_server.url}/mcp"
    sign_in(page)
    page.locator(".mind-card", has_text="Alice's Mind").get_by_role(
        "link", name="Connect an agent").click()
    expect(page.get_by_role("heading", name="Connect an agent")).to_be_visible()
    expect(page.get_by_label("MCP URL")).to_have_value(mcp_url)
    expect(page.locator(".tabs a[aria-current=page]")).to_have_text("Connect")

    # The host picker leads to each host; Cursor's key snippet is there with the real URL.
    page.locator(".host-picker").get_by_role("link", name="Cursor").click()
    cursor = page.locator("#host-cursor")
    expect(cursor).to_be_visible()
    # One host at a time.
    expect(page.locator("#host-claude-desktop")).to_be_hidden()
    expect(page.locator(".host-picker a[aria-current]")).to_have_text("Cursor")
    cursor_config = cursor.locator("[data-variant=mind-key] [data-testid=snippet]").nth(1)
    parsed = json.loads(cursor_config.text_content())
    assert parsed["mcpServers"]["synapse"]["url"] == mcp_url
    assert parsed["mcpServers"]["synapse"]["headers"]["Authorization"] == \
        "Bearer ${env:SYNAPSE_MIND_KEY}"
    assert KEY.findall(page.content()) == []
    screenshot(page, "connect-desktop")

    # The copy button copies the snippet.
    page.locator(".host-picker").get_by_role("link", name="Codex").click()
    expect(cursor).to_be_hidden()
    codex = page.locator("#host-codex [data-variant=mind-key]")
    codex.get_by_role("button", name="Copy").nth(1).click()
    expect(codex.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert f'url = "{mcp_url}"' in copied and 'bearer_token_env_var = "SYNAPSE_MIND_KEY"' in copied

    # A key for a key-based runner: created, then filled into the snippets of this page.
    page.get_by_label("Name").fill("laptop claude desktop")
    page.get_by_role("button", name="Create a key and fill it in").click()
    expect(page.get_by_test_id("new-key")).to_be_visible()
    # Still on the host picked before: Codex, its key snippets filled in.
    expect(page.locator("#host-codex")).to_be_visible()
    expect(page.locator("#host-cursor")).to_be_hidden()
    plaintext = page.get_by_label("New Mind Key").input_value()
    key = MindKey.objects.get(mind=alice_mind)
    assert key.name == "laptop claude desktop" and plaintext.endswith(key.last4)
    desktop = page.locator("#host-claude-desktop [data-variant=mind-key] [data-testid=snippet]")
    config = json.loads(desktop.text_content())
    assert config["mcpServers"]["synapse"]["env"] == {"SYNAPSE_AUTH": f"Bearer {plaintext}"}
    assert config["mcpServers"]["synapse"]["args"][2] == mcp_url
    expect(page.locator("#host-codex [data-variant=mind-key] [data-testid=snippet]").first
           ).to_have_text(f'export SYNAPSE_MIND_KEY="{plaintext}"')
    # OAuth snippets never carry it.
    for snippet in page.locator("[data-variant^=oauth] [data-testid=snippet]").all():
        assert plaintext not in snippet.text_content()
    screenshot(page, "connect-key-desktop")

    # Coming back to the page: the placeholder again, no key anywhere in it.
    page.goto(f"/ui/minds/{alice_mind.id}/connect")
    expect(page.get_by_test_id("key-form")).to_be_visible()
    expect(page.get_by_test_id("new-key")).to_have_count(0)
    html = page.content()
    assert plaintext not in html and KEY.findall(html) == []
    expect(page.locator("#host-codex [data-variant=mind-key] [data-testid=snippet]").first
           ).to_have_text('export SYNAPSE_MIND_KEY="mk_…"')
    assert MindKey.objects.filter(mind=alice_mind).count() == 1


def test_another_user_gets_a_404_for_the_page(page, alice_mind):
    bob = make_user("bob")
    mind_create(owner=bob, name="Bob's Mind")
    sign_in(page, "bob")
    response = page.goto(f"/ui/minds/{alice_mind.id}/connect")
    assert response.status == 404
    expect(page.get_by_label("MCP URL")).to_have_count(0)
    assert not MindKey.objects.filter(mind=alice_mind).exists()
