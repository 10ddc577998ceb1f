"""A viewer in headless Chromium: no write control on the memory list, a memory's page or
the queue; the verify, edit and trash forms posted anyway (with the page's CSRF token)
are refused with 403 and change nothing (docs/teams.md, "Roles")."""

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from minds.models import Role
from minds.services import member_add
from tests.conftest import make_user
from tests.ui.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def viewer(alice, alice_mind):
    user = make_user("vera")
    member_add(mind=alice_mind, user=user, role=Role.VIEWER, actor=alice)
    return user


def test_a_viewer_sees_no_write_control_and_is_refused_when_posting_the_forms(
        page, alice_mind, viewer, remember):
    memory = remember(key="staging_database", content="PostgreSQL 16 on port 5433.")
    base = f"/ui/minds/{alice_mind.id}"
    sign_in(page, "vera")
    page.goto(f"{base}/")
    expect(page.get_by_test_id("mind-role")).to_have_text("viewer")
    expect(page.locator(f'article[data-memory-id="{memory.id}"]')).to_be_visible()
    tabs = page.get_by_role("navigation", name="Mind")
    expect(tabs.get_by_role("link", name="Memories")).to_be_visible()
    for hidden in ("Keys", "Connect", "Settings"):
        expect(tabs.get_by_role("link", name=hidden)).to_have_count(0)
    expect(page.get_by_role("link", name="+ New memory")).to_have_count(0)

    page.goto(f"{base}/memories/{memory.id}")
    expect(page.get_by_test_id("memory-content")).to_contain_text("port 5433")
    for control in ("Verify v1", "Delete"):
        expect(page.get_by_role("button", name=control)).to_have_count(0)
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)

    page.goto(f"{base}/queue")
    expect(page.locator(f'article[data-memory-id="{memory.id}"]')).to_be_visible()
    for control in ("Verify selected", "Move selected to trash", "Verify", "Delete"):
        expect(page.get_by_role("button", name=control, exact=True)).to_have_count(0)
    expect(page.locator('input[type="checkbox"].select')).to_have_count(0)

    # The forms an editor would see, posted by hand with this session's CSRF token.
    token = page.locator('input[name="csrfmiddlewaretoken"]').first.get_attribute("value")
    forms = {
        f"{base}/memories/{memory.id}/verify": {"version": "1"},
        f"{base}/memories/{memory.id}/edit": {"category": "fact", "key": "staging_database",
                                              "content": "Hijacked", "version": "1"},
        f"{base}/memories/{memory.id}/delete": {},
        f"{base}/queue/verify": {"ids": f"{memory.id}:1"},
        f"{base}/queue/trash": {"ids": f"{memory.id}:1"},
    }
    for url, form in forms.items():
        response = page.request.post(url, form={**form, "csrfmiddlewaretoken": token},
                                     headers={"Referer": page.url})
        assert response.status == 403, (url, response.status)
        # The role check refused it (the CSRF check would say something else).
        assert "Your role on this mind (viewer) does not allow this" in response.text(), url
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.content, stored.version, stored.verified, stored.deleted_at) == (
        "PostgreSQL 16 on port 5433.", 1, False, None)
