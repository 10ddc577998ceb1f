"""A team in headless Chromium: an owner invites a colleague by e-mail (a real SMTP server),
the colleague creates an account from the link and joins as editor, verifies an agent's
memory, and the owner's Activity page names them."""

import re

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from minds.models import Membership
from tests.conftest import PASSWORD
from tests.ui.conftest import DESKTOP, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LINK = re.compile(r"(https?://\S+/ui/invitations/inv_\w+)")


@pytest.fixture
def closed_registration(settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "ALLOW_REGISTRATION": False}


def test_an_invited_colleague_joins_from_the_link_and_verifies_as_editor(
        page, browser, live_server, smtp, closed_registration, alice_mind, remember,
        screenshot):
    memory = remember(category="project", key="staging_database",
                      content="The staging database runs PostgreSQL 16 on port 5433.")

    # The owner invites dana by e-mail from the mind's Members page.
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/members")
    page.get_by_label("Username or e-mail address").fill("dana@example.com")
    page.get_by_label("Role", exact=True).select_option("editor")
    page.get_by_role("button", name="Invite").click()
    expect(page.get_by_test_id("invitation-link")).to_contain_text("on its way by e-mail")
    expect(page.get_by_test_id("invitations")).to_contain_text("dana@example.com")
    screenshot(page, "members-desktop")
    assert len(smtp.messages) == 1 and smtp.messages[0][0] == ["dana@example.com"]
    link = LINK.search(smtp.bodies()[0]).group(1)
    assert link.startswith(live_server.url)

    # dana opens the link in her own browser and creates an account, which joins her.
    colleague_context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    colleague_context.set_default_timeout(10_000)
    colleague = colleague_context.new_page()
    colleague.on("dialog", lambda dialog: dialog.accept())
    try:
        colleague.goto(link)
        expect(colleague.get_by_role("heading", name="Join “Alice's Mind”")).to_be_visible()
        expect(colleague.get_by_test_id("invitation-role")).to_have_text("editor")
        screenshot(colleague, "invitation-desktop")
        colleague.get_by_label("Username").fill("dana")
        colleague.get_by_label("Password", exact=True).fill(PASSWORD)
        colleague.get_by_label("Password again").fill(PASSWORD)
        colleague.get_by_role("button", name="Create account and join").click()
        expect(colleague.locator(".flash-success")).to_contain_text(
            "Welcome, dana: you joined Alice's Mind as editor.")

        # As editor she verifies the agent's memory from the queue.
        colleague.get_by_role("link", name=re.compile(r"^Queue")).click()
        card = colleague.locator(f"article[data-memory-id='{memory.id}']").first
        card.get_by_role("button", name="Verify").click()
        expect(colleague.locator(".flash-success")).to_contain_text(
            "Verified project/staging_database")
        # Her minds list shows the shared mind with her role.
        colleague.goto("/ui/")
        shared = colleague.locator(".mind-card", has_text="Alice's Mind")
        expect(shared.get_by_test_id("role")).to_have_text("editor")
        expect(shared.get_by_role("button", name="Leave")).to_be_visible()
    finally:
        colleague_context.close()

    memory.refresh_from_db()
    assert memory.verified and memory.verified_by.username == "dana"
    assert Membership.objects.get(mind=alice_mind, user__username="dana").role == "editor"
    assert Memory.objects.get(pk=memory.pk).verified

    # The owner's Activity page names her on that verification.
    page.goto(f"/ui/minds/{alice_mind.id}/activity")
    verification = page.get_by_test_id("mind-activity").locator("li[data-action='verify']")
    expect(verification).to_have_count(1)
    expect(verification.locator(".who")).to_have_text("dana")
    expect(page.get_by_test_id("mind-activity").locator(
        "li[data-action='member_add'] .who")).to_have_text("dana")
    page.goto(f"/ui/minds/{alice_mind.id}/members")
    expect(page.locator("tr[data-member='dana']")).to_be_visible()
    screenshot(page, "members-after-desktop")
