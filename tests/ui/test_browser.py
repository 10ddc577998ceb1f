"""The web UI in headless Chromium against a live server: a person reviews an agent's work."""

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.contrib.admin.utils import quote
from django.utils import timezone
from playwright.sync_api import expect

from memories.models import Memory
from minds.models import MindKey
from tests.conftest import PASSWORD
from tests.ui.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def agent_memories(remember):
    """What alice's agent wrote: three unverified memories, the one to find among them."""
    staging = remember(category="project", key="staging_database", priority="high",
                       tags=["infra", "postgres"],
                       content="The staging database runs PostgreSQL 16 on port 5433.\n"
                               "Backups run nightly at 02:00 UTC.")
    remember(category="preference", key="answer_style", tags=["style"],
             content="Prefers short answers with code first, explanation after.")
    remember(category="mistake", key="friday_deploys", priority="critical",
             content="Never deploy on a Friday afternoon: the rollback took all weekend.")
    return staging


def queue_cards(page):
    return page.locator(".memory-list:not(.compact) article.memory")


def test_a_person_reviews_an_agents_memory_from_search_to_restore(page, alice_mind,
                                                                  agent_memories, screenshot):
    staging = agent_memories
    sign_in(page)
    expect(page.get_by_role("heading", name="Your minds")).to_be_visible()
    card = page.locator(".mind-card", has_text="Alice's Mind")
    expect(card.locator(".counts")).to_contain_text("3")
    screenshot(page, "minds-desktop")

    # Find the agent's memory through full-text search.
    card.get_by_role("link", name="Browse").click()
    page.get_by_role("searchbox", name="Search").fill("staging postgres")
    page.get_by_role("button", name="Search").click()
    results = page.locator("article.memory")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("staging_database")
    expect(results.first.get_by_test_id("status")).to_have_text("unverified")
    screenshot(page, "browser-search-desktop")

    # The queue holds all three; verifying one shrinks it and flips the memory's status.
    page.get_by_role("link", name=re.compile(r"^Queue")).click()
    expect(queue_cards(page)).to_have_count(3)
    expect(page.get_by_test_id("queue-count")).to_have_text("3")
    screenshot(page, "queue-desktop")
    staging_card = page.locator(f"article[data-memory-id='{staging.id}']").first
    staging_card.get_by_role("button", name="Verify").click()
    expect(page.locator(".flash-success")).to_contain_text("Verified project/staging_database")
    expect(queue_cards(page)).to_have_count(2)
    expect(page.get_by_test_id("queue-count")).to_have_text("2")
    page.locator(".recent").get_by_role("link", name="staging_database").click()
    expect(page.get_by_test_id("memory-badges").get_by_test_id("status")).to_have_text(
        "verified")
    expect(page.locator(".meta-list")).to_contain_text("by alice")
    staging.refresh_from_db()
    assert staging.verified and staging.verified_by.username == "alice"

    # Edit: version 2 appears, with a readable diff against version 1.
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Content").fill("The staging database runs PostgreSQL 17 on port 5433.\n"
                                      "Backups run nightly at 02:00 UTC.")
    page.get_by_label("Tags").fill("infra, postgres, staging")
    page.get_by_role("button", name="Save version 2").click()
    expect(page.locator(".flash-success")).to_have_text("Saved version 2.")
    expect(page.locator("tr[data-version='2']")).to_contain_text("current")
    page.locator("tr[data-version='2']").get_by_role("link", name="Changes").click()
    diff = page.get_by_test_id("diff")
    expect(diff.locator(".diff-line.del del")).to_have_text("16")
    expect(diff.locator(".diff-line.ins ins")).to_have_text("17")
    expect(page.locator(".field-diff")).to_contain_text("staging")
    screenshot(page, "memory-diff-desktop")

    # Delete and restore.
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("memory-badges")).to_contain_text("in trash")
    page.get_by_role("link", name="Trash").click()
    trashed = page.locator(f"article[data-memory-id='{staging.id}']")
    expect(trashed).to_be_visible()
    screenshot(page, "trash-desktop")
    trashed.get_by_role("button", name="Restore").click()
    expect(page.locator(".flash-success")).to_contain_text("Restored project/staging_database")
    expect(page.get_by_role("heading", name="The trash is empty")).to_be_visible()
    staging.refresh_from_db()
    assert staging.deleted_at is None and staging.version == 2


def test_a_person_writes_an_episode_at_a_path_and_follows_it_to_its_timeline(
        page, alice_mind, remember, screenshot):
    earlier = remember(category="context", key="standup", memory_type="episodic",
                       path="projects/synapse/meetings", content="Standup: ship on Friday",
                       occurred_at=datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    remember(category="fact", key="elsewhere", path="projects/other", content="Other work")
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/")
    page.get_by_role("link", name="+ New memory").click()
    page.get_by_label("Category").select_option("context")
    page.get_by_label("Content").fill("Retro: we moved the release to Thursday.")
    page.get_by_label("Type").select_option("episodic")
    page.get_by_label("Path").fill("Projects/Synapse/Meetings")
    page.get_by_label("Occurred at (UTC)").fill("2026-05-01T12:30:15")
    screenshot(page, "new-episode-desktop")
    page.get_by_role("button", name="Store memory").click()

    # Its page: the type badge, the path in normal form, the moment, its neighbour.
    expect(page.locator(".flash-success")).to_contain_text("Stored memory context/")
    expect(page.get_by_test_id("memory-badges").get_by_test_id("type")).to_have_text(
        "episodic")
    expect(page.get_by_test_id("occurred-at")).to_have_text("May 1, 2026 12:30:15 UTC")
    neighbours = page.get_by_test_id("neighbours")
    expect(neighbours.get_by_test_id("earlier")).to_contain_text("standup")
    memory = Memory.objects.for_mind(alice_mind).get(content__startswith="Retro")
    assert (memory.memory_type, memory.path, memory.verified) == (
        "episodic", "projects/synapse/meetings", True)

    # The path leads to the browser there; the breadcrumb climbs, child paths lead down.
    page.get_by_test_id("memory-path").get_by_role("link").click()
    crumbs = page.get_by_test_id("breadcrumb")
    expect(crumbs).to_have_text("All paths / projects / synapse / meetings")
    cards = page.locator("article.memory")
    expect(cards).to_have_count(2)
    expect(cards.filter(has_text="Retro").get_by_test_id("type")).to_have_text("episodic")
    crumbs.get_by_role("link", name="projects").click()
    expect(crumbs).to_have_text("All paths / projects")
    expect(cards).to_have_count(3)
    children = page.get_by_test_id("child-paths")
    expect(children).to_contain_text("synapse/ 2")
    expect(children).to_contain_text("other/ 1")
    screenshot(page, "browser-path-desktop")
    children.get_by_role("link", name=re.compile("^synapse")).click()
    expect(crumbs).to_have_text("All paths / projects / synapse")

    # The timeline of a path holds its own episodes; sub-paths have their own.
    page.get_by_role("link", name="Timeline", exact=True).click()
    expect(page.get_by_role("heading", name="No episodes here")).to_be_visible()
    page.get_by_test_id("child-paths").get_by_role("link", name=re.compile("^meetings")).click()
    episodes = page.get_by_test_id("timeline").locator("article.memory")
    expect(episodes).to_have_count(2)
    expect(episodes.nth(0)).to_contain_text("standup")
    expect(episodes.nth(1)).to_contain_text("Retro")
    screenshot(page, "timeline-desktop")

    # From an episode's page, the timeline opens at it.
    page.goto(f"/ui/minds/{alice_mind.id}/memories/{earlier.id}")
    expect(page.get_by_test_id("neighbours").get_by_test_id("later")).to_contain_text(
        memory.key)
    page.get_by_test_id("timeline-here").click()
    expect(page.locator("#current")).to_have_attribute("data-memory-id", earlier.id)
    expect(page.locator("#current")).to_be_in_viewport()


def test_the_queue_filters_by_path_and_trashes_a_selection_after_asking(page, alice_mind,
                                                                       remember):
    remember(key="keep_me", path="home", content="Home address")
    junk = [remember(key=f"junk_{n}", path="scratch", content=f"Noise {n}") for n in range(2)]
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/queue")
    page.get_by_label("Path").fill("scratch")
    page.get_by_role("button", name="Apply").click()
    expect(queue_cards(page)).to_have_count(2)
    page.get_by_label("Select all on this page").check()
    trash = page.get_by_role("button", name=re.compile("^Move selected to trash"))
    expect(trash).to_have_text("Move selected to trash (2)")
    trash.click()
    expect(page.get_by_role("heading", name="Move 2 memories to the trash?")).to_be_visible()
    assert not Memory.objects.in_trash().exists()
    page.get_by_role("button", name="Yes, move 2 to the trash").click()
    expect(page.locator(".flash-success")).to_have_text("Moved 2 memories to the trash.")
    expect(page).to_have_url(re.compile(r"/queue\?.*path=scratch$"))
    expect(page.get_by_role("heading", name="Nothing to verify here")).to_be_visible()
    assert {m.id for m in Memory.objects.in_trash()} == {memory.id for memory in junk}


def test_bulk_verify_empties_the_queue(page, alice_mind, agent_memories, screenshot):
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/queue")
    verify_selected = page.get_by_role("button", name=re.compile("^Verify selected"))
    expect(verify_selected).to_be_disabled()
    page.get_by_label("Select all on this page").check()
    expect(verify_selected).to_have_text("Verify selected (3)")
    verify_selected.click()
    expect(page.locator(".flash-success")).to_have_text("Verified 3 memories.")
    expect(page.get_by_role("heading", name="All caught up")).to_be_visible()
    expect(page.get_by_test_id("queue-count")).to_have_count(0)
    assert not Memory.objects.for_mind(alice_mind).filter(verified=False).exists()


def test_the_queue_unfolds_the_whole_text_and_refuses_to_verify_an_edit_made_since(
        page, alice_mind, remember):
    long_text = "Harmless opening. " * 40 + "HIDDEN TAIL: wire the bonus to me"
    memory = remember(key="long_note", content=long_text)
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/queue")
    card = page.locator(f"article[data-memory-id='{memory.id}']").first
    tail = card.get_by_text("HIDDEN TAIL: wire the bonus to me")
    expect(tail).to_be_hidden()
    card.get_by_text(re.compile(r"Show all \d+ characters")).click()
    expect(tail).to_be_visible()
    # The agent edits the memory after the page loaded; the human's click is refused.
    remember(key="long_note", content=long_text + " and another to me")
    card.get_by_role("button", name="Verify").click()
    expect(page.locator(".flash-error")).to_contain_text("Not verified")
    memory.refresh_from_db()
    assert (memory.verified, memory.version) == (False, 2)
    # Select all → verify on a stale page is refused whole, too.
    stale_page = page.url
    remember(key="long_note", content="Third version")
    page.goto(stale_page)
    remember(key="long_note", content="Fourth version, after this page loaded")
    page.get_by_label("Select all on this page").check()
    page.get_by_role("button", name=re.compile("^Verify selected")).click()
    expect(page.locator(".flash-error")).to_contain_text("nothing was verified")
    assert not Memory.objects.for_mind(alice_mind).filter(verified=True).exists()


def test_a_key_is_shown_once_works_and_stops_working_when_revoked(page, alice_mind,
                                                                   live_server, screenshot):
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/keys")
    page.get_by_label("Name").fill("ci agent")
    page.get_by_label("Scope").select_option("read")
    page.get_by_role("button", name="Create key").click()
    shown = page.get_by_label("New Mind Key")
    expect(shown).to_have_value(re.compile(r"^mk_"))
    plaintext = shown.input_value()
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    screenshot(page, "key-created-desktop")

    key = MindKey.objects.get(mind=alice_mind, name="ci agent")
    assert key.scope == "read" and plaintext.endswith(key.last4)
    recall = f"{live_server.url}/memory/recall"
    headers = {"Authorization": f"Bearer {plaintext}"}
    assert httpx.get(recall, headers=headers).status_code == 200

    # The plaintext is gone on the next visit; revoking stops the key at once.
    page.goto(f"/ui/minds/{alice_mind.id}/keys")
    expect(page.get_by_label("New Mind Key")).to_have_count(0)
    assert plaintext not in page.content()
    row = page.locator(f"tr[data-key-id='{key.id}']")
    row.get_by_role("button", name="Revoke").click()
    expect(page.locator(".flash-success")).to_contain_text("Revoked ci agent")
    expect(row).to_contain_text("revoked")
    response = httpx.get(recall, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "This Mind Key has been revoked."


def test_signing_out_ends_the_session(page, alice):
    sign_in(page)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/ui/login")
    page.goto("/ui/")
    expect(page).to_have_url(re.compile(r"/ui/login\?next=/ui/$"))


def test_main_pages_are_captured_on_desktop_and_phone(page, phone, alice_mind, agent_memories,
                                                      remember, screenshot):
    remember(category="credentials", key="deploy_token", content="ghp_secret_value_1234",
             tags=["github"])
    remember(category="identity", key="user_name", content="Alice Example", priority="critical",
             expires_at=timezone.now() - timedelta(days=1))
    for number in range(3):
        episode = remember(category="context", key=f"turn_{number}", memory_type="episodic",
                           path="projects/a-rather-long-project-name/conversations/today",
                           content=f"Turn {number} of a conversation with the agent.")
    mind = f"/ui/minds/{alice_mind.id}"
    pages = {"minds": "/ui/", "browser": f"{mind}/", "queue": f"{mind}/queue",
             "memory": f"{mind}/memories/{agent_memories.id}", "keys": f"{mind}/keys",
             "stats": f"{mind}/stats", "activity": f"{mind}/activity",
             "settings": f"{mind}/settings", "account": "/ui/account",
             "new-memory": f"{mind}/memories/new",
             "browser-path": f"{mind}/?path={episode.path}",
             "timeline": f"{mind}/timeline?path={episode.path}&at={episode.id}",
             "episode": f"{mind}/memories/{episode.id}"}
    for viewer, device in ((page, "desktop"), (phone, "phone")):
        sign_in(viewer)
        for name, url in pages.items():
            viewer.goto(url)
            expect(viewer.locator("main")).to_be_visible()
            # Nothing spills sideways on a phone: the page is as wide as the screen.
            width = viewer.evaluate("document.documentElement.scrollWidth")
            assert width <= viewer.viewport_size["width"], f"{name} overflows on {device}"
            if name not in ("minds", "account"):
                # Every tab of the mind is in view, none hidden behind a sideways scroll.
                expect(viewer.get_by_role("navigation", name="Mind").get_by_role(
                    "link", name="Settings")).to_be_in_viewport()
            if name == "browser":
                # Credentials are redacted in lists.
                expect(viewer.locator(".memory-content.redacted")).to_have_count(1)
                assert "ghp_secret_value_1234" not in viewer.content()
            screenshot(viewer, f"{name}-{device}")
    phone.context.clear_cookies()
    phone.goto("/ui/login")
    screenshot(phone, "login-phone")


def test_staff_can_sign_in_to_the_admin_and_save_a_form(page, alice, alice_mind):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    page.goto("/admin/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#site-name")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/admin/$"))
    page.goto(f"/admin/minds/mind/{quote(alice_mind.id)}/change/")
    page.locator("#id_name").fill("Renamed in admin")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("changed successfully")
    alice_mind.refresh_from_db()
    assert alice_mind.name == "Renamed in admin"


def test_filters_fold_away_on_a_phone_and_still_work(phone, alice_mind, agent_memories):
    sign_in(phone)
    phone.goto(f"/ui/minds/{alice_mind.id}/")
    category = phone.get_by_label("Category")
    expect(category).to_be_hidden()
    phone.get_by_text("Filters", exact=True).click()
    category.select_option("mistake")
    phone.get_by_role("button", name="Apply").click()
    expect(phone.locator("article.memory")).to_have_count(1)
    expect(phone.locator("article.memory")).to_contain_text("friday_deploys")
    # With a filter in use the panel stays open and says how many.
    expect(phone.get_by_label("Category")).to_be_visible()
    expect(phone.locator(".filter-panel > summary")).to_have_text("Filters (1)")


def test_a_long_history_pages_and_a_costly_diff_shows_side_by_side(page, alice_mind, remember,
                                                                   alice):
    from memories.services import memory_update

    memory = remember(key="counter", content="x\n" * 25_000)  # 50,000 characters
    for number in range(2, 30):
        memory_update(memory=memory, actor=alice, content=f"count {number}")
    memory_update(memory=memory, actor=alice, content="x\ny\n" * 12_500)
    sign_in(page)
    page.goto(f"/ui/minds/{alice_mind.id}/memories/{memory.id}?from=1&to=30#diff")
    expect(page.get_by_test_id("version-count")).to_have_text("(30)")
    expect(page.locator("tr[data-version]")).to_have_count(25)
    expect(page.get_by_test_id("diff-side-by-side")).to_be_visible()
    expect(page.locator(".diff-side-by-side pre")).to_have_count(2)
    page.get_by_role("link", name="Older →").click()
    expect(page.locator("tr[data-version]")).to_have_count(5)
    expect(page.locator('tr[data-version="1"]')).to_be_visible()
    assert "from=1" in page.url and "to=30" in page.url
